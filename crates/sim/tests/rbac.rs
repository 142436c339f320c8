//! RBAC in the Kubernetes API simulator: the evaluator (verbs, resourceNames, subresources,
//! namespaces vs the cluster scope, wildcards, aggregation, missing roles), request attributes
//! like `RequestInfoFactory`, and over HTTP: 401 without a known token, 403 worded like the
//! apiserver's, SelfSubjectAccessReview and SelfSubjectRulesReview.

use std::collections::HashMap;

use serde_json::{Value, json};
use wasm_ccm_sim::kube::KubeSim;
use wasm_ccm_sim::kube::rbac::{Attributes, Policy, UserInfo, request_info};

const SA: &str = "system:serviceaccount:kube-system:cloud-controller-manager";

fn sa() -> UserInfo {
    UserInfo::new(
        SA,
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
            "system:authenticated",
        ],
    )
}

fn policy(objects: Vec<Value>) -> Policy {
    let mut p = Policy::new();
    for o in objects {
        p.apply(o).expect("rbac object");
    }
    p
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name}, "rules": rules})
}

fn binding(kind: &str, name: &str, ns: Option<&str>, role_kind: &str, subjects: Value) -> Value {
    let mut b = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": subjects});
    if let Some(ns) = ns {
        b["metadata"]["namespace"] = json!(ns);
    }
    b
}

fn sa_subject() -> Value {
    json!([{"kind": "ServiceAccount", "name": "cloud-controller-manager", "namespace": "kube-system"}])
}

fn allowed(p: &Policy, u: &UserInfo, a: Attributes) -> bool {
    p.authorize(u, &a).allowed
}

fn res(verb: &str, group: &str, resource: &str, sub: &str, ns: &str, name: &str) -> Attributes {
    Attributes::resource(verb, group, resource, sub, ns, name)
}

#[test]
fn verbs_subresources_and_resource_names() {
    let p = policy(vec![
        cluster_role(
            "c",
            json!([
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
                {"apiGroups": [""], "resources": ["services/status"], "verbs": ["update"]},
                {"apiGroups": [""], "resources": ["namespaces"], "resourceNames": ["kube-system"], "verbs": ["get"]},
            ]),
        ),
        binding("ClusterRoleBinding", "c", None, "ClusterRole", sa_subject()),
    ]);
    let u = sa();
    assert!(allowed(&p, &u, res("patch", "", "nodes", "", "", "n1")));
    assert!(!allowed(&p, &u, res("delete", "", "nodes", "", "", "n1")));
    // A rule for `nodes` does not cover `nodes/status`, and the reverse.
    assert!(!allowed(
        &p,
        &u,
        res("patch", "", "nodes", "status", "", "n1")
    ));
    assert!(allowed(
        &p,
        &u,
        res("update", "", "services", "status", "default", "web")
    ));
    assert!(!allowed(
        &p,
        &u,
        res("update", "", "services", "", "default", "web")
    ));
    // Another group is another resource.
    assert!(!allowed(
        &p,
        &u,
        res("get", "example.com", "nodes", "", "", "n1")
    ));
    // resourceNames: only that name; a list (no name) is not covered.
    assert!(allowed(
        &p,
        &u,
        res("get", "", "namespaces", "", "kube-system", "kube-system")
    ));
    assert!(!allowed(
        &p,
        &u,
        res("get", "", "namespaces", "", "default", "default")
    ));
    assert!(!allowed(&p, &u, res("list", "", "namespaces", "", "", "")));
    // Other users get nothing.
    let other = UserInfo::new("system:serviceaccount:default:x", &["system:authenticated"]);
    assert!(!allowed(&p, &other, res("get", "", "nodes", "", "", "n1")));
}

