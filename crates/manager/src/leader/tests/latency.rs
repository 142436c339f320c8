//! A slow apiserver (review of 2026-11-28, §2): a holder keeps its lease while each lease
//! request takes a good part of the renew deadline, as client-go's does, and still stops
//! leading before the lease may have passed to another replica (the fence).
//!
//! In paused tokio time: the simulator runs on the test's runtime and delays a request with a
//! tokio sleep *before* it handles it, and nothing else takes virtual time, so a lease write
//! that waited `latency` was sent exactly `latency` before it changed the Lease object.

use std::sync::Arc;

use serde_json::Value;
use tokio::task::JoinHandle;
use wasm_ccm_sim::kube::{KubeSim, RequestMatcher};

use super::*;

/// How often the tests look at the Lease object in the simulator (virtual time, through the
/// simulator's own API: no request, no latency).
pub(super) const LOOK: Duration = Duration::from_millis(10);

/// Renewals each test watches land on the Lease.
const ROUNDS: usize = 6;

/// Upstream's defaults: a 15 s lease, a 10 s renew deadline, a retry every 2 s.
fn upstream(identity: &str) -> LeaderConfig {
    config(
        identity,
        Duration::from_secs(15),
        Duration::from_secs(10),
        Duration::from_secs(2),
    )
}

/// The Lease's holder and `renewTime`, read from the simulator's store.
fn lease(sim: &KubeSim) -> Option<(String, jiff::Timestamp)> {
    let lease = sim.get("leases", Some(NAMESPACE), LEASE)?;
    let spec: &Value = &lease["spec"];
    let holder = spec["holderIdentity"].as_str()?.to_string();
    let renew = spec["renewTime"].as_str()?.parse().ok()?;
    Some((holder, renew))
}

/// Lease requests in the simulator's log: (method, status, injected delay).
pub(super) fn lease_requests(sim: &KubeSim) -> Vec<(String, u16, Duration)> {
    sim.requests()
        .into_iter()
        .filter(|r| {
            r.resource
                .as_deref()
                .is_some_and(|r| r.starts_with("leases"))
        })
        .map(|r| (r.method, r.status, Duration::from_millis(r.delay_ms)))
        .collect()
}

/// `b` takes the uncontended lease, within a virtual-time bound (a candidate that never
/// leads fails instead of running forever).
pub(super) async fn acquire(b: &LeaderElector, cancel: &CancellationToken, what: &str) -> Instant {
    tokio::time::timeout(Duration::from_secs(120), b.acquire(cancel))
        .await
        .unwrap_or_else(|_| panic!("{what}: b never started leading on the uncontended lease"))
        .expect("not cancelled")
}

/// `b` leads from `acquired` on in a task; it answers whether leadership was lost and when
/// `hold` returned.
pub(super) fn hold(
    b: &Arc<LeaderElector>,
    cancel: &CancellationToken,
    acquired: Instant,
) -> JoinHandle<(bool, Instant)> {
    let (b, cancel) = (Arc::clone(b), cancel.clone());
    tokio::spawn(async move {
        let lost = b.hold(&cancel, acquired).await;
        (lost, Instant::now())
    })
}

/// Watches the Lease until `rounds` more renewals by `b` landed on it (each: when it was seen,
/// its renewTime), asserting `b` leads and holds it throughout.
pub(super) async fn renewals(
    sim: &KubeSim,
    holding: &JoinHandle<(bool, Instant)>,
    rounds: usize,
    what: &str,
) -> Vec<(Instant, jiff::Timestamp)> {
    let mut seen = Vec::new();
    let mut last = lease(sim).expect("the lease exists").1;
    // A virtual-time bound: far more than `rounds` renewals take at any latency tested.
    let bound = Instant::now() + Duration::from_secs(30) * u32::try_from(rounds).unwrap_or(1);
    while seen.len() < rounds {
        tokio::time::sleep(LOOK).await;
        assert!(
            !holding.is_finished(),
            "{what}: b stopped leading after {} renewals",
            seen.len()
        );
        let (holder, renew) = lease(sim).expect("the lease exists");
        assert_eq!(holder, "b", "{what}: the lease changed hands");
        if renew != last {
            assert!(
                renew > last,
                "{what}: renewTime went back: {last} then {renew}"
            );
            seen.push((Instant::now(), renew));
            last = renew;
        }
        assert!(
            Instant::now() < bound,
            "{what}: only {} renewals in {:?} of virtual time",
            seen.len(),
            Duration::from_secs(30) * u32::try_from(rounds).unwrap_or(1)
        );
    }
    seen
}

