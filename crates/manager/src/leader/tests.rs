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
