//! The route controller as `start` wires it, in process against the Kubernetes simulator: with
//! KEP-5237's gate a new node gets its route from the node event, not from the period, and the
//! passes are counted by trigger and outcome. Also a pass's cap on route calls in flight.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::config::ControllerConfig;
use crate::controllers::route::rules::parse_cluster_cidrs;
use crate::controllers::route::{MAX_IN_FLIGHT, RouteController};
use crate::metrics::Metrics;
use crate::registry::EnabledControllers;
use crate::run::start_with_cloud;
use crate::test_support::{FakeCloud, Harness, stays_pending};

fn node(name: &str, uid: &str, cidr: &str, ip: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": uid},
        "spec": {"podCIDR": cidr, "podCIDRs": [cidr]},
        "status": {"addresses": [{"type": "InternalIP", "address": ip}]},
    })
}

/// The period of the tests that never wait for one.
const HOUR: Duration = Duration::from_secs(3600);

/// Starts the route controller alone with the gate and the period as given. The tasks run as
/// long as the returned `Running` lives.
async fn routes_only(
    h: &Harness,
    watch_based: bool,
    period: Duration,
) -> (Arc<Metrics>, CancellationToken, crate::run::Running) {
    let metrics = Arc::new(Metrics::default());
    let cancel = CancellationToken::new();
    let config = ControllerConfig {
        cluster_cidr: "10.120.0.0/16".into(),
        route_reconciliation_period: period,
        watch_based_routes: watch_based,
        ..ControllerConfig::default()
    };
    let controllers = EnabledControllers::parse(&["route".to_string()]).expect("flag");
    let running = start_with_cloud(
        h.client.clone(),
        Arc::new(crate::cloud::Fixed(Arc::clone(&h.cloud) as _)),
        config,
        controllers,
        Arc::clone(&metrics),
        "test",
        cancel.clone(),
    );
    (metrics, cancel, running)
}

fn routed(h: &Harness) -> Vec<String> {
    let mut to: Vec<String> = h
        .cloud
        .routes
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.target_node.clone())
        .collect();
    to.sort();
    to
}

/// Polls (bounded) until `check` holds; the bound is far above the 10 s rate limit.
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..600 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never: {what}");
}

async fn add_node(h: &Harness, value: Value) {
    let api: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(h.client.clone());
    let node = serde_json::from_value(value).expect("a node");
    api.create(&kube::api::PostParams::default(), &node)
        .await
        .expect("created");
}

