//! What tracing costs per driver call and per driver HTTP request (a bench binary, not a timed
//! test): the same calls under the product's log set-up without `--otlp-endpoint` (off) and
//! under the subscriber `--otlp-endpoint` installs (on: `telemetry::traced_subscriber`, an SDK
//! batch processor whose exporter discards, so the export thread's work is not on the call path
//! and the network is not measured).
//!
//! - per call: `provider.info` in a warm instance (one `driver.call` span, no request);
//! - per request: `instance-metadata` of the static driver, whose one inventory request is
//!   answered by an interceptor after the egress checks (one `driver.call` and one `http.client`
//!   span); the per-request figure is its on−off difference less the per-call one.
//!
//! Modes alternate in rounds, so drift on a shared machine hits both alike.
//!
//! Run: `cargo bench -p wasm-ccm --bench traces`. `BENCH_ROUNDS` (20) × `BENCH_CALLS` (500).

use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use wasm_ccm::global::{AllocationArg, GlobalArgs, LogFormat, log_subscriber};
use wasm_ccm::telemetry::traced_subscriber;
use wasm_ccm_drivers::STATIC_DRIVER;
use wasm_ccm_runtime::http::{Forward, HttpInterceptor, Intercepted, Response};
use wasm_ccm_runtime::log::NullSink;
use wasm_ccm_runtime::types::Node;
use wasm_ccm_runtime::{CallScope, DriverOptions, InitInput, Runtime, RuntimeOptions};

/// Drops every batch: the call path's cost only.
#[derive(Debug)]
struct Discard;

impl SpanExporter for Discard {
    async fn export(&self, _batch: Vec<SpanData>) -> OTelSdkResult {
        Ok(())
    }
}

/// Answers the static driver's inventory request without a network.
struct Inventory(Vec<u8>);

impl HttpInterceptor for Inventory {
    fn intercept<'a>(&'a self, _forward: Forward<'a>) -> Intercepted<'a> {
        let body = self.0.clone();
        Box::pin(async move {
            Ok(Response {
                status: 200,
                headers: vec![("content-type".into(), "application/json".into())],
                body,
            })
        })
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn node(name: &str) -> Node {
    Node {
        name: name.into(),
        uid: String::new(),
        provider_id: String::new(),
        labels: vec![],
        annotations: vec![],
        addresses: vec![],
        taints: vec![],
        ready: true,
    }
}

fn global() -> GlobalArgs {
    GlobalArgs {
        cache_dir: None,
        no_cache: true,
        allocation: AllocationArg::Auto,
        log_format: LogFormat::Text,
        log: "warn,wasm_ccm=info".into(),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let rounds = env_usize("BENCH_ROUNDS", 20);
    let calls = env_usize("BENCH_CALLS", 500);
    let rt = Runtime::new(RuntimeOptions::default()).expect("runtime");
    let bytes = std::fs::read(STATIC_DRIVER).expect("static driver");
    let compiled = rt.compile("static", bytes).await.expect("compile");
    let body = serde_json::to_vec(&serde_json::json!({"instances": [{
        "name": "node-7", "id": "id-7", "type": "s1.medium", "zone": "z1", "region": "r1",
        "addresses": [{"type": "InternalIP", "address": "10.0.0.7"}],
    }]}))
    .expect("inventory");
    let opts = DriverOptions {
        init: InitInput {
            config: b"inventoryUrl: http://127.0.0.1:1/instances\n".to_vec(),
            ..Default::default()
        },
        http: wasm_ccm_runtime::http::Config {
            egress: Some(
                wasm_ccm_runtime::EgressPolicy::parse(&["http://127.0.0.1:1"]).expect("grant"),
            ),
            interceptor: Some(Arc::new(Inventory(body))),
            ..Default::default()
        },
        log: wasm_ccm_runtime::log::Config {
            sink: Arc::new(NullSink),
            ..Default::default()
        },
        ..Default::default()
    };
    let driver = rt.load(&compiled, opts).await.expect("load");
    let scope = CallScope::default();
    let n = node("node-7");

    // Off: what `init_logging` installs without the flag. On: what the flag installs.
    let off = || tracing::subscriber::set_default(log_subscriber(&global(), std::io::sink));
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(Discard)
        .build();
    let on =
        || tracing::subscriber::set_default(traced_subscriber(&global(), &provider, std::io::sink));

    let mut samples: [Vec<Duration>; 4] = Default::default();
    for round in 0..rounds + 1 {
        for (mode, install) in [(0, &off as &dyn Fn() -> _), (1, &on)] {
            let _guard = install();
            let mut call = Vec::with_capacity(calls);
            let mut request = Vec::with_capacity(calls);
            for _ in 0..calls {
                let t = Instant::now();
                driver.info_call(&scope).await.result.expect("info");
                call.push(t.elapsed());
                let t = Instant::now();
                let m = driver
                    .instance_metadata(&n, &scope)
                    .await
                    .result
                    .expect("metadata");
                request.push(t.elapsed());
                assert_eq!(m.provider_id, "static://id-7");
            }
            // Round 0 warms the instance, the caches and the callsites' interest.
            if round > 0 {
                samples[mode].extend(call);
                samples[2 + mode].extend(request);
            }
        }
    }
    let [mut call_off, mut call_on, mut req_off, mut req_on] = samples;
    let (c_off, c_on) = (median(&mut call_off), median(&mut call_on));
    let (r_off, r_on) = (median(&mut req_off), median(&mut req_on));
    let call_cost = c_on.as_secs_f64() - c_off.as_secs_f64();
    let request_cost = (r_on.as_secs_f64() - r_off.as_secs_f64()) - call_cost;
    let us = |d: Duration| format!("{:.2} µs", d.as_secs_f64() * 1e6);
    println!(
        "| measured ({rounds} rounds × {calls} calls, medians) | tracing off | tracing on | added |"
    );
    println!("| --- | --- | --- | --- |");
    println!(
        "| driver call (`provider.info`, warm) | {} | {} | {:.2} µs per call |",
        us(c_off),
        us(c_on),
        call_cost * 1e6
    );
    println!(
        "| call with one request (`instance-metadata`, intercepted) | {} | {} | {:.2} µs per request (beyond the call's) |",
        us(r_off),
        us(r_on),
        request_cost * 1e6
    );
    let _ = provider.shutdown();
}
