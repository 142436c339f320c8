//! What each driver instance's `Store` holds: WASI, the memory limiter, the call's tags and the
//! capabilities' state. The host side of the driver's imports is in [`crate::capability`].

use std::sync::{Arc, Mutex};
use std::time::Instant;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::bindings::types;
use crate::call::{CallScope, SharedNodes};
use crate::capability::cluster::{ClusterHost, ClusterStateView};
use crate::capability::http::{HttpHost, HttpView};
use crate::capability::log::stdio::LogOutput;
use crate::capability::log::{CallTags, LogHost, LogView, Source};
use crate::capability::{CallState, DriverHost};

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
    pub(crate) fn new(host: Arc<DriverHost>, memory_limit: usize) -> Self {
        let tags = Arc::new(Mutex::new(CallTags::default()));
        let panic = Arc::new(Mutex::new(None));
        let out = |source| LogOutput::new(host.logger.clone(), tags.clone(), panic.clone(), source);
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
            call: CallState::begin(Instant::now(), &CallScope::default(), None),
            host,
            tags,
            panic,
        }
    }

    /// The panic line the guest printed during this call, if any.
    pub(crate) fn last_panic(&self) -> Option<String> {
        self.panic.lock().ok().and_then(|p| p.clone())
    }

    /// Starts a call of `function` for `scope`: new deadline, fresh per-call state of every
    /// capability (`nodes` is the node set of a `load-balancer.ensure` or `update`).
    pub(crate) fn begin_call(
        &mut self,
        function: &str,
        scope: &CallScope,
        deadline: Instant,
        nodes: Option<SharedNodes>,
    ) {
        self.call = CallState::begin(deadline, scope, nodes);
        self.limiter.begin_call();
        if let Ok(mut p) = self.panic.lock() {
            *p = None;
        }
        if let Ok(mut t) = self.tags.lock() {
            t.function = function.to_string();
            t.object = scope.object.clone();
        }
    }
}

// The capabilities' views of an instance's data (`crate::capability::add_to_linker`).

impl HttpView for InstanceState {
    fn http_host(&mut self) -> HttpHost<'_> {
        HttpHost::new(
            &self.host.http,
            &self.host.logger,
            self.call.deadline,
            &mut self.call.http,
        )
    }
}

impl LogView for InstanceState {
    fn log_host(&mut self) -> LogHost<'_> {
        LogHost::new(&self.host.logger, &self.tags)
    }
}

impl ClusterStateView for InstanceState {
    fn cluster_host(&mut self) -> ClusterHost<'_> {
        ClusterHost::new(
            &self.host.name,
            &self.host.logger,
            &self.host.lowered,
            &self.tags,
            &mut self.call.cluster,
        )
    }
}

impl types::Host for InstanceState {}

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