#[test]
fn roles_hold_in_their_namespace_only() {
    let p = policy(vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "r", "namespace": "kube-system"},
            "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"]}]}),
        // The subject's namespace defaults to the binding's.
        binding(
            "RoleBinding",
            "r",
            Some("kube-system"),
            "Role",
            json!([{"kind": "ServiceAccount", "name": "cloud-controller-manager"}]),
        ),
        // A RoleBinding to a ClusterRole grants it in the binding's namespace only.
        cluster_role(
            "cm-reader",
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]),
        ),
        binding(
            "RoleBinding",
            "cm-reader",
            Some("default"),
            "ClusterRole",
            sa_subject(),
        ),
    ]);
    let u = sa();
    let lease = |ns: &str| res("update", "coordination.k8s.io", "leases", "", ns, "l");
    assert!(allowed(&p, &u, lease("kube-system")));
    assert!(!allowed(&p, &u, lease("default")));
    assert!(!allowed(&p, &u, lease("")), "cluster scope");
    let cm = |ns: &str| res("get", "", "configmaps", "", ns, "c");
    assert!(allowed(&p, &u, cm("default")));
    assert!(!allowed(&p, &u, cm("kube-system")));
    let d = p.authorize(&u, &lease("kube-system"));
    let rule = d.rule.expect("rule");
    assert_eq!(
        (
            rule.role_kind.as_str(),
            rule.role_namespace.as_str(),
            rule.role_name.as_str()
        ),
        ("Role", "kube-system", "r")
    );
    // The reason names the binding, its roleRef and the subject that matched, like
    // `roleBindingDescriber` (pkg/registry/rbac/validation/rule.go): a RoleBinding is
    // `name/namespace`, a ServiceAccount `name/namespace` (defaulting to the binding's).
    assert_eq!(
        d.reason,
        "RBAC: allowed by RoleBinding \"r/kube-system\" of Role \"r\" to ServiceAccount \"cloud-controller-manager/kube-system\""
    );
    let by = d.binding.expect("binding");
    assert_eq!(
        (by.kind.as_str(), by.namespace.as_str(), by.name.as_str()),
        ("RoleBinding", "kube-system", "r")
    );
    // A RoleBinding of a ClusterRole says so.
    assert_eq!(
        p.authorize(&u, &cm("default")).reason,
        "RBAC: allowed by RoleBinding \"cm-reader/default\" of ClusterRole \"cm-reader\" to ServiceAccount \"cloud-controller-manager/kube-system\""
    );
}

#[test]
fn wildcards_groups_aggregation_and_masters() {
    let p = policy(vec![
        cluster_role(
            "all-status",
            json!([{"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"]}]),
        ),
        binding(
            "ClusterRoleBinding",
            "all-status",
            None,
            "ClusterRole",
            json!([{"kind": "Group", "name": "status-writers"}]),
        ),
        // An aggregated ClusterRole: rules of every ClusterRole its selector selects.
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "agg"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"example.com/agg": "true"}}]},
            "rules": []}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "part", "labels": {"example.com/agg": "true"}},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["list"]}]}),
        binding(
            "ClusterRoleBinding",
            "agg",
            None,
            "ClusterRole",
            json!([{"kind": "User", "name": "alice"}]),
        ),
        cluster_role(
            "urls",
            json!([{"nonResourceURLs": ["/healthz", "/metrics/*"], "verbs": ["get"]}]),
        ),
        binding(
            "ClusterRoleBinding",
            "urls",
            None,
            "ClusterRole",
            json!([{"kind": "User", "name": "alice"}]),
        ),
    ]);
    let writer = UserInfo::new("bob", &["status-writers"]);
    assert!(allowed(
        &p,
        &writer,
        res("patch", "", "nodes", "status", "", "n")
    ));
    assert!(allowed(
        &p,
        &writer,
        res("update", "apps", "deployments", "status", "d", "x")
    ));
    assert!(!allowed(
        &p,
        &writer,
        res("patch", "", "nodes", "", "", "n")
    ));
    let alice = UserInfo::new("alice", &[]);
    assert!(allowed(&p, &alice, res("list", "", "pods", "", "", "")));
    assert!(allowed(
        &p,
        &alice,
        res("list", "example.com", "widgets", "", "ns", "")
    ));
    assert!(!allowed(&p, &alice, res("get", "", "pods", "", "ns", "p")));
    let d = p.authorize(&alice, &res("list", "", "pods", "", "", ""));
    assert_eq!(d.rule.map(|r| r.role_name), Some("part".to_string()));
    // The reason names the binding's roleRef (the aggregated role), as the apiserver's does.
    assert_eq!(
        d.reason,
        "RBAC: allowed by ClusterRoleBinding \"agg\" of ClusterRole \"agg\" to User \"alice\""
    );
    assert_eq!(
        p.authorize(&writer, &res("patch", "", "nodes", "status", "", "n"))
            .reason,
        "RBAC: allowed by ClusterRoleBinding \"all-status\" of ClusterRole \"all-status\" to Group \"status-writers\""
    );
    assert!(allowed(
        &p,
        &alice,
        Attributes::non_resource("get", "/healthz")
    ));
    assert!(allowed(
        &p,
        &alice,
        Attributes::non_resource("get", "/metrics/x")
    ));
    assert!(!allowed(
        &p,
        &alice,
        Attributes::non_resource("post", "/healthz")
    ));
    assert!(!allowed(
        &p,
        &alice,
        Attributes::non_resource("get", "/version")
    ));
    let root = UserInfo::new("root", &["system:masters"]);
    let d = p.authorize(&root, &res("delete", "", "nodes", "", "", "n"));
    assert!(d.allowed);
    assert_eq!((d.rule, d.binding, d.reason.as_str()), (None, None, ""));
}

