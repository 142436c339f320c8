//! Watches: initial state, resuming, 410 Gone, dropped streams, selectors, timeouts, bookmarks.

mod common;

use common::{lb_service, node, rv};
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn watch_from_zero_lists_then_follows() {
    let s = common::start().await;
    s.post("/api/v1/nodes", &node("a")).await;
    s.post("/api/v1/nodes", &node("b")).await;
    let mut existing = vec!["a".to_string(), "b".to_string()];
    for (i, query) in [
        "watch=true",
        "watch=true&resourceVersion=0",
        "watch=1&resourceVersion=",
    ]
    .iter()
    .enumerate()
    {
        let mut w = s.watch(&format!("/api/v1/nodes?{query}")).await;
        for name in &existing {
            assert_eq!(
                w.next_named().await,
                ("ADDED".into(), name.clone()),
                "{query}"
            );
        }
        let name = format!("new{i}");
        s.post("/api/v1/nodes", &node(&name)).await;
        let e = w.next().await;
        assert_eq!(e["type"], "ADDED", "{query}");
        assert_eq!(e["object"]["kind"], "Node");
        assert_eq!(e["object"]["metadata"]["name"], name.as_str());
        existing.push(name);
    }
}

#[tokio::test]
async fn watch_reports_changes_in_order() {
    let s = common::start().await;
    let mut w = s.watch("/api/v1/nodes?watch=true").await;
    s.post("/api/v1/nodes", &node("a")).await;
    assert_eq!(w.next_named().await, ("ADDED".into(), "a".into()));
    s.patch(
        "/api/v1/nodes/a",
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"x": "1"}}}),
    )
    .await;
    let e = w.next().await;
    assert_eq!(e["type"], "MODIFIED");
    assert_eq!(e["object"]["metadata"]["labels"]["x"], "1");
    assert_eq!(e["object"]["apiVersion"], "v1");
    s.delete("/api/v1/nodes/a", None).await;
    assert_eq!(w.next_named().await, ("DELETED".into(), "a".into()));
    // Other resources do not leak into this watch.
    s.post(
        "/api/v1/namespaces/default/services",
        &lb_service("default", "web"),
    )
    .await;
    s.post("/api/v1/nodes", &node("b")).await;
    assert_eq!(w.next_named().await, ("ADDED".into(), "b".into()));
}

#[tokio::test]
async fn watch_from_resource_version_sends_only_later_changes() {
    let s = common::start().await;
    s.post("/api/v1/nodes", &node("a")).await;
    let list = s.get("/api/v1/nodes").await.body;
    s.post("/api/v1/nodes", &node("b")).await;
    s.patch(
        "/api/v1/nodes/a",
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"x": "1"}}}),
    )
    .await;
    let mut w = s
        .watch(&format!(
            "/api/v1/nodes?watch=true&resourceVersion={}",
            rv(&list)
        ))
        .await;
    assert_eq!(w.next_named().await, ("ADDED".into(), "b".into()));
    assert_eq!(w.next_named().await, ("MODIFIED".into(), "a".into()));
    // Nothing else was replayed: the next event is the next change, not an older one (events
    // come in order, so a stray replay would arrive first).
    s.post("/api/v1/nodes", &node("c")).await;
    assert_eq!(w.next_named().await, ("ADDED".into(), "c".into()));
}

#[tokio::test]
async fn compact_makes_old_resource_versions_expire() {
    let s = common::start().await;
    let created = s.post("/api/v1/nodes", &node("a")).await.body;
    s.post("/api/v1/nodes", &node("b")).await;
    s.sim.compact();
    let mut w = s
        .watch(&format!(
            "/api/v1/nodes?watch=true&resourceVersion={}",
            rv(&created)
        ))
        .await;
    let e = w.next().await;
    assert_eq!(e["type"], "ERROR");
    assert_eq!(e["object"]["kind"], "Status");
    assert_eq!(e["object"]["code"], 410);
    assert_eq!(e["object"]["reason"], "Expired");
    assert!(
        e["object"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("too old resource version"))
    );
    w.expect_closed().await;

    // Watching from now works.
    let now = s.sim.resource_version();
    let mut w = s
        .watch(&format!("/api/v1/nodes?watch=true&resourceVersion={now}"))
        .await;
    s.post("/api/v1/nodes", &node("c")).await;
    assert_eq!(w.next_named().await, ("ADDED".into(), "c".into()));
}

