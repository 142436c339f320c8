//! The faults a soak injects, from every layer: the cloud API, the Kubernetes API and the
//! processes themselves. The cloud's are applied by the cloud's fault model
//! ([`wasm_ccm_sim::kit::soak::SoakCloud::inject`]), the
//! apiserver's here, the processes' by the runner.

use std::collections::BTreeMap;
use std::time::Duration;

use wasm_ccm_sim::kit::soak::CloudFault;
use wasm_ccm_sim::kube::{KubeSim, RequestMatcher};

use super::rng::SplitMix64;

/// A kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum FaultKind {
    /// Cloud API 500/502/503.
    Cloud5xx,
    /// Cloud API 429 with Retry-After.
    Cloud429,
    /// Cloud API latency (for a few steps).
    CloudLatency,
    /// Cloud requests carried out whose answer is lost (the connection breaks after the
    /// headers): did the write happen?
    CloudReset,
    /// Load balancer writes refused because it is busy.
    CloudBusy,
    /// Slow asynchronous provisioning (for a few steps).
    CloudSlowJobs,
    /// apiserver 409 Conflict on writes.
    Kube409,
    /// apiserver 500/503.
    Kube5xx,
    /// apiserver 429 with Retry-After.
    Kube429,
    /// apiserver connections reset after the response headers.
    KubeReset,
    /// Every open watch dropped.
    KubeWatchDrop,
    /// Watches expired: 410 Gone when they resume.
    KubeWatchExpire,
    /// apiserver latency (for a few steps).
    KubeLatency,
    /// The apiserver slowed to seconds per request (for a few steps).
    KubeSlow,
    /// The apiserver restarts with its state kept: every watch and connection breaks,
    /// connections are refused for a moment, watches resuming from before get 410 Gone.
    KubeRestart,
    /// A network partition between the processes and the cloud (for a while): connections
    /// refused or held, while nodes and Services keep changing.
    CloudPartition,
    /// SIGKILL of the leader.
    LeaderKill,
    /// SIGKILL of the leader right after a cloud write, before it could write the status.
    LeaderKillAfterCloudWrite,
    /// A new version of the driver file, which every process reloads.
    DriverReload,
}

impl FaultKind {
    /// Every kind, in the order of the summary.
    pub(crate) const ALL: [FaultKind; 19] = [
        FaultKind::Cloud5xx,
        FaultKind::Cloud429,
        FaultKind::CloudLatency,
        FaultKind::CloudReset,
        FaultKind::CloudBusy,
        FaultKind::CloudSlowJobs,
        FaultKind::Kube409,
        FaultKind::Kube5xx,
        FaultKind::Kube429,
        FaultKind::KubeReset,
        FaultKind::KubeWatchDrop,
        FaultKind::KubeWatchExpire,
        FaultKind::KubeLatency,
        FaultKind::KubeSlow,
        FaultKind::KubeRestart,
        FaultKind::CloudPartition,
        FaultKind::LeaderKill,
        FaultKind::LeaderKillAfterCloudWrite,
        FaultKind::DriverReload,
    ];

    /// The name in the summary.
    pub(crate) fn name(self) -> &'static str {
        match self {
            FaultKind::Cloud5xx => "cloud_5xx",
            FaultKind::Cloud429 => "cloud_429",
            FaultKind::CloudLatency => "cloud_latency",
            FaultKind::CloudReset => "cloud_reset",
            FaultKind::CloudBusy => "cloud_busy",
            FaultKind::CloudSlowJobs => "cloud_slow_jobs",
            FaultKind::Kube409 => "kube_409",
            FaultKind::Kube5xx => "kube_5xx",
            FaultKind::Kube429 => "kube_429",
            FaultKind::KubeReset => "kube_reset",
            FaultKind::KubeWatchDrop => "kube_watch_drop",
            FaultKind::KubeWatchExpire => "kube_watch_expire",
            FaultKind::KubeLatency => "kube_latency",
            FaultKind::KubeSlow => "kube_slow",
            FaultKind::KubeRestart => "kube_restart",
            FaultKind::CloudPartition => "cloud_partition",
            FaultKind::LeaderKill => "leader_kill",
            FaultKind::LeaderKillAfterCloudWrite => "leader_kill_after_cloud_write",
            FaultKind::DriverReload => "driver_reload",
        }
    }

    /// Whether the fault lasts until it is ended (latency, slow provisioning) rather than being
    /// used up by the requests it hits.
    pub(crate) fn is_timed(self) -> bool {
        matches!(
            self,
            FaultKind::CloudLatency
                | FaultKind::CloudSlowJobs
                | FaultKind::KubeLatency
                | FaultKind::KubeSlow
        )
    }

    /// The fault as the cloud simulator applies it; None for the kinds it does not (the
    /// partition is the soak's proxy, not the simulator).
    pub(crate) fn cloud(self) -> Option<CloudFault> {
        match self {
            FaultKind::Cloud5xx => Some(CloudFault::Status5xx),
            FaultKind::Cloud429 => Some(CloudFault::Status429),
            FaultKind::CloudLatency => Some(CloudFault::Latency),
            FaultKind::CloudReset => Some(CloudFault::Reset),
            FaultKind::CloudBusy => Some(CloudFault::Busy),
            FaultKind::CloudSlowJobs => Some(CloudFault::SlowJobs),
            _ => None,
        }
    }
}

/// The resources the controllers write, for apiserver faults aimed at them.
const WRITTEN: &[&str] = &["services", "nodes", "leases", "events"];

