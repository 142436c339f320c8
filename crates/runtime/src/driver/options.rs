//! What a driver is loaded with: [`DriverOptions`] (the init input, the pool policy and the
//! capabilities' settings) and what each capability takes of it.

use std::sync::Arc;
use std::time::Duration;

use crate::capability::http::{HttpInterceptor, HttpLimits};
use crate::capability::log::{LogLimits, LogSink, TracingSink};
use crate::model::types::Context;
use crate::special_addr::HostAddresses;

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
    pub egress: Option<crate::egress::EgressPolicy>,
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

impl DriverOptions {
    /// What the `http` capability takes of these options.
    pub(crate) fn http_config(&self) -> crate::capability::http::Config {
        crate::capability::http::Config {
            egress: self.egress.clone(),
            limits: self.http,
            interceptor: self.http_interceptor.clone(),
            shadow: self.shadow,
            host_addresses: self.host_addresses.clone(),
            trace_propagation: self.trace_propagation.clone(),
        }
    }

    /// What the `log` capability takes of these options.
    pub(crate) fn log_config(&self) -> crate::capability::log::Config {
        crate::capability::log::Config {
            limits: self.log,
            sink: self.log_sink.clone(),
        }
    }
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
