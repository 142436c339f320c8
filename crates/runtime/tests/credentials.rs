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
use wasm_ccm_runtime::{InitInput, http, log};

/// The operator's token; the driver must never see it. It holds `/ + = & < >` as Base64 keys and
/// passwords do, so that every encoding below changes it.
const TOKEN: &str = "hostile-canary/token+7Qx=9Zp&Lm<x>";

/// How the `/echo/<name>` path reflects the request it read: as servers do in error pages,
/// debug answers and redirects (`large`: raw and form-encoded around 80 KiB of padding). Each is undone by the hostile driver with its own decoders.
const REFLECTIONS: &[&str] = &[
    "raw",
    "base64",
    "form",
    "python-quote",
    "go-json",
    "xml",
    "hex",
    "hex-spaced",
    "utf16",
    "double-percent",
    "base64-of-percent",
    "large",
];

/// `text` as reflection `name` writes it.
fn reflect(name: &str, text: &str) -> Vec<u8> {
    let form = |t: &str| url::form_urlencoded::byte_serialize(t.as_bytes()).collect::<String>();
    let quote = |t: &str| {
        t.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"/_.-~".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect::<String>()
    };
    let b64 = |t: &[u8]| base64::engine::general_purpose::STANDARD.encode(t);
    match name {
        "raw" => text.as_bytes().to_vec(),
        "base64" => b64(text.as_bytes()).into_bytes(),
        "form" => form(text).into_bytes(),
        "python-quote" => quote(text).into_bytes(),
        // Go's encoding/json escapes & < > as \u00XX.
        "go-json" => serde_json::to_string(&serde_json::json!({ "error": text }))
            .unwrap_or_default()
            .replace('&', "\\u0026")
            .replace('<', "\\u003c")
            .replace('>', "\\u003e")
            .into_bytes(),
        "xml" => format!(
            "<errorresponse><errortext>{}</errortext></errorresponse>",
            text.replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
        )
        .into_bytes(),
        "hex" => hex::encode(text).into_bytes(),
        "hex-spaced" => text
            .bytes()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
            .into_bytes(),
        "utf16" => text.encode_utf16().flat_map(u16::to_le_bytes).collect(),
        "double-percent" => form(&form(text)).into_bytes(),
        "base64-of-percent" => b64(quote(text).as_bytes()).into_bytes(),
        // Larger than the host scans inline: the blocking-thread path.
        "large" => format!("{text}{}{}", " ".repeat(80 * 1024), form(text)).into_bytes(),
        other => format!("unknown reflection {other}").into_bytes(),
    }
}

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
                if path.starts_with("/drop") {
                    // The connection ends with no answer: the client reports a transport error.
                    return;
                }
                let (status, extra, body): (&str, String, Vec<u8>) = if let Some(name) =
                    path.strip_prefix("/echo/")
                {
                    let name = name.split('?').next().unwrap_or_default();
                    ("200 OK", String::new(), reflect(name, &text))
                } else if path.starts_with("/echo") {
                    let b64 = base64::engine::general_purpose::STANDARD.encode(&text);
                    let pct: String =
                        url::form_urlencoded::byte_serialize(text.as_bytes()).collect();
                    (
                        "200 OK",
                        String::new(),
                        format!("{text}\n{b64}\n{pct}").into_bytes(),
                    )
                } else if path.starts_with("/gzip") {
                    // Compressed whatever the client asked for, as a misconfigured proxy does.
                    let mut gz =
                        flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                    let _ = std::io::Write::write_all(&mut gz, text.as_bytes());
                    (
                        "200 OK",
                        "content-encoding: gzip\r\n".to_string(),
                        gz.finish().unwrap_or_default(),
                    )
                } else if path.starts_with("/sso") {
                    // An SSO proxy: to its login page, the original request line quoted in
                    // `return_to`, form-encoded twice. `/sso-300` answers the same with 300,
                    // which no client follows, for the control whose request is followed.
                    let line = text.lines().next().unwrap_or_default().to_string();
                    let once: String =
                        url::form_urlencoded::byte_serialize(line.as_bytes()).collect();
                    let twice: String =
                        url::form_urlencoded::byte_serialize(once.as_bytes()).collect();
                    let status = if path.starts_with("/sso-300") {
                        "300 Multiple Choices"
                    } else {
                        "302 Found"
                    };
                    (
                        status,
                        format!("location: https://sso.example/login?return_to={twice}\r\n"),
                        Vec::new(),
                    )
                } else if path.starts_with("/redirect") {
                    let to = redirect_to.unwrap_or(port);
                    (
                        "307 Temporary Redirect",
                        format!("location: http://127.0.0.1:{to}/sink\r\n"),
                        Vec::new(),
                    )
                } else {
                    ("200 OK", String::new(), b"ok".to_vec())
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = sock.write_all(&[head.as_bytes(), &body].concat()).await;
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

/// The hostile driver declaring `token` (bearer, `x-api-key` or the `api_key` parameter, origin
/// `HOSTILE_API_URL`), granted egress to the API and to a second server.
async fn setup() -> Setup {
    setup_with("secrets").await
}

/// The hostile driver in info mode `mode` (`normal`: it declares nothing and holds the token in
/// clear, the control that shows an attack would work), with the same servers and grants.
async fn setup_with(mode: &str) -> Setup {
    let other = server(None).await;
    let api = server(Some(other.port)).await;
    let driver = load_hostile(mode, &api, &other, &[])
        .await
        .unwrap_or_else(|e| panic!("mode {mode} does not load: {e}"));
    Setup {
        driver: driver.0,
        api,
        other,
        sink: driver.1,
    }
}

async fn load_hostile(
    mode: &str,
    api: &Server,
    other: &Server,
    extra_env: &[(&str, &str)],
) -> Result<(wasm_ccm_runtime::Driver, Arc<MemorySink>), String> {
    let compiled = runtime()
        .compile(
            &format!("hostile-{mode}.wasm"),
            wasm_ccm_drivers::hostile_with_info(mode),
        )
        .await
        .expect("compiles");
    let sink = Arc::new(MemorySink::default());
    let mut env = vec![
        ("HOSTILE_TOKEN".to_string(), TOKEN.to_string()),
        ("HOSTILE_API_URL".to_string(), api.url()),
    ];
    env.extend(
        extra_env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let opts = DriverOptions {
        init: InitInput {
            env,
            ..Default::default()
        },
        http: http::Config {
            egress: Some(
                wasm_ccm_runtime::EgressPolicy::parse(&[api.url(), other.url()])
                    .expect("egress grants"),
            ),
            ..Default::default()
        },
        log: log::Config {
            sink: sink.clone(),
            ..Default::default()
        },
        ..Default::default()
    };
    runtime()
        .load(&compiled, opts)
        .await
        .map(|d| (d, sink))
        .map_err(|e| e.to_string())
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
    leak_then_assert_no_token_in_logs(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_reflects_the_token_hands_the_driver_the_placeholder() {
    let s = setup().await;
    let answer = place(&s, &format!("{}/echo", s.api.url()), "bearer").await;
    // The echo held the token raw, in Base64 and percent-encoded: the driver saw none of it,
    // and the placeholder where the raw token was.
    assert_eq!(answer.as_deref(), Ok("s200-canary-no-placeholder-yes"));
    // The attack fired: the server got the real token, not the placeholder.
    assert_server_got_the_token(&s.api);
    leak_then_assert_no_token_in_logs(&s).await;
}

/// The last request `server` read carried the real token as a bearer token.
fn assert_server_got_the_token(server: &Server) {
    let seen = server.requests();
    let last = seen.last().cloned().unwrap_or_default();
    assert!(
        last.contains(&format!("authorization: Bearer {TOKEN}")),
        "the server did not receive the real token: {last}"
    );
    assert!(
        !last.contains("wccm-secret."),
        "the placeholder went out: {last}"
    );
}

/// Each way a server reflects a request (Base64, percent with either safe set, Go's JSON
/// escapes, XML entities, hex, UTF-16, nested encodings) is undone by the hostile driver's own
/// decoders: a driver that holds the token in clear recovers it from every one (the control),
/// and one whose token the host holds recovers it from none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_reflection_of_the_token_gives_it_back_to_the_driver() {
    let guarded = setup().await;
    let control = setup_with("normal").await;
    for name in REFLECTIONS {
        let at = |s: &Setup| format!("{}/echo/{name}", s.api.url());
        let clear = place(&control, &at(&control), "bearer").await;
        assert!(
            clear
                .as_deref()
                .is_ok_and(|a| a.starts_with("s200-canary-yes")),
            "{name}: the control did not recover the token: {clear:?}"
        );
        let held = place(&guarded, &at(&guarded), "bearer").await;
        assert!(
            held.as_deref()
                .is_ok_and(|a| a.starts_with("s200-canary-no")),
            "{name}: the driver recovered the token: {held:?}"
        );
        assert_server_got_the_token(&guarded.api);
    }
}

/// An SSO proxy's redirect quotes the request line twice encoded in its `Location`: the guest
/// gets the 3xx (credentialed requests are not followed) without the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_quoting_the_request_does_not_carry_the_token() {
    let guarded = setup().await;
    let control = setup_with("normal").await;
    // The control's request carries no host-held credential, so a 302 would be followed: it
    // reads the same Location from a 300.
    let clear = place(
        &control,
        &format!("{}/sso-300", control.api.url()),
        "api-key-query",
    )
    .await;
    assert!(
        clear
            .as_deref()
            .is_ok_and(|a| a.starts_with("s300-canary-yes")),
        "control: {clear:?}"
    );
    let held = place(
        &guarded,
        &format!("{}/sso", guarded.api.url()),
        "api-key-query",
    )
    .await;
    assert!(
        held.as_deref()
            .is_ok_and(|a| a.starts_with("s302-canary-no")),
        "{held:?}"
    );
    let form: String = url::form_urlencoded::byte_serialize(TOKEN.as_bytes()).collect();
    let seen = guarded.api.requests().last().cloned().unwrap_or_default();
    assert!(seen.contains(&format!("api_key={form}")), "{seen}");
}

/// The host owns `Content-Encoding` for a driver that holds credentials: it asks for identity
/// whatever the guest asked, and refuses a compressed answer it could not scan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compressed_reflection_is_refused_not_handed_over() {
    let guarded = setup().await;
    let control = setup_with("normal").await;
    let clear = place(
        &control,
        &format!("{}/gzip", control.api.url()),
        "bearer-gzip",
    )
    .await;
    assert!(
        clear
            .as_deref()
            .is_ok_and(|a| a.starts_with("s200-canary-yes")),
        "control: {clear:?}"
    );
    let held = place(
        &guarded,
        &format!("{}/gzip", guarded.api.url()),
        "bearer-gzip",
    )
    .await;
    let e = held.err().unwrap_or_default();
    assert!(
        e.contains("http-error denied") && e.contains("content-encoded (gzip)"),
        "{e}"
    );
    assert!(!e.contains("canary-held"), "{e}");
    let seen = guarded.api.requests().last().cloned().unwrap_or_default();
    assert!(seen.contains("accept-encoding: identity"), "{seen}");
    assert!(
        !seen.contains("deflate"),
        "the guest's Accept-Encoding went out: {seen}"
    );
    assert_server_got_the_token(&guarded.api);
}

/// A credentialed request that fails at the transport (the server drops the connection) comes
/// back as an error composed from the guest's own URL: the HTTP stack's text, which quotes the
/// wire URL with the real key in its query, never reaches the guest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transport_failure_does_not_quote_the_credentialed_request() {
    let s = setup().await;
    let e = place(&s, &format!("{}/drop", s.api.url()), "api-key-query")
        .await
        .err()
        .unwrap_or_default();
    assert!(
        e.contains("http-error connect"),
        "the fault did not fire: {e}"
    );
    assert!(e.contains("/drop?"), "the guest's URL is named: {e}");
    assert!(!e.contains("canary-held"), "the guest held the key: {e}");
    let form: String = url::form_urlencoded::byte_serialize(TOKEN.as_bytes()).collect();
    let seen = s.api.requests().last().cloned().unwrap_or_default();
    assert!(
        seen.starts_with("GET /drop?api_key=") && seen.contains(&form),
        "the server did not get the real key: {seen}"
    );
}

