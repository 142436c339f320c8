//! `wasm-ccm-dev scale` end to end at a small size: the simulator in its own process, the product
//! binary with the static driver. The figures belong in BENCHMARKS.md; what is asserted here is
//! what must hold at any size: everything converges, the driver was called and given nodes, and
//! the steady state after convergence writes nothing to Kubernetes.

use std::process::Command;

use serde_json::Value;

#[test]
fn a_small_cluster_converges_and_then_writes_nothing() {
    let cache = tempfile::tempdir().expect("tempdir");
    let output = Command::new(env!("CARGO_BIN_EXE_wasm-ccm-dev"))
        .env(
            "WASM_CCM_BIN",
            wasm_ccm_test_tools::product::product_binary(),
        )
        .args([
            "--cache-dir",
            &cache.path().display().to_string(),
            "scale",
            "--nodes",
            "30",
            "--services",
            "6",
            "--quiet",
            "2s",
            // A bound for a loaded machine, not an expected time.
            "--timeout",
            "180s",
            "--json",
        ])
        .output()
        .expect("run wasm-ccm-dev scale");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "scale failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    let number = |key: &str| {
        report[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key} missing in {report}"))
    };
    assert_eq!(number("nodes"), 30.0);
    assert_eq!(number("services"), 6.0);
    // 30 initialisations and 6 ensures at least; each ensure lowers the 30 nodes.
    assert!(number("driver_calls") >= 36.0, "{report}");
    // Each of the 6 ensures lowers 30 nodes of more than 40 bytes each (name, provider ID,
    // addresses, labels), so the count cannot be the calls' scalars alone.
    assert!(number("lowered_bytes") > 6.0 * 30.0 * 40.0, "{report}");
    // At least one write per node and per Service (taint removal, status).
    assert!(number("kube_writes") >= 36.0, "{report}");
    assert_eq!(
        number("writes_in_quiet"),
        0.0,
        "the steady state wrote: {report}"
    );
    assert!(number("run_peak_rss_mib_at_converge") > 0.0, "{report}");
}
