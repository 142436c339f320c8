//! A hostile test driver (world `instances-driver`).
//!
//! The host's sandbox tests call `instances.instance-metadata(node)`; `node.name` picks the
//! misbehaviour. See the crate's description and the host tests for what each one proves.

mod recover;

use std::cell::Cell;

use wasm_ccm_sdk::http::{self, HttpError};
use wasm_ccm_sdk::log;
use wasm_ccm_sdk::types::{
    AddressType, Context, InstanceMetadata, Node, NodeAddress, ProviderError, ProviderInfo,
    SecretDecl, SecretLocation, SecretOrigin, SecretUse,
};
use wasm_ccm_sdk::{Instances, Provider};

thread_local! {
    // Per component instance: a warm (reused) instance counts up, a fresh one starts at 1.
    static CALLS: Cell<u64> = const { Cell::new(0) };
}

/// The hostile driver; `secret` comes from the config line `secret=<value>` (and is
/// `log::redact`ed), `api_key` from the config line `api-key = <value>` (never redacted by the
/// driver: the host must find it itself), `token` from the env variable `HOSTILE_TOKEN` handed to
/// `init` (WASI gives the guest no environment).
pub struct Hostile {
    secret: String,
    api_key: String,
    token: String,
    /// The names of the environment variables `init` received, in order (the `env` behaviour
    /// reports them).
    env_names: Vec<String>,
}

/// What `info` answers. `info` has no input, so the host tests pick a hostile answer by patching
/// this marker's bytes in the `.wasm` (same length, data section only): the text after
/// `mode=` up to the first `.` names the mode.
#[used]
static INFO_MODE: [u8; 48] = *b"WASM-CCM-HOSTILE-INFO mode=normal...............";

fn info_mode() -> String {
    // Read through black_box so the optimiser cannot fold the constant into the code.
    let bytes = std::hint::black_box(&INFO_MODE);
    let text = String::from_utf8_lossy(bytes);
    text.split("mode=")
        .nth(1)
        .and_then(|rest| rest.split('.').next())
        .unwrap_or("normal")
        .to_string()
}

impl Provider for Hostile {
    fn info() -> ProviderInfo {
        let mut info = ProviderInfo {
            name: "hostile".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            provider_id_scheme: "hostile".into(),
            default_egress: Vec::new(),
            env_prefixes: vec!["HOSTILE_".into()],
            annotation_prefixes: vec!["hostile.example/".into()],
            secrets: Vec::new(),
        };
        match info_mode().as_str() {
            // Every variable whose name starts with a letter.
            "env-letters" => info.env_prefixes = ('A'..='Z').map(String::from).collect(),
            "env-kube" => info.env_prefixes = vec!["KUBERNETES_".into()],
            // 2 MiB of version: every metric scrape and log line would carry it.
            "huge-version" => info.version = "1".repeat(2 << 20),
            "broad-egress" => {
                info.default_egress = vec!["http://0.0.0.0/0:*".into(), "http://*:*".into()]
            }
            // A "new version" whose provider IDs another provider's would be.
            "other-scheme" => info.provider_id_scheme = "hostile2".into(),
            "kubectl-annotations" => {
                info.annotation_prefixes = vec!["kubectl.kubernetes.io/".into()]
            }
            // A credential steered into the `Host` header, or read from a variable the driver
            // never declared (another tool's token).
            "secret-host" | "secret-env" => {
                let (var, header) = if info_mode() == "secret-host" {
                    ("HOSTILE_TOKEN", "Host")
                } else {
                    ("KUBE_TOKEN", "x-token")
                };
                info.secrets = vec![SecretDecl::new(
                    "token",
                    vec![SecretLocation::env(var)],
                    SecretOrigin::new(vec![], "https://api.hostile.example"),
                    vec![SecretUse::Header(header.into())],
                )]
            }
            // A well-declared token (issue 31): the host holds it; the `place` behaviour then
            // tries to put its placeholder where the declaration does not allow it.
            "secrets" => info.secrets = vec![declared_token()],
            // The same declaration, with its plain variables declared (`plain_env`): the host
            // then hands `init` an allow-list; the `plain-*` modes declare them wrongly.
            "secrets-plain" | "plain-outside" | "plain-secret" => {
                info.secrets = vec![declared_token()]
            }
            // The token's location declared a second time under another name whose origin is
            // elsewhere: `--secret-origin token=…` would pin one name, the other would exfiltrate.
            "secrets-alias" => {
                info.secrets = vec![
                    declared_token(),
                    SecretDecl::new(
                        "token-two",
                        vec![SecretLocation::env("HOSTILE_TOKEN")],
                        SecretOrigin::new(vec![], "https://exfil.hostile.example"),
                        vec![SecretUse::Bearer],
                    ),
                ]
            }
            // The same value under a second variable and name, bound elsewhere.
            "secrets-twin" => {
                info.secrets = vec![
                    declared_token(),
                    SecretDecl::new(
                        "twin",
                        vec![SecretLocation::env("HOSTILE_TWIN")],
                        SecretOrigin::new(vec![], "https://exfil.hostile.example"),
                        vec![SecretUse::Bearer],
                    ),
                ]
            }
            _ => {}
        }
        info
    }

