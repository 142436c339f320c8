//! Fault injection, the request log and counters, and the HTTP control API.

mod common;

use std::time::{Duration, Instant};

use common::{node, rv};
use serde_json::json;
use wasm_ccm_sim::kube::{RequestMatcher, Verb};

#[tokio::test]
async fn fail_next_with_500_then_recover() {
    let s = common::start().await;
    s.post("/api/v1/nodes", &node("a")).await;
    s.sim.faults().fail_next(
        2,
        500,
        RequestMatcher::resource("nodes").with_verb(Verb::Get),
    );
    for _ in 0..2 {
        let r = s.get("/api/v1/nodes/a").await;
        assert_eq!(r.status, 500);
        assert_eq!(r.body["kind"], "Status");
        assert_eq!(r.body["reason"], "InternalError");
    }
    // Lists are not gets: unaffected.
    assert_eq!(s.get("/api/v1/nodes").await.status, 200);
    assert_eq!(s.get("/api/v1/nodes/a").await.status, 200);
    assert_eq!(s.sim.faults().pending(), 0);
    let faulted: Vec<_> = s.sim.requests().into_iter().filter(|r| r.faulted).collect();
    assert_eq!(faulted.len(), 2);
}

#[tokio::test]
async fn too_many_requests_carries_retry_after() {
    let s = common::start().await;
    s.sim.faults().fail_next(1, 429, RequestMatcher::any());
    let r = s.get("/api/v1/nodes").await;
    assert_eq!(r.status, 429);
    assert_eq!(
        r.headers.get("retry-after").map(|v| v.as_bytes()),
        Some(&b"1"[..])
    );
    assert_eq!(r.body["reason"], "TooManyRequests");
    assert_eq!(r.body["details"]["retryAfterSeconds"], 1);
    assert_eq!(s.get("/api/v1/nodes").await.status, 200);
}

#[tokio::test]
async fn conflict_next_writes_hits_put_and_patch_only() {
    let s = common::start().await;
    let created = s.post("/api/v1/nodes", &node("a")).await.body;
    s.sim.faults().conflict_next_writes("nodes", 2);
    assert_eq!(s.get("/api/v1/nodes/a").await.status, 200);
    let put = s.put("/api/v1/nodes/a", &created).await;
    assert_eq!(put.status, 409);
    assert_eq!(
        put.body["message"],
        "Operation cannot be fulfilled on nodes \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let patch = s
        .patch(
            "/api/v1/nodes/a/status",
            "application/merge-patch+json",
            &json!({"status": {}}),
        )
        .await;
    assert_eq!(patch.status, 409);
    // Nothing was written by the faulted requests.
    assert_eq!(rv(&s.get("/api/v1/nodes/a").await.body), rv(&created));
    let mut labelled = created.clone();
    labelled["metadata"]["labels"] = json!({"a": "b"});
    assert_eq!(s.put("/api/v1/nodes/a", &labelled).await.status, 200);
}

#[tokio::test]
async fn latency_delays_matching_requests() {
    let s = common::start().await;
    s.sim.faults().add_latency(
        RequestMatcher::resource("nodes"),
        Duration::from_millis(300),
    );
    let t = Instant::now();
    s.get("/api/v1/nodes").await;
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
    s.sim.faults().clear();
    s.sim.faults().set_latency(Duration::from_millis(150));
    let t = Instant::now();
    s.get("/version").await;
    assert!(t.elapsed() >= Duration::from_millis(150));
}

#[tokio::test]
async fn disconnect_breaks_the_response() {
    let s = common::start().await;
    s.sim
        .faults()
        .disconnect_next(1, RequestMatcher::resource("nodes"));
    let result = async {
        let r = s
            .client
            .get(format!("{}/api/v1/nodes", s.sim.url()))
            .send()
            .await?;
        r.bytes().await
    }
    .await;
    assert!(result.is_err(), "the body must fail: {result:?}");
    assert_eq!(s.get("/api/v1/nodes").await.status, 200);
}

#[tokio::test]
async fn expire_next_watch() {
    let s = common::start().await;
    s.sim.faults().expire_next_watches(1);
    let mut w = s.watch("/api/v1/nodes?watch=true&resourceVersion=4").await;
    let e = w.next().await;
    assert_eq!(e["type"], "ERROR");
    assert_eq!(e["object"]["code"], 410);
    w.expect_closed().await;
    // Used up: the next watch from the same resourceVersion is served. Its first event is the
    // next change, not an ERROR (events come in order, so an expiry would arrive first).
    let mut w = s.watch("/api/v1/nodes?watch=true&resourceVersion=4").await;
    s.post("/api/v1/nodes", &node("later")).await;
    assert_eq!(w.next_named().await, ("ADDED".into(), "later".into()));
}

#[tokio::test]
async fn request_log_and_counts() {
    let s = common::start().await;
    s.post("/api/v1/nodes", &node("a")).await;
    s.get("/api/v1/nodes").await;
    s.get("/api/v1/nodes/a").await;
    s.patch(
        "/api/v1/nodes/a",
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"x": "y"}}}),
    )
    .await;
    s.get("/version").await;
    let c = s.sim.request_counts();
    assert_eq!((c.create, c.list, c.get, c.patch, c.other), (1, 1, 1, 1, 1));
    assert_eq!(c.reads(), 2);
    assert_eq!(c.mutations(), 2);
    assert_eq!(s.sim.request_counts_for("nodes").total(), 4);
    let log = s.sim.requests();
    let patch = log
        .iter()
        .find(|r| r.verb == Some(Verb::Patch))
        .expect("patch logged");
    assert_eq!(patch.path, "/api/v1/nodes/a");
    assert_eq!(
        patch.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    assert!(patch.body.as_deref().is_some_and(|b| b.contains("\"x\"")));
    assert_eq!(patch.status, 200);
    assert_eq!(patch.resource.as_deref(), Some("nodes"));

    s.sim.reset_counts();
    assert_eq!(s.sim.request_counts().total(), 0);
    s.sim.set_request_log(false);
    s.get("/api/v1/nodes").await;
    assert_eq!(s.sim.request_counts().list, 1);
    assert_eq!(s.sim.requests().len(), log.len());
}

