use serde_json::json;

use super::*;
use crate::informer::Informer;

fn informers() -> (Informer<Node>, Informer<Service>) {
    let config = kube::Config::new("http://127.0.0.1:1".parse().expect("a URL"));
    let client = kube::Client::try_from(config).expect("a client");
    (
        Informer::new(kube::Api::all(client.clone())),
        Informer::new(kube::Api::all(client)),
    )
}

fn node(zone: &str, uid: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": "worker-1", "uid": uid, "labels": {"topology.kubernetes.io/zone": zone}},
    }))
    .expect("a node")
}

fn log(grace: u64) -> ShadowLog {
    ShadowLog::new(ShadowOptions {
        grace: Duration::from_secs(grace),
        validate_on_server: false,
        events: false,
    })
}

fn zone_patch(zone: &str) -> Value {
    json!({"metadata": {"resourceVersion": "7", "labels": {"topology.kubernetes.io/zone": zone}}})
}

#[tokio::test]
async fn a_repeated_write_is_one_difference_and_a_new_one_updates_it() {
    let (nodes, services) = informers();
    nodes.replace(vec![node("lpg1", "u1")]);
    let shadow = log(0);
    let patch = KubeChange::Patch {
        patch: &zone_patch("LPG1"),
        status: false,
    };
    assert_eq!(
        shadow.record_kube("node", "Node", "worker-1", patch, None),
        Recorded::Changed
    );
    for _ in 0..10 {
        let again = KubeChange::Patch {
            patch: &zone_patch("LPG1"),
            status: false,
        };
        assert_eq!(
            shadow.record_kube("node", "Node", "worker-1", again, None),
            Recorded::Repeated,
            "a resync repeating the write is not news"
        );
    }
    let report = shadow.report("d", &nodes.store(), &services.store());
    assert_eq!(report.summary.diverged, 1, "{report:?}");
    assert_eq!(report.differences.len(), 1);
    let d = &report.differences[0];
    assert_eq!((d.attempts, d.action.as_str()), (11, "patch"));
    assert_eq!(d.changes.len(), 1);
    assert_eq!(d.changes[0].from, Some(json!("lpg1")));
    assert_eq!(d.changes[0].to, json!("LPG1"));
    // A different would-be value updates the same entry.
    let other = KubeChange::Patch {
        patch: &zone_patch("lpg2"),
        status: false,
    };
    assert_eq!(
        shadow.record_kube("node", "Node", "worker-1", other, None),
        Recorded::Changed
    );
    let report = shadow.report("d", &nodes.store(), &services.store());
    assert_eq!(report.differences.len(), 1);
    assert_eq!(report.differences[0].changes[0].to, json!("lpg2"));
    assert!(!report.agrees());
    assert!(
        report
            .to_text()
            .contains(r#"~ metadata.labels["topology.kubernetes.io/zone"]  "lpg1" → "lpg2""#)
    );
}

#[tokio::test]
async fn a_write_the_ccm_in_charge_also_makes_is_agreed_and_pending_before_the_grace() {
    let (nodes, services) = informers();
    nodes.replace(vec![node("lpg1", "u1")]);
    let shadow = log(3600);
    let patch = KubeChange::Patch {
        patch: &zone_patch("LPG1"),
        status: false,
    };
    shadow.record_kube("node", "Node", "worker-1", patch, None);
    let report = shadow.report("d", &nodes.store(), &services.store());
    assert_eq!(report.differences[0].verdict, Verdict::Pending);
    assert!(report.agrees(), "pending is not diverged");
    // The CCM in charge writes the same value.
    nodes.replace(vec![node("LPG1", "u1")]);
    let report = shadow.report("d", &nodes.store(), &services.store());
    assert_eq!(report.differences[0].verdict, Verdict::Agreed);
    assert!(report.differences[0].changes.is_empty());
}

#[tokio::test]
async fn a_delete_is_settled_by_the_object_going_or_being_replaced() {
    let (nodes, services) = informers();
    nodes.replace(vec![node("z", "u1")]);
    let shadow = log(0);
    shadow.record_kube(
        "node-lifecycle",
        "Node",
        "worker-1",
        KubeChange::Delete { uid: Some("u1") },
        None,
    );
    let report = shadow.report("d", &nodes.store(), &services.store());
    assert_eq!(report.differences[0].verdict, Verdict::Diverged);
    assert!(report.to_text().contains("- would delete the Node"));
    nodes.replace(vec![node("z", "u2")]);
    let report = shadow.report("d", &nodes.store(), &services.store());
    assert_eq!(report.differences[0].verdict, Verdict::Agreed);
}

#[tokio::test]
async fn a_cloud_write_is_settled_by_a_later_call_that_needs_none() {
    let (nodes, services) = informers();
    let shadow = log(0);
    let post = vec!["POST https://api/v1/load-balancers".to_string()];
    assert_eq!(
        shadow.record_cloud(
            "load-balancer.ensure",
            "Service",
            "default/web",
            post.clone(),
            false
        ),
        Recorded::Changed
    );
    assert_eq!(
        shadow.record_cloud(
            "load-balancer.ensure",
            "Service",
            "default/web",
            post,
            false
        ),
        Recorded::Repeated
    );
    let report = shadow.report("d", &nodes.store(), &services.store());
    assert_eq!(report.summary.diverged, 1);
    assert!(
        report
            .to_text()
            .contains("+ POST https://api/v1/load-balancers")
    );
    // A later call finds what it needs without writing: the CCM in charge built it.
    shadow.record_cloud(
        "load-balancer.ensure",
        "Service",
        "default/web",
        vec![],
        true,
    );
    let report = shadow.report("d", &nodes.store(), &services.store());
    assert_eq!(
        report.summary,
        Summary {
            pending: 0,
            agreed: 1,
            diverged: 0
        }
    );
    // A failed call without writes settles nothing.
    let other = vec!["DELETE https://api/v1/x".to_string()];
    shadow.record_cloud(
        "load-balancer.delete",
        "Service",
        "default/old",
        other,
        false,
    );
    shadow.record_cloud(
        "load-balancer.delete",
        "Service",
        "default/old",
        vec![],
        false,
    );
    let report = shadow.report("d", &nodes.store(), &services.store());
    assert_eq!(report.summary.diverged, 1);
}

#[tokio::test]
async fn the_report_survives_a_round_trip_through_json() {
    let (nodes, services) = informers();
    let shadow = log(0);
    shadow.record_cloud(
        "routes.create",
        "Driver",
        "",
        vec!["POST https://x/r".into()],
        false,
    );
    let report = shadow.report("d", &nodes.store(), &services.store());
    let text = serde_json::to_string(&report).expect("json");
    let back: ShadowReport = serde_json::from_str(&text).expect("parses");
    assert_eq!(back, report);
}

/// In process against the Kubernetes simulator: the controllers in shadow mode.
mod in_process {
    use std::sync::Arc;

    use serde_json::json;

    use crate::config::ControllerConfig;
    use crate::lifecycle::LifecycleController;
    use crate::node::NodeController;
    use crate::runner::Reconciler;
    use crate::shadow::{ShadowOptions, Verdict};
    use crate::test_support::{FakeCloud, Harness, instance, node_json};

    async fn shadow_harness(cloud: FakeCloud, node: serde_json::Value, validate: bool) -> Harness {
        let config = ControllerConfig {
            shadow: Some(ShadowOptions {
                grace: std::time::Duration::ZERO,
                validate_on_server: validate,
                events: false,
            }),
            ..Default::default()
        };
        Harness::start_with(cloud, vec![node], config).await
    }

    #[tokio::test]
    async fn a_shadow_initialises_nothing_and_reports_what_it_would_write() {
        let cloud = FakeCloud::default();
        cloud.add_instance("n1", instance("i-1"));
        let h = shadow_harness(cloud, node_json("n1", None, true, true), false).await;
        let c = NodeController::new(Arc::clone(&h.ctx));
        c.reconcile("n1")
            .await
            .expect("a shadow reconcile succeeds");
        c.reconcile("n1").await.expect("again (a resync)");
        assert_eq!(
            h.writes("nodes", "n1"),
            Vec::<String>::new(),
            "nothing sent"
        );
        assert_eq!(h.events_for("n1"), Vec::<String>::new(), "no events");
        let report = h.ctx.shadow_report().expect("a shadow run has a report");
        assert_eq!(report.summary.diverged, 1, "{}", report.to_text());
        let d = &report.differences[0];
        assert_eq!(
            (d.kind.as_str(), d.object.as_str(), d.action.as_str()),
            ("Node", "n1", "patch")
        );
        assert_eq!(d.attempts, 2, "one difference, two attempts");
        let paths: Vec<&str> = d.changes.iter().map(|c| c.path.as_str()).collect();
        assert!(paths.contains(&"spec.providerID"), "{paths:?}");
        assert!(paths.contains(&"spec.taints"), "{paths:?}");
        // The CCM in charge initialises the node the same way: the shadow agrees.
        let api: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(h.client.clone());
        let labels: serde_json::Map<String, serde_json::Value> = d
            .changes
            .iter()
            .filter_map(|c| {
                let key = c.path.strip_prefix("metadata.labels[")?.strip_suffix(']')?;
                Some((serde_json::from_str::<String>(key).ok()?, c.to.clone()))
            })
            .collect();
        let patch = json!({
            "metadata": {"labels": labels},
            "spec": {"providerID": "fake://i-1", "taints": []},
        });
        api.patch(
            "n1",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .expect("the CCM in charge writes");
        h.settle().await;
        let report = h.ctx.shadow_report().expect("report");
        assert_eq!(
            report.differences[0].verdict,
            Verdict::Agreed,
            "{}",
            report.to_text()
        );
        assert!(report.agrees());
    }

    #[tokio::test]
    async fn a_shadow_deletes_no_node_and_validates_on_the_server_when_asked() {
        let cloud = FakeCloud::default();
        cloud
            .exists
            .lock()
            .expect("lock")
            .insert("n1".into(), Ok(false));
        let h = shadow_harness(
            cloud,
            node_json("n1", Some("fake://i-1"), false, false),
            true,
        )
        .await;
        LifecycleController::new(Arc::clone(&h.ctx))
            .monitor_nodes()
            .await;
        assert!(h.node("n1").is_some(), "the node is still there");
        // The dry run reached the apiserver, which judged it and committed nothing.
        let writes = h.writes("nodes", "n1");
        assert_eq!(writes, vec!["DELETE ".to_string()], "one dry-run delete");
        // (kube-rs sends `dryRun` in the DeleteOptions body; the node still being there after
        // an accepted DELETE is the proof.)
        let report = h.ctx.shadow_report().expect("report");
        let d = &report.differences[0];
        assert_eq!(
            (d.action.as_str(), d.verdict),
            ("delete", Verdict::Diverged)
        );
        assert_eq!(d.apiserver.as_deref(), Some("accepted"));
        assert!(report.to_text().contains("- would delete the Node"));
    }
}

mod announcing {
    use std::sync::Arc;
    use std::time::Duration;

    use crate::config::ControllerConfig;
    use crate::context::Events;
    use crate::lifecycle::LifecycleController;
    use crate::shadow::{ShadowOptions, announce_divergences};
    use crate::test_support::{FakeCloud, Harness, node_json};

    #[tokio::test]
    async fn with_shadow_events_each_divergence_is_one_event() {
        let cloud = FakeCloud::default();
        cloud
            .exists
            .lock()
            .expect("lock")
            .insert("n1".into(), Ok(false));
        let config = ControllerConfig {
            shadow: Some(ShadowOptions {
                grace: Duration::ZERO,
                validate_on_server: false,
                events: true,
            }),
            ..Default::default()
        };
        let h = Harness::start_with(
            cloud,
            vec![node_json("n1", Some("fake://i-1"), false, false)],
            config,
        )
        .await;
        let lifecycle = LifecycleController::new(Arc::clone(&h.ctx));
        lifecycle.monitor_nodes().await;
        let cancel = tokio_util::sync::CancellationToken::new();
        let task = tokio::spawn(announce_divergences(
            Arc::clone(&h.ctx),
            Events::new(h.client.clone(), "test".into()),
            Duration::from_millis(5),
            cancel.clone(),
        ));
        let started = std::time::Instant::now();
        while h.events_for("n1").is_empty() {
            assert!(started.elapsed() < Duration::from_secs(10), "no event");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // More passes and more resyncs: still one event (same divergence, not changed).
        for _ in 0..5 {
            lifecycle.monitor_nodes().await;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        cancel.cancel();
        task.await.expect("the task ends on cancel");
        // One Event object (events.k8s.io and core/v1 are two views of the same store), never
        // repeated as a series (kube-rs would count a second publication there).
        let events: Vec<serde_json::Value> = h
            .sim
            .list("events.events.k8s.io")
            .into_iter()
            .filter(|e| e.pointer("/regarding/name").and_then(|n| n.as_str()) == Some("n1"))
            .collect();
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0]["reason"], "ShadowDiverged", "{events:?}");
        assert!(
            events[0].get("series").is_none_or(|s| s.is_null()),
            "{events:?}"
        );
        let note = events[0]["note"].as_str().unwrap_or_default();
        assert!(note.contains("would delete this Node"), "{note}");
        assert!(h.node("n1").is_some());
    }
}
