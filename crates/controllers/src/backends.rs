//! The load balancers' backend set, converted once per change of the node cache and shared by
//! every Service (upstream's service controller keeps one node set too). Before this, each
//! ensure listed and converted every node again, and each Service kept its own copy of the
//! node list as its "last backends": memory grew with nodes × Services (667 MiB at 5,000 nodes
//! and 1,000 Services). Now a Service keeps an `Arc` of the set it was given, so equal sets are
//! one allocation, and the WIT node list is built once and handed to every call by reference.

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Node;
use wasm_ccm_runtime::types::Node as WitNode;

use crate::convert::node_to_wit;
use crate::informer::Store;
use crate::service_rules::{BackendKey, backend_key, is_backend};

/// One backend set: its comparable key and its nodes as the driver sees them.
#[derive(Clone)]
pub(crate) struct BackendSet {
    /// Names and provider IDs, sorted: what decides whether a load balancer needs an update.
    pub key: Arc<BackendKey>,
    /// The backend nodes in WIT form, lowered into each `ensure` and `update`.
    pub nodes: Arc<[WitNode]>,
}

/// The current [`BackendSet`], rebuilt only when the node cache changed.
pub(crate) struct Backends {
    nodes: Store<Node>,
    current: Mutex<Option<(u64, BackendSet)>>,
}

impl Backends {
    /// Backend sets of the nodes in `nodes`.
    pub(crate) fn new(nodes: Store<Node>) -> Self {
        Backends {
            nodes,
            current: Mutex::new(None),
        }
    }

    /// The backend set of the node cache as it is now.
    pub(crate) fn current(&self) -> BackendSet {
        // The generation first: a set built from a later list is then at worst newer than its
        // label, and the next call rebuilds it.
        let generation = self.nodes.generation();
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((built, set)) = current.as_ref()
            && *built == generation
        {
            return set.clone();
        }
        let backends: Vec<Arc<Node>> = self
            .nodes
            .list()
            .into_iter()
            .filter(|n| is_backend(n))
            .collect();
        let key = backend_key(backends.iter().map(|n| n.as_ref()));
        // An unchanged key keeps its allocation, so every Service given it still shares one.
        let key = match current.as_ref() {
            Some((_, previous)) if *previous.key == key => Arc::clone(&previous.key),
            _ => Arc::new(key),
        };
        let nodes: Arc<[WitNode]> = backends.iter().map(|n| node_to_wit(n)).collect();
        let set = BackendSet { key, nodes };
        *current = Some((generation, set.clone()));
        set
    }
}
