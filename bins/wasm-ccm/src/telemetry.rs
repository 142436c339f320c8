//! OpenTelemetry traces: `run --otlp-endpoint URL` (cargo feature `otel`, on by default).
//!
//! The spans themselves are plain `tracing` spans the controllers and the runtime create under
//! [`wasm_ccm_runtime::trace::TARGET`] (`reconcile`, `driver.call`, `http.client`); kube's client
//! adds its `HTTP` span per request. This module only decides who sees them. Without an
//! endpoint nothing here is installed: logging is set up exactly as [`init_logging`] does, and
//! the spans stay disabled at their call sites. With one, a `tracing-opentelemetry` layer
//! exports them over OTLP/HTTP (protobuf) from the SDK's batch thread, and log lines written
//! inside a traced reconcile carry its `trace_id`.
//!
//! From the environment, only what the OpenTelemetry SDK itself reads, and only with an
//! endpoint: `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` (resource), `OTEL_TRACES_SAMPLER`
//! and `OTEL_TRACES_SAMPLER_ARG` (sampling; default: parent-based, always on),
//! `OTEL_EXPORTER_OTLP_HEADERS`/`OTEL_EXPORTER_OTLP_TRACES_HEADERS`,
//! `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` and `OTEL_BSP_*` (batching). The endpoint is the flag's.

use wasm_ccm_runtime::trace::{TraceOrigin, TracePropagation};

use crate::global::{GlobalArgs, init_logging};

/// The tracing flags of `run`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TraceArgs {
    /// Export OpenTelemetry traces to this OTLP/HTTP collector (protobuf), e.g.
    /// `http://otel-collector.monitoring:4318`; `/v1/traces` is added to a URL without a path.
    /// Off when absent (no exporter is installed).
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// Send the W3C `traceparent` of a driver's request to ORIGIN (`scheme://host[:port]`,
    /// compared exactly); repeatable. Default: to no origin, as trace IDs reaching a third party
    /// are a privacy concern. Needs --otlp-endpoint.
    #[arg(
        long = "trace-propagation-origins",
        value_name = "ORIGIN",
        requires = "otlp_endpoint"
    )]
    pub trace_propagation_origins: Vec<String>,
}

impl TraceArgs {
    /// The collector's traces URL, checked: a bad value is a start-up error naming the flag.
    pub fn endpoint(&self) -> anyhow::Result<Option<url::Url>> {
        let Some(text) = &self.otlp_endpoint else {
            return Ok(None);
        };
        let hint = "give the collector's OTLP/HTTP address, e.g. --otlp-endpoint=http://otel-collector.monitoring:4318";
        let mut url = url::Url::parse(text)
            .map_err(|e| anyhow::anyhow!("--otlp-endpoint {text:?} is not a URL ({e}); {hint}"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            anyhow::bail!("--otlp-endpoint {text:?} is not an http(s) URL with a host; {hint}");
        }
        if url.query().is_some() || url.fragment().is_some() {
            anyhow::bail!("--otlp-endpoint {text:?} has a query or fragment; {hint}");
        }
        if url.path() == "/" {
            url.set_path("/v1/traces");
        }
        Ok(Some(url))
    }

    /// The origins that receive `traceparent`, checked.
    pub fn origins(&self) -> anyhow::Result<Vec<TraceOrigin>> {
        self.trace_propagation_origins
            .iter()
            .map(|o| {
                TraceOrigin::parse(o)
                    .map_err(|e| anyhow::anyhow!("--trace-propagation-origins: {e}"))
            })
            .collect()
    }

    /// What the runtime needs to propagate: `None` unless traces are on and origins are listed.
    pub fn propagation(&self) -> anyhow::Result<Option<TracePropagation>> {
        let origins = self.origins()?;
        if self.otlp_endpoint.is_none() || origins.is_empty() {
            return Ok(None);
        }
        propagation(origins)
    }
}

/// Keeps the exporter alive; dropping it flushes the spans still batched.
pub struct Telemetry {
    #[cfg(feature = "otel")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        #[cfg(feature = "otel")]
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("wasm-ccm: could not flush the last traces: {e}");
        }
    }
}

/// Sets up logging as [`init_logging`] does and, with `--otlp-endpoint`, the trace exporter.
/// Errors name the flag: they are start-up errors.
pub fn init_logging_and_traces(global: &GlobalArgs, args: &TraceArgs) -> anyhow::Result<Telemetry> {
    let endpoint = args.endpoint()?;
    args.origins()?;
    let Some(endpoint) = endpoint else {
        init_logging(global);
        return Ok(Telemetry {
            #[cfg(feature = "otel")]
            provider: None,
        });
    };
    #[cfg(feature = "otel")]
    {
        let provider = install(global, endpoint)?;
        Ok(Telemetry {
            provider: Some(provider),
        })
    }
    #[cfg(not(feature = "otel"))]
    install(global, endpoint)
}

#[cfg(not(feature = "otel"))]
fn install(_: &GlobalArgs, _: url::Url) -> anyhow::Result<Telemetry> {
    anyhow::bail!(
        "--otlp-endpoint: this wasm-ccm was built without OpenTelemetry (cargo feature `otel`); use a build with it or drop the flag"
    )
}

#[cfg(not(feature = "otel"))]
fn propagation(_: Vec<TraceOrigin>) -> anyhow::Result<Option<TracePropagation>> {
    anyhow::bail!(
        "--trace-propagation-origins: this wasm-ccm was built without OpenTelemetry (cargo feature `otel`)"
    )
}

#[cfg(feature = "otel")]
mod otel;
#[cfg(feature = "otel")]
pub use otel::traced_subscriber;
#[cfg(feature = "otel")]
use otel::{install, propagation};
