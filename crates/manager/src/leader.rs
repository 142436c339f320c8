//! Leader election on a coordination.k8s.io Lease with client-go's algorithm and field
//! semantics, so that wasm-ccm and a Go cloud-controller-manager can hand the lease to each other
//! during a migration.
//!
//! Expiry is judged by the time *this* process last saw the lease record change, never by the
//! timestamps in it, which makes the algorithm tolerant of clock skew between holders.
//!
//! # Renewal budget
//!
//! As client-go's `renew()` (`k8s.io/client-go/tools/leaderelection`): once the lease is taken,
//! the holder renews in *rounds*, the first at once and each next one a retry period after the
//! last one succeeded. A round gets the whole renew deadline, counted from its own start, and
//! tries every retry period within it (from each attempt's start, as `PollImmediateUntil`); a
//! round that does not succeed in time, or that finds another holder, loses leadership. The
//! holder's attempt is one PUT over the Lease it last saw (client-go's optimistic update, its
//! resourceVersion guarding it), falling back to a GET and a PUT. So a leader keeps its lease
//! while each lease request takes a good part of the renew deadline; the earlier code gave a
//! round only what was left of the deadline since the previous renewal and lost the lease when
//! `2 × (GET + PUT) + retry period` exceeded it (review of 2026-11-28, §2).
//!
//! # The fence
//!
//! client-go's rounds count from their own start, so under latency a round may end after the
//! lease it renews could have passed; here leadership also ends before that, whatever is left
//! of the round. Another replica takes the lease only after it has seen our last record
//! unchanged for the record's `leaseDurationSeconds` on its clock, and it can have seen that
//! record only after our write reached the apiserver: after the attempt that wrote it
//! *started*, on our monotonic clock. The write may have been applied at any moment between
//! sending it and its answer (latency before or after the apiserver), so we count from the
//! start, never from the answer: the lease is ours until the start of the last successful
//! attempt plus the lease, the shorter of the configured duration and the whole seconds written
//! in the record. [`LeaderElector::hold`] returns a twentieth of the lease before that instant
//! ([`lead_until`]); `run` then cancels the controllers and exits at once
//! without draining, so no controller write is sent after the lease may have passed. The
//! twentieth covers a late timer, the step-down itself and rate differences between the two
//! monotonic clocks. It cannot cover a write the apiserver itself holds past that instant
//! (Kubernetes has no fencing tokens; upstream has the same limit). [`LeaderElector::acquire`]
//! likewise hands over leadership only when the attempt that took the lease was quicker than a
//! renewal round; a slower one is renewed first.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::sync::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use wasm_ccm_controllers::Metrics;

/// Lease settings (`--leader-elect-*`); upstream's defaults are noted per field.
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    /// Namespace of the Lease (`kube-system`).
    pub namespace: String,
    /// Name of the Lease (`cloud-controller-manager`).
    pub name: String,
    /// This candidate's holder identity, unique per process (see [`default_identity`]).
    pub identity: String,
    /// How long a lease is valid after its last renewal, as seen by the others (15 s).
    pub lease_duration: Duration,
    /// How long one renewal round may keep trying before leadership is given up (10 s); the
    /// lease's fence (module documentation) may end a round sooner.
    pub renew_deadline: Duration,
    /// Pause between attempts to acquire or renew (2 s).
    pub retry_period: Duration,
}

/// `hostname_<random UUID>`, as client-go-based controller managers name themselves.
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "wasm-ccm".into());
    let b: [u8; 16] = rand::random();
    format!(
        "{host}_{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
        u16::from_be_bytes([b[4], b[5]]),
        u16::from_be_bytes([b[6], b[7]]) & 0x0fff,
        (u16::from_be_bytes([b[8], b[9]]) & 0x3fff) | 0x8000,
        u64::from_be_bytes([0, 0, b[10], b[11], b[12], b[13], b[14], b[15]]),
    )
}