#[test]
fn missing_roles_are_the_denial_reason() {
    let p = policy(vec![binding(
        "ClusterRoleBinding",
        "gone",
        None,
        "ClusterRole",
        sa_subject(),
    )]);
    let d = p.authorize(&sa(), &res("get", "", "nodes", "", "", "n"));
    assert!(!d.allowed);
    assert_eq!(
        d.reason,
        "RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found"
    );
}

#[test]
fn request_attributes_like_request_info_factory() {
    let q = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let a = request_info("GET", "/api/v1/nodes", &q(&[]));
    assert_eq!((a.verb.as_str(), a.resource.as_str()), ("list", "nodes"));
    let a = request_info("GET", "/api/v1/nodes", &q(&[("watch", "true")]));
    assert_eq!(a.verb, "watch");
    let a = request_info(
        "GET",
        "/api/v1/nodes",
        &q(&[("watch", "1"), ("fieldSelector", "metadata.name=n1")]),
    );
    assert_eq!((a.verb.as_str(), a.name.as_str()), ("watch", "n1"));
    let a = request_info("GET", "/api/v1/watch/namespaces/default/services", &q(&[]));
    assert_eq!(
        (a.verb.as_str(), a.namespace.as_str(), a.resource.as_str()),
        ("watch", "default", "services")
    );
    let a = request_info("PATCH", "/api/v1/nodes/n1/status", &q(&[]));
    assert_eq!(
        (a.verb.as_str(), a.name.as_str(), a.subresource.as_str()),
        ("patch", "n1", "status")
    );
    // The Namespace object: namespace attribute and name are both the namespace.
    let a = request_info("GET", "/api/v1/namespaces/kube-system", &q(&[]));
    assert_eq!(
        (a.resource.as_str(), a.namespace.as_str(), a.name.as_str()),
        ("namespaces", "kube-system", "kube-system")
    );
    let a = request_info(
        "PUT",
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l",
        &q(&[]),
    );
    assert_eq!(
        (a.verb.as_str(), a.api_group.as_str(), a.namespace.as_str()),
        ("update", "coordination.k8s.io", "kube-system")
    );
    let a = request_info("DELETE", "/api/v1/namespaces/d/pods", &q(&[]));
    assert_eq!(a.verb, "deletecollection");
    // Discovery documents, group versions included (`/apis/{group}/{version}` has fewer
    // than three parts after the prefix: `NewRequestInfo` makes it a non-resource request).
    for path in [
        "/apis",
        "/api",
        "/api/v1",
        "/apis/events.k8s.io",
        "/apis/events.k8s.io/v1",
        "/apis/coordination.k8s.io/v1/",
        "/version",
        "/healthz",
    ] {
        let a = request_info("GET", path, &q(&[]));
        assert!(!a.resource_request, "{path}");
        assert_eq!(a.verb, "get");
    }
}

