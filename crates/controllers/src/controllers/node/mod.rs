//! The cloud-node controller (upstream:
//! `k8s.io/cloud-provider/controllers/node/node_controller.go`): initialises nodes registered with
//! the uninitialized taint from the driver's instance metadata, keeps beta→GA labels in step, and
//! refreshes node addresses periodically.

pub(crate) mod rules;
#[cfg(test)]
mod upstream;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, NodeAddress, ObjectReference};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use wasm_ccm_runtime::CallError;
use wasm_ccm_runtime::types::{InstanceMetadata, Node as WitNode};

use self::rules::{
    PROVIDED_NODE_IP, UNINITIALIZED_TAINT, addresses_changed, beta_to_ga, init_labels,
    merge_addresses,
};
use crate::answer_rules::{
    Violation, check_provider_id, dedupe_addresses, sanitize_addresses, sanitize_metadata,
};
use crate::cloud::listing::Listed;
use crate::cloud::{About, Function};
use crate::controllers::entry::{ControllerEntry, Needs, Pending, Wiring, always};
use crate::convert::{node_to_wit, to_kube_address};
use crate::ctx::Ctx;
use crate::events::reference;
use crate::kube::{Target, is_status};
use crate::machinery::error::ReconcileError;
use crate::machinery::runner::{Action, Reconciler, RetryPolicy, Runner};

/// Upstream's node controller queue: 5 ms doubling to 1000 s per node, and client-go's default
/// global limiter (10 qps, burst 100).
const RETRY: RetryPolicy = RetryPolicy {
    base: Duration::from_millis(5),
    cap: Duration::from_secs(1000),
    bucket: Some((10.0, 100)),
};

/// Reporter name of the node controller's events.
pub(crate) const REPORTER: &str = "cloud-node-controller";

/// Whether a node still waits for initialisation.
pub(crate) fn is_uninitialized(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED_TAINT))
}

fn current_addresses(node: &Node) -> Vec<NodeAddress> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default()
}

fn annotation<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The node controller.
pub(crate) struct NodeController {
    ctx: Arc<Ctx>,
    runner: Arc<Runner>,
    /// The last failure reported per node, so a repeated failure is one event series.
    last_failure: Mutex<HashMap<String, String>>,
    /// Provider IDs this controller is writing (ID → node name): two nodes initialised at the
    /// same time never get one ID, even before the cache shows the first write.
    claims: Mutex<HashMap<String, String>>,
}

/// Claims kept before the map is cleared (the node cache still holds every written ID).
const MAX_CLAIMS: usize = 10_000;

impl NodeController {
    /// A controller over `ctx`; call [`NodeController::handle`] from the node informer.
    pub(crate) fn new(ctx: Arc<Ctx>) -> Arc<Self> {
        Arc::new(NodeController {
            runner: Runner::new(
                ctx.queue_name("node"),
                "Node",
                RETRY,
                Arc::clone(&ctx.metrics),
            ),
            ctx,
            last_failure: Mutex::default(),
            claims: Mutex::default(),
        })
    }

    /// Claims `id` for node `name`, or names the other Node that carries or claimed it.
    fn claim_provider_id(&self, id: &str, name: &str) -> Result<(), String> {
        let mut claims = self.claims.lock().unwrap_or_else(|p| p.into_inner());
        // The store's provider-ID index, not a scan: one scan per initialisation made a cold
        // start of N nodes O(N²).
        if let Some(other) = self
            .ctx
            .nodes
            .by_index(id)
            .into_iter()
            .find(|n| n.metadata.name.as_deref() != Some(name))
        {
            return Err(other.metadata.name.clone().unwrap_or_default());
        }
        if let Some(other) = claims.get(id)
            && other != name
            && self.ctx.nodes.get(other).is_some()
        {
            return Err(other.clone());
        }
        if claims.len() >= MAX_CLAIMS {
            claims.clear();
        }
        claims.insert(id.to_string(), name.to_string());
        Ok(())
    }

    /// Informer callback: adds and updates enqueue the node (deletes need nothing).
    pub(crate) fn handle(&self, _old: Option<&Node>, new: Option<&Node>) {
        if let Some(node) = new {
            self.runner
                .enqueue(node.metadata.name.clone().unwrap_or_default());
        }
    }

    /// Keys waiting, in flight or delayed.
    pub(crate) fn pending(&self) -> usize {
        self.runner.pending()
    }