/// The latencies of the timed apiserver faults on now (`kube_latency`, `kube_slow`): the
/// simulator's one latency setting is their sum, so one ending leaves the other on.
pub(super) type Latencies = BTreeMap<FaultKind, Duration>;

fn apply_latency(kube: &KubeSim, latencies: &Latencies) {
    kube.faults().set_latency(latencies.values().sum());
}

/// Injects an apiserver fault of `kind`; what was done, or None for another layer's kind.
/// `heavy_latency` picks `kube_latency`'s heavier tier.
pub(super) fn inject_kube(
    kind: FaultKind,
    rng: &mut SplitMix64,
    kube: &KubeSim,
    latencies: &mut Latencies,
    heavy_latency: bool,
) -> Option<String> {
    let faults = kube.faults();
    match kind {
        FaultKind::Kube409 => {
            let resource = *rng.pick(&["services", "nodes"])?;
            let count = rng.between(1, 3);
            faults.conflict_next_writes(resource, count);
            Some(format!("next {count} {resource} writes answer 409"))
        }
        FaultKind::Kube5xx | FaultKind::Kube429 => {
            let status = if kind == FaultKind::Kube429 {
                429
            } else {
                *rng.pick(&[500u16, 503])?
            };
            let resource = *rng.pick(WRITTEN)?;
            let count = rng.between(1, 3);
            faults.fail_next(count, status, RequestMatcher::resource(resource));
            Some(format!("next {count} {resource} requests answer {status}"))
        }
        FaultKind::KubeReset => {
            let resource = *rng.pick(WRITTEN)?;
            let count = rng.between(1, 2);
            faults.disconnect_next(count, RequestMatcher::resource(resource));
            Some(format!(
                "next {count} {resource} requests lose their connection after the headers"
            ))
        }
        FaultKind::KubeWatchDrop => {
            kube.drop_watches();
            Some("every open watch dropped".into())
        }
        FaultKind::KubeWatchExpire => {
            if rng.chance(50) {
                let count = rng.between(1, 4);
                faults.expire_next_watches(count);
                kube.drop_watches();
                Some(format!(
                    "watches dropped; the next {count} watch requests get 410 Expired"
                ))
            } else {
                kube.compact();
                kube.drop_watches();
                Some("watch history compacted and watches dropped (410 on resume)".into())
            }
        }
        FaultKind::KubeLatency => {
            // Light (20–250 ms) or heavy: the review of 2026-11-28 (§2) saw the leader drop
            // its lease with +0.3 s on each request, up to 0.6 s per lease request, which
            // client-go rides out; so must a leader here (a lease PUT of at most 40 % of the
            // soak's 1.5 s renew deadline). The soak extends a heavy one until a holder renewed
            // twice in a row through it (`lease.rs`). One draw either way, so the schedule of
            // the rest of the soak does not depend on the tier.
            let (low, high) = if heavy_latency {
                (super::lease::LATENT_MS, 600)
            } else {
                (20, 250)
            };
            let ms = rng.between(low, high);
            latencies.insert(kind, Duration::from_millis(ms));
            apply_latency(kube, latencies);
            let tier = if heavy_latency { "heavy" } else { "light" };
            Some(format!("apiserver latency {ms} ms ({tier})"))
        }
        FaultKind::KubeSlow => {
            // Over half the soak's 2 s lease per lease PUT: no renewal can end before the lease
            // might pass to the other replica, so the leader steps down (the fence in
            // `leader.rs`) and the other takes over once the fault ends.
            let ms = rng.between(1000, 2500);
            latencies.insert(kind, Duration::from_millis(ms));
            apply_latency(kube, latencies);
            Some(format!("apiserver slowed: {ms} ms per request"))
        }
        FaultKind::KubeRestart => {
            // Short enough for a leader to ride through, as a real one does: the soak's lease
            // timings are upstream's compressed 7.5× (renew deadline 1.5 s, retries every
            // 0.5 s, the lease's fence at 1.9 s), and a renewal round that starts 0.5 s after
            // the last renewal has about a second of attempts left, so an outage near a second
            // makes the leader step down and the watch resumption this fault exists to
            // exercise never happens. A longer outage is `kube_slow`'s and a leader kill's
            // ground.
            let ms = rng.between(100, 450);
            // The rest of the cluster writes too (in a real one, kubelets and other
            // controllers): the resourceVersion moves past what the CCM's informers last saw,
            // so a watch resuming after the restart is older than the new watch cache (410),
            // whether or not a leader renewed its lease since.
            cluster_activity(kube);
            kube.restart(Duration::from_millis(ms));
            Some(format!(
                "apiserver restarted (state kept): watches and connections broken, history forgotten, connections refused for {ms} ms"
            ))
        }
        _ => None,
    }
}

/// A write by the rest of the cluster: a ConfigMap no controller of the CCM watches.
fn cluster_activity(kube: &KubeSim) {
    let bumped = kube.modify(
        "configmaps",
        Some("kube-system"),
        "soak-cluster-activity",
        |cm| {
            let n = cm["data"]["writes"]
                .as_str()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
            cm["data"]["writes"] = serde_json::json!((n + 1).to_string());
        },
    );
    if bumped.is_err() {
        let _ = kube.create(serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "soak-cluster-activity", "namespace": "kube-system"},
            "data": {"writes": "1"},
        }));
    }
}

/// Ends a timed apiserver fault.
pub(super) fn end_kube(kind: FaultKind, kube: &KubeSim, latencies: &mut Latencies) {
    if latencies.remove(&kind).is_some() {
        apply_latency(kube, latencies);
    }
}
