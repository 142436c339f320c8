//! Merge, JSON and strategic merge patches, the refusal of server-side apply, and status
//! subresource isolation.

mod common;

use common::{lb_service, node, rv};
use serde_json::json;
use wasm_ccm_sim::kube::PatchKind;

const MERGE: &str = "application/merge-patch+json";
const JSON: &str = "application/json-patch+json";
const SMP: &str = "application/strategic-merge-patch+json";

#[tokio::test]
async fn merge_patch() {
    let s = common::start().await;
    let mut n = node("n1");
    n["metadata"]["labels"] = json!({"a": "1", "b": "2"});
    n["spec"] = json!({"taints": [{"key": "x", "effect": "NoSchedule"}, {"key": "y", "effect": "NoSchedule"}]});
    s.post("/api/v1/nodes", &n).await;
    let r = s
        .patch(
            "/api/v1/nodes/n1",
            MERGE,
            &json!({"metadata": {"labels": {"a": null, "c": "3"}}, "spec": {"taints": [{"key": "y", "effect": "NoSchedule"}], "providerID": "sim://n1"}}),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["metadata"]["labels"], json!({"b": "2", "c": "3"}));
    assert_eq!(
        r.body["spec"]["taints"],
        json!([{"key": "y", "effect": "NoSchedule"}])
    );
    assert_eq!(r.body["spec"]["providerID"], "sim://n1");

    // A resourceVersion in the patch is an optimistic lock.
    let stale = s
        .patch(
            "/api/v1/nodes/n1",
            MERGE,
            &json!({"metadata": {"resourceVersion": "1", "labels": {"d": "4"}}}),
        )
        .await;
    assert_eq!(stale.status, 409);
    let fresh = s
        .patch(
            "/api/v1/nodes/n1",
            MERGE,
            &json!({"metadata": {"resourceVersion": rv(&r.body), "labels": {"d": "4"}}}),
        )
        .await;
    assert_eq!(fresh.status, 200);

    let rename = s
        .patch(
            "/api/v1/nodes/n1",
            MERGE,
            &json!({"metadata": {"name": "n2"}}),
        )
        .await;
    assert_eq!(rename.status, 400);
    let uid = s
        .patch(
            "/api/v1/nodes/n1",
            MERGE,
            &json!({"metadata": {"uid": "other"}}),
        )
        .await;
    assert_eq!(uid.status, 409);
    let missing = s.patch("/api/v1/nodes/ghost", MERGE, &json!({})).await;
    assert_eq!(missing.status, 404);
    let unsupported = s
        .patch("/api/v1/nodes/n1", "application/json", &json!({}))
        .await;
    assert_eq!(unsupported.status, 415);
    assert_eq!(unsupported.body["reason"], "UnsupportedMediaType");
}

#[tokio::test]
async fn json_patch_with_test_guard() {
    let s = common::start().await;
    let mut svc = lb_service("default", "web");
    svc["metadata"]["finalizers"] = json!(["a"]);
    s.post("/api/v1/namespaces/default/services", &svc).await;
    let path = "/api/v1/namespaces/default/services/web";
    let ok = s
        .patch(
            path,
            JSON,
            &json!([
                {"op": "test", "path": "/metadata/finalizers", "value": ["a"]},
                {"op": "add", "path": "/metadata/finalizers/-", "value": "service.kubernetes.io/load-balancer-cleanup"}
            ]),
        )
        .await;
    assert_eq!(ok.status, 200);
    assert_eq!(
        ok.body["metadata"]["finalizers"],
        json!(["a", "service.kubernetes.io/load-balancer-cleanup"])
    );

    let failed = s
        .patch(
            path,
            JSON,
            &json!([
                {"op": "test", "path": "/metadata/finalizers", "value": ["a"]},
                {"op": "remove", "path": "/metadata/finalizers/0"}
            ]),
        )
        .await;
    assert_eq!(failed.status, 422);
    assert_eq!(failed.body["kind"], "Status");
    assert_eq!(failed.body["reason"], "Invalid");
    assert_eq!(
        failed.body["message"],
        "the server rejected our request due to an error in our request"
    );
    assert_eq!(
        failed.body["details"]["causes"][0]["reason"],
        "UnexpectedServerResponse"
    );
    let unchanged = s.get(path).await.body;
    assert_eq!(
        unchanged["metadata"]["finalizers"],
        ok.body["metadata"]["finalizers"]
    );
    assert_eq!(rv(&unchanged), rv(&ok.body));

    let malformed = s.patch(path, JSON, &json!({"op": "add"})).await;
    assert_eq!(malformed.status, 400);
}

