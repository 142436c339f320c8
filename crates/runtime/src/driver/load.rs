//! Compiling and loading: the [`Runtime`] with its engine, linker and compile cache, and
//! [`Runtime::load`], which runs `info`, builds the capabilities' per-driver state and proves
//! `init` on the pool's first instance.

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use wasmtime::component::{InstancePre, Linker};

use super::compile::{Built, first_build};
use super::compiled::Compiled;
use super::failure::classify;
use super::handle::Driver;
use super::options::{DriverOptions, PoolOptions};
use super::pool::{Code, DriverInner, Indices, Slot};
use super::stats::DriverStats;
use super::tier_up::{Adopter, Job, TierUp};
use crate::cache::AotCache;
use crate::call::CallScope;
use crate::capability::{self, DriverHost};
use crate::engine::{Compiler, EngineOptions, Tier, WasmEngine};
use crate::error::{CallError, HostError};
use crate::model::types::ProviderInfo;
use crate::state::InstanceState;
use crate::surface;

/// Host-wide settings.
#[derive(Debug, Clone, Default)]
pub struct RuntimeOptions {
    /// Engine settings.
    pub engine: EngineOptions,
    /// Where compiled drivers are cached; `None` compiles every time.
    pub cache_dir: Option<PathBuf>,
}

/// The host runtime: the engines (one per compiler tier), a linker for each, one compile cache,
/// any number of drivers.
#[derive(Clone)]
pub struct Runtime {
    engine: WasmEngine,
    /// The final tier's linker.
    linker: Arc<Linker<InstanceState>>,
    /// The other tier's linker, when the host has two engines.
    second_linker: Option<Arc<Linker<InstanceState>>>,
    cache: Option<AotCache>,
}

impl Runtime {
    /// Builds the engine and linker.
    pub fn new(opts: RuntimeOptions) -> Result<Self, HostError> {
        let engine = WasmEngine::new(opts.engine).map_err(|detail| HostError::Wasmtime {
            origin: "wasm-ccm".into(),
            stage: "creating the WebAssembly engine",
            detail,
        })?;
        let linker = host_linker(engine.engine())?;
        let second_linker = match engine.engine_for(engine.final_tier().other()) {
            Some(e) => Some(host_linker(e)?),
            None => None,
        };
        Ok(Runtime {
            engine,
            linker,
            second_linker,
            cache: opts.cache_dir.map(AotCache::new),
        })
    }

    /// The linker of `tier`'s engine.
    fn linker_for(&self, tier: Tier) -> Option<&Arc<Linker<InstanceState>>> {
        if tier == self.engine.final_tier() {
            Some(&self.linker)
        } else {
            self.second_linker.as_ref()
        }
    }

    /// The engine.
    pub fn engine(&self) -> &WasmEngine {
        &self.engine
    }

    /// The compile cache, if any.
    pub fn cache(&self) -> Option<&AotCache> {
        self.cache.as_ref()
    }

    /// Reads and compiles a driver file.
    pub async fn compile_file(&self, path: &std::path::Path) -> Result<Compiled, HostError> {
        let bytes = tokio::fs::read(path).await.map_err(|e| HostError::Io {
            path: path.display().to_string(),
            detail: format!("cannot read the driver: {e}"),
        })?;
        self.compile(&path.display().to_string(), bytes).await
    }

