//! The PhoenixNAP driver's OAuth2 token flow against PhoenixNAP's published OpenAPI specs
//! (../shared/material/go-sdk-bmc/specs/*.spec.yaml, the `OAuth2` security scheme: flow
//! `clientCredentials`, its `tokenUrl` and scopes) and against the PhoenixNAP simulator: what
//! the driver declares in `info()`, what the guest sends and receives (placeholders only), what
//! the token endpoint receives (the real credentials, in Basic or form fields only), and how
//! many token requests concurrent instances cause (one per token lifetime).
//!
//! The specs are found by `tests/material` (beside the clone, or `WASM_CCM_SHARED_MATERIAL`);
//! without them the test fails, unless `WASM_CCM_ALLOW_MISSING_MATERIAL=1` skips the spec checks
//! (the simulator checks always run).

mod common;
mod material;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;
use tokio::sync::{Barrier, OnceCell};
use url::Url;
use wasm_ccm_drivers::PHOENIXNAP_DRIVER;
use wasm_ccm_runtime::http::{Forward, HttpInterceptor, Intercepted, Method, Request, Response};
use wasm_ccm_runtime::types::{SecretDecl, SecretUse};
use wasm_ccm_runtime::{CallScope, Compiled, Driver, DriverOptions};
use wasm_ccm_runtime::{InitInput, PoolOptions, http};
use wasm_ccm_sim::phoenixnap::{
    LoggedRequest, PhoenixnapOptions, PhoenixnapSim, SeedServer, TOKEN_PATH,
};

const PLACEHOLDER: &str = "wccm-secret.";
/// Concurrent instances asking for a token at once.
const N: usize = 4;

async fn compiled() -> &'static Compiled {
    static COMPILED: OnceCell<Compiled> = OnceCell::const_new();
    COMPILED
        .get_or_init(|| common::compile(PHOENIXNAP_DRIVER))
        .await
}

/// The OAuth2 client-credentials scheme the specs publish.
struct SpecScheme {
    token_url: Url,
    scopes: Vec<String>,
    /// The API servers' URLs (`servers[].url`).
    servers: Vec<Url>,
    files: usize,
}

/// The published scheme; `None` only when the specs are absent and skipping is asked for
/// (`material::ALLOW_MISSING_VAR`), else an absent directory fails the test.
fn spec() -> Option<SpecScheme> {
    let dir = material::dir("go-sdk-bmc/specs", "PhoenixNAP's OpenAPI specs")?;
    let entries =
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{} cannot be read: {e}", dir.display()));
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".spec.yaml"))
        .collect();
    files.sort();
    let mut token_urls = Vec::new();
    let mut scopes = Vec::new();
    let mut servers = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read spec");
        let doc: Value = serde_norway::from_str(&text).expect("spec is YAML");
        let schemes = doc["components"]["securitySchemes"]
            .as_object()
            .unwrap_or_else(|| panic!("{} has no securitySchemes", file.display()));
        for scheme in schemes.values().filter(|s| s["type"] == "oauth2") {
            let flow = &scheme["flows"]["clientCredentials"];
            let url = flow["tokenUrl"].as_str().expect("tokenUrl");
            token_urls.push(Url::parse(url).expect("tokenUrl is a URL"));
            let granted = flow["scopes"].as_object().expect("scopes");
            scopes.extend(granted.keys().cloned());
        }
        for server in doc["servers"].as_array().into_iter().flatten() {
            let url = server["url"].as_str().expect("server url");
            servers.push(Url::parse(url).expect("server URL"));
        }
    }
    assert!(
        !token_urls.is_empty(),
        "no OAuth2 clientCredentials scheme in {}",
        dir.display()
    );
    scopes.sort();
    scopes.dedup();
    let first = token_urls[0].clone();
    assert!(
        token_urls.iter().all(|u| *u == first),
        "the specs disagree on tokenUrl: {token_urls:?}"
    );
    Some(SpecScheme {
        token_url: first,
        scopes,
        servers,
        files: files.len(),
    })
}

/// Records what the guest sends and gets back, and holds the first [`N`] token requests until
/// all [`N`] have arrived (so that they are provably concurrent).
struct Recorder {
    seen: Mutex<Vec<(Request, Option<Response>)>>,
    held: AtomicUsize,
    barrier: Barrier,
}