#[tokio::test]
async fn strategic_merge_patch() {
    let s = common::start().await;
    let mut n = node("n1");
    n["metadata"]["finalizers"] = json!(["keep", "drop"]);
    n["status"] = json!({
        "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "NetworkUnavailable", "status": "True", "reason": "NoRouteCreated"}
        ],
        "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n1"}]
    });
    s.post("/api/v1/nodes", &n).await;

    let r = s
        .patch(
            "/api/v1/nodes/n1",
            SMP,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["drop"], "$setElementOrder/finalizers": ["keep", "new"], "finalizers": ["new"]}}),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["metadata"]["finalizers"], json!(["keep", "new"]));

    let r = s
        .patch(
            "/api/v1/nodes/n1/status",
            SMP,
            &json!({"status": {"conditions": [{"type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated"}]}}),
        )
        .await;
    assert_eq!(
        r.body["status"]["conditions"],
        json!([
            {"type": "Ready", "status": "True"},
            {"type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated"}
        ])
    );

    let r = s
        .patch(
            "/api/v1/nodes/n1/status",
            SMP,
            &json!({"status": {"addresses": [
                {"$patch": "replace"},
                {"type": "InternalIP", "address": "10.0.0.2"},
                {"type": "InternalIP", "address": "10.0.0.3"}
            ]}}),
        )
        .await;
    assert_eq!(
        r.body["status"]["addresses"],
        json!([{"type": "InternalIP", "address": "10.0.0.2"}, {"type": "InternalIP", "address": "10.0.0.3"}])
    );

    // Taints have no merge key: replaced.
    s.patch(
        "/api/v1/nodes/n1",
        SMP,
        &json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}}),
    )
    .await;
    let r = s
        .patch(
            "/api/v1/nodes/n1",
            SMP,
            &json!({"spec": {"taints": [{"key": "b", "effect": "NoSchedule"}]}}),
        )
        .await;
    assert_eq!(
        r.body["spec"]["taints"],
        json!([{"key": "b", "effect": "NoSchedule"}])
    );

    let bad = s
        .patch(
            "/api/v1/nodes/n1/status",
            SMP,
            &json!({"status": {"conditions": [{"status": "True"}]}}),
        )
        .await;
    assert_eq!(bad.status, 422);
}

