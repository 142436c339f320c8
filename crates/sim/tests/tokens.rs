//! ServiceAccounts and their TokenRequests in the Kubernetes API simulator, over HTTP with RBAC
//! on: `create serviceaccounts/token` is authorized like any request, the request is validated
//! as `TokenREST.Create` does, and the issued token authenticates as the account (its user and
//! groups seen in the RBAC decisions) only while the account lives and the token has not
//! expired. `kubectl create token` (the real client) is in tests/kubectl.rs.

use std::time::Duration;

use serde_json::{Value, json};
use wasm_ccm_sim::kube::{EXPIRY_LEEWAY, KubeSim, service_account_groups};

const ISSUER: &str = "system:serviceaccount:kube-system:token-issuer";
const ISSUER_TOKEN: &str = "issuer-token";
const ACCOUNT: &str = "route-controller";
const ACCOUNT_USER: &str = "system:serviceaccount:kube-system:route-controller";
const TOKEN_PATH: &str = "/api/v1/namespaces/kube-system/serviceaccounts/route-controller/token";

/// RBAC on; the issuer may get and create ServiceAccounts and create their tokens in
/// kube-system (as a controller manager with --use-service-account-credentials), and the
/// account `route-controller` may list nodes.
async fn sim() -> KubeSim {
    let sim = KubeSim::start(([127, 0, 0, 1], 0).into())
        .await
        .expect("sim");
    sim.enable_rbac();
    sim.add_token(
        ISSUER_TOKEN,
        ISSUER,
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
        ],
    );
    let rbac = |kind: &str, name: &str, ns: Option<&str>, rest: Value| {
        let mut o = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
            "metadata": {"name": name}});
        if let Some(ns) = ns {
            o["metadata"]["namespace"] = json!(ns);
        }
        if let (Some(o), Some(r)) = (o.as_object_mut(), rest.as_object()) {
            o.extend(r.clone());
        }
        o
    };
    sim.load_rbac(vec![
        rbac(
            "Role",
            "issuer",
            Some("kube-system"),
            json!({"rules": [
                {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get", "create"]},
                {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]},
            ]}),
        ),
        rbac(
            "RoleBinding",
            "issuer",
            Some("kube-system"),
            json!({
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "issuer"},
                "subjects": [{"kind": "ServiceAccount", "name": "token-issuer", "namespace": "kube-system"}],
            }),
        ),
        rbac(
            "ClusterRole",
            "node-lister",
            None,
            json!({"rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]}),
        ),
        rbac(
            "ClusterRoleBinding",
            "node-lister",
            None,
            json!({
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "node-lister"},
                "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": "kube-system"}],
            }),
        ),
    ])
    .expect("rbac");
    sim
}

async fn send(
    sim: &KubeSim,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .request(method, format!("{}{path}", sim.url()))
        .bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.expect("request");
    let code = resp.status().as_u16();
    (code, resp.json().await.unwrap_or(Value::Null))
}

