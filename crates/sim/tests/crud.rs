//! Create, get, list (selectors, pagination), update with optimistic concurrency, namespaces,
//! Service allocation.

mod common;

use common::{lb_service, names, node, rv};
use serde_json::json;

#[tokio::test]
async fn create_get_and_metadata() {
    let s = common::start().await;
    let r = s.post("/api/v1/nodes", &node("n1")).await;
    assert_eq!(r.status, 201);
    let created = r.body;
    assert_eq!(created["apiVersion"], "v1");
    assert_eq!(created["kind"], "Node");
    assert_eq!(created["metadata"]["uid"].as_str().map(str::len), Some(36));
    assert!(
        created["metadata"]["creationTimestamp"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    assert!(rv(&created).parse::<u64>().is_ok());

    let got = s.get("/api/v1/nodes/n1").await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body, created);
    assert_eq!(s.sim.get("nodes", None, "n1"), Some(created.clone()));

    let again = s.post("/api/v1/nodes", &node("n1")).await;
    assert_eq!(again.status, 409);
    assert_eq!(again.body["reason"], "AlreadyExists");
    assert_eq!(again.body["message"], "nodes \"n1\" already exists");
    assert_eq!(
        again.body["details"],
        json!({"name": "n1", "kind": "nodes"})
    );

    let missing = s.get("/api/v1/nodes/nope").await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.body["message"], "nodes \"nope\" not found");

    let lease = s
        .get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x")
        .await;
    assert_eq!(
        lease.body["message"],
        "leases.coordination.k8s.io \"x\" not found"
    );
    assert_eq!(lease.body["details"]["group"], "coordination.k8s.io");
}

