//! The OpenTelemetry half of [`super`]: the OTLP exporter, the layer that feeds it, the log
//! format that adds `trace_id`, and the W3C injector the runtime calls for listed origins.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TraceId, TracerProvider as _};
use opentelemetry::{KeyValue, Value};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing::{Event, Metadata, Subscriber};
use tracing_opentelemetry::{OpenTelemetrySpanExt, OtelData};
use tracing_subscriber::filter::dynamic_filter_fn;
use tracing_subscriber::fmt::format::{DefaultFields, Format, JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::layer::{Context, Layered, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry};
use wasm_ccm_runtime::trace::{TARGET, TraceOrigin, TracePropagation};

use crate::global::{GlobalArgs, LogFormat, log_ansi, log_filter};

/// Installs logging plus the OTLP exporter for `endpoint`; returns the tracer provider, which
/// the caller keeps (and flushes on drop).
pub(super) fn install(
    global: &GlobalArgs,
    endpoint: url::Url,
) -> anyhow::Result<SdkTracerProvider> {
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
        .with_batch_exporter(WithoutQueries(exporter))
        .with_resource(resource)
        .build();
    traced_subscriber(global, &provider, std::io::stderr)
        .try_init()
        .map_err(|e| anyhow::anyhow!("cannot install the trace exporter: {e}"))?;
    Ok(provider)
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
    // The log layer sees exactly what `--log` asks for, as without tracing: not the trace spans
    // (formatting their fields would cost every span, and put them in front of every line). The
    // trace ID of a line comes from `EventTraceId`, which runs before it.
    let shown = log_filter(global);
    let fmt: Box<dyn Layer<Layered<EventTraceId, Registry>> + Send + Sync> = match global.log_format
    {
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
    tracing_subscriber::registry()
        .with(EventTraceId)
        .with(fmt)
        .with(otel)
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

/// The attributes that hold a whole URL: kube's request span records `http.url` with its query
/// (label and field selectors, `resourceVersion`), and its trace layer cannot be configured.
const URL_ATTRIBUTES: [&str; 2] = ["http.url", "url.full"];

/// An exporter that cuts the query off every URL attribute before `inner` sends the batch, as
/// the host's own spans never carry one. It runs on the SDK's batch thread, off the call path.
#[derive(Debug)]
struct WithoutQueries<E>(E);

impl<E: SpanExporter> SpanExporter for WithoutQueries<E> {
    async fn export(&self, mut batch: Vec<SpanData>) -> OTelSdkResult {
        for span in &mut batch {
            strip_url_queries(&mut span.attributes);
        }
        self.0.export(batch).await
    }

    fn shutdown_with_timeout(&mut self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn force_flush(&mut self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.0.set_resource(resource);
    }
}

/// Drops the query and fragment of the URL attributes among `attributes`.
fn strip_url_queries(attributes: &mut [KeyValue]) {
    for kv in attributes {
        if !URL_ATTRIBUTES.contains(&kv.key.as_str()) {
            continue;
        }
        let Value::String(url) = &kv.value else {
            continue;
        };
        if let Some(end) = url.as_str().find(['?', '#']) {
            kv.value = Value::String(url.as_str()[..end].to_string().into());
        }
    }
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

thread_local! {
    /// The trace ID of the event being dispatched on this thread, set by [`EventTraceId`] just
    /// before the log layer formats it.
    static EVENT_TRACE_ID: Cell<Option<TraceId>> = const { Cell::new(None) };
}

/// Finds the trace ID of each event: that of the innermost traced span around it. It sees every
/// span (it has no filter), the log layer only those `--log` asks for, so the log layer learns the
/// ID from here. It sits below the log layer in the stack, so its `on_event` runs first, on the
/// same thread, for the same event; it sets the ID for every event, so none is left stale.
struct EventTraceId;

impl<S> Layer<S> for EventTraceId
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_event(&self, event: &Event<'_>, cx: Context<'_, S>) {
        let trace_id = cx.event_scope(event).and_then(|scope| {
            scope.into_iter().find_map(|s| {
                s.extensions()
                    .get::<OtelData>()
                    .and_then(OtelData::trace_id)
            })
        });
        EVENT_TRACE_ID.set(trace_id);
    }
}

/// A log format that adds the trace ID of the innermost traced span to the line (as
/// [`EventTraceId`] found it): `trace_id` as the first key of a JSON object, ` trace_id=…` at the
/// end of a text line. Nothing else differs from the line without tracing.
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
        let Some(trace_id) = EVENT_TRACE_ID.get() else {
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

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::Mutex;

    use super::*;
    use crate::global::{AllocationArg, log_subscriber};

    /// Log lines written to memory.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lines").extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Lines {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().expect("lines").clone()).expect("utf-8")
        }
    }

    /// The log lines of a reconcile that logs from inside a driver call, within a span the log
    /// itself shows, with tracing on (`traced`) or off.
    fn log_of_a_reconcile(format: LogFormat, traced: bool) -> String {
        let global = GlobalArgs {
            cache_dir: None,
            no_cache: true,
            allocation: AllocationArg::Auto,
            log_format: format,
            log: "warn,wasm_ccm=info".into(),
        };
        let lines = Lines::default();
        let writer = {
            let lines = lines.clone();
            move || lines.clone()
        };
        let provider = SdkTracerProvider::builder().build();
        let dispatch = if traced {
            tracing::Dispatch::new(traced_subscriber(&global, &provider, writer))
        } else {
            tracing::Dispatch::new(log_subscriber(&global, writer))
        };
        tracing::dispatcher::with_default(&dispatch, || {
            let shown = tracing::info_span!(target: "wasm_ccm::controllers", "leader", id = 7);
            let _shown = shown.enter();
            let reconcile = tracing::trace_span!(
                target: TARGET,
                parent: None,
                "reconcile",
                wasm_ccm.controller = "service",
            );
            let _reconcile = reconcile.enter();
            let call = tracing::trace_span!(target: TARGET, "driver.call", wasm_ccm.driver = "x");
            let _call = call.enter();
            tracing::info!(target: "wasm_ccm::controllers", key = "default/web", "work in progress");
            drop(_call);
            drop(_reconcile);
            tracing::info!(target: "wasm_ccm::controllers", "outside a reconcile");
        });
        let _ = provider.shutdown();
        lines.text()
    }

    fn is_trace_id(id: &str) -> bool {
        id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) && id != "0".repeat(32)
    }

    #[test]
    fn with_tracing_a_text_line_only_gains_its_trace_id() {
        let off = log_of_a_reconcile(LogFormat::Text, false);
        let on = log_of_a_reconcile(LogFormat::Text, true);
        let (off, on): (Vec<&str>, Vec<&str>) = (off.lines().collect(), on.lines().collect());
        assert_eq!((off.len(), on.len()), (2, 2), "{off:#?} {on:#?}");
        // The time stamp is the first word.
        let body = |line: &str| line.split_once(' ').map(|(_, b)| b.to_string());
        let (traced, trace_id) = on[0].rsplit_once(" trace_id=").expect("a trace ID");
        assert!(is_trace_id(trace_id), "{}", on[0]);
        assert_eq!(body(traced), body(off[0]));
        assert!(off[0].contains("leader{id=7}: "), "{}", off[0]);
        assert!(!on[0].contains("reconcile") && !on[0].contains("driver.call"));
        assert_eq!(body(on[1]), body(off[1]), "no trace ID outside a reconcile");
    }

    #[test]
    fn with_tracing_a_json_line_only_gains_its_trace_id() {
        let off = log_of_a_reconcile(LogFormat::Json, false);
        let on = log_of_a_reconcile(LogFormat::Json, true);
        let parse = |line: &str| {
            let mut v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            v.as_object_mut().expect("an object").remove("timestamp");
            v
        };
        let (off, on): (Vec<&str>, Vec<&str>) = (off.lines().collect(), on.lines().collect());
        assert_eq!((off.len(), on.len()), (2, 2), "{off:#?} {on:#?}");
        assert!(on[0].starts_with(r#"{"trace_id":""#), "{}", on[0]);
        let mut traced = parse(on[0]);
        let trace_id = traced
            .as_object_mut()
            .and_then(|o| o.remove("trace_id"))
            .expect("a trace ID");
        assert!(
            is_trace_id(trace_id.as_str().unwrap_or_default()),
            "{}",
            on[0]
        );
        assert_eq!(traced, parse(off[0]));
        assert_eq!(parse(off[0])["span"]["name"], "leader", "{}", off[0]);
        assert_eq!(
            parse(on[1]),
            parse(off[1]),
            "no trace ID outside a reconcile"
        );
    }

    #[test]
    fn url_attributes_lose_their_query_and_nothing_else_changes() {
        let mut attributes = vec![
            KeyValue::new(
                "http.url",
                "https://10.0.0.1:6443/api/v1/nodes?labelSelector=a%3Db&resourceVersion=7",
            ),
            KeyValue::new("url.full", "https://api.example.com/v1/x#frag"),
            KeyValue::new("http.method", "GET"),
            KeyValue::new("note", "what?"),
            KeyValue::new("http.status_code", 200),
        ];
        strip_url_queries(&mut attributes);
        let text: Vec<String> = attributes
            .iter()
            .map(|kv| format!("{}={}", kv.key, kv.value))
            .collect();
        assert_eq!(
            text,
            [
                "http.url=https://10.0.0.1:6443/api/v1/nodes",
                "url.full=https://api.example.com/v1/x",
                "http.method=GET",
                "note=what?",
                "http.status_code=200",
            ]
        );
    }
}