/// One value under two names: the same location declared twice, or the same value at two
/// locations with different origins, is refused at load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_cannot_be_declared_under_a_second_name_with_another_origin() {
    let other = server(None).await;
    let api = server(Some(other.port)).await;
    let e = load_hostile("secrets-alias", &api, &other, &[])
        .await
        .err()
        .unwrap_or_default();
    assert!(
        e.contains("token-two") && e.contains("already declared by secret \"token\""),
        "{e}"
    );
    let e = load_hostile("secrets-twin", &api, &other, &[("HOSTILE_TWIN", TOKEN)])
        .await
        .err()
        .unwrap_or_default();
    assert!(
        e.contains("token and twin hold the same value") && e.contains("exfil.hostile.example"),
        "{e}"
    );
    assert!(!e.contains(TOKEN), "{e}");
    // Control: with its own value the twin loads.
    assert!(
        load_hostile(
            "secrets-twin",
            &api,
            &other,
            &[("HOSTILE_TWIN", "another-value-123")]
        )
        .await
        .is_ok()
    );
}

/// The environment variables `init` of the hostile driver in `mode` received, sorted, with
/// credentials under names the 0.2.0 heuristic misses set beside the declared ones.
async fn env_names_seen_by(mode: &str) -> Vec<String> {
    let other = server(None).await;
    let api = server(Some(other.port)).await;
    let extra = [
        ("HOSTILE_DB_PASS", "db-password-under-an-odd-name"),
        ("HOSTILE_PWD", "another-password-value"),
        ("HOSTILE_REGION", "lon1"),
    ];
    let (driver, _) = load_hostile(mode, &api, &other, &extra)
        .await
        .unwrap_or_else(|e| panic!("mode {mode} does not load: {e}"));
    let seen = driver
        .instance_metadata(&node_with("env", &[]), &CallScope::object("test"))
        .await
        .result
        .expect("the env behaviour answers")
        .instance_type;
    let mut names: Vec<String> = seen.split(',').map(str::to_string).collect();
    names.sort();
    names
}