    /// Runs the workers and the address loop until `cancel`.
    pub(crate) async fn run(self: Arc<Self>, cancel: CancellationToken) {
        self.ctx.nodes.wait_synced().await;
        let me = Arc::clone(&self);
        let loop_cancel = cancel.clone();
        let address_loop = tokio::spawn(async move { me.address_loop(loop_cancel).await });
        let workers = self.ctx.config.concurrent_node_syncs;
        Arc::clone(&self.runner)
            .run(Arc::clone(&self), workers, cancel)
            .await;
        let _ = address_loop.await;
    }

    /// One node: initialise it if it carries the taint, else reconcile its labels.
    pub(crate) async fn sync(&self, name: &str) -> Result<(), ReconcileError> {
        let Some(node) = self.ctx.nodes.get(name) else {
            return Ok(());
        };
        if !is_uninitialized(&node) {
            return self.reconcile_labels(&node).await;
        }
        // A node of another provider is never initialised on this driver's word.
        if self
            .ctx
            .skip_foreign_node(REPORTER, &node, "InitializeNode")
            .await
        {
            return Ok(());
        }
        match self.initialize(&node).await {
            Ok(()) => Ok(()),
            Err(e) => {
                self.warn_once(&node, &e.message).await;
                Err(e)
            }
        }
    }

    /// A Warning event on the node saying why it cannot be initialised, once per distinct reason
    /// (operators otherwise debug "taint not removed" from the logs).
    async fn warn_once(&self, node: &Node, message: &str) {
        let name = node.metadata.name.clone().unwrap_or_default();
        {
            let mut last = self.last_failure.lock().unwrap_or_else(|p| p.into_inner());
            if last.get(&name).map(String::as_str) == Some(message) {
                return;
            }
            last.insert(name, message.to_string());
        }
        self.ctx
            .events
            .publish(
                REPORTER,
                &reference(node),
                true,
                "FailedToInitializeNode",
                message,
                "InitializeNode",
            )
            .await;
    }

    /// Reports an `instance-metadata` answer refused whole (its provider ID broke a rule) and
    /// the error that retries the node later.
    async fn refuse_answer(
        &self,
        regarding: &ObjectReference,
        action: &str,
        message: String,
        violation: Violation,
    ) -> ReconcileError {
        self.ctx
            .report_refusals(
                REPORTER,
                regarding,
                Function::InstanceMetadata,
                action,
                std::slice::from_ref(&violation),
            )
            .await;
        ReconcileError::refused(message)
    }

    /// The metadata of the node `name`'s instance (initialisation and the status pass alike):
    /// from the driver's instance listing when one names the node, else by asking
    /// `instances.instance-metadata`, its events on `regarding`. A failure is the node's
    /// reconcile error. Either answer then passes the same checks.
    /// `within` is how old a listing may be: the status pass's period for the refresh, the
    /// listing's own age for initialisation.
    async fn instance_metadata(
        &self,
        name: &str,
        wit: &WitNode,
        regarding: &ObjectReference,
        within: Duration,
    ) -> Result<InstanceMetadata, ReconcileError> {
        if let Listed::Found(listed) = self.ctx.cloud.listed(wit, within).await {
            return Ok(listed.metadata.clone());
        }
        let scope = self.ctx.cloud.scope(name);
        self.ctx
            .cloud
            .call(
                Function::InstanceMetadata,
                About::object(REPORTER, regarding),
                self.ctx.cloud.provider().instance_metadata(wit, &scope),
            )
            .await
            .map_err(|e| driver_failure(name, &e))
    }