    fn plain_env() -> Option<Vec<String>> {
        let names: &[&str] = match info_mode().as_str() {
            "secrets-plain" => &["HOSTILE_REGION"],
            "plain-outside" => &["OTHER_REGION"],
            "plain-secret" => &["HOSTILE_TOKEN"],
            _ => return None,
        };
        Some(names.iter().map(|n| n.to_string()).collect())
    }

    fn init(
        _ctx: Context,
        config: Vec<u8>,
        env: Vec<(String, String)>,
    ) -> Result<Self, ProviderError> {
        let text = String::from_utf8_lossy(&config);
        if text.trim() == "spin-init" {
            spin();
        }
        let value_of = |key: &str| {
            text.lines()
                .find_map(|line| {
                    let (k, v) = line.split_once('=')?;
                    (k.trim() == key).then(|| v.trim().to_string())
                })
                .unwrap_or_default()
        };
        let secret = value_of("secret");
        let api_key = value_of("api-key");
        log::redact(&secret);
        let env_names = env.iter().map(|(k, _)| k.clone()).collect();
        let token = env
            .into_iter()
            .find(|(k, _)| k == "HOSTILE_TOKEN")
            .map(|(_, v)| v)
            .unwrap_or_default();
        Ok(Self {
            secret,
            api_key,
            token,
            env_names,
        })
    }
}

/// A well-declared token: bearer, `x-api-key` or the `api_key` parameter, to `HOSTILE_API_URL`.
fn declared_token() -> SecretDecl {
    SecretDecl::new(
        "token",
        vec![SecretLocation::env("HOSTILE_TOKEN")],
        SecretOrigin::new(
            vec![SecretLocation::env("HOSTILE_API_URL")],
            "https://api.hostile.example",
        ),
        vec![
            SecretUse::Bearer,
            SecretUse::Header("x-api-key".into()),
            SecretUse::Param("api_key".into()),
        ],
    )
}

impl Instances for Hostile {
    fn instance_exists(&self, _node: &Node) -> Result<bool, ProviderError> {
        Ok(true)
    }

    fn instance_shutdown(&self, _node: &Node) -> Result<bool, ProviderError> {
        Ok(false)
    }

    fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, ProviderError> {
        let calls = CALLS.with(|c| {
            c.set(c.get() + 1);
            c.get()
        });
        let instance_type = match node.name.as_str() {
            "loop" => spin(),
            "grow" => grow(),
            "trap" => panic!("hostile driver: trap requested"),
            "fetch" => fetch(node)?,
            "place" => place(node, &self.token)?,
            // Which variables `init` got, by name, comma-separated.
            "env" => self.env_names.join(","),
            "flood" => {
                let lines = node
                    .annotation("lines")
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(10_000);
                for i in 0..lines {
                    log::info("flood", &[("line", &i.to_string())]);
                }
                "t1".to_string()
            }
            "leak" => {
                // Lets the host test prove its redaction: the config secret was registered with
                // `log::redact`; the env token was not (the host redacts env secrets by name).
                let line = format!("secret={} token={}", self.secret, self.token);
                log::info(
                    &format!("leaking {line}"),
                    &[("secret", &self.secret), ("token", &self.token)],
                );
                println!("stdout {line}");
                eprintln!("stderr {line}");
                "t1".to_string()
            }
            // Every channel a credential could take back out through the host: the error the
            // controllers turn into an event and a log line, an event reason the host refuses
            // and quotes, an answer the host writes to the Node, a panic line the trap quotes.
            "leak-error" => {
                return Err(ProviderError::Permanent(format!(
                    "failed with api-key={} token={}",
                    self.api_key, self.token
                )));
            }
            // The credential straddles the host's 4 KiB cut of an error message.
            "leak-error-at-cut" => {
                return Err(ProviderError::Permanent(format!(
                    "{}{}{}",
                    "x".repeat(4096 - 6),
                    self.api_key,
                    "y".repeat(100)
                )));
            }
            "leak-event" => {
                wasm_ccm_sdk::cluster::warning(
                    &format!("Leak{}{}", self.api_key, self.token),
                    &format!("message api-key={} token={}", self.api_key, self.token),
                );
                "t1".to_string()
            }
            "leak-answer" => {
                let mut metadata = InstanceMetadata::new(format!("hostile://{}", node.name));
                metadata.instance_type = format!("type-{}", self.api_key);
                metadata.zone = self.token.clone();
                metadata.additional_labels = vec![(
                    format!("hostile.example/{}", self.token),
                    self.api_key.clone(),
                )];
                return Ok(metadata);
            }
            "leak-panic" => panic!(
                "hostile driver: api-key={} token={}",
                self.api_key, self.token
            ),
            "post-big" => post_big(node)?,
            "stdout" => {
                for i in 1..=3 {
                    println!("hostile stdout line {i}");
                }
                "t1".to_string()
            }
            "count" => format!("calls={calls}"),
            "redact-flood" => {
                // Distinct secrets of `kb` KiB each: the host keeps a bounded number.
                let n = number(node, "n", 200);
                let kb = number(node, "kb", 1);
                for i in 0..n {
                    let mut secret = format!("{i:08}-");
                    secret.push_str(&"s".repeat((kb as usize * 1024).saturating_sub(9)));
                    log::redact(&secret);
                }
                "t1".to_string()
            }
            "log-big" => {
                // One record of `fields` fields of `kb` KiB each.
                let n = number(node, "fields", 1000) as usize;
                let value = "v".repeat(number(node, "kb", 8) as usize * 1024);
                let keys: Vec<String> = (0..n).map(|i| format!("field{i}")).collect();
                let fields: Vec<(&str, &str)> =
                    keys.iter().map(|k| (k.as_str(), value.as_str())).collect();
                log::info(&"m".repeat(64 * 1024), &fields);
                "t1".to_string()
            }
            "many-addresses" => {
                let mut metadata = InstanceMetadata::new(format!("hostile://{}", node.name));
                metadata.addresses = (0..number(node, "n", 1000))
                    .map(|i| NodeAddress {
                        kind: AddressType::InternalIp,
                        address: format!("10.0.{}.{}", i / 256, i % 256),
                    })
                    .collect();
                return Ok(metadata);
            }
            "amplify" => return Ok(amplified(node)),
            "exit" => std::process::exit(3),
            "stack" => format!("{}", recurse(std::hint::black_box(1))),
            _ => "t1".to_string(),
        };
        let mut metadata = InstanceMetadata::new(format!("hostile://{}", node.name));
        metadata.instance_type = instance_type;
        Ok(metadata)
    }
}

