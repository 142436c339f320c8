//! The one `wasmtime::Engine` of the process and its epoch ticker.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig,
    WasmBacktraceDetails,
};

use crate::error::MAX_BACKTRACE_FRAMES;

/// How often the epoch advances; a runaway guest is stopped within its deadline plus one tick.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// How instance memory is allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Allocation {
    /// The pooling allocator when the address space allows it, else on-demand (with a warning).
    #[default]
    Auto,
    /// The pooling allocator or an error.
    Pooling,
    /// Plain mmap per instance: slower instantiation, no up-front reservation.
    OnDemand,
}

/// Engine-wide settings.
#[derive(Debug, Clone, Copy)]
pub struct EngineOptions {
    /// Allocation strategy.
    pub allocation: Allocation,
    /// The largest linear memory any driver may get (the pool's slot size).
    pub max_memory_bytes: usize,
    /// Instances the pool holds at once, across drivers.
    pub pool_instances: u32,
    /// Read a driver's DWARF so that a trap's backtrace has `file:line` (wasmtime's
    /// `WasmBacktraceDetails::Enable`). Off in the controller, on in `wasm-ccm-dev`; see
    /// [`EngineOptions::default`] for why.
    pub backtrace_details: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        // 256 MiB fits the Python and JavaScript runtimes (BENCHMARKS.md, "Drivers in other
        // languages"); Rust drivers get a smaller per-driver limit through StoreLimits.
        EngineOptions {
            allocation: Allocation::Auto,
            max_memory_bytes: 256 << 20,
            pool_instances: 128,
            // Backtrace details cost nothing at load for a driver without DWARF: wasmtime only
            // parses and keeps `.debug_*` sections, and the shipped drivers are built stripped
            // (measured: same artifact bytes, compile time within noise). With DWARF they cost
            // in the controller's process, from bytes the driver chose: the DWARF is copied into
            // the artifact (line tables only: 634 KB → 1.34 MB, in memory and the disk cache)
            // and parsed again for every frame of every trap (a 20-deep panic: 1.4 ms → 285 ms in
            // a test build). Events and log lines carry names only, which need no DWARF, so only
            // the developer kit, where an author debugs their own driver, turns details on.
            backtrace_details: false,
        }
    }
}

/// The engine plus the thread that ticks its epoch. Dropping the last clone stops the thread.
#[derive(Clone)]
pub struct WasmEngine {
    engine: Engine,
    pooling: bool,
    _ticker: Arc<Ticker>,
}

struct Ticker {
    stop: Arc<AtomicBool>,
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl WasmEngine {
    /// Builds the engine. With [`Allocation::Auto`] a pool that cannot be reserved falls back to
    /// on-demand allocation with a warning.
    pub fn new(opts: EngineOptions) -> Result<Self, String> {
        let (engine, pooling) = match opts.allocation {
            Allocation::OnDemand => (build(opts, false)?, false),
            Allocation::Pooling => (build(opts, true)?, true),
            Allocation::Auto => match build(opts, true) {
                Ok(e) => (e, true),
                Err(why) => {
                    tracing::warn!(
                        "pooling allocator unavailable ({why}); falling back to on-demand allocation, instantiation will be slower"
                    );
                    (build(opts, false)?, false)
                }
            },
        };
        let stop = Arc::new(AtomicBool::new(false));
        {
            let stop = stop.clone();
            let engine = engine.clone();
            std::thread::Builder::new()
                .name("wasm-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(EPOCH_TICK);
                        engine.increment_epoch();
                    }
                })
                .map_err(|e| format!("could not start the epoch thread: {e}"))?;
        }
        Ok(WasmEngine {
            engine,
            pooling,
            _ticker: Arc::new(Ticker { stop }),
        })
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Whether the pooling allocator is in use.
    pub fn pooling(&self) -> bool {
        self.pooling
    }

    /// A key for compiled artifacts: equal only when this engine can load what another compiled.
    pub fn compatibility_key(&self) -> String {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut h);
        env!("CARGO_PKG_VERSION").hash(&mut h);
        format!("{:016x}", h.finish())
    }
}

fn build(opts: EngineOptions, pooling: bool) -> Result<Engine, String> {
    let mut config = Config::new();
    config
        // Explicit, not wasmtime's default (`WASMTIME_BACKTRACE_DETAILS` in the environment):
        // the process environment must not change what the host parses or its cache key.
        .wasm_backtrace_details(if opts.backtrace_details {
            WasmBacktraceDetails::Enable
        } else {
            WasmBacktraceDetails::Disable
        })
        // One frame more than a trap message keeps, so that the host knows when it cut.
        .wasm_backtrace_max_frames(NonZeroUsize::new(MAX_BACKTRACE_FRAMES + 1))
        .wasm_component_model(true)
        .epoch_interruption(true)
        .parallel_compilation(true)
        .cranelift_opt_level(OptLevel::Speed)
        .memory_init_cow(true);
    if pooling {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(opts.pool_instances)
            .total_core_instances(opts.pool_instances * 4)
            .total_memories(opts.pool_instances * 2)
            .total_tables(opts.pool_instances * 4)
            .total_stacks(opts.pool_instances)
            .max_memory_size(opts.max_memory_bytes)
            // Python and JS components carry big instance state; 16 MiB fits them.
            .max_component_instance_size(16 << 20)
            .max_core_instance_size(16 << 20)
            .max_memories_per_component(8)
            .max_tables_per_component(16)
            .max_core_instances_per_component(64);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    Engine::new(&config).map_err(|e| format!("{e:#}"))
}
