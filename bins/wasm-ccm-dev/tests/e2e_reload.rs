//! End to end: hot reload of a driver mounted like a ConfigMap volume (`plugin.wasm` →
//! `..data/plugin.wasm`, `..data` → a timestamped directory, updated by an atomic symlink
//! swap). Bad versions are refused with an event and a metric while the old one keeps serving;
//! a good one is swapped in without a failed call.

use std::path::Path;

mod common;

use common::*;
use sha2::{Digest, Sha256};
use wasm_ccm_sim::kube::KubeSim;
use wasm_ccm_test_tools::configmap::{ConfigMapVolume, with_custom_section};

fn read(path: &str) -> Vec<u8> {
    std::fs::read(path).expect("driver built by the build script")
}

/// The same driver with other bytes: a new version as far as the host can tell.
fn new_version_of(wasm: &[u8]) -> Vec<u8> {
    with_custom_section(wasm, "wasm-ccm-test-version", b"2")
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn start(
    sim: &KubeSim,
    driver_path: &Path,
    config: &serde_json::Value,
    cloud: &str,
    port: u16,
    extra: &[&str],
) -> Ccm {
    let port = port.to_string();
    let driver_path = driver_path.display().to_string();
    let mut args = vec![
        "--allow-egress",
        cloud,
        "--configure-cloud-routes=false",
        "--leader-elect=false",
        "--secure-port",
        &port,
        "--bind-address",
        "127.0.0.1",
        // The earlier flag names (`--plugin-watch-interval`, `--plugin-sha256` below) are
        // aliases an existing manifest may still use: this test keeps them working.
        "--plugin-watch-interval",
        "50ms",
    ];
    args.extend_from_slice(extra);
    Ccm::start_with_env(
        sim,
        &driver_path,
        "static",
        config,
        &args,
        &[("POD_NAME", "wasm-ccm-0"), ("POD_NAMESPACE", "kube-system")],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_versions_are_refused_and_a_good_one_is_swapped_in_without_a_failed_call() {
    let sim = KubeSim::start(localhost()).await.expect("sim");
    let names: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|n| n.to_string())
        .chain((0..40).map(|i| format!("n{i}")))
        .collect();
    let (cloud, config) = static_cloud(
        names
            .iter()
            .enumerate()
            .map(|(i, n)| instance(n, &format!("10.0.{}.{}", i / 200, i % 200 + 1)))
            .collect(),
    )
    .await;
    let v1 = read(wasm_ccm_drivers::STATIC_DRIVER);
    let mut volume = ConfigMapVolume::new(&v1);
    let port = free_port();
    let _ccm = start(&sim, &volume.plugin(), &config, &cloud.url(), port, &[]);
    sim.create(node("a", None, true)).expect("node");
    eventually("a initialised by v1", || initialised(&sim, "a")).await;
    let info_v1 = format!(
        "wasm_ccm_driver_info{{driver=\"static\",version=\"0.1.0\",sha256=\"{}\"}}",
        sha256(&v1)
    );
    metric_becomes(port, &info_v1, 1.0).await;
    metric_becomes(
        port,
        "wasm_ccm_driver_loads_total{driver=\"static\",trigger=\"startup\"}",
        1.0,
    )
    .await;

    // Each bad version is refused for its own reason; the running one stays.
    let refusals = [
        (b"<html>502 Bad Gateway</html>".to_vec(), "not-a-component"),
        (read(wasm_ccm_drivers::FUTURE_MAJOR_DRIVER), "wit-version"),
        // The cloudscale driver's init fails without its token.
        (read(wasm_ccm_drivers::CLOUDSCALE_DRIVER), "init-failed"),
    ];
    for (bytes, reason) in &refusals {
        volume.update(bytes);
        metric_becomes(
            port,
            &format!(
                "wasm_ccm_driver_reload_refusals_total{{driver=\"static\",reason=\"{reason}\"}}"
            ),
            1.0,
        )
        .await;
    }
    eventually("a Warning event per refusal on the pod", || {
        events(&sim, "wasm-ccm-0", "DriverReloadRefused").len() == refusals.len()
    })
    .await;
    let refused = events(&sim, "wasm-ccm-0", "DriverReloadRefused");
    assert!(
        refused.iter().all(|e| e["type"] == "Warning"),
        "{refused:?}"
    );
    assert!(
        refused.iter().any(|e| e["note"]
            .as_str()
            .unwrap_or_default()
            .contains("keeps running")),
        "{refused:?}"
    );
    sim.create(node("b", None, true)).expect("node");
    eventually("b initialised by v1 after the refusals", || {
        initialised(&sim, "b")
    })
    .await;
    assert_eq!(
        metric(&scrape(port).await, &info_v1),
        Some(1.0),
        "v1 still in service"
    );

    // A good new version is swapped in while nodes keep arriving, so calls are in flight on
    // both sides of the swap.
    for i in 0..20 {
        sim.create(node(&format!("n{i}"), None, true))
            .expect("node");
    }
    let v2 = new_version_of(&v1);
    volume.update(&v2);
    for i in 20..40 {
        sim.create(node(&format!("n{i}"), None, true))
            .expect("node");
    }
    let info_v2 = format!(
        "wasm_ccm_driver_info{{driver=\"static\",version=\"0.1.0\",sha256=\"{}\"}}",
        sha256(&v2)
    );
    metric_becomes(port, &info_v2, 1.0).await;
    metric_becomes(
        port,
        "wasm_ccm_driver_loads_total{driver=\"static\",trigger=\"reload\"}",
        1.0,
    )
    .await;
    let text = scrape(port).await;
    assert_eq!(
        metric(&text, &info_v1),
        None,
        "only the version in service is reported"
    );
    sim.create(node("c", None, true)).expect("node");
    eventually("c initialised by v2", || initialised(&sim, "c")).await;
    eventually(
        "every node that arrived around the swap initialised",
        || (0..40).all(|i| initialised(&sim, &format!("n{i}"))),
    )
    .await;
    eventually("a Normal DriverReloaded event", || {
        !events(&sim, "wasm-ccm-0", "DriverReloaded").is_empty()
    })
    .await;

    // No call failed at any point: every driver call ended ok.
    let text = scrape(port).await;
    let failed: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("wasm_ccm_driver_calls_total{") && !l.contains("result=\"ok\""))
        .collect();
    assert!(
        failed.is_empty(),
        "calls failed across the reloads: {failed:?}"
    );
    assert!(metric(&text, "wasm_ccm_driver_calls_total{").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_sha256_refuses_other_content_at_startup_and_on_reload() {
    let sim = KubeSim::start(localhost()).await.expect("sim");
    let (cloud, config) = static_cloud(vec![instance("a", "10.0.0.1")]).await;
    let v1 = read(wasm_ccm_drivers::STATIC_DRIVER);
    let mut volume = ConfigMapVolume::new(&v1);

    let wrong = sha256(b"another driver");
    let mut refused = start(
        &sim,
        &volume.plugin(),
        &config,
        &cloud.url(),
        0,
        &["--plugin-sha256", &wrong],
    );
    assert_eq!(refused.wait_exit(), Some(2), "{}", refused.log());
    let log = refused.log();
    assert!(
        log.contains("--driver-sha256 pins") && log.contains(&sha256(&v1)),
        "{log}"
    );

    let port = free_port();
    let pin = sha256(&v1);
    let _ccm = start(
        &sim,
        &volume.plugin(),
        &config,
        &cloud.url(),
        port,
        &["--plugin-sha256", &pin],
    );
    sim.create(node("a", None, true)).expect("node");
    eventually("a initialised", || initialised(&sim, "a")).await;
    volume.update(&new_version_of(&v1));
    metric_becomes(
        port,
        "wasm_ccm_driver_reload_refusals_total{driver=\"static\",reason=\"digest-mismatch\"}",
        1.0,
    )
    .await;
    let info =
        format!("wasm_ccm_driver_info{{driver=\"static\",version=\"0.1.0\",sha256=\"{pin}\"}}");
    assert_eq!(metric(&scrape(port).await, &info), Some(1.0));
}
