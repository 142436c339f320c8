//! The OpenTelemetry half of [`super`]: the OTLP exporter, the layer that feeds it, the log
//! format that adds `trace_id`, and the W3C injector the runtime calls for listed origins.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::{Event, Metadata, Subscriber};
use tracing_opentelemetry::{OpenTelemetrySpanExt, OtelData};
use tracing_subscriber::filter::{FilterExt, dynamic_filter_fn, filter_fn};
use tracing_subscriber::fmt::format::{DefaultFields, Format, JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry};
use wasm_ccm_runtime::trace::{TARGET, TraceOrigin, TracePropagation};

use super::Telemetry;
use crate::global::{GlobalArgs, LogFormat, log_ansi, log_filter};

/// Installs logging plus the OTLP exporter for `endpoint`.
pub(super) fn install(global: &GlobalArgs, endpoint: url::Url) -> anyhow::Result<Telemetry> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(endpoint.as_str())
        .build()
        .map_err(|e| {
            anyhow::anyhow!("--otlp-endpoint {endpoint}: cannot set up the exporter: {e}")
        })?;
    let mut resource = Resource::builder();
    // The operator's OTEL_SERVICE_NAME wins over ours (the SDK reads it in `builder()`).
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("wasm-ccm");
    }
    let resource = resource
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    traced_subscriber(global, &provider, std::io::stderr)
        .try_init()
        .map_err(|e| anyhow::anyhow!("cannot install the trace exporter: {e}"))?;
    Ok(Telemetry {
        provider: Some(provider),
    })
}

/// The subscriber `--otlp-endpoint` installs, writing log lines to `writer`: the log as `--log`
/// and `--log-format` ask (lines in a traced span end with its `trace_id`) beside the
/// OpenTelemetry layer over `provider`. Public for the trace benchmark (`benches/traces.rs`),
/// which measures exactly this set-up.
pub fn traced_subscriber<W>(
    global: &GlobalArgs,
    provider: &SdkTracerProvider,
    writer: W,
) -> impl Subscriber + Send + Sync + for<'a> LookupSpan<'a> + 'static
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let otel = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("wasm-ccm"))
        // Timings and source locations as attributes are noise beside the span's own times.
        .with_tracked_inactivity(false)
        .with_location(false)
        .with_threads(false)
        .with_filter(dynamic_filter_fn(exported).with_callsite_filter(|meta| {
            if meta.target() == TARGET || is_kube_span(meta) {
                tracing::subscriber::Interest::sometimes()
            } else {
                tracing::subscriber::Interest::never()
            }
        }));
    // The log shows what `--log` asks for, plus the trace spans, so that a line written in a
    // reconcile can be given its trace ID.
    let shown = log_filter(global).or(filter_fn(|meta| meta.is_span() && meta.target() == TARGET));
    let fmt: Box<dyn Layer<Registry> + Send + Sync> = match global.log_format {
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .fmt_fields(JsonFields::new())
            .event_format(WithTraceId {
                inner: Format::default().json(),
                json: true,
            })
            .with_writer(writer)
            .with_filter(shown)
            .boxed(),
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .fmt_fields(DefaultFields::new())
            .event_format(WithTraceId {
                inner: Format::default().with_ansi(log_ansi()),
                json: false,
            })
            .with_ansi(log_ansi())
            .with_writer(writer)
            .with_filter(shown)
            .boxed(),
    };
    tracing_subscriber::registry().with(fmt).with(otel)
}

/// What the exporter gets: the host's trace spans, and kube's per-request `HTTP` span when it
/// runs inside one of them (a reconcile's requests; watches and lease renewals are not traced).
fn exported<S: Subscriber + for<'a> LookupSpan<'a>>(
    meta: &Metadata<'_>,
    cx: &Context<'_, S>,
) -> bool {
    meta.target() == TARGET || (is_kube_span(meta) && cx.lookup_current().is_some())
}

fn is_kube_span(meta: &Metadata<'_>) -> bool {
    meta.is_span() && meta.target().starts_with("kube_client")
}

/// The runtime's propagation to `origins`, writing `traceparent` (and `tracestate`) with the W3C
/// propagator from the span's OpenTelemetry context.
pub(super) fn propagation(origins: Vec<TraceOrigin>) -> anyhow::Result<Option<TracePropagation>> {
    Ok(Some(TracePropagation::new(origins, Arc::new(inject))))
}

fn inject(span: &tracing::Span) -> Vec<(String, String)> {
    let cx = span.context();
    if !cx.span().span_context().is_valid() {
        return Vec::new();
    }
    let mut headers = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut headers);
    headers.into_iter().collect()
}

/// A log format that adds the trace ID of the innermost traced span to the line: `trace_id` as
/// the first key of a JSON object, ` trace_id=…` at the end of a text line.
struct WithTraceId<F> {
    inner: F,
    json: bool,
}

impl<S, N, F> FormatEvent<S, N> for WithTraceId<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let trace_id = ctx.lookup_current().and_then(|span| {
            span.scope()
                .find_map(|s| s.extensions().get::<OtelData>().and_then(|d| d.trace_id()))
        });
        let Some(trace_id) = trace_id else {
            return self.inner.format_event(ctx, writer, event);
        };
        let mut line = String::new();
        self.inner
            .format_event(ctx, Writer::new(&mut line), event)?;
        if self.json {
            match line.strip_prefix('{') {
                Some(rest) => write!(writer, "{{\"trace_id\":\"{trace_id}\",{rest}"),
                None => writer.write_str(&line),
            }
        } else {
            let body = line.trim_end_matches('\n');
            writeln!(writer, "{body} trace_id={trace_id}")
        }
    }
}
