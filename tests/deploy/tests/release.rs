//! `deploy/release/`: one rendered YAML per overlay and one for monitoring, for
//! `kubectl apply -f`. Each must be exactly what the pinned kubectl renders from its
//! kustomization now, under the header `render-release` writes; none is edited by hand, none is
//! left over from a kustomization that is gone, and each installs the image and the drivers of
//! this version and names the driver contract of wit/provider.wit in its header.

use std::collections::BTreeSet;

use wasm_ccm_deploy_tests::release::{self, REGENERATE, VERSION};
use wasm_ccm_deploy_tests::{objects, release_dir};

/// The first line where `found` and `wanted` differ, for the message.
fn first_difference(found: &str, wanted: &str) -> String {
    let (f, w): (Vec<&str>, Vec<&str>) = (found.lines().collect(), wanted.lines().collect());
    for i in 0..f.len().max(w.len()) {
        let (a, b) = (f.get(i), w.get(i));
        if a != b {
            return format!(
                "line {}: the file has {:?}, a fresh render has {:?}",
                i + 1,
                a.copied().unwrap_or("<end of file>"),
                b.copied().unwrap_or("<end of file>")
            );
        }
    }
    "they differ in line endings only".to_string()
}

#[test]
fn every_release_file_equals_a_fresh_render_of_its_kustomization() {
    let kubectl = wasm_ccm_test_tools::kubectl::pinned().unwrap_or_else(|e| panic!("{e}"));
    let version = wasm_ccm_test_tools::kubectl::VERSION;
    let sources = release::sources().unwrap();
    let mut failures = Vec::new();
    for source in &sources {
        let wanted = release::render(&kubectl, version, source).unwrap_or_else(|e| panic!("{e}"));
        match std::fs::read_to_string(source.path()) {
            Err(e) => failures.push(format!(
                "{} cannot be read ({e}); it is rendered from {}",
                release::shown_path(source),
                source.shown
            )),
            Ok(found) if found != wanted => failures.push(format!(
                "{} is not what `kubectl kustomize {}` renders now ({})",
                release::shown_path(source),
                source.shown,
                first_difference(&found, &wanted)
            )),
            Ok(_) => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{}\nThe release files are generated, never edited by hand: run `{REGENERATE}` and commit deploy/release/.",
        failures.join("\n")
    );
}

#[test]
fn the_release_directory_holds_only_generated_files() {
    let wanted: BTreeSet<String> = release::sources()
        .unwrap()
        .into_iter()
        .map(|s| s.file)
        .collect();
    let dir = release_dir();
    let found: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}; run `{REGENERATE}`", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let stray: Vec<&String> = found.difference(&wanted).collect();
    assert!(
        stray.is_empty(),
        "deploy/release/ holds files no kustomization renders: {stray:?}; run `{REGENERATE}` (it removes them)"
    );
    let missing: Vec<&String> = wanted.difference(&found).collect();
    assert!(
        missing.is_empty(),
        "deploy/release/ lacks {missing:?}; run `{REGENERATE}`"
    );
}

/// The driver references (`--driver=oci://…`) of a container's arguments.
fn oci_drivers(container: &serde_json::Value) -> Vec<String> {
    let args = container["args"].as_array().cloned().unwrap_or_default();
    let command = container["command"].as_array().cloned().unwrap_or_default();
    command
        .iter()
        .chain(&args)
        .filter_map(|a| a.as_str())
        .filter_map(|a| a.strip_prefix("--driver=").or(a.strip_prefix("--plugin=")))
        .filter(|r| r.starts_with("oci://"))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_release_installs_the_image_of_this_version() {
    let contract = wasm_ccm_test_tools::contract::qualified().unwrap_or_else(|e| panic!("{e}"));
    let mut oci_drivers_seen = 0;
    for source in release::sources().unwrap() {
        let Ok(text) = std::fs::read_to_string(source.path()) else {
            panic!(
                "{} is missing; run `{REGENERATE}`",
                release::shown_path(&source)
            );
        };
        let start = release::header_start(&contract);
        assert!(
            text.starts_with(&start),
            "{}: the header does not start {start:?} (wasm-ccm {VERSION}, the workspace version, \
             and the driver contract of wit/provider.wit); run `{REGENERATE}`. It starts {:?}",
            release::shown_path(&source),
            text.lines().next().unwrap_or_default()
        );
        for o in objects(&text).unwrap() {
            let containers = o.json["spec"]["template"]["spec"]["containers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for c in containers {
                // The shipped drivers are released with the host, under the same version.
                for driver in oci_drivers(&c) {
                    oci_drivers_seen += 1;
                    if let Some(rest) = driver.strip_prefix("oci://ghcr.io/wasm-ccm/drivers/") {
                        let tag = rest.rsplit_once(':').map(|(_, t)| t).unwrap_or_default();
                        assert_eq!(
                            tag,
                            VERSION,
                            "{}: {} pulls {driver}, not the driver of wasm-ccm {VERSION}; change \
                             the tag in its overlay's deployment-patch.yaml, then run `{REGENERATE}`",
                            release::shown_path(&source),
                            o.id()
                        );
                    }
                }
                let image = c["image"].as_str().unwrap_or_default();
                assert_eq!(
                    image,
                    format!("ghcr.io/wasm-ccm/wasm-ccm:{VERSION}"),
                    "{}: {} runs {image}, not the image of wasm-ccm {VERSION} (the workspace version); \
                     change the tag in deploy/base/deployment.yaml, then run `{REGENERATE}`",
                    release::shown_path(&source),
                    o.id()
                );
            }
        }
    }
    assert!(
        oci_drivers_seen > 0,
        "no release file pulls a driver from oci://: the OCI overlays' --driver flags were not found"
    );
}
