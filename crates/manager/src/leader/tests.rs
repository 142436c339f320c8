//! Leader election against the Kubernetes simulator on loopback.

use super::*;
use wasm_ccm_sim::kube::KubeSim;

mod clock_skew;
mod latency;

const LEASE: &str = "cloud-controller-manager";
const NAMESPACE: &str = "kube-system";

async fn cluster() -> (KubeSim, Client) {
    let sim = KubeSim::start("127.0.0.1:0".parse().expect("loopback"))
        .await
        .expect("simulator");
    let config = kube::Config::new(sim.url().parse().expect("URL"));
    let client = Client::try_from(config).expect("client");
    (sim, client)
}

fn config(
    identity: &str,
    lease_duration: Duration,
    renew_deadline: Duration,
    retry_period: Duration,
) -> LeaderConfig {
    LeaderConfig {
        namespace: NAMESPACE.into(),
        name: LEASE.into(),
        identity: identity.into(),
        lease_duration,
        renew_deadline,
        retry_period,
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

/// The fence counts from the start of the last successful attempt, over the shorter of the
/// configured duration and the whole seconds written in the record (what the others go by).
#[test]
fn the_fence_is_a_twentieth_before_the_written_lease_ends() {
    let at = Instant::now();
    let ms = Duration::from_millis;
    // 15 s: the record says 15.
    assert_eq!(lead_until(at, ms(15_000)), at + ms(14_250));
    // 2.5 s is written as 2: the others wait 2 s.
    assert_eq!(lead_until(at, ms(2_500)), at + ms(1_900));
    // 0.5 s is written as 1 (the minimum): the configured 0.5 s is the shorter.
    assert_eq!(lead_until(at, ms(500)), at + ms(475));
}

/// client-go's `leader_election_slowpath_total`: the holder's renewal through a read is
/// counted, under the lease's name; taking the lease and the optimistic renewal are not.
#[tokio::test]
async fn the_holders_renewal_through_a_read_is_counted_as_the_slow_path() {
    let (_sim, client) = cluster().await;
    let metrics = Arc::new(Metrics::default());
    let s = Duration::from_secs;
    let elector = LeaderElector::new(client.clone(), config("a", s(15), s(10), s(2)))
        .with_metrics(Arc::clone(&metrics));
    let slow = || metrics.total("leader_election_slowpath_total");
    assert_eq!(
        elector.try_acquire_or_renew().await.expect("take"),
        Attempt::Holding
    );
    assert_eq!(
        elector.try_acquire_or_renew().await.expect("renew"),
        Attempt::Holding
    );
    assert_eq!(slow(), 0.0, "taken by POST, renewed by the optimistic PUT");
    // Someone else's write (a label) changes the resourceVersion: the optimistic PUT is
    // refused with 409 and the holder renews through a GET.
    let api: Api<Lease> = Api::namespaced(client, NAMESPACE);
    let label = serde_json::json!({"metadata": {"labels": {"touched": "yes"}}});
    api.patch(
        LEASE,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&label),
    )
    .await
    .expect("a foreign write");
    assert_eq!(
        elector.try_acquire_or_renew().await.expect("renew"),
        Attempt::Holding
    );
    assert_eq!(slow(), 1.0);
    let text = metrics.render();
    let line = format!("leader_election_slowpath_total{{name=\"{LEASE}\"}} 1\n");
    assert!(text.contains(&line), "{text}");
}

/// A candidate waits between 1 and 2.2 retry periods after a failed attempt, as client-go's
/// `wait.JitterUntil(…, RetryPeriod, JitterFactor = 1.2, …)` (`wait.Jitter`: `d + rand·1.2·d`).
#[test]
fn a_candidate_waits_the_retry_period_jittered_as_client_go() {
    let retry = Duration::from_secs(2);
    assert_eq!(acquire_retry_wait(retry, 0.0), retry);
    assert_eq!(acquire_retry_wait(retry, 0.5), Duration::from_millis(3200));
    let longest = acquire_retry_wait(retry, 0.999_999);
    assert!(
        longest > Duration::from_millis(4399) && longest < Duration::from_millis(4400),
        "{longest:?}"
    );
}

/// `--leader-elect-retry-period` (3 s here, not the 2 s default), in paused time: the holder
/// renews a retry period after each renewal (client-go's `wait.Until`), and a candidate facing
/// the held lease tries again after 1 to 2.2 retry periods (sliding, jittered).
#[tokio::test(start_paused = true)]
async fn the_retry_period_paces_the_holders_renewals_and_a_candidates_attempts() {
    use latency::{LOOK, acquire, hold, lease_requests, renewals};
    let (sim, client) = cluster().await;
    let s = Duration::from_secs;
    let retry = s(3);
    let b = Arc::new(LeaderElector::new(
        client.clone(),
        config("b", s(15), s(10), retry),
    ));
    let cancel = CancellationToken::new();
    let acquired = acquire(&b, &cancel, "b").await;
    let holding = hold(&b, &cancel, acquired);
    // The first round comes at once; from there on, one a retry period after the last.
    let seen = renewals(&sim, &holding, 5, "the holder").await;
    for pair in seen[1..].windows(2) {
        let gap = pair[1].0 - pair[0].0;
        assert!(
            gap + LOOK >= retry && gap <= retry + LOOK,
            "renewals {gap:?} apart, not every {retry:?}: {seen:?}"
        );
    }

    // A candidate's attempts: each reads the Lease (the holder renews with a PUT alone).
    let reads = || {
        lease_requests(&sim)
            .iter()
            .filter(|(method, _, _)| method == "GET")
            .count()
    };
    let before = reads();
    let c = Arc::new(LeaderElector::new(client, config("c", s(15), s(10), retry)));
    let trying = {
        let (c, cancel) = (Arc::clone(&c), cancel.clone());
        tokio::spawn(async move { c.acquire(&cancel).await })
    };
    let mut attempts: Vec<Instant> = Vec::new();
    let bound = Instant::now() + s(60);
    while attempts.len() < 6 {
        assert!(Instant::now() < bound, "attempts at {attempts:?}");
        let now_reads = reads();
        if now_reads > before + attempts.len() {
            attempts.push(Instant::now());
        }
        tokio::time::sleep(LOOK).await;
    }
    for pair in attempts.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap + LOOK >= retry && gap <= retry.mul_f64(2.2) + LOOK,
            "a candidate's attempts {gap:?} apart, not 1 to 2.2 times {retry:?}"
        );
    }
    assert!(!trying.is_finished(), "c took a lease b holds");
    assert!(!holding.is_finished(), "b stopped leading");
    cancel.cancel();
    assert_eq!(trying.await.expect("c's task"), None, "cancelled");
    let (lost, _) = holding.await.expect("b's task");
    assert!(!lost, "cancelled, not lost");
}
