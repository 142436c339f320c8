//! The process's wasmtime engines (one per compiler tier) and the one epoch ticker that drives
//! them all.
//!
//! A module compiled by one `Engine` runs only in that engine, so each tier has its own: Winch
//! (a single-pass compiler: a driver compiles in a quarter of Cranelift's time, its code runs
//! slower) and Cranelift (the optimising compiler). [`Compiler`] says which the host uses; see
//! `driver/tier_up.rs` for the swap from the first to the second.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, MemoryCreator, OptLevel, PoolingAllocationConfig,
    Strategy, WasmBacktraceDetails,
};

use crate::error::MAX_BACKTRACE_FRAMES;

/// How often the epoch advances; a runaway guest is stopped within its deadline plus one tick.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(10);

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

/// Which compilers turn a driver's wasm into machine code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compiler {
    /// A driver the compile cache does not hold is compiled with Winch and serves at once;
    /// Cranelift compiles it again in the background, and the driver swaps to that code between
    /// calls. A cached Cranelift build is used directly.
    #[default]
    Tiered,
    /// Cranelift only: the slowest compile, the fastest code.
    Cranelift,
    /// Winch only (Cranelift only for a driver Winch cannot compile): the fastest compile, slower
    /// code, never a swap.
    Winch,
}

/// Which compiler produced the code a driver runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    /// Winch, the baseline compiler.
    Winch,
    /// Cranelift, the optimising compiler.
    Cranelift,
}

impl Tier {
    /// The tier's name in cache file names, logs and metrics: `winch` or `cranelift`.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Winch => "winch",
            Tier::Cranelift => "cranelift",
        }
    }

    pub(crate) fn other(self) -> Tier {
        match self {
            Tier::Winch => Tier::Cranelift,
            Tier::Cranelift => Tier::Winch,
        }
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Engine-wide settings.
#[derive(Clone)]
pub struct EngineOptions {
    /// Which compilers are used.
    pub compiler: Compiler,
    /// Allocation strategy.
    pub allocation: Allocation,
    /// The largest linear memory any driver may get (the pool's slot size).
    pub max_memory_bytes: usize,
    /// Instances the pool holds at once, across drivers (each tier's engine has a pool this
    /// size).
    pub pool_instances: u32,
    /// Read a driver's DWARF so that a trap's backtrace has `file:line` (wasmtime's
    /// `WasmBacktraceDetails::Enable`). Off in the controller, on in `wasm-ccm-dev`; see
    /// [`EngineOptions::default`] for why.
    pub backtrace_details: bool,
    /// For tests that inspect guest memory: every linear memory of every instance is allocated
    /// by this creator (`wasmtime::Config::with_host_memory`), so a test can read what a driver
    /// holds. Forces on-demand allocation (the pool allocates its own memories, whatever
    /// [`EngineOptions::allocation`] says) with no reservation, no guard pages and no
    /// copy-on-write images: the creator's plain heap buffers may move when they grow, and the
    /// code checks every access's bounds itself. Those settings change the engine's
    /// compatibility key, so the compile cache keeps such artifacts apart. `None` (the default,
    /// and always in the product) leaves the engine exactly as without this field.
    pub memory_creator: Option<Arc<dyn MemoryCreator>>,
}

impl std::fmt::Debug for EngineOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineOptions")
            .field("compiler", &self.compiler)
            .field("allocation", &self.allocation)
            .field("max_memory_bytes", &self.max_memory_bytes)
            .field("pool_instances", &self.pool_instances)
            .field("backtrace_details", &self.backtrace_details)
            .field(
                "memory_creator",
                &self.memory_creator.as_ref().map(|_| "custom"),
            )
            .finish()
    }
}

impl Default for EngineOptions {
    fn default() -> Self {
        // 256 MiB fits the Python and JavaScript runtimes (BENCHMARKS.md, "Drivers in other
        // languages"); Rust drivers get a smaller per-driver limit through StoreLimits.
        EngineOptions {
            compiler: Compiler::Tiered,
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
            memory_creator: None,
        }
    }
}