async fn rbac_sim() -> KubeSim {
    let sim = KubeSim::start(([127, 0, 0, 1], 0).into())
        .await
        .expect("sim");
    sim.enable_rbac();
    sim.add_token(
        "sa-token",
        SA,
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
        ],
    );
    sim.load_rbac(vec![
        cluster_role(
            "c",
            json!([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]),
        ),
        binding("ClusterRoleBinding", "c", None, "ClusterRole", sa_subject()),
    ])
    .expect("rbac");
    sim.create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}))
        .expect("node");
    sim
}

async fn send(
    sim: &KubeSim,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = reqwest::Client::new().request(method, format!("{}{path}", sim.url()));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.expect("request");
    let code = resp.status().as_u16();
    (code, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_401_403_and_self_subject_access_review() {
    let sim = rbac_sim().await;
    // No credentials: `system:anonymous`, whom the bootstrap policy lets list nothing.
    let (code, body) = send(&sim, reqwest::Method::GET, "/api/v1/nodes", None, None).await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        "nodes is forbidden: User \"system:anonymous\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
    );
    // An unknown token is never anonymous.
    let (code, body) = send(
        &sim,
        reqwest::Method::GET,
        "/api/v1/nodes",
        Some("nope"),
        None,
    )
    .await;
    assert_eq!(code, 401);
    assert_eq!(body["reason"], "Unauthorized");
    let (code, body) = send(
        &sim,
        reqwest::Method::GET,
        "/api/v1/nodes/n1",
        Some("sa-token"),
        None,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["metadata"]["name"], "n1");
    let (code, body) = send(
        &sim,
        reqwest::Method::PATCH,
        "/api/v1/nodes/n1",
        Some("sa-token"),
        Some(json!({})),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["reason"], "Forbidden");
    assert_eq!(
        body["message"],
        format!(
            "nodes \"n1\" is forbidden: User \"{SA}\" cannot patch resource \"nodes\" in API group \"\" at the cluster scope"
        )
    );
    assert_eq!(body["details"], json!({"name": "n1", "kind": "nodes"}));
    let (code, body) = send(
        &sim,
        reqwest::Method::GET,
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
        Some("sa-token"),
        None,
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        format!(
            "leases.coordination.k8s.io is forbidden: User \"{SA}\" cannot list resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-system\""
        )
    );
    assert_eq!(
        body["details"],
        json!({"group": "coordination.k8s.io", "kind": "leases"})
    );
    // The scheme is case-insensitive, like the apiserver's bearer-token authenticator.
    let resp = reqwest::Client::new()
        .get(format!("{}/api/v1/nodes/n1", sim.url()))
        .header("Authorization", "bearer sa-token")
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status().as_u16(), 200);
    // `bearertoken.go`: the token is the second space-separated part, as is. A third part
    // is ignored; an empty second part (two spaces) is no token at all: anonymous (403 here),
    // with the authenticator's warning.
    let with_header = |value: &'static str| {
        reqwest::Client::new()
            .get(format!("{}/api/v1/nodes/n1", sim.url()))
            .header("Authorization", value)
            .send()
    };
    let resp = with_header("Bearer sa-token extra").await.expect("request");
    assert_eq!(resp.status().as_u16(), 200);
    let resp = with_header("Bearer  sa-token").await.expect("request");
    assert_eq!(resp.status().as_u16(), 403);
    assert_eq!(
        resp.headers().get("warning").and_then(|v| v.to_str().ok()),
        Some(
            "299 - \"the provided Authorization header contains extra space before the bearer token, and is ignored\""
        )
    );
    let resp = with_header("  Bearer sa-token  ").await.expect("request");
    assert_eq!(resp.status().as_u16(), 200, "the header is trimmed");
    let resp = with_header("Bearer\tsa-token").await.expect("request");
    assert_eq!(
        resp.status().as_u16(),
        403,
        "only a space separates: anonymous"
    );
    assert!(resp.headers().get("warning").is_none());
    // Discovery is allowed to every authenticated user (bootstrap system:discovery).
    let (code, _) = send(&sim, reqwest::Method::GET, "/api", Some("sa-token"), None).await;
    assert_eq!(code, 200);
    // The admin token bypasses RBAC.
    let (code, _) = send(
        &sim,
        reqwest::Method::DELETE,
        "/api/v1/nodes/n1",
        Some("sim"),
        None,
    )
    .await;
    assert_eq!(code, 200);

    let ssar = |verb: &str, resource: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "group": ""}}})
    };
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let (code, body) = send(
        &sim,
        reqwest::Method::POST,
        path,
        Some("sa-token"),
        Some(ssar("list", "nodes")),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["status"]["allowed"], true);
    assert_eq!(
        body["status"]["reason"],
        "RBAC: allowed by ClusterRoleBinding \"c\" of ClusterRole \"c\" to ServiceAccount \"cloud-controller-manager/kube-system\""
    );
    let (_, body) = send(
        &sim,
        reqwest::Method::POST,
        path,
        Some("sa-token"),
        Some(ssar("delete", "nodes")),
    )
    .await;
    assert_eq!(body["status"]["allowed"], false);
    // A body of another kind is refused as the apiserver's decoder refuses it.
    let (code, body) = send(
        &sim,
        reqwest::Method::POST,
        path,
        Some("sa-token"),
        Some(
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
            "spec": {"namespace": "default"}}),
        ),
    )
    .await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(
        body["message"],
        "SelfSubjectRulesReview in version \"v1\" cannot be handled as a SelfSubjectAccessReview: converting (v1.SelfSubjectRulesReview) to (authorization.SelfSubjectAccessReview): unknown conversion"
    );

    let decisions = sim.rbac_decisions();
    let denied: Vec<&str> = decisions
        .iter()
        .filter(|d| !d.allowed)
        .map(|d| d.user.as_str())
        .collect();
    assert_eq!(
        denied,
        [
            "system:anonymous",
            SA,
            SA,
            "system:anonymous",
            "system:anonymous"
        ]
    );
}

