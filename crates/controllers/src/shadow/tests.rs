use serde_json::json;

use super::*;
use crate::machinery::informer::Informer;

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

fn member_post() -> Vec<String> {
    vec!["POST https://api/v1/load-balancers/pools/p1/members".to_string()]
}

/// The review's case: the shadow's `update` wanted a pool member for a node that joined; the
/// CCM in charge added it later, with its `ensure`. The shadow's next `ensure` needs no write,
/// and that settles the `update` write too: agreement is judged by the cloud, not by which
/// function asks.
#[tokio::test]
async fn a_cloud_write_is_agreed_when_a_later_call_of_another_function_needs_none() {
    let (nodes, services) = informers();
    let shadow = log(3600);
    let web = "default/web";
    shadow.record_cloud("load-balancer.update", "Service", web, member_post(), false);
    // The failed update is followed by an ensure, refused the same way.
    shadow.record_cloud("load-balancer.ensure", "Service", web, member_post(), false);
    assert_eq!(shadow.due_for_recheck("Service"), vec![web.to_string()]);
    // Calls that decide nothing about the cloud state of web settle nothing: a read of it, and
    // the whole-state call of another Service.
    shadow.record_cloud("load-balancer.get", "Service", web, vec![], true);
    shadow.record_cloud(
        "load-balancer.ensure",
        "Service",
        "default/api",
        vec![],
        true,
    );
    let report = shadow.report("d", &nodes.store(), &services.store());
    assert_eq!(
        report.summary,
        Summary {
            pending: 2,
            agreed: 0,
            diverged: 0
        },
        "{}",
        report.to_text()
    );
    // The CCM in charge made the member (however): the shadow's ensure finds nothing to write.
    shadow.record_cloud("load-balancer.ensure", "Service", web, vec![], true);
    let report = shadow.report("d", &nodes.store(), &services.store());
    assert_eq!(
        report.summary,
        Summary {
            pending: 0,
            agreed: 2,
            diverged: 0
        },
        "{}",
        report.to_text()
    );
    let update = report
        .differences
        .iter()
        .find(|d| d.action == "load-balancer.update")
        .expect("the update's write is still listed");
    assert_eq!(
        update.settled.as_deref(),
        Some("a later load-balancer.ensure needed no cloud write")
    );
    assert!(
        report
            .to_text()
            .contains("= the cloud has it: a later load-balancer.ensure needed no cloud write"),
        "{}",
        report.to_text()
    );
    assert!(report.agrees());
    assert!(
        shadow.due_for_recheck("Service").is_empty(),
        "agreed: nothing left to recheck"
    );
}

/// `update` looks at the members only: its finding nothing to write settles its own write, not
/// an `ensure` write (a listener) it never looked at; `delete` decides the whole state.
#[tokio::test]
async fn only_a_whole_state_call_answers_for_another_functions_write() {
    let (nodes, services) = informers();
    let shadow = log(3600);
    let web = "default/web";
    let listener = vec!["POST https://api/v1/load-balancers/listeners".to_string()];
    shadow.record_cloud("load-balancer.ensure", "Service", web, listener, false);
    shadow.record_cloud("load-balancer.update", "Service", web, member_post(), false);
    shadow.record_cloud("load-balancer.update", "Service", web, vec![], true);
    let report = shadow.report("d", &nodes.store(), &services.store());
    let verdict = |action: &str| {
        report
            .differences
            .iter()
            .find(|d| d.action == action)
            .map(|d| d.verdict)
    };
    assert_eq!(verdict("load-balancer.update"), Some(Verdict::Agreed));
    assert_eq!(verdict("load-balancer.ensure"), Some(Verdict::Pending));
    // The Service went away and its load balancer with it: the delete finds nothing to do.
    shadow.record_cloud("load-balancer.delete", "Service", web, vec![], true);
    let report = shadow.report("d", &nodes.store(), &services.store());
    assert_eq!(report.summary.agreed, 2, "{}", report.to_text());
}

