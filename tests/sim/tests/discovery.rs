//! Discovery documents, version and health endpoints.

mod common;

use serde_json::Value;

#[tokio::test]
async fn version_and_health() {
    let s = common::start().await;
    let v = s.get("/version").await;
    assert_eq!(v.status, 200);
    assert_eq!(v.body["major"], "1");
    assert_eq!(v.body["gitVersion"], "v1.33.0-wasm-ccm-sim");
    for path in ["/healthz", "/readyz", "/livez", "/readyz/ping"] {
        let r = s
            .client
            .get(format!("{}{path}", s.sim.url()))
            .send()
            .await
            .expect("health request");
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.text().await.expect("text"), "ok");
    }
}

#[tokio::test]
async fn legacy_discovery_documents() {
    let s = common::start().await;
    // kubectl asks for aggregated discovery first; plain JSON makes it fall back.
    let api = s
        .client
        .get(format!("{}/api", s.sim.url()))
        .header(
            "accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
        )
        .send()
        .await
        .expect("request");
    assert_eq!(
        api.headers().get("content-type").map(|v| v.as_bytes()),
        Some(&b"application/json"[..])
    );
    let api: Value = api.json().await.expect("json");
    assert_eq!(api["kind"], "APIVersions");
    assert_eq!(api["versions"][0], "v1");
    assert_eq!(
        api["serverAddressByClientCIDRs"][0]["serverAddress"],
        s.sim.addr().to_string()
    );

    let core = s.get("/api/v1").await.body;
    assert_eq!(core["kind"], "APIResourceList");
    assert_eq!(core["groupVersion"], "v1");
    let find = |doc: &Value, name: &str| {
        doc["resources"]
            .as_array()
            .and_then(|a| a.iter().find(|r| r["name"] == name).cloned())
            .unwrap_or(Value::Null)
    };
    let nodes = find(&core, "nodes");
    assert_eq!(nodes["namespaced"], false);
    assert_eq!(nodes["kind"], "Node");
    assert_eq!(nodes["shortNames"][0], "no");
    assert!(
        nodes["verbs"]
            .as_array()
            .is_some_and(|v| v.contains(&"watch".into()))
    );
    assert_eq!(find(&core, "services")["shortNames"][0], "svc");
    assert_eq!(find(&core, "namespaces")["shortNames"][0], "ns");
    assert_eq!(find(&core, "events")["shortNames"][0], "ev");
    assert_eq!(find(&core, "nodes/status")["kind"], "Node");
    assert_eq!(find(&core, "services/status")["namespaced"], true);

    let groups = s.get("/apis").await.body;
    assert_eq!(groups["kind"], "APIGroupList");
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .map(|a| a.iter().filter_map(|g| g["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["events.k8s.io", "coordination.k8s.io"]);

    let group = s.get("/apis/coordination.k8s.io").await.body;
    assert_eq!(group["kind"], "APIGroup");
    assert_eq!(group["preferredVersion"]["version"], "v1");
    let leases = s.get("/apis/coordination.k8s.io/v1").await.body;
    assert_eq!(find(&leases, "leases")["namespaced"], true);
    let events = s.get("/apis/events.k8s.io/v1").await.body;
    assert_eq!(find(&events, "events")["kind"], "Event");
}

#[tokio::test]
async fn unknown_paths_are_404_status() {
    let s = common::start().await;
    for path in [
        "/api/v2",
        "/api/v1/widgets",
        "/apis/example.com/v1",
        "/apis/coordination.k8s.io/v1/namespaces/default/widgets",
        "/api/v1/services/not-namespaced-path",
        "/openapi/v2",
        "/api/v1/nodes/n1/proxy",
    ] {
        let r = s.get(path).await;
        assert_eq!(r.status, 404, "{path}");
        assert_eq!(r.body["kind"], "Status", "{path}");
        assert_eq!(r.body["reason"], "NotFound", "{path}");
        assert_eq!(r.body["code"], 404, "{path}");
    }
    let r = s
        .send(
            reqwest::Method::POST,
            "/api/v1/services",
            Some("application/json"),
            Some(b"{}".to_vec()),
        )
        .await;
    assert_eq!(r.status, 405);
    assert_eq!(r.body["reason"], "MethodNotAllowed");
}
