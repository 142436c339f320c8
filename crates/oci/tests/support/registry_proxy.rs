//! A recording proxy in front of a real registry on loopback: every request it forwards is
//! logged (`GET /v2/REPO/blobs/sha256:…`), so a test asserts on what the client asked the
//! registry for, not on what it left on disk. It can also answer chosen paths itself, which is
//! how the referrers API (`GET /v2/REPO/referrers/DIGEST`, which Debian's distribution 2.8
//! lacks) is put in front of the real registry. Shared by `crates/oci/tests/` and
//! `bins/wasm-ccm-dev/tests/e2e_signed.rs` (`#[path]`).
//!
//! It runs on its own thread and runtime, so a test may block (waiting for a child process)
//! without stalling it.

#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// A running proxy; stopped when dropped.
pub struct RegistryProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    upstream: SocketAddr,
    http: reqwest::Client,
    /// `METHOD PATH` of every request, in arrival order.
    requests: Mutex<Vec<String>>,
    /// Paths answered here instead of upstream.
    answers: Mutex<HashMap<String, Answer>>,
}

/// What a path is answered with instead of the registry's answer.
#[derive(Clone)]
struct Answer {
    status: StatusCode,
    media_type: String,
    body: Vec<u8>,
    /// Sent in chunks with no `Content-Length`, as a registry may stream a blob.
    streamed: bool,
}

impl RegistryProxy {
    /// A proxy on a free loopback port forwarding to the registry at `upstream`.
    pub fn start(upstream: SocketAddr) -> RegistryProxy {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("the proxy's address");
        let shared = Arc::new(Shared {
            upstream,
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("an HTTP client"),
            requests: Mutex::new(Vec::new()),
            answers: Mutex::new(HashMap::new()),
        });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = shared.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                let app = axum::Router::new().fallback(forward).with_state(state);
                axum::serve(listener, app)
                    .with_graceful_shutdown(async move {
                        let _ = stopped.await;
                    })
                    .await
                    .expect("the proxy serves");
            });
        });
        RegistryProxy {
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `127.0.0.1:PORT`, as a reference's registry part.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// `METHOD PATH` of every request so far.
    pub fn requests(&self) -> Vec<String> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// How many GETs of the blob `digest` (in any repository) were made so far.
    pub fn blob_gets(&self, digest: &str) -> usize {
        let tail = format!("/blobs/{digest}");
        self.requests()
            .iter()
            .filter(|r| r.starts_with("GET /v2/") && r.ends_with(&tail))
            .count()
    }

    /// Answers GET `path` (`/v2/REPO/referrers/sha256:…`) with `body` of `media_type` instead
    /// of asking the registry; the request is still recorded.
    pub fn answer(&self, path: &str, media_type: &str, body: Vec<u8>) {
        self.set_answer(path, StatusCode::OK, media_type, body, false);
    }

    /// As [`RegistryProxy::answer`], with another status (an error the registry might send).
    pub fn answer_status(&self, path: &str, status: u16, media_type: &str, body: Vec<u8>) {
        let status = StatusCode::from_u16(status).expect("an HTTP status");
        self.set_answer(path, status, media_type, body, false);
    }

    /// As [`RegistryProxy::answer`], the body sent in chunks without a `Content-Length`
    /// (HTTP/1.1 chunked encoding), so the client learns its length only by reading it.
    pub fn answer_streamed(&self, path: &str, media_type: &str, body: Vec<u8>) {
        self.set_answer(path, StatusCode::OK, media_type, body, true);
    }

    fn set_answer(
        &self,
        path: &str,
        status: StatusCode,
        media_type: &str,
        body: Vec<u8>,
        streamed: bool,
    ) {
        self.shared.answers.lock().unwrap().insert(
            path.to_string(),
            Answer {
                status,
                media_type: media_type.to_string(),
                body,
                streamed,
            },
        );
    }
}

impl Drop for RegistryProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn forward(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let method = request.method().clone();
    let path_and_query = request
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".to_string());
    let path = request.uri().path().to_string();
    shared
        .requests
        .lock()
        .unwrap()
        .push(format!("{method} {path}"));
    if method == axum::http::Method::GET
        && let Some(answer) = shared.answers.lock().unwrap().get(&path).cloned()
    {
        let body = if answer.streamed {
            // A stream has no size hint, so hyper sends it chunked, with no Content-Length.
            Body::from_stream(Body::from(answer.body).into_data_stream())
        } else {
            Body::from(answer.body)
        };
        let mut response = Response::new(body);
        *response.status_mut() = answer.status;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_str(&answer.media_type).expect("a media type"),
        );
        return response;
    }
    let mut headers = request.headers().clone();
    headers.remove(header::HOST);
    let body = match axum::body::to_bytes(request.into_body(), usize::MAX).await {
        Ok(body) => body,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let url = format!("http://{}{path_and_query}", shared.upstream);
    let upstream = match shared
        .http
        .request(method, url)
        .headers(headers)
        .body(body)
        .send()
        .await
    {
        Ok(response) => response,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let status = upstream.status();
    let mut headers = upstream.headers().clone();
    headers.remove(header::TRANSFER_ENCODING);
    headers.remove(header::CONNECTION);
    let body = upstream.bytes().await.unwrap_or_default();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}