/// The CCM in charge never makes the member: every later call still wants it. Pending and
/// rechecked within the grace; diverged after it, and no longer rechecked.
#[tokio::test]
async fn a_cloud_write_that_never_agrees_is_diverged_after_the_grace() {
    let (nodes, services) = informers();
    let shadow = log(600);
    let web = "default/web";
    shadow.record_cloud("load-balancer.update", "Service", web, member_post(), false);
    // Later calls: an ensure that still wants the member, a failed one without writes, a read.
    for _ in 0..3 {
        shadow.record_cloud("load-balancer.ensure", "Service", web, member_post(), false);
        shadow.record_cloud("load-balancer.ensure", "Service", web, vec![], false);
        shadow.record_cloud("load-balancer.get", "Service", web, vec![], true);
    }
    let now = jiff::Timestamp::now();
    let report = shadow.report_at("d", &nodes.store(), &services.store(), now);
    assert_eq!(report.summary.pending, 2, "{}", report.to_text());
    assert_eq!(
        shadow.due_for_recheck_at("Service", now),
        vec![web.to_string()]
    );
    let later = now + jiff::SignedDuration::from_secs(601);
    let report = shadow.report_at("d", &nodes.store(), &services.store(), later);
    assert_eq!(
        report.summary,
        Summary {
            pending: 0,
            agreed: 0,
            diverged: 2
        },
        "{}",
        report.to_text()
    );
    assert!(!report.agrees());
    assert!(report.differences.iter().all(|d| d.settled.is_none()));
    assert!(
        shadow.due_for_recheck_at("Service", later).is_empty(),
        "past the grace: no more rechecks"
    );
}

