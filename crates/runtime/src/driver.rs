//! A loaded driver: its compiled component, a warm pool of initialised instances, and the call
//! machinery that enforces deadlines and memory limits and replaces broken instances.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use wasmtime::component::{Component, HasSelf, Instance, InstancePre, Linker};
use wasmtime::{Store, Trap, UpdateDeadline};

use crate::bindings::types::{
    Context, EnsureResult, Ingress, InstanceMetadata, Node, ProviderError, ProviderInfo, Route,
    Service,
};
use crate::bindings::{FullDriver, instances, load_balancer, provider, routes};
use crate::cache::{AotCache, CacheOutcome};
use crate::call::{CallScope, EmptyCluster, Outcome, SharedNodes};
use crate::egress::EgressPolicy;
use crate::engine::{EngineOptions, WasmEngine};
use crate::error::{CallError, HostError};
use crate::http::{HttpCapability, HttpInterceptor, HttpLimits};
use crate::log::{DriverLogger, LogLimits, LogSink, TracingSink, is_secret_env_name};
use crate::result_caps::{Capped, cap_error};
use crate::special_addr::HostAddresses;
use crate::state::{DriverHost, InstanceState};
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

/// Whether calls reuse instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InstanceMode {
    /// Keep initialised instances between calls (the default: a CCM's calls are frequent and
    /// `init` may be costly).
    #[default]
    Warm,
    /// A new instance (and `init`) for every call: no state survives between calls. The
    /// conformance runner uses it to catch hidden state.
    Fresh,
}

/// Per-driver settings.
#[derive(Clone)]
pub struct DriverOptions {
    /// Passed to `init`.
    pub context: Context,
    /// The `--cloud-config` bytes, passed to `init` as-is.
    pub config: Vec<u8>,
    /// Candidate environment; only variables with one of the driver's declared prefixes reach it.
    pub env: Vec<(String, String)>,
    /// The operator's egress grants; `None` uses the driver's declared defaults.
    pub egress: Option<Vec<String>>,
    /// Deadline of every call except `init`.
    pub call_timeout: Duration,
    /// Deadline of `init` (big runtimes do first-call work there).
    pub init_timeout: Duration,
    /// Linear memory per instance, in bytes.
    pub memory_limit: usize,
    /// Calls in flight at once (and warm instances kept).
    pub max_concurrency: usize,
    /// Warm or fresh instances.
    pub mode: InstanceMode,
    /// A warm instance is replaced after this many calls, bounding slow leaks in a driver.
    pub max_calls_per_instance: u64,
    /// A warm instance is replaced once it is this old (state a driver keeps in memory is a
    /// cache; this bounds how stale it can get).
    pub max_instance_age: Duration,
    /// A warm instance whose linear memory passed this share of `memory_limit` is replaced
    /// before it runs out, rather than failing a later call.
    pub memory_recycle_ratio: f64,
    /// HTTP limits.
    pub http: HttpLimits,
    /// Stands between the driver's checked requests and the network (fault injection,
    /// record/replay); `None` in production.
    pub http_interceptor: Option<Arc<dyn HttpInterceptor>>,
    /// Log limits.
    pub log: LogLimits,
    /// Where the driver's log lines go.
    pub log_sink: Arc<dyn LogSink>,
    /// What the egress checks take for this host's own addresses: the system's interfaces in
    /// production; a fixed list lets tests prove those stay closed on any machine.
    pub host_addresses: HostAddresses,
}

