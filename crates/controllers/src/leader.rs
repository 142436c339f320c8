//! Leader election on a coordination.k8s.io Lease with client-go's algorithm and field
//! semantics, so that wasm-ccm and a Go cloud-controller-manager can hand the lease to each other
//! during a migration.
//!
//! Expiry is judged by the time *this* process last saw the lease record change, never by the
//! timestamps in it, which makes the algorithm tolerant of clock skew between holders.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::sync::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

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
    /// How long the leader keeps trying to renew before it gives leadership up (10 s).
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
}

/// One participant in the election.
pub(crate) struct LeaderElector {
    api: Api<Lease>,
    config: LeaderConfig,
    observed: Mutex<Option<(Record, Instant)>>,
}

impl LeaderElector {
    /// An elector for `config` over `client`.
    pub(crate) fn new(client: Client, config: LeaderConfig) -> Self {
        LeaderElector {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: Mutex::new(None),
        }
    }

    /// The identity this process holds the lease under.
    pub(crate) fn identity(&self) -> &str {
        &self.config.identity
    }

    fn secs(d: Duration) -> i32 {
        i32::try_from(d.as_secs()).unwrap_or(i32::MAX).max(1)
    }

    /// One attempt to take or renew the lease; `Ok(true)` when this process holds it now.
    pub(crate) async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let now = MicroTime(jiff::Timestamp::now());
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
                    spec: Some(mine.clone()),
                };
                return match self.api.create(&PostParams::default(), &lease).await {
                    Ok(_) => {
                        *self.observed.lock().await = Some((Record::of(&mine), Instant::now()));
                        Ok(true)
                    }
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(e),
                };
            }
        };
        let spec = existing.spec.clone().unwrap_or_default();
        let record = Record::of(&spec);
        let observed_at = {
            let mut observed = self.observed.lock().await;
            match observed.as_ref() {
                Some((r, at)) if *r == record => *at,
                _ => {
                    let at = Instant::now();
                    *observed = Some((record.clone(), at));
                    at
                }
            }
        };
        let held_by_me = record.holder == self.config.identity;
        let expires =
            observed_at + Duration::from_secs(u64::try_from(record.duration.max(0)).unwrap_or(0));
        if !record.holder.is_empty() && !held_by_me && expires > Instant::now() {
            return Ok(false);
        }
        let mut next = mine;
        if held_by_me {
            next.acquire_time = spec.acquire_time.clone();
            next.lease_transitions = Some(record.transitions);
        } else {
            next.lease_transitions = Some(record.transitions + 1);
        }
        let mut lease = existing;
        lease.spec = Some(next.clone());
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                *self.observed.lock().await = Some((Record::of(&next), Instant::now()));
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Waits until this process holds the lease; when the successful attempt started (the
    /// last moment the lease is known to be ours, from which [`Self::hold`] counts), or `None`
    /// on `cancel`.
    pub(crate) async fn acquire(&self, cancel: &CancellationToken) -> Option<Instant> {
        loop {
            let started = Instant::now();
            match self.try_acquire_or_renew().await {
                // An attempt that outlasted the renew deadline (a slow apiserver) wrote a lease
                // that may already look expired to the other replicas: renew it before leading.
                Ok(true) if started.elapsed() < self.config.renew_deadline => return Some(started),
                Ok(true) => tracing::warn!(
                    took = ?started.elapsed(),
                    "leader election: took the lease, but slower than the renew deadline; renewing before leading"
                ),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "leader election: could not read or write the lease")
                }
            }
            // client-go's jitter factor 1.2.
            let jitter = self
                .config
                .retry_period
                .mul_f64(rand::random_range(1.0..1.2));
            tokio::select! {
                _ = cancel.cancelled() => return None,
                _ = tokio::time::sleep(jitter) => {}
            }
        }
    }

    /// Renews every retry period, counting from `acquired` (what [`Self::acquire`] returned);
    /// returns when a renewal has not succeeded for the renew deadline (leadership lost) or on
    /// `cancel` (then `false`).
    pub(crate) async fn hold(&self, cancel: &CancellationToken, acquired: Instant) -> bool {
        let mut last_renewal = acquired;
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return false,
                _ = tokio::time::sleep(self.config.retry_period) => {}
            }
            // One attempt may take no longer than what is left of the renew deadline (client-go's
            // per-round RenewDeadline timeout): against a slow apiserver (seconds per request,
            // the client's own retries on 429) an unbounded attempt outlasted the lease while the
            // controllers kept writing beside the replica that took it over (found by the soak,
            // `kube_slow`). A renewal counts from when its attempt started, the last moment the
            // lease is known to have been ours.
            let started = Instant::now();
            let left = self
                .config
                .renew_deadline
                .saturating_sub(last_renewal.elapsed());
            match tokio::time::timeout(left, self.try_acquire_or_renew()).await {
                Ok(Ok(true)) => last_renewal = started,
                Ok(Ok(false)) => {
                    tracing::error!(identity = %self.config.identity, "leader election: another holder took the lease");
                    return true;
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "leader election: renewal failed"),
                Err(_) => tracing::warn!(
                    after = ?left,
                    "leader election: a renewal did not finish within the renew deadline"
                ),
            }
            if last_renewal.elapsed() > self.config.renew_deadline {
                tracing::error!(deadline = ?self.config.renew_deadline, "leader election: could not renew the lease in time");
                return true;
            }
        }
    }

    /// Gives the lease up on a clean shutdown, so a standby takes over without waiting for it
    /// to expire (client-go's ReleaseOnCancel).
    pub(crate) async fn release(&self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.config.name).await else {
            return;
        };
        let Some(spec) = lease.spec.as_mut() else {
            return;
        };
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return;
        }
        let now = MicroTime(jiff::Timestamp::now());
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.acquire_time = Some(now.clone());
        spec.renew_time = Some(now);
        if let Err(e) = self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            tracing::warn!(error = %e, "leader election: could not release the lease");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Clock skew between replicas (issue 36): the lease's timestamps are another process's
    /// wall clock, so an elector judges expiry by when *it* saw the record change (client-go's
    /// rule), never by `renewTime`. These tests write the other replica's lease by hand with a
    /// clock an hour behind or ahead, against the Kubernetes simulator on loopback.
    mod clock_skew {
        use super::*;
        use wasm_ccm_sim::kube::KubeSim;

        const LEASE: &str = "cloud-controller-manager";

        async fn cluster() -> (KubeSim, Client) {
            let sim = KubeSim::start("127.0.0.1:0".parse().expect("loopback"))
                .await
                .expect("simulator");
            let config = kube::Config::new(sim.url().parse().expect("URL"));
            let client = Client::try_from(config).expect("client");
            (sim, client)
        }

        fn elector(client: &Client, lease_duration: Duration) -> LeaderElector {
            LeaderElector::new(
                client.clone(),
                LeaderConfig {
                    namespace: "kube-system".into(),
                    name: LEASE.into(),
                    identity: "b".into(),
                    lease_duration,
                    renew_deadline: lease_duration / 2,
                    retry_period: Duration::from_millis(100),
                },
            )
        }

        /// Writes the lease as replica `a` would with its clock `skew` off.
        async fn renew_as_a(client: &Client, skew: jiff::SignedDuration, duration_s: i32) {
            let api: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
            let at = MicroTime(jiff::Timestamp::now() + skew);
            let spec = LeaseSpec {
                holder_identity: Some("a".into()),
                lease_duration_seconds: Some(duration_s),
                acquire_time: Some(at.clone()),
                renew_time: Some(at),
                lease_transitions: Some(0),
                ..Default::default()
            };
            let mut lease = Lease {
                metadata: ObjectMeta {
                    name: Some(LEASE.into()),
                    namespace: Some("kube-system".into()),
                    ..Default::default()
                },
                spec: Some(spec),
            };
            match api.get_opt(LEASE).await.expect("read lease") {
                Some(existing) => {
                    lease.metadata.resource_version = existing.metadata.resource_version;
                    api.replace(LEASE, &PostParams::default(), &lease)
                        .await
                        .expect("renew");
                }
                None => {
                    api.create(&PostParams::default(), &lease)
                        .await
                        .expect("create");
                }
            }
        }

        #[tokio::test]
        async fn a_leader_whose_clock_runs_behind_keeps_the_lease_while_it_renews() {
            let (_sim, client) = cluster().await;
            let hour_behind = jiff::SignedDuration::from_hours(-1);
            renew_as_a(&client, hour_behind, 1).await;
            let b = elector(&client, Duration::from_secs(1));
            // Its renewTime is an hour old on b's clock, yet a renews: for 3 lease durations b
            // never takes over.
            let until = Instant::now() + Duration::from_secs(3);
            while Instant::now() < until {
                assert!(
                    !b.try_acquire_or_renew().await.expect("try"),
                    "b took a live lease"
                );
                renew_as_a(&client, hour_behind, 1).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            // a stops renewing: b takes over once a lease duration passed on its own clock.
            let deadline = Instant::now() + Duration::from_secs(10);
            while !b.try_acquire_or_renew().await.expect("try") {
                assert!(
                    Instant::now() < deadline,
                    "b never took the abandoned lease"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }

        /// Finding 11 of the soak: against an apiserver slowed to seconds per request, a
        /// renewal that hangs must not keep this process leading past the point where the other
        /// replica may take the lease (a lease duration after the last renewal it saw).
        #[tokio::test]
        async fn a_leader_whose_renewals_hang_steps_down_before_its_lease_expires() {
            let (sim, client) = cluster().await;
            let lease_duration = Duration::from_secs(2);
            let b = elector(&client, lease_duration);
            let acquired = b
                .acquire(&CancellationToken::new())
                .await
                .expect("an uncontended lease is taken");
            sim.faults().add_latency(
                wasm_ccm_sim::kube::RequestMatcher::resource("leases"),
                Duration::from_secs(30),
            );
            let lost = tokio::time::timeout(
                Duration::from_secs(30),
                b.hold(&CancellationToken::new(), acquired),
            )
            .await
            .expect("hold returned while its renewals hung");
            assert!(lost, "hold reports leadership lost");
            assert!(
                acquired.elapsed() < lease_duration,
                "still leading {:?} after its last renewal; the lease lasts {lease_duration:?}",
                acquired.elapsed()
            );
        }

        #[tokio::test]
        async fn a_dead_leader_whose_clock_ran_ahead_does_not_hold_the_lease_for_an_hour() {
            let (_sim, client) = cluster().await;
            renew_as_a(&client, jiff::SignedDuration::from_hours(1), 1).await;
            let b = elector(&client, Duration::from_secs(1));
            let started = Instant::now();
            assert!(
                !b.try_acquire_or_renew().await.expect("try"),
                "first sight: not yet"
            );
            while !b.try_acquire_or_renew().await.expect("try") {
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "b waited for a's future renewTime instead of its own lease duration"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert!(
                started.elapsed() >= Duration::from_secs(1),
                "took over before the lease duration"
            );
        }
    }

    #[test]
    fn identity_is_hostname_underscore_uuid() {
        let id = default_identity();
        let (_, uuid) = id.rsplit_once('_').expect("underscore");
        let parts: Vec<usize> = uuid.split('-').map(str::len).collect();
        assert_eq!(parts, vec![8, 4, 4, 4, 12], "{id}");
        assert_ne!(default_identity(), id);
    }
}
