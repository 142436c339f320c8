//! TokenReview and SubjectAccessReview over HTTP, as a delegating server (the CCM's `/metrics`)
//! sends them: the caller needs `create` on the review, tokens come from `add_token`, access is
//! the RBAC policy's (everyone with RBAC off), bad reviews are 400/422 like the apiserver's.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wasm_ccm_sim::kube::KubeSim;
use wasm_ccm_sim::kube::RequestMatcher;

const TR: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
const SAR: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
const REVIEWER: &str = "reviewer-token";

async fn post(sim: &KubeSim, path: &str, token: &str, body: Value) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{}{path}", sim.url()))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("request");
    let code = resp.status().as_u16();
    (code, resp.json().await.unwrap_or(Value::Null))
}

/// `POST`s a protobuf body (`application/vnd.kubernetes.protobuf`).
async fn post_protobuf(sim: &KubeSim, path: &str, token: &str, body: Vec<u8>) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{}{path}", sim.url()))
        .bearer_auth(token)
        .header("Content-Type", "application/vnd.kubernetes.protobuf")
        .body(body)
        .send()
        .await
        .expect("request");
    let code = resp.status().as_u16();
    (code, resp.json().await.unwrap_or(Value::Null))
}

// A minimal protobuf encoder for hand-built bodies (as in the simulator's protobuf.rs tests).
fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}
/// A length-delimited field.
fn ld(num: u32, bytes: &[u8]) -> Vec<u8> {
    [
        varint((u64::from(num) << 3) | 2),
        varint(bytes.len() as u64),
        bytes.to_vec(),
    ]
    .concat()
}
fn s(num: u32, text: &str) -> Vec<u8> {
    ld(num, text.as_bytes())
}
/// apimachinery's envelope: `k8s\0`, then a runtime.Unknown {typeMeta, raw}.
fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let type_meta = [s(1, api_version), s(2, kind)].concat();
    [b"k8s\0".to_vec(), ld(1, &type_meta), ld(2, raw)].concat()
}
/// A SubjectAccessReview of `get` on a non-resource `path` as client-go encodes it
/// (authorization/v1 generated.proto: spec = 2; SubjectAccessReviewSpec
/// nonResourceAttributes = 2, user = 3, groups = 4; NonResourceAttributes path = 1, verb = 2).
fn sar_protobuf(user: &str, groups: &[&str], path: &str) -> Vec<u8> {
    let nra = [s(1, path), s(2, "get")].concat();
    let mut spec = [ld(2, &nra), s(3, user)].concat();
    for g in groups {
        spec.extend(s(4, g));
    }
    envelope(
        "authorization.k8s.io/v1",
        "SubjectAccessReview",
        &[ld(1, &[]), ld(2, &spec)].concat(),
    )
}

fn sar(user: &str, groups: &[&str], path: &str) -> Value {
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": groups,
            "nonResourceAttributes": {"verb": "get", "path": path}}})
}