    /// Checks and compiles (or loads from the cache) a driver's bytes. No guest code runs.
    pub async fn compile(&self, origin: &str, bytes: Vec<u8>) -> Result<Compiled, HostError> {
        surface::check_bytes(origin, &bytes)?;
        let sha256 = hex::encode(Sha256::digest(&bytes));
        let started = Instant::now();
        let engine = self.engine.clone();
        let cache = self.cache.clone();
        let digest = sha256.clone();
        let size = bytes.len();
        let name = origin.to_string();
        // Compilation is CPU-heavy (and parallel inside): keep it off the async workers.
        let compiled = tokio::task::spawn_blocking(move || {
            first_build(&engine, cache.as_ref(), &name, &bytes, &digest).map(|b| (b, bytes))
        })
        .await;
        let (built, bytes) = match compiled {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                return Err(HostError::Wasmtime {
                    origin: origin.into(),
                    stage: "compiling",
                    detail: format!("{e:#}"),
                });
            }
            Err(e) => {
                return Err(HostError::Wasmtime {
                    origin: origin.into(),
                    stage: "compiling",
                    detail: e.to_string(),
                });
            }
        };
        let Built {
            component,
            tier,
            cache,
            unstored,
        } = built;
        let load_time = started.elapsed();
        // The Winch artifact a tiered host compiled is written on a blocking thread while the
        // load goes on; the entry is registered already, so a second compile of these bytes
        // waits for the write and loads it instead of compiling again. Blocking, not a detached
        // thread: the async runtime's shutdown waits for it, so a command that exits right
        // after compiling (`inspect`, `push`) still leaves the entry behind.
        if let Some(write) = unstored {
            tokio::task::spawn_blocking(move || write.run());
        }
        let engine = self.engine_of(origin, tier)?;
        let surface = surface::inspect(origin, engine, &component)?;
        // Winch code is a stopgap only when the host is tiered; a Winch-only host keeps it.
        let tier_up = match (tier, self.engine.compiler()) {
            (Tier::Winch, Compiler::Tiered) => self.linker_for(Tier::Cranelift).map(|linker| {
                TierUp::new(Job {
                    origin: origin.into(),
                    wasm: bytes,
                    sha256: sha256.clone(),
                    engine: self.engine.clone(),
                    linker: linker.clone(),
                    cache: self.cache.clone(),
                })
            }),
            _ => None,
        };
        Ok(Compiled {
            component: Some(component),
            origin: origin.into(),
            sha256,
            size,
            surface,
            load_time,
            cache,
            tier,
            tier_up,
        })
    }

    fn engine_of(&self, origin: &str, tier: Tier) -> Result<&wasmtime::Engine, HostError> {
        self.engine
            .engine_for(tier)
            .ok_or_else(|| HostError::Wasmtime {
                origin: origin.into(),
                stage: "compiling",
                detail: format!("the host has no {tier} engine"),
            })
    }

    /// Links the driver's imports against the host (pre-instantiation) without running it: the
    /// last step of a load before any guest code runs.
    pub fn link(&self, compiled: &Compiled) -> Result<(), HostError> {
        let pre = self.pre(compiled)?;
        Indices::new(&pre, &compiled.surface, &compiled.origin).map(|_| ())
    }

    /// Runs `info` in a throw-away instance, without `init` and without egress.
    pub async fn info(&self, compiled: &Compiled) -> Result<ProviderInfo, HostError> {
        Ok(self.declarations(compiled).await?.info)
    }

    /// Runs `info` and, when the driver exports `environment` (contract 0.2.1),
    /// `plain-variables`, in one throw-away instance without `init` and without egress. Neither
    /// answer is checked here: `load` checks both before anything uses them.
    pub async fn declarations(&self, compiled: &Compiled) -> Result<Declarations, HostError> {
        let pre = self.pre(compiled)?;
        let indices = Indices::new(&pre, &compiled.surface, &compiled.origin)?;
        // The default pool policy and capability configs (`bare` grants no egress whatever they
        // say).
        let opts = PoolOptions::default();
        let configs = (
            &capability::http::Config::default(),
            &capability::log::Config::default(),
        );
        let host = Arc::new(DriverHost::bare(&compiled.origin, configs)?);
        let mut slot = Slot::new(&pre, &indices, host, &opts)
            .await
            .map_err(|e| match e {
                CallError::Host(h) => h,
                CallError::Provider(p) => HostError::InitFailed {
                    driver: compiled.origin.clone(),
                    error: p,
                },
            })?;
        let function = "provider.info";
        slot.store.data_mut().begin_call(
            function,
            &CallScope::default(),
            Instant::now() + opts.call_timeout,
            None,
        );
        let call = slot.guests.provider.call_info(&mut slot.store);
        let answer = tokio::time::timeout(opts.call_timeout, call).await;
        let info = declaration(answer, &slot, &compiled.origin, function, &opts)?.into();
        let Some(environment) = slot.guests.environment.take() else {
            return Ok(Declarations {
                info,
                plain_env: None,
            });
        };
        let function = "environment.plain-variables";
        slot.store.data_mut().begin_call(
            function,
            &CallScope::default(),
            Instant::now() + opts.call_timeout,
            None,
        );
        let call = environment.call_plain_variables(&mut slot.store);
        let answer = tokio::time::timeout(opts.call_timeout, call).await;
        let plain_env = declaration(answer, &slot, &compiled.origin, function, &opts)?;
        Ok(Declarations { info, plain_env })
    }

    /// Instantiates a driver: `info`, the egress policy, `init`; the initialised instance becomes
    /// the first of the warm pool. Any failure is an error and nothing is kept.
    pub async fn load(
        &self,
        compiled: &Compiled,
        opts: DriverOptions,
    ) -> Result<Driver, HostError> {
        let Declarations { info, plain_env } = self.declarations(compiled).await?;
        crate::info_rules::validate(&info).map_err(|detail| HostError::InvalidInfo {
            origin: compiled.origin.clone(),
            detail,
        })?;
        if let Some(names) = &plain_env {
            crate::plain_env::validate(&info, names).map_err(|detail| HostError::InvalidInfo {
                origin: compiled.origin.clone(),
                detail,
            })?;
        } else if !info.secrets.is_empty() {
            tracing::warn!(
                driver = %info.name,
                "the driver declares its secrets but not its plain environment variables \
                 (contract 0.2.1, `environment`): it gets every variable with one of its \
                 env-prefixes except those whose names look like credentials; rebuild it \
                 against the 0.2.1 SDK and declare what it reads, so it gets an allow-list"
            );
        }
        let name = info.name.clone();
        // Only variables with one of the driver's declared prefixes reach it.
        let env: Vec<(String, String)> = opts
            .init
            .env
            .iter()
            .filter(|(k, _)| {
                info.env_prefixes
                    .iter()
                    .any(|p| !p.is_empty() && k.starts_with(p.as_str()))
            })
            .cloned()
            .collect();
        // The declared credentials leave the config and the environment for the host's vault;
        // `init` gets placeholders in their place.
        let sealed = crate::secrets::Vault::seal_declared(
            &name,
            &info.secrets,
            plain_env.as_deref(),
            &opts.init.config,
            &env,
            &opts.http.secrets,
        )
        .map_err(|detail| HostError::Secrets {
            driver: name.clone(),
            detail,
        })?;
        let host = Arc::new(DriverHost::new(
            &info,
            (&opts.http, &opts.log),
            &opts.init.config,
            &env,
            sealed.vault,
        )?);
        let (config, env) = (sealed.config, sealed.env);
        // A Cranelift build that finished since the compile serves from the start.
        let ready = compiled.tier_up.as_ref().and_then(|t| t.ready());
        let (pre, tier) = match ready {
            Some(pre) => (pre, Tier::Cranelift),
            None => (self.pre(compiled)?, compiled.tier),
        };
        let indices = Indices::new(&pre, &compiled.surface, &compiled.origin)?;
        let inner = Arc::new(DriverInner {
            name,
            compiled: Compiled {
                component: None,
                ..compiled.clone()
            },
            info,
            plain_env,
            code: Mutex::new(Arc::new(Code {
                pre,
                indices,
                tier,
                generation: 0,
            })),
            generation: AtomicU64::new(0),
            tier_tx: tokio::sync::watch::Sender::new(tier),
            host,
            config,
            env,
            permits: Semaphore::new(opts.pool.max_concurrency.max(1)),
            idle: Mutex::new(Vec::new()),
            stats: DriverStats::default(),
            context: opts.init.context,
            pool: opts.pool,
            _engine: self.engine.clone(),
        });
        // The first instance proves `init` accepts the configuration before anyone relies on it.
        let slot = inner.new_slot().await.map_err(|e| match e {
            CallError::Host(h) => h,
            CallError::Provider(p) => HostError::InitFailed {
                driver: inner.name.clone(),
                error: p,
            },
        })?;
        inner.put_back(slot);
        // Only a driver that passed `init` starts (or waits for) the Cranelift compile.
        if tier == Tier::Winch
            && let Some(tier_up) = &compiled.tier_up
            && let Some(pre) =
                tier_up.subscribe(Arc::downgrade(&inner) as std::sync::Weak<dyn Adopter>)
        {
            inner.adopt(pre, Duration::ZERO);
        }
        Ok(Driver { inner })
    }

    fn pre(&self, compiled: &Compiled) -> Result<InstancePre<InstanceState>, HostError> {
        let linker = self
            .linker_for(compiled.tier)
            .ok_or_else(|| HostError::Wasmtime {
                origin: compiled.origin.clone(),
                stage: "linking the driver's imports",
                detail: format!("the host has no {} engine", compiled.tier),
            })?;
        let component = compiled
            .component
            .as_ref()
            .ok_or_else(|| HostError::Wasmtime {
                origin: compiled.origin.clone(),
                stage: "linking the driver's imports",
                detail: "this is a loaded driver's description, without code: compile the driver's bytes again".into(),
            })?;
        linker.instantiate_pre(component).map_err(|e| {
            let mut detail = format!("{e:#}");
            if let Some(advice) = surface::link_advice(&compiled.surface.wit_version) {
                detail = format!("{detail}; {advice}");
            }
            HostError::Wasmtime {
                origin: compiled.origin.clone(),
                stage: "linking the driver's imports",
                detail,
            }
        })
    }
}

