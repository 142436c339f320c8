//! Upstream's `controllers/nodelifecycle/node_lifecycle_controller_test.go`, as data, run in
//! process through one `monitor_nodes` pass.
//!
//! Ported: `Test_NodesDeleted` (all 12 cases), `Test_NodesShutdown` (all 9), each with the event
//! check `Test_NodesShutdown` gained in 1.35 (kubernetes/kubernetes#134545: every event's
//! `involvedObject.apiVersion` is set, so `kubectl events --for Node/<name>` finds it); ours also
//! checks kind, name and UID, and that a deleted node did get its `DeletingNode` event.
//! Skipped: `Test_GetProviderID` (which Go API yields the provider ID; a driver is handed the
//! node and answers `instance-exists` itself).
//!
//! Translation: upstream's `ExistsByProviderID`/`ErrByProviderID`, `ExtIDErr` and
//! `NodeShutdown`/`ErrShutdownByProviderID` become the driver's `instance-exists` and
//! `instance-shutdown` answers. Upstream's provider ID `node0` (no scheme) is written
//! `fake://node0`: ours deliberately never deletes or taints a node whose provider ID is not of
//! the driver's scheme.

use std::sync::Arc;

use serde_json::{Value, json};
use wasm_ccm_runtime::types::ProviderError;

use crate::controllers::lifecycle::LifecycleController;
use crate::controllers::node::rules::SHUTDOWN_TAINT;
use crate::test_support::{FakeCloud, Harness};

struct Case {
    name: &'static str,
    /// `Ready` condition status: `True`, `False` or `Unknown`.
    ready: &'static str,
    provider_id: &'static str,
    shutdown_tainted: bool,
    /// `instance-exists` (absent: the fake's default, true).
    exists: Option<Result<bool, ProviderError>>,
    /// `instance-shutdown` (absent: false).
    shutdown: Option<Result<bool, ProviderError>>,
    want_deleted: bool,
    want_shutdown_taint: bool,
}

const C: Case = Case {
    name: "",
    ready: "False",
    provider_id: "fake://node0",
    shutdown_tainted: false,
    exists: None,
    shutdown: None,
    want_deleted: false,
    want_shutdown_taint: false,
};

fn err() -> ProviderError {
    ProviderError::Transient("err!".into())
}

fn nodes_deleted_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for v2 in [false, true] {
        let n = |v1: &'static str, v2name: &'static str| if v2 { v2name } else { v1 };
        cases.extend([
            Case {
                name: n(
                    "node is not ready and does not exist",
                    "[instance2] node is not ready and does not exist",
                ),
                provider_id: "",
                exists: Some(Ok(false)),
                want_deleted: true,
                ..C
            },
            Case {
                name: n(
                    "node is not ready and provider returns err",
                    "[instancev2] node is not ready and provider returns err",
                ),
                exists: Some(Err(err())),
                ..C
            },
            Case {
                name: n(
                    "node is not ready but still exists",
                    "[instancev2] node is not ready but still exists",
                ),
                exists: Some(Ok(true)),
                ..C
            },
            Case {
                name: n(
                    "node ready condition is unknown, node doesn't exist",
                    "[instancev2] node ready condition is unknown, node doesn't exist",
                ),
                ready: "Unknown",
                provider_id: "",
                exists: Some(Ok(false)),
                want_deleted: true,
                ..C
            },
            Case {
                name: n(
                    "node ready condition is unknown, node exists",
                    "[instancev2] node ready condition is unknown, node exists",
                ),
                ready: "Unknown",
                provider_id: "",
                exists: Some(Ok(true)),
                shutdown: Some(Ok(false)),
                ..C
            },
            Case {
                name: n(
                    "node is ready, but provider said it is deleted (maybe a bug in provider)",
                    "[instancev2] node is ready, but provider said it is deleted (maybe a bug in provider)",
                ),
                ready: "True",
                exists: Some(Ok(false)),
                ..C
            },
        ]);
    }
    cases
}

fn nodes_shutdown_cases() -> Vec<Case> {
    vec![
        Case {
            name: "node is not ready and was shutdown, but exists",
            exists: Some(Ok(true)),
            shutdown: Some(Ok(true)),
            want_shutdown_taint: true,
            ..C
        },
        Case {
            name: "node with empty spec providerID is not ready and was shutdown, but exists",
            provider_id: "",
            exists: Some(Ok(true)),
            shutdown: Some(Ok(true)),
            want_shutdown_taint: true,
            ..C
        },
        Case {
            name: "node with non-existing providerID (missing in cloud provider) gets deleted",
            provider_id: "",
            exists: Some(Ok(false)),
            want_deleted: true,
            ..C
        },
        Case {
            name: "node with error when getting providerID does not have shutdown taint",
            provider_id: "",
            exists: Some(Err(err())),
            ..C
        },
        Case {
            name: "node with InstanceID returning InstanceNotFound gets deleted",
            provider_id: "",
            exists: Some(Err(ProviderError::NotFound("node0".into()))),
            want_deleted: true,
            ..C
        },
        Case {
            // Upstream's fake answers "does not exist" by default, so the node goes before the
            // shutdown check's error matters.
            name: "node is not ready, but there is error checking if node is shutdown",
            provider_id: "",
            exists: Some(Ok(false)),
            shutdown: Some(Err(err())),
            want_deleted: true,
            ..C
        },
        Case {
            name: "node is not ready and is not shutdown",
            provider_id: "",
            exists: Some(Ok(false)),
            shutdown: Some(Ok(false)),
            want_deleted: true,
            ..C
        },
        Case {
            name: "node is ready but provider says it's shutdown (maybe a bug by provider)",
            ready: "True",
            provider_id: "",
            shutdown: Some(Ok(true)),
            ..C
        },
        Case {
            name: "node is shutdown but provider says it does not exist",
            ready: "Unknown",
            provider_id: "",
            exists: Some(Ok(false)),
            shutdown: Some(Ok(true)),
            want_deleted: true,
            ..C
        },
    ]
}

