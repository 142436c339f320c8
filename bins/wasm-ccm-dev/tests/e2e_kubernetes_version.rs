//! End to end: `wasm-ccm run` against API servers of a supported and of an unsupported
//! Kubernetes minor (the simulator serving the version asked for). Outside the supported window
//! (`wasm_ccm_controllers::kubernetes_version`) the product logs one warning naming the server's
//! version, the window and what to do, keeps running (it still initialises a node), and reports
//! `wasm_ccm_kubernetes_version_supported` 0; inside it, no warning and 1.

mod common;

use common::*;
use wasm_ccm_manager::kubernetes_version::{NEWEST_MINOR, OLDEST_MINOR, supported_range};
use wasm_ccm_sim::kube::{KubeSim, KubeSimOptions};
use wasm_ccm_sim::static_cloud::StaticCloud;

/// The start-up warning's fixed words (the rest names the versions).
const WARNING: &str = "outside the versions this wasm-ccm supports";

/// A CCM started against a simulator serving some version, with what it needs alive.
struct Run {
    sim: KubeSim,
    ccm: Ccm,
    /// Its `/metrics` port.
    port: u16,
    _cloud: StaticCloud,
}

/// A simulator serving `git_version`, one uninitialised node, and the CCM serving `/metrics`.
async fn run_against(git_version: &str) -> Run {
    let options = KubeSimOptions {
        server_version: git_version.to_string(),
        ..KubeSimOptions::default()
    };
    let sim = KubeSim::start_with(localhost(), options)
        .await
        .expect("sim");
    let (cloud, config) = static_cloud(vec![instance("n1", "10.0.0.1")]).await;
    sim.create(node("n1", None, true)).expect("node");
    let port = free_port();
    let ccm = Ccm::start(
        &sim,
        wasm_ccm_drivers::STATIC_DRIVER,
        "static",
        &config,
        &[
            "--allow-egress",
            &cloud.url(),
            "--configure-cloud-routes=false",
            "--leader-elect=false",
            "--secure-port",
            &port.to_string(),
            "--bind-address",
            "127.0.0.1",
        ],
    );
    Run {
        sim,
        ccm,
        port,
        _cloud: cloud,
    }
}

/// The gauge's series for `git_version`.
fn series(git_version: &str) -> String {
    format!("wasm_ccm_kubernetes_version_supported{{server_version=\"{git_version}\"}}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsupported_server_gets_a_warning_and_a_zero_gauge() {
    // One minor below the window: an old cluster.
    let old = format!("v1.{}.4", OLDEST_MINOR - 1);
    let Run {
        sim,
        ccm,
        port,
        _cloud,
    } = run_against(&old).await;
    metric_becomes(port, &series(&old), 0.0).await;
    // /metrics answers only after the start-up check, so the warning is in the log by now.
    let log = ccm.log();
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains(WARNING)).collect();
    assert_eq!(warnings.len(), 1, "one warning at start-up; log:\n{log}");
    let warning = warnings[0];
    assert!(warning.contains("WARN"), "{warning}");
    assert!(
        warning.contains(&old),
        "names the server's version: {warning}"
    );
    assert!(
        warning.contains(&supported_range()),
        "names the window: {warning}"
    );
    assert!(
        warning.contains("upgrade the cluster"),
        "says what to do: {warning}"
    );
    // It keeps running: the controllers still initialise the node.
    eventually("n1 initialised on an unsupported server", || {
        initialised(&sim, "n1")
    })
    .await;
    assert!(
        ccm.log().lines().filter(|l| l.contains(WARNING)).count() == 1,
        "the warning is not repeated:\n{}",
        ccm.log()
    );

    // One minor above the window: a cluster newer than this release.
    let new = format!("v1.{}.0-eks-4f3a1c", NEWEST_MINOR + 1);
    let run = run_against(&new).await;
    let (ccm, port) = (&run.ccm, run.port);
    metric_becomes(port, &series(&new), 0.0).await;
    let log = ccm.log();
    let warning = log
        .lines()
        .find(|l| l.contains(WARNING))
        .unwrap_or_else(|| panic!("no warning for {new}; log:\n{log}"));
    assert!(warning.contains(&new), "{warning}");
    assert!(
        warning.contains("use a wasm-ccm release that supports it"),
        "{warning}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supported_server_gets_no_warning_and_a_one_gauge() {
    let current = format!("v1.{}.2", OLDEST_MINOR + 1);
    let Run {
        sim,
        ccm,
        port,
        _cloud,
    } = run_against(&current).await;
    metric_becomes(port, &series(&current), 1.0).await;
    eventually("n1 initialised", || initialised(&sim, "n1")).await;
    let log = ccm.log();
    assert!(
        !log.contains(WARNING) && !log.contains("cannot tell whether the API server"),
        "no version warning for {current}:\n{log}"
    );
    // Exactly one series: the gauge names the version it judged, nothing else.
    let text = scrape(port).await;
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("wasm_ccm_kubernetes_version_supported"))
        .collect();
    assert_eq!(lines, [format!("{} 1", series(&current))], "{text}");
}
