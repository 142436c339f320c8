//! Every manifest an operator applies, validated offline against the OpenAPI schemas of each
//! Kubernetes version the manifests support, by the pinned `kubernetes-validate` from PyPI
//! (`tests/tools/pins/kubernetes-validate.txt`), strict: a field the schema does not know is an
//! error. That is the release files of `deploy/release/` (which `tests/release.rs` holds equal to
//! fresh renders of the kustomizations) and the example Secrets of the overlays.
//!
//! The Prometheus Operator's kinds (PodMonitor, PrometheusRule) are custom resources: no
//! Kubernetes schema has them, so they are skipped here by name and their shape is checked by
//! `tests/monitoring.rs` instead.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use wasm_ccm_deploy_tests::release::{self, REGENERATE};
use wasm_ccm_deploy_tests::{Object, objects, overlay_names, overlays_dir};

/// The Kubernetes minor versions the manifests are validated for (deploy/README.md says the
/// same). The pinned kubernetes-validate 1.37.0 ships schemas for 1.25 to 1.37.
const KUBERNETES_VERSIONS: &[&str] = &["1.32", "1.33", "1.34", "1.35", "1.36", "1.37"];

/// Custom resources of the Prometheus Operator: not in any Kubernetes schema, so
/// kubernetes-validate only warns that it has none. Skipped here, checked in monitoring.rs.
const CUSTOM_KINDS: &[(&str, &str)] = &[
    ("monitoring.coreos.com/v1", "PodMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
];

/// What one run of kubernetes-validate said.
struct Outcome {
    success: bool,
    /// (file, `kind/name` as it prints it, version) of every object that passed.
    passed: BTreeMap<(String, String, String), usize>,
    /// Every line that is not a pass.
    other: Vec<String>,
}

fn validate(files: &[PathBuf]) -> Outcome {
    let program =
        wasm_ccm_test_tools::kubernetes_validate::pinned().unwrap_or_else(|e| panic!("{e}"));
    let mut command = Command::new(&program);
    command.arg("--strict");
    for v in KUBERNETES_VERSIONS {
        command.args(["-k", v]);
    }
    command.args(files);
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
    let mut passed = BTreeMap::new();
    let mut other = Vec::new();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for line in stdout.lines().chain(stderr.lines()) {
        // INFO <file> passed for resource <kind>/<name> against version <v>
        let parsed = line.strip_prefix("INFO ").and_then(|rest| {
            let (file, rest) = rest.split_once(" passed for resource ")?;
            let (object, version) = rest.split_once(" against version ")?;
            Some((file.to_string(), object.to_string(), version.to_string()))
        });
        match parsed {
            Some(key) => *passed.entry(key).or_insert(0) += 1,
            None if line.trim().is_empty() => {}
            None => other.push(line.to_string()),
        }
    }
    Outcome {
        success: out.status.success(),
        passed,
        other,
    }
}

fn is_custom(o: &Object) -> bool {
    CUSTOM_KINDS
        .iter()
        .any(|(api, kind)| o.api_version == *api && o.kind == *kind)
}

/// The files to validate and the objects in each.
fn manifests() -> Vec<(PathBuf, Vec<Object>)> {
    let mut files: Vec<PathBuf> = release::sources()
        .unwrap()
        .iter()
        .map(release::Source::path)
        .collect();
    for overlay in overlay_names().unwrap() {
        files.push(overlays_dir().join(overlay).join("secret.example.yaml"));
    }
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
                panic!("cannot read {} ({e}); run `{REGENERATE}`", path.display())
            });
            let objects = objects(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path, objects)
        })
        .collect()
}

#[test]
fn every_manifest_validates_strictly_against_each_supported_kubernetes_version() {
    let manifests = manifests();
    let files: Vec<PathBuf> = manifests.iter().map(|(p, _)| p.clone()).collect();
    let outcome = validate(&files);
    let mut problems = Vec::new();
    for line in &outcome.other {
        // The one expected complaint: no schema for a custom kind this test skips.
        let custom = CUSTOM_KINDS.iter().any(|(api, kind)| {
            line.starts_with("WARN ")
                && line.contains(&format!(
                    "Couldn't find schema for kind {kind} with api version {api} "
                ))
        });
        if !custom {
            problems.push(line.clone());
        }
    }
    let mut wanted: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    for (path, objects) in &manifests {
        for o in objects.iter().filter(|o| !is_custom(o)) {
            for v in KUBERNETES_VERSIONS {
                let key = (
                    path.display().to_string(),
                    format!("{}/{}", o.kind.to_ascii_lowercase(), o.name),
                    v.to_string(),
                );
                *wanted.entry(key).or_insert(0) += 1;
            }
        }
    }
    for (key, n) in &wanted {
        let got = outcome.passed.get(key).copied().unwrap_or(0);
        if got != *n {
            problems.push(format!(
                "{} {} against Kubernetes {}: {got} pass(es), want {n}",
                key.0, key.1, key.2
            ));
        }
    }
    for key in outcome.passed.keys().filter(|k| !wanted.contains_key(*k)) {
        problems.push(format!("unexpected pass: {key:?}"));
    }
    assert!(
        outcome.success && problems.is_empty(),
        "kubernetes-validate --strict (Kubernetes {}) does not accept every manifest (exit {}):\n{}\n\
         Fix the kustomization (a field the schema of a supported version lacks must go), then run `{REGENERATE}`.",
        KUBERNETES_VERSIONS.join(", "),
        if outcome.success {
            "success"
        } else {
            "failure"
        },
        problems.join("\n")
    );
}

#[test]
fn the_validator_refuses_an_unknown_field_and_an_unknown_kind() {
    // The check above relies on strict mode failing on a typo and on a kind without schema
    // being reported; this shows both with the pinned program and the same flags.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: x, namespace: kube-system}\n\
         spec:\n  maxUnavailable: 1\n  selectr: {matchLabels: {a: b}}\n---\n\
         apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: y}\n",
    )
    .unwrap();
    let outcome = validate(std::slice::from_ref(&path));
    assert!(!outcome.success, "a typo must fail: {:?}", outcome.other);
    let shown = path.display().to_string();
    let says = |needle: &str| {
        outcome
            .other
            .iter()
            .any(|l| l.contains(&shown) && l.contains(needle))
    };
    assert!(
        says("selectr"),
        "the error names the field: {:?}",
        outcome.other
    );
    assert!(
        says("Couldn't find schema for kind Widget"),
        "an unknown kind is reported: {:?}",
        outcome.other
    );
    assert!(outcome.passed.is_empty(), "{:?}", outcome.passed.keys());
}