#[tokio::test]
async fn drop_watches_closes_every_stream() {
    let s = common::start().await;
    let mut a = s.watch("/api/v1/nodes?watch=true").await;
    let mut b = s
        .watch("/api/v1/namespaces/default/services?watch=true&resourceVersion=1")
        .await;
    s.sim.drop_watches();
    a.expect_closed().await;
    // `b` first replays history (the default namespaces are not services: nothing), then closes.
    b.expect_closed().await;
    // New watches work afterwards.
    let mut c = s.watch("/api/v1/nodes?watch=true").await;
    s.post("/api/v1/nodes", &node("x")).await;
    assert_eq!(c.next_named().await, ("ADDED".into(), "x".into()));
}

#[tokio::test]
async fn selectors_filter_and_report_leaving_objects() {
    let s = common::start().await;
    let mut w = s
        .watch("/api/v1/nodes?watch=true&labelSelector=pool%3Dblue")
        .await;
    let mut n = node("a");
    n["metadata"]["labels"] = json!({"pool": "green"});
    s.post("/api/v1/nodes", &n).await;
    let mut n = node("b");
    n["metadata"]["labels"] = json!({"pool": "blue"});
    s.post("/api/v1/nodes", &n).await;
    assert_eq!(w.next_named().await, ("ADDED".into(), "b".into()));
    let relabel = |pool: &str| json!({"metadata": {"labels": {"pool": pool}}});
    s.patch(
        "/api/v1/nodes/a",
        "application/merge-patch+json",
        &relabel("blue"),
    )
    .await;
    assert_eq!(w.next_named().await, ("ADDED".into(), "a".into()));
    s.patch(
        "/api/v1/nodes/b",
        "application/merge-patch+json",
        &relabel("green"),
    )
    .await;
    assert_eq!(w.next_named().await, ("DELETED".into(), "b".into()));

    let mut by_name = s
        .watch("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?watch=true&fieldSelector=metadata.name%3Dccm")
        .await;
    let lease = |name: &str| json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name}, "spec": {}});
    s.post(
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
        &lease("other"),
    )
    .await;
    s.post(
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
        &lease("ccm"),
    )
    .await;
    assert_eq!(by_name.next_named().await, ("ADDED".into(), "ccm".into()));

    // Watching one object by its path.
    let mut one = s.watch("/api/v1/nodes/a?watch=true").await;
    assert_eq!(one.next_named().await, ("ADDED".into(), "a".into()));
    s.patch(
        "/api/v1/nodes/b",
        "application/merge-patch+json",
        &relabel("red"),
    )
    .await;
    s.patch(
        "/api/v1/nodes/a",
        "application/merge-patch+json",
        &relabel("red"),
    )
    .await;
    assert_eq!(one.next_named().await, ("MODIFIED".into(), "a".into()));
}

#[tokio::test]
async fn timeout_seconds_ends_the_stream() {
    let s = common::start().await;
    let started = std::time::Instant::now();
    let mut w = s.watch("/api/v1/nodes?watch=true&timeoutSeconds=1").await;
    // A clean end (not a transport error), and not before the timeout: the server's clock
    // starts after ours, so only timer granularity is spared (no upper bound: timing under
    // load is a benchmark's business).
    w.expect_closed().await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(990),
        "closed after {took:?}, before timeoutSeconds=1"
    );
}

