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
use crate::call::{ClusterView, DriverEvent, EventKind, SharedNodes};
use crate::http::{HttpCapability, HttpExchange};
use crate::log::{DriverLogger, Level, Source};

/// Events a single call may record; more are dropped with a log line.
const MAX_EVENTS_PER_CALL: usize = 50;
/// HTTP exchanges a single call keeps a record of (for conformance and the request log); the
/// requests beyond are still made and counted, only not recorded.
const MAX_EXCHANGES_PER_CALL: usize = 256;
const MAX_EVENT_MESSAGE: usize = 1024;
/// Longest event reason kept from a driver (the controllers refuse one over 128 bytes and quote a
/// shortened form of it).
const MAX_EVENT_REASON_BYTES: usize = 512;

/// What all instances of one driver share.
pub(crate) struct DriverHost {
    pub name: String,
    pub logger: Arc<DriverLogger>,
    pub http: Arc<HttpCapability>,
    /// Bytes copied into the driver's instances, arguments and imports' answers
    /// ([`crate::lowered`]).
    pub lowered: std::sync::atomic::AtomicU64,
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
    /// The node set of a `load-balancer.ensure` or `update` call, for `cluster.nodes`.
    pub nodes: Option<SharedNodes>,
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
    /// The guest's last panic line on stderr in this call (`panicked at …: message`), for the
    /// trap message.
    panic: Arc<Mutex<Option<String>>>,
}