async fn create_account(sim: &KubeSim) -> Value {
    let (code, sa) = send(
        sim,
        reqwest::Method::POST,
        "/api/v1/namespaces/kube-system/serviceaccounts",
        ISSUER_TOKEN,
        Some(json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": ACCOUNT, "namespace": "kube-system"}})),
    )
    .await;
    assert_eq!(code, 201, "{sa}");
    sa
}

async fn request_token(sim: &KubeSim, body: Value) -> (u16, Value) {
    send(
        sim,
        reqwest::Method::POST,
        TOKEN_PATH,
        ISSUER_TOKEN,
        Some(body),
    )
    .await
}

fn token_of(answer: &Value) -> String {
    answer["status"]["token"]
        .as_str()
        .unwrap_or_else(|| panic!("a token in {answer}"))
        .to_string()
}

/// Lists nodes with `token`: the HTTP status.
async fn list_nodes(sim: &KubeSim, token: &str) -> u16 {
    send(sim, reqwest::Method::GET, "/api/v1/nodes", token, None)
        .await
        .0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_request_issues_a_token_of_the_account() {
    let sim = sim().await;
    // Before the account exists: its 404, as the registry's Get answers.
    let (code, e) = request_token(
        &sim,
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
    )
    .await;
    assert_eq!(code, 404, "{e}");
    assert_eq!(
        e["message"],
        "serviceaccounts \"route-controller\" not found"
    );

    let sa = create_account(&sim).await;
    assert!(
        sa["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty()),
        "{sa}"
    );
    let (code, answer) = request_token(
        &sim,
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
    )
    .await;
    assert_eq!(code, 201, "{answer}");
    assert_eq!(answer["kind"], "TokenRequest");
    assert_eq!(answer["metadata"]["name"], ACCOUNT);
    assert_eq!(answer["metadata"]["namespace"], "kube-system");
    // Defaulted to an hour; the expiration is an hour after creation.
    assert_eq!(answer["spec"]["expirationSeconds"], 3600);
    let created: jiff::Timestamp = answer["metadata"]["creationTimestamp"]
        .as_str()
        .expect("creationTimestamp")
        .parse()
        .expect("a timestamp");
    let expires: jiff::Timestamp = answer["status"]["expirationTimestamp"]
        .as_str()
        .expect("expirationTimestamp")
        .parse()
        .expect("a timestamp");
    assert_eq!(expires.as_second() - created.as_second(), 3600);
    let token = token_of(&answer);
    assert_eq!(token.split('.').count(), 3, "shaped like a JWT: {token}");

    // The token is the account's: allowed what the account is bound to, and judged as its
    // user with the ServiceAccount groups.
    assert_eq!(list_nodes(&sim, &token).await, 200);
    let decision = sim
        .rbac_decisions()
        .into_iter()
        .rev()
        .find(|d| d.attributes.resource == "nodes")
        .expect("a decision about nodes");
    assert_eq!(decision.user, ACCOUNT_USER);
    assert!(decision.allowed);
    let want: Vec<String> = service_account_groups("kube-system");
    assert_eq!(
        want,
        [
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
            "system:authenticated"
        ]
    );
    // Not more than the account's rights: it may not get a node by name.
    let (code, e) = send(&sim, reqwest::Method::GET, "/api/v1/nodes/n1", &token, None).await;
    assert_eq!(code, 403, "{e}");
    assert_eq!(
        e["message"],
        format!(
            "nodes \"n1\" is forbidden: User \"{ACCOUNT_USER}\" cannot get resource \"nodes\" in API group \"\" at the cluster scope"
        )
    );
    // Each request gets a new token; both work.
    let (_, again) = request_token(&sim, json!({"spec": {"expirationSeconds": 600}})).await;
    let second = token_of(&again);
    assert_ne!(second, token);
    assert_eq!(list_nodes(&sim, &second).await, 200);
    assert_eq!(list_nodes(&sim, &token).await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creating_a_token_needs_create_on_serviceaccounts_token() {
    let sim = sim().await;
    create_account(&sim).await;
    // The account itself has no right to mint its own tokens.
    let (_, answer) = request_token(&sim, json!({"spec": {}})).await;
    let token = token_of(&answer);
    let (code, e) = send(
        &sim,
        reqwest::Method::POST,
        TOKEN_PATH,
        &token,
        Some(json!({"spec": {}})),
    )
    .await;
    assert_eq!(code, 403, "{e}");
    assert_eq!(
        e["message"],
        format!(
            "serviceaccounts \"route-controller\" is forbidden: User \"{ACCOUNT_USER}\" cannot create resource \"serviceaccounts/token\" in API group \"\" in the namespace \"kube-system\""
        )
    );
    let d = sim
        .rbac_decisions()
        .into_iter()
        .rev()
        .find(|d| d.attributes.subresource == "token")
        .expect("the token request was judged");
    assert_eq!(
        (d.attributes.verb.as_str(), d.attributes.resource.as_str()),
        ("create", "serviceaccounts")
    );
    // Only POST is served on the subresource.
    let (code, _) = send(&sim, reqwest::Method::GET, TOKEN_PATH, "sim", None).await;
    assert_eq!(code, 405);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_requests_are_validated_like_the_apiserver() {
    let sim = sim().await;
    create_account(&sim).await;
    let cases: &[(Value, u16, &str)] = &[
        (
            json!({"spec": {"expirationSeconds": 599}}),
            422,
            "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes",
        ),
        (
            json!({"spec": {"expirationSeconds": 4_294_967_297_i64}}),
            422,
            "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 4294967297: may not specify a duration larger than 2^32 seconds",
        ),
        (
            json!({"metadata": {"name": "other"}, "spec": {}}),
            422,
            "TokenRequest.authentication.k8s.io \"route-controller\" is invalid: metadata.name: Invalid value: \"other\": must match the service account name if specified",
        ),
        (
            json!({"metadata": {"namespace": "default"}, "spec": {}}),
            422,
            "TokenRequest.authentication.k8s.io \"route-controller\" is invalid: metadata.namespace: Invalid value: \"default\": must match the service account namespace if specified",
        ),
        (
            json!({"spec": {"expirationSeconds": "600"}}),
            400,
            "TokenRequest in version \"v1\" cannot be handled as a TokenRequest: json: cannot unmarshal string into Go struct field TokenRequest.spec.expirationSeconds of type int64",
        ),
        (
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}}),
            400,
            "TokenReview in version \"v1\" cannot be handled as a TokenRequest: converting (v1.TokenReview) to (authentication.TokenRequest): unknown conversion",
        ),
    ];
    for (body, code, message) in cases {
        let (got, e) = request_token(&sim, body.clone()).await;
        assert_eq!(
            (got, e["message"].as_str().unwrap_or("")),
            (*code, *message),
            "{body}"
        );
    }
    let (code, e) = request_token(
        &sim,
        json!({"spec": {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p"}}}),
    )
    .await;
    assert_eq!(code, 400, "{e}");
    // The boundary: exactly ten minutes is allowed.
    let (code, e) = request_token(&sim, json!({"spec": {"expirationSeconds": 600}})).await;
    assert_eq!(code, 201, "{e}");
    // A UID that is not the account's is a conflict.
    let (code, e) = request_token(
        &sim,
        json!({"metadata": {"uid": "not-the-uid"}, "spec": {}}),
    )
    .await;
    assert_eq!(code, 409, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_stops_authenticating_when_its_account_goes() {
    let sim = sim().await;
    create_account(&sim).await;
    let (_, answer) = request_token(&sim, json!({"spec": {}})).await;
    let token = token_of(&answer);
    // Positive control: it works while the account lives.
    assert_eq!(list_nodes(&sim, &token).await, 200);
    sim.remove("serviceaccounts", Some("kube-system"), ACCOUNT)
        .expect("delete the account");
    assert_eq!(list_nodes(&sim, &token).await, 401);
    // An account of the same name is another account (another UID): the old token stays dead.
    create_account(&sim).await;
    assert_eq!(list_nodes(&sim, &token).await, 401);
    let (_, answer) = request_token(&sim, json!({"spec": {}})).await;
    assert_eq!(list_nodes(&sim, &token_of(&answer)).await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_expires_after_its_lifetime_and_the_leeway() {
    let sim = sim().await;
    create_account(&sim).await;
    let (_, answer) = request_token(&sim, json!({"spec": {"expirationSeconds": 600}})).await;
    let token = token_of(&answer);
    assert_eq!(list_nodes(&sim, &token).await, 200);
    // Past `exp`, within go-jose's leeway: still accepted.
    sim.advance_token_clock(Duration::from_secs(600) + EXPIRY_LEEWAY / 2);
    assert_eq!(list_nodes(&sim, &token).await, 200);
    // Past the leeway: 401.
    sim.advance_token_clock(EXPIRY_LEEWAY);
    assert_eq!(list_nodes(&sim, &token).await, 401);
    // A new token is issued on the moved clock and works.
    let (_, answer) = request_token(&sim, json!({"spec": {}})).await;
    assert_eq!(list_nodes(&sim, &token_of(&answer)).await, 200);
}