/// The part of the lease that client-go compares to notice a change.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    holder: String,
    duration: i32,
    acquire: Option<String>,
    renew: Option<String>,
    transitions: i32,
}

impl Record {
    fn of(spec: &LeaseSpec) -> Record {
        Record {
            holder: spec.holder_identity.clone().unwrap_or_default(),
            duration: spec.lease_duration_seconds.unwrap_or(0),
            acquire: spec.acquire_time.as_ref().map(|t| t.0.to_string()),
            renew: spec.renew_time.as_ref().map(|t| t.0.to_string()),
            transitions: spec.lease_transitions.unwrap_or(0),
        }
    }

    /// How long the others wait, after they saw this record change, before taking the lease.
    fn lasts(&self) -> Duration {
        Duration::from_secs(u64::try_from(self.duration.max(0)).unwrap_or(0))
    }
}

/// How long a lease written with `lease_duration` stays the writer's after the write: the
/// duration in the record (`leaseDurationSeconds`, whole seconds, which the others go by) or
/// the configured one, whichever is shorter.
fn lease_lasts(lease_duration: Duration) -> Duration {
    let written = Duration::from_secs(u64::from(
        LeaderElector::secs(lease_duration).unsigned_abs(),
    ));
    written.min(lease_duration)
}

/// The last instant a holder may lead on a lease written with `lease_duration` by an attempt
/// that started at `renewed`: a twentieth of the lease before it may expire for the others
/// (module documentation, "The fence").
fn lead_until(renewed: Instant, lease_duration: Duration) -> Instant {
    let lasts = lease_lasts(lease_duration);
    renewed + lasts - lasts / 20
}

/// client-go's `JitterFactor` for a candidate's attempts.
const JITTER_FACTOR: f64 = 1.2;

/// How long a candidate waits after an attempt that did not take the lease, as client-go's
/// `acquire` (`wait.JitterUntil` over the retry period with `JitterFactor`, sliding): the retry
/// period plus `unit` × 1.2 of it (`wait.Jitter`: `d + rand·1.2·d`), so between 1 and 2.2 retry
/// periods for `unit` in [0, 1).
fn acquire_retry_wait(retry_period: Duration, unit: f64) -> Duration {
    retry_period + retry_period.mul_f64(JITTER_FACTOR * unit)
}

/// The lease as this process last saw it.
struct Observed {
    record: Record,
    /// When this process saw `record` change (client-go's `observedTime`).
    at: Instant,
    /// The Lease object as the apiserver last answered it, with its resourceVersion: what the
    /// holder's optimistic renewal writes over.
    lease: Lease,
}

/// What one attempt to take or renew the lease found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// This process holds the lease: its write was accepted.
    Holding,
    /// Another candidate holds the lease and, by when this process saw it change, it has not
    /// expired.
    HeldBy(String),
    /// Someone wrote the lease between this attempt's read and its write (409 Conflict): the
    /// next attempt reads it again.
    Conflict,
}

/// How a renewal round ended.
enum Round {
    /// Renewed by an attempt that started at this instant.
    Renewed(Instant),
    /// Leadership is lost (the reason is logged).
    Lost,
    /// `cancel` fired.
    Cancelled,
}

/// One participant in the election.
pub(crate) struct LeaderElector {
    api: Api<Lease>,
    config: LeaderConfig,
    observed: Mutex<Option<Observed>>,
    /// Where `leader_election_slowpath_total` is counted (none in tests that do not look).
    metrics: Option<Arc<Metrics>>,
}

impl LeaderElector {
    /// An elector for `config` over `client`.
    pub(crate) fn new(client: Client, config: LeaderConfig) -> Self {
        LeaderElector {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: Mutex::new(None),
            metrics: None,
        }
    }

    /// Counts the holder's slow-path renewals in `metrics`.
    pub(crate) fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The identity this process holds the lease under.
    pub(crate) fn identity(&self) -> &str {
        &self.config.identity
    }

