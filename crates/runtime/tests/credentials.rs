//! Issue 31's guarantees, attacked by the hostile driver through the real runtime and real HTTP
//! on loopback: the driver holds its token's placeholder only; the host puts the token into a
//! request only toward the declared origin and in a declared place; everything else is refused
//! before it leaves (the server sees nothing); a server that reflects the token (raw, Base64,
//! percent-encoded) hands the driver the placeholder instead; a credentialed request is never
//! redirected; and no host output (log lines) carries the token.

mod common;

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use common::{node_with, runtime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use wasm_ccm_runtime::log::MemorySink;
use wasm_ccm_runtime::{CallScope, DriverOptions};

/// The operator's token; the driver must never see it.
const TOKEN: &str = "hostile-canary-token-7Qx9ZpLm";

/// A loopback server that records every request it reads (head and body, raw) and answers by
/// path: `/echo` reflects the whole request raw, in Base64 and percent-encoded; `/redirect`
/// sends a 307 to `redirect_to`; anything else is `200 ok`.
struct Server {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

async fn server(redirect_to: Option<u16>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                let mut raw = Vec::new();
                let mut buf = [0u8; 4096];
                // Head, then as much body as content-length says.
                let head_end = loop {
                    let Ok(n) = sock.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    raw.extend_from_slice(&buf[..n]);
                    if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                        break at + 4;
                    }
                };
                let head = String::from_utf8_lossy(&raw[..head_end]).to_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                while raw.len() < head_end + length {
                    let Ok(n) = sock.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        break;
                    }
                    raw.extend_from_slice(&buf[..n]);
                }
                let text = String::from_utf8_lossy(&raw).into_owned();
                let path = text.split(' ').nth(1).unwrap_or("/").to_string();
                if let Ok(mut s) = record.lock() {
                    s.push(text.clone());
                }
                let (status, extra, body) = if path.starts_with("/echo") {
                    let b64 = base64::engine::general_purpose::STANDARD.encode(&text);
                    let pct: String =
                        url::form_urlencoded::byte_serialize(text.as_bytes()).collect();
                    ("200 OK", String::new(), format!("{text}\n{b64}\n{pct}"))
                } else if path.starts_with("/redirect") {
                    let to = redirect_to.unwrap_or(port);
                    (
                        "307 Temporary Redirect",
                        format!("location: http://127.0.0.1:{to}/sink\r\n"),
                        String::new(),
                    )
                } else {
                    ("200 OK", String::new(), "ok".to_string())
                };
                let reply = format!(
                    "HTTP/1.1 {status}\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(reply.as_bytes()).await;
            });
        }
    });
    Server { port, seen }
}