impl InstanceState {
    pub(crate) fn new(
        host: Arc<DriverHost>,
        memory_limit: usize,
        cluster: Arc<dyn ClusterView>,
    ) -> Self {
        let tags = Arc::new(Mutex::new(CallTags::default()));
        let panic = Arc::new(Mutex::new(None));
        let out = |source| LogOutput {
            logger: host.logger.clone(),
            tags: tags.clone(),
            panic: panic.clone(),
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
                nodes: None,
                events: Vec::new(),
                http: Vec::new(),
            },
            host,
            tags,
            panic,
        }
    }

    /// The panic line the guest printed during this call, if any.
    pub(crate) fn last_panic(&self) -> Option<String> {
        self.panic.lock().ok().and_then(|p| p.clone())
    }

    /// Starts a call: new deadline, empty event and request lists.
    pub(crate) fn begin_call(
        &mut self,
        function: &str,
        object: &str,
        deadline: Instant,
        cluster: Arc<dyn ClusterView>,
        nodes: Option<SharedNodes>,
    ) {
        self.call = CallState {
            deadline,
            cluster,
            nodes,
            events: Vec::new(),
            http: Vec::new(),
        };
        self.limiter.begin_call();
        if let Ok(mut p) = self.panic.lock() {
            *p = None;
        }
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

/// Caps linear memory and table growth of a whole instance, remembering the high-water mark
/// and whether a growth was refused (so a trap that follows is reported as out-of-memory, not as
/// a crash).
///
/// A component may define many core instances, each with its own memories: the limit applies
/// to the sum of all of them, not to each (a 3 KB component with 31 memories would otherwise
/// take 31 times the limit).
pub(crate) struct MemoryLimiter {
    limit: usize,
    /// Bytes of all linear memories of the store now.
    total: usize,
    /// Table elements of all tables of the store now.
    table_elements: usize,
    /// The largest `total` seen.
    pub peak: usize,
    pub refused: bool,
}

/// Table elements across all tables of an instance.
pub(crate) const MAX_TABLE_ELEMENTS: usize = 100_000;
/// Core instances, linear memories and tables one driver instance may create. Rust, Python
/// (componentize-py) and JavaScript (componentize-js) drivers need far fewer; the pooling
/// allocator's per-component limits (`engine.rs`) are the same or lower.
pub(crate) const MAX_CORE_INSTANCES: usize = 64;
pub(crate) const MAX_MEMORIES: usize = 8;
pub(crate) const MAX_TABLES: usize = 16;

impl MemoryLimiter {
    fn new(limit: usize) -> Self {
        MemoryLimiter {
            limit,
            total: 0,
            table_elements: 0,
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
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // wasmtime asks for every memory, its initial allocation included (current = 0).
        let total = self.total.saturating_sub(current).saturating_add(desired);
        if total > self.limit {
            self.refused = true;
            return Ok(false);
        }
        self.total = total;
        self.peak = self.peak.max(total);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self
            .table_elements
            .saturating_sub(current)
            .saturating_add(desired);
        if total > MAX_TABLE_ELEMENTS {
            self.refused = true;
            return Ok(false);
        }
        self.table_elements = total;
        Ok(true)
    }

    fn instances(&self) -> usize {
        MAX_CORE_INSTANCES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }
}

impl types::Host for InstanceState {}

impl http::Host for InstanceState {
    async fn send(&mut self, request: http::Request) -> Result<http::Response, http::HttpError> {
        let capability = self.host.http.clone();
        let (result, mut exchange) = capability.send(request, self.call.deadline).await;
        if self.call.http.len() < MAX_EXCHANGES_PER_CALL {
            exchange.url = self.host.logger.redact_bounded(&exchange.url, 4 * 1024);
            self.call.http.push(exchange);
        }
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
        let Ok(tags) = self.tags.lock() else {
            return;
        };
        self.host
            .logger
            .add_driver_secret(&secret, &tags.function, &tags.object);
    }
}

impl InstanceState {
    /// Counts what an answer of the `cluster` import copies into the guest.
    fn count_lowered<T: crate::lowered::Lowered + ?Sized>(&self, answer: &T) {
        self.host
            .lowered
            .fetch_add(answer.lowered_bytes(), std::sync::atomic::Ordering::Relaxed);
    }
}

impl cluster::Host for InstanceState {
    fn load_balancer_services(&mut self) -> Vec<types::Service> {
        let services = self.call.cluster.load_balancer_services();
        self.count_lowered(services.as_slice());
        services
    }

    fn services_with_annotation(
        &mut self,
        key: String,
        values: Vec<String>,
    ) -> Vec<types::Service> {
        let services = self.call.cluster.services_with_annotation(&key, &values);
        self.count_lowered(services.as_slice());
        services
    }

    fn services_with_address(&mut self, ips: Vec<String>) -> Vec<types::Service> {
        let services = self.call.cluster.services_with_address(&ips);
        self.count_lowered(services.as_slice());
        services
    }

    fn address_claims(
        &mut self,
        ips: Vec<String>,
        annotation: String,
    ) -> Vec<cluster::AddressClaim> {
        let claims = self.call.cluster.address_claims(&ips, &annotation);
        self.count_lowered(claims.as_slice());
        claims
    }

    fn nodes(&mut self) -> Vec<types::Node> {
        let nodes = self
            .call
            .nodes
            .as_ref()
            .map(|set| set.nodes().to_vec())
            .unwrap_or_default();
        self.count_lowered(nodes.as_slice());
        nodes
    }

    fn event(&mut self, kind: cluster::EventType, reason: String, message: String) {
        let tags = self.tags();
        // The controllers validate the reason (UpperCamelCase, ≤ 128 bytes) and quote a refused
        // one; here it is kept from growing the host and redacted (before any cut, so no part of
        // a secret survives it).
        let reason = self
            .host
            .logger
            .redact_bounded(&reason, MAX_EVENT_REASON_BYTES);
        if self.call.events.len() >= MAX_EVENTS_PER_CALL {
            self.host.logger.log(Level::Warn, Source::Host, &tags.function, &tags.object,
                &format!("driver {} recorded more than {MAX_EVENTS_PER_CALL} events in one call; dropping event {reason}", self.host.name), &[]);
            return;
        }
        let message = self.host.logger.redact_bounded(&message, MAX_EVENT_MESSAGE);
        let kind = match kind {
            cluster::EventType::Normal => EventKind::Normal,
            cluster::EventType::Warning => EventKind::Warning,
        };
        self.call.events.push(DriverEvent {
            kind,
            reason,
            message,
        });
    }
}

/// Turns a driver's stdout or stderr into log lines.
struct LogOutput {
    logger: Arc<DriverLogger>,
    tags: Arc<Mutex<CallTags>>,
    panic: Arc<Mutex<Option<String>>>,
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
            panic: self.panic.clone(),
            source: self.source,
            pending: Vec::new(),
            after_panic_header: false,
        })
    }
}

struct LineWriter {
    logger: Arc<DriverLogger>,
    tags: Arc<Mutex<CallTags>>,
    panic: Arc<Mutex<Option<String>>>,
    source: Source,
    pending: Vec<u8>,
    /// The previous line was Rust's `thread '…' panicked at FILE:LINE:COL:` header, so this one
    /// is the panic message.
    after_panic_header: bool,
}