/// With every lease request delayed by `percent` of the renew deadline from the start (the
/// acquisition too), `b` takes the lease, keeps it over [`ROUNDS`] renewals, and, once cut off
/// from the apiserver entirely, stops leading before its lease may expire for the others.
async fn keeps_the_lease_then_steps_down_in_time(percent: u32) {
    let (sim, client) = cluster().await;
    let config = upstream("b");
    let latency = config.renew_deadline * percent / 100;
    let what = format!("lease requests delayed {latency:?} ({percent}% of the renew deadline)");
    sim.faults()
        .add_latency(RequestMatcher::resource("leases"), latency);
    let b = Arc::new(LeaderElector::new(client, config.clone()));
    let cancel = CancellationToken::new();
    let acquired = acquire(&b, &cancel, &what).await;
    let holding = hold(&b, &cancel, acquired);
    let mut seen = renewals(&sim, &holding, ROUNDS, &what).await;

    // The fault fired: every lease request waited the latency, and the renewals were the
    // holder's single PUT (the one GET is the acquisition's, answered 404 before the POST).
    let requests = lease_requests(&sim);
    assert!(
        requests.iter().all(|(_, _, delay)| *delay == latency),
        "{what}: a lease request was not delayed: {requests:?}"
    );
    let renewed = requests
        .iter()
        .filter(|(method, status, _)| method == "PUT" && *status == 200)
        .count();
    assert!(renewed >= ROUNDS, "{what}: {requests:?}");
    let gets = requests.iter().filter(|(m, _, _)| m == "GET").count();
    assert_eq!(
        gets, 1,
        "{what}: renewals read the lease first: {requests:?}"
    );

    // The fence: b is cut off (its requests wait an hour). A renewal already on its way still
    // lands; the next ones never do.
    sim.faults().add_latency(
        RequestMatcher::resource("leases"),
        Duration::from_secs(3600),
    );
    let bound = Instant::now() + Duration::from_secs(60);
    while !holding.is_finished() {
        assert!(
            Instant::now() < bound,
            "{what}: b still leads 60 s after it was cut off"
        );
        tokio::time::sleep(LOOK).await;
        if let Some((_, renew)) = lease(&sim)
            && seen.last().is_some_and(|(_, last)| renew != *last)
        {
            seen.push((Instant::now(), renew));
        }
    }
    let (lost, stopped) = holding.await.expect("the hold task");
    assert!(lost, "{what}: hold reports leadership lost");
    // The last renewal changed the Lease between one look and the next, `latency` after b sent
    // it; the attempt that sent it started no later (a renewal is one PUT, nothing else takes
    // virtual time). Another replica may take the lease a lease duration after it saw that
    // change; b counts from the send, whatever part of the latency lay before the apiserver.
    let (seen_at, _) = seen.last().expect("renewals were seen");
    let sent = *seen_at - LOOK - latency;
    let expires = sent + config.lease_duration;
    assert!(
        stopped < expires,
        "{what}: b led until {:?} after its last renewal was sent; the lease may pass after {:?}",
        stopped - sent,
        config.lease_duration
    );
}

#[tokio::test(start_paused = true)]
async fn a_leader_keeps_its_lease_when_lease_requests_take_20_percent_of_the_renew_deadline() {
    keeps_the_lease_then_steps_down_in_time(20).await;
}

#[tokio::test(start_paused = true)]
async fn a_leader_keeps_its_lease_when_lease_requests_take_40_percent_of_the_renew_deadline() {
    keeps_the_lease_then_steps_down_in_time(40).await;
}

/// At 60 % a round starts a retry period after a renewal that took 6 s, so its renew deadline
/// would end 18 s after that renewal was sent, past the 15 s lease: only the fence stops b in
/// time.
#[tokio::test(start_paused = true)]
async fn a_leader_keeps_its_lease_when_lease_requests_take_60_percent_of_the_renew_deadline() {
    keeps_the_lease_then_steps_down_in_time(60).await;
}

/// A slow acquisition (a GET answered 404 and a POST, 4.5 s each: 9 s of the 10 s renew
/// deadline) is followed by a real renewal, not by an exit "a renewal did not finish within the
/// renew deadline after=0ns" a retry period later.
#[tokio::test(start_paused = true)]
async fn a_slow_acquisition_is_followed_by_a_renewal_not_an_exit() {
    let (sim, client) = cluster().await;
    let config = upstream("b");
    let latency = config.renew_deadline * 45 / 100;
    sim.faults()
        .add_latency(RequestMatcher::resource("leases"), latency);
    let b = Arc::new(LeaderElector::new(client, config));
    let cancel = CancellationToken::new();
    let acquired = acquire(&b, &cancel, "a slow acquisition").await;
    assert!(
        acquired.elapsed() >= latency * 2,
        "the acquisition was slow: {:?}",
        acquired.elapsed()
    );
    let holding = hold(&b, &cancel, acquired);
    renewals(&sim, &holding, 1, "after a slow acquisition").await;
    let methods: Vec<String> = lease_requests(&sim)
        .into_iter()
        .map(|(m, s, _)| format!("{m} {s}"))
        .collect();
    assert_eq!(methods, ["GET 404", "POST 201", "PUT 200"], "{methods:?}");
    cancel.cancel();
    let (lost, _) = holding.await.expect("the hold task");
    assert!(!lost, "cancelled, not lost");
}

/// Finding 11 of the soak: against an apiserver slowed to seconds per request, a renewal that
/// hangs must not keep this process leading past the point where the other replica may take
/// the lease (a lease duration after the last renewal it saw). In paused time, so the bound
/// is exact (review of 2026-11-28, tests.md #15: it was a wall-clock bound).
#[tokio::test(start_paused = true)]
async fn a_leader_whose_renewals_hang_steps_down_before_its_lease_expires() {
    let (sim, client) = cluster().await;
    let lease_duration = Duration::from_secs(2);
    let b = LeaderElector::new(
        client,
        config(
            "b",
            lease_duration,
            lease_duration / 2,
            Duration::from_millis(100),
        ),
    );
    let acquired = b
        .acquire(&CancellationToken::new())
        .await
        .expect("an uncontended lease is taken");
    sim.faults()
        .add_latency(RequestMatcher::resource("leases"), Duration::from_secs(30));
    // A virtual-time bound, so a hold that never returns fails instead of running forever.
    let lost = tokio::time::timeout(
        Duration::from_secs(60),
        b.hold(&CancellationToken::new(), acquired),
    )
    .await
    .expect("hold returned while its renewals hung");
    assert!(lost, "hold reports leadership lost");
    // The acquisition was the last write that landed; with no latency then it was sent at
    // `acquired`, so the lease may pass `lease_duration` later.
    assert!(
        acquired.elapsed() < lease_duration,
        "still leading {:?} after its last renewal; the lease lasts {lease_duration:?}",
        acquired.elapsed()
    );
}
