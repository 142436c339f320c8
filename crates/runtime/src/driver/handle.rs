//! [`Driver`], the handle the rest of the host holds, and its counters ([`DriverStats`]). The
//! calls are in `call.rs`, the pool behind the handle in `pool.rs`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::compiled::Compiled;
use super::pool::{DriverInner, Slot};
use super::stats::DriverStats;
use crate::engine::Tier;
use crate::error::{CallError, HostError};
use crate::model::types::ProviderInfo;

/// A loaded driver. Cheap to clone; clones share the pool.
#[derive(Clone)]
pub struct Driver {
    pub(super) inner: Arc<DriverInner>,
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
    /// (`crate::plain_env`).
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

    /// Warnings about broad grants in its effective egress (the operator's or its defaults), as
    /// `inspect` shows them ([`crate::egress::EgressPolicy::warnings`]).
    pub fn egress_warnings(&self) -> Vec<String> {
        self.inner.host.http.policy().warnings()
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

    /// What the driver's cloud request budget counted (requests by outcome, time waited), when
    /// the operator gave it one (`--cloud-request-rate`).
    pub fn cloud_requests(&self) -> Option<crate::http::budget::BudgetCounts> {
        self.inner.host.http.request_budget().map(|b| b.counts())
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
            &self.inner.pool,
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