#[tokio::test]
async fn create_validation() {
    let s = common::start().await;
    let gen_name = s
        .post(
            "/api/v1/namespaces/default/configmaps",
            &json!({"metadata": {"generateName": "cfg-"}, "data": {"a": "b"}}),
        )
        .await;
    assert_eq!(gen_name.status, 201);
    let name = gen_name.body["metadata"]["name"].as_str().unwrap_or("");
    assert!(name.starts_with("cfg-") && name.len() == 9, "{name}");
    assert_eq!(gen_name.body["kind"], "ConfigMap");

    let no_name = s.post("/api/v1/nodes", &json!({"metadata": {}})).await;
    assert_eq!(no_name.status, 422);
    assert_eq!(no_name.body["reason"], "Invalid");

    let bad_name = s.post("/api/v1/nodes", &node("Bad_Name")).await;
    assert_eq!(bad_name.status, 422);

    let wrong_ns = s
        .post(
            "/api/v1/namespaces/default/services",
            &lb_service("other", "web"),
        )
        .await;
    assert_eq!(wrong_ns.status, 400);
    assert_eq!(wrong_ns.body["reason"], "BadRequest");

    let wrong_kind = s
        .post(
            "/api/v1/nodes",
            &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}}),
        )
        .await;
    assert_eq!(wrong_kind.status, 400);

    let garbage = s
        .send(
            reqwest::Method::POST,
            "/api/v1/nodes",
            Some("application/json"),
            Some(b"{nope".to_vec()),
        )
        .await;
    assert_eq!(garbage.status, 400);

    let cbor = s
        .send(
            reqwest::Method::POST,
            "/api/v1/nodes",
            Some("application/cbor"),
            Some(vec![0xa0]),
        )
        .await;
    assert_eq!(cbor.status, 415);
    assert_eq!(cbor.body["reason"], "UnsupportedMediaType");
    assert_eq!(cbor.body["kind"], "Status");
    assert_eq!(cbor.body["code"], 415);
    let message = cbor.body["message"].as_str().unwrap_or("");
    assert!(
        message.contains("unknown format")
            && message.contains("application/vnd.kubernetes.protobuf")
            && message.contains("application/cbor"),
        "{message}"
    );

    // Protobuf: the envelope `k8s\0` + runtime.Unknown{typeMeta{apiVersion, kind}, raw}, around
    // a Node{metadata{name: "pb"}} (field numbers of core/v1 and meta/v1 generated.proto).
    let protobuf = |kind: &[u8], raw: &[u8]| {
        let mut type_meta = vec![0x0a, 2, b'v', b'1', 0x12, kind.len() as u8];
        type_meta.extend_from_slice(kind);
        let mut body = b"k8s\0".to_vec();
        body.extend([0x0a, type_meta.len() as u8]);
        body.extend(type_meta);
        body.extend([0x12, raw.len() as u8]);
        body.extend_from_slice(raw);
        body
    };
    let node_pb = [0x0a, 4, 0x0a, 2, b'p', b'b'];
    let created = s
        .send(
            reqwest::Method::POST,
            "/api/v1/nodes",
            Some("application/vnd.kubernetes.protobuf"),
            Some(protobuf(b"Node", &node_pb)),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.body["metadata"]["name"], "pb");
    assert_eq!(created.body["kind"], "Node");
    for (body, code, wanted) in [
        (b"k8s\0".to_vec(), 400, "Object 'Kind' is missing"),
        (
            protobuf(b"Node", &[0x0a, 4, 0x0a, 9, b'p', b'b']),
            400,
            "unable to decode protobuf message v1.ObjectMeta (metadata): length 9 at byte 1 runs past the end of the 4-byte message",
        ),
        (
            protobuf(b"Node", &[0x0a, 2, 0x78, 0x01]),
            400,
            "unable to decode protobuf field 15 of v1.ObjectMeta (in metadata): the simulator does not know this field",
        ),
        (
            protobuf(b"Pod", &node_pb),
            415,
            "send v1 Pod as application/json",
        ),
        (
            protobuf(b"Service", &node_pb),
            400,
            "the kind in the data (Service) does not match the expected kind (Node)",
        ),
    ] {
        let r = s
            .send(
                reqwest::Method::POST,
                "/api/v1/nodes",
                Some("application/vnd.kubernetes.protobuf"),
                Some(body),
            )
            .await;
        assert_eq!(r.status, code, "{}", r.body);
        let message = r.body["message"].as_str().unwrap_or("");
        assert!(message.contains(wanted), "{wanted:?} in {message:?}");
    }

    let yaml = s
        .send(
            reqwest::Method::POST,
            "/api/v1/nodes",
            Some("application/yaml"),
            Some(b"apiVersion: v1\nkind: Node\nmetadata:\n  name: from-yaml\n".to_vec()),
        )
        .await;
    assert_eq!(yaml.status, 201);
}

