//! The simulator validates and defaults like the apiserver for what the CCM reads and writes:
//! 422 Status shapes with causes, Service spec and status rules, ipMode defaulting, node
//! addresses and taints, events in both APIs, leases, ConfigMaps, metadata; and the request
//! semantics clients rely on (dryRun, DELETE answers, field selectors, list versions, watch
//! parameters).

mod common;

use reqwest::StatusCode;
use serde_json::{Value, json};

use common::{Sim, lb_service, node, start};

const SVC: &str = "/api/v1/namespaces/default/services";

async fn lb(s: &Sim, name: &str) -> Value {
    let r = s.post(SVC, &lb_service("default", name)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body
}

async fn status_patch(s: &Sim, name: &str, status: Value) -> common::Resp {
    s.patch(
        &format!("{SVC}/{name}/status"),
        "application/merge-patch+json",
        &json!({ "status": status }),
    )
    .await
}

fn causes(body: &Value) -> Vec<(String, String)> {
    body["details"]["causes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    (
                        c["field"].as_str().unwrap_or("").to_string(),
                        c["reason"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn invalid_status_names_kind_and_causes() {
    let s = start().await;
    let r = s
        .post(
            "/api/v1/namespaces/default/configmaps",
            &json!({"metadata": {"name": "Bad_Name"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(r.body["reason"], "Invalid");
    assert_eq!(r.body["details"]["kind"], "ConfigMap");
    assert_eq!(r.body["details"]["name"], "Bad_Name");
    assert_eq!(
        causes(&r.body),
        vec![("metadata.name".to_string(), "FieldValueInvalid".to_string())]
    );
    assert!(
        r.body["message"].as_str().is_some_and(|m| m.starts_with(
            "ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\""
        )),
        "{}",
        r.body["message"]
    );
}

#[tokio::test]
async fn service_status_is_validated_defaulted_and_cleared() {
    let s = start().await;
    lb(&s, "lb1").await;
    // ipMode VIP is defaulted for ingress entries with an ip (SetDefaults_Service).
    let r = status_patch(
        &s,
        "lb1",
        json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.98"}, {"hostname": "lb.example.com"}]}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.body["status"]["loadBalancer"]["ingress"],
        json!([{"ip": "192.0.2.98", "ipMode": "VIP"}, {"hostname": "lb.example.com"}])
    );
    // ValidateLoadBalancerStatus: every problem at once.
    let r = status_patch(
        &s,
        "lb1",
        json!({"loadBalancer": {"ingress": [{"ip": "not-an-ip", "ipMode": "vip"}, {"hostname": "1.2.3.4"}, {"hostname": "h.example", "ipMode": "Proxy"}]}}),
    )
    .await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(r.body["details"]["kind"], "Service");
    let fields: Vec<String> = causes(&r.body).into_iter().map(|(f, _)| f).collect();
    assert_eq!(
        fields,
        vec![
            "status.loadBalancer.ingress[0].ip",
            "status.loadBalancer.ingress[0].ipMode",
            "status.loadBalancer.ingress[1].hostname",
            "status.loadBalancer.ingress[2].ipMode",
        ]
    );
    // Nothing was stored.
    let stored = s.get(&format!("{SVC}/lb1")).await.body;
    assert_eq!(
        stored["status"]["loadBalancer"]["ingress"][0]["ip"],
        "192.0.2.98"
    );
    // Leaving LoadBalancer clears the status (svcStrategy.PrepareForUpdate).
    let r = s
        .patch(
            &format!("{SVC}/lb1"),
            "application/merge-patch+json",
            &json!({"spec": {"type": "ClusterIP"}}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["status"]["loadBalancer"], json!({}));
    // Ingress on a non-LoadBalancer Service is forbidden.
    let r = status_patch(
        &s,
        "lb1",
        json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}),
    )
    .await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(
        causes(&r.body),
        vec![(
            "status.loadBalancer.ingress".to_string(),
            "FieldValueForbidden".to_string()
        )]
    );
    // An emptied ingress list is not kept (omitempty).
    lb(&s, "lb2").await;
    status_patch(
        &s,
        "lb2",
        json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.2"}]}}),
    )
    .await;
    let r = status_patch(&s, "lb2", json!({"loadBalancer": {"ingress": []}})).await;
    assert_eq!(r.body["status"]["loadBalancer"], json!({}));
}

#[tokio::test]
async fn service_spec_rules() {
    let s = start().await;
    let mut with_class = lb_service("default", "classy");
    with_class["spec"]["loadBalancerClass"] = json!("example.com/lb");
    assert_eq!(s.post(SVC, &with_class).await.status, 201);
    // loadBalancerClass is immutable once set.
    let r = s
        .patch(
            &format!("{SVC}/classy"),
            "application/merge-patch+json",
            &json!({"spec": {"loadBalancerClass": null}}),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(
        r.body["message"]
            .as_str()
            .is_some_and(|m| m
                .contains("spec.loadBalancerClass: Invalid value: null: may not change once set")),
        "{}",
        r.body["message"]
    );
    for (patch, field) in [
        (
            json!({"loadBalancerIP": "not-an-ip"}),
            "spec.loadBalancerIP",
        ),
        (
            json!({"loadBalancerSourceRanges": ["garbage"]}),
            "spec.LoadBalancerSourceRanges",
        ),
        (
            json!({"ports": [{"port": 80, "protocol": "SCTPX"}]}),
            "spec.ports[0].protocol",
        ),
    ] {
        let mut svc = lb_service("default", "bad");
        if let (Some(spec), Some(p)) = (svc["spec"].as_object_mut(), patch.as_object()) {
            spec.extend(p.clone());
        }
        let r = s.post(SVC, &svc).await;
        assert_eq!(r.status, 422, "{patch}: {}", r.body);
        assert!(
            causes(&r.body).iter().any(|(f, _)| f == field),
            "{patch}: {}",
            r.body
        );
    }
}

#[tokio::test]
async fn nodes_refuse_duplicate_addresses_and_bad_taints() {
    let s = start().await;
    assert_eq!(s.post("/api/v1/nodes", &node("n1")).await.status, 201);
    let r = s
        .patch(
            "/api/v1/nodes/n1/status",
            "application/merge-patch+json",
            &json!({"status": {"addresses": [
                {"type": "InternalIP", "address": "10.0.0.15"},
                {"type": "InternalIP", "address": "10.0.0.15"}]}}),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(
        causes(&r.body),
        vec![(
            "status.addresses[1]".to_string(),
            "FieldValueDuplicate".to_string()
        )]
    );
    let r = s
        .patch(
            "/api/v1/nodes/n1",
            "application/merge-patch+json",
            &json!({"spec": {"taints": [{"key": "bad key", "effect": "NoSchedule"}]}}),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.body);
    let r = s
        .patch(
            "/api/v1/nodes/n1",
            "application/merge-patch+json",
            &json!({"spec": {"providerID": "sim://a"}}),
        )
        .await;
    assert_eq!(r.status, 200);
    let r = s
        .patch(
            "/api/v1/nodes/n1",
            "application/merge-patch+json",
            &json!({"spec": {"providerID": "sim://b"}}),
        )
        .await;
    assert_eq!(r.status, 422);
    assert_eq!(
        causes(&r.body),
        vec![(
            "spec.providerID".to_string(),
            "FieldValueForbidden".to_string()
        )]
    );
}

#[tokio::test]
async fn events_share_storage_and_are_validated() {
    let s = start().await;
    let path = "/apis/events.k8s.io/v1/namespaces/default/events";
    let good = json!({
        "metadata": {"name": "e1"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "action": "Sync", "reason": "Synced", "type": "Normal", "note": "ok",
        "regarding": {"kind": "Node", "name": "n1"},
        "reportingController": "wasm-ccm", "reportingInstance": "wasm-ccm-1"
    });
    assert_eq!(s.post(path, &good).await.status, 201);
    let core = s.get("/api/v1/namespaces/default/events").await.body;
    assert_eq!(core["items"][0]["message"], "ok");
    assert_eq!(core["items"][0]["involvedObject"]["kind"], "Node");

    let mut bad = good.clone();
    bad["metadata"]["name"] = json!("e2");
    bad["action"] = json!("");
    bad["reason"] = json!("r".repeat(129));
    bad["type"] = json!("Sometimes");
    bad["note"] = json!("é".repeat(513)); // 1026 bytes, 513 characters
    let r = s.post(path, &bad).await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(r.body["details"]["kind"], "Event");
    assert_eq!(r.body["details"]["group"], "events.k8s.io");
    let fields: Vec<String> = causes(&r.body).into_iter().map(|(f, _)| f).collect();
    assert_eq!(fields, vec!["action", "reason", "message", "type"]);

    // Through events.k8s.io/v1 an event's note is immutable; the series may change.
    let r = s
        .patch(
            &format!("{path}/e1"),
            "application/merge-patch+json",
            &json!({"note": "changed"}),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.body);
    // Deleting through one view deletes from both.
    let r = s.delete("/api/v1/namespaces/default/events/e1", None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["kind"], "Status");
    assert_eq!(s.get(&format!("{path}/e1")).await.status, 404);
}

#[tokio::test]
async fn leases_configmaps_and_metadata() {
    let s = start().await;
    let r = s
        .post(
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            &json!({"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": 0}}),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(
        r.body["message"],
        "Lease.coordination.k8s.io \"l\" is invalid: spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"
    );
    let r = s
        .post(
            "/api/v1/namespaces/default/configmaps",
            &json!({"metadata": {"name": "c"}, "data": {"k": 5}}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    let r = s
        .post(
            "/api/v1/namespaces/default/configmaps",
            &json!({"metadata": {"name": "c", "labels": {"bad key": "v"}, "annotations": {"a": "x".repeat(256 * 1024)}}}),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(
        causes(&r.body),
        vec![
            (
                "metadata.labels".to_string(),
                "FieldValueInvalid".to_string()
            ),
            (
                "metadata.annotations".to_string(),
                "FieldValueTooLong".to_string()
            ),
        ]
    );
}

#[tokio::test]
async fn dry_run_stores_nothing() {
    let s = start().await;
    let cm = "/api/v1/namespaces/default/configmaps";
    let r = s
        .post(
            &format!("{cm}?dryRun=All"),
            &json!({"metadata": {"name": "dry"}, "data": {"a": "1"}}),
        )
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(r.body["data"]["a"], "1");
    assert_eq!(s.get(&format!("{cm}/dry")).await.status, 404);
    // Validation still runs.
    let r = s
        .post(
            &format!("{cm}?dryRun=All"),
            &json!({"metadata": {"name": "Bad"}}),
        )
        .await;
    assert_eq!(r.status, 422);
    lb(&s, "keep").await;
    let before = s.get(&format!("{SVC}/keep")).await.body;
    let r = s
        .patch(
            &format!("{SVC}/keep?dryRun=All"),
            "application/merge-patch+json",
            &json!({"metadata": {"labels": {"x": "y"}}}),
        )
        .await;
    assert_eq!(r.body["metadata"]["labels"]["x"], "y");
    let r = s
        .delete(&format!("{SVC}/keep"), Some(&json!({"dryRun": ["All"]})))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["kind"], "Service");
    assert_eq!(s.get(&format!("{SVC}/keep")).await.body, before);
    let r = s
        .post(
            &format!("{cm}?dryRun=Some"),
            &json!({"metadata": {"name": "x"}}),
        )
        .await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn delete_answers_per_kind() {
    let s = start().await;
    lb(&s, "gone").await;
    let r = s.delete(&format!("{SVC}/gone"), None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["kind"], "Service");
    assert_eq!(r.body["metadata"]["name"], "gone");
    s.post(
        "/api/v1/namespaces/default/configmaps",
        &json!({"metadata": {"name": "c"}}),
    )
    .await;
    let r = s
        .delete("/api/v1/namespaces/default/configmaps/c", None)
        .await;
    assert_eq!(r.body["kind"], "Status");
    assert_eq!(r.body["status"], "Success");
}

#[tokio::test]
async fn field_selectors_list_versions_and_watch_parameters() {
    let s = start().await;
    let r = s
        .get("/api/v1/namespaces/default/configmaps?fieldSelector=data.i%3D3")
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["message"], "field label not supported: data.i");
    assert_eq!(
        s.get("/api/v1/nodes?fieldSelector=spec.unschedulable%3Dtrue")
            .await
            .status,
        200
    );
    assert_eq!(
        s.get(&format!("{SVC}?fieldSelector=spec.type%3DLoadBalancer"))
            .await
            .status,
        200
    );

    // An exact list at an older version shows that version; a compacted one is 410.
    assert_eq!(s.post("/api/v1/nodes", &node("a")).await.status, 201);
    let rv = common::rv(&s.get("/api/v1/nodes").await.body);
    assert_eq!(s.post("/api/v1/nodes", &node("b")).await.status, 201);
    let old = s
        .get(&format!(
            "/api/v1/nodes?resourceVersion={rv}&resourceVersionMatch=Exact"
        ))
        .await;
    assert_eq!(old.status, 200, "{}", old.body);
    assert_eq!(common::names(&old.body), vec!["a"]);
    assert_eq!(old.body["metadata"]["resourceVersion"], rv);
    s.sim.compact();
    let gone = s
        .get(&format!(
            "/api/v1/nodes?resourceVersion={rv}&resourceVersionMatch=Exact"
        ))
        .await;
    assert_eq!(gone.status, 410, "{}", gone.body);
    assert_eq!(gone.body["reason"], "Expired");
    let r = s.get("/api/v1/nodes?resourceVersionMatch=Exact").await;
    assert_eq!(r.status, 422);
    assert_eq!(r.body["details"]["kind"], "ListOptions");
    let r = s.get("/api/v1/nodes?resourceVersion=999999").await;
    assert_eq!(r.status, 504);

    // sendInitialEvents needs resourceVersionMatch=NotOlderThan and bookmarks.
    let r = s.get("/api/v1/nodes?watch=1&sendInitialEvents=true").await;
    assert_eq!(r.status, 422, "{}", r.body);
    let fields: Vec<String> = causes(&r.body).into_iter().map(|(f, _)| f).collect();
    assert_eq!(fields, vec!["resourceVersionMatch", "allowWatchBookmarks"]);
    let r = s.get("/api/v1/nodes?sendInitialEvents=true").await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn unknown_fields_are_dropped_warned_or_refused() {
    let s = start().await;
    let cm = "/api/v1/namespaces/default/configmaps";
    let body = json!({"metadata": {"name": "u", "nmae": "typo"}, "bogus": 1, "data": {"a": "1"}});
    let r = s.post(&format!("{cm}?fieldValidation=Strict"), &body).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(
        r.body["message"],
        "strict decoding error: unknown field \"bogus\", unknown field \"metadata.nmae\""
    );
    let r = s.post(cm, &body).await;
    assert_eq!(r.status, 201);
    let warnings: Vec<&str> = r
        .headers
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    assert_eq!(
        warnings,
        vec![
            "299 - \"unknown field \\\"bogus\\\"\"",
            "299 - \"unknown field \\\"metadata.nmae\\\"\""
        ]
    );
    assert!(r.body.get("bogus").is_none());
    assert!(r.body["metadata"].get("nmae").is_none());
    // A status patch with a misspelled ingress field loses it, as a typed decode would.
    lb(&s, "typo").await;
    let r = status_patch(
        &s,
        "typo",
        json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.3", "ipmode": "Proxy"}]}}),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body["status"]["loadBalancer"]["ingress"],
        json!([{"ip": "192.0.2.3", "ipMode": "VIP"}])
    );
}

#[tokio::test]
async fn a_watch_on_one_event_api_sees_writes_through_the_other() {
    let s = start().await;
    let mut v1 = s
        .watch("/apis/events.k8s.io/v1/namespaces/default/events?watch=1")
        .await;
    let mut core = s
        .watch("/api/v1/namespaces/default/events?watch=1&fieldSelector=reason%3DDeletingNode")
        .await;
    let legacy = json!({
        "metadata": {"name": "n1.1"},
        "involvedObject": {"kind": "Node", "name": "n1"},
        "reason": "DeletingNode", "message": "Deleting node n1", "type": "Normal",
        "source": {"component": "cloud-node-lifecycle-controller"}
    });
    let r = s.post("/api/v1/namespaces/default/events", &legacy).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let seen = v1.next().await;
    assert_eq!(seen["type"], "ADDED");
    assert_eq!(seen["object"]["apiVersion"], "events.k8s.io/v1");
    assert_eq!(seen["object"]["note"], "Deleting node n1");
    assert_eq!(seen["object"]["regarding"]["name"], "n1");
    assert_eq!(
        seen["object"]["deprecatedSource"]["component"],
        "cloud-node-lifecycle-controller"
    );
    assert_eq!(
        seen["object"]["metadata"]["resourceVersion"],
        r.body["metadata"]["resourceVersion"]
    );
    let seen = core.next().await;
    assert_eq!(seen["object"]["message"], "Deleting node n1");
    // `source` selects on source.component, as the event registry's selectable fields do.
    let by_source = s
        .get("/api/v1/namespaces/default/events?fieldSelector=source%3Dcloud-node-lifecycle-controller")
        .await;
    assert_eq!(common::names(&by_source.body), vec!["n1.1"]);
}

#[tokio::test]
async fn micro_times_are_decoded_strictly() {
    let s = start().await;
    let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    let lease = |name: &str, t: &str| json!({"metadata": {"name": name}, "spec": {"holderIdentity": "a", "renewTime": t}});
    // metav1.MicroTime needs six fractional digits, as Go's parser of RFC3339Micro does.
    let r = s.post(leases, &lease("a", "2026-01-01T00:00:00Z")).await;
    assert_eq!(r.status, 400, "{}", r.body);
    let r = s
        .post(leases, &lease("b", "2026-01-01T00:00:00.000000Z"))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
}

#[tokio::test]
async fn strategic_merge_directives_are_not_unknown_fields() {
    let s = start().await;
    assert_eq!(s.post("/api/v1/nodes", &node("n1")).await.status, 201);
    let r = s
        .patch(
            "/api/v1/nodes/n1/status?fieldValidation=Strict",
            "application/strategic-merge-patch+json",
            &json!({"status": {
                "$setElementOrder/conditions": [{"type": "NetworkUnavailable"}],
                "conditions": [{"type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated"}]
            }}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.headers.get("warning").is_none());
}
