//! [`InstanceListing`]: the driver's instances in one listing (`instance-listing`, contract
//! 0.2.2), kept for a bounded age, so node initialisation, the address refresh and the lifecycle
//! pass ask the cloud once per pass instead of once per node (issue 50).
//!
//! The listing only ever answers *yes*: a node it names gets its metadata, "exists" and its
//! shutdown state from it. A node it does not name, names twice, or names by a node name two
//! instances share is asked about one by one, as before, so absence from a listing never deletes
//! a Node (an instance created after the listing, a filter the driver got wrong). A listing that
//! breaks a bound (pages, instances, a page token seen twice, a provider ID without the driver's
//! scheme) is dropped whole for that pass, with a warning and a counted outcome.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;
use wasm_ccm_runtime::CallError;
use wasm_ccm_runtime::types::{ListedInstance, Node as WitNode};

use super::SharedCloud;

/// Most pages one listing may take.
pub(crate) const MAX_PAGES: usize = 1_000;
/// Most instances one listing may hold, over all its pages.
pub(crate) const MAX_INSTANCES: usize = 100_000;

/// What a node's lookup in the listing found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Listed {
    /// The listing names this node's instance once: the answer for every per-node function.
    Found(Arc<ListedInstance>),
    /// Ask the driver about this node alone (no listing, or the listing does not name the
    /// node exactly once).
    AskPerNode,
}

/// The instances of one listing, by provider ID and by node name, matched to nodes as the host
/// matches them (the conformance runner checks a driver with the same index). An entry named
/// twice maps to `None`: ambiguous, so neither instance answers for a node.
pub struct ListingIndex {
    by_provider_id: HashMap<String, Option<Arc<ListedInstance>>>,
    by_node_name: HashMap<String, Option<Arc<ListedInstance>>>,
}

impl ListingIndex {
    /// The index of `instances`.
    pub fn new(instances: Vec<ListedInstance>) -> ListingIndex {
        let mut by_provider_id = HashMap::with_capacity(instances.len());
        let mut by_node_name = HashMap::with_capacity(instances.len());
        for listed in instances.into_iter().map(Arc::new) {
            insert_once(
                &mut by_provider_id,
                listed.metadata.provider_id.clone(),
                &listed,
            );
            if !listed.node_name.is_empty() {
                insert_once(&mut by_node_name, listed.node_name.clone(), &listed);
            }
        }
        ListingIndex {
            by_provider_id,
            by_node_name,
        }
    }

    /// The node's instance: by its provider ID when it has one (a listed node name never
    /// overrides an ID), else by its name; `None` when not listed exactly once.
    pub fn find(&self, node: &WitNode) -> Option<Arc<ListedInstance>> {
        let entry = if node.provider_id.is_empty() {
            self.by_node_name.get(&node.name)
        } else {
            self.by_provider_id.get(&node.provider_id)
        };
        entry.cloned().flatten()
    }
}

/// One listing as the host keeps it.
struct Snapshot {
    taken: Instant,
    /// Which provider (by address) made it: a reload swaps the driver, and the new one's
    /// listing may differ.
    source: usize,
    index: ListingIndex,
}

impl Snapshot {
    fn new(taken: Instant, source: usize, instances: Vec<ListedInstance>) -> Snapshot {
        Snapshot {
            taken,
            source,
            index: ListingIndex::new(instances),
        }
    }

    fn find(&self, node: &WitNode) -> Listed {
        match self.index.find(node) {
            Some(listed) => Listed::Found(listed),
            None => Listed::AskPerNode,
        }
    }
}

fn insert_once(
    map: &mut HashMap<String, Option<Arc<ListedInstance>>>,
    key: String,
    listed: &Arc<ListedInstance>,
) {
    match map.entry(key) {
        Entry::Vacant(v) => {
            v.insert(Some(Arc::clone(listed)));
        }
        Entry::Occupied(mut o) => {
            o.insert(None);
        }
    }
}

/// Whether the driver in service can list, as far as the host knows.
#[derive(Default)]
struct State {
    /// Providers (by address) that answered `not-implemented`: asked per node for their life.
    cannot_list: Option<usize>,
    snapshot: Option<Arc<Snapshot>>,
}

/// Why a listing was not used.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The driver does not list (`not-implemented`).
    NotImplemented,
    /// A page failed; the error as the driver or host said it.
    Failed(CallError),
    /// The listing broke a bound; what was wrong.
    Refused(String),
}

impl Refusal {
    /// The `outcome` label of `wasm_ccm_instance_listings_total`.
    pub(crate) fn outcome(&self) -> &'static str {
        match self {
            Refusal::NotImplemented => "not-implemented",
            Refusal::Failed(_) => "failed",
            Refusal::Refused(_) => "refused",
        }
    }
}

/// One driver's listing, shared by its controllers; see the module doc.
pub(crate) struct InstanceListing {
    max_age: Duration,
    /// Held while a listing is taken, so concurrent workers wait for one listing instead of
    /// each taking their own.
    state: Mutex<State>,
}

