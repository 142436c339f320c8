//! The load balancers' backend set, converted once per change of the node cache and shared by
//! every Service (upstream's service controller keeps one node set too). Before this, each
//! ensure listed and converted every node again, and each Service kept its own copy of the
//! node list as its "last backends": memory grew with nodes × Services (667 MiB at 5,000 nodes
//! and 1,000 Services). Now a Service keeps an `Arc` of the set it was given, so equal sets are
//! one allocation, and the WIT node list is built once and handed to every call by reference.
//!
//! The WIT list keeps its generation while its content is unchanged, so a driver instance copies
//! the nodes into its memory once per change of the set (`cluster.nodes`), not once per Service:
//! a node cache that changed in a way no backend sees (another node's heartbeat, a label outside
//! the set) costs a comparison here and nothing in the guest.
//!
//! While nodes initialise, the cache changes many times a second; rebuilding the set (and every
//! guest fetching it again) for each ensure made that phase cost nodes × Services. So ensures and
//! node-sync passes take a set at most [`REUSE_FOR`] older than the cache ([`Backends::recent`]),
//! and whoever used a stale set wakes one more node-sync pass, which compares each load
//! balancer's set with a fresh one and updates it: the result converges as before, a node
//! change reaches the load balancers at most a pass later.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use k8s_openapi::api::core::v1::Node;
use wasm_ccm_runtime::SharedNodes;
use wasm_ccm_runtime::types::Node as WitNode;

use crate::controllers::service::rules::{BackendKey, backend_key, is_backend};
use crate::convert::node_to_wit;
use crate::machinery::informer::Store;
use crate::routing::DriverView;

/// One backend set: its comparable key and its nodes as the driver sees them.
#[derive(Clone)]
pub(crate) struct BackendSet {
    /// Names and provider IDs, sorted: what decides whether a load balancer needs an update.
    pub key: Arc<BackendKey>,
    /// The backend nodes in WIT form, handed to each `ensure` and `update` by generation.
    pub nodes: SharedNodes,
}

/// How long a set built from an older node cache still serves (see the module doc).
pub(crate) const REUSE_FOR: Duration = Duration::from_secs(1);

/// A set and what it was built from.
struct Built {
    /// The node cache's generation it was built from.
    generation: u64,
    /// When it was built.
    at: Instant,
    set: BackendSet,
}

/// The current [`BackendSet`], rebuilt only when the node cache changed.
pub(crate) struct Backends {
    nodes: Store<Node>,
    /// With several drivers, only this driver's nodes are backends.
    owner: Option<DriverView>,
    current: Mutex<Option<Built>>,
}

impl Backends {
    /// Backend sets of the nodes in `nodes` (those `owner` owns, when given).
    pub(crate) fn new(nodes: Store<Node>, owner: Option<DriverView>) -> Self {
        Backends {
            nodes,
            owner,
            current: Mutex::new(None),
        }
    }

    /// A backend set at most [`REUSE_FOR`] older than the node cache, and whether it is older
    /// (then the caller wakes a node-sync pass, which brings every load balancer up to date).
    /// Sets only move forward: a later call never returns an older set than an earlier one.
    pub(crate) fn recent(&self) -> (BackendSet, bool) {
        self.get(REUSE_FOR)
    }

    fn get(&self, reuse_for: Duration) -> (BackendSet, bool) {
        // The generation first: a set built from a later list is then at worst newer than its
        // label, and the next call rebuilds it.
        let generation = self.nodes.generation();
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(built) = current.as_ref()
            && (built.generation == generation || built.at.elapsed() < reuse_for)
        {
            return (built.set.clone(), built.generation != generation);
        }
        let backends: Vec<Arc<Node>> = self
            .nodes
            .list()
            .into_iter()
            .filter(|n| is_backend(n) && self.owner.as_ref().is_none_or(|o| o.owns_node(n)))
            .collect();
        let key = backend_key(backends.iter().map(|n| n.as_ref()));
        let previous = current.as_ref().map(|b| &b.set);
        // An unchanged key keeps its allocation, so every Service given it still shares one.
        let key = match previous {
            Some(previous) if *previous.key == key => Arc::clone(&previous.key),
            _ => Arc::new(key),
        };
        let mut wit: Vec<WitNode> = backends.iter().map(|n| node_to_wit(n)).collect();
        wit.sort_by(|a, b| a.name.cmp(&b.name));
        // Equal content keeps the generation, so drivers keep their copy.
        let nodes = match previous {
            Some(previous) if previous.nodes.nodes()[..] == wit[..] => previous.nodes.clone(),
            _ => SharedNodes::new(wit),
        };
        let set = BackendSet { key, nodes };
        *current = Some(Built {
            generation,
            at: Instant::now(),
            set: set.clone(),
        });
        (set, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machinery::informer::Informer;

    fn node(name: &str, provider_id: &str, zone: &str) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}},
            "spec": {"providerID": provider_id},
        }))
        .expect("a node")
    }

    // Paused time: `REUSE_FOR` passes when the test says so. The kube client needs a runtime to
    // exist; nothing is requested.
    #[tokio::test(start_paused = true)]
    async fn a_set_lags_the_cache_by_at_most_reuse_for_and_says_so() {
        let config = kube::Config::new("http://127.0.0.1:1".parse().expect("a URL"));
        let client = kube::Client::try_from(config).expect("a client");
        let informer = Informer::<Node>::new(kube::Api::all(client));
        informer.replace(vec![node("b", "p://b", "z1"), node("a", "p://a", "z1")]);
        let backends = Backends::new(informer.store(), None);

        let (first, stale) = backends.recent();
        assert!(!stale);
        let names: Vec<&str> = first
            .nodes
            .nodes()
            .iter()
            .map(|n| n.name.as_str())
            .collect();
        assert_eq!(
            names,
            ["a", "b"],
            "sorted by name, as cluster.nodes promises"
        );

        // A change within REUSE_FOR of the build: the same set, marked stale.
        informer.replace(vec![
            node("a", "p://a", "z1"),
            node("b", "p://b", "z1"),
            node("c", "p://c", "z1"),
        ]);
        let (lagging, stale) = backends.recent();
        assert!(stale);
        assert_eq!(lagging.nodes.generation(), first.nodes.generation());

        // After REUSE_FOR the set is rebuilt: new nodes, new generation, not stale.
        tokio::time::advance(REUSE_FOR).await;
        let (fresh, stale) = backends.recent();
        assert!(!stale);
        assert_eq!(fresh.nodes.nodes().len(), 3);
        assert_ne!(fresh.nodes.generation(), first.nodes.generation());

        // A cache change that leaves every backend's WIT form equal keeps the generation (the
        // guests keep their copy) and the key's allocation.
        informer.replace(vec![
            node("c", "p://c", "z1"),
            node("b", "p://b", "z1"),
            node("a", "p://a", "z1"),
        ]);
        tokio::time::advance(REUSE_FOR).await;
        let (same, _) = backends.recent();
        assert_eq!(same.nodes.generation(), fresh.nodes.generation());
        assert!(Arc::ptr_eq(&same.key, &fresh.key));

        // A change only the driver sees (a label) is a new generation, with the same key.
        informer.replace(vec![
            node("a", "p://a", "z2"),
            node("b", "p://b", "z1"),
            node("c", "p://c", "z1"),
        ]);
        tokio::time::advance(REUSE_FOR).await;
        let (relabelled, _) = backends.recent();
        assert_ne!(relabelled.nodes.generation(), same.nodes.generation());
        assert!(Arc::ptr_eq(&relabelled.key, &same.key));
    }
}