fn number(node: &Node, key: &str, default: u64) -> u64 {
    node.annotation(key)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Recurses without end on the wasm stack (small frames, no shadow stack; black_box keeps the
/// compiler from turning it into a loop).
#[allow(unconditional_recursion)] // the point: the host must stop it
fn recurse(depth: u64) -> u64 {
    std::hint::black_box(recurse(std::hint::black_box(depth + 1))) ^ depth
}

/// `n` addresses that all point at one `kb`-KiB buffer: the guest holds the buffer once, the
/// host would materialise it `n` times. The strings alias, so they are never dropped here
/// (the process does not outlive the host's refusal).
fn amplified(node: &Node) -> InstanceMetadata {
    let n = number(node, "n", 120) as usize;
    let buffer = std::mem::ManuallyDrop::new("a".repeat(number(node, "kb", 1024) as usize * 1024));
    let mut metadata = InstanceMetadata::new(format!("hostile://{}", node.name));
    metadata.addresses = (0..n)
        .map(|_| NodeAddress {
            kind: AddressType::Hostname,
            // SAFETY: every copy points at the same live, never-freed allocation; the host only
            // reads it (the canonical ABI copies out of guest memory).
            address: unsafe {
                String::from_raw_parts(buffer.as_ptr() as *mut u8, buffer.len(), buffer.capacity())
            },
        })
        .collect();
    metadata
}

/// Burns CPU until the host's deadline stops the instance.
fn spin() -> ! {
    let mut x: u64 = 0;
    loop {
        // black_box keeps the optimiser from proving the loop has no effect.
        x = std::hint::black_box(x.wrapping_add(1));
    }
}

/// Allocates and touches 1 MiB chunks, keeping all of them, until the memory limit hits.
fn grow() -> ! {
    let mut kept: Vec<Vec<u8>> = Vec::new();
    loop {
        // Touching every page (not just reserving) makes the memory really used.
        let chunk = vec![0xa5u8; 1 << 20];
        kept.push(std::hint::black_box(chunk));
    }
}

/// POSTs a body of `kb` KiB to the URL in annotation `url` and describes the outcome.
fn post_big(node: &Node) -> Result<String, ProviderError> {
    let url = node
        .annotation("url")
        .ok_or_else(|| ProviderError::invalid_config("post-big needs annotation `url`"))?;
    let body = vec![b'x'; number(node, "kb", 17 * 1024) as usize * 1024];
    describe(http::post(url).body(body).send())
}

/// GETs the URL in annotation `url` and describes the outcome.
fn fetch(node: &Node) -> Result<String, ProviderError> {
    let url = node
        .annotation("url")
        .ok_or_else(|| ProviderError::invalid_config("fetch needs annotation `url`"))?;
    describe(http::get(url).send())
}

/// Sends the driver's token (a placeholder when the host holds it) in the place the node's
/// `place` annotation names, to `url`; answers, label-safe, the status and whether the body
/// held the `canary` annotation (the real value, which the test knows) or the placeholder.
fn place(node: &Node, token: &str) -> Result<String, ProviderError> {
    let url = node
        .annotation("url")
        .ok_or_else(|| ProviderError::invalid_config("place needs annotation `url`"))?;
    let where_ = node.annotation("place").unwrap_or("bearer");
    let request = match where_ {
        "bearer" => http::get(url).header("authorization", format!("Bearer {token}")),
        // The guest asks for a compressed answer: the host must not hand it compressed bytes it
        // could not scan.
        "bearer-gzip" => http::get(url)
            .header("authorization", format!("Bearer {token}"))
            .header("accept-encoding", "gzip, deflate, br"),
        // A declared place that puts the key in the URL the HTTP stack quotes in its errors.
        "api-key-query" => http::get(format!("{url}?api_key={token}")),
        "api-key" => http::get(url).header("x-api-key", token),
        "other-header" => http::get(url).header("x-other", token),
        "header-name" => http::get(url).header(format!("x-{token}"), "1"),
        "query" => http::get(format!("{url}?token={token}")),
        "path" => http::get(format!("{url}/{token}")),
        "part-of-value" => http::get(url).header("authorization", format!("Bearer {token}x")),
        "json-body" => http::post(url)
            .header("content-type", "application/json")
            .body(format!("{{\"token\":\"{token}\"}}")),
        "basic" => http::get(url).header(
            "authorization",
            format!(
                "Basic {}",
                wasm_ccm_sdk::http::base64(format!("{token}:x").as_bytes())
            ),
        ),
        other => {
            return Err(ProviderError::invalid_config(format!(
                "unknown place {other}"
            )));
        }
    };
    let response = match request.send() {
        Ok(r) => r,
        Err(e) => {
            // Whether the host's own error text handed the guest the real value: the host's
            // redactor would hide it from what the test reads, so the guest says so itself.
            let held = node
                .annotation("canary")
                .is_some_and(|c| recover::recovers(format!("{e:?}").as_bytes(), c));
            return describe(Err(e)).map_err(|mut e| {
                if held && let ProviderError::Permanent(m) = &mut e {
                    m.push_str(" [canary-held]");
                }
                e
            });
        }
    };
    let body = String::from_utf8_lossy(&response.body);
    // The real value, recovered by any decoding a driver could apply, from the body or a
    // header (a `Location` quoting the request).
    let headers: Vec<u8> = response
        .headers
        .iter()
        .flat_map(|(k, v)| format!("{k}: {v}\n").into_bytes())
        .collect();
    let canary = node
        .annotation("canary")
        .is_some_and(|c| recover::recovers(&response.body, c) || recover::recovers(&headers, c));
    Ok(format!(
        "s{}-canary-{}-placeholder-{}",
        response.status,
        if canary { "yes" } else { "no" },
        if body.contains(token) { "yes" } else { "no" }
    ))
}

/// A response as `status=… bytes=…`; an HTTP error as a permanent error naming its case.
fn describe(sent: Result<http::Response, HttpError>) -> Result<String, ProviderError> {
    match sent {
        Ok(response) => Ok(format!(
            "status={} bytes={}",
            response.status,
            response.body.len()
        )),
        Err(e) => {
            let (kind, message) = match e {
                HttpError::Denied(m) => ("denied", m),
                HttpError::Timeout(m) => ("timeout", m),
                HttpError::Connect(m) => ("connect", m),
                HttpError::TooLarge(m) => ("too-large", m),
                HttpError::Invalid(m) => ("invalid", m),
            };
            Err(ProviderError::Permanent(format!(
                "http-error {kind}: {message}"
            )))
        }
    }
}

wasm_ccm_sdk::export_driver!(Hostile);