impl HttpInterceptor for Recorder {
    fn intercept<'a>(&'a self, forward: Forward<'a>) -> Intercepted<'a> {
        Box::pin(async move {
            let request = forward.request().clone();
            if request.url.ends_with(TOKEN_PATH) && self.held.fetch_add(1, Ordering::SeqCst) < N {
                self.barrier.wait().await;
            }
            let response = forward.send().await;
            self.seen
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((request, response.as_ref().ok().cloned()));
            response
        })
    }
}

fn basic_pair(headers: &[(String, String)]) -> Option<(String, String)> {
    let value = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        .map(|(_, v)| v.as_str())?;
    let encoded = value.strip_prefix("Basic ")?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

fn form(body: &[u8]) -> Vec<(String, String)> {
    url::form_urlencoded::parse(body).into_owned().collect()
}

fn is_placeholder(v: &str) -> bool {
    v.strip_prefix(PLACEHOLDER)
        .is_some_and(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Every form a check must search `text` in for a credential: as it is, percent-decoded (a
/// secret with `+/=:` travels as `%2B%2F%3D%3A` in a URL or a form), and form-decoded (`+` is a
/// space there too). Bytes that are not UTF-8 are searched as replacement characters.
fn decodings(text: &[u8]) -> Vec<String> {
    let form: Vec<String> = url::form_urlencoded::parse(text)
        .flat_map(|(k, v)| [k.into_owned(), v.into_owned()])
        .collect();
    vec![
        String::from_utf8_lossy(text).into_owned(),
        percent_encoding::percent_decode(text)
            .decode_utf8_lossy()
            .into_owned(),
        form.join("\n"),
    ]
}

/// The names of the `credentials` (name, value) that occur in any of `texts`.
fn leaked<'a>(texts: &[String], credentials: &[(&'a str, &str)]) -> Vec<&'a str> {
    credentials
        .iter()
        .filter(|(_, value)| texts.iter().any(|t| t.contains(value)))
        .map(|(name, _)| *name)
        .collect()
}

/// What a request of the guest says, decoded as a server would read it: the URL (its query
/// percent- and form-decoded), each header value (a Basic one Base64-decoded too) and the body
/// as text (not `Debug`'s list of numbers), percent- and form-decoded.
fn guest_request_texts(request: &Request) -> Vec<String> {
    let mut texts = decodings(request.url.as_bytes());
    for (_, value) in &request.headers {
        texts.extend(decodings(value.as_bytes()));
        if let Some(encoded) = value.strip_prefix("Basic ")
            && let Ok(pair) = base64::engine::general_purpose::STANDARD.decode(encoded.trim())
        {
            texts.extend(decodings(&pair));
        }
    }
    texts.extend(decodings(&request.body));
    texts
}

