//! A hostile test driver (world `instances-driver`).
//!
//! The host's sandbox tests call `instances.instance-metadata(node)`; `node.name` picks the
//! misbehaviour. See the crate's description and the host tests for what each one proves.

use std::cell::Cell;

use wasm_ccm_sdk::http::{self, HttpError};
use wasm_ccm_sdk::log;
use wasm_ccm_sdk::types::{Context, InstanceMetadata, Node, ProviderError, ProviderInfo};
use wasm_ccm_sdk::{Instances, Provider};

thread_local! {
    // Per component instance: a warm (reused) instance counts up, a fresh one starts at 1.
    static CALLS: Cell<u64> = const { Cell::new(0) };
}

/// The hostile driver; `secret` comes from the config bytes `secret=<value>`, `token` from the
/// env variable `HOSTILE_TOKEN` handed to `init` (WASI gives the guest no environment).
pub struct Hostile {
    secret: String,
    token: String,
}

impl Provider for Hostile {
    fn info() -> ProviderInfo {
        ProviderInfo {
            name: "hostile".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            provider_id_scheme: "hostile".into(),
            default_egress: Vec::new(),
            env_prefixes: vec!["HOSTILE_".into()],
        }
    }

    fn init(
        _ctx: Context,
        config: Vec<u8>,
        env: Vec<(String, String)>,
    ) -> Result<Self, ProviderError> {
        let text = String::from_utf8_lossy(&config);
        let secret = text
            .trim()
            .strip_prefix("secret=")
            .unwrap_or_default()
            .to_string();
        log::redact(&secret);
        let token = env
            .into_iter()
            .find(|(k, _)| k == "HOSTILE_TOKEN")
            .map(|(_, v)| v)
            .unwrap_or_default();
        Ok(Self { secret, token })
    }
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
            "stdout" => {
                for i in 1..=3 {
                    println!("hostile stdout line {i}");
                }
                "t1".to_string()
            }
            "count" => format!("calls={calls}"),
            _ => "t1".to_string(),
        };
        let mut metadata = InstanceMetadata::new(format!("hostile://{}", node.name));
        metadata.instance_type = instance_type;
        Ok(metadata)
    }
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

/// GETs the URL in annotation `url` and describes the outcome.
fn fetch(node: &Node) -> Result<String, ProviderError> {
    let url = node
        .annotation("url")
        .ok_or_else(|| ProviderError::invalid_config("fetch needs annotation `url`"))?;
    match http::get(url).send() {
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