#[tokio::test]
async fn namespaces_must_exist() {
    let s = common::start().await;
    let r = s
        .post(
            "/api/v1/namespaces/nowhere/services",
            &lb_service("nowhere", "web"),
        )
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.body["message"], "namespaces \"nowhere\" not found");
    assert_eq!(r.body["details"]["kind"], "namespaces");

    let ns = s.get("/api/v1/namespaces").await.body;
    for n in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(names(&ns).contains(&n.to_string()), "{n}");
    }
    let default = s.get("/api/v1/namespaces/default").await.body;
    assert_eq!(default["status"]["phase"], "Active");
    assert!(default["metadata"]["uid"].as_str().is_some());

    let created = s
        .post("/api/v1/namespaces", &json!({"metadata": {"name": "team"}}))
        .await;
    assert_eq!(created.status, 201);
    let svc = s
        .post(
            "/api/v1/namespaces/team/services",
            &lb_service("team", "web"),
        )
        .await;
    assert_eq!(svc.status, 201);

    // Deleting a namespace deletes its contents (the namespace controller's job).
    let del = s.delete("/api/v1/namespaces/team", None).await;
    assert_eq!(del.status, 200);
    assert_eq!(
        s.get("/api/v1/namespaces/team/services/web").await.status,
        404
    );
    assert_eq!(
        s.delete("/api/v1/namespaces/default", None).await.status,
        403
    );

    // Delete in a namespace that does not exist.
    let r = s
        .delete("/api/v1/namespaces/nowhere/services/web", None)
        .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn list_with_selectors() {
    let s = common::start().await;
    for (name, zone, role) in [
        ("a", "z1", "web"),
        ("b", "z1", "db"),
        ("c", "z2", "web"),
        ("d", "", ""),
    ] {
        let mut n = node(name);
        if !zone.is_empty() {
            n["metadata"]["labels"] = json!({"zone": zone, "role": role});
        }
        assert_eq!(s.post("/api/v1/nodes", &n).await.status, 201);
    }
    let list = s.get("/api/v1/nodes").await;
    assert_eq!(list.body["kind"], "NodeList");
    assert_eq!(list.body["apiVersion"], "v1");
    assert_eq!(rv(&list.body), s.sim.resource_version().to_string());
    assert_eq!(list.body["items"][0]["kind"], "Node");
    assert_eq!(names(&list.body), ["a", "b", "c", "d"]);

    let q = |sel: &str| format!("/api/v1/nodes?labelSelector={}", urlencode(sel));
    let cases: &[(&str, &[&str])] = &[
        ("zone=z1", &["a", "b"]),
        ("zone==z1", &["a", "b"]),
        ("zone!=z1", &["c", "d"]),
        ("zone", &["a", "b", "c"]),
        ("!zone", &["d"]),
        ("zone in (z1,z2),role=web", &["a", "c"]),
        ("role notin (web)", &["b", "d"]),
    ];
    for (sel, want) in cases {
        let got = s.get(&q(sel)).await;
        assert_eq!(got.status, 200, "{sel}");
        assert_eq!(names(&got.body), *want, "{sel}");
    }
    let bad = s.get(&q("zone in z1")).await;
    assert_eq!(bad.status, 400);

    let f = s.get("/api/v1/nodes?fieldSelector=metadata.name%3Db").await;
    assert_eq!(names(&f.body), ["b"]);
    let f = s
        .get("/api/v1/nodes?fieldSelector=metadata.name!%3Db")
        .await;
    assert_eq!(names(&f.body), ["a", "c", "d"]);

    s.post(
        "/api/v1/namespaces/default/services",
        &lb_service("default", "lb"),
    )
    .await;
    let mut cip = lb_service("kube-system", "cip");
    cip["spec"]["type"] = json!("ClusterIP");
    s.post("/api/v1/namespaces/kube-system/services", &cip)
        .await;
    let all = s.get("/api/v1/services").await.body;
    assert_eq!(names(&all), ["lb", "cip"]);
    let lbs = s
        .get("/api/v1/services?fieldSelector=spec.type%3DLoadBalancer")
        .await
        .body;
    assert_eq!(names(&lbs), ["lb"]);
    let ns = s
        .get("/api/v1/services?fieldSelector=metadata.namespace%3Dkube-system")
        .await
        .body;
    assert_eq!(names(&ns), ["cip"]);
    let in_ns = s.get("/api/v1/namespaces/kube-system/services").await.body;
    assert_eq!(names(&in_ns), ["cip"]);
    assert_eq!(in_ns["kind"], "ServiceList");
}