#[tokio::test]
async fn initial_events_end_with_a_bookmark() {
    let s = common::start().await;
    s.post("/api/v1/nodes", &node("a")).await;
    let mut w = s
        .watch("/api/v1/nodes?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan")
        .await;
    assert_eq!(w.next_named().await, ("ADDED".into(), "a".into()));
    let b = w.next().await;
    assert_eq!(b["type"], "BOOKMARK");
    assert_eq!(b["object"]["kind"], "Node");
    assert_eq!(
        b["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(rv(&b["object"]), s.sim.resource_version().to_string());
}

#[tokio::test]
async fn many_watchers_many_nodes() {
    let s = common::start().await;
    let mut watchers = Vec::new();
    for _ in 0..10 {
        watchers.push(s.watch("/api/v1/nodes?watch=true").await);
    }
    let objects: Vec<_> = (0..1000).map(|i| node(&format!("n{i:04}"))).collect();
    s.sim.seed(objects).expect("seed");
    for w in &mut watchers {
        for i in 0..1000 {
            assert_eq!(w.next_named().await, ("ADDED".into(), format!("n{i:04}")));
        }
    }
    let list = s.get("/api/v1/nodes").await.body;
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1000));
}

/// A watch that falls further behind than the broadcast buffer holds gets a 410 ERROR rather than
/// a silent gap. Seeding runs synchronously on this single-threaded runtime, so the watch task
/// cannot keep up; the objects are large so that socket buffers could not absorb the burst even
/// if it did.
#[tokio::test]
async fn a_lagging_watch_ends_with_410() {
    let s = common::start().await;
    let mut w = s
        .watch("/api/v1/namespaces/default/configmaps?watch=true")
        .await;
    let filler = "x".repeat(1500);
    let total = 20_000;
    let objects: Vec<_> = (0..total)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("c{i}"), "namespace": "default"}, "data": {"f": filler}})
        })
        .collect();
    s.sim.seed(objects).expect("seed");
    let mut added = 0;
    loop {
        let e = w.next().await;
        match e["type"].as_str() {
            Some("ADDED") => added += 1,
            Some("ERROR") => {
                assert_eq!(e["object"]["code"], 410);
                break;
            }
            other => panic!("unexpected event {other:?}"),
        }
    }
    assert!(added < total, "the watch must have lagged");
    w.expect_closed().await;
}

#[tokio::test]
async fn history_limit_expires_old_resource_versions() {
    use wasm_ccm_sim::kube::{KubeSim, KubeSimOptions};
    let options = KubeSimOptions {
        history_limit: 5,
        ..KubeSimOptions::default()
    };
    let sim = KubeSim::start_with("127.0.0.1:0".parse().expect("address"), options)
        .await
        .expect("start");
    let s = common::Sim {
        sim,
        client: reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client"),
    };
    let first = s.post("/api/v1/nodes", &node("n0")).await.body;
    for i in 1..10 {
        s.post("/api/v1/nodes", &node(&format!("n{i}"))).await;
    }
    let mut old = s
        .watch(&format!(
            "/api/v1/nodes?watch=true&resourceVersion={}",
            rv(&first)
        ))
        .await;
    assert_eq!(old.next().await["object"]["code"], 410);
    let recent = s.sim.resource_version() - 3;
    let mut w = s
        .watch(&format!(
            "/api/v1/nodes?watch=true&resourceVersion={recent}"
        ))
        .await;
    for name in ["n7", "n8", "n9"] {
        assert_eq!(w.next_named().await, ("ADDED".into(), name.into()));
    }
}

#[tokio::test]
async fn shutdown_ends_watches_and_stops_serving() {
    let s = common::start().await;
    let mut w = s.watch("/api/v1/nodes?watch=true").await;
    let url = s.sim.url();
    tokio::time::timeout(common::BOUND, s.sim.clone().shutdown())
        .await
        .expect("shutdown within the bound");
    w.expect_closed().await;
    let fresh = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    assert!(fresh.get(format!("{url}/version")).send().await.is_err());
}
