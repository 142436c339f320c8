//! The harness itself: a node initialised and a load balancer ensured and deleted in process.

use std::sync::Arc;

use serde_json::Value;

use crate::controllers::node::NodeController;
use crate::controllers::service::ServiceController;
use crate::machinery::runner::Reconciler;
use crate::test_support::{FakeCloud, Harness, instance, lb_service_json, node_json};

#[tokio::test]
async fn a_tainted_node_is_initialised_from_the_fake_cloud() {
    let cloud = FakeCloud::default();
    cloud.add_instance("n1", instance("i-1"));
    let h = Harness::start(cloud, vec![node_json("n1", None, true, true)]).await;
    let c = NodeController::new(Arc::clone(&h.ctx));
    c.reconcile("n1").await.expect("initialised");
    let node = h.node("n1").expect("node");
    assert_eq!(
        node.pointer("/spec/providerID"),
        Some(&Value::from("fake://i-1"))
    );
    assert_eq!(node.pointer("/spec/taints"), None, "{node}");
    assert_eq!(
        node.pointer("/metadata/labels/node.kubernetes.io~1instance-type"),
        Some(&Value::from("standard"))
    );
}

#[tokio::test]
async fn a_load_balancer_is_ensured_then_deleted_in_process() {
    let h = Harness::start(
        FakeCloud::default(),
        vec![
            node_json("n1", Some("fake://i-1"), false, true),
            lb_service_json("default", "web"),
        ],
    )
    .await;
    let c = ServiceController::new(Arc::clone(&h.ctx));
    c.reconcile("default/web").await.expect("ensured");
    let svc = h.service("default", "web").expect("service");
    assert_eq!(
        svc.pointer("/status/loadBalancer/ingress/0/ip"),
        Some(&Value::from("192.0.2.10")),
        "{svc}"
    );
    assert_eq!(
        h.cloud.backends.lock().unwrap().get("default/web"),
        Some(&vec!["n1".to_string()])
    );
    // Back to ClusterIP: the load balancer goes, and so do the finalizer and the ingress.
    let api: kube::Api<k8s_openapi::api::core::v1::Service> =
        kube::Api::namespaced(h.client.clone(), "default");
    api.patch(
        "web",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"spec": {"type": "ClusterIP", "ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080}]}})),
    )
    .await
    .expect("patch");
    h.settle().await;
    c.reconcile("default/web").await.expect("cleaned up");
    assert_eq!(
        h.cloud.calls_of("load-balancer.delete"),
        1,
        "{:?}",
        h.cloud.calls()
    );
    let svc = h.service("default", "web").expect("service");
    assert_eq!(svc.pointer("/metadata/finalizers"), None, "{svc}");
    assert!(h.cloud.balancers.lock().unwrap().is_empty());
}

#[tokio::test]
async fn controllers_start_from_the_table_by_flag_switch_and_export() {
    use crate::config::ControllerConfig;
    use crate::registry::EnabledControllers;
    use crate::run::start_with_cloud;
    use tokio_util::sync::CancellationToken;
    use wasm_ccm_runtime::Exports;

    let h = Harness::start(FakeCloud::default(), Vec::new()).await;
    let started = |exports: Exports, controllers: &str, routes: bool| {
        let cloud = FakeCloud {
            exports,
            ..FakeCloud::default()
        };
        let config = ControllerConfig {
            configure_cloud_routes: routes,
            ..ControllerConfig::default()
        };
        let controllers = EnabledControllers::parse(&[controllers.to_string()]).expect("flag");
        let cancel = CancellationToken::new();
        let running = start_with_cloud(
            h.client.clone(),
            Arc::new(crate::cloud::Fixed(Arc::new(cloud))),
            config,
            controllers,
            Arc::new(crate::metrics::Metrics::default()),
            "test",
            cancel.clone(),
        );
        cancel.cancel();
        // The queue-driven controllers started (node, service), by their pending counters.
        running.pending.len()
    };
    let all = Exports {
        instances: true,
        load_balancer: true,
        routes: true,
    };
    assert_eq!(started(all, "*", true), 2);
    assert_eq!(started(all, "*,-service", true), 1);
    assert_eq!(started(all, "service", false), 1);
    let no_lb = Exports {
        load_balancer: false,
        ..all
    };
    assert_eq!(
        started(no_lb, "*", true),
        1,
        "no load-balancer export: no service controller"
    );
    let nothing = Exports::default();
    assert_eq!(started(nothing, "*", true), 0);
}

/// Upstream's `running_managed_controllers`: 1 for each controller that started (upstream's
/// short names), none for one whose start failed (routes without `--cluster-cidr`), 0 after
/// the stop.
#[tokio::test]
async fn running_controllers_are_exported_under_upstreams_names() {
    use crate::config::ControllerConfig;
    use crate::registry::EnabledControllers;
    use crate::run::start_with_cloud;
    use tokio_util::sync::CancellationToken;

    let h = Harness::start(FakeCloud::default(), Vec::new()).await;
    let metrics = Arc::new(crate::metrics::Metrics::default());
    let cancel = CancellationToken::new();
    let running = start_with_cloud(
        h.client.clone(),
        Arc::new(crate::cloud::Fixed(Arc::new(FakeCloud::default()))),
        ControllerConfig::default(),
        EnabledControllers::parse(&["*".to_string()]).expect("flag"),
        Arc::clone(&metrics),
        "test",
        cancel.clone(),
    );
    let series = |name: &str| {
        let labels = [("name", name), ("manager", "cloud-controller-manager")];
        metrics.value("running_managed_controllers", &labels)
    };
    for name in ["cloud-node", "cloud-node-lifecycle", "service"] {
        assert_eq!(series(name), 1.0, "{name}");
    }
    let text = metrics.render();
    assert!(!text.contains(r#"name="route""#), "{text}");
    cancel.cancel();
    for _ in 0..200 {
        if series("service") == 0.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    for name in ["cloud-node", "cloud-node-lifecycle", "service"] {
        assert_eq!(series(name), 0.0, "{name} after the stop");
    }
    drop(running);
}

/// Upstream's route controller starts only with `--configure-cloud-routes` and a cloud that
/// has routes: with a valid `--cluster-cidr` it runs by default, and neither switch off nor a
/// driver without `routes` starts it.
#[tokio::test]
async fn the_route_controller_needs_the_switch_and_a_routes_capable_cloud() {
    use crate::config::ControllerConfig;
    use crate::registry::EnabledControllers;
    use crate::run::start_with_cloud;
    use tokio_util::sync::CancellationToken;
    use wasm_ccm_runtime::Exports;

    let h = Harness::start(FakeCloud::default(), Vec::new()).await;
    let route_started = |routes_export: bool, switch: bool| {
        let metrics = Arc::new(crate::metrics::Metrics::default());
        let cloud = FakeCloud {
            exports: Exports {
                instances: true,
                load_balancer: true,
                routes: routes_export,
            },
            ..FakeCloud::default()
        };
        let config = ControllerConfig {
            cluster_cidr: "10.120.0.0/16".into(),
            configure_cloud_routes: switch,
            ..ControllerConfig::default()
        };
        let cancel = CancellationToken::new();
        let _running = start_with_cloud(
            h.client.clone(),
            Arc::new(crate::cloud::Fixed(Arc::new(cloud))),
            config,
            EnabledControllers::parse(&["*".to_string()]).expect("flag"),
            Arc::clone(&metrics),
            "test",
            cancel.clone(),
        );
        cancel.cancel();
        let text = metrics.render();
        // The positive control of each start: the node controller's series is there.
        assert!(text.contains(r#"name="cloud-node""#), "{text}");
        text.contains(r#"running_managed_controllers{name="route""#)
    };
    assert!(route_started(true, true), "the default starts it");
    assert!(
        !route_started(true, false),
        "--configure-cloud-routes=false"
    );
    assert!(!route_started(false, true), "a driver without routes");
}

/// Upstream's `UnAvailableLoadBalancer` Warning: a load balancer ensured with no node to send
/// traffic to says so on its Service; with a ready node it does not.
#[tokio::test]
async fn a_load_balancer_without_nodes_is_reported_unavailable() {
    let unavailable = |events: Vec<String>| {
        events
            .iter()
            .any(|e| e.starts_with("UnAvailableLoadBalancer:"))
    };
    let h = Harness::start(
        FakeCloud::default(),
        vec![lb_service_json("default", "web")],
    )
    .await;
    let c = ServiceController::new(Arc::clone(&h.ctx));
    c.reconcile("default/web").await.expect("ensured");
    assert!(
        unavailable(h.events_for("web")),
        "{:?}",
        h.events_for("web")
    );
    // The control: the same Service with a ready node.
    let h = Harness::start(
        FakeCloud::default(),
        vec![
            node_json("n1", Some("fake://i-1"), false, true),
            lb_service_json("default", "web"),
        ],
    )
    .await;
    let c = ServiceController::new(Arc::clone(&h.ctx));
    c.reconcile("default/web").await.expect("ensured");
    let events = h.events_for("web");
    assert!(
        events.iter().any(|e| e.starts_with("EnsuredLoadBalancer:")),
        "{events:?}"
    );
    assert!(!unavailable(events.clone()), "{events:?}");
}
