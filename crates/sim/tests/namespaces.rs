//! Namespace deletion as on an apiserver: `Terminating` while content is left, the namespace
//! controller's conditions, no new content, gone once empty and finalized
//! (pkg/registry/core/namespace/, pkg/controller/namespace/deletion/, k8s.io/apiserver
//! pkg/admission/plugin/namespace/lifecycle/).

mod common;

use common::{lb_service, rv};
use serde_json::{Value, json};

const CLEANUP: &str = "service.kubernetes.io/load-balancer-cleanup";

/// The condition of `ty` on a namespace.
fn condition<'a>(ns: &'a Value, ty: &str) -> &'a Value {
    ns["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == ty))
        .unwrap_or(&Value::Null)
}

#[tokio::test]
async fn a_namespace_terminates_until_its_content_is_gone() {
    let s = common::start().await;
    let created = s
        .post("/api/v1/namespaces", &json!({"metadata": {"name": "team"}}))
        .await;
    assert_eq!(created.status, 201);
    assert_eq!(created.body["spec"]["finalizers"], json!(["kubernetes"]));
    let mut svc = lb_service("team", "web");
    svc["metadata"]["finalizers"] = json!([CLEANUP]);
    assert_eq!(
        s.post("/api/v1/namespaces/team/services", &svc)
            .await
            .status,
        201
    );
    let cm = json!({"metadata": {"name": "plain"}});
    assert_eq!(
        s.post("/api/v1/namespaces/team/configmaps", &cm)
            .await
            .status,
        201
    );
    let mut watch = s
        .watch(&format!(
            "/api/v1/namespaces?watch=1&fieldSelector=metadata.name%3Dteam&resourceVersion={}",
            rv(&created.body)
        ))
        .await;

    // The first DELETE answers the namespace, now Terminating.
    let deleting = s.delete("/api/v1/namespaces/team", None).await;
    assert_eq!(deleting.status, 200);
    assert_eq!(deleting.body["kind"], "Namespace");
    assert_eq!(deleting.body["status"]["phase"], "Terminating");
    assert!(deleting.body["metadata"]["deletionTimestamp"].is_string());
    let e = watch.next().await;
    assert_eq!(
        (&e["type"], &e["object"]["status"]["phase"]),
        (&json!("MODIFIED"), &json!("Terminating"))
    );

    // The controller's pass: the ConfigMap went, the Service waits for its finalizer.
    let ns = s.get("/api/v1/namespaces/team").await.body;
    assert_eq!(ns["status"]["phase"], "Terminating");
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(ns["status"]["conditions"].as_array().map(Vec::len), Some(5));
    let remaining = condition(&ns, "NamespaceContentRemaining");
    assert_eq!(remaining["status"], "True");
    assert_eq!(remaining["reason"], "SomeResourcesRemain");
    assert_eq!(
        remaining["message"],
        "Some resources are remaining: services. has 1 resource instances"
    );
    assert_eq!(
        condition(&ns, "NamespaceFinalizersRemaining")["message"],
        format!(
            "Some content in the namespace has finalizers remaining: {CLEANUP} in 1 resource instances"
        )
    );
    assert_eq!(
        condition(&ns, "NamespaceDeletionDiscoveryFailure")["status"],
        "False"
    );
    assert_eq!(
        s.get("/api/v1/namespaces/team/configmaps/plain")
            .await
            .status,
        404
    );
    let web = s.get("/api/v1/namespaces/team/services/web").await.body;
    assert!(web["metadata"]["deletionTimestamp"].is_string(), "{web}");

    // A second DELETE answers the namespace as it is.
    let again = s.delete("/api/v1/namespaces/team", None).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.body["status"]["phase"], "Terminating");

    // No new content (NamespaceLifecycle): 403 with the NamespaceTerminating cause, named by
    // the object's name or generateName; positive control: another namespace takes it.
    let refused = s
        .post(
            "/api/v1/namespaces/team/configmaps",
            &json!({"metadata": {"name": "late"}}),
        )
        .await;
    assert_eq!(refused.status, 403);
    assert_eq!(refused.body["reason"], "Forbidden");
    assert_eq!(
        refused.body["message"],
        "configmaps \"late\" is forbidden: unable to create new content in namespace team because it is being terminated"
    );
    assert_eq!(
        refused.body["details"],
        json!({"name": "late", "kind": "configmaps", "causes": [{
            "reason": "NamespaceTerminating",
            "message": "namespace team is being terminated",
            "field": "metadata.namespace",
        }]})
    );
    let generated = s
        .post(
            "/apis/coordination.k8s.io/v1/namespaces/team/leases",
            &json!({"metadata": {"generateName": "l-"}}),
        )
        .await;
    assert_eq!(generated.status, 403);
    assert_eq!(
        generated.body["message"],
        "leases.coordination.k8s.io \"l-\" is forbidden: unable to create new content in namespace team because it is being terminated"
    );
    assert_eq!(
        s.post(
            "/api/v1/namespaces/default/configmaps",
            &json!({"metadata": {"name": "late"}})
        )
        .await
        .status,
        201
    );

    // A write of the main resource keeps spec.finalizers and the status
    // (`namespaceStrategy.PrepareForUpdate`); the status follows deletionTimestamp
    // (`ValidateNamespaceStatusUpdate`).
    let kept = s
        .patch(
            "/api/v1/namespaces/team",
            "application/merge-patch+json",
            &json!({"metadata": {"labels": {"x": "y"}}, "spec": {"finalizers": null}, "status": {"phase": "Active"}}),
        )
        .await;
    assert_eq!(kept.status, 200, "{}", kept.body);
    assert_eq!(kept.body["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(kept.body["status"]["phase"], "Terminating");
    assert_eq!(kept.body["metadata"]["labels"]["x"], "y");
    let revived = s
        .patch(
            "/api/v1/namespaces/team/status",
            "application/merge-patch+json",
            &json!({"status": {"phase": "Active"}}),
        )
        .await;
    assert_eq!(revived.status, 422);
    assert_eq!(
        revived.body["message"],
        "Namespace \"team\" is invalid: status.Phase: Invalid value: \"Active\": may only be 'Terminating' if `deletionTimestamp` is not empty"
    );

    // The service controller's cleanup removes the last finalizer: the namespace goes.
    let released = s
        .patch(
            "/api/v1/namespaces/team/services/web",
            "application/merge-patch+json",
            &json!({"metadata": {"finalizers": null}}),
        )
        .await;
    assert_eq!(released.status, 200);
    assert_eq!(s.get("/api/v1/namespaces/team").await.status, 404);
    loop {
        let e = watch.next().await;
        if e["type"] == "DELETED" {
            assert_eq!(
                condition(&e["object"], "NamespaceContentRemaining")["status"],
                "False"
            );
            assert!(e["object"]["spec"].get("finalizers").is_none(), "{e}");
            break;
        }
        assert_eq!(e["type"], "MODIFIED", "{e}");
    }
    assert!(s.sim.get("namespaces", None, "team").is_none());
}

#[tokio::test]
async fn a_namespace_of_its_own_finalizers_stays_until_they_go() {
    let s = common::start().await;
    let ns = json!({"metadata": {"name": "kept", "finalizers": ["example.com/keep"]}});
    assert_eq!(s.post("/api/v1/namespaces", &ns).await.status, 201);
    // An empty namespace is finalized at once (the `kubernetes` finalizer goes) ...
    assert_eq!(s.delete("/api/v1/namespaces/kept", None).await.status, 200);
    let ns = s.get("/api/v1/namespaces/kept").await;
    assert_eq!(ns.status, 200, "its own finalizer keeps it");
    assert_eq!(ns.body["status"]["phase"], "Terminating");
    assert!(ns.body["spec"].get("finalizers").is_none(), "{}", ns.body);
    // ... and goes when its own finalizer does (`ShouldDeleteNamespaceDuringUpdate`).
    let released = s
        .patch(
            "/api/v1/namespaces/kept",
            "application/merge-patch+json",
            &json!({"metadata": {"finalizers": null}}),
        )
        .await;
    assert_eq!(released.status, 200);
    assert_eq!(s.get("/api/v1/namespaces/kept").await.status, 404);

    // Without finalizers and content the namespace is gone after the DELETE.
    assert_eq!(
        s.post(
            "/api/v1/namespaces",
            &json!({"metadata": {"name": "empty"}})
        )
        .await
        .status,
        201
    );
    let answer = s.delete("/api/v1/namespaces/empty", None).await;
    assert_eq!(answer.body["status"]["phase"], "Terminating");
    assert_eq!(s.get("/api/v1/namespaces/empty").await.status, 404);

    // A server dry run of the DELETE changes nothing.
    assert_eq!(
        s.post("/api/v1/namespaces", &json!({"metadata": {"name": "dry"}}))
            .await
            .status,
        201
    );
    let dry = s.delete("/api/v1/namespaces/dry?dryRun=All", None).await;
    assert_eq!(dry.body["status"]["phase"], "Terminating");
    let ns = s.get("/api/v1/namespaces/dry").await.body;
    assert_eq!(ns["status"]["phase"], "Active", "{ns}");
    assert!(ns["metadata"].get("deletionTimestamp").is_none());
}