    /// The Lease's name (`--leader-elect-resource-name`, or the shadow's): the `name` label of
    /// the leader-election metrics, as client-go's.
    pub(crate) fn lease_name(&self) -> &str {
        &self.config.name
    }

    fn secs(d: Duration) -> i32 {
        i32::try_from(d.as_secs()).unwrap_or(i32::MAX).max(1)
    }

    /// How long the lease this process writes stays its own after a write: see [`lease_lasts`].
    fn lease_lasts(&self) -> Duration {
        lease_lasts(self.config.lease_duration)
    }

    /// The last instant this process may lead on a lease whose last successful attempt
    /// started at `renewed`: see [`lead_until`].
    fn lead_until(&self, renewed: Instant) -> Instant {
        lead_until(renewed, self.config.lease_duration)
    }

    /// Records the lease the apiserver answered; `observed_at` is kept when the record did not
    /// change (client-go's rule: expiry counts from when this process saw the record change).
    async fn observe(&self, lease: Lease) {
        let record = Record::of(&lease.spec.clone().unwrap_or_default());
        let mut observed = self.observed.lock().await;
        let at = match observed.as_ref() {
            Some(o) if o.record == record => o.at,
            _ => Instant::now(),
        };
        *observed = Some(Observed { record, at, lease });
    }