impl Default for DriverOptions {
    fn default() -> Self {
        DriverOptions {
            context: Context {
                cluster_name: "kubernetes".into(),
                cluster_id: String::new(),
                kubernetes_version: String::new(),
            },
            config: Vec::new(),
            env: Vec::new(),
            egress: None,
            call_timeout: Duration::from_secs(30),
            init_timeout: Duration::from_secs(60),
            memory_limit: 64 << 20,
            max_concurrency: 4,
            mode: InstanceMode::Warm,
            max_calls_per_instance: 1000,
            max_instance_age: Duration::from_secs(30 * 60),
            memory_recycle_ratio: 0.75,
            http: HttpLimits::default(),
            http_interceptor: None,
            log: LogLimits::default(),
            log_sink: Arc::new(TracingSink),
            host_addresses: HostAddresses::system(),
        }
    }
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
        link(FullDriver::add_to_linker::<_, HasSelf<InstanceState>>(
            &mut linker,
            |s| s,
        ))?;
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
        let host = bare_host(&compiled.origin, &opts)?;
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
        slot.store.data_mut().begin_call(
            "provider.info",
            "",
            deadline,
            Arc::new(EmptyCluster),
            None,
        );
        let call = slot.guests.provider.call_info(&mut slot.store);
        match tokio::time::timeout(opts.call_timeout, call).await {
            Ok(Ok(info)) => Ok(info),
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
        let patterns = opts
            .egress
            .clone()
            .unwrap_or_else(|| info.default_egress.clone());
        let policy = EgressPolicy::parse(&patterns)
            .map_err(|e| {
                HostError::InvalidEgress(if opts.egress.is_some() {
                    e
                } else {
                    format!("driver {name} declares a bad default egress pattern: {e}")
                })
            })?
            .with_host_addresses(opts.host_addresses.clone());
        let http = HttpCapability::new(policy, opts.http)
            .map_err(HostError::InvalidEgress)?
            .with_interceptor(opts.http_interceptor.clone());
        let logger = Arc::new(DriverLogger::new(&name, opts.log_sink.clone(), opts.log));
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
        for (k, v) in &env {
            if is_secret_env_name(k) {
                logger.add_secret(v);
            }
        }
        for secret in crate::config_secrets::secrets_in_config(&opts.config) {
            logger.add_secret(&secret);
        }
        let host = Arc::new(DriverHost {
            name: name.clone(),
            logger,
            http: Arc::new(http),
            lowered: Default::default(),
        });
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

fn bare_host(origin: &str, opts: &DriverOptions) -> Result<Arc<DriverHost>, HostError> {
    let http = HttpCapability::new(EgressPolicy::default(), opts.http)
        .map_err(HostError::InvalidEgress)?;
    Ok(Arc::new(DriverHost {
        name: origin.to_string(),
        logger: Arc::new(DriverLogger::new(origin, opts.log_sink.clone(), opts.log)),
        http: Arc::new(http),
        lowered: Default::default(),
    }))
}

/// Lookups of each exported interface's functions, resolved once per driver.
struct Indices {
    provider: provider::GuestIndices,
    instances: Option<instances::GuestIndices>,
    load_balancer: Option<load_balancer::GuestIndices>,
    routes: Option<routes::GuestIndices>,
}

impl Indices {
    fn new(
        pre: &InstancePre<InstanceState>,
        exports: &surface::Exports,
        origin: &str,
    ) -> Result<Self, HostError> {
        let err = |e: wasmtime::Error| HostError::Wasmtime {
            origin: origin.to_string(),
            stage: "matching the driver's exports with wasm-ccm:provider",
            detail: format!("{e:#}"),
        };
        Ok(Indices {
            provider: provider::GuestIndices::new(pre).map_err(err)?,
            instances: exports
                .instances
                .then(|| instances::GuestIndices::new(pre))
                .transpose()
                .map_err(err)?,
            load_balancer: exports
                .load_balancer
                .then(|| load_balancer::GuestIndices::new(pre))
                .transpose()
                .map_err(err)?,
            routes: exports
                .routes
                .then(|| routes::GuestIndices::new(pre))
                .transpose()
                .map_err(err)?,
        })
    }
}

struct Guests {
    provider: provider::Guest,
    instances: Option<instances::Guest>,
    load_balancer: Option<load_balancer::Guest>,
    routes: Option<routes::Guest>,
}

/// One instance with its store.
struct Slot {
    store: Store<InstanceState>,
    instance: Instance,
    guests: Guests,
    calls: u64,
    born: Instant,
}

impl Slot {
    /// Instantiates without calling `init`.
    async fn new(
        pre: &InstancePre<InstanceState>,
        indices: &Indices,
        host: Arc<DriverHost>,
        opts: &DriverOptions,
    ) -> Result<Slot, CallError> {
        let origin = host.name.clone();
        let mut store = Store::new(
            pre.engine(),
            InstanceState::new(host, opts.memory_limit, Arc::new(EmptyCluster)),
        );
        store.limiter(|s| &mut s.limiter);
        // What one guest-to-host transfer (an import's arguments, an export's results) may make
        // the host allocate, copies of aliased buffers included; wasmtime's default is 128 MiB
        // whatever the driver's own limit.
        store.set_hostcall_fuel(hostcall_fuel(opts.memory_limit));
        // Checked every epoch tick: past the deadline the guest traps, otherwise it yields so a
        // busy guest never starves the tokio worker it runs on.
        store.epoch_deadline_callback(|ctx| {
            if Instant::now() >= ctx.data().call.deadline {
                Ok(UpdateDeadline::Interrupt)
            } else {
                Ok(UpdateDeadline::Yield(1))
            }
        });
        store.set_epoch_deadline(1);
        let deadline = Instant::now() + opts.init_timeout;
        store
            .data_mut()
            .begin_call("instantiate", "", deadline, Arc::new(EmptyCluster), None);
        let instance = match tokio::time::timeout(
            opts.init_timeout,
            pre.instantiate_async(&mut store),
        )
        .await
        {
            Ok(r) => r.map_err(|e| instantiate_error(&store, &origin, &e))?,
            Err(_) => {
                return Err(HostError::Deadline {
                    driver: origin,
                    function: "instantiate".into(),
                    deadline: opts.init_timeout,
                }
                .into());
            }
        };
        let guests = Guests {
            provider: indices
                .provider
                .load(&mut store, &instance)
                .map_err(|e| instantiate_error(&store, &origin, &e))?,
            instances: indices
                .instances
                .as_ref()
                .map(|i| i.load(&mut store, &instance))
                .transpose()
                .map_err(|e| instantiate_error(&store, &origin, &e))?,
            load_balancer: indices
                .load_balancer
                .as_ref()
                .map(|i| i.load(&mut store, &instance))
                .transpose()
                .map_err(|e| instantiate_error(&store, &origin, &e))?,
            routes: indices
                .routes
                .as_ref()
                .map(|i| i.load(&mut store, &instance))
                .transpose()
                .map_err(|e| instantiate_error(&store, &origin, &e))?,
        };
        Ok(Slot {
            store,
            instance,
            guests,
            calls: 0,
            born: Instant::now(),
        })
    }
}

/// Counters an operator can act on.
#[derive(Debug, Default)]
pub struct DriverStats {
    /// Export calls made.
    pub calls: AtomicU64,
    /// Instances created (each ran `init`).
    pub instances_created: AtomicU64,
    /// Instances thrown away after a trap, deadline or memory exhaustion.
    pub instances_discarded: AtomicU64,
    /// Healthy instances retired by age, call count or memory watermark (or fresh mode).
    pub instances_recycled: AtomicU64,
    /// Calls stopped at their deadline.
    pub deadlines: AtomicU64,
    /// Calls that trapped.
    pub traps: AtomicU64,
    /// Calls that ran out of memory.
    pub out_of_memory: AtomicU64,
}

struct DriverInner {
    name: String,
    compiled: Compiled,
    info: ProviderInfo,
    pre: InstancePre<InstanceState>,
    indices: Indices,
    host: Arc<DriverHost>,
    env: Vec<(String, String)>,
    opts: DriverOptions,
    permits: Semaphore,
    idle: Mutex<Vec<Slot>>,
    stats: DriverStats,
    /// Keeps the epoch ticker running while the driver lives, even if the [`Runtime`] that
    /// loaded it is dropped: without ticks, deadlines never interrupt a runaway guest.
    _engine: WasmEngine,
}

/// A loaded driver. Cheap to clone; clones share the pool.
#[derive(Clone)]
pub struct Driver {
    inner: Arc<DriverInner>,
}

type CallFuture<'a, R> =
    Pin<Box<dyn Future<Output = wasmtime::Result<Result<R, ProviderError>>> + Send + 'a>>;

impl DriverInner {
    async fn new_slot(&self) -> Result<Slot, CallError> {
        let mut slot = Slot::new(&self.pre, &self.indices, self.host.clone(), &self.opts).await?;
        self.stats.instances_created.fetch_add(1, Ordering::Relaxed);
        let deadline = Instant::now() + self.opts.init_timeout;
        slot.store.data_mut().begin_call(
            "provider.init",
            "",
            deadline,
            Arc::new(EmptyCluster),
            None,
        );
        let o = &self.opts;
        let call =
            slot.guests
                .provider
                .call_init(&mut slot.store, &o.context, &o.config, &self.env);
        match tokio::time::timeout(o.init_timeout, call).await {
            Ok(Ok(Ok(()))) => Ok(slot),
            Ok(Ok(Err(e))) => Err(CallError::Provider(cap_error(e, &|t, max| {
                self.host.logger.redact_bounded(t, max)
            }))),
            Ok(Err(e)) => Err(classify(
                &e,
                &self.name,
                "provider.init",
                &slot,
                o.init_timeout,
                o.memory_limit,
            )
            .into()),
            Err(_) => Err(HostError::Deadline {
                driver: self.name.clone(),
                function: "provider.init".into(),
                deadline: o.init_timeout,
            }
            .into()),
        }
    }

    fn take_idle(&self) -> Option<Slot> {
        self.idle.lock().ok().and_then(|mut v| v.pop())
    }

    fn put_back(&self, slot: Slot) {
        let memory_high = slot.store.data().limiter.peak as f64
            > self.opts.memory_limit as f64 * self.opts.memory_recycle_ratio;
        if self.opts.mode == InstanceMode::Fresh
            || slot.calls >= self.opts.max_calls_per_instance
            || slot.born.elapsed() >= self.opts.max_instance_age
            || memory_high
        {
            self.stats
                .instances_recycled
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Ok(mut v) = self.idle.lock()
            && v.len() < self.opts.max_concurrency.max(1)
        {
            v.push(slot);
        }
    }

    async fn invoke<R: Capped>(
        &self,
        function: &str,
        scope: &CallScope,
        f: impl for<'a> FnOnce(&'a mut Slot) -> CallFuture<'a, R>,
    ) -> Outcome<R> {
        self.invoke_with_nodes(function, scope, None, f).await
    }

    /// [`DriverInner::invoke`] for a call that hands the guest a node set (`cluster.nodes`).
    async fn invoke_with_nodes<R: Capped>(
        &self,
        function: &str,
        scope: &CallScope,
        nodes: Option<&SharedNodes>,
        f: impl for<'a> FnOnce(&'a mut Slot) -> CallFuture<'a, R>,
    ) -> Outcome<R> {
        let started = Instant::now();
        let Ok(_permit) = self.permits.acquire().await else {
            return Outcome::failed(
                HostError::UnknownFunction("driver is shutting down".into()).into(),
                started.elapsed(),
            );
        };
        self.stats.calls.fetch_add(1, Ordering::Relaxed);
        let idle = if self.opts.mode == InstanceMode::Warm {
            self.take_idle()
        } else {
            None
        };
        let mut slot = match idle {
            Some(s) => s,
            None => match self.new_slot().await {
                Ok(s) => s,
                Err(CallError::Provider(p)) => {
                    let e = HostError::InitFailed {
                        driver: self.name.clone(),
                        error: p,
                    };
                    return Outcome::failed(e.into(), started.elapsed());
                }
                Err(e) => return Outcome::failed(e, started.elapsed()),
            },
        };
        let timeout = self.opts.call_timeout;
        slot.store.data_mut().begin_call(
            function,
            &scope.object,
            Instant::now() + timeout,
            scope.cluster.clone(),
            nodes.cloned(),
        );
        slot.calls += 1;
        let result = tokio::time::timeout(timeout, f(&mut slot)).await;
        let state = slot.store.data_mut();
        let mut events = std::mem::take(&mut state.call.events);
        // Redacted when the driver recorded them, and again now: a secret the driver
        // registered later in the same call must not stay in an earlier event.
        for e in &mut events {
            self.redact(&mut e.reason);
            self.redact(&mut e.message);
        }
        let http = std::mem::take(&mut state.call.http);
        let peak_memory = state.limiter.peak;
        let result = match result {
            Ok(Ok(Ok(mut v))) => {
                self.put_back(slot);
                // The instance is sound (it returned normally); only this answer is refused.
                match v.check_caps() {
                    Ok(()) => {
                        v.redact_strings(&|s| {
                            if let std::borrow::Cow::Owned(r) = self.host.logger.redact_answer(s) {
                                *s = r;
                            }
                        });
                        Ok(v)
                    }
                    Err(detail) => Err(HostError::ResultOverCap {
                        driver: self.name.clone(),
                        function: function.into(),
                        detail,
                    }
                    .into()),
                }
            }
            Ok(Ok(Err(provider_error))) => {
                self.put_back(slot);
                Err(CallError::Provider(cap_error(provider_error, &|t, max| {
                    self.host.logger.redact_bounded(t, max)
                })))
            }
            Ok(Err(trap)) => {
                let e = classify(
                    &trap,
                    &self.name,
                    function,
                    &slot,
                    timeout,
                    self.opts.memory_limit,
                );
                self.count_failure(&e);
                Err(e.into())
            }
            Err(_elapsed) => {
                let e = HostError::Deadline {
                    driver: self.name.clone(),
                    function: function.into(),
                    deadline: timeout,
                };
                self.count_failure(&e);
                Err(e.into())
            }
        };
        Outcome {
            result,
            events,
            http,
            elapsed: started.elapsed(),
            peak_memory,
        }
    }

    /// Replaces every secret the host knows of (credential-named environment values, secrets
    /// found in the cloud config, values the driver `log.redact`ed) in `s`.
    fn redact(&self, s: &mut String) {
        if let std::borrow::Cow::Owned(r) = self.host.logger.redact(s) {
            *s = r;
        }
    }

    fn count_failure(&self, e: &HostError) {
        self.stats
            .instances_discarded
            .fetch_add(1, Ordering::Relaxed);
        let counter = match e {
            HostError::Deadline { .. } => &self.stats.deadlines,
            HostError::OutOfMemory { .. } => &self.stats.out_of_memory,
            _ => &self.stats.traps,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn require(&self, present: bool, interface: &str, function: &str) -> Result<(), CallError> {
        if present {
            Ok(())
        } else {
            Err(HostError::NotExported {
                driver: self.name.clone(),
                interface: format!("{}/{interface}", surface::PACKAGE),
                function: function.into(),
            }
            .into())
        }
    }
}

/// Turns a wasmtime error from a guest call into the host error that says what happened.
/// Why instantiating failed. The guest's start code runs during instantiation, so a trap there
/// is described like a trap in a call (cause, bounded and redacted backtrace), never by
/// wasmtime's raw text, which quotes the driver's function names unbounded.
fn instantiate_error(store: &Store<InstanceState>, origin: &str, e: &wasmtime::Error) -> HostError {
    let logger = &store.data().host.logger;
    if e.downcast_ref::<Trap>().is_some() {
        return HostError::Trap {
            driver: origin.into(),
            function: "instantiate".into(),
            detail: trap_cause(e, &store.data().last_panic()),
            backtrace: guest_backtrace(e, &|text, max| logger.redact_bounded(text, max)),
        };
    }
    HostError::Wasmtime {
        origin: origin.into(),
        stage: "instantiating",
        detail: logger.redact_bounded(&format!("{e:#}"), MAX_INSTANTIATE_DETAIL),
    }
}

/// The longest description of an instantiation failure that is not a trap (a missing export, a
/// type mismatch): host text, bounded anyway because it may quote the component.
const MAX_INSTANTIATE_DETAIL: usize = 2048;

fn classify(
    e: &wasmtime::Error,
    driver: &str,
    function: &str,
    slot: &Slot,
    timeout: Duration,
    memory_limit: usize,
) -> HostError {
    if slot.store.data().limiter.refused {
        return HostError::OutOfMemory {
            driver: driver.into(),
            function: function.into(),
            limit_mib: memory_limit >> 20,
        };
    }
    if e.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
        return HostError::Deadline {
            driver: driver.into(),
            function: function.into(),
            deadline: timeout,
        };
    }
    let logger = &slot.store.data().host.logger;
    HostError::Trap {
        driver: driver.into(),
        function: function.into(),
        detail: trap_cause(e, &slot.store.data().last_panic()),
        backtrace: guest_backtrace(e, &|text, max| logger.redact_bounded(text, max)),
    }
}

/// The guest's stack at the trap from the `WasmBacktrace` wasmtime attaches to the error (up to
/// `engine::build`'s frame limit), as hostile text made safe ([`crate::error::GuestBacktrace::new`]): function
/// names come from the driver's name section and locations from its DWARF, so they go through
/// the same redaction as every driver text. Empty when wasmtime captured none.
fn guest_backtrace(
    e: &wasmtime::Error,
    redact: &dyn Fn(&str, usize) -> String,
) -> crate::error::GuestBacktrace {
    use crate::error::{GuestBacktrace, RawFrame, RawSymbol};
    let Some(trace) = e.downcast_ref::<wasmtime::WasmBacktrace>() else {
        return GuestBacktrace::default();
    };
    let frames = trace.frames().iter().map(|f| RawFrame {
        module: f.module().name(),
        func_index: f.func_index(),
        name: f.func_name(),
        symbols: f
            .symbols()
            .iter()
            .map(|s| RawSymbol {
                name: s.name(),
                file: s.file(),
                line: s.line(),
                column: s.column(),
            })
            .collect(),
    });
    GuestBacktrace::new(frames, redact)
}

/// Bytes one guest-to-host transfer may copy: the memory limit plus 1 MiB for the canonical ABI's
/// bookkeeping. That is no more than the guest could hold itself, so every argument a driver can
/// build without aliasing reaches the host's own checks and gets their typed answer (a request
/// body over the cap is `too-large`, not a trap); only aliased copies (one buffer passed many
/// times) can run out of fuel, and they trap. The caps in [`crate::result_caps`] then bound the
/// shape of results.
pub(crate) fn hostcall_fuel(memory_limit: usize) -> usize {
    memory_limit.saturating_add(1 << 20)
}

/// What made the guest stop, in words: the trap code, `exit(N)`, or the root cause wasmtime
/// reported (hostcall fuel, a WASI limit), never the "error while executing at wasm backtrace"
/// context that heads every wasmtime error. A panic gets the guest's own panic line when it
/// printed one.
pub(crate) fn trap_cause(e: &wasmtime::Error, last_panic: &Option<String>) -> String {
    let cause = if let Some(exit) = e.downcast_ref::<wasmtime_wasi::I32Exit>() {
        format!("the driver called exit({})", exit.0)
    } else if let Some(trap) = e.downcast_ref::<Trap>() {
        match trap {
            Trap::StackOverflow => "stack overflow (unbounded recursion?)".to_string(),
            Trap::UnreachableCodeReached => match last_panic {
                Some(panic) => format!("panicked: {panic}"),
                None => "reached `unreachable` (a panic or abort in the driver)".to_string(),
            },
            // Rust and C keep big frames on a shadow stack in linear memory: its overflow is an
            // access below address 0, not a wasm stack overflow.
            Trap::MemoryOutOfBounds => {
                "out-of-bounds memory access (a stack overflow of a Rust or C driver's shadow stack, or a bad pointer)".to_string()
            }
            Trap::IntegerDivisionByZero => "integer division by zero".to_string(),
            Trap::IntegerOverflow => "integer overflow".to_string(),
            Trap::OutOfFuel => "out of fuel".to_string(),
            other => format!("wasm trap: {other}"),
        }
    } else {
        let root = e.root_cause().to_string();
        if root.contains("fuel allocated for hostcalls") {
            format!(
                "it tried to pass more than the host accepts in one call ({root}); results and arguments are bounded by --memory-limit"
            )
        } else {
            root
        }
    };
    cut_line(&cause, MAX_TRAP_DETAIL_BYTES)
}

/// Longest trap detail, in bytes: with the short backtrace and the fixed words the message stays
/// under the 1024 bytes of a Kubernetes event note.
const MAX_TRAP_DETAIL_BYTES: usize = 500;

/// The first line of `s`, its control characters replaced (the guest's panic text reaches
/// terminals and events), cut to `max` bytes on a character boundary.
fn cut_line(s: &str, max: usize) -> String {
    let line = crate::error::sanitize(s.lines().next().unwrap_or(s));
    let mut end = line.len().min(max);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line[..end].to_string()
}

/// The body of `load-balancer.ensure`/`update`: the service and the node-set record go in, and
/// the set is the call's `cluster.nodes` answer.
macro_rules! node_set_call {
    ($self:ident, $function:literal, $call:ident, $service:ident, $nodes:ident, $scope:ident) => {{
        if let Err(e) = $self.inner.require(
            $self.inner.indices.load_balancer.is_some(),
            "load-balancer",
            $function,
        ) {
            return Outcome::failed(e, Duration::ZERO);
        }
        $self.inner.host.lowered.fetch_add(
            crate::lowered::Lowered::lowered_bytes($service),
            Ordering::Relaxed,
        );
        let (service, set) = ($service.clone(), $nodes.record());
        $self
            .inner
            .invoke_with_nodes($function, $scope, Some($nodes), move |slot| {
                Box::pin(async move {
                    let Some(guest) = slot.guests.load_balancer.as_ref() else {
                        return Ok(Err(ProviderError::NotImplemented));
                    };
                    guest.$call(&mut slot.store, &service, set).await
                })
            })
            .await
    }};
}

macro_rules! typed_call {
    ($(#[$doc:meta])* $name:ident, $iface:ident, $iface_name:literal, $fn_name:literal, $call:ident, ($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        $(#[$doc])*
        pub async fn $name(&self, $($arg: $ty,)* scope: &CallScope) -> Outcome<$ret> {
            let function = concat!($iface_name, ".", $fn_name);
            if let Err(e) = self.inner.require(self.inner.indices.$iface.is_some(), $iface_name, function) {
                return Outcome::failed(e, Duration::ZERO);
            }
            let lowered = 0 $(+ crate::lowered::Lowered::lowered_bytes($arg))*;
            self.inner.host.lowered.fetch_add(lowered, Ordering::Relaxed);
            $(let $arg = $arg.to_owned();)*
            self.inner
                .invoke(function, scope, move |slot| {
                    Box::pin(async move {
                        let Some(guest) = slot.guests.$iface.as_ref() else {
                            return Ok(Err(ProviderError::NotImplemented));
                        };
                        guest.$call(&mut slot.store, $(&$arg),*).await
                    })
                })
                .await
        }
    };
}

impl Driver {
    /// The driver's name (from `info`).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// What `info` returned at load.
    pub fn info(&self) -> &ProviderInfo {
        &self.inner.info
    }

    /// The compiled component and what it exports.
    pub fn compiled(&self) -> &Compiled {
        &self.inner.compiled
    }

    /// The effective egress grants.
    pub fn egress(&self) -> Vec<String> {
        self.inner.host.http.policy().patterns()
    }

    /// Call and instance counters.
    pub fn stats(&self) -> &DriverStats {
        &self.inner.stats
    }

    /// Values the driver's log lines are redacted of now (host-found and `log.redact`ed), which
    /// the host keeps bounded.
    pub fn redaction_secrets(&self) -> usize {
        self.inner.host.logger.secret_count()
    }

    /// Bytes copied into this driver's instances so far: call arguments and the answers of
    /// `cluster` imports (string and list contents plus the canonical ABI's headers).
    pub fn lowered_bytes(&self) -> u64 {
        self.inner.host.lowered.load(Ordering::Relaxed)
    }

    /// Log lines dropped by the rate limit.
    pub fn dropped_log_lines(&self) -> u64 {
        self.inner.host.logger.dropped()
    }

    /// HTTP requests by destination host and outcome.
    pub fn http_counters(&self) -> std::collections::BTreeMap<(String, String), u64> {
        self.inner.host.http.counters().snapshot()
    }

    /// Warm instances waiting in the pool.
    pub fn idle_instances(&self) -> usize {
        self.inner.idle.lock().map(|v| v.len()).unwrap_or(0)
    }

    /// Instantiates one instance without `init` and throws it away, returning the time taken;
    /// for benchmarks of the allocator.
    pub async fn measure_instantiation(&self) -> Result<Duration, HostError> {
        let started = Instant::now();
        let slot = Slot::new(
            &self.inner.pre,
            &self.inner.indices,
            self.inner.host.clone(),
            &self.inner.opts,
        )
        .await;
        let took = started.elapsed();
        match slot {
            Ok(_) => Ok(took),
            Err(CallError::Host(h)) => Err(h),
            Err(CallError::Provider(p)) => Err(HostError::InitFailed {
                driver: self.inner.name.clone(),
                error: p,
            }),
        }
    }

    /// Calls `provider.housekeeping`.
    pub async fn housekeeping(&self, scope: &CallScope) -> Outcome<()> {
        self.inner
            .invoke("provider.housekeeping", scope, |slot| {
                Box::pin(async move {
                    slot.guests
                        .provider
                        .call_housekeeping(&mut slot.store)
                        .await
                })
            })
            .await
    }

    /// Calls `provider.info` in a pooled instance (the cached copy is [`Driver::info`]); used to
    /// measure the cost of a call that does no work.
    pub async fn info_call(&self, scope: &CallScope) -> Outcome<ProviderInfo> {
        self.inner
            .invoke("provider.info", scope, |slot| {
                Box::pin(async move {
                    slot.guests
                        .provider
                        .call_info(&mut slot.store)
                        .await
                        .map(Ok)
                })
            })
            .await
    }

    typed_call!(
        /// `instances.instance-exists`.
        instance_exists, instances, "instances", "instance-exists", call_instance_exists, (node: &Node) -> bool);
    typed_call!(
        /// `instances.instance-shutdown`.
        instance_shutdown, instances, "instances", "instance-shutdown", call_instance_shutdown, (node: &Node) -> bool);
    typed_call!(
        /// `instances.instance-metadata`.
        instance_metadata, instances, "instances", "instance-metadata", call_instance_metadata, (node: &Node) -> InstanceMetadata);
    typed_call!(
        /// `load-balancer.get`.
        load_balancer_get, load_balancer, "load-balancer", "get", call_get, (service: &Service) -> Option<Vec<Ingress>>);
    /// `load-balancer.ensure` with a shared node set: the controllers convert the node set once
    /// per change and hand every call the same [`SharedNodes`], so a driver copies it once per
    /// change (the guest fetches it with `cluster.nodes` only for a generation it lacks).
    pub async fn load_balancer_ensure_shared(
        &self,
        service: &Service,
        nodes: &SharedNodes,
        scope: &CallScope,
    ) -> Outcome<EnsureResult> {
        node_set_call!(
            self,
            "load-balancer.ensure",
            call_ensure,
            service,
            nodes,
            scope
        )
    }

    /// `load-balancer.update` with a shared node set (see
    /// [`Driver::load_balancer_ensure_shared`]).
    pub async fn load_balancer_update_shared(
        &self,
        service: &Service,
        nodes: &SharedNodes,
        scope: &CallScope,
    ) -> Outcome<()> {
        node_set_call!(
            self,
            "load-balancer.update",
            call_update,
            service,
            nodes,
            scope
        )
    }

    /// `load-balancer.ensure` with a node set of its own (a new generation each call; the
    /// controllers use [`Driver::load_balancer_ensure_shared`]).
    pub async fn load_balancer_ensure(
        &self,
        service: &Service,
        nodes: &[Node],
        scope: &CallScope,
    ) -> Outcome<EnsureResult> {
        self.load_balancer_ensure_shared(service, &SharedNodes::new(nodes), scope)
            .await
    }

    /// `load-balancer.update` with a node set of its own (see
    /// [`Driver::load_balancer_ensure`]).
    pub async fn load_balancer_update(
        &self,
        service: &Service,
        nodes: &[Node],
        scope: &CallScope,
    ) -> Outcome<()> {
        self.load_balancer_update_shared(service, &SharedNodes::new(nodes), scope)
            .await
    }
    typed_call!(
        /// `load-balancer.delete`.
        load_balancer_delete, load_balancer, "load-balancer", "delete", call_delete, (service: &Service) -> ());
    typed_call!(
        /// `routes.list`.
        routes_list, routes, "routes", "list", call_list, () -> Vec<Route>);
    typed_call!(
        /// `routes.create`.
        routes_create, routes, "routes", "create", call_create, (name_hint: &str, route: &Route) -> ());
    typed_call!(
        /// `routes.delete`.
        routes_delete, routes, "routes", "delete", call_delete, (route: &Route) -> ());

    /// `load-balancer.name` (it cannot fail in the driver; host failures still can).
    pub async fn load_balancer_name(
        &self,
        service: &Service,
        scope: &CallScope,
    ) -> Outcome<String> {
        let function = "load-balancer.name";
        if let Err(e) = self.inner.require(
            self.inner.indices.load_balancer.is_some(),
            "load-balancer",
            function,
        ) {
            return Outcome::failed(e, Duration::ZERO);
        }
        let service = service.clone();
        self.inner
            .invoke(function, scope, move |slot| {
                Box::pin(async move {
                    let Some(guest) = slot.guests.load_balancer.as_ref() else {
                        return Ok(Err(ProviderError::NotImplemented));
                    };
                    guest.call_name(&mut slot.store, &service).await.map(Ok)
                })
            })
            .await
    }

    /// Calls any exported function by name (`interface.function`) with JSON arguments, for the
    /// CLI and the conformance runner. See [`crate::json`] for the encoding.
    pub async fn call_json(
        &self,
        target: &str,
        input: serde_json::Value,
        scope: &CallScope,
    ) -> Outcome<serde_json::Value> {
        let Some((iface, function)) = target.split_once('.') else {
            let e = HostError::UnknownFunction(format!(
                "`{target}` is not interface.function; e.g. instances.instance-metadata or load-balancer.ensure"
            ));
            return Outcome::failed(e.into(), Duration::ZERO);
        };
        let exports = self.inner.compiled.surface.exports;
        let present = match iface {
            "provider" => true,
            "instances" => exports.instances,
            "load-balancer" => exports.load_balancer,
            "routes" => exports.routes,
            other => {
                let e = HostError::UnknownFunction(format!(
                    "there is no interface `{other}`; the driver exports {}",
                    exports.names().join(", ")
                ));
                return Outcome::failed(e.into(), Duration::ZERO);
            }
        };
        if let Err(e) = self.inner.require(present, iface, target) {
            return Outcome::failed(e, Duration::ZERO);
        }
        let export = format!(
            "{}/{iface}@{}",
            surface::PACKAGE,
            self.inner.compiled.surface.wit_version
        );
        // `ensure` and `update` take a node set; the caller writes the nodes themselves, which
        // become a set of their own that `cluster.nodes` returns during the call.
        let (input, nodes) = if iface == "load-balancer" && matches!(function, "ensure" | "update")
        {
            match crate::json::node_set_argument(input) {
                Ok((input, nodes)) => (input, Some(nodes)),
                Err(msg) => {
                    let e = HostError::BadArguments(format!("{target}: {msg}"));
                    return Outcome::failed(e.into(), Duration::ZERO);
                }
            }
        } else {
            (input, None)
        };
        let function = function.to_string();
        let target_owned = target.to_string();
        self.inner
            .invoke_with_nodes(target, scope, nodes.as_ref(), move |slot| {
                Box::pin(async move {
                    crate::json::call(
                        &mut slot.store,
                        &slot.instance,
                        &export,
                        &function,
                        &target_owned,
                        input,
                    )
                    .await
                })
            })
            .await
    }
}