impl Server {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn requests(&self) -> Vec<String> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

struct Setup {
    driver: wasm_ccm_runtime::Driver,
    api: Server,
    other: Server,
    sink: Arc<MemorySink>,
}

/// The hostile driver declaring `token` (bearer or `x-api-key`, origin `HOSTILE_API_URL`),
/// granted egress to the API and to a second server.
async fn setup() -> Setup {
    let other = server(None).await;
    let api = server(Some(other.port)).await;
    let compiled = runtime()
        .compile(
            "hostile-secrets.wasm",
            wasm_ccm_drivers::hostile_with_info("secrets"),
        )
        .await
        .expect("compiles");
    let sink = Arc::new(MemorySink::default());
    let opts = DriverOptions {
        egress: Some(vec![api.url(), other.url()]),
        env: vec![
            ("HOSTILE_TOKEN".into(), TOKEN.into()),
            ("HOSTILE_API_URL".into(), api.url()),
        ],
        log_sink: sink.clone(),
        ..Default::default()
    };
    let driver = runtime().load(&compiled, opts).await.expect("loads");
    Setup {
        driver,
        api,
        other,
        sink,
    }
}

/// The `place` behaviour's answer (`s<status>-canary-<yes|no>-placeholder-<yes|no>`) or the
/// error text.
async fn place(s: &Setup, url: &str, place: &str) -> Result<String, String> {
    let node = node_with(
        "place",
        &[("url", url), ("place", place), ("canary", TOKEN)],
    );
    s.driver
        .instance_metadata(&node, &CallScope::object("test"))
        .await
        .result
        .map(|m| m.instance_type)
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_goes_only_to_its_origin_in_a_declared_place() {
    let s = setup().await;
    // The declared places, at the declared origin: the server gets the real token.
    for how in ["bearer", "api-key"] {
        let answer = place(&s, &format!("{}/ok", s.api.url()), how).await;
        assert_eq!(
            answer.as_deref(),
            Ok("s200-canary-no-placeholder-no"),
            "{how}"
        );
    }
    let seen = s.api.requests();
    assert!(
        seen[0].contains(&format!("authorization: Bearer {TOKEN}")),
        "{}",
        seen[0]
    );
    assert!(
        seen[1].contains(&format!("x-api-key: {TOKEN}")),
        "{}",
        seen[1]
    );

    // Every other place, and the declared place toward another granted origin: refused
    // before anything leaves.
    let before = s.api.requests().len();
    for how in [
        "other-header",
        "header-name",
        "query",
        "path",
        "part-of-value",
        "json-body",
        "basic",
    ] {
        let e = place(&s, &format!("{}/x", s.api.url()), how).await.err();
        let e = e.unwrap_or_else(|| panic!("{how} was sent"));
        assert!(
            e.contains("http-error denied") && e.contains("secret token"),
            "{how}: {e}"
        );
        assert!(!e.contains(TOKEN), "{how}: {e}");
    }
    let e = place(&s, &format!("{}/x", s.other.url()), "bearer")
        .await
        .err()
        .unwrap_or_default();
    assert!(e.contains("may go only to"), "{e}");
    assert_eq!(
        s.api.requests().len(),
        before,
        "a refused request reached the API"
    );
    assert!(
        s.other.requests().is_empty(),
        "a refused request reached the other server"
    );
    let refused: u64 = s.driver.secret_misuse().iter().map(|(_, n)| n).sum();
    assert_eq!(refused, 8, "{:?}", s.driver.secret_misuse());
    assert_no_token_in_logs(&s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_reflects_the_token_hands_the_driver_the_placeholder() {
    let s = setup().await;
    let answer = place(&s, &format!("{}/echo", s.api.url()), "bearer").await;
    // The echo held the token raw, in Base64 and percent-encoded: the driver saw none of it,
    // and the placeholder where the raw token was.
    assert_eq!(answer.as_deref(), Ok("s200-canary-no-placeholder-yes"));
    assert_no_token_in_logs(&s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credentialed_request_is_not_redirected() {
    let s = setup().await;
    let answer = place(&s, &format!("{}/redirect", s.api.url()), "api-key").await;
    assert_eq!(answer.as_deref(), Ok("s307-canary-no-placeholder-no"));
    assert!(
        s.other.requests().is_empty(),
        "the redirect was followed: {:?}",
        s.other.requests()
    );
}

fn assert_no_token_in_logs(s: &Setup) {
    for r in s.sink.records() {
        let text = format!("{} {:?}", r.message, r.fields);
        assert!(!text.contains(TOKEN), "the token is in a log record: {r:?}");
    }
}

/// Every channel a driver's text takes out through the host — its error (events, log lines),
/// an event's reason and message, an answer the host writes to the Node, a panic line, log and
/// stdout/stderr lines, the recorded exchanges — carries no token: the driver holds only its
/// placeholder, whatever it tries to quote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_the_driver_emits_through_the_host_carries_the_token() {
    let s = setup().await;
    let mut emitted = Vec::new();
    for behaviour in [
        "leak",
        "leak-error",
        "leak-event",
        "leak-answer",
        "leak-panic",
    ] {
        let outcome = s
            .driver
            .instance_metadata(&node_with(behaviour, &[]), &CallScope::object("test"))
            .await;
        emitted.push(format!(
            "{behaviour}: {:?} {:?} {:?}",
            outcome.result.as_ref().map_err(|e| e.to_string()),
            outcome.events,
            outcome.http
        ));
    }
    // The reflected request above went through the recorded exchanges too.
    let echo = s
        .driver
        .instance_metadata(
            &node_with(
                "place",
                &[
                    ("url", &format!("{}/echo?q=1", s.api.url())),
                    ("place", "bearer"),
                ],
            ),
            &CallScope::object("test"),
        )
        .await;
    emitted.push(format!(
        "{:?} {:?}",
        echo.result.map_err(|e| e.to_string()),
        echo.http
    ));
    for text in &emitted {
        assert!(
            !text.contains(TOKEN),
            "the token left through the host: {text}"
        );
    }
    // The driver did quote what it holds, its placeholder: the host's redactor shows it as
    // `[redacted]`, and an answer field with rules refuses it.
    assert!(
        emitted.iter().all(|t| !t.contains("wccm-secret.")),
        "a placeholder left through the host: {emitted:?}"
    );
    assert!(
        emitted.iter().any(|t| t.contains("[redacted]")),
        "the behaviours quoted nothing: {emitted:?}"
    );
    assert_no_token_in_logs(&s);
}