#[tokio::test]
async fn http_control_api() {
    let s = common::start().await;
    let r = s
        .post(
            "/sim/faults",
            &json!([
                {"action": "fail", "count": 1, "status": 503, "match": {"verbs": ["list"], "resource": "nodes"}},
                {"action": "conflict", "count": 1, "resource": "services"}
            ]),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(s.sim.faults().pending(), 2);
    assert_eq!(s.get("/api/v1/nodes").await.status, 503);
    assert_eq!(
        s.send(reqwest::Method::DELETE, "/sim/faults", None, None)
            .await
            .status,
        200
    );
    assert_eq!(s.sim.faults().pending(), 0);
    assert_eq!(
        s.post("/sim/faults", &json!({"action": "explode"}))
            .await
            .status,
        400
    );

    let seeded = s
        .send(
            reqwest::Method::POST,
            "/sim/seed",
            Some("application/yaml"),
            Some(b"apiVersion: v1\nkind: Node\nmetadata: {name: seeded}\n".to_vec()),
        )
        .await;
    assert_eq!(seeded.body["seeded"], 1);
    assert!(s.sim.get("nodes", None, "seeded").is_some());

    let counts = s.get("/sim/counts").await.body;
    assert_eq!(counts["total"]["list"], 1);
    assert_eq!(counts["by_resource"]["nodes"]["list"], 1);
    let log = s.get("/sim/requests").await.body;
    assert_eq!(
        log.as_array().map(Vec::len),
        Some(1),
        "control requests are not logged"
    );

    let before = s.sim.resource_version();
    let mut w = s
        .watch(&format!(
            "/api/v1/nodes?watch=true&resourceVersion={before}"
        ))
        .await;
    s.post("/sim/faults", &json!({"action": "drop_watches"}))
        .await;
    w.expect_closed().await;
    s.post("/api/v1/nodes", &node("b")).await;
    s.post("/sim/compact", &json!({})).await;
    let mut w = s
        .watch(&format!(
            "/api/v1/nodes?watch=true&resourceVersion={before}"
        ))
        .await;
    assert_eq!(w.next().await["object"]["code"], 410);
}

/// A restart keeps the state, ends every watch, breaks open connections, refuses new ones for a
/// moment, and a watch resuming from before it gets 410; the log records arrival order and the
/// latency each request waited.
#[tokio::test]
async fn restart_keeps_state_breaks_connections_and_expires_watches() {
    let s = common::start().await;
    s.post("/api/v1/nodes", &node("a")).await;
    let before = rv(&s.get("/api/v1/nodes/a").await.body);
    s.post("/api/v1/nodes", &node("b")).await;
    let mut w = s.watch("/api/v1/nodes?watch=true&resourceVersion=0").await;
    // A kept-alive connection of the shared client, opened before the restart.
    assert_eq!(s.get("/api/v1/nodes/a").await.status, 200);

    s.sim.restart(Duration::from_millis(400));
    assert!(
        !matches!(
            w.next_within(Duration::from_secs(5)).await,
            common::Next::TimedOut
        ),
        "the watch did not end"
    );
    // New connections are refused while down: a fresh client each time (no kept-alive
    // connection), polled within a bound until one is served.
    let url = format!("{}/api/v1/nodes/a", s.sim.url());
    let started = Instant::now();
    let mut failures = 0;
    loop {
        let client = reqwest::Client::new();
        match client.get(&url).send().await {
            Ok(r) => {
                assert_eq!(r.status(), 200, "the state is kept");
                break;
            }
            Err(_) => failures += 1,
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "never served again"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(failures >= 1, "no request was refused while down");
    // The shared client's old connection is broken (its request fails) or already replaced.
    let _ = s.client.get(&url).send().await;
    let stats = s.sim.restart_stats();
    assert_eq!(stats.restarts, 1);
    assert!(stats.refused_connections >= 1, "{stats:?}");
    assert!(stats.broken_connections >= 1, "{stats:?}");
    assert_eq!(s.get("/api/v1/nodes/b").await.status, 200);

    let mut w = s
        .watch(&format!(
            "/api/v1/nodes?watch=true&resourceVersion={before}"
        ))
        .await;
    let e = w.next().await;
    assert_eq!(e["type"], "ERROR");
    assert_eq!(e["object"]["code"], 410);
    assert_eq!(s.sim.expired_watches(), 1);
    assert_eq!(s.sim.restart_stats().expired_watches, 1);

    // Arrival order and waited latency are in the log.
    s.sim.faults().set_latency(Duration::from_millis(120));
    assert_eq!(s.get("/api/v1/nodes/a").await.status, 200);
    s.sim.faults().set_latency(Duration::ZERO);
    let records = s.sim.requests();
    let last = records.last().expect("a record");
    assert!(last.delay_ms >= 120, "{last:?}");
    let arrivals: Vec<u64> = records.iter().map(|r| r.arrival).collect();
    assert!(arrivals.windows(2).all(|w| w[0] < w[1]), "{arrivals:?}");

    // The control API does the same.
    let r = s
        .client
        .post(format!("{}/sim/restart", s.sim.url()))
        .body(r#"{"down_ms": 0}"#)
        .send()
        .await;
    // The shared client's connection may be the one the restart breaks: only the count matters.
    let _ = r;
    assert_eq!(s.sim.restart_stats().restarts, 2);
}
