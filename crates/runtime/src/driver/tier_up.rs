//! The background half of tiered compilation: a driver that serves on Winch code gets its
//! Cranelift build compiled on a thread of its own, stored in the compile cache, and swapped in
//! between calls.
//!
//! One [`TierUp`] belongs to one Winch-compiled [`super::Compiled`]. The compile starts when the
//! first driver loaded from it has proved `init` (so inspecting or refusing a driver costs no
//! Cranelift compile, and the compile does not compete with the load itself). Every driver
//! loaded from it registers; when the build is ready, each one still alive adopts it
//! (`DriverInner::adopt`): new instances come from the Cranelift code at once, Winch instances
//! finish the calls they are in and are dropped instead of going back to the pool. A driver
//! loaded after the build is ready starts on Cranelift directly.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use wasmtime::component::{InstancePre, Linker};

use super::compile;
use crate::cache::{AotCache, Lookup};
use crate::engine::{Tier, WasmEngine};
use crate::state::InstanceState;

/// What waits for the Cranelift build: a loaded driver (`DriverInner`), which swaps it in. A
/// trait, so this module does not depend on the pool that implements it.
pub(super) trait Adopter: Send + Sync {
    /// Swaps in `pre`, built in `compile`.
    fn adopt(&self, pre: InstancePre<InstanceState>, compile: Duration);
}

/// What the background compile needs, kept until it starts.
pub(super) struct Job {
    pub(super) origin: String,
    pub(super) wasm: Vec<u8>,
    pub(super) sha256: String,
    pub(super) engine: WasmEngine,
    /// The Cranelift engine's linker (a linker serves one engine only).
    pub(super) linker: Arc<Linker<InstanceState>>,
    pub(super) cache: Option<AotCache>,
}

enum Phase {
    /// Not started: no driver has been loaded from this build yet.
    Waiting(Box<Job>),
    /// Compiling; these drivers adopt the result.
    Compiling(Vec<Weak<dyn Adopter>>),
    /// Done: new drivers start on this.
    Ready(InstancePre<InstanceState>),
    /// The compile failed (logged); drivers stay on Winch.
    Failed,
}

/// The Cranelift build of one Winch-compiled driver, on its way.
pub(super) struct TierUp {
    phase: Mutex<Phase>,
}

impl TierUp {
    pub(super) fn new(job: Job) -> Arc<Self> {
        Arc::new(TierUp {
            phase: Mutex::new(Phase::Waiting(Box::new(job))),
        })
    }

    /// The Cranelift build, if it is ready.
    pub(super) fn ready(&self) -> Option<InstancePre<InstanceState>> {
        match &*self.phase.lock().ok()? {
            Phase::Ready(pre) => Some(pre.clone()),
            _ => None,
        }
    }

    /// Registers `driver` to adopt the Cranelift build, starting the compile if it has not
    /// started. Returns the build when it is already there (the caller adopts it now).
    pub(super) fn subscribe(
        self: &Arc<Self>,
        driver: Weak<dyn Adopter>,
    ) -> Option<InstancePre<InstanceState>> {
        let mut phase = self.phase.lock().ok()?;
        match &mut *phase {
            Phase::Ready(pre) => return Some(pre.clone()),
            Phase::Failed => return None,
            Phase::Compiling(waiting) => {
                waiting.retain(|w| w.strong_count() > 0);
                waiting.push(driver);
                return None;
            }
            Phase::Waiting(_) => {}
        }
        let Phase::Waiting(job) = std::mem::replace(&mut *phase, Phase::Compiling(vec![driver]))
        else {
            return None;
        };
        let origin = job.origin.clone();
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("wasm-ccm-tier-up".into())
            .spawn(move || me.run(*job));
        if let Err(e) = spawned {
            tracing::warn!(
                driver = %origin,
                "could not start the background Cranelift compile ({e}); the driver stays on Winch code"
            );
            *phase = Phase::Failed;
        }
        None
    }

    fn run(self: Arc<Self>, job: Job) {
        let started = Instant::now();
        let built = build(&job);
        let took = started.elapsed();
        let (pre, waiting) = {
            let Ok(mut phase) = self.phase.lock() else {
                return;
            };
            let waiting = match std::mem::replace(&mut *phase, Phase::Failed) {
                Phase::Compiling(w) => w,
                _ => Vec::new(),
            };
            match built {
                Ok(pre) => {
                    *phase = Phase::Ready(pre.clone());
                    (pre, waiting)
                }
                Err(why) => {
                    tracing::warn!(
                        driver = %job.origin,
                        "the background Cranelift compile failed ({why}); the driver stays on Winch code"
                    );
                    return;
                }
            }
        };
        for driver in waiting.iter().filter_map(Weak::upgrade) {
            driver.adopt(pre.clone(), took);
        }
    }
}

/// The Cranelift build: from the cache if another load put it there meanwhile, else compiled
/// and stored; then the Winch entry, which nothing will load again, is removed (after its
/// background write, if that is still going: `AotCache::remove` waits for it).
fn build(job: &Job) -> Result<InstancePre<InstanceState>, String> {
    let winch_key = job.engine.compatibility_key_for(Tier::Winch);
    let tier = Tier::Cranelift;
    let engine = job
        .engine
        .engine_for(tier)
        .ok_or_else(|| "the host has no Cranelift engine".to_string())?;
    let key = job.engine.compatibility_key_for(tier);
    let cached = match &job.cache {
        Some(cache) => match cache.get(engine, tier, &key, &job.sha256) {
            Lookup::Hit(c) => Some(c),
            Lookup::Absent | Lookup::Refused => None,
        },
        None => None,
    };
    let component = match cached {
        Some(c) => c,
        None => compile::compile(
            &job.engine,
            job.cache.as_ref(),
            tier,
            &job.wasm,
            &job.sha256,
        )
        .map_err(|e| format!("{e:#}"))?,
    };
    if let Some(cache) = &job.cache {
        cache.remove(&job.sha256, Tier::Winch, &winch_key);
    }
    job.linker
        .instantiate_pre(&component)
        .map_err(|e| format!("linking the Cranelift build: {e:#}"))
}

/// How long the background compile took, for the swap's log line.
pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