/// Review 2026-11-28 §1, last sub-class: a driver that declares its plain variables (contract
/// 0.2.1, `environment`) gets the environment by an allow-list (those, its secret's place and
/// its origin's setting), so credentials under names no heuristic catches stay out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_that_declares_its_plain_variables_gets_only_those_and_its_declarations() {
    assert_eq!(
        env_names_seen_by("secrets-plain").await,
        ["HOSTILE_API_URL", "HOSTILE_REGION", "HOSTILE_TOKEN"]
    );
    // Control: the same driver without the declaration (0.2.0's rule) gets both credentials.
    let heuristic = env_names_seen_by("secrets").await;
    for name in ["HOSTILE_DB_PASS", "HOSTILE_PWD", "HOSTILE_REGION"] {
        assert!(heuristic.contains(&name.to_string()), "{heuristic:?}");
    }
}

/// A declared plain variable outside the driver's prefixes, or one that is a secret's place, is
/// refused at load, naming the variable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_variables_outside_the_prefixes_or_on_a_secret_are_refused_at_load() {
    let other = server(None).await;
    let api = server(Some(other.port)).await;
    for (mode, says) in [
        (
            "plain-outside",
            "OTHER_REGION: not under one of the env-prefixes",
        ),
        (
            "plain-secret",
            "HOSTILE_TOKEN: it is where secret \"token\" is read from",
        ),
    ] {
        let e = load_hostile(mode, &api, &other, &[])
            .await
            .err()
            .unwrap_or_default();
        assert!(e.contains(says), "{mode}: {e}");
    }
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

/// No log record carries the token. The records are never empty: the `leak` behaviour logs
/// the driver's token (its placeholder) first, so a redactor that let the value through shows.
fn assert_no_token_in_logs(s: &Setup) {
    let records = s.sink.records();
    assert!(
        !records.is_empty(),
        "nothing was logged: the check would prove nothing"
    );
    for r in records {
        let text = format!("{} {:?}", r.message, r.fields);
        assert!(!text.contains(TOKEN), "the token is in a log record: {r:?}");
    }
}

/// Makes the driver log what it holds of the token, then checks the logs.
async fn leak_then_assert_no_token_in_logs(s: &Setup) {
    let _ = s
        .driver
        .instance_metadata(&node_with("leak", &[]), &CallScope::object("test"))
        .await;
    assert_no_token_in_logs(s);
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