#[tokio::test]
async fn with_the_gate_a_new_node_gets_its_route_from_its_event() {
    let h = Harness::start(
        FakeCloud::default(),
        vec![node("node-1", "01", "10.120.1.0/24", "10.0.0.1")],
    )
    .await;
    let (metrics, cancel, _running) = routes_only(&h, true, HOUR).await;
    // The initial list's add event is the first pass.
    eventually("node-1 routed", || routed(&h) == ["node-1"]).await;
    add_node(&h, node("node-2", "02", "10.120.2.0/24", "10.0.0.2")).await;
    // Within the 10 s rate limit, not the hour's period.
    eventually("node-2 routed", || routed(&h) == ["node-1", "node-2"]).await;
    // A pass is counted at its end, after its route calls: wait for the count too.
    let second = r#"route_controller_route_sync_total{trigger="node_change",outcome="changed"} 2"#;
    eventually("the second pass counted", || {
        metrics.render().contains(second)
    })
    .await;
    let text = metrics.render();
    assert!(!text.contains(r#"trigger="periodic""#), "{text}");
    assert!(
        !text.contains("route_controller_route_corrections_total "),
        "{text}"
    );
    cancel.cancel();
}

/// Without the gate the pass at start is the period's: counted as `periodic`, and no node
/// event adds a pass (the gated test's second route came from one within 10 s; here the next
/// pass is an hour away, which no test waits for).
#[tokio::test]
async fn without_the_gate_passes_are_periodic() {
    let h = Harness::start(
        FakeCloud::default(),
        vec![node("node-1", "01", "10.120.1.0/24", "10.0.0.1")],
    )
    .await;
    let (metrics, cancel, _running) = routes_only(&h, false, HOUR).await;
    eventually("node-1 routed", || routed(&h) == ["node-1"]).await;
    // A pass is counted at its end, after its route calls: wait for the count too.
    let first = r#"route_controller_route_sync_total{trigger="periodic",outcome="changed"} 1"#;
    eventually("the pass counted", || metrics.render().contains(first)).await;
    let text = metrics.render();
    assert!(!text.contains(r#"trigger="node_change""#), "{text}");
    cancel.cancel();
}

/// Without the gate, the period alone brings a new node its route: the pass repeats every
/// `--route-reconciliation-period` (upstream's `wait.NonSlidingUntil`).
#[tokio::test]
async fn without_the_gate_the_period_repeats_the_pass() {
    let h = Harness::start(
        FakeCloud::default(),
        vec![node("node-1", "01", "10.120.1.0/24", "10.0.0.1")],
    )
    .await;
    let (metrics, cancel, _running) = routes_only(&h, false, Duration::from_millis(200)).await;
    eventually("node-1 routed", || routed(&h) == ["node-1"]).await;
    add_node(&h, node("node-2", "02", "10.120.2.0/24", "10.0.0.2")).await;
    eventually("node-2 routed by a later period", || {
        routed(&h) == ["node-1", "node-2"]
    })
    .await;
    eventually("two passes counted", || {
        metrics.total("route_controller_route_sync_total") >= 2.0
    })
    .await;
    assert!(!metrics.render().contains(r#"trigger="node_change""#));
    cancel.cancel();
}

/// Upstream's `maxConcurrentRouteOperations`: a pass with 250 routes to create (then one with 250
/// to delete) and every such call held has exactly 200 in flight, starts no more while they are
/// held, and makes all 250 once they answer.
#[tokio::test]
async fn at_most_200_route_operations_are_in_flight() {
    const ROUTES: usize = 250;
    assert_eq!(MAX_IN_FLIGHT, 200, "upstream's cap");
    for function in ["routes.create", "routes.delete"] {
        let cloud = FakeCloud::default();
        let mut nodes = Vec::new();
        for i in 0..ROUTES {
            let cidr = format!("10.120.{i}.0/24");
            if function == "routes.create" {
                let ip = format!("10.0.{}.{}", i / 200, i % 200 + 1);
                nodes.push(node(&format!("node-{i}"), &format!("uid-{i}"), &cidr, &ip));
            } else {
                // A route to a node that is gone: deleted.
                cloud
                    .routes
                    .lock()
                    .unwrap()
                    .push(wasm_ccm_runtime::types::Route {
                        name: format!("route-{i}"),
                        target_node: format!("gone-{i}"),
                        target_node_addresses: Vec::new(),
                        destination_cidr: cidr,
                        blackhole: false,
                    });
            }
        }
        let h = Harness::start(cloud, nodes).await;
        let hold = h.cloud.hold(function);
        let cidrs = parse_cluster_cidrs("10.120.0.0/16").expect("cluster CIDR");
        let controller = RouteController::new(Arc::clone(&h.ctx), cidrs);
        let pass = controller.reconcile();
        tokio::pin!(pass);
        tokio::select! {
            _ = &mut pass => panic!("{function}: the pass ended although its calls are held"),
            () = hold.until_held(MAX_IN_FLIGHT, function) => {}
        }
        // The pass is polled again and again while the 200 are held: it starts no 201st.
        stays_pending(pass.as_mut(), "the pass ended although its calls are held").await;
        assert_eq!(hold.held(), MAX_IN_FLIGHT, "{function}: calls in flight");
        assert_eq!(h.cloud.calls_of(function), MAX_IN_FLIGHT, "{function}");
        hold.release();
        let outcome = pass.await.expect("the pass");
        assert_eq!((outcome.planned, outcome.failed), (ROUTES, 0), "{function}");
        assert_eq!(h.cloud.calls_of(function), ROUTES, "{function}");
        assert_eq!(hold.peak(), MAX_IN_FLIGHT, "{function}: the most in flight");
    }
}
