//! Clock skew between replicas (issue 36): the lease's timestamps are another process's wall
//! clock, so an elector judges expiry by when *it* saw the record change (client-go's rule),
//! never by `renewTime`. These tests write the other replica's lease by hand with a clock an
//! hour behind or ahead.

use super::*;

fn elector(client: &Client, lease_duration: Duration) -> LeaderElector {
    LeaderElector::new(
        client.clone(),
        config(
            "b",
            lease_duration,
            lease_duration / 2,
            Duration::from_millis(100),
        ),
    )
}

/// Whether one attempt by `b` holds the lease.
async fn takes(b: &LeaderElector) -> bool {
    b.try_acquire_or_renew().await.expect("try") == Attempt::Holding
}

/// Writes the lease as replica `a` would with its clock `skew` off.
async fn renew_as_a(client: &Client, skew: jiff::SignedDuration, duration_s: i32) {
    let api: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
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
            namespace: Some(NAMESPACE.into()),
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
        assert!(!takes(&b).await, "b took a live lease");
        renew_as_a(&client, hour_behind, 1).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // a stops renewing: b takes over once a lease duration passed on its own clock.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !takes(&b).await {
        assert!(
            Instant::now() < deadline,
            "b never took the abandoned lease"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_dead_leader_whose_clock_ran_ahead_does_not_hold_the_lease_for_an_hour() {
    let (_sim, client) = cluster().await;
    renew_as_a(&client, jiff::SignedDuration::from_hours(1), 1).await;
    let b = elector(&client, Duration::from_secs(1));
    let started = Instant::now();
    assert!(!takes(&b).await, "first sight: not yet");
    while !takes(&b).await {
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
