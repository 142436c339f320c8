//! The listing's rules (pages, ambiguity, bounds) and its use by the node and lifecycle
//! controllers, against the Kubernetes simulator and the scripted fake cloud.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use wasm_ccm_runtime::types::{InstancePage, ListedInstance, Node as WitNode, ProviderError};

use super::*;
use crate::config::ControllerConfig;
use crate::controllers::lifecycle::LifecycleController;
use crate::controllers::node::NodeController;
use crate::machinery::runner::Reconciler;
use crate::test_support::{FakeCloud, Harness, SCHEME, instance, node_json};

fn listed(node_name: &str, id: &str, shutdown: bool) -> ListedInstance {
    ListedInstance {
        node_name: node_name.into(),
        metadata: instance(id),
        shutdown,
    }
}

fn wit(name: &str, provider_id: &str) -> WitNode {
    WitNode {
        name: name.into(),
        provider_id: provider_id.into(),
        ..WitNode::default()
    }
}

fn found_id(found: &Listed) -> Option<&str> {
    match found {
        Listed::Found(l) => Some(l.metadata.provider_id.as_str()),
        Listed::AskPerNode => None,
    }
}

#[test]
fn a_node_is_found_by_provider_id_else_by_a_name_listed_once() {
    let snapshot = Snapshot::new(
        Instant::now(),
        0,
        vec![
            listed("a", "1", false),
            listed("b", "2", false),
            // Two instances claim node c, and two share provider ID 4: neither answers.
            listed("c", "3", false),
            listed("c", "4", false),
            listed("d", "4", false),
            listed("", "5", false),
        ],
    );
    let find = |name, id| found_id(&snapshot.find(&wit(name, id))).map(str::to_string);
    assert_eq!(find("a", ""), Some("fake://1".into()));
    assert_eq!(find("whatever", "fake://2"), Some("fake://2".into()));
    // A node with a provider ID is never matched by name: its ID is not listed, so it is
    // asked alone.
    assert_eq!(find("a", "fake://9"), None);
    assert_eq!(find("c", ""), None);
    assert_eq!(find("d", "fake://4"), None);
    assert_eq!(find("d", ""), Some("fake://4".into()));
    assert_eq!(find("", ""), None);
    assert_eq!(find("x", "fake://5"), Some("fake://5".into()));
}

#[test]
fn pages_are_held_to_their_bounds() {
    let mut rules = PageRules::new(SCHEME);
    assert_eq!(
        rules.take(vec![listed("a", "1", false)], Some("p2".into())),
        Ok(Some("p2".into()))
    );
    assert_eq!(rules.take(vec![listed("b", "2", false)], None), Ok(None));
    assert_eq!(rules.into_instances().len(), 2);

    let mut rules = PageRules::new(SCHEME);
    let mut other = listed("a", "1", false);
    other.metadata.provider_id = "aws:///i-1".into();
    let e = rules.take(vec![other], None).unwrap_err();
    assert!(e.contains("not fake://<id>"), "{e}");

    let mut rules = PageRules::new(SCHEME);
    assert!(rules.take(Vec::new(), Some("same".into())).is_ok());
    let e = rules.take(Vec::new(), Some("same".into())).unwrap_err();
    assert!(e.contains("came twice"), "{e}");

    let mut rules = PageRules::new(SCHEME);
    for page in 1..MAX_PAGES {
        assert!(rules.take(Vec::new(), Some(page.to_string())).is_ok());
    }
    let e = rules.take(Vec::new(), Some("last".into())).unwrap_err();
    assert!(e.contains("more than 1000 pages"), "{e}");
    // The last page may end the listing at the bound.
    let mut rules = PageRules::new(SCHEME);
    for page in 1..MAX_PAGES {
        assert!(rules.take(Vec::new(), Some(page.to_string())).is_ok());
    }
    assert_eq!(rules.take(Vec::new(), None), Ok(None));

    let mut rules = PageRules::new(SCHEME);
    let many: Vec<ListedInstance> = (0..=MAX_INSTANCES)
        .map(|i| listed("", &i.to_string(), false))
        .collect();
    let e = rules.take(many, None).unwrap_err();
    assert!(e.contains("more than 100000 instances"), "{e}");
}

/// The settings with the listing on (it is off by default).
fn listing_on() -> ControllerConfig {
    ControllerConfig {
        instance_listing_max_age: Duration::from_secs(30),
        ..ControllerConfig::default()
    }
}

/// Uninitialised, NotReady nodes `node-0..n` with no provider ID.
fn new_nodes(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| node_json(&format!("node-{i}"), None, true, false))
        .collect()
}