/// Requests without credentials, as kube-apiserver's default `--anonymous-auth=true` takes
/// them (k8s.io/apiserver pkg/authentication/request/anonymous): `system:anonymous` in
/// `system:unauthenticated`, which the bootstrap `system:public-info-viewer` binding lets read
/// the health and version paths and nothing else; with anonymous requests off they are 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_requests() {
    let sim = rbac_sim().await;
    for path in ["/healthz", "/livez", "/readyz", "/version"] {
        let (code, body) = send(&sim, reqwest::Method::GET, path, None, None).await;
        assert_eq!(code, 200, "{path}: {body}");
    }
    for (path, message) in [
        (
            "/api",
            "forbidden: User \"system:anonymous\" cannot get path \"/api\"",
        ),
        (
            "/api/v1/namespaces/default/configmaps/x",
            "configmaps \"x\" is forbidden: User \"system:anonymous\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"default\"",
        ),
    ] {
        let (code, body) = send(&sim, reqwest::Method::GET, path, None, None).await;
        assert_eq!(
            (code, body["message"].as_str()),
            (403, Some(message)),
            "{path}"
        );
    }
    // The same paths with a known token (positive control for the 403s).
    let (code, _) = send(&sim, reqwest::Method::GET, "/api", Some("sa-token"), None).await;
    assert_eq!(code, 200);
    sim.set_anonymous_auth(false);
    for path in ["/healthz", "/api/v1/nodes"] {
        let (code, body) = send(&sim, reqwest::Method::GET, path, None, None).await;
        assert_eq!(code, 401, "{path}: {body}");
        assert_eq!(body["reason"], "Unauthorized");
    }
    let (code, _) = send(
        &sim,
        reqwest::Method::GET,
        "/healthz",
        Some("sa-token"),
        None,
    )
    .await;
    assert_eq!(code, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_is_off_by_default() {
    let sim = KubeSim::start(([127, 0, 0, 1], 0).into())
        .await
        .expect("sim");
    let (code, _) = send(&sim, reqwest::Method::GET, "/api/v1/nodes", None, None).await;
    assert_eq!(code, 200);
    assert!(sim.rbac_decisions().is_empty());
}

// `kubectl auth can-i` (which sends its token only over TLS) is checked against
// `KubeSim::start_tls` in tests/kubectl.rs.

/// SelfSubjectRulesReview: the rules bound by ClusterRoleBindings and the namespace's
/// RoleBindings, split into resource and non-resource rules; a missing role is an
/// `evaluationError`; no namespace is 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_subject_rules_review() {
    let sim = KubeSim::start(([127, 0, 0, 1], 0).into())
        .await
        .expect("sim");
    sim.enable_rbac();
    sim.add_token("dev-token", "dev", &[]);
    let user = json!([{"kind": "User", "name": "dev"}]);
    sim.load_rbac(vec![
        cluster_role(
            "node-watcher",
            json!([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["watch"], "resourceNames": ["n1"]}]),
        ),
        binding("ClusterRoleBinding", "node-watcher", None, "ClusterRole", user.clone()),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "lease-editor", "namespace": "kube-system"},
            "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"]}]}),
        binding("RoleBinding", "lease-editor", Some("kube-system"), "Role", user.clone()),
        binding("RoleBinding", "gone", Some("kube-system"), "Role", user),
    ])
    .expect("rbac");
    let path = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";
    let review = |ns: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
            "spec": {"namespace": ns}})
    };
    let (code, body) = send(
        &sim,
        reqwest::Method::POST,
        path,
        Some("dev-token"),
        Some(review("kube-system")),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["kind"], "SelfSubjectRulesReview");
    // `REST.Create` answers with a new object holding only the status: nothing of the request
    // (its `spec.namespace`) comes back.
    assert_eq!(body["apiVersion"], "authorization.k8s.io/v1");
    assert_eq!(body["metadata"], json!({"creationTimestamp": null}));
    assert_eq!(body["spec"], json!({}));
    let st = &body["status"];
    let rules = st["resourceRules"].as_array().cloned().unwrap_or_default();
    assert!(
        rules.contains(&json!({"verbs": ["watch"], "apiGroups": [""], "resources": ["nodes"], "resourceNames": ["n1"]})),
        "{st}"
    );
    assert!(
        rules.contains(&json!({"verbs": ["get", "update"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"]})),
        "{st}"
    );
    assert!(
        st["nonResourceRules"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["nonResourceURLs"]
                == json!(["/healthz", "/livez", "/readyz", "/version", "/version/"]))),
        "{st}"
    );
    assert_eq!(st["incomplete"], false);
    assert_eq!(
        st["evaluationError"],
        "role.rbac.authorization.k8s.io \"gone\" not found"
    );

    // Another namespace: only the cluster-wide rules, no error.
    let (_, body) = send(
        &sim,
        reqwest::Method::POST,
        path,
        Some("dev-token"),
        Some(review("default")),
    )
    .await;
    let st = &body["status"];
    assert!(
        !st["resourceRules"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["resources"] == json!(["leases"]))),
        "{st}"
    );
    assert!(st.get("evaluationError").is_none(), "{st}");

    let (code, body) = send(
        &sim,
        reqwest::Method::POST,
        path,
        Some("dev-token"),
        Some(review("")),
    )
    .await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(body["message"], "no namespace on request");
}
