//! Watch-based route reconciliation (KEP-5237, the
//! `CloudControllerManagerWatchBasedRoutesReconciliation` gate; upstream:
//! `controllers/route/route_controller.go` at `k8s.io/cloud-provider` v0.36.2). Instead of a
//! full pass every `--route-reconciliation-period`, a pass runs when a node change can change
//! the routes (a node added or deleted, its pod CIDRs or addresses changed, a relist), at most
//! once per [`MIN_RESYNC`], and once in a long random interval as the safety net (upstream's
//! informer resync, `--min-resync-period` to twice that).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// At most one pass per this long under a stream of node changes, and the wait before a failed
/// pass is retried (upstream's `minRouteResyncInterval`, KEP-5237's 10 s: a bucket of one token
/// per 10 s whose wait is capped at 10 s).
pub(crate) const MIN_RESYNC: Duration = Duration::from_secs(10);

/// Why a route pass ran: the label `trigger` of `route_controller_route_sync_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trigger {
    /// A node change that can change the routes.
    NodeChange,
    /// The period: `--route-reconciliation-period` with the gate off, the long safety-net
    /// interval with it on.
    Periodic,
}

impl Trigger {
    /// The metric label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Trigger::NodeChange => "node_change",
            Trigger::Periodic => "periodic",
        }
    }
}

/// Whether a node event asks for a route pass, and why (upstream's `handleNodeUpdate` and its
/// add and delete handlers): an add or a delete always; an update when `spec.podCIDRs` or
/// `status.addresses` differ (compared as lists, in order) is a change; an update with the same
/// resource version (a relist's repeat) is the resync upstream takes as its periodic cleanup.
pub(crate) fn route_trigger(old: Option<&Node>, new: Option<&Node>) -> Option<Trigger> {
    let (Some(old), Some(new)) = (old, new) else {
        return Some(Trigger::NodeChange);
    };
    let pod_cidrs = |n: &Node| n.spec.as_ref().and_then(|s| s.pod_cidrs.clone());
    let addresses = |n: &Node| n.status.as_ref().and_then(|s| s.addresses.clone());
    if pod_cidrs(old) != pod_cidrs(new) || addresses(old) != addresses(new) {
        Some(Trigger::NodeChange)
    } else if old.metadata.resource_version == new.metadata.resource_version {
        Some(Trigger::Periodic)
    } else {
        None
    }
}

/// The node events not yet reconciled. Informer handlers [`Changes::note`] them (quick: two
/// flags and a wake-up); the loop takes them all at the start of a pass, so an event that lands
/// during a pass causes exactly one more.
#[derive(Default)]
pub(crate) struct Changes {
    changed: AtomicBool,
    resynced: AtomicBool,
    wake: Notify,
}