fn node_json(case: &Case) -> Value {
    let mut node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node0"},
        "spec": {},
        "status": {"conditions": [{"type": "Ready", "status": case.ready}]},
    });
    if !case.provider_id.is_empty() {
        node["spec"]["providerID"] = case.provider_id.into();
    }
    if case.shutdown_tainted {
        node["spec"]["taints"] = json!([{"key": SHUTDOWN_TAINT, "effect": "NoSchedule"}]);
    }
    node
}

fn has_shutdown_taint(node: &Value) -> bool {
    node.pointer("/spec/taints")
        .and_then(Value::as_array)
        .is_some_and(|t| t.iter().any(|t| t["key"] == SHUTDOWN_TAINT))
}

/// The `involvedObject` of every core/v1 event about `node0` (the apiserver stores
/// events.k8s.io/v1 events as core/v1 ones, `regarding` becoming `involvedObject`), with its
/// reason.
fn event_objects(h: &Harness) -> Vec<(String, Value)> {
    h.sim
        .list("events")
        .into_iter()
        .filter(|e| e.pointer("/involvedObject/name").and_then(Value::as_str) == Some("node0"))
        .map(|e| {
            let reason = e["reason"].as_str().unwrap_or_default().to_string();
            (reason, e["involvedObject"].clone())
        })
        .collect()
}

/// Upstream's event check (kubernetes/kubernetes#134545) and the reference around it: each event
/// names the Node by apiVersion, kind, name and UID. Returns how many events were checked.
fn check_event_objects(h: &Harness, case: &Case, uid: &str) -> usize {
    let events = event_objects(h);
    for (reason, object) in &events {
        assert_eq!(
            object["apiVersion"], "v1",
            "{}: {reason}: {object}",
            case.name
        );
        assert_eq!(object["kind"], "Node", "{}: {reason}: {object}", case.name);
        assert_eq!(object["uid"], uid, "{}: {reason}: {object}", case.name);
    }
    // The check above is not vacuous: a deleted node got its event.
    if case.want_deleted {
        assert!(
            events.iter().any(|(reason, _)| reason == "DeletingNode"),
            "{}: no DeletingNode event: {events:?}",
            case.name
        );
    }
    events.len()
}

async fn run(case: Case) -> usize {
    let cloud = FakeCloud::default();
    if let Some(a) = case.exists.clone() {
        cloud.exists.lock().unwrap().insert("node0".into(), a);
    }
    if let Some(a) = case.shutdown.clone() {
        cloud.shutdown.lock().unwrap().insert("node0".into(), a);
    }
    let h = Harness::start(cloud, vec![node_json(&case)]).await;
    let uid = h
        .node("node0")
        .and_then(|n| {
            n.pointer("/metadata/uid")
                .and_then(Value::as_str)
                .map(String::from)
        })
        .expect("the simulator gives node0 a UID");
    LifecycleController::new(Arc::clone(&h.ctx))
        .monitor_nodes()
        .await;
    let checked = check_event_objects(&h, &case, &uid);
    let node = h.node("node0");
    assert_eq!(node.is_none(), case.want_deleted, "{}: {node:?}", case.name);
    if let Some(node) = node {
        assert_eq!(
            has_shutdown_taint(&node),
            case.want_shutdown_taint,
            "{}: {node}",
            case.name
        );
    }
    if case.ready == "True" {
        // A Ready node is not asked about at all.
        assert_eq!(h.cloud.calls(), Vec::<String>::new(), "{}", case.name);
    }
    checked
}

/// Runs a table; the event check saw at least one event (the tables delete nodes).
async fn run_table(cases: Vec<Case>) {
    let checked: usize = futures::future::join_all(cases.into_iter().map(run))
        .await
        .into_iter()
        .sum();
    assert!(checked > 0, "no event was checked");
}

#[tokio::test]
async fn test_nodes_deleted() {
    run_table(nodes_deleted_cases()).await;
}

#[tokio::test]
async fn test_nodes_shutdown() {
    run_table(nodes_shutdown_cases()).await;
}