/// RBAC on; `reviewer` may create both reviews, `reader` may get /metrics, `nobody` nothing.
async fn sim() -> KubeSim {
    let sim = KubeSim::start(([127, 0, 0, 1], 0).into())
        .await
        .expect("sim");
    sim.enable_rbac();
    sim.add_token(REVIEWER, "reviewer", &[]);
    sim.add_token("reader-token", "reader", &["readers"]);
    sim.add_token("nobody-token", "nobody", &[]);
    sim.load_rbac(vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "reviewer"},
            "rules": [
                {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
            ]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "reviewer"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "reviewer"},
            "subjects": [{"kind": "User", "name": "reviewer"}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "metrics"},
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "metrics"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metrics"},
            "subjects": [{"kind": "Group", "name": "readers"}]}),
    ])
    .expect("rbac");
    sim
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_reviews_answer_from_the_registered_tokens() {
    let sim = sim().await;
    let review = |token: &str| {
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": token}})
    };
    let (code, body) = post(&sim, TR, REVIEWER, review("reader-token")).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["kind"], "TokenReview");
    assert_eq!(body["status"]["authenticated"], true);
    assert_eq!(body["status"]["user"]["username"], "reader");
    assert_eq!(
        body["status"]["user"]["groups"],
        json!(["readers", "system:authenticated"])
    );

    // `authenticated` is `omitempty`, `user` a struct (`{}` when nobody was authenticated).
    let (code, body) = post(&sim, TR, REVIEWER, review("no-such-token")).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        body["status"],
        json!({"user": {}, "error": "invalid bearer token"})
    );
    // The token goes through `"Bearer " + spec.token` and the bearer-token authenticator
    // (tokenreview/storage.go), so only its first space-separated part counts, and a leading
    // space leaves no token: not authenticated, and no error (no authenticator failed).
    let (_, body) = post(&sim, TR, REVIEWER, review("reader-token trailing")).await;
    assert_eq!(body["status"]["user"]["username"], "reader", "{body}");
    assert_eq!(body["spec"]["token"], "reader-token trailing");
    let (code, body) = post(&sim, TR, REVIEWER, review(" reader-token")).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["status"], json!({"user": {}}));

    let (code, body) = post(&sim, TR, REVIEWER, review("")).await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(
        body["message"],
        "token is required for TokenReview in authentication"
    );

    // The caller needs `create tokenreviews`.
    let (code, body) = post(&sim, TR, "nobody-token", review("reader-token")).await;
    assert_eq!(code, 403, "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("cannot create resource \"tokenreviews\"")),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subject_access_reviews_answer_from_the_rbac_policy() {
    let sim = sim().await;
    let (code, body) = post(&sim, SAR, REVIEWER, sar("reader", &["readers"], "/metrics")).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["kind"], "SubjectAccessReview");
    assert_eq!(body["status"]["allowed"], true);
    // The RBAC authorizer's reason: binding, roleRef and the subject that matched.
    assert_eq!(
        body["status"]["reason"],
        "RBAC: allowed by ClusterRoleBinding \"metrics\" of ClusterRole \"metrics\" to Group \"readers\""
    );
    let (_, body) = post(&sim, SAR, REVIEWER, sar("nobody", &[], "/metrics")).await;
    assert_eq!(body["status"]["allowed"], false);
    let (_, body) = post(
        &sim,
        SAR,
        REVIEWER,
        sar("system:anonymous", &["system:unauthenticated"], "/metrics"),
    )
    .await;
    assert_eq!(body["status"]["allowed"], false);
    // Groups alone are a subject.
    let (code, body) = post(&sim, SAR, REVIEWER, sar("", &["readers"], "/metrics")).await;
    assert_eq!((code, &body["status"]["allowed"]), (201, &json!(true)));
    // system:masters is allowed everything.
    let (_, body) = post(&sim, SAR, REVIEWER, sar("root", &["system:masters"], "/x")).await;
    assert_eq!(body["status"]["allowed"], true);

    // Invalid reviews: 422 with the apiserver's wording (its internal object has no kind).
    let (code, body) = post(
        &sim,
        SAR,
        REVIEWER,
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {}}),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["message"],
        ".authorization.k8s.io \"\" is invalid: [spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified, spec.user: Invalid value: \"\": at least one of user or group must be specified]"
    );
    assert_eq!(
        body["details"]["causes"][0]["field"],
        "spec.resourceAttributes"
    );
    let mut both = sar("reader", &[], "/metrics");
    both["spec"]["resourceAttributes"] = json!({"verb": "get", "resource": "nodes"});
    let (code, body) = post(&sim, SAR, REVIEWER, both).await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["message"],
        ".authorization.k8s.io \"\" is invalid: spec.nonResourceAttributes: Invalid value: {\"Path\":\"/metrics\",\"Verb\":\"get\"}: cannot be specified in combination with resourceAttributes"
    );
    assert_eq!(
        body["details"]["causes"][0]["field"],
        "spec.nonResourceAttributes"
    );

    // The caller needs `create subjectaccessreviews`; the evaluations are not its decisions.
    let (code, _) = post(&sim, SAR, "reader-token", sar("reader", &[], "/metrics")).await;
    assert_eq!(code, 403);
    assert!(
        sim.rbac_decisions()
            .iter()
            .all(|d| d.user == "reviewer" || d.user == "reader"),
        "only the callers' own requests are decisions"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_rbac_off_everyone_is_allowed() {
    let sim = KubeSim::start(([127, 0, 0, 1], 0).into())
        .await
        .expect("sim");
    sim.add_token("t", "someone", &[]);
    let (code, body) = post(&sim, SAR, "any", sar("nobody", &[], "/metrics")).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["status"]["allowed"], true);
    let tr = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": "t"}});
    let (_, body) = post(&sim, TR, "any", tr).await;
    assert_eq!(body["status"]["user"]["username"], "someone");
}

