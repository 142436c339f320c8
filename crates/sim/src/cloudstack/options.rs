//! The simulator's tunables ([`CloudstackOptions`]) and how it renders CIDR lists
//! ([`CidrSeparator`]): a leaf the model, the renderer and the seed read without naming the
//! simulator's entry module.

use std::time::Duration;

use serde::Deserialize;

/// How load-balancer rules render `cidrlist` (an open question: the CCM sends commas but splits
/// on spaces when comparing, in upstream's `checkLoadBalancerRule`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CidrSeparator {
    /// `10.0.0.0/8,192.0.2.0/24`.
    #[default]
    Comma,
    /// `10.0.0.0/8 192.0.2.0/24`.
    Space,
}

/// Tunables of a simulator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloudstackOptions {
    /// The API key requests must carry.
    pub api_key: String,
    /// The secret key signatures are made with.
    pub secret_key: String,
    /// Whether the key's account is a root admin: `listManagementServersMetrics` is available
    /// and VMs show `hostname` (the hypervisor host).
    pub admin: bool,
    /// `queryAsyncJobResult` polls until a job completes (1: the first poll sees it done; 0:
    /// jobs complete before the command answers).
    pub job_polls: u32,
    /// When set, jobs complete this long after submission instead, whatever the polls.
    pub job_duration: Option<Duration>,
    /// How load-balancer rules render `cidrlist`.
    pub cidr_separator: CidrSeparator,
    /// CloudStack's `default.page.size`: default and maximum `pagesize`.
    pub page_size_limit: usize,
    /// CloudStack's API throttling (`api.throttling.enabled`, `api.throttling.max` requests per
    /// `api.throttling.interval`): none by default, as CloudStack ships.
    pub rate_limit: Option<crate::RateLimit>,
}

impl Default for CloudstackOptions {
    /// Keys `sim-api-key` / `sim-secret-key`, a user (not admin) account, jobs done on the
    /// first poll, comma-separated CIDRs, page size 500.
    fn default() -> Self {
        CloudstackOptions {
            api_key: "sim-api-key".into(),
            secret_key: "sim-secret-key".into(),
            admin: false,
            job_polls: 1,
            job_duration: None,
            cidr_separator: CidrSeparator::Comma,
            page_size_limit: 500,
            rate_limit: None,
        }
    }
}
