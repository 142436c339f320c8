//! The PhoenixNAP driver's OAuth2 token flow against PhoenixNAP's published OpenAPI specs
//! (../shared/material/go-sdk-bmc/specs/*.spec.yaml, the `OAuth2` security scheme: flow
//! `clientCredentials`, its `tokenUrl` and scopes) and against the PhoenixNAP simulator: what
//! the driver declares in `info()`, what the guest sends and receives (placeholders only), what
//! the token endpoint receives (the real credentials, in Basic or form fields only), and how
//! many token requests concurrent instances cause (one per token lifetime).
//!
//! The spec checks are skipped with a message when the material is absent; the simulator checks
//! always run.

mod common;

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
use wasm_ccm_sim::phoenixnap::{PhoenixnapOptions, PhoenixnapSim, SeedServer, TOKEN_PATH};

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

fn spec() -> Option<SpecScheme> {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/material/go-sdk-bmc/specs");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        println!(
            "SKIP the spec checks: {} is absent (PhoenixNAP's OpenAPI specs)",
            dir.display()
        );
        return None;
    };
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
        env: vec![
            ("PNAP_CLIENT_ID".into(), real_id.clone()),
            ("PNAP_CLIENT_SECRET".into(), real_secret.clone()),
            ("PNAP_BASE_URL".into(), sim.url()),
            ("PNAP_AUTH_URL".into(), sim.url()),
            ("PNAP_LOCATION".into(), "PHX".into()),
        ],
        egress: Some(vec![sim.url()]),
        max_concurrency: N,
        http_interceptor: Some(recorder.clone()),
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
    // Nowhere else: no query or body the simulator logged carries a credential.
    for r in sim.requests() {
        let body = r.body.as_ref().map(Value::to_string).unwrap_or_default();
        assert!(!r.query.contains(&real_secret), "{}", r.line());
        if !r.path.ends_with(TOKEN_PATH) {
            assert!(!body.contains(&real_secret) && !body.contains(&real_id));
        }
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
        let text = format!("{request:?}");
        assert!(
            !text.contains(&real_secret) && !text.contains(&real_id),
            "{text}"
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
        let bearer = request
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            .and_then(|(_, v)| v.strip_prefix("Bearer "))
            .expect("bearer");
        assert!(sealed.iter().any(|t| t == bearer), "{bearer}");
        if let Some(r) = response {
            let body = String::from_utf8_lossy(&r.body);
            assert!(!body.contains(&real_secret));
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
