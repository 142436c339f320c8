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

/// A seed the simulator refuses (more LoadBalancer Services than its NodePort range has ports,
/// here a range of ten): the simulator exits, and `scale` says so at once with the simulator's
/// first error, worded as the apiserver's (`failed to allocate a nodePort: range is full`) and
/// naming the first Service that did not fit, not after waiting for it to be ready.
#[test]
fn a_seed_the_simulator_refuses_is_reported_with_its_first_error() {
    let output = scale(&[
        "--nodes",
        "1",
        "--services",
        "12",
        "--service-node-port-range",
        "30000-30009",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("the Kubernetes API simulator (`wasm-ccm-dev sim kube`) exited"),
        "{stderr}"
    );
    // The first refusal, quoted from the simulator's stderr: object 12 of the seed (after
    // the node and ten Services) is the eleventh Service.
    assert!(stderr.contains("seed object 12 (svc-00010)"), "{stderr}");
    assert!(
        stderr.contains("Internal error occurred: failed to allocate a nodePort: range is full"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("svc-00011"),
        "only the first error: {stderr}"
    );
    // And what to do about it.
    assert!(
        stderr.contains("the NodePort range 30000-30009 has 10: pass --node-ports=false"),
        "{stderr}"
    );
    assert!(!stderr.contains("not ready"), "{stderr}");
}

/// `--node-ports=false` seeds the Services with `allocateLoadBalancerNodePorts: false`, so
/// more of them than the NodePort range has ports converge (the refusal above is the positive
/// control: the same range and count with node ports is refused).
#[test]
fn services_without_node_ports_outnumber_the_node_port_range() {
    let output = scale(&[
        "--nodes",
        "3",
        "--services",
        "12",
        "--service-node-port-range",
        "30000-30009",
        "--node-ports=false",
        "--quiet",
        "1s",
        // A bound for a loaded machine, not an expected time.
        "--timeout",
        "180s",
        "--json",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "scale failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(report["services"], 12, "{report}");
    assert_eq!(report["writes_in_quiet"], 0, "{report}");
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

/// The static driver's inventory as `scale` writes it: `nodes` instances in JSON.
fn inventory(nodes: usize) -> String {
    let instances: Vec<Value> = (0..nodes)
        .map(|i| {
            serde_json::json!({"name": format!("node-{i:05}"), "id": format!("i{i:05}"),
                "type": "s1.medium", "addresses": [
                    {"type": "InternalIP",
                     "address": format!("10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256)},
                    {"type": "Hostname", "address": format!("node-{i:05}")}]})
        })
        .collect();
    serde_json::json!({"region": "eu-1", "zone": "eu-1a", "instances": instances,
        "loadBalancer": {"addresses": ["10.200.0.0/16"]}})
    .to_string()
}

/// `wasm-ccm-dev call <static driver> instances.instance-metadata` for `node` with `config`
/// and `extra` flags.
fn call_static(config: &std::path::Path, node: &str, extra: &[&str]) -> std::process::Output {
    let cache = tempfile::tempdir().expect("tempdir");
    Command::new(env!("CARGO_BIN_EXE_wasm-ccm-dev"))
        .env_remove("WASM_CCM_LOG")
        .args(["--cache-dir", &cache.path().display().to_string(), "call"])
        .arg(wasm_ccm_drivers::STATIC_DRIVER)
        .arg("instances.instance-metadata")
        .arg("--config")
        .arg(config)
        .args(["--input", &format!(r#"{{"name":"{node}"}}"#)])
        .args(extra)
        .output()
        .expect("run wasm-ccm-dev call")
}

/// `scale --nodes 15000` runs with `run`'s default memory limit (64 MiB per driver instance):
/// the static driver reads a 15,000-instance inventory within it (it needed about 80 MiB when
/// the JSON went through the YAML reader). The last instance is found, so the whole inventory
/// was read; the positive control: at 8 MiB the same inventory does not fit, so the limit is
/// really applied.
#[test]
fn the_static_driver_reads_15000_instances_within_the_default_memory_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("cloud.json");
    std::fs::write(&config, inventory(15_000)).expect("write the inventory");

    let out = call_static(&config, "node-14999", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let answer: Value = serde_json::from_slice(&out.stdout).expect("one JSON answer");
    assert_eq!(answer["provider-id"], "static://i14999", "{answer}");

    let out = call_static(&config, "node-14999", &["--memory-limit", "8Mi"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "8 MiB was enough: {stderr}");
    assert!(
        stderr.contains("tried to use more than 8 MiB of memory in provider.init"),
        "{stderr}"
    );
}