/// A linker with the host's imports (WASI, deny-by-default, and every capability) for `engine`.
fn host_linker(engine: &wasmtime::Engine) -> Result<Arc<Linker<InstanceState>>, HostError> {
    let mut linker = Linker::new(engine);
    let link = |r: wasmtime::Result<()>| {
        r.map_err(|e| HostError::Wasmtime {
            origin: "wasm-ccm".into(),
            stage: "linking host functions",
            detail: format!("{e:#}"),
        })
    };
    link(wasmtime_wasi::p2::add_to_linker_async(&mut linker))?;
    // Each capability links its own interface ([`capability::ALL`]).
    link(capability::add_to_linker(&mut linker))?;
    Ok(Arc::new(linker))
}

/// What a driver declares about itself before `init` ([`Runtime::declarations`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declarations {
    /// Its `info`.
    pub info: ProviderInfo,
    /// Its plain environment variables (`environment.plain-variables`, contract 0.2.1); `None`
    /// when it does not export `environment` or answers `none`.
    pub plain_env: Option<Vec<String>>,
}

/// The answer of one call made before `init`, or the host error that ended it.
fn declaration<T>(
    answer: Result<wasmtime::Result<T>, tokio::time::error::Elapsed>,
    slot: &Slot,
    origin: &str,
    function: &str,
    opts: &PoolOptions,
) -> Result<T, HostError> {
    match answer {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(classify(
            &e,
            origin,
            function,
            &slot.store,
            opts.call_timeout,
            opts.memory_limit,
        )),
        Err(_) => Err(HostError::Deadline {
            driver: origin.to_string(),
            function: function.into(),
            deadline: opts.call_timeout,
        }),
    }
}
