//! End to end: a driver that quotes its credentials in what it returns cannot get them into
//! Kubernetes through the controllers. The real `wasm-ccm run` runs the hostile test driver with a
//! credential in its cloud config (`api-key = …`, INI as CloudStack's Secret) and one in its
//! environment (`HOSTILE_TOKEN`); the driver redacts neither. Its error becomes the
//! `FailedToInitializeNode` event, its event with a refused reason becomes a `DriverEvent`
//! quoting that reason, and both are logged: each is read back and must show the redaction mark
//! and neither credential.

use serde_json::Value;
use wasm_ccm_sim::kube::KubeSim;

mod common;

use common::*;

const API_KEY: &str = "AK-from-the-cloud-config-e2e";
const TOKEN: &str = "tok-from-the-environment-e2e";

/// The notes of the events with `reason` on `object`.
fn notes(sim: &KubeSim, object: &str, reason: &str) -> Vec<String> {
    events(sim, object, reason)
        .iter()
        .filter_map(|e| e["note"].as_str().map(str::to_string))
        .collect()
}

fn assert_redacted(what: &str, text: &str) {
    assert!(
        !text.contains(API_KEY) && !text.contains(TOKEN),
        "{what} carries a credential: {text}"
    );
    assert!(text.contains("[redacted]"), "{what}: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_quoted_by_a_driver_never_reach_events_or_logs() {
    let sim = KubeSim::start(localhost()).await.expect("sim");
    for name in ["leak-error", "leak-event"] {
        sim.create(node(name, None, true)).expect("node");
    }
    let config = Value::String(format!(
        "[Global]\napi-url = https://cloud.example\napi-key = {API_KEY}\n"
    ));
    let ccm = Ccm::start_with_env(
        &sim,
        wasm_ccm_drivers::HOSTILE_DRIVER,
        "hostile",
        &config,
        &["--leader-elect=false", "--configure-cloud-routes=false"],
        &[("HOSTILE_TOKEN", TOKEN)],
    );
    eventually("FailedToInitializeNode on leak-error", || {
        !notes(&sim, "leak-error", "FailedToInitializeNode").is_empty()
    })
    .await;
    eventually("the refused reason's DriverEvent on leak-event", || {
        !notes(&sim, "leak-event", "DriverEvent").is_empty()
    })
    .await;
    for note in notes(&sim, "leak-error", "FailedToInitializeNode") {
        assert!(note.contains("failed with api-key="), "{note}");
        assert_redacted("the FailedToInitializeNode note", &note);
    }
    for note in notes(&sim, "leak-event", "DriverEvent") {
        assert!(note.contains("the driver's reason"), "{note}");
        assert_redacted("the DriverEvent note", &note);
    }
    // Nothing anywhere in Kubernetes: every event, and the nodes, as the API serves them.
    let everything = format!(
        "{:?} {:?}",
        sim.list("events.events.k8s.io"),
        sim.list("nodes")
    );
    assert!(
        !everything.contains(API_KEY) && !everything.contains(TOKEN),
        "a credential reached Kubernetes"
    );
    // The event is published before the controller's log line is written (and read through
    // the child's pipe): wait for the line rather than race it.
    eventually("the failure was logged", || {
        ccm.log().contains("leak-error")
    })
    .await;
    let log = ccm.log();
    assert!(
        !log.contains(API_KEY) && !log.contains(TOKEN),
        "a credential reached the log: {log}"
    );
}