/// Protobuf bodies (what client-go's typed clients send) are decoded like JSON ones, and a
/// body of another kind than the endpoint's is the decoder's 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_reviews_and_kinds_that_do_not_match_the_endpoint() {
    let sim = sim().await;
    let (code, body) = post_protobuf(
        &sim,
        SAR,
        REVIEWER,
        sar_protobuf("reader", &["readers"], "/metrics"),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["kind"], "SubjectAccessReview");
    assert_eq!(body["spec"]["user"], "reader");
    assert_eq!(body["status"]["allowed"], true, "{body}");
    let (_, body) =
        post_protobuf(&sim, SAR, REVIEWER, sar_protobuf("nobody", &[], "/metrics")).await;
    assert_eq!(body["status"]["allowed"], false, "{body}");
    // Validation applies to decoded bodies too: no user and no group.
    let (code, body) = post_protobuf(&sim, SAR, REVIEWER, sar_protobuf("", &[], "/metrics")).await;
    assert_eq!(code, 422, "{body}");
    // A field the tables do not know (SubjectAccessReviewSpec.extra = 5) is refused.
    let extra = envelope(
        "authorization.k8s.io/v1",
        "SubjectAccessReview",
        &ld(2, &[s(3, "reader"), ld(5, &s(1, "k"))].concat()),
    );
    let (code, body) = post_protobuf(&sim, SAR, REVIEWER, extra).await;
    assert_eq!(code, 400, "{body}");

    // TokenReview (authentication/v1 generated.proto: spec = 2; TokenReviewSpec token = 1).
    let tr = |token: &str| {
        envelope(
            "authentication.k8s.io/v1",
            "TokenReview",
            &[ld(1, &[]), ld(2, &s(1, token))].concat(),
        )
    };
    let (code, body) = post_protobuf(&sim, TR, REVIEWER, tr("reader-token")).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["status"]["authenticated"], true, "{body}");
    assert_eq!(body["status"]["user"]["username"], "reader");
    let (code, body) = post_protobuf(&sim, TR, REVIEWER, tr("")).await;
    assert_eq!(code, 400, "{body}");

    // Kinds that do not match the endpoint, JSON or protobuf.
    let (code, body) = post(
        &sim,
        SAR,
        REVIEWER,
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": "reader-token"}}),
    )
    .await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(body["reason"], "BadRequest");
    assert_eq!(
        body["message"],
        "TokenReview in version \"v1\" cannot be handled as a SubjectAccessReview: converting (v1.TokenReview) to (authorization.SubjectAccessReview): unknown conversion"
    );
    let (code, body) = post_protobuf(
        &sim,
        TR,
        REVIEWER,
        sar_protobuf("reader", &["readers"], "/metrics"),
    )
    .await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(
        body["message"],
        "SubjectAccessReview in version \"v1\" cannot be handled as a TokenReview: converting (v1.SubjectAccessReview) to (authentication.TokenReview): unknown conversion"
    );
    // A body that is not JSON: `transformDecodeError` without a kind, the body summarised.
    let resp = reqwest::Client::new()
        .post(format!("{}{SAR}", sim.url()))
        .bearer_auth(REVIEWER)
        .header("Content-Type", "application/json")
        .body("not json")
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status().as_u16(), 400);
    let body: Value = resp.json().await.expect("status");
    let message = body["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with("the object provided is unrecognized (must be of type SubjectAccessReview): couldn't get version/kind; json parse error: ")
            && message.ends_with(" (6e6f74206a736f6e)"),
        "{message}"
    );
    // No kind: the endpoint's (the decoder's default).
    let (code, body) = post(
        &sim,
        TR,
        REVIEWER,
        json!({"spec": {"token": "reader-token"}}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["kind"], "TokenReview");
}

/// Latency and failure faults apply to the reviews as to any request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_apply_to_reviews() {
    let sim = sim().await;
    let delay = Duration::from_millis(300);
    // The reviews are not stored resources: matched by path.
    sim.faults()
        .add_latency(RequestMatcher::any().with_path_contains(SAR), delay);
    sim.faults()
        .add_latency(RequestMatcher::any().with_path_contains(TR), delay);
    let t = Instant::now();
    let (code, _) = post(&sim, SAR, REVIEWER, sar("reader", &["readers"], "/metrics")).await;
    assert_eq!(code, 201);
    assert!(t.elapsed() >= delay, "{:?}", t.elapsed());
    let t = Instant::now();
    let tr = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": "reader-token"}});
    let (code, _) = post(&sim, TR, REVIEWER, tr).await;
    assert_eq!(code, 201);
    assert!(t.elapsed() >= delay, "{:?}", t.elapsed());
    sim.faults().clear();

    // The self-reviews too.
    let ssar = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    sim.faults()
        .add_latency(RequestMatcher::any().with_path_contains(ssar), delay);
    let body = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"nonResourceAttributes": {"verb": "get", "path": "/metrics"}}});
    let t = Instant::now();
    let (code, _) = post(&sim, ssar, "reader-token", body.clone()).await;
    assert_eq!(code, 201);
    assert!(t.elapsed() >= delay, "{:?}", t.elapsed());
    sim.faults().clear();
    sim.faults()
        .fail_next(1, 500, RequestMatcher::any().with_path_contains(ssar));
    let (code, _) = post(&sim, ssar, "reader-token", body.clone()).await;
    assert_eq!(code, 500);
    let (code, _) = post(&sim, ssar, "reader-token", body).await;
    assert_eq!(code, 201);
}
