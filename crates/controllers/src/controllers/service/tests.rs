//! The service controller's concurrency, in process against the Kubernetes simulator, with the
//! fake cloud's calls held in flight: `--concurrent-service-syncs` workers sync that many
//! Services at once, and a Service's sync and the node sync's update of that Service never
//! overlap (upstream's `TestSlowNodeSync`, which upstream runs with Go goroutines against a
//! blocking fake, asked the same of its per-Service lock).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::ControllerConfig;
use crate::controllers::service::ServiceController;
use crate::machinery::runner::Reconciler;
use crate::test_support::{FakeCloud, Harness, lb_service_json, node_json, stays_pending};

const SERVICES: usize = 6;

/// `--concurrent-service-syncs` (0 is taken as 1): with every `load-balancer.ensure` held, that
/// many Services are in flight and the others wait in the queue; released, all are ensured.
#[tokio::test]
async fn concurrent_service_syncs_is_the_number_of_services_synced_at_once() {
    // (--concurrent-service-syncs, Services in flight)
    for (workers, in_flight) in [(3, 3), (1, 1), (0, 1)] {
        let mut objects = vec![node_json("node-0", Some("fake://node-0"), false, true)];
        objects.extend((0..SERVICES).map(|i| lb_service_json("default", &format!("lb-{i}"))));
        let config = ControllerConfig {
            concurrent_service_syncs: workers,
            ..ControllerConfig::default()
        };
        let h = Harness::start_with(FakeCloud::default(), objects, config).await;
        let hold = h.cloud.hold("load-balancer.ensure");
        let c = ServiceController::new(Arc::clone(&h.ctx));
        let cancel = CancellationToken::new();
        let running = tokio::spawn(Arc::clone(&c).run(cancel.clone()));
        for i in 0..SERVICES {
            c.enqueue(format!("default/lb-{i}"));
        }
        let what = format!("--concurrent-service-syncs={workers}");
        hold.until_held(in_flight, &what).await;
        // Every worker took a key as soon as it was queued; the held ones keep theirs.
        let waiting = c.runner.waiting();
        assert_eq!(c.runner.pending() - waiting, in_flight, "{what}: in flight");
        assert_eq!(waiting, SERVICES - in_flight, "{what}: waiting");
        assert_eq!(hold.held(), in_flight, "{what}");
        hold.release();
        for _ in 0..1000 {
            if c.pending() == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(c.pending(), 0, "{what}: the queue never drained");
        assert_eq!(h.cloud.calls_of("load-balancer.ensure"), SERVICES, "{what}");
        assert_eq!(hold.peak(), in_flight, "{what}: the most in flight");
        cancel.cancel();
        running.await.expect("the controller's task");
    }
}

/// While a Service's sync is inside `load-balancer.ensure`, the node sync does not update that
/// Service's load balancer (it waits for the Service's key); once the ensure answers, the node
/// sync finds the backends already current and sends no update.
#[tokio::test]
async fn a_services_sync_and_the_node_sync_of_that_service_are_serialised() {
    let key = "default/lb";
    let h = Harness::start(
        FakeCloud::default(),
        vec![
            node_json("node-0", Some("fake://node-0"), false, true),
            lb_service_json("default", "lb"),
        ],
    )
    .await;
    let c = ServiceController::new(Arc::clone(&h.ctx));
    c.reconcile(key).await.expect("ensured");
    // A new backend: the node sync has an update to make.
    h.sim
        .seed(vec![node_json(
            "node-1",
            Some("fake://node-1"),
            false,
            true,
        )])
        .expect("node");
    h.settle().await;
    // A backend set is reused for up to a second (`backends.rs`): wait for one with node-1.
    for _ in 0..300 {
        if !c.backends.recent().1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(!c.backends.recent().1, "the backend set never caught up");
    let hold = h.cloud.hold("load-balancer.ensure");
    let sync = c.reconcile(key);
    tokio::pin!(sync);
    tokio::select! {
        _ = &mut sync => panic!("the sync ended although its ensure is held"),
        () = hold.until_held(1, "the Service's sync") => {}
    }
    let node_sync = c.sync_backends();
    tokio::pin!(node_sync);
    {
        let both = async {
            tokio::select! {
                _ = &mut sync => {}
                _ = &mut node_sync => {}
            }
        };
        tokio::pin!(both);
        stays_pending(
            both,
            "the sync or the node sync ended while the ensure was held",
        )
        .await;
    }
    assert_eq!(
        h.cloud.calls_of("load-balancer.update"),
        0,
        "the node sync updated the load balancer while the Service's ensure was in flight"
    );
    hold.release();
    let (synced, _) = tokio::join!(sync, node_sync);
    synced.expect("ensured");
    let calls = h.cloud.calls();
    assert_eq!(h.cloud.calls_of("load-balancer.update"), 0, "{calls:?}");
    let mut backends = h.cloud.backends.lock().unwrap().get(key).cloned();
    if let Some(names) = &mut backends {
        names.sort();
    }
    assert_eq!(
        backends,
        Some(vec!["node-0".to_string(), "node-1".to_string()]),
        "the ensure gave the current nodes: {calls:?}"
    );
}
