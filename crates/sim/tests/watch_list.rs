//! The simulator as an apiserver without streaming lists (KEP-3157 WatchList): the exact refusal
//! of a kube-apiserver 1.27+ with the `WatchList` feature gate off, and of one before 1.27, each
//! to the streaming list kube-rs's watcher sends; and the `/sim/watch-list` control endpoint.

mod common;

use common::{Sim, node, start};
use serde_json::{Value, json};
use wasm_ccm_sim::kube::{KubeSim, KubeSimOptions, WatchList};

/// The first request of kube-rs's watcher with `streaming_lists()` (its query, as kube-core
/// builds it).
const STREAMING: &str = "/api/v1/nodes?&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0";

fn causes(body: &Value) -> Vec<(String, String)> {
    body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["field"].as_str().unwrap_or("").to_string(),
                c["reason"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The 422 `Invalid` of `ListOptions.meta.k8s.io` with one forbidden field, as `ListResource`
/// (k8s.io/apiserver pkg/endpoints/handlers/get.go) answers `ValidateListOptions`' errors.
fn assert_refused(body: &Value, field: &str, message: &str) {
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["code"], 422, "{body}");
    assert_eq!(body["reason"], "Invalid", "{body}");
    assert_eq!(
        body["message"],
        format!("ListOptions.meta.k8s.io \"\" is invalid: {field}: Forbidden: {message}")
    );
    assert_eq!(body["details"]["group"], "meta.k8s.io");
    assert_eq!(body["details"]["kind"], "ListOptions");
    assert_eq!(
        causes(body),
        vec![(field.to_string(), "FieldValueForbidden".to_string())]
    );
}

async fn start_with(watch_list: WatchList) -> Sim {
    let options = KubeSimOptions {
        watch_list,
        ..KubeSimOptions::default()
    };
    let sim = KubeSim::start_with("127.0.0.1:0".parse().expect("address"), options)
        .await
        .expect("start");
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    Sim { sim, client }
}

#[tokio::test]
async fn the_gate_off_refuses_send_initial_events_and_serves_list_and_watch() {
    let s = start().await;
    assert_eq!(s.sim.watch_list(), WatchList::Enabled);
    let r = s.get("/sim/watch-list").await;
    assert_eq!(r.body, json!({"watch_list": "enabled"}));
    let r = s
        .put("/sim/watch-list", &json!({"watch_list": "gate_disabled"}))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(s.sim.watch_list(), WatchList::GateDisabled);
    s.post("/api/v1/nodes", &node("a")).await;

    let r = s.get(STREAMING).await;
    assert_refused(
        &r.body,
        "sendInitialEvents",
        "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
    );
    // The other watch rules still come first (`validateWatchOptions`' order).
    let r = s
        .get("/api/v1/nodes?watch=true&allowWatchBookmarks=true&sendInitialEvents=true")
        .await;
    let fields: Vec<String> = causes(&r.body).into_iter().map(|(f, _)| f).collect();
    assert_eq!(fields, ["resourceVersionMatch", "sendInitialEvents"]);

    // LIST, then WATCH from its resourceVersion: served as ever.
    let list = s.get("/api/v1/nodes?resourceVersion=0").await;
    assert_eq!(list.status, 200, "{}", list.body);
    let rv = list.body["metadata"]["resourceVersion"]
        .as_str()
        .expect("a list resourceVersion")
        .to_string();
    let mut w = s
        .watch(&format!(
            "/api/v1/nodes?watch=true&allowWatchBookmarks=true&resourceVersion={rv}"
        ))
        .await;
    s.post("/api/v1/nodes", &node("b")).await;
    assert_eq!(w.next_named().await, ("ADDED".into(), "b".into()));

    // Back on: streaming lists are served again.
    s.sim.set_watch_list(WatchList::Enabled);
    let mut w = s.watch(STREAMING).await;
    assert_eq!(w.next_named().await, ("ADDED".into(), "a".into()));
    assert_eq!(w.next_named().await, ("ADDED".into(), "b".into()));
    let end = w.next().await;
    assert_eq!(end["type"], "BOOKMARK");
    assert_eq!(
        end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
}

#[tokio::test]
async fn before_1_27_resource_version_match_is_refused_and_send_initial_events_ignored() {
    let s = start_with(WatchList::Unsupported).await;
    s.post("/api/v1/nodes", &node("a")).await;

    let r = s.get(STREAMING).await;
    assert_refused(
        &r.body,
        "resourceVersionMatch",
        "resourceVersionMatch is forbidden for watch",
    );

    // Without resourceVersionMatch the unknown sendInitialEvents is dropped: a plain watch from
    // resourceVersion 0 (the existing objects as ADDED), and no initial-events-end bookmark.
    let mut w = s
        .watch("/api/v1/nodes?watch=true&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersion=0")
        .await;
    assert_eq!(w.next_named().await, ("ADDED".into(), "a".into()));
    s.post("/api/v1/nodes", &node("b")).await;
    assert_eq!(w.next_named().await, ("ADDED".into(), "b".into()));
    // ... and on a list it is no error either.
    let r = s.get("/api/v1/nodes?sendInitialEvents=true").await;
    assert_eq!(r.status, 200, "{}", r.body);
}

#[tokio::test]
async fn a_bad_watch_list_setting_changes_nothing() {
    let s = start().await;
    for body in [
        json!({"watch_list": "sometimes"}),
        json!({"watch_list": "enabled", "extra": 1}),
        json!("gate_disabled"),
    ] {
        let r = s.put("/sim/watch-list", &body).await;
        assert_eq!(r.status, 400, "{body}: {}", r.body);
    }
    assert_eq!(s.sim.watch_list(), WatchList::Enabled);
    let r = s.get("/sim/watch-list").await;
    assert_eq!(r.body, json!({"watch_list": "enabled"}));
}
