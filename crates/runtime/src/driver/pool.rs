//! The instance pool of a loaded driver: instances with their stores (`Slot`), the semaphore
//! that bounds calls in flight, idle instances and their recycling, and `invoke`, which runs one
//! call in one instance under its deadline.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tracing::Instrument;
use wasmtime::component::InstancePre;
use wasmtime::{Store, UpdateDeadline};

use super::compiled::Compiled;
use super::failure::{classify, instantiate_error};
use super::options::{InstanceMode, PoolOptions};
use super::stats::DriverStats;
use super::tier_up::Adopter;
use crate::bindings::{environment, instance_listing, instances, load_balancer, provider, routes};
use crate::call::{CallScope, Outcome, SharedNodes};
use crate::capability::DriverHost;
use crate::engine::{Tier, WasmEngine};
use crate::error::{CallError, HostError};
use crate::model::types::{ProviderError, ProviderInfo};
use crate::result_caps::{Capped, cap_error};
use crate::state::InstanceState;
use crate::surface;

/// Lookups of each exported interface's functions, resolved once per driver.
pub(super) struct Indices {
    pub(super) provider: provider::GuestIndices,
    pub(super) environment: Option<environment::GuestIndices>,
    pub(super) instances: Option<instances::GuestIndices>,
    pub(super) instance_listing: Option<instance_listing::GuestIndices>,
    pub(super) load_balancer: Option<load_balancer::GuestIndices>,
    pub(super) routes: Option<routes::GuestIndices>,
}