fn provider_id(h: &Harness, name: &str) -> Option<String> {
    h.node(name)?
        .pointer("/spec/providerID")?
        .as_str()
        .map(str::to_string)
}

#[tokio::test]
async fn one_listing_initialises_many_nodes_without_a_call_per_node() {
    let cloud = FakeCloud::default();
    // Two pages: the host follows `next`.
    *cloud.pages.lock().unwrap_or_else(|p| p.into_inner()) = Some(vec![
        InstancePage {
            instances: vec![listed("node-0", "0", false), listed("node-1", "1", false)],
            next: Some("1".into()),
        },
        InstancePage {
            instances: vec![listed("node-2", "2", false)],
            next: None,
        },
    ]);
    let h = Harness::start_with(cloud, new_nodes(4), listing_on()).await;
    let controller = NodeController::new(Arc::clone(&h.ctx));
    for i in 0..3 {
        let name = format!("node-{i}");
        controller.reconcile(&name).await.expect(&name);
        assert_eq!(provider_id(&h, &name), Some(format!("fake://{i}")));
    }
    // node-3 is not listed: it is asked about alone, and the fake has no instance for it.
    assert!(controller.reconcile("node-3").await.is_err());
    assert_eq!(
        h.cloud.calls(),
        vec![
            "instance-listing.list-instances -",
            "instance-listing.list-instances 1",
            "instances.instance-metadata node-3",
        ],
        "one listing (two pages) for three nodes, a per-node call for the unlisted one"
    );
    assert_eq!(provider_id(&h, "node-3"), None);
}

/// NotReady nodes with provider IDs: gone (not listed, and the driver says it does not
/// exist), off (listed, shut down), kept (listed, running).
async fn three_not_ready_nodes() -> Harness {
    let cloud = FakeCloud::default();
    cloud.list(vec![
        listed("off", "off", true),
        listed("kept", "kept", false),
    ]);
    cloud
        .exists
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert("gone".into(), Ok(false));
    let nodes = ["gone", "off", "kept"]
        .iter()
        .map(|n| node_json(n, Some(&format!("fake://{n}")), false, false))
        .collect();
    Harness::start_with(cloud, nodes, listing_on()).await
}

#[tokio::test]
async fn the_lifecycle_pass_never_deletes_on_a_listing_alone() {
    let h = three_not_ready_nodes().await;
    // The pass never takes a listing itself: without one at hand every node is asked alone.
    LifecycleController::new(Arc::clone(&h.ctx))
        .monitor_nodes()
        .await;
    assert_eq!(h.cloud.calls_of("instance-listing.list-instances"), 0);
    assert_eq!(h.cloud.calls_of("instances.instance-exists"), 3);
    // With one at hand (the status pass or initialisation just took it), the listed nodes are
    // answered from it.
    let h = three_not_ready_nodes().await;
    h.ctx
        .cloud
        .listed(&wit("kept", "fake://kept"), Duration::MAX)
        .await;
    LifecycleController::new(Arc::clone(&h.ctx))
        .monitor_nodes()
        .await;
    assert!(
        h.node("gone").is_none(),
        "deleted on the driver's own answer"
    );
    assert!(h.node("kept").is_some());
    let taints = h
        .node("off")
        .and_then(|n| n.pointer("/spec/taints").cloned());
    assert!(
        taints.is_some_and(|t| t.to_string().contains("shutdown")),
        "the listed shutdown state taints the node"
    );
    let mut calls = h.cloud.calls();
    calls.sort();
    assert_eq!(
        calls,
        vec![
            "instance-listing.list-instances -",
            "instances.instance-exists gone",
        ],
        "the listed nodes cost no per-node call"
    );
}

#[tokio::test]
async fn a_driver_that_cannot_list_is_asked_once_and_then_per_node() {
    // The fake without pages answers not-implemented without recording a call.
    let h = Harness::start_with(FakeCloud::default(), new_nodes(1), listing_on()).await;
    h.cloud.add_instance("node-0", instance("0"));
    let controller = NodeController::new(Arc::clone(&h.ctx));
    controller.reconcile("node-0").await.expect("node-0");
    let calls = || {
        h.ctx.metrics.value(
            "wasm_ccm_driver_calls_total",
            &[
                ("driver", "fake"),
                ("function", "instance-listing.list-instances"),
                ("result", "not-implemented"),
            ],
        )
    };
    assert_eq!(calls(), 1.0);
    assert_eq!(
        h.ctx
            .cloud
            .listed(&wit("node-0", "fake://0"), Duration::MAX)
            .await,
        Listed::AskPerNode
    );
    assert_eq!(calls(), 1.0, "not asked again");
    assert_eq!(h.cloud.calls(), vec!["instances.instance-metadata node-0"]);
}