    async fn initialize(&self, node: &Node) -> Result<(), ReconcileError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let wit = node_to_wit(node);
        let regarding = reference(node);
        let meta = self
            .instance_metadata(&name, &wit, &regarding, Duration::MAX)
            .await?;
        let existing_provider_id = wit.provider_id.clone();
        // The provider ID decides which instance the whole answer describes: one that breaks a
        // rule refuses the answer (nothing of it is written).
        let scheme = self.ctx.cloud.provider_id_scheme();
        let checked = check_provider_id(&meta.provider_id, &scheme, &existing_provider_id, None)
            .and_then(|()| {
                let id = if meta.provider_id.is_empty() {
                    &existing_provider_id
                } else {
                    &meta.provider_id
                };
                if id.is_empty() {
                    return Ok(());
                }
                let taken = self.claim_provider_id(id, &name).err();
                check_provider_id(id, &scheme, &existing_provider_id, taken.as_deref())
            });
        if let Err(v) = checked {
            return Err(self
                .refuse_answer(
                    &regarding,
                    "InitializeNode",
                    format!("cannot initialize node {name}: the driver's answer was refused: {v}"),
                    v,
                )
                .await);
        }
        let (meta, violations) = sanitize_metadata(meta);
        self.ctx
            .report_refusals(
                REPORTER,
                &regarding,
                Function::InstanceMetadata,
                "InitializeNode",
                &violations,
            )
            .await;
        if meta.provider_id.is_empty() && existing_provider_id.is_empty() {
            return Err(ReconcileError::refused(format!(
                "cannot initialize node {name}: the driver returned no provider ID and the node has none; a node is never initialised without one (fix the driver)"
            )));
        }
        let cloud_addresses: Vec<NodeAddress> =
            meta.addresses.iter().map(to_kube_address).collect();
        // Validate the kubelet's --node-ip before untainting.
        let new_addresses = merge_addresses(
            &cloud_addresses,
            &current_addresses(node),
            annotation(node, PROVIDED_NODE_IP),
        )
        .map_err(|e| ReconcileError::invalid(format!("cannot initialize node {name}: {e}")))?
        .map(dedupe_addresses);
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let plan = init_labels(&labels, &meta);
        for skipped in &plan.skipped {
            tracing::info!(node = %name, label = %skipped, "additional label from the driver not applied");
        }
        let mut attempt = 0;
        let mut current = Arc::new(node.clone());
        loop {
            attempt += 1;
            let taints: Vec<_> = current
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default()
                .into_iter()
                .filter(|t| t.key != UNINITIALIZED_TAINT)
                .collect();
            let mut spec = json!({ "taints": taints });
            let has_provider_id = current
                .spec
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .is_some_and(|p| !p.is_empty());
            if !has_provider_id {
                spec["providerID"] = json!(meta.provider_id);
            }
            // The resourceVersion makes this an optimistic-locked update, like upstream's PUT.
            let patch = json!({
                "metadata": {
                    "resourceVersion": current.metadata.resource_version,
                    "labels": plan.set,
                },
                "spec": spec,
            });
            let sent = self
                .ctx
                .kube
                .patch(REPORTER, Target::Node(&name), &patch, false)
                .await;
            match sent {
                Ok(_) => break,
                Err(e) if is_status(&e, 409) && attempt < 20 => {
                    let jitter = rand::random_range(50..100);
                    tokio::time::sleep(Duration::from_millis(jitter)).await;
                    current = Arc::new(
                        self.ctx
                            .kube
                            .request("get", self.ctx.kube.nodes(REPORTER).get(&name))
                            .await?,
                    );
                    if !is_uninitialized(&current) {
                        return Ok(());
                    }
                }
                Err(e) if is_status(&e, 404) => return Ok(()),
                Err(e) => return Err(e.into()),
            }
        }
        let since_creation = node
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| (jiff::Timestamp::now() - t.0).get_seconds().max(0) as f64);
        if let Some(secs) = since_creation {
            self.ctx.metrics.observe(
                "node_controller_cloud_provider_taint_removal_delay_seconds",
                &[],
                secs,
            );
        }
        // Addresses right away, so the node does not wait for the periodic loop.
        if let Some(addresses) = new_addresses
            && addresses_changed(&current_addresses(&current), &addresses)
            && let Err(e) = self.patch_addresses(&name, &addresses).await
        {
            tracing::warn!(node = %name, error = %e.message, "could not set addresses after initialisation");
        }
        self.ctx
            .events
            .publish(
                REPORTER,
                &reference(node),
                false,
                "Synced",
                "Node synced successfully",
                "InitializeNode",
            )
            .await;
        if let Some(secs) = since_creation {
            self.ctx
                .metrics
                .observe("node_controller_initial_node_sync_delay_seconds", &[], secs);
        }
        tracing::info!(node = %name, provider_id = %meta.provider_id, "node initialized");
        Ok(())
    }

    /// Replaces `status.addresses` wholesale (a merge patch replaces lists; a strategic merge
    /// would merge by type, which is wrong for several addresses of one type).
    async fn patch_addresses(
        &self,
        name: &str,
        addresses: &[NodeAddress],
    ) -> Result<(), ReconcileError> {
        let patch = json!({ "status": { "addresses": addresses } });
        self.ctx
            .kube
            .patch(REPORTER, Target::Node(name), &patch, true)
            .await?;
        Ok(())
    }

    async fn reconcile_labels(&self, node: &Node) -> Result<(), ReconcileError> {
        let labels: BTreeMap<String, String> = node.metadata.labels.clone().unwrap_or_default();
        let changes = beta_to_ga(&labels);
        if changes.is_empty() {
            return Ok(());
        }
        let name = node.metadata.name.clone().unwrap_or_default();
        let patch = json!({ "metadata": { "labels": changes } });
        self.ctx
            .kube
            .patch(REPORTER, Target::Node(&name), &patch, false)
            .await?;
        Ok(())
    }

    /// The periodic address refresh: once at start, then every period after the previous run
    /// ended (upstream's sliding schedule).
    async fn address_loop(&self, cancel: CancellationToken) {
        let period = self.ctx.config.node_status_update_frequency;
        loop {
            self.update_addresses().await;
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(period) => {}
            }
        }
    }

    /// One pass of the address loop over every initialised node.
    pub(crate) async fn update_addresses(&self) {
        let nodes: Vec<Arc<Node>> = self
            .ctx
            .nodes
            .list()
            .into_iter()
            .filter(|n| !is_uninitialized(n))
            .collect();
        futures::stream::iter(nodes)
            .for_each_concurrent(self.ctx.config.address_workers(), |node| async move {
                if let Err(e) = self.update_node_addresses(&node).await {
                    tracing::warn!(node = ?node.metadata.name, error = %e.message, "address update skipped");
                }
            })
            .await;
    }

    async fn update_node_addresses(&self, node: &Node) -> Result<(), ReconcileError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let existing = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.clone())
            .unwrap_or_default();
        // Another provider's (or another driver's) node: its addresses are not this driver's
        // to say. Skipped quietly (a mixed cluster would otherwise log every node every period;
        // the lifecycle and node controllers report such nodes when they would have acted on
        // them).
        if !self.ctx.route.owns_node(node) {
            tracing::debug!(node = %name, provider_id = %existing, "address refresh skips a node of another provider");
            return Ok(());
        }
        let regarding = reference(node);
        let meta = self
            .instance_metadata(
                &name,
                &node_to_wit(node),
                &regarding,
                self.ctx.config.node_status_update_frequency,
            )
            .await?;
        // Addresses of another instance are not this node's.
        let scheme = self.ctx.cloud.provider_id_scheme();
        if let Err(v) = check_provider_id(&meta.provider_id, &scheme, &existing, None) {
            return Err(self
                .refuse_answer(
                    &regarding,
                    "UpdateNodeAddresses",
                    format!("the driver's answer was refused: {v}"),
                    v,
                )
                .await);
        }
        let (addresses, violations) = sanitize_addresses(&meta.addresses);
        self.ctx
            .report_refusals(
                REPORTER,
                &regarding,
                Function::InstanceMetadata,
                "UpdateNodeAddresses",
                &violations,
            )
            .await;
        let cloud: Vec<NodeAddress> = addresses.iter().map(to_kube_address).collect();
        let current = current_addresses(node);
        let merged = merge_addresses(&cloud, &current, annotation(node, PROVIDED_NODE_IP))
            .map_err(|e| ReconcileError::invalid(e.to_string()))?
            .map(dedupe_addresses);
        if let Some(addresses) = merged
            && addresses_changed(&current, &addresses)
        {
            self.patch_addresses(&name, &addresses).await?;
        }
        Ok(())
    }
}