/// Server-side apply is refused with 415 (what an apiserver without it answers, and what
/// kubectl reports as "Server-side apply not available"), not approximated: without
/// managedFields a conflicting apply would succeed where the apiserver answers 409. Nothing is
/// created or changed; the other patch types keep working. managedFields a client sends are
/// not kept.
#[tokio::test]
async fn server_side_apply_is_refused() {
    let s = common::start().await;
    let lease = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/ccm";
    let body = b"apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: ccm\nspec:\n  holderIdentity: a\n".to_vec();
    for query in ["", "?fieldManager=test", "?fieldManager=test&force=true"] {
        let r = s
            .send(
                reqwest::Method::PATCH,
                &format!("{lease}{query}"),
                Some("application/apply-patch+yaml"),
                Some(body.clone()),
            )
            .await;
        assert_eq!(r.status, 415, "{query}: {}", r.body);
        assert_eq!(r.body["reason"], "UnsupportedMediaType");
        assert!(
            r.body["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("wasm-ccm-sim does not support server-side apply")),
            "{}",
            r.body
        );
    }
    assert!(s.sim.get("leases", Some("kube-system"), "ccm").is_none());

    // On an existing object too, and through the library; the merge patch is the control.
    let created = s
        .post(
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
            &json!({"metadata": {"name": "ccm", "managedFields": [{"manager": "x", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {}}]}, "spec": {"holderIdentity": "a"}}),
        )
        .await;
    assert_eq!(created.status, 201);
    assert!(
        created.body["metadata"].get("managedFields").is_none(),
        "{}",
        created.body
    );
    let applied = s
        .send(
            reqwest::Method::PATCH,
            &format!("{lease}?fieldManager=other&force=true"),
            Some("application/apply-patch+yaml"),
            Some(b"spec:\n  holderIdentity: b\n".to_vec()),
        )
        .await;
    assert_eq!(applied.status, 415);
    let refused = s.sim.patch(
        "leases",
        Some("kube-system"),
        "ccm",
        PatchKind::Apply,
        &json!({"spec": {"holderIdentity": "b"}}),
    );
    assert_eq!(refused.map_err(|e| e.code), Err(415));
    assert_eq!(
        s.sim
            .get("leases", Some("kube-system"), "ccm")
            .map(|l| l["spec"]["holderIdentity"].clone()),
        Some(json!("a"))
    );
    let merged = s
        .patch(lease, MERGE, &json!({"spec": {"holderIdentity": "b"}}))
        .await;
    assert_eq!(merged.status, 200);
    assert_eq!(merged.body["spec"]["holderIdentity"], "b");
}

#[tokio::test]
async fn status_subresource_isolation() {
    let s = common::start().await;
    let created = s
        .post(
            "/api/v1/namespaces/default/services",
            &lb_service("default", "web"),
        )
        .await;
    assert_eq!(created.status, 201);
    let path = "/api/v1/namespaces/default/services/web";

    // Main resource: status changes are ignored.
    let r = s
        .patch(path, MERGE, &json!({"spec": {"sessionAffinity": "ClientIP"}, "status": {"loadBalancer": {"ingress": [{"ip": "1.1.1.1"}]}}}))
        .await;
    assert_eq!(r.body["spec"]["sessionAffinity"], "ClientIP");
    assert_eq!(r.body["status"], json!({"loadBalancer": {}}));
    let mut put = r.body.clone();
    put["status"] = json!({"loadBalancer": {"ingress": [{"ip": "2.2.2.2"}]}});
    let r = s.put(path, &put).await;
    assert_eq!(r.body["status"], json!({"loadBalancer": {}}));

    // Status subresource: spec changes are ignored, status and metadata (finalizers) apply.
    let r = s
        .patch(
            &format!("{path}/status"),
            MERGE,
            &json!({"spec": {"sessionAffinity": "None"}, "status": {"loadBalancer": {"ingress": [{"ip": "3.3.3.3"}]}}, "metadata": {"finalizers": ["service.kubernetes.io/load-balancer-cleanup"]}}),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["spec"]["sessionAffinity"], "ClientIP");
    assert_eq!(
        r.body["status"]["loadBalancer"]["ingress"][0]["ip"],
        "3.3.3.3"
    );
    assert_eq!(
        r.body["metadata"]["finalizers"],
        json!(["service.kubernetes.io/load-balancer-cleanup"])
    );

    let mut put = r.body.clone();
    put["spec"]["type"] = json!("ClusterIP");
    put["status"] = json!({"loadBalancer": {}});
    let r = s.put(&format!("{path}/status"), &put).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["spec"]["type"], "LoadBalancer");
    assert_eq!(r.body["status"], json!({"loadBalancer": {}}));

    // Leases have no status subresource.
    assert_eq!(
        s.get("/apis/coordination.k8s.io/v1/namespaces/default/leases/x/status")
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn node_provider_id_is_immutable_and_taints_validated() {
    let s = common::start().await;
    s.post("/api/v1/nodes", &node("n1")).await;
    let set = s
        .patch(
            "/api/v1/nodes/n1",
            MERGE,
            &json!({"spec": {"providerID": "sim://n1"}}),
        )
        .await;
    assert_eq!(set.status, 200);
    let change = s
        .patch(
            "/api/v1/nodes/n1",
            MERGE,
            &json!({"spec": {"providerID": "sim://other"}}),
        )
        .await;
    assert_eq!(change.status, 422);
    assert_eq!(change.body["reason"], "Invalid");
    let bad_taint = s
        .patch(
            "/api/v1/nodes/n1",
            MERGE,
            &json!({"spec": {"taints": [{"key": "a", "effect": "Never"}]}}),
        )
        .await;
    assert_eq!(bad_taint.status, 422);
}