#[tokio::test]
async fn a_failed_or_refused_listing_falls_back_per_node_for_its_age() {
    let cloud = FakeCloud::default();
    cloud.list(vec![listed("node-0", "0", false)]);
    cloud.fail(
        "instance-listing.list-instances",
        ProviderError::Transient("503".into()),
    );
    let h = Harness::start_with(cloud, new_nodes(2), listing_on()).await;
    h.cloud.add_instance("node-0", instance("0"));
    h.cloud.add_instance("node-1", instance("1"));
    let controller = NodeController::new(Arc::clone(&h.ctx));
    controller.reconcile("node-0").await.expect("node-0");
    controller.reconcile("node-1").await.expect("node-1");
    assert_eq!(
        h.cloud.calls(),
        vec![
            "instance-listing.list-instances -",
            "instances.instance-metadata node-0",
            "instances.instance-metadata node-1",
        ],
        "one failed listing, not one per node"
    );
    let outcome = |o| {
        h.ctx.metrics.value(
            "wasm_ccm_instance_listings_total",
            &[("driver", "fake"), ("outcome", o)],
        )
    };
    assert_eq!(outcome("failed"), 1.0);

    // A listing with a foreign provider ID is refused whole.
    let mut foreign = listed("node-0", "0", false);
    foreign.metadata.provider_id = "other://0".into();
    let cloud = FakeCloud::default();
    cloud.list(vec![foreign, listed("node-1", "1", false)]);
    let h = Harness::start_with(cloud, new_nodes(2), listing_on()).await;
    h.cloud.add_instance("node-1", instance("1"));
    NodeController::new(Arc::clone(&h.ctx))
        .reconcile("node-1")
        .await
        .expect("node-1");
    assert_eq!(
        h.cloud.calls(),
        vec![
            "instance-listing.list-instances -",
            "instances.instance-metadata node-1",
        ]
    );
    let refused = h.ctx.metrics.value(
        "wasm_ccm_instance_listings_total",
        &[("driver", "fake"), ("outcome", "refused")],
    );
    assert_eq!(refused, 1.0);
}

#[tokio::test(start_paused = true)]
async fn a_listing_answers_for_its_age_then_is_taken_again() {
    let provider: SharedCloud = Arc::new(FakeCloud::default());
    let listing = InstanceListing::new(Duration::from_secs(30));
    let taken = std::sync::atomic::AtomicUsize::new(0);
    let take = || async {
        taken.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(vec![listed("node-0", "0", false)])
    };
    let node = wit("node-0", "fake://0");
    let count = || taken.load(std::sync::atomic::Ordering::Relaxed);
    assert!(matches!(
        listing.find(&provider, &node, Duration::MAX, take).await,
        Listed::Found(_)
    ));
    tokio::time::advance(Duration::from_secs(29)).await;
    assert!(matches!(
        listing.find(&provider, &node, Duration::MAX, take).await,
        Listed::Found(_)
    ));
    assert_eq!(count(), 1);
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(matches!(
        listing.find(&provider, &node, Duration::MAX, take).await,
        Listed::Found(_)
    ));
    assert_eq!(count(), 2);
    // Another provider (a reload swapped the driver) lists again at once.
    let reloaded: SharedCloud = Arc::new(FakeCloud::default());
    assert!(matches!(
        listing.find(&reloaded, &node, Duration::MAX, take).await,
        Listed::Found(_)
    ));
    assert_eq!(count(), 3);
    // Zero turns listing off.
    let off = InstanceListing::new(Duration::ZERO);
    assert_eq!(
        off.find(&provider, &node, Duration::MAX, take).await,
        Listed::AskPerNode
    );
    assert_eq!(count(), 3);
    // A caller's shorter period bounds the age: a listing older than it is taken again.
    tokio::time::advance(Duration::from_secs(5)).await;
    assert!(matches!(
        listing
            .find(&reloaded, &node, Duration::from_secs(4), take)
            .await,
        Listed::Found(_)
    ));
    assert_eq!(count(), 4);
    // At hand only: never takes one, and only a young enough one answers.
    tokio::time::advance(Duration::from_secs(3)).await;
    let at_hand = |within| listing.find_at_hand(&reloaded, &node, within);
    assert!(matches!(
        at_hand(Duration::from_secs(5)).await,
        Listed::Found(_)
    ));
    assert_eq!(at_hand(Duration::from_secs(2)).await, Listed::AskPerNode);
    assert_eq!(count(), 4);
}
