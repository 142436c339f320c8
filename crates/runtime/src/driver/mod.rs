//! A loaded driver: its compiled component, a warm pool of initialised instances, and the call
//! machinery that enforces deadlines and memory limits and replaces broken instances.
//!
//! - [`load`]: the [`Runtime`] (engine, linker, compile cache), compiling ([`Compiled`]) and
//!   loading (`info`, the capabilities' per-driver state, `init`);
//! - [`pool`]: the instance pool (`Slot`, `DriverInner`: semaphore, idle instances, recycling)
//!   and `invoke`, which runs one call in one instance;
//! - [`call`]: the typed calls (`typed_call!`, `node_set_call!`), converting at the WIT
//!   boundary (`crate::wit`), and the classification of traps;
//! - [`dynamic`]: the dynamic JSON call, a table from function name to typed call;
//! - [`compile`]: the compile a load waits for (cache first, Winch on a miss, Cranelift when
//!   Winch cannot), and [`tier_up`]: the background Cranelift build and the swap to it.
//!
//! This module holds the public types the three share: [`Driver`], its options and counters.

mod call;
mod compile;
mod dynamic;
mod load;
mod pool;
mod tier_up;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::capability::http::{HttpInterceptor, HttpLimits};
use crate::capability::log::{LogLimits, LogSink, TracingSink};
use crate::engine::Tier;
use crate::error::{CallError, HostError};
use crate::model::types::{Context, ProviderInfo};
use crate::special_addr::HostAddresses;

pub use load::{Compiled, Declarations, Runtime, RuntimeOptions};
use pool::{DriverInner, Slot};

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
    /// Shadow mode: every request that would change the cloud is refused with `denied` before
    /// it leaves, and recorded in the call's exchanges (`HttpExchange::shadowed`).
    pub shadow: bool,
    /// Log limits.
    pub log: LogLimits,
    /// Where the driver's log lines go.
    pub log_sink: Arc<dyn LogSink>,
    /// What the egress checks take for this host's own addresses: the system's interfaces in
    /// production; a fixed list lets tests prove those stay closed on any machine.
    pub host_addresses: HostAddresses,
    /// The origins whose requests carry the call's `traceparent` (`--trace-propagation-origins`);
    /// `None` sends it nowhere.
    pub trace_propagation: Option<crate::trace::TracePropagation>,
    /// The operator's credential options (`--secret-origin`, `--allow-plain-http-secrets`).
    pub secrets: crate::secrets::SecretOptions,
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
            shadow: false,
            log: LogLimits::default(),
            log_sink: Arc::new(TracingSink),
            host_addresses: HostAddresses::system(),
            trace_propagation: None,
            secrets: Default::default(),
        }
    }
}

/// Counters an operator can act on.
#[derive(Debug, Default)]
pub struct DriverStats {
    /// Export calls made.
    pub calls: AtomicU64,
    /// Calls running now (past the concurrency limit, in an instance or being given one): a
    /// gauge. A call that stays here for long is a hung driver's.
    pub in_flight: AtomicU64,
    /// Instances created (each ran `init`).
    pub instances_created: AtomicU64,
    /// Instances thrown away after a trap, deadline or memory exhaustion.
    pub instances_discarded: AtomicU64,
    /// Healthy instances retired by age, call count or memory watermark (or fresh mode), or
    /// because their Winch code was swapped for the Cranelift build.
    pub instances_recycled: AtomicU64,
    /// Calls stopped at their deadline.
    pub deadlines: AtomicU64,
    /// Calls that trapped.
    pub traps: AtomicU64,
    /// Calls that ran out of memory.
    pub out_of_memory: AtomicU64,
}

/// A loaded driver. Cheap to clone; clones share the pool.
#[derive(Clone)]
pub struct Driver {
    inner: Arc<DriverInner>,
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

    /// The plain environment variables it declared (`environment.plain-variables`, contract
    /// 0.2.1), checked at load; `None` when it declared none and got 0.2.0's environment
    /// ([`crate::plain_env`]).
    pub fn plain_env(&self) -> Option<&[String]> {
        self.inner.plain_env.as_deref()
    }

    /// Takes the declared credentials' new values from a changed cloud config (a rotated
    /// Secret): the placeholders the driver holds stay valid, so it is not re-initialised.
    /// Returns how many values changed; an error keeps the old ones. A driver that declares no
    /// secrets has nothing to rotate (it reads the file only in `init`).
    pub fn rotate_secrets(&self, config: &[u8]) -> Result<usize, String> {
        let Some(vault) = self.inner.host.http.vault() else {
            return Ok(0);
        };
        let changed = vault.rotate(config, &[])?;
        vault.teach_redactor(&self.inner.host.logger);
        Ok(changed)
    }

    /// Requests the host refused because a placeholder was where its grant does not allow it,
    /// by secret and reason (`origin`, `position`, `plain-http`).
    pub fn secret_misuse(&self) -> Vec<((String, &'static str), u64)> {
        self.inner
            .host
            .http
            .vault()
            .map(|v| v.misuse())
            .unwrap_or_default()
    }

    /// How the driver was compiled and what it exports. A description only: loading it again
    /// fails (the code lives in the driver's instances, so that Winch code is freed after the
    /// swap to Cranelift); compile the bytes again for that.
    pub fn compiled(&self) -> &Compiled {
        &self.inner.compiled
    }

    /// Which compiler's code serves new calls: Winch until the background Cranelift build of a
    /// driver loaded cold is swapped in, Cranelift after (and from the start for a cached
    /// driver or a Cranelift-only host).
    pub fn tier(&self) -> Tier {
        self.inner.code().tier
    }

    /// Follows [`Driver::tier`]: the receiver sees the swap to Cranelift when it happens (for
    /// metrics, or to wait for it without polling).
    pub fn watch_tier(&self) -> tokio::sync::watch::Receiver<Tier> {
        self.inner.tier_tx.subscribe()
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
        let code = self.inner.code();
        let started = Instant::now();
        let slot = Slot::new(
            &code.pre,
            &code.indices,
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
}
