//! `wasm-ccm-dev call`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use serde_json::{Value, json};
use wasm_ccm_runtime::log::{Level, LogRecord, LogSink, Source};
use wasm_ccm_runtime::sanitize;
use wasm_ccm_runtime::types::{Context, Service};
use wasm_ccm_runtime::{
    CallError, CallScope, Described, DriverOptions, HostError, InitInput, InstanceMode,
    PoolOptions, Runtime, StaticCluster,
};

use crate::cassette::Recorder;
use wasm_ccm::GlobalArgs;
use wasm_ccm::units::{parse_duration, parse_size};

/// Arguments of `wasm-ccm-dev call`.
#[derive(clap::Args, Debug)]
pub(crate) struct CallArgs {
    /// The driver's `.wasm` file.
    driver: PathBuf,
    /// The function, as `interface.function`: e.g. `instances.instance-metadata`,
    /// `load-balancer.ensure`, `routes.list`, `provider.housekeeping`.
    function: String,
    /// The arguments as JSON, `@FILE` to read them from a file, or `-` for stdin. A function with
    /// one parameter takes its value; with several, an object keyed by parameter name.
    #[arg(long, default_value = "null")]
    input: String,
    /// The cloud-config file handed to the driver's init as-is.
    #[arg(long)]
    config: Option<PathBuf>,
    /// An environment variable for the driver (repeatable); only names with one of the driver's
    /// declared prefixes reach it. The process environment is offered the same way.
    #[arg(long = "env", value_name = "K=V")]
    env: Vec<String>,
    /// Grant egress to `scheme://host[:port]` (repeatable); replaces the driver's defaults.
    #[arg(long = "allow-egress", value_name = "PATTERN", value_parser = wasm_ccm_runtime::parse_grant)]
    allow_egress: Vec<wasm_ccm_runtime::Grant>,
    /// Deadline of the call, e.g. 10s or 500ms.
    #[arg(long = "call-timeout", visible_alias = "timeout", default_value = "30s", value_parser = parse_duration)]
    timeout: std::time::Duration,
    /// Deadline of the driver's `init` (and of instantiation), e.g. 60s.
    #[arg(long = "init-timeout", default_value = "60s", value_parser = parse_duration)]
    init_timeout: std::time::Duration,
    /// Linear memory the driver may use, e.g. 64Mi.
    #[arg(long, default_value = "64Mi", value_parser = parse_size)]
    memory_limit: usize,
    /// LoadBalancer Services the driver's `cluster` import returns: a JSON array (or @FILE) in the
    /// same form as call arguments, e.g. `[{"namespace": "default", "name": "web", "uid": "u1"}]`.
    #[arg(long)]
    cluster_services: Option<String>,
    /// The cluster name passed to init.
    #[arg(long, default_value = "kubernetes")]
    cluster_name: String,
    /// Record every request the driver sends, and the answer, to this cassette (secrets
    /// redacted); replay it with `wasm-ccm-dev conformance --cloud cassette:FILE`.
    #[arg(long, value_name = "FILE")]
    record_http: Option<PathBuf>,
    /// Print every log line of the driver on stderr as it is written, at every level (debug and
    /// trace too), whatever `--log` says. A crash's backtrace is printed with or without it.
    #[arg(long)]
    debug: bool,
}

/// The runtime of the kit's `call` and `conformance`: the product's (`--allocation`, the cache),
/// plus wasmtime's backtrace details, so that a crash of a driver built with debug info shows
/// `file:line`. The product leaves them off (see `EngineOptions::default`); an author debugging
/// their own driver is who needs them. The cache keys differ, so the two never share an entry.
pub(crate) fn dev_runtime(global: &GlobalArgs) -> anyhow::Result<Runtime> {
    global.runtime_with_backtrace_details(true)
}

/// Prints the whole backtrace of a crashed call on stderr (the error line after it carries only
/// the short form).
fn print_backtrace(e: &HostError) {
    if let HostError::Trap {
        function,
        backtrace,
        ..
    } = e
        && !backtrace.is_empty()
    {
        eprintln!(
            "wasm-ccm: {function} crashed; backtrace, innermost frame first:\n{}",
            backtrace.full().trim_end()
        );
    }
}

/// `--debug`: every driver log line on stderr, unfiltered. The lines are already redacted by
/// the host; control characters are replaced so a line cannot rewrite the terminal.
struct DebugSink;

