//! Compiling and loading: the [`Runtime`] with its engine, linker and compile cache, and
//! [`Runtime::load`], which runs `info`, builds the capabilities' per-driver state and proves
//! `init` on the pool's first instance.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use wasmtime::component::{Component, InstancePre, Linker};

use super::call::classify;
use super::pool::{DriverInner, Indices, Slot};
use super::{Driver, DriverOptions, DriverStats};
use crate::cache::{AotCache, CacheOutcome};
use crate::call::CallScope;
use crate::capability::{self, DriverHost};
use crate::engine::{EngineOptions, WasmEngine};
use crate::error::{CallError, HostError};
use crate::model::types::ProviderInfo;
use crate::state::InstanceState;
use crate::surface::{self, Surface};

/// Host-wide settings.
#[derive(Debug, Clone, Default)]
pub struct RuntimeOptions {
    /// Engine settings.
    pub engine: EngineOptions,
    /// Where compiled drivers are cached; `None` compiles every time.
    pub cache_dir: Option<PathBuf>,
}

/// The host runtime: one engine, one linker, one compile cache, any number of drivers.
#[derive(Clone)]
pub struct Runtime {
    engine: WasmEngine,
    linker: Arc<Linker<InstanceState>>,
    cache: Option<AotCache>,
}

/// A compiled, inspected, not yet instantiated driver.
#[derive(Clone)]
pub struct Compiled {
    component: Component,
    /// Where it came from (a path or an OCI reference), for messages.
    pub origin: String,
    /// sha256 of the `.wasm`, hex.
    pub sha256: String,
    /// Size of the `.wasm` in bytes.
    pub size: usize,
    /// What it exports and imports.
    pub surface: Surface,
    /// Time to compile, or to load from the cache.
    pub load_time: Duration,
    /// Whether the cache was used.
    pub cache: CacheOutcome,
}

impl Runtime {
    /// Builds the engine and linker.
    pub fn new(opts: RuntimeOptions) -> Result<Self, HostError> {
        let engine = WasmEngine::new(opts.engine).map_err(|detail| HostError::Wasmtime {
            origin: "wasm-ccm".into(),
            stage: "creating the WebAssembly engine",
            detail,
        })?;
        let mut linker = Linker::new(engine.engine());
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
        Ok(Runtime {
            engine,
            linker: Arc::new(linker),
            cache: opts.cache_dir.map(AotCache::new),
        })
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
        let key = self.engine.compatibility_key();
        let digest = sha256.clone();
        let size = bytes.len();
        // Compilation is CPU-heavy (and parallel inside): keep it off the async workers.
        let compiled = tokio::task::spawn_blocking(move || match cache {
            Some(cache) => cache.load(engine.engine(), &key, &bytes, &digest),
            None => Component::new(engine.engine(), &bytes).map(|c| (c, CacheOutcome::Disabled)),
        })
        .await;
        let (component, cache) = match compiled {
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
        let load_time = started.elapsed();
        let surface = surface::inspect(origin, self.engine.engine(), &component)?;
        Ok(Compiled {
            component,
            origin: origin.into(),
            sha256,
            size,
            surface,
            load_time,
            cache,
        })
    }

    /// Links the driver's imports against the host (pre-instantiation) without running it: the
    /// last step of a load before any guest code runs.
    pub fn link(&self, compiled: &Compiled) -> Result<(), HostError> {
        let pre = self.pre(compiled)?;
        Indices::new(&pre, &compiled.surface.exports, &compiled.origin).map(|_| ())
    }

    /// Runs `info` in a throw-away instance, without `init` and without egress.
    pub async fn info(&self, compiled: &Compiled) -> Result<ProviderInfo, HostError> {
        let pre = self.pre(compiled)?;
        let indices = Indices::new(&pre, &compiled.surface.exports, &compiled.origin)?;
        let opts = DriverOptions::default();
        let host = Arc::new(DriverHost::bare(&compiled.origin, &opts)?);
        let mut slot = Slot::new(&pre, &indices, host, &opts)
            .await
            .map_err(|e| match e {
                CallError::Host(h) => h,
                CallError::Provider(p) => HostError::InitFailed {
                    driver: compiled.origin.clone(),
                    error: p,
                },
            })?;
        let deadline = Instant::now() + opts.call_timeout;
        slot.store
            .data_mut()
            .begin_call("provider.info", &CallScope::default(), deadline, None);
        let call = slot.guests.provider.call_info(&mut slot.store);
        match tokio::time::timeout(opts.call_timeout, call).await {
            Ok(Ok(info)) => Ok(info.into()),
            Ok(Err(e)) => Err(classify(
                &e,
                &compiled.origin,
                "provider.info",
                &slot,
                opts.call_timeout,
                opts.memory_limit,
            )),
            Err(_) => Err(HostError::Deadline {
                driver: compiled.origin.clone(),
                function: "provider.info".into(),
                deadline: opts.call_timeout,
            }),
        }
    }

    /// Instantiates a driver: `info`, the egress policy, `init`; the initialised instance becomes
    /// the first of the warm pool. Any failure is an error and nothing is kept.
    pub async fn load(
        &self,
        compiled: &Compiled,
        opts: DriverOptions,
    ) -> Result<Driver, HostError> {
        let info = self.info(compiled).await?;
        crate::info_rules::validate(&info).map_err(|detail| HostError::InvalidInfo {
            origin: compiled.origin.clone(),
            detail,
        })?;
        let name = info.name.clone();
        // Only variables with one of the driver's declared prefixes reach it.
        let env: Vec<(String, String)> = opts
            .env
            .iter()
            .filter(|(k, _)| {
                info.env_prefixes
                    .iter()
                    .any(|p| !p.is_empty() && k.starts_with(p.as_str()))
            })
            .cloned()
            .collect();
        let host = Arc::new(DriverHost::new(&info, &opts, &env)?);
        let pre = self.pre(compiled)?;
        let indices = Indices::new(&pre, &compiled.surface.exports, &compiled.origin)?;
        let inner = Arc::new(DriverInner {
            name,
            compiled: compiled.clone(),
            info,
            pre,
            indices,
            host,
            env,
            permits: Semaphore::new(opts.max_concurrency.max(1)),
            idle: Mutex::new(Vec::new()),
            stats: DriverStats::default(),
            opts,
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
        Ok(Driver { inner })
    }

    fn pre(&self, compiled: &Compiled) -> Result<InstancePre<InstanceState>, HostError> {
        self.linker
            .instantiate_pre(&compiled.component)
            .map_err(|e| HostError::Wasmtime {
                origin: compiled.origin.clone(),
                stage: "linking the driver's imports",
                detail: format!("{e:#}"),
            })
    }
}