#[tokio::test]
async fn list_pagination() {
    let s = common::start().await;
    for i in 0..5 {
        s.post("/api/v1/nodes", &node(&format!("n{i}"))).await;
    }
    let first = s.get("/api/v1/nodes?limit=2").await.body;
    assert_eq!(names(&first), ["n0", "n1"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 3);
    let token = first["metadata"]["continue"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let second = s
        .get(&format!("/api/v1/nodes?limit=2&continue={token}"))
        .await
        .body;
    assert_eq!(names(&second), ["n2", "n3"]);
    assert_eq!(
        rv(&second),
        rv(&first),
        "pages share the snapshot's resourceVersion"
    );
    let token = second["metadata"]["continue"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let last = s
        .get(&format!("/api/v1/nodes?limit=2&continue={token}"))
        .await
        .body;
    assert_eq!(names(&last), ["n4"]);
    assert!(last["metadata"].get("continue").is_none());
    assert_eq!(s.get("/api/v1/nodes?continue=garbage").await.status, 400);
}

/// The apiserver reads later pages from the first page's snapshot (etcd3 `GetList` with
/// `withRev = continueRV`, k8s.io/apiserver pkg/storage/etcd3/store.go); once that snapshot is
/// compacted the continue is 410 with a token that goes on at the latest version
/// (`handleCompactedErrorForPaging`).
#[tokio::test]
async fn later_pages_come_from_the_first_pages_snapshot() {
    let s = common::start().await;
    for i in 0..4 {
        s.post("/api/v1/nodes", &node(&format!("n{i}"))).await;
    }
    let first = s.get("/api/v1/nodes?limit=2").await.body;
    assert_eq!(names(&first), ["n0", "n1"]);
    let token = first["metadata"]["continue"]
        .as_str()
        .unwrap_or("")
        .to_string();
    // Changes after the first page: none of them shows on the second.
    assert_eq!(s.delete("/api/v1/nodes/n2", None).await.status, 200);
    s.post("/api/v1/nodes", &node("n5")).await;
    let labelled = s
        .patch(
            "/api/v1/nodes/n3",
            "application/merge-patch+json",
            &json!({"metadata": {"labels": {"late": "yes"}}}),
        )
        .await;
    assert_eq!(labelled.status, 200);
    let second = s
        .get(&format!("/api/v1/nodes?limit=2&continue={token}"))
        .await
        .body;
    assert_eq!(names(&second), ["n2", "n3"]);
    assert!(
        second["items"][1]["metadata"].get("labels").is_none(),
        "{second}"
    );
    assert_eq!(rv(&second), rv(&first));
    assert!(second["metadata"].get("continue").is_none(), "{second}");
    // A fresh list sees them (positive control).
    assert_eq!(
        names(&s.get("/api/v1/nodes").await.body),
        ["n0", "n1", "n3", "n5"]
    );
    // The legacy exact match: a version with a limit and no resourceVersionMatch.
    let legacy = s
        .get(&format!(
            "/api/v1/nodes?limit=10&resourceVersion={}",
            rv(&first)
        ))
        .await
        .body;
    assert_eq!(names(&legacy), ["n0", "n1", "n2", "n3"]);

    // A version beside a token is refused; "0" is not a version here.
    let both = s
        .get(&format!(
            "/api/v1/nodes?limit=2&continue={token}&resourceVersion=3"
        ))
        .await;
    assert_eq!(both.status, 400);
    assert_eq!(
        both.body["message"],
        "specifying resource version is not allowed when using continue"
    );
    let zero = s
        .get(&format!(
            "/api/v1/nodes?limit=2&continue={token}&resourceVersion=0"
        ))
        .await;
    assert_eq!(zero.status, 200);
    assert_eq!(names(&zero.body), ["n2", "n3"]);
    let garbage = s.get("/api/v1/nodes?continue=garbage").await;
    assert_eq!(garbage.status, 400);
    assert!(
        garbage.body["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("invalid continue token: continue key is not valid")),
        "{}",
        garbage.body
    );

    // Compacted: 410 Expired, and the Status's token pages on at the latest version.
    let first = s.get("/api/v1/nodes?limit=1").await.body;
    let token = first["metadata"]["continue"]
        .as_str()
        .unwrap_or("")
        .to_string();
    s.post("/api/v1/nodes", &node("n4")).await;
    s.sim.compact();
    let expired = s
        .get(&format!("/api/v1/nodes?limit=1&continue={token}"))
        .await;
    assert_eq!(expired.status, 410);
    assert_eq!(expired.body["reason"], "Expired");
    assert!(
        expired.body["message"]
            .as_str()
            .is_some_and(|m| m.starts_with(
                "The provided continue parameter is too old to display a consistent list result."
            )),
        "{}",
        expired.body
    );
    let again = expired.body["metadata"]["continue"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(!again.is_empty() && again != token, "{}", expired.body);
    let rest = s.get(&format!("/api/v1/nodes?continue={again}")).await.body;
    assert_eq!(names(&rest), ["n1", "n3", "n4", "n5"]);
    assert_eq!(rv(&rest), s.sim.resource_version().to_string());
}

#[tokio::test]
async fn stale_update_conflicts() {
    let s = common::start().await;
    let created = s.post("/api/v1/nodes", &node("n1")).await.body;
    let mut first = created.clone();
    first["metadata"]["labels"] = json!({"a": "1"});
    let updated = s.put("/api/v1/nodes/n1", &first).await;
    assert_eq!(updated.status, 200);
    assert_ne!(rv(&updated.body), rv(&created));

    let mut stale = created.clone();
    stale["metadata"]["labels"] = json!({"b": "2"});
    let conflict = s.put("/api/v1/nodes/n1", &stale).await;
    assert_eq!(conflict.status, 409);
    assert_eq!(conflict.body["reason"], "Conflict");
    assert_eq!(
        conflict.body["message"],
        "Operation cannot be fulfilled on nodes \"n1\": the object has been modified; please apply your changes to the latest version and try again"
    );

    // Without a resourceVersion the update is unconditional.
    stale["metadata"]
        .as_object_mut()
        .map(|m| m.remove("resourceVersion"));
    assert_eq!(s.put("/api/v1/nodes/n1", &stale).await.status, 200);

    // A no-op update writes nothing.
    let current = s.get("/api/v1/nodes/n1").await.body;
    let same = s.put("/api/v1/nodes/n1", &current).await.body;
    assert_eq!(rv(&same), rv(&current));

    let missing = s.put("/api/v1/nodes/ghost", &node("ghost")).await;
    assert_eq!(missing.status, 404);
    let renamed = s.put("/api/v1/nodes/n1", &node("other")).await;
    assert_eq!(renamed.status, 400);
    let mut other_uid = current.clone();
    other_uid["metadata"]["uid"] = json!("not-the-uid");
    assert_eq!(s.put("/api/v1/nodes/n1", &other_uid).await.status, 409);
}

#[tokio::test]
async fn service_allocation() {
    let s = common::start().await;
    let mut svc = lb_service("default", "web");
    svc["spec"]["externalTrafficPolicy"] = json!("Local");
    svc["status"] = json!({"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}});
    let created = s
        .post("/api/v1/namespaces/default/services", &svc)
        .await
        .body;
    let spec = &created["spec"];
    assert!(
        spec["clusterIP"]
            .as_str()
            .is_some_and(|ip| ip.starts_with("10.96."))
    );
    assert_eq!(spec["clusterIPs"][0], spec["clusterIP"]);
    assert_eq!(spec["sessionAffinity"], "None");
    assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
    let np = spec["ports"][0]["nodePort"].as_u64().unwrap_or(0);
    assert!((30000..=32767).contains(&np));
    assert!(spec["healthCheckNodePort"].as_u64().is_some());
    // Services carry no metadata.generation on a real apiserver.
    assert!(created["metadata"].get("generation").is_none());
    assert_eq!(
        created["status"],
        json!({"loadBalancer": {}}),
        "status is cleared on create"
    );

    let mut taken = lb_service("default", "web2");
    taken["spec"]["ports"][0]["nodePort"] = json!(np);
    let r = s.post("/api/v1/namespaces/default/services", &taken).await;
    assert_eq!(r.status, 422);
    assert!(
        r.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("already allocated"))
    );

    // A spec change keeps the allocated node port.
    let mut changed = created.clone();
    changed["spec"]["ports"][0]
        .as_object_mut()
        .map(|p| p.remove("nodePort"));
    changed["spec"]["ports"][0]["name"] = json!("http");
    let updated = s
        .put("/api/v1/namespaces/default/services/web", &changed)
        .await
        .body;
    assert!(updated["metadata"].get("generation").is_none());
    assert_eq!(updated["spec"]["ports"][0]["nodePort"], np);
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn events_like_the_kube_rs_recorder() {
    let s = common::start().await;
    let path = "/apis/events.k8s.io/v1/namespaces/default/events";
    let event = json!({
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "node-a.17f3e2c0d5b1a2c3", "namespace": "default"},
        "eventTime": "2025-01-01T00:00:00.000000Z",
        "action": "Sync",
        "reason": "Synced",
        "note": "Node synced successfully",
        "type": "Normal",
        "regarding": {"kind": "Node", "name": "node-a", "apiVersion": "v1"},
        "reportingController": "cloud-node-controller",
        "reportingInstance": "ccm-1"
    });
    let created = s.post(path, &event).await;
    assert_eq!(created.status, 201);
    let patched = s
        .patch(
            &format!("{path}/node-a.17f3e2c0d5b1a2c3"),
            "application/merge-patch+json",
            &json!({"series": {"count": 2, "lastObservedTime": "2025-01-01T00:01:00.000000Z"}}),
        )
        .await;
    assert_eq!(patched.status, 200);
    assert_eq!(patched.body["series"]["count"], 2);
    assert_eq!(s.sim.list("events.events.k8s.io").len(), 1);
    // One storage, two views: the core API shows the same event, converted, with the same
    // uid and resourceVersion.
    let core_view = s
        .get("/api/v1/namespaces/default/events/node-a.17f3e2c0d5b1a2c3")
        .await
        .body;
    assert_eq!(core_view["apiVersion"], "v1");
    assert_eq!(core_view["message"], "Node synced successfully");
    assert_eq!(core_view["involvedObject"]["name"], "node-a");
    assert_eq!(core_view["reportingComponent"], "cloud-node-controller");
    assert_eq!(core_view["series"]["count"], 2);
    assert_eq!(
        core_view["metadata"]["uid"],
        patched.body["metadata"]["uid"]
    );
    assert_eq!(
        core_view["metadata"]["resourceVersion"],
        patched.body["metadata"]["resourceVersion"]
    );
    let by_node = s
        .get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.kind%3DNode%2CinvolvedObject.name%3Dnode-a")
        .await
        .body;
    assert_eq!(by_node["items"].as_array().map(Vec::len), Some(1));

    let core = json!({
        "metadata": {"generateName": "node-a."},
        "involvedObject": {"kind": "Node", "name": "node-a"},
        "reason": "DeletingNode",
        "message": "Deleting node node-a because it does not exist in the cloud provider",
        "type": "Normal",
        "source": {"component": "cloud-node-lifecycle-controller"}
    });
    assert_eq!(
        s.post("/api/v1/namespaces/default/events", &core)
            .await
            .status,
        201
    );
    assert_eq!(s.sim.list("events").len(), 2);
    assert_eq!(s.sim.list("events.events.k8s.io").len(), 2);

    // Field selectors per view (pkg/registry/core/event/strategy.go `ToSelectableFields`,
    // pkg/apis/events/v1/conversion.go): `source` is the source component, else the reporting
    // controller; events.k8s.io selects on `regarding.*` and `reportingController`.
    async fn selected(s: &common::Sim, path: &str) -> Vec<String> {
        let r = s.get(path).await;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        let mut n = names(&r.body);
        n.sort();
        n
    }
    let core_events = "/api/v1/namespaces/default/events?fieldSelector=";
    let v1_events = "/apis/events.k8s.io/v1/namespaces/default/events?fieldSelector=";
    assert_eq!(
        selected(&s, &format!("{core_events}source%3Dcloud-node-controller")).await,
        ["node-a.17f3e2c0d5b1a2c3"]
    );
    assert_eq!(
        selected(
            &s,
            &format!("{core_events}source%3Dcloud-node-lifecycle-controller")
        )
        .await
        .len(),
        1
    );
    assert_eq!(
        selected(&s, &format!(
            "{v1_events}regarding.kind%3DNode%2Cregarding.name%3Dnode-a%2CreportingController%3Dcloud-node-controller"
        ))
        .await,
        ["node-a.17f3e2c0d5b1a2c3"]
    );
    assert_eq!(
        selected(
            &s,
            &format!("{v1_events}source%3Dcloud-node-lifecycle-controller")
        )
        .await
        .len(),
        1
    );
    assert_eq!(
        selected(
            &s,
            &format!("{v1_events}regarding.name%3Dnode-a%2Creason%3DDeletingNode")
        )
        .await
        .len(),
        1
    );
    for (path, label) in [
        (
            format!("{v1_events}involvedObject.name%3Dnode-a"),
            "involvedObject.name",
        ),
        (
            format!("{v1_events}reportingComponent%3Dx"),
            "reportingComponent",
        ),
        (
            format!("{core_events}regarding.name%3Dnode-a"),
            "regarding.name",
        ),
    ] {
        let r = s.get(&path).await;
        assert_eq!(r.status, 400, "{path}");
        assert_eq!(
            r.body["message"],
            format!("field label not supported: {label}")
        );
    }
}

#[tokio::test]
async fn lease_optimistic_locking() {
    let s = common::start().await;
    let path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "cloud-controller-manager"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "leaseTransitions": 0}
    });
    let created = s.post(path, &lease).await.body;
    assert_eq!(created["metadata"]["namespace"], "kube-system");
    let item = format!("{path}/cloud-controller-manager");
    let mut renew = created.clone();
    renew["spec"]["renewTime"] = json!("2025-01-01T00:00:00.000000Z");
    let renewed = s.put(&item, &renew).await;
    assert_eq!(renewed.status, 200);
    let mut steal = created.clone();
    steal["spec"]["holderIdentity"] = json!("b");
    let conflict = s.put(&item, &steal).await;
    assert_eq!(conflict.status, 409);
    assert_eq!(
        conflict.body["message"],
        "Operation cannot be fulfilled on leases.coordination.k8s.io \"cloud-controller-manager\": the object has been modified; please apply your changes to the latest version and try again"
    );
    assert_eq!(conflict.body["details"]["group"], "coordination.k8s.io");
}

/// Content negotiation: client-go's `protobuf, json` Accept list gets JSON; an Accept that lists
/// only protobuf is 406, as from an apiserver that cannot encode the type that way.
#[tokio::test]
async fn accept_negotiation() {
    let s = common::start().await;
    s.post("/api/v1/nodes", &common::node("n1")).await;
    let get = |accept: &'static str, path: &'static str| {
        let req = s
            .client
            .get(format!("{}{path}", s.sim.url()))
            .header("accept", accept);
        async move {
            let r = req.send().await.expect("request");
            let status = r.status().as_u16();
            let ct = r
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            let body: serde_json::Value = r.json().await.unwrap_or_default();
            (status, ct, body)
        }
    };
    for path in ["/api/v1/nodes/n1", "/api/v1/nodes", "/api/v1"] {
        let (status, ct, body) = get(
            "application/vnd.kubernetes.protobuf, application/json",
            path,
        )
        .await;
        assert_eq!(status, 200, "{path}");
        assert_eq!(ct, "application/json", "{path}");
        assert!(body["kind"].is_string(), "{path}: {body}");
    }
    let (status, _, body) = get(
        "application/vnd.kubernetes.protobuf, */*",
        "/api/v1/nodes/n1",
    )
    .await;
    assert_eq!((status, &body["kind"]), (200, &serde_json::json!("Node")));
    for accept in [
        "application/vnd.kubernetes.protobuf",
        "application/vnd.kubernetes.protobuf;stream=watch, application/cbor",
    ] {
        let (status, ct, body) = get(accept, "/api/v1/nodes/n1").await;
        assert_eq!(status, 406, "{accept}");
        assert_eq!(ct, "application/json");
        assert_eq!(body["reason"], "NotAcceptable");
        assert!(
            body["message"]
                .as_str()
                .is_some_and(|m| m
                    .starts_with("only the following media types are accepted: application/json")),
            "{body}"
        );
    }
}
