//! The Bearer-token flow of ghcr.io, Docker Hub and Harbor: a loopback front that demands a token
//! from its token service before passing requests on to a real registry behind it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use wasm_ccm_oci::{Client, ClientOptions, ComponentInfo, DockerConfig, Reference};
use wasm_ccm_test_tools::registry::Registry;

const TOKEN: &str = "token-for-ci";

#[derive(Clone)]
struct Front {
    backend: String,
    base: String,
    scopes: Arc<std::sync::Mutex<Vec<String>>>,
    token_requests: Arc<AtomicUsize>,
}

/// The token service: Basic `ci:pw` buys a token; anonymous callers get 401.
async fn token(
    State(front): State<Front>,
    headers: HeaderMap,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    front.token_requests.fetch_add(1, Ordering::Relaxed);
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("ci:pw")
    );
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(expected.as_str()) {
        return (StatusCode::UNAUTHORIZED, "bad credentials").into_response();
    }
    if query.get("service").map(String::as_str) != Some("front.test") {
        return (StatusCode::BAD_REQUEST, "wrong service").into_response();
    }
    front
        .scopes
        .lock()
        .unwrap()
        .push(query.get("scope").cloned().unwrap_or_default());
    axum::Json(serde_json::json!({"token": TOKEN, "expires_in": 300})).into_response()
}

/// The registry API: 401 with a Bearer challenge without the token, else passed on.
async fn registry(State(front): State<Front>, request: Request) -> Response {
    let authorized = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        == Some(&format!("Bearer {TOKEN}"));
    if !authorized {
        let challenge = format!(
            r#"Bearer realm="{}/token",service="front.test",scope="repository:x:pull""#,
            front.base
        );
        let mut response = (StatusCode::UNAUTHORIZED, "{}").into_response();
        response.headers_mut().insert(
            "www-authenticate",
            HeaderValue::from_str(&challenge).unwrap(),
        );
        return response;
    }
    let (parts, body) = request.into_parts();
    let body: Bytes = axum::body::to_bytes(body, 128 << 20).await.unwrap();
    let url = format!("{}{}", front.backend, parts.uri.path_and_query().unwrap());
    let mut forward = reqwest::Client::new()
        .request(parts.method.clone(), url)
        .body(body);
    for name in ["content-type", "accept"] {
        if let Some(v) = parts.headers.get(name) {
            forward = forward.header(name, v.to_str().unwrap());
        }
    }
    let answer = forward.send().await.unwrap();
    let mut response = Response::builder().status(answer.status().as_u16());
    for (name, value) in answer.headers() {
        // Upload locations point at the backend; rewrite them to this front.
        let value = value.to_str().unwrap().replace(&front.backend, &front.base);
        response = response.header(name.as_str(), value);
    }
    response
        .body(axum::body::Body::from(answer.bytes().await.unwrap()))
        .unwrap()
}

#[tokio::test]
async fn bearer_challenges_are_answered_with_a_token_bought_with_the_credentials() {
    let backend = Registry::start().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let front = Front {
        backend: format!("http://{}", backend.host()),
        base: format!("http://{addr}"),
        scopes: Default::default(),
        token_requests: Default::default(),
    };
    let app = Router::new()
        .route("/token", get(token))
        .fallback(registry)
        .with_state(front.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let target = Reference::parse(&format!("oci://{addr}/drivers/static:1")).unwrap();
    let wasm = std::fs::read(wasm_ccm_drivers::STATIC_DRIVER).unwrap();

    let anonymous = Client::new(ClientOptions::default()).unwrap();
    let err = format!(
        "{:#}",
        anonymous
            .push(&target, &wasm, ComponentInfo::default(), BTreeMap::new())
            .await
            .unwrap_err()
    );
    assert!(
        err.contains("token service") && err.contains("--registry-config"),
        "{err}"
    );

    let creds =
        serde_json::json!({"auths": {addr.to_string(): {"username": "ci", "password": "pw"}}});
    let client = Client::new(ClientOptions {
        credentials: DockerConfig::parse(creds.to_string().as_bytes()).unwrap(),
        ..Default::default()
    })
    .unwrap();
    let pushed = client
        .push(&target, &wasm, ComponentInfo::default(), BTreeMap::new())
        .await
        .unwrap();
    let pulled = client.pull(&pushed.pinned, None).await.unwrap();
    assert_eq!(pulled.wasm, wasm);

    // One token per scope, reused for every request under it.
    let scopes = front.scopes.lock().unwrap().clone();
    assert_eq!(
        scopes,
        [
            "repository:drivers/static:pull,push",
            "repository:drivers/static:pull"
        ],
        "the client asks for the scope it needs, not the challenge's"
    );
    assert_eq!(
        front.token_requests.load(Ordering::Relaxed),
        3,
        "the refused anonymous one, then one per scope"
    );
}