#[tokio::test]
async fn the_recheck_period_is_a_tenth_of_the_grace_within_bounds() {
    assert_eq!(log(600).recheck_period(), Duration::from_secs(30));
    assert_eq!(log(120).recheck_period(), Duration::from_secs(12));
    assert_eq!(log(0).recheck_period(), Duration::from_secs(1));
    assert_eq!(log(86_400).recheck_period(), Duration::from_secs(30));
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

/// A shadow of several drivers answers one report: both logs' differences, diverged first,
/// the counts summed, the drivers named in order; one report is returned as it is.
#[tokio::test]
async fn several_drivers_reports_merge_into_one() {
    let (nodes, services) = informers();
    let (cloud, metal) = (log(0), log(3600));
    // cloud: a diverged cloud write (grace 0); metal: a pending one.
    cloud.record_cloud(
        "routes.create",
        "Driver",
        "",
        vec!["POST https://c/r".into()],
        false,
    );
    metal.record_cloud(
        "load-balancer.ensure",
        "Service",
        "default/bare",
        vec!["POST https://m/ip-blocks".into()],
        false,
    );
    let (a, b) = (
        cloud.report("cloud", &nodes.store(), &services.store()),
        metal.report("metal", &nodes.store(), &services.store()),
    );
    assert_eq!(ShadowReport::merge(vec![a.clone()]), Some(a.clone()));
    assert_eq!(ShadowReport::merge(Vec::new()), None);
    let merged = ShadowReport::merge(vec![b.clone(), a.clone()]).expect("two reports");
    assert_eq!(merged.driver, "metal, cloud");
    assert_eq!(merged.summary.diverged, 1);
    assert_eq!(merged.summary.pending, 1);
    let order: Vec<(&str, Verdict)> = merged
        .differences
        .iter()
        .map(|d| (d.object.as_str(), d.verdict))
        .collect();
    assert_eq!(
        order,
        [("", Verdict::Diverged), ("default/bare", Verdict::Pending)],
        "diverged first, whichever driver's"
    );
    assert!(!merged.agrees());
}

/// In process against the Kubernetes simulator: the controllers in shadow mode.
mod in_process {
    use std::sync::Arc;

    use serde_json::json;

    use crate::config::ControllerConfig;
    use crate::controllers::lifecycle::LifecycleController;
    use crate::controllers::node::NodeController;
    use crate::machinery::runner::Reconciler;
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

    /// A pending cloud write is looked at again even when nothing else re-runs its Service:
    /// here the driver carries on past the refused write and its `ensure` succeeds, so the
    /// service controller has no failure to retry and no change to react to. The shadow's
    /// recheck re-runs the reconcile (read-only) while the write is still wanted, and once the
    /// cloud has it (the CCM in charge made it) the write is agreed.
    #[tokio::test]
    async fn a_shadow_rechecks_a_pending_cloud_write_until_the_cloud_has_it() {
        use crate::controllers::service::ServiceController;
        use crate::test_support::lb_service_json;

        let cloud = FakeCloud::default();
        let member = "POST https://api/v1/load-balancers/pools/p1/members".to_string();
        cloud
            .refused
            .lock()
            .expect("lock")
            .insert("load-balancer.ensure", vec![member.clone()]);
        let config = ControllerConfig {
            shadow: Some(ShadowOptions {
                grace: std::time::Duration::from_secs(3600),
                validate_on_server: false,
                events: false,
            }),
            ..Default::default()
        };
        let h = Harness::start_with(
            cloud,
            vec![
                node_json("n1", Some("fake://i-1"), false, true),
                lb_service_json("default", "web"),
            ],
            config,
        )
        .await;
        let shadow = Arc::clone(h.ctx.shadow.as_ref().expect("a shadow run"));
        let c = ServiceController::new(Arc::clone(&h.ctx));
        let cancel = tokio_util::sync::CancellationToken::new();
        let workers = tokio::spawn(Arc::clone(&c).run(cancel.clone()));
        c.enqueue("default/web".into());
        let ensure_entry = |report: &crate::shadow::ShadowReport| {
            report
                .differences
                .iter()
                .find(|d| d.target == "cloud" && d.action == "load-balancer.ensure")
                .cloned()
        };
        let report = poll(&h, "the ensure's refused write", |r| {
            ensure_entry(r).is_some()
        })
        .await;
        let d = ensure_entry(&report).expect("found");
        assert_eq!(
            (d.verdict, d.cloud_writes.clone()),
            (Verdict::Pending, vec![member])
        );
        let recheck = Arc::clone(&c);
        let rechecks = tokio::spawn(crate::shadow::recheck_pending(
            shadow,
            "Service",
            std::time::Duration::from_millis(10),
            move |key| recheck.enqueue(key),
            cancel.clone(),
        ));
        // While the write is still wanted the recheck re-runs the ensure and it stays pending.
        poll(&h, "two rechecks that still want the member", |r| {
            ensure_entry(r).is_some_and(|d| d.attempts >= 3 && d.verdict == Verdict::Pending)
        })
        .await;
        // The CCM in charge adds the member: the next recheck finds nothing to write.
        h.cloud.refused.lock().expect("lock").clear();
        let report = poll(&h, "the write agreed", |r| {
            ensure_entry(r).is_some_and(|d| d.verdict == Verdict::Agreed)
        })
        .await;
        assert_eq!(
            ensure_entry(&report).and_then(|d| d.settled),
            Some("a later load-balancer.ensure needed no cloud write".to_string())
        );
        cancel.cancel();
        workers.await.expect("the workers stop on cancel");
        rechecks.await.expect("the recheck stops on cancel");
        // Every look was read-only: the Service was never written to.
        assert_eq!(h.writes("services", "web"), Vec::<String>::new());
    }

    /// Polls the shadow report (bounded) until `cond` holds.
    async fn poll(
        h: &Harness,
        what: &str,
        cond: impl Fn(&crate::shadow::ShadowReport) -> bool,
    ) -> crate::shadow::ShadowReport {
        let started = std::time::Instant::now();
        loop {
            let report = h.ctx.shadow_report().expect("a shadow run has a report");
            if cond(&report) {
                return report;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(30),
                "timed out waiting for {what}: {}",
                report.to_text()
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
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
    use crate::controllers::lifecycle::LifecycleController;
    use crate::events::Events;
    use crate::shadow::ShadowOptions;
    use crate::shadow::announce::Announcer;
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
        // One pass at a time, each finished (its events published) before the next: the
        // first announces the divergence, the later ones, with resyncs between, find it
        // announced already.
        let mut announcer = Announcer::new(
            Arc::clone(&h.ctx),
            Events::new(h.client.clone(), "test".into()),
        );
        let published = || {
            h.sim
                .list("events.events.k8s.io")
                .into_iter()
                .filter(|e| e.pointer("/regarding/name").and_then(|n| n.as_str()) == Some("n1"))
                .count()
        };
        assert_eq!(
            announcer.pass().await,
            Some(1),
            "the divergence is announced"
        );
        assert_eq!(published(), 1);
        for round in 2..=6 {
            lifecycle.monitor_nodes().await;
            // The divergence is still there and was wanted again (so a pass has something to
            // announce if it forgot it), yet it is not announced again.
            let report = h.ctx.shadow_report().expect("report");
            assert_eq!(report.summary.diverged, 1, "{}", report.to_text());
            assert_eq!(report.differences[0].attempts, round);
            assert_eq!(
                announcer.pass().await,
                Some(0),
                "the same divergence again: not announced again"
            );
        }
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
        // Control: a pass with a fresh memory announces it again, so the passes above did see
        // the divergence and held back only because it was announced.
        let mut forgetful = Announcer::new(
            Arc::clone(&h.ctx),
            Events::new(h.client.clone(), "test".into()),
        );
        assert_eq!(forgetful.pass().await, Some(1));
    }
}
