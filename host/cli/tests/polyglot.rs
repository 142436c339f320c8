//! Drivers in other languages: the static reference driver written in Python (componentize-py)
//! and in JavaScript (jco / componentize-js), built by the test command with pinned tools from
//! PyPI and npm, pass `wasm-ccm conformance` exactly as the Rust static driver does.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn scenario() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins/static/conformance.yaml")
}

/// The JSON report of `wasm-ccm conformance plugin` on the static scenario.
fn conformance(plugin: &Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_wasm-ccm"))
        .env("WASM_CCM_LOG", "error")
        .arg("conformance")
        .arg(plugin)
        .arg("--scenario")
        .arg(scenario())
        .args(["--report", "json"])
        .output()
        .expect("runs");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(
        out.status.success(),
        "{} is not conformant: {}\n{}",
        plugin.display(),
        ids(&report, "fail")
            .into_iter()
            .collect::<Vec<_>>()
            .join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
    report
}

/// `id [subject]` of every result with `status`.
fn ids(report: &Value, status: &str) -> BTreeSet<String> {
    report["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["status"] == status)
        .map(|r| {
            format!(
                "{} [{}]",
                r["id"].as_str().unwrap_or_default(),
                r["subject"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// Conformance of `plugin` equals the Rust static driver's: the same checks pass, the same are
/// skipped, none fails, at the same level.
fn assert_same_level_as_rust(language: &str, plugin: &Path) {
    let rust = conformance(Path::new(wasm_ccm_plugins::STATIC_DRIVER));
    let other = conformance(plugin);
    assert_eq!(
        other["summary"]["failed"], 0,
        "{language}: {}",
        other["summary"]
    );
    assert_eq!(other["level"], rust["level"], "{language}: level");
    assert_eq!(
        ids(&other, "pass"),
        ids(&rust, "pass"),
        "{language}: passed checks differ from Rust's"
    );
    assert_eq!(
        ids(&other, "skip"),
        ids(&rust, "skip"),
        "{language}: skipped checks differ from Rust's"
    );
    assert!(
        ids(&rust, "pass").len() > 50,
        "the scenario runs its checks"
    );
}

#[test]
fn the_python_static_driver_conforms_like_the_rust_one() {
    let plugin = wasm_ccm_test_tools::polyglot::python_static().unwrap_or_else(|e| panic!("{e}"));
    assert_same_level_as_rust("Python", &plugin);
}

#[test]
fn the_javascript_static_driver_conforms_like_the_rust_one() {
    let plugin = wasm_ccm_test_tools::polyglot::js_static().unwrap_or_else(|e| panic!("{e}"));
    assert_same_level_as_rust("JavaScript", &plugin);
}

/// Every file under `dir`, as (path relative to `dir`, contents).
fn tree(dir: &Path) -> BTreeSet<(PathBuf, Vec<u8>)> {
    let mut out = BTreeSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d)
            .expect("readable")
            .map(|e| e.expect("entry"))
        {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(dir).expect("inside").to_path_buf();
                out.insert((relative, std::fs::read(&path).expect("readable")));
            }
        }
    }
    out
}

#[test]
fn the_javascript_typings_match_the_wit_and_compile() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let jco = wasm_ccm_test_tools::polyglot::js_tool("jco").unwrap_or_else(|e| panic!("{e}"));
    let fresh = tempfile::tempdir().expect("tempdir");
    let out = Command::new(&jco)
        .current_dir(&repo)
        .args(["guest-types", "wit", "-n", "full-driver", "-q", "-o"])
        .arg(fresh.path())
        .output()
        .expect("jco runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        tree(fresh.path()) == tree(&repo.join("sdk/js/types")),
        "sdk/js/types is stale: run `jco guest-types wit -n full-driver -o sdk/js/types` (with the pinned jco of sdk/js/tools)"
    );
    let tsc = wasm_ccm_test_tools::polyglot::js_tool("tsc").unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(tsc)
        .current_dir(repo.join("sdk/js"))
        .args([
            "--noEmit", "--strict", "--target", "es2022", "--module", "es2022",
        ])
        .args(["--moduleResolution", "bundler", "index.d.ts"])
        .output()
        .expect("tsc runs");
    assert!(
        out.status.success(),
        "sdk/js/index.d.ts does not compile:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