/// What a request the simulator logged says, decoded: its query and its body (the text of a
/// non-JSON body, else the JSON), each percent- and form-decoded.
fn logged_request_texts(request: &LoggedRequest) -> Vec<String> {
    let mut texts = decodings(request.query.as_bytes());
    let body = match &request.body {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    texts.extend(decodings(body.as_bytes()));
    texts
}

fn decl<'a>(secrets: &'a [SecretDecl], name: &str) -> &'a SecretDecl {
    secrets
        .iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("the driver declares no {name}: {secrets:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_flow_matches_the_spec_and_concurrent_instances_share_one_token() {
    let sim = PhoenixnapSim::start(
        "127.0.0.1:0".parse().expect("addr"),
        PhoenixnapOptions {
            client_secret: "real-Secret+/=~:42".into(),
            ..PhoenixnapOptions::default()
        },
    )
    .await
    .expect("simulator starts");
    let server = sim.add_server(SeedServer::new("worker-1"));
    let (real_id, real_secret) = (sim.client_id(), sim.client_secret());
    let recorder = Arc::new(Recorder {
        seen: Mutex::new(Vec::new()),
        held: AtomicUsize::new(0),
        barrier: Barrier::new(N),
    });
    let opts = DriverOptions {
        init: InitInput {
            env: vec![
                ("PNAP_CLIENT_ID".into(), real_id.clone()),
                ("PNAP_CLIENT_SECRET".into(), real_secret.clone()),
                ("PNAP_BASE_URL".into(), sim.url()),
                ("PNAP_AUTH_URL".into(), sim.url()),
                ("PNAP_LOCATION".into(), "PHX".into()),
            ],
            ..Default::default()
        },
        pool: PoolOptions {
            max_concurrency: N,
            ..Default::default()
        },
        http: http::Config {
            egress: Some(
                wasm_ccm_runtime::EgressPolicy::parse(&[sim.url()]).expect("egress grants"),
            ),
            interceptor: Some(recorder.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    let driver: Driver = common::runtime()
        .load(compiled().await, opts)
        .await
        .expect("loads");

    // What the driver declares.
    let secrets = &driver.info().secrets;
    let id = decl(secrets, "client-id");
    let secret = decl(secrets, "client-secret");
    assert!(id.uses.contains(&SecretUse::BasicUser), "{id:?}");
    assert!(id.uses.contains(&SecretUse::Param("client_id".into())));
    assert!(
        secret.uses.contains(&SecretUse::BasicPassword),
        "{secret:?}"
    );
    assert!(
        secret
            .uses
            .contains(&SecretUse::Param("client_secret".into()))
    );
    let seal = secret
        .uses
        .iter()
        .find_map(|u| match u {
            SecretUse::Oauth2Client(seal) => Some(seal),
            _ => None,
        })
        .expect("the client secret seals the OAuth2 token");
    assert_eq!(seal.token_path, TOKEN_PATH, "the simulator's token path");
    let spec = spec();
    if let Some(spec) = &spec {
        assert_eq!(seal.token_path, spec.token_url.path(), "tokenUrl path");
        for d in [id, secret] {
            let origin = Url::parse(&d.origin.default_url).expect("default origin");
            assert_eq!(
                origin.origin(),
                spec.token_url.origin(),
                "{}: the credentials go to the spec's token host by default",
                d.name
            );
        }
        let token_origins: Vec<_> = seal
            .token_origins
            .iter()
            .map(|o| Url::parse(&o.default_url).expect("token origin").origin())
            .collect();
        assert!(!spec.servers.is_empty());
        for server in &spec.servers {
            assert!(
                token_origins.contains(&server.origin()),
                "the sealed token may go to the spec's API server {server}: {token_origins:?}"
            );
        }
        assert_eq!(
            spec.token_url.scheme(),
            "https",
            "the published token endpoint is HTTPS"
        );
        println!(
            "spec: {} files agree on tokenUrl {} (scopes {:?}); the declaration matches",
            spec.files, spec.token_url, spec.scopes
        );
    }

    // N concurrent calls: N instances each ask for a token (the recorder holds them until all
    // N have asked), and the host sends one token request.
    let node = {
        let mut n = common::node("worker-1");
        n.provider_id = format!("phoenixnap://{server}");
        n
    };
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..N {
        let (driver, node) = (driver.clone(), node.clone());
        calls.spawn(async move {
            driver
                .instance_exists(&node, &CallScope::object("default/web"))
                .await
                .into_result()
        });
    }
    let all = tokio::time::timeout(Duration::from_secs(120), calls.join_all())
        .await
        .expect("the concurrent calls end");
    for result in all {
        assert!(result.expect("exists"));
    }
    assert!(
        driver.stats().instances_created.load(Ordering::Relaxed) >= N as u64,
        "N instances served the calls"
    );
    let asked = sim.token_requests();
    assert_eq!(
        asked.len(),
        1,
        "{N} concurrent instances cause one token request: {asked:?}"
    );

    // Phase 2: the token expires; the next call causes exactly one more token request.
    sim.expire_tokens();
    assert!(
        driver
            .instance_exists(&node, &CallScope::object("default/web"))
            .await
            .into_result()
            .expect("exists after expiry")
    );
    let asked = sim.token_requests();
    assert_eq!(asked.len(), 2, "one token request per lifetime: {asked:?}");

    // What the token endpoint received: the real credentials, in Basic or form fields only.
    for t in &asked {
        assert_eq!(t.status, 200, "{t:?}");
        assert!(
            t.form
                .contains(&("grant_type".into(), "client_credentials".into())),
            "{t:?}"
        );
        assert_eq!(t.other_authorization, None);
        let in_form = (
            t.form
                .iter()
                .find(|(k, _)| k == "client_id")
                .map(|(_, v)| v.clone()),
            t.form
                .iter()
                .find(|(k, _)| k == "client_secret")
                .map(|(_, v)| v.clone()),
        );
        match &t.basic {
            Some(pair) => {
                assert_eq!(pair, &(real_id.clone(), real_secret.clone()));
                assert_eq!(in_form, (None, None), "not twice: {t:?}");
            }
            None => assert_eq!(in_form, (Some(real_id.clone()), Some(real_secret.clone()))),
        }
        for (k, v) in &t.form {
            if k != "client_id" && k != "client_secret" {
                assert!(!v.contains(&real_secret) && !v.contains(&real_id), "{k}");
            }
        }
    }
    // Nowhere else: no query the simulator logged carries a credential, nor any body but the
    // token request's (checked above), decoded as the server reads them.
    let credentials = [
        ("the client ID", real_id.as_str()),
        ("the client secret", real_secret.as_str()),
    ];
    let logged = sim.requests();
    assert!(!logged.is_empty(), "the simulator logged no request");
    for r in &logged {
        let mut texts = decodings(r.query.as_bytes());
        if !r.path.ends_with(TOKEN_PATH) {
            texts = logged_request_texts(r);
        }
        let found = leaked(&texts, &credentials);
        assert!(found.is_empty(), "{found:?} in {}", r.line());
    }

    // What the guest sent and got: placeholders only.
    let seen = recorder
        .seen
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let tokens: Vec<&(Request, Option<Response>)> = seen
        .iter()
        .filter(|(r, _)| r.url.ends_with(TOKEN_PATH))
        .collect();
    assert!(tokens.len() > N, "every instance asked: {}", tokens.len());
    let mut sealed = Vec::new();
    for (request, response) in &tokens {
        assert_eq!(request.method, Method::Post);
        let url = Url::parse(&request.url).expect("url");
        assert_eq!(url.path(), TOKEN_PATH);
        assert_eq!(url.origin(), Url::parse(&sim.url()).expect("sim").origin());
        let found = leaked(&guest_request_texts(request), &credentials);
        assert!(
            found.is_empty(),
            "{found:?} in a token request of the guest"
        );
        let fields = form(&request.body);
        assert!(fields.contains(&("grant_type".into(), "client_credentials".into())));
        // The scopes the driver asks for are the published ones.
        if let Some(scopes) = spec.as_ref().map(|s| &s.scopes) {
            for (_, scope) in fields.iter().filter(|(k, _)| k == "scope") {
                for word in scope.split(' ') {
                    assert!(
                        scopes.iter().any(|s| s == word),
                        "scope {word} is not published"
                    );
                }
            }
        }
        let credentials = basic_pair(&request.headers)
            .map(|(u, p)| vec![u, p])
            .unwrap_or_else(|| {
                fields
                    .iter()
                    .filter(|(k, _)| k == "client_id" || k == "client_secret")
                    .map(|(_, v)| v.clone())
                    .collect()
            });
        assert_eq!(credentials.len(), 2, "{request:?}");
        assert!(
            credentials.iter().all(|c| is_placeholder(c)),
            "{credentials:?}"
        );
        let response = response.as_ref().expect("a token answer");
        let answer: Value = serde_json::from_slice(&response.body).expect("token JSON");
        let token = answer["access_token"].as_str().expect("access_token");
        assert!(
            is_placeholder(token),
            "the guest gets a placeholder token: {token}"
        );
        sealed.push(token.to_string());
    }
    // The first N answers are the same sealed token (one network answer shared).
    assert!(sealed[..N].iter().all(|t| *t == sealed[0]), "{sealed:?}");
    // API requests carry the sealed token as bearer, and no real value comes back.
    let api: Vec<&(Request, Option<Response>)> = seen
        .iter()
        .filter(|(r, _)| !r.url.ends_with(TOKEN_PATH))
        .collect();
    assert!(!api.is_empty());
    for (request, response) in api {
        let found = leaked(&guest_request_texts(request), &credentials);
        assert!(found.is_empty(), "{found:?} in an API request of the guest");
        let bearer = request
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            .and_then(|(_, v)| v.strip_prefix("Bearer "))
            .expect("bearer");
        assert!(sealed.iter().any(|t| t == bearer), "{bearer}");
        if let Some(r) = response {
            let found = leaked(&decodings(&r.body), &credentials);
            assert!(found.is_empty(), "{found:?} in an answer to the guest");
        }
    }
    println!(
        "{} guest token requests ({N} concurrent), {} reached the token endpoint, credentials \
         only in {}",
        tokens.len(),
        asked.len(),
        if asked.iter().all(|t| t.basic.is_some()) {
            "HTTP Basic"
        } else {
            "Basic or form fields"
        }
    );
}

/// Positive control for the leak checks above (review 2026-11-28, tests.md rows 9 and 10): each
/// credential planted where a leak would put it, in the form it would travel in, is found; the
/// former checks (`format!("{request:?}")`, which prints a body as numbers, and a search of the
/// raw, still-encoded query for the secret only) missed every one of these.
#[test]
fn the_leak_checks_find_credentials_in_every_form_they_travel_in() {
    let (id, secret) = ("client-6f1e2d3c", "real-Secret+/=~:42");
    let credentials = [("the client ID", id), ("the client secret", secret)];
    let both = vec!["the client ID", "the client secret"];
    let encoded: String = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("client_id", id)
        .append_pair("client_secret", secret)
        .finish();
    assert!(
        !encoded.contains(secret),
        "the secret is encoded: {encoded}"
    );
    let guest = |url: String, headers: Vec<(String, String)>, body: Vec<u8>| Request {
        method: Method::Post,
        url,
        headers,
        body,
        timeout_ms: None,
    };

    // In a form body.
    let r = guest(
        "http://127.0.0.1:1/token".into(),
        vec![],
        encoded.clone().into_bytes(),
    );
    assert_eq!(leaked(&guest_request_texts(&r), &credentials), both);
    let debug = format!("{r:?}");
    assert!(!debug.contains(secret) && !debug.contains(id), "{debug}");
    // In a URL's query, percent-encoded (the `+` as `%2B`), and with a raw `+` read as a space.
    let r = guest(format!("http://127.0.0.1:1/x?{encoded}"), vec![], vec![]);
    assert_eq!(leaked(&guest_request_texts(&r), &credentials), both);
    let raw = guest(
        format!("http://127.0.0.1:1/x?a={id}&b={secret}"),
        vec![],
        vec![],
    );
    assert_eq!(leaked(&guest_request_texts(&raw), &credentials), both);
    // In an HTTP Basic header.
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"));
    let r = guest(
        "http://127.0.0.1:1/token".into(),
        vec![("authorization".into(), format!("Basic {basic}"))],
        vec![],
    );
    assert_eq!(leaked(&guest_request_texts(&r), &credentials), both);
    // Nothing planted, nothing found.
    let clean = guest(
        "http://127.0.0.1:1/x?a=b".into(),
        vec![("authorization".into(), "Bearer x".into())],
        b"grant_type=client_credentials".to_vec(),
    );
    assert!(leaked(&guest_request_texts(&clean), &credentials).is_empty());

    // What the simulator logs: a query and a body, as the server received them.
    let logged = |query: String, body: Option<Value>| LoggedRequest {
        method: "GET".into(),
        path: "/bmc/v1/servers".into(),
        query,
        body,
        status: 200,
    };
    let q = logged(encoded.clone(), None);
    // The former check searched this raw query for the secret only: not there as such, and the
    // client ID (there as such) was not looked for.
    assert!(!q.query.contains(secret));
    assert_eq!(leaked(&logged_request_texts(&q), &credentials), both);
    let form_body = logged(String::new(), Some(Value::String(encoded.clone())));
    assert_eq!(
        leaked(&logged_request_texts(&form_body), &credentials),
        both
    );
    let json_body = logged(
        String::new(),
        Some(serde_json::json!({"note": format!("{id} {secret}")})),
    );
    assert_eq!(
        leaked(&logged_request_texts(&json_body), &credentials),
        both
    );
    assert!(
        leaked(
            &logged_request_texts(&logged("tag=a.b".into(), None)),
            &credentials
        )
        .is_empty()
    );
}