/// The engines plus the thread that ticks their epochs. Dropping the last clone stops the
/// thread.
#[derive(Clone)]
pub struct WasmEngine {
    /// The final tier's engine.
    main: Engine,
    /// The other tier's engine, if the host uses two.
    second: Option<Engine>,
    compiler: Compiler,
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
    /// Builds the engines. With [`Allocation::Auto`] a pool that cannot be reserved falls back
    /// to on-demand allocation with a warning.
    ///
    /// Both engines allocate alike: the pooling allocator refuses some components outright
    /// (more memories or tables than a slot holds), and a second engine allocating on demand
    /// would run what the first refuses. So the other tier's engine gets the same allocation as
    /// the final tier's (a pool of its own: address space, not memory, until instances use it);
    /// if it cannot have it, the host does without that tier, with a warning: a tiered host
    /// compiles with Cranelift only, a Winch host loses its Cranelift fallback.
    ///
    /// With [`EngineOptions::memory_creator`] both engines allocate on demand, through it.
    pub(crate) fn new(opts: EngineOptions) -> Result<Self, String> {
        let final_tier = match opts.compiler {
            Compiler::Winch => Tier::Winch,
            Compiler::Tiered | Compiler::Cranelift => Tier::Cranelift,
        };
        let allocation = match opts.memory_creator {
            Some(_) => Allocation::OnDemand,
            None => opts.allocation,
        };
        let (main, pooling) = match allocation {
            Allocation::OnDemand => (build(&opts, final_tier, false)?, false),
            Allocation::Pooling => (build(&opts, final_tier, true)?, true),
            Allocation::Auto => match build(&opts, final_tier, true) {
                Ok(e) => (e, true),
                Err(why) => {
                    tracing::warn!(
                        "pooling allocator unavailable ({why}); falling back to on-demand allocation, instantiation will be slower"
                    );
                    (build(&opts, final_tier, false)?, false)
                }
            },
        };
        let mut compiler = opts.compiler;
        let second = match opts.compiler {
            Compiler::Cranelift => None,
            Compiler::Tiered | Compiler::Winch => {
                let tier = final_tier.other();
                match build(&opts, tier, pooling) {
                    Ok(e) => Some(e),
                    Err(why) => {
                        tracing::warn!(
                            "the {tier} engine is unavailable ({why}); {}",
                            match compiler {
                                Compiler::Tiered =>
                                    "compiling drivers with Cranelift only, cold loads will be slower",
                                _ => "a driver Winch cannot compile will be refused",
                            }
                        );
                        if compiler == Compiler::Tiered {
                            compiler = Compiler::Cranelift;
                        }
                        None
                    }
                }
            }
        };
        let engines: Vec<Engine> = std::iter::once(&main).chain(&second).cloned().collect();
        let stop = Arc::new(AtomicBool::new(false));
        {
            let stop = stop.clone();
            // One ticker for every engine: a hung guest must be interrupted on each tier, and
            // one thread is cheaper than one per engine.
            std::thread::Builder::new()
                .name("wasm-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(EPOCH_TICK);
                        for engine in &engines {
                            engine.increment_epoch();
                        }
                    }
                })
                .map_err(|e| format!("could not start the epoch thread: {e}"))?;
        }
        Ok(WasmEngine {
            main,
            second,
            compiler,
            pooling,
            _ticker: Arc::new(Ticker { stop }),
        })
    }

    /// The engine of the final tier: the one whose code serves for good.
    pub(crate) fn engine(&self) -> &Engine {
        &self.main
    }

    /// The engine that runs `tier`'s code, if the host uses that tier.
    pub fn engine_for(&self, tier: Tier) -> Option<&Engine> {
        if tier == self.final_tier() {
            Some(&self.main)
        } else {
            self.second.as_ref()
        }
    }

    /// The compilers in use (Cranelift only when Winch was asked for but is unavailable).
    pub fn compiler(&self) -> Compiler {
        self.compiler
    }

    /// The tier a driver the cache does not hold is compiled with first.
    pub(crate) fn first_tier(&self) -> Tier {
        match self.compiler {
            Compiler::Tiered | Compiler::Winch => Tier::Winch,
            Compiler::Cranelift => Tier::Cranelift,
        }
    }

    /// The tier whose code serves for good.
    pub(crate) fn final_tier(&self) -> Tier {
        match self.compiler {
            Compiler::Winch => Tier::Winch,
            Compiler::Tiered | Compiler::Cranelift => Tier::Cranelift,
        }
    }

    /// The tiers the host has, the final one first.
    pub(crate) fn tiers(&self) -> impl Iterator<Item = Tier> + '_ {
        let last = self.final_tier();
        [last, last.other()]
            .into_iter()
            .filter(|t| self.engine_for(*t).is_some())
    }

    /// Whether the final tier's engine uses the pooling allocator.
    pub fn pooling(&self) -> bool {
        self.pooling
    }

    /// A key for compiled artifacts of the final tier: equal only when this engine can load what
    /// another compiled. (The cache asks per tier, [`Self::compatibility_key_for`]; this is for
    /// the tests.)
    #[cfg(test)]
    pub(crate) fn compatibility_key(&self) -> String {
        self.compatibility_key_for(self.final_tier())
    }

    /// A key for compiled artifacts of `tier`. It names the tier as well as the engine's own
    /// compatibility hash (which already differs between compilers), so that an artifact of
    /// one compiler can never be taken for the other's even if wasmtime's hash stopped telling
    /// them apart.
    pub fn compatibility_key_for(&self, tier: Tier) -> String {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        if let Some(engine) = self.engine_for(tier) {
            engine.precompile_compatibility_hash().hash(&mut h);
        }
        tier.name().hash(&mut h);
        env!("CARGO_PKG_VERSION").hash(&mut h);
        format!("{:016x}", h.finish())
    }
}