impl LogSink for DebugSink {
    fn emit(&self, r: &LogRecord<'_>) {
        let level = match r.level {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        };
        let source = match r.source {
            Source::Driver => "log",
            Source::Stdout => "stdout",
            Source::Stderr => "stderr",
            Source::Host => "host",
        };
        let fields: String = r
            .fields
            .iter()
            .map(|(k, v)| format!(" {}={:?}", sanitize(k), sanitize(v)))
            .collect();
        eprintln!(
            "driver {level:<5} {source} {}: {}{fields}",
            r.function,
            sanitize(r.message)
        );
    }
}

fn read_json_arg(text: &str, what: &str) -> anyhow::Result<Value> {
    let raw = if text == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading stdin")?
    } else if let Some(path) = text.strip_prefix('@') {
        std::fs::read_to_string(path).with_context(|| format!("reading {what} from {path}"))?
    } else {
        text.to_string()
    };
    serde_json::from_str(&raw).with_context(|| format!("{what} is not valid JSON"))
}

pub(crate) async fn run(global: &GlobalArgs, args: CallArgs) -> anyhow::Result<ExitCode> {
    let input = read_json_arg(&args.input, "--input")?;
    let config = match &args.config {
        Some(p) => {
            std::fs::read(p).with_context(|| format!("cannot read --config {}", p.display()))?
        }
        None => Vec::new(),
    };
    let mut env: Vec<(String, String)> = std::env::vars().collect();
    for kv in &args.env {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("--env {kv:?} is not K=V"))?;
        env.retain(|(name, _)| name != k);
        env.push((k.to_string(), v.to_string()));
    }
    let cluster = match &args.cluster_services {
        None => Vec::new(),
        Some(text) => {
            let v = read_json_arg(text, "--cluster-services")?;
            if !v.is_array() {
                anyhow::bail!("--cluster-services must be a JSON array of services");
            }
            wasm_ccm_runtime::json::from_value::<Vec<Service>>(&v, "--cluster-services")
                .map_err(anyhow::Error::msg)?
        }
    };
    let runtime = dev_runtime(global)?;
    let compiled = runtime.compile_file(&args.driver).await?;
    let recorder = args
        .record_http
        .as_ref()
        .map(|_| Arc::new(Recorder::default()));
    let mut opts = DriverOptions {
        init: InitInput {
            context: Context {
                cluster_name: args.cluster_name.clone(),
                cluster_id: String::new(),
                kubernetes_version: String::new(),
            },
            config,
            env,
        },
        pool: PoolOptions {
            call_timeout: args.timeout,
            init_timeout: args.init_timeout,
            memory_limit: args.memory_limit,
            mode: InstanceMode::Warm,
            ..Default::default()
        },
        http: wasm_ccm_runtime::http::Config {
            egress: (!args.allow_egress.is_empty())
                .then(|| wasm_ccm_runtime::EgressPolicy::from_grants(args.allow_egress.clone())),
            interceptor: recorder
                .clone()
                .map(|r| r as Arc<dyn wasm_ccm_runtime::http::HttpInterceptor>),
            ..Default::default()
        },
        ..Default::default()
    };
    if args.debug {
        opts.log.sink = Arc::new(DebugSink);
    }
    let driver = match runtime.load(&compiled, opts).await {
        Ok(d) => d,
        Err(e) => {
            // `info` and `init` may crash too.
            print_backtrace(&e);
            return Err(e.into());
        }
    };
    let scope = CallScope {
        object: String::new(),
        cluster: Arc::new(StaticCluster(cluster)),
    };
    let outcome = driver.call_json(&args.function, input, &scope).await;
    if let (Some(recorder), Some(path)) = (&recorder, &args.record_http) {
        let n = recorder.save(path, None)?;
        eprintln!("wasm-ccm: recorded {n} requests to {}", path.display());
    }
    for e in &outcome.events {
        eprintln!("event {:?} {}: {}", e.kind, e.reason, e.message);
    }
    for h in &outcome.http {
        let result = h
            .status
            .map(|s| s.to_string())
            .or(h.error.clone())
            .unwrap_or_default();
        eprintln!("http {} {} -> {result}", h.method, h.url);
    }
    match outcome.result {
        Ok(v) => {
            println!("{}", serde_json::to_string_pretty(&v)?);
            Ok(ExitCode::SUCCESS)
        }
        Err(CallError::Provider(p)) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&json!({ "error": serde_json::to_value(&p)? }))?
            );
            eprintln!(
                "wasm-ccm: {} returned an error: {}",
                args.function,
                Described(&p)
            );
            Ok(ExitCode::from(1))
        }
        Err(CallError::Host(h)) => {
            print_backtrace(&h);
            Err(h.into())
        }
    }
}
