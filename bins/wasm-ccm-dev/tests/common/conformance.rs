//! `wasm-ccm-dev conformance` as a test runs it: the real binary, a JSON report, the results by
//! status. Shared by the conformance and golden-driver tests.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

/// `wasm-ccm-dev` with a quiet log.
pub(crate) fn wasm_ccm() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_wasm-ccm-dev"));
    // Conformance compiles without the cache; the log stays quiet unless something is wrong.
    c.env("WASM_CCM_LOG", "error");
    c
}

/// Runs conformance with a JSON report; returns the process output and the parsed report.
pub(crate) fn conformance(wasm: &str, scenario: &Path, extra: &[&str]) -> (Output, Value) {
    let out = wasm_ccm()
        .args(["conformance", wasm, "--scenario"])
        .arg(scenario)
        .args(["--report", "json"])
        // Compile speed is a benchmark (BENCHMARKS.md), not a test: the default 30 s limit is a
        // wall-clock bound a loaded machine can miss. Tests of the limit pass their own.
        .args(if extra.contains(&"--max-compile-time") {
            &[][..]
        } else {
            &["--max-compile-time", "10m"][..]
        })
        .args(extra)
        .output()
        .expect("runs");
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}); stdout: {}; stderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, report)
}

/// `id [subject]` of every result with `status`.
pub(crate) fn with_status(report: &Value, status: &str) -> BTreeSet<String> {
    report["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["status"] == status)
        .map(|r| match r["subject"].as_str() {
            Some(s) => format!("{} [{s}]", r["id"].as_str().unwrap_or_default()),
            None => r["id"].as_str().unwrap_or_default().to_string(),
        })
        .collect()
}