    /// The holder's fast path (client-go's "update optimistically"): while this process holds
    /// the lease and, by its own observation, the lease has not expired, one PUT over the Lease
    /// it last saw renews it; its resourceVersion makes the apiserver refuse the write (409) if
    /// anyone wrote the lease since. `None` when the slow path must read the lease first.
    async fn optimistic_renewal(&self, now: &MicroTime) -> Option<Lease> {
        let observed = self.observed.lock().await;
        let o = observed.as_ref()?;
        if o.record.holder != self.config.identity || o.at + o.record.lasts() <= Instant::now() {
            return None;
        }
        let mut lease = o.lease.clone();
        let old = lease.spec.clone().unwrap_or_default();
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(Self::secs(self.config.lease_duration)),
            acquire_time: old.acquire_time,
            renew_time: Some(now.clone()),
            lease_transitions: Some(o.record.transitions),
            ..Default::default()
        });
        Some(lease)
    }

    /// One attempt to take or renew the lease: the holder's optimistic PUT first, then (or
    /// for a candidate) a GET and a PUT, or a POST when there is no Lease yet.
    pub(crate) async fn try_acquire_or_renew(&self) -> Result<Attempt, kube::Error> {
        let now = MicroTime(jiff::Timestamp::now());
        let pp = PostParams::default();
        if let Some(lease) = self.optimistic_renewal(&now).await {
            match self.api.replace(&self.config.name, &pp, &lease).await {
                Ok(written) => {
                    self.observe(written).await;
                    return Ok(Attempt::Holding);
                }
                // As client-go: any failure falls back to reading the lease.
                Err(e) => tracing::debug!(
                    error = %e,
                    "leader election: the optimistic renewal was refused; reading the lease"
                ),
            }
        }
        let mine = LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(Self::secs(self.config.lease_duration)),
            acquire_time: Some(now.clone()),
            renew_time: Some(now.clone()),
            lease_transitions: Some(0),
            ..Default::default()
        };
        let existing = match self.api.get_opt(&self.config.name).await? {
            Some(lease) => lease,
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.config.name.clone()),
                        namespace: Some(self.config.namespace.clone()),
                        ..Default::default()
                    },
                    spec: Some(mine),
                };
                return match self.api.create(&pp, &lease).await {
                    Ok(written) => {
                        self.observe(written).await;
                        Ok(Attempt::Holding)
                    }
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::Conflict),
                    Err(e) => Err(e),
                };
            }
        };
        self.observe(existing.clone()).await;
        let spec = existing.spec.clone().unwrap_or_default();
        let record = Record::of(&spec);
        let observed_at = self
            .observed
            .lock()
            .await
            .as_ref()
            .map_or_else(Instant::now, |o| o.at);
        let held_by_me = record.holder == self.config.identity;
        if !record.holder.is_empty() && !held_by_me && observed_at + record.lasts() > Instant::now()
        {
            return Ok(Attempt::HeldBy(record.holder));
        }
        let mut next = mine;
        if held_by_me {
            next.acquire_time = spec.acquire_time.clone();
            next.lease_transitions = Some(record.transitions);
            // client-go's `slowpathExercised`: the holder renews through a read (its optimistic
            // PUT was refused, or it had no fresh record to put), labelled with the lease's name.
            if let Some(m) = &self.metrics {
                m.inc(
                    "leader_election_slowpath_total",
                    &[("name", &self.config.name)],
                );
            }
        } else {
            next.lease_transitions = Some(record.transitions + 1);
        }
        let mut lease = existing;
        lease.spec = Some(next);
        match self.api.replace(&self.config.name, &pp, &lease).await {
            Ok(written) => {
                self.observe(written).await;
                Ok(Attempt::Holding)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::Conflict),
            Err(e) => Err(e),
        }
    }

    /// Waits until this process holds the lease with enough of it left to lead; returns when
    /// the successful attempt started (from which [`Self::hold`] counts), or `None` on
    /// `cancel`.
    pub(crate) async fn acquire(&self, cancel: &CancellationToken) -> Option<Instant> {
        loop {
            let started = Instant::now();
            let outcome = tokio::select! {
                _ = cancel.cancelled() => return None,
                outcome = self.try_acquire_or_renew() => outcome,
            };
            match outcome {
                // An attempt slower than a whole renewal round (a slow apiserver) leaves too
                // little of the lease it wrote to lead on: the next attempt renews it (the
                // holder's one PUT) before the controllers start.
                Ok(Attempt::Holding)
                    if started.elapsed() < self.config.renew_deadline
                        && Instant::now() < self.lead_until(started) =>
                {
                    return Some(started);
                }
                Ok(Attempt::Holding) => tracing::warn!(
                    took = ?started.elapsed(),
                    renew_deadline = ?self.config.renew_deadline,
                    "leader election: took the lease, but the attempt outlasted the renew deadline; renewing it before leading (the apiserver answers slowly)"
                ),
                Ok(Attempt::HeldBy(_) | Attempt::Conflict) => {}
                Err(e) => tracing::warn!(
                    error = %e,
                    "leader election: could not read or write the lease; retrying (check the apiserver and the RBAC rules on leases)"
                ),
            }
            let wait = acquire_retry_wait(self.config.retry_period, rand::random_range(0.0..1.0));
            tokio::select! {
                _ = cancel.cancelled() => return None,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Leads on the lease [`Self::acquire`] took at `acquired` and keeps renewing it, as
    /// client-go's `renew()`: a round at once, then one a retry period after each round that
    /// succeeded (sooner when the last renewal was so slow that one as slow started a retry
    /// period later would end past the fence). Returns `true` when leadership is lost (a round failed, another holder took
    /// the lease, or the lease may expire for the others before a renewal succeeds: module
    /// documentation, "The fence"), `false` on `cancel`. Once it returns, the caller must send
    /// no further write.
    pub(crate) async fn hold(&self, cancel: &CancellationToken, acquired: Instant) -> bool {
        let mut renewed = acquired;
        loop {
            match self.renewal_round(cancel, renewed).await {
                Round::Renewed(at) => renewed = at,
                Round::Lost => return true,
                Round::Cancelled => return false,
            }
            // The next round a retry period after this one (client-go's `wait.Until`), but
            // early enough that an attempt as slow as the last one still ends before the fence.
            let done = Instant::now();
            let took = done.saturating_duration_since(renewed);
            let next = (done + self.config.retry_period)
                .min(self.lead_until(renewed).checked_sub(took).unwrap_or(done))
                .max(done);
            tokio::select! {
                _ = cancel.cancelled() => return false,
                _ = tokio::time::sleep_until(next) => {}
            }
        }
    }

    /// One renewal round: attempts every retry period (from each attempt's start, client-go's
    /// `PollImmediateUntil`) until one succeeds, within the renew deadline from the round's
    /// start and never past [`Self::lead_until`] of the last successful attempt. An attempt
    /// still running then is abandoned: its PUT carries the resourceVersion it read, so if it
    /// still reaches the apiserver it cannot overwrite a lease another replica took since.
    async fn renewal_round(&self, cancel: &CancellationToken, renewed: Instant) -> Round {
        let round_ends = Instant::now() + self.config.renew_deadline;
        let lead_until = self.lead_until(renewed);
        let stop = round_ends.min(lead_until);
        loop {
            let started = Instant::now();
            if started >= stop {
                self.round_failed(renewed, round_ends, lead_until);
                return Round::Lost;
            }
            let outcome = tokio::select! {
                _ = cancel.cancelled() => return Round::Cancelled,
                outcome = tokio::time::timeout_at(stop, self.try_acquire_or_renew()) => outcome,
            };
            match outcome {
                Ok(Ok(Attempt::Holding)) => return Round::Renewed(started),
                Ok(Ok(Attempt::HeldBy(holder))) => {
                    tracing::error!(identity = %self.config.identity, %holder, "leader election: another holder took the lease");
                    return Round::Lost;
                }
                Ok(Ok(Attempt::Conflict)) => tracing::warn!(
                    "leader election: the lease changed between reading and renewing it; reading it again"
                ),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "leader election: a renewal failed; retrying within the renew deadline")
                }
                Err(_) => {
                    self.round_failed(renewed, round_ends, lead_until);
                    return Round::Lost;
                }
            }
            tokio::select! {
                _ = cancel.cancelled() => return Round::Cancelled,
                _ = tokio::time::sleep_until((started + self.config.retry_period).min(stop)) => {}
            }
        }
    }

    /// Logs why a round that ran out of time lost leadership.
    fn round_failed(&self, renewed: Instant, round_ends: Instant, lead_until: Instant) {
        if lead_until <= round_ends {
            self.stepping_down(renewed);
        } else {
            tracing::error!(
                renew_deadline = ?self.config.renew_deadline,
                "leader election: no renewal succeeded within the renew deadline; stepping down (check the apiserver's health and latency)"
            );
        }
    }

    fn stepping_down(&self, renewed: Instant) {
        tracing::error!(
            since_last_renewal = ?renewed.elapsed(),
            lease = ?self.lease_lasts(),
            "leader election: the lease may expire for the other replicas before a renewal succeeds; stepping down before it can (the apiserver answers lease requests too slowly for this lease duration: check its latency, or raise --leader-elect-lease-duration)"
        );
    }

    /// Gives the lease up on a clean shutdown, so a standby takes over without waiting for it
    /// to expire (client-go's ReleaseOnCancel, bounded like it by the renew deadline).
    pub(crate) async fn release(&self) {
        let released = tokio::time::timeout(self.config.renew_deadline, async {
            let Ok(Some(mut lease)) = self.api.get_opt(&self.config.name).await else {
                return Ok(());
            };
            let Some(spec) = lease.spec.as_mut() else {
                return Ok(());
            };
            if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
                return Ok(());
            }
            let now = MicroTime(jiff::Timestamp::now());
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.acquire_time = Some(now.clone());
            spec.renew_time = Some(now);
            self.api
                .replace(&self.config.name, &PostParams::default(), &lease)
                .await
                .map(|_| ())
        })
        .await;
        match released {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "leader election: could not release the lease; a standby takes it once it expires")
            }
            Err(_) => tracing::warn!(
                "leader election: releasing the lease took longer than the renew deadline; a standby takes it once it expires"
            ),
        }
    }
}

#[cfg(test)]
mod tests;