impl Reconciler for NodeController {
    fn reconcile<'a>(
        &'a self,
        name: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<Action, ReconcileError>> {
        Box::pin(async move {
            self.sync(name).await?;
            // Healthy again: the next failure is news (a new Warning event).
            self.last_failure
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(name);
            Ok(Action::Done)
        })
    }
}

/// A driver error as a sync failure, with the wording operators search for.
fn driver_failure(name: &str, e: &CallError) -> ReconcileError {
    use wasm_ccm_runtime::types::ProviderError;
    let message = match e {
        CallError::Provider(ProviderError::NotFound(m)) => format!(
            "cannot initialize node {name}: the driver found no instance for it ({m}); check that the node name or its spec.providerID matches an instance in the cloud"
        ),
        CallError::Provider(ProviderError::InvalidConfig(m)) => {
            format!("cannot initialize node {name}: the driver's configuration is invalid: {m}")
        }
        other => format!("cannot initialize node {name}: driver error: {other}"),
    };
    ReconcileError::driver(message, e)
}

/// This controller's line in [`crate::registry::CONTROLLERS`].
pub(crate) const ENTRY: ControllerEntry = ControllerEntry {
    name: "cloud-node-controller",
    alias: "cloud-node",
    title: "cloud node controller",
    needs: Needs::Instances,
    switched_on: always,
    start,
};

/// Starts it: registers its informer handlers and spawns its tasks.
fn start(w: &mut Wiring<'_>) -> Result<(), String> {
    let c = NodeController::new(Arc::clone(w.ctx));
    let h = Arc::clone(&c);
    w.nodes.on_change(move |old, new| h.handle(old, new));
    w.tasks.spawn(Arc::clone(&c).run(w.cancel.clone()));
    w.pending.push(c);
    Ok(())
}

impl Pending for NodeController {
    fn pending(&self) -> usize {
        NodeController::pending(self)
    }

    fn export_gauges(&self) {
        self.runner.export_in_flight();
    }
}
