//! The decorator around every driver call ([`super::Cloud::call`]): the driver's events reach
//! the object a call is about whatever the function, and every call is counted.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use wasm_ccm_runtime::types::ProviderError;
use wasm_ccm_runtime::{CallError, DriverEvent, EventKind, Outcome};

use super::{About, Function, Subject};
use crate::controllers::route::RouteController;
use crate::controllers::route::rules::parse_cluster_cidrs;
use crate::events::reference;
use crate::test_support::{FakeCloud, Harness};

fn event(reason: &str) -> DriverEvent {
    DriverEvent {
        kind: EventKind::Normal,
        reason: reason.into(),
        message: format!("the driver says {reason}"),
    }
}

/// The route pass once dropped the driver's events (only some call sites published them): now
/// a `routes.create`'s events land on the route's target node, as upstream's route controller
/// reports on the Node.
#[tokio::test]
async fn a_route_calls_driver_events_land_on_its_target_node() {
    let cloud = FakeCloud::default();
    cloud
        .events
        .lock()
        .unwrap()
        .insert("routes.create", vec![event("RouteMadeByDriver")]);
    let node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "node-1", "uid": "uid-1"},
        "spec": {"podCIDR": "10.120.1.0/24", "podCIDRs": ["10.120.1.0/24"]},
        "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]},
    });
    let h = Harness::start(cloud, vec![node]).await;
    let cidrs = parse_cluster_cidrs("10.120.0.0/16").expect("cluster CIDRs");
    RouteController::new(Arc::clone(&h.ctx), cidrs)
        .reconcile()
        .await
        .expect("a route pass");
    // The positive control that the call was made at all.
    assert_eq!(
        h.cloud.calls_of("routes.create"),
        1,
        "{:?}",
        h.cloud.calls()
    );
    let events = h.events_for("node-1");
    assert!(
        events.iter().any(|e| e.starts_with("RouteMadeByDriver:")),
        "{events:?}"
    );
}

/// A call about no object has nowhere to publish: its events are logged, nothing is written,
/// and the call is counted like every other; a refused event reason is counted either way.
#[tokio::test]
async fn every_call_is_counted_and_a_refused_reason_too() {
    let node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "node-1", "uid": "uid-1"},
    });
    let h = Harness::start(FakeCloud::default(), vec![node]).await;
    let answer = |events| async move {
        Outcome::<()> {
            result: Err(CallError::Provider(ProviderError::NotFound("gone".into()))),
            events,
            http: Vec::new(),
            elapsed: Duration::ZERO,
            peak_memory: 0,
        }
    };
    let result: Result<(), _> = h
        .ctx
        .cloud
        .call(
            Function::Housekeeping,
            About::subject(Subject::driver("housekeeping")),
            answer(vec![event("Quiet")]),
        )
        .await;
    assert!(result.is_err());
    let writes = h.sim.requests().into_iter().filter(|r| r.method != "GET");
    assert_eq!(writes.count(), 0, "a call about no object writes nothing");

    let stored = h.ctx.nodes.get("node-1").expect("the node is cached");
    let regarding = reference(stored.as_ref());
    let _: Result<(), _> = h
        .ctx
        .cloud
        .call(
            Function::InstanceExists,
            About::object("node-controller", &regarding),
            answer(vec![event("not camel case")]),
        )
        .await;
    let metrics = &h.ctx.metrics;
    for function in [Function::Housekeeping, Function::InstanceExists] {
        let labels = [
            ("driver", "fake"),
            ("function", function.as_str()),
            ("result", "not-found"),
        ];
        assert_eq!(
            metrics.value("wasm_ccm_driver_calls_total", &labels),
            1.0,
            "{function}"
        );
    }
    let refused = [("rule", "event-reason")];
    assert_eq!(
        metrics.value("wasm_ccm_driver_answers_refused_total", &refused),
        1.0
    );
    let events = h.events_for("node-1");
    assert!(
        events.iter().all(|e| e.contains("was refused")) && !events.is_empty(),
        "the event is published under the replacement reason: {events:?}"
    );
}
