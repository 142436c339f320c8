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

/// `wasm-ccm-dev scale` with `args`, the product binary from this build; its output. The work
/// directory it keeps after a failure is made in a temporary directory removed afterwards.
fn scale(args: &[&str]) -> std::process::Output {
    let cache = tempfile::tempdir().expect("tempdir");
    Command::new(env!("CARGO_BIN_EXE_wasm-ccm-dev"))
        .env(
            "WASM_CCM_BIN",
            wasm_ccm_test_tools::product::product_binary(),
        )
        .env("TMPDIR", cache.path())
        .args(["--cache-dir", &cache.path().display().to_string(), "scale"])
        .args(args)
        .output()
        .expect("run wasm-ccm-dev scale")
}

/// A seed the simulator refuses (more LoadBalancer Services than the NodePort range has ports,
/// 30000-32767): the simulator exits, and `scale` says so at once with the simulator's own
/// reason, not after waiting for it to be ready.
#[test]
fn a_seed_the_simulator_refuses_is_reported_with_its_reason() {
    let output = scale(&["--nodes", "1", "--services", "3000", "--json"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("the Kubernetes API simulator (`wasm-ccm-dev sim kube`) exited"),
        "{stderr}"
    );
    // The simulator's reason, quoted from its stderr.
    assert!(stderr.contains("range is full"), "{stderr}");
    assert!(!stderr.contains("not ready"), "{stderr}");
}

/// `--memory-limit` reaches the driver: at 1 MiB, less than the static driver's own initial
/// memory, `run` cannot start it and exits; `scale` quotes why. (The default, 64 MiB, serves
/// the small cluster of `a_small_cluster_converges_and_then_writes_nothing`.)
#[test]
fn the_memory_limit_is_passed_to_the_driver() {
    let output = scale(&[
        "--nodes",
        "3",
        "--services",
        "0",
        "--memory-limit",
        "1Mi",
        "--timeout",
        "180s",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("run` exited") && stderr.contains("before the cluster converged"),
        "{stderr}"
    );
    // wasmtime's words: the driver's initial memory (17 pages) is above the 1 MiB limit.
    assert!(
        stderr.contains("exceeds memory limits"),
        "the driver met the limit: {stderr}"
    );
}