impl Indices {
    pub(super) fn new(
        pre: &InstancePre<InstanceState>,
        surface: &surface::Surface,
        origin: &str,
    ) -> Result<Self, HostError> {
        let exports = &surface.exports;
        let err = |e: wasmtime::Error| HostError::Wasmtime {
            origin: origin.to_string(),
            stage: "matching the driver's exports with wasm-ccm:provider",
            detail: format!("{e:#}"),
        };
        Ok(Indices {
            provider: provider::GuestIndices::new(pre).map_err(err)?,
            environment: surface
                .environment
                .then(|| environment::GuestIndices::new(pre))
                .transpose()
                .map_err(err)?,
            instances: exports
                .instances
                .then(|| instances::GuestIndices::new(pre))
                .transpose()
                .map_err(err)?,
            instance_listing: surface
                .instance_listing
                .then(|| instance_listing::GuestIndices::new(pre))
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

pub(super) struct Guests {
    pub(super) provider: provider::Guest,
    pub(super) environment: Option<environment::Guest>,
    pub(super) instances: Option<instances::Guest>,
    pub(super) instance_listing: Option<instance_listing::Guest>,
    pub(super) load_balancer: Option<load_balancer::Guest>,
    pub(super) routes: Option<routes::Guest>,
}

/// One instance with its store.
pub(super) struct Slot {
    pub(super) store: Store<InstanceState>,
    pub(super) guests: Guests,
    pub(super) calls: u64,
    pub(super) born: Instant,
    /// The [`Code::generation`] it was made from: an instance of code that has been swapped out
    /// finishes its call and is dropped.
    pub(super) generation: u64,
}

/// The code new instances are made from: one compiled build, linked.
pub(super) struct Code {
    pub(super) pre: InstancePre<InstanceState>,
    pub(super) indices: Indices,
    pub(super) tier: Tier,
    /// Starts at 0 and grows by one at each swap.
    pub(super) generation: u64,
}

impl Slot {
    /// Instantiates without calling `init`.
    pub(super) async fn new(
        pre: &InstancePre<InstanceState>,
        indices: &Indices,
        host: Arc<DriverHost>,
        opts: &PoolOptions,
    ) -> Result<Slot, CallError> {
        let origin = host.name.clone();
        let mut store = Store::new(pre.engine(), InstanceState::new(host, opts.memory_limit));
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
            .begin_call("instantiate", &CallScope::default(), deadline, None);
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
            environment: indices
                .environment
                .as_ref()
                .map(|i| i.load(&mut store, &instance))
                .transpose()
                .map_err(|e| instantiate_error(&store, &origin, &e))?,
            instances: indices
                .instances
                .as_ref()
                .map(|i| i.load(&mut store, &instance))
                .transpose()
                .map_err(|e| instantiate_error(&store, &origin, &e))?,
            instance_listing: indices
                .instance_listing
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
            guests,
            calls: 0,
            born: Instant::now(),
            generation: 0,
        })
    }
}

pub(super) struct DriverInner {
    pub(super) name: String,
    pub(super) compiled: Compiled,
    pub(super) info: ProviderInfo,
    /// Its declared plain environment variables, `None` when it declared none.
    pub(super) plain_env: Option<Vec<String>>,
    /// What new instances are made from; replaced once, by [`DriverInner::adopt`], when the
    /// Cranelift build of a Winch-compiled driver is ready.
    pub(super) code: Mutex<Arc<Code>>,
    /// `code`'s generation, readable without the lock (checked when an instance goes back).
    pub(super) generation: AtomicU64,
    /// The tier that serves new calls, for whoever watches (`Driver::watch_tier`).
    pub(super) tier_tx: tokio::sync::watch::Sender<Tier>,
    pub(super) host: Arc<DriverHost>,
    /// The cloud config `init` gets: placeholders in place of the declared credentials.
    pub(super) config: Vec<u8>,
    /// The environment `init` gets, likewise.
    pub(super) env: Vec<(String, String)>,
    /// The cluster's context, which every `init` gets.
    pub(super) context: crate::model::types::Context,
    /// The pool's policy.
    pub(super) pool: PoolOptions,
    pub(super) permits: Semaphore,
    pub(super) idle: Mutex<Vec<Slot>>,
    pub(super) stats: DriverStats,
    /// Keeps the epoch ticker running while the driver lives, even if the [`Runtime`] that
    /// loaded it is dropped: without ticks, deadlines never interrupt a runaway guest.
    pub(super) _engine: WasmEngine,
}

pub(super) type CallFuture<'a, R> =
    Pin<Box<dyn Future<Output = wasmtime::Result<Result<R, ProviderError>>> + Send + 'a>>;

impl Adopter for DriverInner {
    /// Swaps in the Cranelift build (`pre`): new instances come from it; instances of the old
    /// code finish the calls they are in and are dropped rather than pooled, so no call is cut
    /// and, once they are gone, every call runs Cranelift code. `compile` is how long the
    /// background compile took, for the log line.
    fn adopt(&self, pre: InstancePre<InstanceState>, compile: Duration) {
        let indices = match Indices::new(&pre, &self.compiled.surface, &self.name) {
            Ok(i) => i,
            Err(e) => {
                tracing::warn!(driver = %self.name, "cannot use the Cranelift build ({e}); staying on Winch code");
                return;
            }
        };
        let generation = {
            let mut code = match self.code.lock() {
                Ok(c) => c,
                Err(poisoned) => poisoned.into_inner(),
            };
            if code.tier == Tier::Cranelift {
                return;
            }
            let generation = code.generation + 1;
            *code = Arc::new(Code {
                pre,
                indices,
                tier: Tier::Cranelift,
                generation,
            });
            generation
        };
        // Stored before the idle list is emptied, and `put_back` compares under the idle lock:
        // an old instance returned at the same moment is either seen as old or emptied here.
        self.generation.store(generation, Ordering::Release);
        let retired = match self.idle.lock() {
            Ok(mut idle) => std::mem::take(&mut *idle),
            Err(_) => Vec::new(),
        };
        self.stats
            .instances_recycled
            .fetch_add(retired.len() as u64, Ordering::Relaxed);
        drop(retired);
        self.tier_tx.send_replace(Tier::Cranelift);
        tracing::info!(
            driver = %self.name,
            tier = Tier::Cranelift.name(),
            background_compile_ms = super::tier_up::millis(compile),
            "driver now served by its Cranelift build; its Winch instances retire as their calls finish"
        );
    }
}

impl DriverInner {
    /// The code new instances are made from now.
    pub(super) fn code(&self) -> Arc<Code> {
        match self.code.lock() {
            Ok(c) => c.clone(),
            // Only an assignment happens under this lock, so a poisoned value is still whole.
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub(super) async fn new_slot(&self) -> Result<Slot, CallError> {
        let code = self.code();
        let mut slot = Slot::new(&code.pre, &code.indices, self.host.clone(), &self.pool).await?;
        slot.generation = code.generation;
        self.stats.instances_created.fetch_add(1, Ordering::Relaxed);
        let deadline = Instant::now() + self.pool.init_timeout;
        slot.store
            .data_mut()
            .begin_call("provider.init", &CallScope::default(), deadline, None);
        let o = &self.pool;
        let context = self.context.clone().into();
        let call =
            slot.guests
                .provider
                .call_init(&mut slot.store, &context, &self.config, &self.env);
        match tokio::time::timeout(o.init_timeout, call).await {
            Ok(Ok(Ok(()))) => Ok(slot),
            Ok(Ok(Err(e))) => Err(CallError::Provider(cap_error(e.into(), &|t, max| {
                self.host.logger.redact_bounded(t, max)
            }))),
            Ok(Err(e)) => Err(classify(
                &e,
                &self.name,
                "provider.init",
                &slot.store,
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

    pub(super) fn take_idle(&self) -> Option<Slot> {
        self.idle.lock().ok().and_then(|mut v| v.pop())
    }

    pub(super) fn put_back(&self, slot: Slot) {
        let memory_high = slot.store.data().limiter.peak as f64
            > self.pool.memory_limit as f64 * self.pool.memory_recycle_ratio;
        if self.pool.mode == InstanceMode::Fresh
            || slot.calls >= self.pool.max_calls_per_instance
            || slot.born.elapsed() >= self.pool.max_instance_age
            || memory_high
        {
            self.stats
                .instances_recycled
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Ok(mut v) = self.idle.lock() {
            if slot.generation != self.generation.load(Ordering::Acquire) {
                // Code that has been swapped out: its last call is done.
                self.stats
                    .instances_recycled
                    .fetch_add(1, Ordering::Relaxed);
            } else if v.len() < self.pool.max_concurrency.max(1) {
                v.push(slot);
            }
        }
    }

    pub(super) async fn invoke<R: Capped>(
        &self,
        function: &str,
        scope: &CallScope,
        f: impl for<'a> FnOnce(&'a mut Slot) -> CallFuture<'a, R>,
    ) -> Outcome<R> {
        self.invoke_with_nodes(function, scope, None, f).await
    }

    /// [`DriverInner::invoke`] for a call that hands the guest a node set (`cluster.nodes`).
    ///
    /// The call runs in a `driver.call` span (see [`crate::trace`]), the parent of the call's
    /// `http.client` spans; its outcome is the WIT error case or the host error's kind, never a
    /// message (messages quote the driver).
    pub(super) async fn invoke_with_nodes<R: Capped>(
        &self,
        function: &str,
        scope: &CallScope,
        nodes: Option<&SharedNodes>,
        f: impl for<'a> FnOnce(&'a mut Slot) -> CallFuture<'a, R>,
    ) -> Outcome<R> {
        let span = tracing::trace_span!(
            target: crate::trace::TARGET,
            "driver.call",
            otel.kind = "internal",
            wasm_ccm.driver = %self.name,
            wasm_ccm.function = function,
            wasm_ccm.outcome = tracing::field::Empty,
            "error.type" = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        if span.is_disabled() {
            return self.run_call(function, scope, nodes, f).await;
        }
        let outcome = self
            .run_call(function, scope, nodes, f)
            .instrument(span.clone())
            .await;
        let case = match &outcome.result {
            Ok(_) => "ok",
            Err(CallError::Provider(p)) => p.case(),
            Err(CallError::Host(h)) => h.kind(),
        };
        span.record("wasm_ccm.outcome", case);
        if outcome.result.is_err() {
            span.record("error.type", case);
            span.record("otel.status_code", "ERROR");
        }
        outcome
    }

    async fn run_call<R: Capped>(
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
        // Counted down however the call ends, a cancelled future included.
        let _in_flight = InFlight::enter(&self.stats.in_flight);
        let idle = if self.pool.mode == InstanceMode::Warm {
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
        let timeout = self.pool.call_timeout;
        slot.store
            .data_mut()
            .begin_call(function, scope, Instant::now() + timeout, nodes.cloned());
        slot.calls += 1;
        let result = tokio::time::timeout(timeout, f(&mut slot)).await;
        let state = slot.store.data_mut();
        let mut events = std::mem::take(&mut state.call.cluster.events);
        // Redacted when the driver recorded them, and again now: a secret the driver
        // registered later in the same call must not stay in an earlier event.
        for e in &mut events {
            self.redact(&mut e.reason);
            self.redact(&mut e.message);
        }
        let http = std::mem::take(&mut state.call.http.exchanges);
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
                    &slot.store,
                    timeout,
                    self.pool.memory_limit,
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

    pub(super) fn require(
        &self,
        present: bool,
        interface: &str,
        function: &str,
    ) -> Result<(), CallError> {
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

/// Bytes one guest-to-host transfer may copy: the memory limit plus 1 MiB for the canonical ABI's
/// bookkeeping. That is no more than the guest could hold itself, so every argument a driver can
/// build without aliasing reaches the host's own checks and gets their typed answer (a request
/// body over the cap is `too-large`, not a trap); only aliased copies (one buffer passed many
/// times) can run out of fuel, and they trap. The caps in [`crate::result_caps`] then bound the
/// shape of results.
fn hostcall_fuel(memory_limit: usize) -> usize {
    memory_limit.saturating_add(1 << 20)
}

/// One call counted in [`DriverStats::in_flight`] while it lives.
struct InFlight<'a>(&'a AtomicU64);

impl<'a> InFlight<'a> {
    fn enter(gauge: &'a AtomicU64) -> Self {
        gauge.fetch_add(1, Ordering::Relaxed);
        InFlight(gauge)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