impl Changes {
    /// An event asked for a pass.
    pub(crate) fn note(&self, trigger: Trigger) {
        let flag = match trigger {
            Trigger::NodeChange => &self.changed,
            Trigger::Periodic => &self.resynced,
        };
        flag.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    fn pending(&self) -> bool {
        self.changed.load(Ordering::Acquire) || self.resynced.load(Ordering::Acquire)
    }

    /// Takes the pending events (the pass about to start sees them all in the cache): a node
    /// change if any, else a resync.
    fn take(&self) -> Option<Trigger> {
        let changed = self.changed.swap(false, Ordering::AcqRel);
        let resynced = self.resynced.swap(false, Ordering::AcqRel);
        if changed {
            Some(Trigger::NodeChange)
        } else {
            resynced.then_some(Trigger::Periodic)
        }
    }
}

/// The safety net's interval: uniformly in `[min_resync, 2 × min_resync)`, chosen once (as
/// upstream's informer factory chooses its resync period once).
pub(crate) fn periodic_interval(min_resync: Duration) -> Duration {
    min_resync.mul_f64(1.0 + rand::random::<f64>())
}

/// Runs `pass` on node events and every `periodic`, never two passes closer than
/// [`MIN_RESYNC`]; a failed pass (`pass` returns false) is retried after [`MIN_RESYNC`] (as a
/// node change: it is not the safety net's). The first pass comes with the first event: the
/// informer's initial list adds every node.
pub(crate) async fn run_on_changes<F, Fut>(
    changes: Arc<Changes>,
    periodic: Duration,
    cancel: CancellationToken,
    mut pass: F,
) where
    F: FnMut(Trigger) -> Fut,
    Fut: Future<Output = bool>,
{
    let mut last_start: Option<Instant> = None;
    let mut next_periodic = Instant::now() + periodic;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = changes.wake.notified() => {
                // A wake-up whose event an earlier pass already took.
                if !changes.pending() {
                    continue;
                }
            }
            _ = tokio::time::sleep_until(next_periodic) => {
                next_periodic = Instant::now() + periodic;
            }
        }
        if let Some(last) = last_start {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep_until(last + MIN_RESYNC) => {}
            }
        }
        last_start = Some(Instant::now());
        // Taken before the pass reads the cache: an event after this point is seen by the next.
        // A pending node change says the pass is for it; otherwise it is the safety net's or a
        // resync's, i.e. periodic.
        let trigger = match changes.take() {
            Some(Trigger::NodeChange) => Trigger::NodeChange,
            _ => Trigger::Periodic,
        };
        if !pass(trigger).await {
            changes.note(Trigger::NodeChange);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;

    fn node(rv: &str, cidrs: &[&str], ip: &str, images: bool) -> Node {
        let mut n = json!({
            "metadata": {"name": "node-1", "uid": "01", "resourceVersion": rv},
            "spec": {"podCIDR": cidrs.first(), "podCIDRs": cidrs},
            "status": {"addresses": [{"type": "InternalIP", "address": ip}]},
        });
        if images {
            n["status"]["images"] =
                json!([{"names": ["registry.k8s.io/pause:latest"], "sizeBytes": 239840}]);
        }
        serde_json::from_value(n).expect("a node")
    }

    /// Upstream's `TestHandleNodeUpdate` (its four cases), plus the add, delete and relist
    /// handlers it does not table.
    #[test]
    fn which_node_events_wake_the_route_loop() {
        let old = node("1", &["10.120.0.0/24"], "10.0.1.1", false);
        let cases = [
            (
                "internal IP updated",
                node("2", &["10.120.0.0/24"], "10.0.1.2", false),
                true,
            ),
            (
                "pod CIDR updated",
                node("2", &["10.121.0.0/24"], "10.0.1.1", false),
                true,
            ),
            // Upstream passes the same object twice: the same resource version, a resync.
            ("node object not updated", old.clone(), true),
            (
                "unrelated node update",
                node("2", &["10.120.0.0/24"], "10.0.1.1", true),
                false,
            ),
        ];
        for (name, new, wakes) in cases {
            let trigger = route_trigger(Some(&old), Some(&new));
            assert_eq!(trigger.is_some(), wakes, "{name}");
        }
        let change = Some(Trigger::NodeChange);
        assert_eq!(route_trigger(None, Some(&old)), change, "added");
        assert_eq!(route_trigger(Some(&old), None), change, "deleted");
        // The same object again is the resync, upstream's periodic cleanup (`trigger="periodic"`
        // since kubernetes#140147); a change with the same version is still a change.
        let resync = route_trigger(Some(&old), Some(&old));
        assert_eq!(resync, Some(Trigger::Periodic));
        let moved = node("1", &["10.121.0.0/24"], "10.0.1.1", false);
        assert_eq!(route_trigger(Some(&old), Some(&moved)), change);
    }

    /// Records each pass's trigger and the (paused) time it started.
    #[derive(Default)]
    struct Passes(Mutex<Vec<(Trigger, Duration)>>);

    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    fn start(
        periodic: Duration,
        fail_first: usize,
    ) -> (Arc<Changes>, Arc<Passes>, CancellationToken, Instant) {
        let changes = Arc::new(Changes::default());
        let passes = Arc::new(Passes::default());
        let cancel = CancellationToken::new();
        let t0 = Instant::now();
        let (c, p) = (Arc::clone(&changes), Arc::clone(&passes));
        let failures = Arc::new(Mutex::new(fail_first));
        tokio::spawn(run_on_changes(
            c,
            periodic,
            cancel.clone(),
            move |trigger| {
                let p = Arc::clone(&p);
                let failures = Arc::clone(&failures);
                async move {
                    p.0.lock().unwrap().push((trigger, t0.elapsed()));
                    let mut left = failures.lock().unwrap();
                    let ok = *left == 0;
                    *left = left.saturating_sub(1);
                    ok
                }
            },
        ));
        (changes, passes, cancel, t0)
    }

    /// A burst of changes is one pass at once and one more at most 10 s later (not one per
    /// change), and a quiet loop runs the safety net only.
    #[tokio::test(start_paused = true)]
    async fn changes_coalesce_and_passes_are_ten_seconds_apart() {
        let hour = Duration::from_secs(3600);
        let (changes, passes, cancel, _) = start(hour, 0);
        settle().await;
        assert!(passes.0.lock().unwrap().is_empty(), "no change, no pass");
        changes.note(Trigger::NodeChange);
        settle().await;
        for _ in 0..50 {
            changes.note(Trigger::NodeChange);
        }
        settle().await;
        tokio::time::advance(Duration::from_secs(9)).await;
        settle().await;
        assert_eq!(passes.0.lock().unwrap().len(), 1, "the burst waits");
        tokio::time::advance(Duration::from_secs(1)).await;
        settle().await;
        let got = passes.0.lock().unwrap().clone();
        let want = [
            (Trigger::NodeChange, Duration::ZERO),
            (Trigger::NodeChange, MIN_RESYNC),
        ];
        assert_eq!(got, want);
        // Quiet: the next pass is the safety net's, an hour after the start.
        tokio::time::advance(hour - MIN_RESYNC - Duration::from_secs(1)).await;
        settle().await;
        assert_eq!(passes.0.lock().unwrap().len(), 2);
        tokio::time::advance(Duration::from_secs(1)).await;
        settle().await;
        let last = *passes.0.lock().unwrap().last().expect("a pass");
        assert_eq!(last, (Trigger::Periodic, hour));
        cancel.cancel();
    }

    /// A relist's repeat (a resync) is a periodic pass; a real change pending beside it makes
    /// the pass a node change's.
    #[tokio::test(start_paused = true)]
    async fn a_resync_is_a_periodic_pass_unless_a_change_is_pending() {
        let (changes, passes, cancel, _) = start(Duration::from_secs(3600), 0);
        changes.note(Trigger::Periodic);
        settle().await;
        changes.note(Trigger::Periodic);
        changes.note(Trigger::NodeChange);
        settle().await;
        tokio::time::advance(MIN_RESYNC).await;
        settle().await;
        let got: Vec<Trigger> = passes.0.lock().unwrap().iter().map(|(t, _)| *t).collect();
        assert_eq!(got, [Trigger::Periodic, Trigger::NodeChange]);
        cancel.cancel();
    }

    /// A failed pass is retried 10 s later without a new change; a good pass is not repeated.
    #[tokio::test(start_paused = true)]
    async fn a_failed_pass_is_retried_after_the_minimum_interval() {
        let (changes, passes, cancel, _) = start(Duration::from_secs(3600), 2);
        changes.note(Trigger::NodeChange);
        settle().await;
        // In steps: `advance` moves the clock at once, so a timer due midway sees its end.
        for _ in 0..6 {
            tokio::time::advance(MIN_RESYNC).await;
            settle().await;
        }
        let got = passes.0.lock().unwrap().clone();
        let starts: Vec<Duration> = got.iter().map(|(_, at)| *at).collect();
        assert_eq!(starts, [Duration::ZERO, MIN_RESYNC, 2 * MIN_RESYNC]);
        cancel.cancel();
    }

    #[test]
    fn the_safety_net_interval_is_between_once_and_twice_the_minimum() {
        let min = Duration::from_secs(12 * 3600);
        for _ in 0..100 {
            let d = periodic_interval(min);
            assert!(d >= min && d < 2 * min, "{d:?}");
        }
    }
}
