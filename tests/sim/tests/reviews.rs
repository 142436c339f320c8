//! TokenReview and SubjectAccessReview over HTTP, as a delegating server (the CCM's `/metrics`)
//! sends them: the caller needs `create` on the review, tokens come from `add_token`, access is
//! the RBAC policy's (everyone with RBAC off), bad reviews are 400/422 like the apiserver's.

use serde_json::{Value, json};
use wasm_ccm_sim::kube::KubeSim;

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

    let (code, body) = post(&sim, TR, REVIEWER, review("no-such-token")).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["status"]["authenticated"], false);
    assert_eq!(body["status"]["error"], "invalid bearer token");

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
    assert!(
        body["status"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("\"metrics\"")),
        "{body}"
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
        ".authorization.k8s.io \"\" is invalid: [spec: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified, spec.user: Invalid value: \"\": at least one of user or group must be specified]"
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
