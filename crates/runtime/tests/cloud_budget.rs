//! One cloud request budget per driver (issue 50 item 3), against the cloudscale simulator over
//! loopback: the budget holds across the driver's instances, a request the call's deadline
//! leaves no room for is refused unsent, and the cloud's 429 pauses every instance of that
//! driver and no other. (The budget's rules under paused time: `src/capability/http/budget`.)

mod common;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OnceCell;
use wasm_ccm_drivers::CLOUDSCALE_DRIVER;
use wasm_ccm_runtime::http::budget::{Outcome, RequestBudget};
use wasm_ccm_runtime::{CallScope, Compiled, Driver, DriverOptions, PoolOptions};
use wasm_ccm_runtime::{InitInput, http};
use wasm_ccm_sim::cloudscale::{CloudscaleOptions, CloudscaleSim, Match, SeedServer};
use wasm_ccm_sim::kit::SimCloud as _;

async fn compiled() -> &'static Compiled {
    static COMPILED: OnceCell<Compiled> = OnceCell::const_new();
    COMPILED
        .get_or_init(|| common::compile(CLOUDSCALE_DRIVER))
        .await
}

async fn sim() -> CloudscaleSim {
    let sim = CloudscaleSim::start(
        "127.0.0.1:0".parse().expect("addr"),
        CloudscaleOptions::default(),
    )
    .await
    .expect("simulator starts");
    sim.add_server(SeedServer::new("worker-1").public(&["5.102.148.11"]));
    sim
}

/// The cloudscale driver against `sim`, with `budget` and calls of `call_timeout`.
async fn driver(
    sim: &CloudscaleSim,
    budget: Option<Arc<RequestBudget>>,
    call_timeout: Duration,
) -> Driver {
    let setup = sim.driver_setup();
    let opts = DriverOptions {
        init: InitInput {
            env: setup.env,
            ..Default::default()
        },
        pool: PoolOptions {
            call_timeout,
            max_concurrency: 8,
            ..Default::default()
        },
        http: http::Config {
            egress: Some(
                wasm_ccm_runtime::EgressPolicy::parse(&setup.egress).expect("egress grants"),
            ),
            request_budget: budget,
            ..Default::default()
        },
        ..Default::default()
    };
    common::runtime()
        .load(compiled().await, opts)
        .await
        .expect("driver loads")
}

fn scope() -> CallScope {
    CallScope::object("kube-system/worker-1")
}

/// `n` instance-metadata calls at once; the texts of the failed ones.
async fn calls_at_once(driver: &Driver, n: usize) -> Vec<String> {
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..n {
        let driver = driver.clone();
        calls.spawn(async move {
            let node = common::node("worker-1");
            match driver.instance_metadata(&node, &scope()).await.result {
                Ok(_) => None,
                Err(other) => Some(format!("{other:?}")),
            }
        });
    }
    calls.join_all().await.into_iter().flatten().collect()
}

/// Requests the simulator received.
fn received(sim: &CloudscaleSim) -> usize {
    sim.requests().len()
}

#[tokio::test]
async fn the_budget_holds_across_the_drivers_instances_and_refuses_unsent_at_the_deadline() {
    let sim = sim().await;
    // Latency keeps calls in flight together, so the pool runs several instances.
    sim.faults().set_latency(Duration::from_millis(300));

    // Positive control: without a budget, 8 calls at once make 8 requests (one each).
    let free = driver(&sim, None, Duration::from_secs(5)).await;
    assert_eq!(calls_at_once(&free, 8).await, Vec::<String>::new());
    let per_call = received(&sim) / 8;
    assert!(per_call >= 1, "each call reaches the cloud");
    sim.clear_requests();

    // A budget of 3 requests and (practically) no refill, for calls of 3 s: whatever instance
    // a call runs in, only 3 requests leave; the others are refused before the deadline, unsent.
    let budget = Arc::new(RequestBudget::new(0.0001, 3));
    let limited = driver(&sim, Some(budget.clone()), Duration::from_secs(3)).await;
    let failed = calls_at_once(&limited, 8).await;
    let instances = limited
        .stats()
        .instances_created
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(instances >= 2, "the calls ran in {instances} instance(s)");
    assert_eq!(received(&sim), 3, "the budget's 3, over all instances");
    let counts = budget.counts();
    assert_eq!(
        counts.get(Outcome::Sent) + counts.get(Outcome::Waited),
        3,
        "{counts:?}"
    );
    assert!(counts.get(Outcome::RefusedByBudget) >= 1, "{counts:?}");
    assert!(!failed.is_empty());
    assert_eq!(
        limited
            .cloud_requests()
            .map(|c| c.get(Outcome::RefusedByBudget)),
        Some(counts.get(Outcome::RefusedByBudget)),
        "the handle reports the same budget"
    );
}

#[tokio::test]
async fn a_429_pauses_every_instance_of_that_driver_and_no_other() {
    let sim = sim().await;
    let paused_budget = Arc::new(RequestBudget::new(0.0, 1));
    let paused = driver(&sim, Some(paused_budget.clone()), Duration::from_secs(5)).await;
    let other_budget = Arc::new(RequestBudget::new(0.0, 1));
    let other = driver(&sim, Some(other_budget.clone()), Duration::from_secs(5)).await;

    // The cloud throttles the next request (the paused driver's) for 30 s: the 429 goes back to
    // the driver, and the budget pauses.
    sim.faults().throttle_next(Match::any(), 30, 1);
    let first = calls_at_once(&paused, 1).await;
    assert_eq!(first.len(), 1, "the throttled call fails");
    assert_eq!(received(&sim), 1);
    assert_eq!(paused_budget.counts().get(Outcome::RateLimitedByCloud), 1);

    // Every instance of that driver waits: calls of 5 s cannot outlast a 30 s pause, so they
    // fail at once, and none of their requests reaches the cloud.
    let failed = calls_at_once(&paused, 4).await;
    assert_eq!(failed.len(), 4, "{failed:?}");
    assert_eq!(received(&sim), 1, "no request left during the pause");
    // (At least 4: a driver that retries a 429 within its call is refused the same way.)
    let counts = paused_budget.counts();
    assert!(counts.get(Outcome::RefusedWhilePaused) >= 4, "{counts:?}");

    // The other driver (its own budget) goes on: its request reaches the same cloud.
    assert_eq!(calls_at_once(&other, 2).await, Vec::<String>::new());
    assert!(received(&sim) >= 3, "the other driver's requests arrived");
    assert_eq!(other_budget.counts().get(Outcome::RefusedWhilePaused), 0);
}
