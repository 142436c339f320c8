//! What a driver is loaded with: [`DriverOptions`], which holds the input of `init`
//! ([`InitInput`]), the pool's policy ([`PoolOptions`]) and one config per capability
//! ([`crate::http::Config`], [`crate::log::Config`]). Each capability takes its own config as it
//! is; nothing here translates between them.

use std::time::Duration;

use crate::capability::{http, log};
use crate::model::types::Context;

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

/// Per-driver settings, one part per concern.
#[derive(Clone, Default)]
pub struct DriverOptions {
    /// What `init` is called with.
    pub init: InitInput,
    /// How instances are made, bounded and recycled.
    pub pool: PoolOptions,
    /// The `http` capability's config: egress grants, limits, interceptor, shadow mode, the
    /// host's addresses, trace propagation and the credential options.
    pub http: http::Config,
    /// The `log` capability's config: limits and sink.
    pub log: log::Config,
}

/// What `init` is called with (the declared credentials are sealed out of `config` and `env`
/// before it sees them).
#[derive(Clone)]
pub struct InitInput {
    /// The cluster's name, id and version.
    pub context: Context,
    /// The `--cloud-config` bytes, passed to `init` as-is.
    pub config: Vec<u8>,
    /// Candidate environment; only variables with one of the driver's declared prefixes reach it.
    pub env: Vec<(String, String)>,
}

impl Default for InitInput {
    fn default() -> Self {
        InitInput {
            context: Context {
                cluster_name: "kubernetes".into(),
                cluster_id: String::new(),
                kubernetes_version: String::new(),
            },
            config: Vec::new(),
            env: Vec::new(),
        }
    }
}

/// The instance pool's policy: deadlines, memory, concurrency and when a warm instance is
/// replaced.
#[derive(Debug, Clone)]
pub struct PoolOptions {
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
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            call_timeout: Duration::from_secs(30),
            init_timeout: Duration::from_secs(60),
            memory_limit: 64 << 20,
            max_concurrency: 4,
            mode: InstanceMode::Warm,
            max_calls_per_instance: 1000,
            max_instance_age: Duration::from_secs(30 * 60),
            memory_recycle_ratio: 0.75,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every caller that sets a few fields and takes `..Default::default()` for the rest gets
    /// these values; splitting the options into parts (issue 48) must not have changed one.
    #[test]
    fn the_defaults_are_the_ones_callers_rely_on() {
        let o = DriverOptions::default();
        assert_eq!(o.init.context.cluster_name, "kubernetes");
        assert!(
            o.init.context.cluster_id.is_empty() && o.init.context.kubernetes_version.is_empty()
        );
        assert!(o.init.config.is_empty() && o.init.env.is_empty());

        let p = &o.pool;
        assert_eq!(p.call_timeout, Duration::from_secs(30));
        assert_eq!(p.init_timeout, Duration::from_secs(60));
        assert_eq!(p.memory_limit, 64 << 20);
        assert_eq!(p.max_concurrency, 4);
        assert_eq!(p.mode, InstanceMode::Warm);
        assert_eq!(p.max_calls_per_instance, 1000);
        assert_eq!(p.max_instance_age, Duration::from_secs(30 * 60));
        assert_eq!(p.memory_recycle_ratio, 0.75);

        let h = &o.http;
        assert!(h.egress.is_none() && h.interceptor.is_none() && h.trace_propagation.is_none());
        assert!(!h.shadow);
        let (limits, default) = (
            format!("{:?}", h.limits),
            format!("{:?}", http::HttpLimits::default()),
        );
        assert_eq!(limits, default);
        let (own, system) = (
            format!("{:?}", h.host_addresses),
            format!("{:?}", crate::special_addr::HostAddresses::system()),
        );
        assert_eq!(
            own, system,
            "the egress checks refuse the system's own addresses"
        );
        assert!(h.secrets.origins.is_empty() && !h.secrets.allow_plain_http);
        assert!(
            h.request_budget.is_none(),
            "no request budget unless the operator sets one"
        );

        let (limits, default) = (
            format!("{:?}", o.log.limits),
            format!("{:?}", log::LogLimits::default()),
        );
        assert_eq!(limits, default);
    }
}
