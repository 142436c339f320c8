//! The compatibility promise (`wit/README.md`, "Versioning"), checked on every CI run: each
//! released contract is frozen under `wit/released/<version>/`, and the static driver built
//! against it in Rust (a committed binary), Python and JavaScript (committed sources, rebuilt
//! here with their pinned tools) loads in today's host and passes conformance. A host change
//! that breaks a released driver fails here.

mod common;

use std::path::{Path, PathBuf};

use common::conformance::{conformance, with_status};
use sha2::{Digest, Sha256};

/// The released contract versions, oldest first. A new release adds its version here, its frozen
/// WIT under `wit/released/` and its golden set under `tests/golden/`; none is ever removed
/// before the promise's window has passed.
const RELEASED: &[&str] = &["0.2.0", "0.2.1", "0.2.2"];

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The version of the `package wasm-ccm:provider@X.Y.Z;` line of a WIT file.
fn package_version(wit: &Path) -> String {
    wasm_ccm_test_tools::contract::version_of(wit).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_released_contract_is_frozen_and_loaded_by_this_host() {
    let mut on_disk: Vec<String> = std::fs::read_dir(repo("wit/released"))
        .expect("wit/released exists")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    assert_eq!(on_disk, RELEASED, "wit/released/ and RELEASED disagree");

    let current = package_version(&repo("wit/provider.wit"));
    for version in RELEASED {
        let frozen = repo(&format!("wit/released/{version}/provider.wit"));
        assert_eq!(&package_version(&frozen), version, "{}", frozen.display());
        // While wit/ carries a released version it is that release, byte for byte: a change to
        // the contract must start a new version first.
        if &current == version {
            assert!(
                read(&repo("wit/provider.wit")) == read(&frozen),
                "wit/provider.wit says {version}, which is released and frozen, but differs from \
                 wit/released/{version}/provider.wit: start a new version (wit/README.md, \
                 \"Versioning\") instead of changing a released one"
            );
        }
        let minor = version.rsplit_once('.').expect("x.y.z").0;
        assert!(
            wasm_ccm_runtime::SUPPORTED_VERSIONS.contains(&minor),
            "this host no longer loads released contract {version}"
        );
        for golden in ["static-rust.wasm", "python-static", "js-static"] {
            let path = repo(&format!("tests/golden/{version}/{golden}"));
            assert!(path.exists(), "{} is missing", path.display());
        }
    }
}

#[test]
fn the_golden_rust_driver_is_the_released_binary() {
    for version in RELEASED {
        let dir = repo(&format!("tests/golden/{version}"));
        let recorded =
            String::from_utf8(read(&dir.join("static-rust.wasm.sha256"))).expect("utf-8");
        let recorded = recorded.split_whitespace().next().expect("a digest");
        let actual = hex::encode(Sha256::digest(read(&dir.join("static-rust.wasm"))));
        assert_eq!(
            actual, recorded,
            "tests/golden/{version}/static-rust.wasm is not the released binary: golden drivers \
             are never rebuilt or edited"
        );
    }
}

/// The released driver loads in today's host and conforms at the full level. Checks added to
/// conformance after the release may skip, never fail: a failure means the host broke a driver
/// the promise covers (or a new check is stricter than the released contract).
fn assert_golden_conforms(language: &str, wasm: &Path, version: &str) {
    let scenario = repo(&format!("tests/golden/{version}/conformance.yaml"));
    let (out, report) = conformance(wasm.to_str().expect("a UTF-8 path"), &scenario, &[]);
    assert!(
        out.status.success() && report["summary"]["failed"] == 0,
        "the {language} static driver released with {version} no longer conforms: {:?}\n{}",
        with_status(&report, "fail"),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report["level"], "full", "{language} {version}: {report}");
    assert_eq!(
        report["wit_version"], *version,
        "{language} {version}: the golden driver implements another version"
    );
    let passed = with_status(&report, "pass");
    // At release, the scenario passed 57 checks in each language; far fewer means a baseline
    // failure skipped whole families.
    assert!(
        passed.len() > 50,
        "{language} {version}: only {} checks passed: {passed:?}",
        passed.len()
    );
}

#[test]
fn the_golden_rust_static_driver_conforms() {
    for version in RELEASED {
        let wasm = repo(&format!("tests/golden/{version}/static-rust.wasm"));
        assert_golden_conforms("Rust", &wasm, version);
    }
}

#[test]
fn the_golden_python_static_driver_conforms() {
    for version in RELEASED {
        let wasm = wasm_ccm_test_tools::polyglot::golden_python_static(version)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_golden_conforms("Python", &wasm, version);
    }
}

#[test]
fn the_golden_javascript_static_driver_conforms() {
    for version in RELEASED {
        let wasm = wasm_ccm_test_tools::polyglot::golden_js_static(version)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_golden_conforms("JavaScript", &wasm, version);
    }
}
