//! What each driver instance's `Store` holds, and the host side of the driver's imports.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::Instant;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::bindings::{cluster, http, log as wlog, types};
use crate::call::{ClusterView, DriverEvent, EventKind};
use crate::http::{HttpCapability, HttpExchange};
use crate::log::{DriverLogger, Level, Source};

/// Events a single call may record; more are dropped with a log line.
const MAX_EVENTS_PER_CALL: usize = 50;
const MAX_EVENT_MESSAGE: usize = 1024;

/// What all instances of one driver share.
pub(crate) struct DriverHost {
    pub name: String,
    pub logger: Arc<DriverLogger>,
    pub http: Arc<HttpCapability>,
}

/// Function and object of the call in progress, shared with the stdout/stderr writers.
#[derive(Default, Clone)]
pub(crate) struct CallTags {
    pub function: String,
    pub object: String,
}

/// Per-call state, reset when a call begins.
pub(crate) struct CallState {
    pub deadline: Instant,
    pub cluster: Arc<dyn ClusterView>,
    pub events: Vec<DriverEvent>,
    pub http: Vec<HttpExchange>,
}

/// The data of one driver instance's store.
pub(crate) struct InstanceState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub limiter: MemoryLimiter,
    pub host: Arc<DriverHost>,
    pub call: CallState,
    pub tags: Arc<Mutex<CallTags>>,
}

impl InstanceState {
    pub fn new(host: Arc<DriverHost>, memory_limit: usize, cluster: Arc<dyn ClusterView>) -> Self {
        let tags = Arc::new(Mutex::new(CallTags::default()));
        let out = |source| LogOutput {
            logger: host.logger.clone(),
            tags: tags.clone(),
            source,
        };
        // Deny-by-default WASI: no preopens, no environment, no arguments, no sockets, no DNS;
        // clocks and randomness only. stdout and stderr become log lines.
        let wasi = WasiCtxBuilder::new()
            .stdout(out(Source::Stdout))
            .stderr(out(Source::Stderr))
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        InstanceState {
            wasi,
            table: ResourceTable::new(),
            limiter: MemoryLimiter::new(memory_limit),
            call: CallState {
                deadline: Instant::now(),
                cluster,
                events: Vec::new(),
                http: Vec::new(),
            },
            host,
            tags,
        }
    }

    /// Starts a call: new deadline, empty event and request lists.
    pub fn begin_call(
        &mut self,
        function: &str,
        object: &str,
        deadline: Instant,
        cluster: Arc<dyn ClusterView>,
    ) {
        self.call = CallState {
            deadline,
            cluster,
            events: Vec::new(),
            http: Vec::new(),
        };
        self.limiter.begin_call();
        if let Ok(mut t) = self.tags.lock() {
            t.function = function.to_string();
            t.object = object.to_string();
        }
    }

    fn tags(&self) -> CallTags {
        self.tags.lock().map(|t| t.clone()).unwrap_or_default()
    }
}

impl WasiView for InstanceState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Caps linear memory and table growth, remembering the high-water mark and whether a growth
/// was refused (so a trap that follows is reported as out-of-memory, not as a crash).
pub(crate) struct MemoryLimiter {
    limit: usize,
    pub peak: usize,
    pub refused: bool,
}

const MAX_TABLE_ELEMENTS: usize = 100_000;

impl MemoryLimiter {
    fn new(limit: usize) -> Self {
        MemoryLimiter {
            limit,
            peak: 0,
            refused: false,
        }
    }

    fn begin_call(&mut self) {
        self.refused = false;
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.refused = true;
            return Ok(false);
        }
        self.peak = self.peak.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

impl types::Host for InstanceState {}

impl http::Host for InstanceState {
    async fn send(&mut self, request: http::Request) -> Result<http::Response, http::HttpError> {
        let capability = self.host.http.clone();
        let (result, mut exchange) = capability.send(request, self.call.deadline).await;
        exchange.url = self.host.logger.redact(&exchange.url).into_owned();
        self.call.http.push(exchange);
        result
    }
}

impl wlog::Host for InstanceState {
    fn log(&mut self, level: wlog::Level, message: String, fields: Vec<(String, String)>) {
        let level = match level {
            wlog::Level::Trace => Level::Trace,
            wlog::Level::Debug => Level::Debug,
            wlog::Level::Info => Level::Info,
            wlog::Level::Warn => Level::Warn,
            wlog::Level::Error => Level::Error,
        };
        // Per-instance tags: the lock is never contended, and borrowing avoids copying them.
        let Ok(tags) = self.tags.lock() else {
            return;
        };
        self.host.logger.log(
            level,
            Source::Driver,
            &tags.function,
            &tags.object,
            &message,
            &fields,
        );
    }

    fn redact(&mut self, secret: String) {
        self.host.logger.add_secret(&secret);
    }
}

impl cluster::Host for InstanceState {
    fn load_balancer_services(&mut self) -> Vec<types::Service> {
        self.call.cluster.load_balancer_services()
    }

    fn event(&mut self, kind: cluster::EventType, reason: String, message: String) {
        let tags = self.tags();
        if self.call.events.len() >= MAX_EVENTS_PER_CALL {
            self.host.logger.log(Level::Warn, Source::Host, &tags.function, &tags.object,
                &format!("driver {} recorded more than {MAX_EVENTS_PER_CALL} events in one call; dropping event {reason}", self.host.name), &[]);
            return;
        }
        let message =
            crate::log::cut(&self.host.logger.redact(&message), MAX_EVENT_MESSAGE).to_string();
        let kind = match kind {
            cluster::EventType::Normal => EventKind::Normal,
            cluster::EventType::Warning => EventKind::Warning,
        };
        self.call.events.push(DriverEvent {
            kind,
            reason: reason.chars().take(128).collect(),
            message,
        });
    }
}

/// Turns a driver's stdout or stderr into log lines.
struct LogOutput {
    logger: Arc<DriverLogger>,
    tags: Arc<Mutex<CallTags>>,
    source: Source,
}

impl IsTerminal for LogOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogOutput {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(LineWriter {
            logger: self.logger.clone(),
            tags: self.tags.clone(),
            source: self.source,
            pending: Vec::new(),
        })
    }
}

struct LineWriter {
    logger: Arc<DriverLogger>,
    tags: Arc<Mutex<CallTags>>,
    source: Source,
    pending: Vec<u8>,
}

impl LineWriter {
    fn emit(&self, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches(['\r', '\n']);
        let tags = self.tags.lock().map(|t| t.clone()).unwrap_or_default();
        let level = if self.source == Source::Stderr {
            Level::Warn
        } else {
            Level::Info
        };
        self.logger
            .log(level, self.source, &tags.function, &tags.object, text, &[]);
    }
}

impl tokio::io::AsyncWrite for LineWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.pending.extend_from_slice(buf);
        while let Some(pos) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=pos).collect();
            self.emit(&line);
        }
        // A driver printing without newlines must not grow the host: flush long partial lines.
        if self.pending.len() >= 8 * 1024 {
            let line = std::mem::take(&mut self.pending);
            self.emit(&line);
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut TaskContext<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        _cx: &mut TaskContext<'_>,
    ) -> Poll<std::io::Result<()>> {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.emit(&line);
        }
        Poll::Ready(Ok(()))
    }
}