fn build(opts: &EngineOptions, tier: Tier, pooling: bool) -> Result<Engine, String> {
    let mut config = Config::new();
    config.strategy(match tier {
        Tier::Winch => Strategy::Winch,
        Tier::Cranelift => Strategy::Cranelift,
    });
    // Both tiers share everything else, so a driver behaves the same on either: the same
    // backtraces, the same epoch interruption (Winch emits the same epoch checks), the same
    // copy-on-write memory images. Winch leaves out the proposals it lacks (GC, tail calls,
    // exceptions, relaxed SIMD); a driver that uses one fails to compile there and falls back
    // to Cranelift (`driver/compile.rs`).
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
    if let Some(creator) = &opts.memory_creator {
        // Only the on-demand allocator asks a host memory creator (`WasmEngine::new` never
        // pools with one). wasmtime's defaults assume memories it maps itself: a reservation
        // the memory never leaves and guard pages past it (so the code elides bounds checks),
        // and copy-on-write images mapped over the memory (which it can do only to an mmap;
        // on a host memory it would panic). A creator's buffer is none of these: no
        // reservation and no guard (every access is bounds-checked, the base pointer is
        // reloaded after a growth that moved it), data segments copied in. The same for GC
        // heaps, which on-demand allocation also takes from the creator.
        config
            .memory_init_cow(false)
            .memory_reservation(0)
            .memory_reservation_for_growth(0)
            .memory_guard_size(0)
            .guard_before_linear_memory(false)
            .memory_may_move(true)
            .gc_heap_reservation(0)
            .gc_heap_reservation_for_growth(0)
            .gc_heap_guard_size(0)
            .gc_heap_may_move(true)
            .with_host_memory(creator.clone());
    }
    Engine::new(&config).map_err(|e| format!("{e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A creator that refuses every memory: building an engine never asks it.
    struct Refusing;

    // SAFETY: it creates no memory at all, so it hands wasmtime nothing to misuse.
    unsafe impl MemoryCreator for Refusing {
        fn new_memory(
            &self,
            _ty: wasmtime::MemoryType,
            _minimum: usize,
            _maximum: Option<usize>,
            _reserved_size_in_bytes: Option<usize>,
            _guard_size_in_bytes: usize,
        ) -> Result<Box<dyn wasmtime::LinearMemory>, String> {
            Err("no memories here".into())
        }
    }

    fn engine(memory_creator: Option<Arc<dyn MemoryCreator>>) -> WasmEngine {
        WasmEngine::new(EngineOptions {
            compiler: Compiler::Cranelift,
            allocation: Allocation::OnDemand,
            memory_creator,
            ..Default::default()
        })
        .expect("engine")
    }

    /// A memory creator changes how code is compiled (bounds checks instead of guard pages), so
    /// artifacts of such an engine must never be taken for the product's, or the reverse; an
    /// engine without one keeps the product's key.
    #[test]
    fn a_memory_creator_has_a_cache_key_of_its_own() {
        let plain = engine(None).compatibility_key();
        assert_eq!(plain, engine(None).compatibility_key());
        let recording = engine(Some(Arc::new(Refusing)));
        assert!(!recording.pooling(), "a memory creator allocates on demand");
        assert_ne!(plain, recording.compatibility_key());
    }

    /// [`Allocation::Pooling`] is overridden, not an error: the pool would never ask the creator.
    #[test]
    fn a_memory_creator_overrides_pooling() {
        let e = WasmEngine::new(EngineOptions {
            compiler: Compiler::Cranelift,
            allocation: Allocation::Pooling,
            memory_creator: Some(Arc::new(Refusing)),
            ..Default::default()
        })
        .expect("engine");
        assert!(!e.pooling());
    }
}