/// Longest panic line kept for a trap message.
const MAX_PANIC_LINE: usize = 400;

impl LineWriter {
    fn emit(&mut self, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches(['\r', '\n']);
        // Rust's panic output starts with an empty line; an empty record says nothing.
        if text.trim().is_empty() {
            return;
        }
        if self.source == Source::Stderr {
            self.remember_panic(text);
        }
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

impl LineWriter {
    fn remember_panic(&mut self, text: &str) {
        let Ok(mut slot) = self.panic.lock() else {
            return;
        };
        if let Some(at) = text.find(" panicked at ") {
            let location = text[at + " panicked at ".len()..].trim_end_matches(':');
            // Redacted before the cut: a secret across the cut would survive as a prefix.
            *slot = Some(
                self.logger
                    .redact_bounded(&format!("at {location}"), MAX_PANIC_LINE),
            );
            self.after_panic_header = true;
        } else if self.after_panic_header {
            let location = slot.take().unwrap_or_default();
            *slot = Some(
                self.logger
                    .redact_bounded(&format!("{text} ({location})"), MAX_PANIC_LINE),
            );
            self.after_panic_header = false;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Instantiates a component of `instances` core instances, each with one memory of `pages`
    /// 64 KiB pages, under `limit`; whether it was allowed, and the limiter's peak.
    fn instantiate(instances: usize, pages: u32, limit: usize) -> (bool, usize) {
        instantiate_with(instances, pages, limit, false)
    }

    /// The same under the pooling allocator (the host's default), configured as `engine.rs`
    /// configures it per component.
    fn instantiate_with(
        instances: usize,
        pages: u32,
        limit: usize,
        pooling: bool,
    ) -> (bool, usize) {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        if pooling {
            let mut pool = wasmtime::PoolingAllocationConfig::default();
            pool.total_component_instances(4)
                .total_core_instances(16)
                .total_memories(16)
                .max_memory_size(64 << 20)
                .max_memories_per_component(8)
                .max_core_instances_per_component(64);
            config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
        }
        let engine = wasmtime::Engine::new(&config).expect("engine");
        let mut text = format!("(component (core module $m (memory (export \"m\") {pages}))");
        for i in 0..instances {
            text.push_str(&format!("(core instance $i{i} (instantiate $m))"));
        }
        text.push(')');
        let bytes = wat::parse_str(&text).expect("valid WAT");
        let component = wasmtime::component::Component::new(&engine, &bytes).expect("compiles");
        let mut store = wasmtime::Store::new(&engine, MemoryLimiter::new(limit));
        store.limiter(|l| l);
        let linker = wasmtime::component::Linker::<MemoryLimiter>::new(&engine);
        let ok = linker.instantiate(&mut store, &component).is_ok();
        (ok, store.data().peak)
    }

    const MIB: usize = 1 << 20;

    #[test]
    fn the_limit_covers_the_sum_of_all_memories_of_an_instance() {
        // 400 pages = 25 MiB a memory: two fit 64 MiB, three do not, although each one would.
        let (ok, peak) = instantiate(2, 400, 64 * MIB);
        assert!(ok);
        assert_eq!(peak, 50 * MIB);
        let (ok, peak) = instantiate(3, 400, 64 * MIB);
        assert!(!ok, "three 25 MiB memories passed a 64 MiB limit");
        assert!(peak <= 64 * MIB, "peak {peak}");
    }

    #[test]
    fn the_sum_holds_under_the_pooling_allocator() {
        // Each memory fits the pool's per-memory size; together they must not pass the limit.
        assert!(instantiate_with(2, 400, 64 * MIB, true).0);
        assert!(!instantiate_with(3, 400, 64 * MIB, true).0);
    }

    #[test]
    fn the_number_of_memories_is_bounded() {
        assert!(instantiate(MAX_MEMORIES, 1, 64 * MIB).0);
        assert!(!instantiate(MAX_MEMORIES + 1, 1, 64 * MIB).0);
    }

    #[test]
    fn tables_are_bounded_in_total() {
        let mut l = MemoryLimiter::new(64 * MIB);
        assert!(l.table_growing(0, MAX_TABLE_ELEMENTS / 2, None).unwrap());
        assert!(l.table_growing(0, MAX_TABLE_ELEMENTS / 2, None).unwrap());
        assert!(
            !l.table_growing(0, 1, None).unwrap(),
            "a third table over the total"
        );
        assert!(l.refused);
    }
}
