//! Deletion: finalizers, deletionTimestamp, preconditions.

mod common;

use common::{lb_service, node, rv};
use serde_json::json;

const CLEANUP: &str = "service.kubernetes.io/load-balancer-cleanup";

#[tokio::test]
async fn finalizer_deletion_flow() {
    let s = common::start().await;
    let mut svc = lb_service("default", "web");
    svc["metadata"]["finalizers"] = json!([CLEANUP]);
    let created = s
        .post("/api/v1/namespaces/default/services", &svc)
        .await
        .body;
    let path = "/api/v1/namespaces/default/services/web";
    let mut watch = s
        .watch(&format!(
            "/api/v1/namespaces/default/services?watch=true&resourceVersion={}",
            rv(&created)
        ))
        .await;

    let deleting = s.delete(path, None).await;
    assert_eq!(deleting.status, 200);
    assert_eq!(deleting.body["kind"], "Service");
    assert!(
        deleting.body["metadata"]["deletionTimestamp"]
            .as_str()
            .is_some()
    );
    assert_eq!(deleting.body["metadata"]["deletionGracePeriodSeconds"], 0);
    let e = watch.next().await;
    assert_eq!(e["type"], "MODIFIED");
    assert!(e["object"]["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(
        s.get(path).await.status,
        200,
        "still there while the finalizer remains"
    );

    // Deleting again changes nothing.
    let again = s.delete(path, None).await;
    assert_eq!(rv(&again.body), rv(&deleting.body));

    // No new finalizers on a terminating object.
    let add = s
        .patch(
            &format!("{path}/status"),
            "application/merge-patch+json",
            &json!({"metadata": {"finalizers": [CLEANUP, "other"]}}),
        )
        .await;
    assert_eq!(add.status, 422);
    assert_eq!(add.body["reason"], "Invalid");
    assert!(
        add.body["message"].as_str().is_some_and(
            |m| m.contains("no new finalizers can be added if the object is being deleted")
        ),
        "{}",
        add.body
    );

    // Removing the last finalizer (through /status, like the service controller) deletes it.
    let removed = s
        .patch(
            &format!("{path}/status"),
            "application/strategic-merge-patch+json",
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [CLEANUP]}}),
        )
        .await;
    assert_eq!(removed.status, 200);
    let e = watch.next().await;
    assert_eq!(e["type"], "DELETED");
    assert_eq!(e["object"]["metadata"]["name"], "web");
    assert_eq!(s.get(path).await.status, 404);
    assert!(s.sim.get("services", Some("default"), "web").is_none());
}

#[tokio::test]
async fn delete_without_finalizers_returns_success_status() {
    let s = common::start().await;
    s.post("/api/v1/nodes", &node("n1")).await;
    let r = s.delete("/api/v1/nodes/n1", None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["kind"], "Status");
    assert_eq!(r.body["status"], "Success");
    assert_eq!(r.body["details"]["name"], "n1");
    assert_eq!(s.delete("/api/v1/nodes/n1", None).await.status, 404);
}

#[tokio::test]
async fn delete_preconditions() {
    let s = common::start().await;
    let created = s.post("/api/v1/nodes", &node("n1")).await.body;
    let uid = created["metadata"]["uid"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let r = s
        .delete("/api/v1/nodes/n1", Some(&json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "wrong"}})))
        .await;
    assert_eq!(r.status, 409);
    assert_eq!(r.body["reason"], "Conflict");
    assert_eq!(
        r.body["message"],
        format!(
            "Operation cannot be fulfilled on nodes \"n1\": Precondition failed: UID in precondition: wrong, UID in object meta: {uid}"
        )
    );
    let r = s
        .delete(
            "/api/v1/nodes/n1",
            Some(&json!({"preconditions": {"resourceVersion": "1"}})),
        )
        .await;
    assert_eq!(r.status, 409);
    let r = s
        .delete(
            "/api/v1/nodes/n1",
            Some(&json!({"preconditions": {"uid": uid, "resourceVersion": rv(&created)}})),
        )
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn library_helpers_share_the_write_path() {
    let s = common::start().await;
    let mut n = node("n1");
    n["metadata"]["finalizers"] = json!(["f"]);
    let created = s.sim.create(n).expect("create");
    let mut watch = s
        .watch(&format!(
            "/api/v1/nodes?watch=1&resourceVersion={}",
            rv(&created)
        ))
        .await;
    let modified = s
        .sim
        .modify("nodes", None, "n1", |n| n["status"] = json!({"phase": "x"}))
        .expect("modify");
    assert!(rv(&modified).parse::<u64>().unwrap_or(0) > rv(&created).parse::<u64>().unwrap_or(0));
    assert_eq!(
        watch.next_named().await,
        ("MODIFIED".to_string(), "n1".to_string())
    );
    let terminating = s.sim.remove("nodes", None, "n1").expect("remove");
    assert!(terminating["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(watch.next().await["type"], "MODIFIED");
    s.sim
        .modify("nodes", None, "n1", |n| {
            n["metadata"]["finalizers"] = json!([])
        })
        .expect("modify");
    assert_eq!(watch.next().await["type"], "DELETED");
    assert!(s.sim.get("nodes", None, "n1").is_none());

    assert_eq!(s.sim.update(node("ghost")).map_err(|e| e.code), Err(404));
    let err = s
        .sim
        .create(json!({"apiVersion": "v1", "kind": "Widget", "metadata": {"name": "w"}}));
    assert_eq!(err.map_err(|e| e.code), Err(400));
}