impl InstanceListing {
    /// A listing kept for `max_age`; zero turns listing off (every node is asked alone).
    pub(crate) fn new(max_age: Duration) -> Self {
        InstanceListing {
            max_age,
            state: Mutex::new(State::default()),
        }
    }

    /// Whether listing is off (`--instance-listing-max-age=0`, the default): callers then ask
    /// every node alone without taking the lock or counting a lookup.
    pub(crate) fn is_off(&self) -> bool {
        self.max_age.is_zero()
    }

    /// Finds `node` in a listing of `provider` no older than the maximum age and `within` (the
    /// caller's own period: an answer is never staler than the per-node call it replaces would
    /// be), taking a new one (through `take`, which lists every page) when there is none.
    pub(crate) async fn find<F, Fut>(
        &self,
        provider: &SharedCloud,
        node: &WitNode,
        within: Duration,
        take: F,
    ) -> Listed
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Vec<ListedInstance>, Refusal>>,
    {
        let within = within.min(self.max_age);
        if within.is_zero() {
            return Listed::AskPerNode;
        }
        let source = Arc::as_ptr(provider) as *const () as usize;
        let mut state = self.state.lock().await;
        if state.cannot_list == Some(source) {
            return Listed::AskPerNode;
        }
        let now = Instant::now();
        if let Some(found) = fresh(&state, source, now, within, node) {
            return found;
        }
        match take().await {
            Ok(instances) => {
                let snapshot = Arc::new(Snapshot::new(now, source, instances));
                let found = snapshot.find(node);
                state.snapshot = Some(snapshot);
                found
            }
            Err(Refusal::NotImplemented) => {
                state.cannot_list = Some(source);
                state.snapshot = None;
                Listed::AskPerNode
            }
            Err(_) => {
                // Kept as an empty listing for its age: every node is then asked alone, and a
                // failing cloud is not listed again at every node's lookup.
                state.snapshot = Some(Arc::new(Snapshot::new(now, source, Vec::new())));
                Listed::AskPerNode
            }
        }
    }

    /// Finds `node` in a listing no older than the maximum age and `within`, if one is at hand;
    /// never takes one (the lifecycle pass: a listing the other passes took answers it only
    /// while it is younger than `--node-monitor-period`, so a deleted or stopped instance is
    /// seen as soon as upstream's per-node check would see it).
    pub(crate) async fn find_at_hand(
        &self,
        provider: &SharedCloud,
        node: &WitNode,
        within: Duration,
    ) -> Listed {
        let within = within.min(self.max_age);
        let source = Arc::as_ptr(provider) as *const () as usize;
        let state = self.state.lock().await;
        fresh(&state, source, Instant::now(), within, node).unwrap_or(Listed::AskPerNode)
    }
}

/// The answer of the snapshot in `state` when it is `source`'s and younger than `within`.
fn fresh(
    state: &State,
    source: usize,
    now: Instant,
    within: Duration,
    node: &WitNode,
) -> Option<Listed> {
    state
        .snapshot
        .as_ref()
        .filter(|s| s.source == source && now.duration_since(s.taken) < within)
        .map(|s| s.find(node))
}

/// The bounds every listing is held to while its pages arrive (the host's, and the conformance
/// runner's).
pub struct PageRules {
    scheme_prefix: String,
    pages: usize,
    seen_tokens: HashSet<String>,
    instances: Vec<ListedInstance>,
}

impl PageRules {
    /// Rules for a driver whose provider IDs start `<scheme>://`.
    pub fn new(scheme: &str) -> Self {
        PageRules {
            scheme_prefix: format!("{scheme}://"),
            pages: 0,
            seen_tokens: HashSet::new(),
            instances: Vec::new(),
        }
    }

    /// Takes one page; `Ok(Some(token))` asks for the next page, `Ok(None)` ends the listing.
    pub fn take(
        &mut self,
        instances: Vec<ListedInstance>,
        next: Option<String>,
    ) -> Result<Option<String>, String> {
        self.pages += 1;
        if let Some(bad) = instances
            .iter()
            .find(|l| !l.metadata.provider_id.starts_with(&self.scheme_prefix))
        {
            return Err(format!(
                "the listed instance of node {:?} has provider ID {:?}, not {}<id>",
                bad.node_name, bad.metadata.provider_id, self.scheme_prefix
            ));
        }
        if self.instances.len() + instances.len() > MAX_INSTANCES {
            return Err(format!(
                "more than {MAX_INSTANCES} instances; narrow the driver's listing filter"
            ));
        }
        self.instances.extend(instances);
        let Some(token) = next else {
            return Ok(None);
        };
        if self.pages >= MAX_PAGES {
            return Err(format!(
                "more than {MAX_PAGES} pages; the driver's pages are too small"
            ));
        }
        if !self.seen_tokens.insert(token.clone()) {
            return Err(format!(
                "page token {token:?} came twice; the driver's paging loops"
            ));
        }
        Ok(Some(token))
    }

    /// Every instance taken.
    pub fn into_instances(self) -> Vec<ListedInstance> {
        self.instances
    }
}

#[cfg(test)]
mod tests;
