//! The service-lb controller (upstream: `k8s.io/cloud-provider/controllers/service/controller.go`):
//! ensures, updates and deletes the load balancers of Services of type LoadBalancer through the
//! driver, with the cleanup finalizer.

pub(crate) mod rules;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod upstream;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{LoadBalancerIngress, Node, ObjectReference, Service};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use wasm_ccm_runtime::CallError;
use wasm_ccm_runtime::CallScope;
use wasm_ccm_runtime::types::{Ingress, ProviderError, Service as WitService};

use self::rules::{BackendKey, needs_update_for, should_sync_updated_node};
use crate::answer_rules::{
    AnnotationPolicy, normalize_ingress, same_ingress, sanitize_annotations, sanitize_ingress,
};
use crate::backends::{BackendSet, Backends};
use crate::cloud::{About, Function};
use crate::cluster_view::PendingWrite;
use crate::controllers::entry::{ControllerEntry, Needs, Pending, Wiring, always};
use crate::convert::{ingress_to_kube, ingress_to_wit, service_to_wit};
use crate::ctx::Ctx;
use crate::events::reference;
use crate::kube::{Target, is_status};
use crate::machinery::error::in_progress;
use crate::machinery::error::{ReconcileError, requested_delay};
use crate::machinery::informer::key_of;
use crate::machinery::runner::{Action, Reconciler, RetryPolicy, Runner};

/// Node changes closer together than this are handled by one backend sync pass.
const NODE_SYNC_QUIET: Duration = Duration::from_millis(250);
/// A continuous stream of node changes still gets a pass this often.
const NODE_SYNC_MAX_WAIT: Duration = Duration::from_secs(5);

/// Reporter name of the service controller's events.
pub(crate) const REPORTER: &str = "service-controller";

fn ingress_of(svc: &Service) -> Vec<LoadBalancerIngress> {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.clone())
        .unwrap_or_default()
}

/// The Service as the driver sees it for a cleanup. A Service carrying our finalizer was
/// provisioned by us, whatever class it names now: the class is immutable on a LoadBalancer,
/// so a Service moves to another class through ClusterIP, and a controller that missed that
/// intermediate state (killed, or between leaders) must clean up as it would have then, not
/// hand the load balancer it made to the other class's controller (drivers answer
/// `implemented-elsewhere` for another class, which would leak it; found by `wasm-ccm-dev soak`).
fn cleanup_view(svc: &Service, owned: bool) -> wasm_ccm_runtime::types::Service {
    let mut wit = service_to_wit(svc);
    if owned {
        wit.load_balancer_class = None;
    }
    wit
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn fail(message: String, e: &CallError) -> ReconcileError {
    ReconcileError::driver(message, e)
}

/// Upstream's service queue: 5 s doubling to 300 s per Service, no global limiter.
const RETRY: RetryPolicy = RetryPolicy {
    base: Duration::from_secs(5),
    cap: Duration::from_secs(300),
    bucket: None,
};

/// The service controller.
pub(crate) struct ServiceController {
    ctx: Arc<Ctx>,
    runner: Arc<Runner>,
    /// The last copy synced per key: finds the old load balancer after a delete+recreate and
    /// deletes the load balancers of Services deleted without the finalizer.
    cache: Mutex<HashMap<String, Arc<Service>>>,
    /// The backend set, built once per node change and shared by every Service.
    backends: Backends,
    /// The backend set each load balancer was last given (shared: equal sets are one `Arc`).
    last_nodes: Mutex<HashMap<String, Arc<BackendKey>>>,
    /// One lock per Service key, held by its sync and by a node-sync `update` of it: an update
    /// computed from a stale view must never run beside (or after) the cleanup that deleted
    /// the load balancer, or a driver whose `update` reconciles would create it again (found
    /// by `wasm-ccm-dev soak`: cloudscale, seed 2026).
    key_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Annotations this controller wrote (from the driver's result), so the resulting update
    /// does not trigger another ensure.
    own_annotations: Mutex<HashMap<String, BTreeMap<String, String>>>,
    /// Keys synced since start: the first sync of a converged Service is quiet (no event spam
    /// on restart).
    seen: Mutex<HashSet<String>>,
    node_sync: Notify,
    /// A node-sync pass is requested and has not started (for [`ServiceController::pending`]).
    node_sync_due: std::sync::atomic::AtomicBool,
    /// A node-sync pass is running.
    node_sync_running: std::sync::atomic::AtomicBool,
}

impl ServiceController {
    /// A controller over `ctx`; wire [`ServiceController::handle_service`] and
    /// [`ServiceController::handle_node`] to the informers.
    pub(crate) fn new(ctx: Arc<Ctx>) -> Arc<Self> {
        Arc::new(ServiceController {
            // With several drivers a load balancer gets only its own driver's nodes (a cloud
            // cannot reach another cloud's machines; KEP-5778 leaves cross-cloud out too).
            backends: Backends::new(
                ctx.nodes.clone(),
                (!ctx.route.is_single()).then(|| ctx.route.clone()),
            ),
            runner: Runner::new(
                ctx.queue_name("service"),
                "Service",
                RETRY,
                Arc::clone(&ctx.metrics),
            ),
            ctx,
            cache: Mutex::default(),
            last_nodes: Mutex::default(),
            key_locks: Mutex::default(),
            own_annotations: Mutex::default(),
            seen: Mutex::default(),
            node_sync: Notify::new(),
            node_sync_due: std::sync::atomic::AtomicBool::new(false),
            node_sync_running: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Queues a sync of `key` now (also the shadow's recheck of a pending cloud write).
    pub(crate) fn enqueue(&self, key: String) {
        self.runner.enqueue(key);
    }

    /// Whether the only relevant change is the annotations this controller just wrote.
    fn is_own_annotation_write(&self, key: &str, old: &Service, new: &Service) -> bool {
        let mut own = lock(&self.own_annotations);
        let Some(expected) = own.get(key) else {
            return false;
        };
        let current = new.metadata.annotations.clone().unwrap_or_default();
        if *expected != current {
            return false;
        }
        let mut old_with_new_annotations = old.clone();
        old_with_new_annotations.metadata.annotations = new.metadata.annotations.clone();
        let only_annotations = !self.needs_update(&old_with_new_annotations, new);
        if only_annotations {
            own.remove(key);
        }
        only_annotations
    }

    async fn event(
        &self,
        regarding: &ObjectReference,
        warning: bool,
        reason: &str,
        note: &str,
        action: &str,
    ) {
        self.ctx
            .events
            .publish(REPORTER, regarding, warning, reason, note, action)
            .await;
    }

    /// The Service's API and name.
    fn target_of(svc: &Service) -> Target<'_> {
        Target::Service {
            namespace: svc.metadata.namespace.as_deref().unwrap_or("default"),
            name: svc.metadata.name.as_deref().unwrap_or_default(),
        }
    }

    /// Upstream's `needsUpdate` for the Services this driver serves.
    fn needs_update(&self, old: &Service, new: &Service) -> bool {
        needs_update_for(old, new, |s| self.ctx.route.serves(s))
    }

    /// Service informer callback (upstream: the Service handlers `New` registers).
    pub(crate) fn handle_service(&self, old: Option<&Service>, new: Option<&Service>) {
        let route = &self.ctx.route;
        match (old, new) {
            (None, Some(new)) => {
                if route.serves(new) || route.needs_cleanup(new) {
                    self.enqueue(key_of(new));
                }
            }
            (Some(old), Some(new)) => {
                let key = key_of(new);
                let relevant =
                    self.needs_update(old, new) && !self.is_own_annotation_write(&key, old, new);
                if relevant || route.needs_cleanup(new) {
                    self.enqueue(key);
                }
            }
            (Some(old), None) => {
                // Deleted without the finalizer: the orphan path, if we ever synced it.
                let key = key_of(old);
                if lock(&self.cache).contains_key(&key) {
                    self.enqueue(key);
                }
            }
            (None, None) => {}
        }
    }

    /// Node informer callback (upstream: the node handlers `New` registers, `syncNodes`): node
    /// additions, deletions and relevant updates trigger one coalesced backend sync of every load
    /// balancer.
    pub(crate) fn handle_node(&self, old: Option<&Node>, new: Option<&Node>) {
        let relevant = match (old, new) {
            (Some(old), Some(new)) => should_sync_updated_node(old, new),
            _ => true,
        };
        if relevant {
            self.wake_node_sync();
        }
    }

    /// Asks for one more node-sync pass.
    fn wake_node_sync(&self) {
        self.node_sync_due
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.node_sync.notify_one();
    }

    /// Keys waiting, in flight or delayed.
    pub(crate) fn pending(&self) -> usize {
        self.runner.pending()
            + usize::from(
                self.node_sync_due.load(std::sync::atomic::Ordering::SeqCst)
                    || self
                        .node_sync_running
                        .load(std::sync::atomic::Ordering::SeqCst),
            )
    }

    /// Runs the service workers and the node-sync loop until `cancel`.
    pub(crate) async fn run(self: Arc<Self>, cancel: CancellationToken) {
        self.ctx.nodes.wait_synced().await;
        self.ctx.services.wait_synced().await;
        let me = Arc::clone(&self);
        let loop_cancel = cancel.clone();
        let node_sync = tokio::spawn(async move { me.node_sync_loop(loop_cancel).await });
        let workers = self.ctx.config.concurrent_service_syncs;
        Arc::clone(&self.runner)
            .run(Arc::clone(&self), workers, cancel)
            .await;
        let _ = node_sync.await;
    }

    /// One Service key (upstream `syncService`).
    pub(crate) async fn sync(&self, key: &str) -> Result<(), ReconcileError> {
        let key_lock = self.key_lock(key);
        let result = {
            let _held = key_lock.lock().await;
            self.sync_locked(key).await
        };
        self.drop_idle_lock(key, &key_lock);
        result
    }

    /// Drops the lock of a key the controller no longer remembers (a sync of a Service that is
    /// gone would otherwise leave one behind per name), unless another sync holds or waits for
    /// it: clones are only taken under the map's lock, held here while counting.
    fn drop_idle_lock(&self, key: &str, ours: &Arc<tokio::sync::Mutex<()>>) {
        if lock(&self.cache).contains_key(key) {
            return;
        }
        let mut locks = lock(&self.key_locks);
        if locks
            .get(key)
            .is_some_and(|l| Arc::ptr_eq(l, ours) && Arc::strong_count(l) <= 2)
        {
            locks.remove(key);
        }
    }

    /// The lock of `key` (see `key_locks`).
    fn key_lock(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        Arc::clone(lock(&self.key_locks).entry(key.to_string()).or_default())
    }

    async fn sync_locked(&self, key: &str) -> Result<(), ReconcileError> {
        let Some(svc) = self.ctx.services.get(key) else {
            let cached = lock(&self.cache).get(key).cloned();
            if let Some(old) = cached {
                self.delete_orphan(key, &old).await?;
            }
            return Ok(());
        };
        let cached = lock(&self.cache).get(key).cloned();
        if let Some(old) = cached
            && old.metadata.uid != svc.metadata.uid
        {
            // Deleted and re-created without the finalizer: the old load balancer goes first.
            self.delete_orphan(key, &old).await?;
        }
        lock(&self.cache).insert(key.to_string(), Arc::clone(&svc));
        let first_sync = lock(&self.seen).insert(key.to_string());
        let route = &self.ctx.route;
        if !route.is_single() && !route.serves(&svc) && !route.owns_service(&svc) {
            // Another driver's Service (or a foreign class): nothing of this driver's to do.
            self.forget(key);
            return Ok(());
        }
        if !route.serves(&svc) || route.needs_cleanup(&svc) {
            self.delete_branch(key, &svc).await
        } else {
            self.ensure_branch(key, &svc, first_sync).await
        }
    }

    /// `DeletingLoadBalancer`, then the driver's delete (`implemented-elsewhere` counts as done).
    async fn release(
        &self,
        key: &str,
        svc: &Service,
        regarding: &ObjectReference,
    ) -> Result<(), CallError> {
        self.event(
            regarding,
            false,
            "DeletingLoadBalancer",
            "Deleting load balancer",
            "DeleteLoadBalancer",
        )
        .await;
        let wit = cleanup_view(svc, self.ctx.route.owns_service(svc));
        let scope = self.ctx.cloud.scope(key);
        let cloud = self.ctx.cloud.provider();
        let call = cloud.load_balancer_delete(&wit, &scope);
        let about = About::object(REPORTER, regarding);
        match self
            .ctx
            .cloud
            .call(Function::LoadBalancerDelete, about, call)
            .await
        {
            Ok(()) | Err(CallError::Provider(ProviderError::ImplementedElsewhere)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn delete_orphan(&self, key: &str, old: &Service) -> Result<(), ReconcileError> {
        if self.ctx.route.serves(old) {
            let regarding = reference(old);
            let result = self.release(key, old, &regarding).await;
            if let Err(e) = result {
                let message = format!("Error deleting load balancer: {e}");
                self.event(
                    &regarding,
                    true,
                    "DeleteLoadBalancerFailed",
                    &message,
                    "DeleteLoadBalancer",
                )
                .await;
                return Err(fail(message, &e));
            }
            self.deleted_event(&regarding).await;
        }
        self.forget(key);
        Ok(())
    }

    /// Drops what the controller remembers about a Service that is gone or no longer has a load
    /// balancer.
    /// Every per-key memory goes here: a name the workload never uses again (Services come and
    /// go under new names) would otherwise stay for the life of the process (soak finding 12:
    /// `seen` and `own_annotations` kept every Service key ever synced).
    fn forget(&self, key: &str) {
        lock(&self.cache).remove(key);
        lock(&self.last_nodes).remove(key);
        // Whoever holds it keeps its copy; a later node sync finds `last_nodes` empty.
        lock(&self.key_locks).remove(key);
        lock(&self.seen).remove(key);
        lock(&self.own_annotations).remove(key);
        self.ctx.cloud.cluster().record(key, None);
    }

    /// Keys held in the controller's per-key memories (tests: nothing is kept for a Service that
    /// is gone).
    #[cfg(test)]
    pub(crate) fn remembered(&self) -> usize {
        lock(&self.cache).len()
            + lock(&self.last_nodes).len()
            + lock(&self.key_locks).len()
            + lock(&self.seen).len()
            + lock(&self.own_annotations).len()
    }

    async fn deleted_event(&self, regarding: &ObjectReference) {
        self.event(
            regarding,
            false,
            "DeletedLoadBalancer",
            "Deleted load balancer",
            "DeleteLoadBalancer",
        )
        .await;
    }

    /// Asks `load-balancer.get` about the Service `wit`, its events on `regarding`.
    async fn load_balancer_get(
        &self,
        wit: &WitService,
        scope: &CallScope,
        regarding: &ObjectReference,
    ) -> Result<Option<Vec<Ingress>>, CallError> {
        self.ctx
            .cloud
            .call(
                Function::LoadBalancerGet,
                About::object(REPORTER, regarding),
                self.ctx.cloud.provider().load_balancer_get(wit, scope),
            )
            .await
    }

    async fn delete_branch(&self, key: &str, svc: &Service) -> Result<(), ReconcileError> {
        let regarding = reference(svc);
        let owned = self.ctx.route.owns_service(svc);
        let wit = cleanup_view(svc, owned);
        let scope = self.ctx.cloud.scope(key);
        let exists = self.load_balancer_get(&wit, &scope, &regarding).await;
        let exists = exists.map_err(|e| {
            fail(
                format!("failed to check if load balancer exists before cleanup: {e}"),
                &e,
            )
        })?;
        if exists.is_some()
            && let Err(e) = self.release(key, svc, &regarding).await
        {
            return Err(fail(format!("failed to delete load balancer: {e}"), &e));
        }
        self.count_handover(svc, owned, exists.is_some());
        if owned {
            self.set_finalizer(svc, false).await?;
        }
        self.deleted_event(&regarding).await;
        if !ingress_of(svc).is_empty() {
            self.patch_ingress(svc, &[]).await?;
        }
        self.forget(key);
        Ok(())
    }

    /// Counts a load balancer this driver deleted because another driver serves the Service
    /// now (its class moved): `wasm_ccm_load_balancer_handovers_total{from, to}`.
    fn count_handover(&self, svc: &Service, owned: bool, deleted: bool) {
        let route = &self.ctx.route;
        if route.is_single() || !owned || !deleted || svc.metadata.deletion_timestamp.is_some() {
            return;
        }
        if let Some(to) = route.routing().service_driver(svc)
            && to != route.index()
        {
            self.ctx.metrics.inc(
                "wasm_ccm_load_balancer_handovers_total",
                &[("from", route.name()), ("to", route.name_of(to))],
            );
        }
    }

    async fn ensure_branch(
        &self,
        key: &str,
        svc: &Service,
        first_sync: bool,
    ) -> Result<(), ReconcileError> {
        let route = &self.ctx.route;
        let owned = route.owns_service(svc);
        if svc.metadata.deletion_timestamp.is_some() && !owned {
            // Terminating without our finalizer: adding one is rejected, and there is nothing
            // of ours to clean up.
            return Ok(());
        }
        if let Some(holder) = route.held_by(svc) {
            // The load balancer of another driver still exists: it goes first, so two clouds
            // never serve one Service (that driver cleans up, then drops its finalizer).
            return Err(ReconcileError::handover(format!(
                "waiting for driver {holder} to delete its load balancer before driver {} makes one",
                route.name()
            )));
        }
        let regarding = reference(svc);
        for gone in route.orphaned_owners(svc) {
            let note = format!(
                "the Service carries the finalizer of driver {gone}, which is no longer configured: its load balancer in that cloud is left as it is (delete it and the finalizer by hand, or configure the driver again)"
            );
            tracing::warn!(service = %key, owner = %gone, "{note}");
            if first_sync {
                self.event(
                    &regarding,
                    true,
                    "LoadBalancerOwnerMissing",
                    &note,
                    "EnsureLoadBalancer",
                )
                .await;
            }
        }
        let previous = ingress_of(svc);
        // A converged Service seen for the first time after a restart is re-ensured quietly.
        let quiet = first_sync && owned && !previous.is_empty();
        if !quiet {
            self.event(
                &regarding,
                false,
                "EnsuringLoadBalancer",
                "Ensuring load balancer",
                "EnsureLoadBalancer",
            )
            .await;
        }
        let current: Vec<String> = svc.metadata.finalizers.clone().unwrap_or_default();
        let wanted = route.finalizers_after(svc, true);
        if wanted.len() != current.len() || !wanted.iter().all(|f| current.contains(f)) {
            self.set_finalizer(svc, true).await?;
        }
        let (BackendSet { key: set, nodes }, stale) = self.backends.recent();
        if nodes.nodes().is_empty() {
            self.event(
                &regarding,
                true,
                "UnAvailableLoadBalancer",
                "There are no available nodes for LoadBalancer",
                "EnsureLoadBalancer",
            )
            .await;
        }
        lock(&self.last_nodes).insert(key.to_string(), set);
        if stale {
            // The set lags the node cache (`backends.rs`): one more pass brings it up to date.
            self.wake_node_sync();
        }
        let (wit, scope) = (service_to_wit(svc), self.ctx.cloud.scope(key));
        let result = self
            .ctx
            .cloud
            .call(
                Function::LoadBalancerEnsure,
                About::object(REPORTER, &regarding),
                self.ctx
                    .cloud
                    .provider()
                    .load_balancer_ensure(&wit, &nodes, &scope),
            )
            .await;
        let result = match result {
            Ok(r) => r,
            Err(CallError::Provider(ProviderError::ImplementedElsewhere)) => {
                if !route.is_single() {
                    // The host routed this Service to the driver by its class, so the driver's
                    // refusal is a misconfiguration (the class in the DriverSet), not a class
                    // another controller serves.
                    self.event(
                        &regarding,
                        true,
                        "LoadBalancerNotServed",
                        &format!(
                            "the Service is routed to driver {} by its class, but the driver answered implemented-elsewhere; check the loadBalancer roles in the DriverSet",
                            route.name()
                        ),
                        "EnsureLoadBalancer",
                    )
                    .await;
                }
                return Ok(());
            }
            Err(e) => return Err(fail(format!("failed to ensure load balancer: {e}"), &e)),
        };
        // Everything the driver asked for is checked before it is written (`answer_rules`).
        let policy = AnnotationPolicy::new(&self.ctx.cloud.info().annotation_prefixes);
        let current_annotations = svc.metadata.annotations.clone().unwrap_or_default();
        let (annotations, mut violations) = sanitize_annotations(
            &result.set_annotations,
            &result.remove_annotations,
            &policy,
            &current_annotations,
        );
        let (ingress, ingress_violations) = sanitize_ingress(&result.ingress);
        violations.extend(ingress_violations);
        // Every entry refused: the status stays as it is (a bad answer does not take a working
        // address away).
        let keep_status = ingress.is_empty() && !result.ingress.is_empty();
        let ingress = if keep_status {
            previous.iter().map(ingress_to_wit).collect()
        } else {
            ingress
        };
        self.ctx
            .report_refusals(
                REPORTER,
                &regarding,
                Function::LoadBalancerEnsure,
                "EnsureLoadBalancer",
                &violations,
            )
            .await;
        self.ctx.cloud.cluster().record(
            key,
            Some(PendingWrite {
                set_annotations: annotations.set.clone(),
                remove_annotations: annotations.remove.clone(),
                ingress: ingress.clone(),
            }),
        );
        // Only what changes anything is written: a converged Service gets no write.
        let effective = annotations.effective(&current_annotations);
        if !effective.is_empty() {
            self.apply_annotations(key, svc, &effective.set, &effective.remove)
                .await?;
        }
        // Compared as the apiserver stores it (ipMode defaulted to VIP for an ip), and written
        // that way, so a restart or a re-ensure of a converged Service writes nothing.
        let ingress = normalize_ingress(&ingress_to_kube(&ingress));
        let changed = !keep_status && !same_ingress(&previous, &ingress);
        if !quiet || changed {
            self.event(
                &regarding,
                false,
                "EnsuredLoadBalancer",
                "Ensured load balancer",
                "EnsureLoadBalancer",
            )
            .await;
        }
        if changed {
            self.patch_ingress(svc, &ingress).await?;
        }
        Ok(())
    }

    /// Adds or removes the finalizer through the status subresource (upstream's RBAC grants
    /// the service controller `services/status` only), locked on the resourceVersion.
    async fn set_finalizer(&self, svc: &Service, present: bool) -> Result<(), ReconcileError> {
        let finalizers = self.ctx.route.finalizers_after(svc, present);
        let patch = json!({
            "metadata": {
                "resourceVersion": svc.metadata.resource_version,
                "finalizers": finalizers,
            }
        });
        // Upstream writes finalizers through the status subresource too (servicehelper's
        // PatchService), so RBAC written for it keeps working.
        let result = self
            .ctx
            .kube
            .patch(REPORTER, Self::target_of(svc), &patch, true)
            .await;
        match result {
            Ok(_) => Ok(()),
            // Gone once the last finalizer went: nothing left to do.
            Err(e) if !present && is_status(&e, 404) => Ok(()),
            Err(e) => Err(ReconcileError::kube(format!(
                "failed to {} finalizer {}: {e}",
                if present { "add" } else { "remove" },
                self.ctx.route.finalizer()
            ))),
        }
    }

    async fn apply_annotations(
        &self,
        key: &str,
        svc: &Service,
        set: &[(String, String)],
        remove: &[String],
    ) -> Result<(), ReconcileError> {
        let mut changes = serde_json::Map::new();
        let mut expected = svc.metadata.annotations.clone().unwrap_or_default();
        for (k, v) in set {
            changes.insert(k.clone(), Value::String(v.clone()));
            expected.insert(k.clone(), v.clone());
        }
        for k in remove {
            changes.insert(k.clone(), Value::Null);
            expected.remove(k);
        }
        lock(&self.own_annotations).insert(key.to_string(), expected);
        let patch = json!({ "metadata": { "annotations": changes } });
        self.ctx
            .kube
            .patch(REPORTER, Self::target_of(svc), &patch, false)
            .await
            .map_err(|e| {
                ReconcileError::kube(format!(
                    "failed to write the annotations the driver asked for: {e}"
                ))
            })?;
        Ok(())
    }

    /// Writes `status.loadBalancer.ingress` (a merge patch replaces the list). A Service that
    /// vanished meanwhile is fine.
    async fn patch_ingress(
        &self,
        svc: &Service,
        ingress: &[LoadBalancerIngress],
    ) -> Result<(), ReconcileError> {
        let patch = json!({ "status": { "loadBalancer": { "ingress": ingress } } });
        match self
            .ctx
            .kube
            .patch(REPORTER, Self::target_of(svc), &patch, true)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) => Err(ReconcileError::kube(format!(
                "failed to update load balancer status: {e}"
            ))),
        }
    }

    async fn node_sync_loop(&self, cancel: CancellationToken) {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = self.node_sync.notified() => {}
            }
            // Bursts of node changes (a scale-up, a rolling restart, initialisation of many
            // nodes) coalesce into one pass: wait for a quiet moment, at most NODE_SYNC_MAX_WAIT.
            let burst_end = tokio::time::Instant::now() + NODE_SYNC_MAX_WAIT;
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(NODE_SYNC_QUIET) => break,
                    _ = self.node_sync.notified() => {
                        if tokio::time::Instant::now() >= burst_end {
                            break;
                        }
                    }
                }
            }
            // Changes arriving during a pass coalesce into one more pass. Due is cleared as the pass starts, so a wake during the pass keeps the controller
            // pending until the pass it asked for has run (a bool set and cleared around the pass
            // read "idle" while the next pass waited for its quiet moment).
            self.node_sync_running
                .store(true, std::sync::atomic::Ordering::SeqCst);
            self.node_sync_due
                .store(false, std::sync::atomic::Ordering::SeqCst);
            let stale = self.sync_backends().await;
            self.node_sync_running
                .store(false, std::sync::atomic::Ordering::SeqCst);
            if stale {
                // A Service got a set older than the node cache: one more pass.
                self.wake_node_sync();
            }
        }
    }

    /// One node-sync pass: `update` for every load balancer whose backend set changed. Returns
    /// whether a set older than the node cache was used (`backends.rs`): then another pass is due.
    pub(crate) async fn sync_backends(&self) -> bool {
        let started = Instant::now();
        let keys: Vec<String> = lock(&self.last_nodes).keys().cloned().collect();
        let used_stale = std::sync::atomic::AtomicBool::new(false);
        let used_stale = &used_stale;
        futures::stream::iter(keys)
            .for_each_concurrent(self.ctx.config.concurrent_service_syncs.max(1), |key| {
                async move {
                    let key_lock = self.key_lock(&key);
                    let _held = key_lock.lock().await;
                    // The set is read under the key's lock (free: it is cached): one read before
                    // waiting could be older than what the Service's own ensure just applied,
                    // and the pass would put the older set back.
                    let (
                        BackendSet {
                            key: backend_set,
                            nodes: wit_nodes,
                        },
                        stale,
                    ) = self.backends.recent();
                    if stale {
                        used_stale.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    let backend_set = &backend_set;
                    let wit_nodes = &wit_nodes;
                    // Read under the lock: the Service's own sync may just have cleaned up.
                    let Some(svc) = self.ctx.services.get(&key) else {
                        return;
                    };
                    if !self.ctx.route.may_update_backends(&svc) {
                        return;
                    }
                    {
                        let mut last = lock(&self.last_nodes);
                        // Forgotten (cleaned up) since this pass started.
                        let Some(previous) = last.get(&key) else {
                            return;
                        };
                        if previous == backend_set {
                            return;
                        }
                        last.insert(key.clone(), Arc::clone(backend_set));
                    }
                    self.update_backends(&key, &svc, wit_nodes).await;
                }
            })
            .await;
        self.ctx.metrics.observe(
            "service_controller_nodesync_latency_seconds",
            &[],
            started.elapsed().as_secs_f64(),
        );
        used_stale.load(std::sync::atomic::Ordering::Relaxed)
    }

    async fn update_backends(
        &self,
        key: &str,
        svc: &Service,
        nodes: &wasm_ccm_runtime::SharedNodes,
    ) {
        let regarding = reference(svc);
        let wit = service_to_wit(svc);
        let scope = self.ctx.cloud.scope(key);
        let started = Instant::now();
        let result = self
            .ctx
            .cloud
            .call(
                Function::LoadBalancerUpdate,
                About::object(REPORTER, &regarding),
                self.ctx
                    .cloud
                    .provider()
                    .load_balancer_update(&wit, nodes, &scope),
            )
            .await;
        self.ctx.metrics.observe(
            "service_controller_update_loadbalancer_host_latency_seconds",
            &[],
            started.elapsed().as_secs_f64(),
        );
        match result {
            Ok(()) if nodes.nodes().is_empty() => {
                self.event(
                    &regarding,
                    true,
                    "UnAvailableLoadBalancer",
                    "There are no available nodes for LoadBalancer",
                    "UpdateLoadBalancer",
                )
                .await;
            }
            Ok(()) => {
                self.event(
                    &regarding,
                    false,
                    "UpdatedLoadBalancer",
                    "Updated load balancer with new hosts",
                    "UpdateLoadBalancer",
                )
                .await;
            }
            Err(CallError::Provider(ProviderError::ImplementedElsewhere)) => {}
            Err(e) => {
                let exists = self.load_balancer_get(&wit, &scope, &regarding).await;
                if matches!(exists, Ok(None)) {
                    return;
                }
                self.ctx
                    .metrics
                    .inc("service_controller_nodesync_error_total", &[]);
                let names: Vec<&str> = nodes
                    .nodes()
                    .iter()
                    .take(20)
                    .map(|n| n.name.as_str())
                    .collect();
                let message = format!(
                    "Error updating load balancer with new hosts {:?} [node names limited, total number of nodes: {}], error: {e}",
                    names,
                    nodes.nodes().len()
                );
                // Work under way (retry-after) is not a failure worth a Warning.
                if !in_progress(&e) {
                    self.event(
                        &regarding,
                        true,
                        "UpdateLoadBalancerFailed",
                        &message,
                        "UpdateLoadBalancer",
                    )
                    .await;
                }
                // A full ensure follows: now, or when the driver asked.
                lock(&self.last_nodes).remove(key);
                self.runner.enqueue_after(
                    key.to_string(),
                    requested_delay(&e).unwrap_or(Duration::ZERO),
                );
            }
        }
    }
}

impl Reconciler for ServiceController {
    fn reconcile<'a>(
        &'a self,
        key: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<Action, ReconcileError>> {
        Box::pin(async move {
            self.ctx
                .metrics
                .inc("service_controller_loadbalancer_sync_total", &[]);
            self.sync(key).await.map(|()| Action::Done)
        })
    }

    /// Upstream's `SyncLoadBalancerFailed` Warning; a load balancer still being built is
    /// progress, not a failure (upstream CCMs wait inside the call and record nothing).
    fn on_error<'a>(
        &'a self,
        key: &'a str,
        e: &'a ReconcileError,
    ) -> futures::future::BoxFuture<'a, ()> {
        Box::pin(async move {
            if e.in_progress() {
                return;
            }
            if let Some(svc) = self.ctx.services.get(key) {
                self.event(
                    &reference(svc.as_ref()),
                    true,
                    "SyncLoadBalancerFailed",
                    &format!("Error syncing load balancer: {}", e.message),
                    "SyncLoadBalancer",
                )
                .await;
            }
        })
    }
}

/// This controller's line in [`crate::registry::CONTROLLERS`].
pub(crate) const ENTRY: ControllerEntry = ControllerEntry {
    name: "service-lb-controller",
    alias: "service",
    title: "service controller",
    needs: Needs::LoadBalancer,
    switched_on: always,
    start,
};

/// Starts it: registers its informer handlers and spawns its tasks.
fn start(w: &mut Wiring<'_>) -> Result<(), String> {
    let c = ServiceController::new(Arc::clone(w.ctx));
    let (hs, hn) = (Arc::clone(&c), Arc::clone(&c));
    w.services
        .on_change(move |old, new| hs.handle_service(old, new));
    w.nodes.on_change(move |old, new| hn.handle_node(old, new));
    w.tasks.spawn(Arc::clone(&c).run(w.cancel.clone()));
    if let Some(shadow) = &w.ctx.shadow {
        // A shadow looks again at the Services whose cloud writes are pending (shadow/recheck.rs).
        let rerun = Arc::clone(&c);
        w.tasks.spawn(crate::shadow::recheck_pending(
            Arc::clone(shadow),
            "Service",
            shadow.recheck_period(),
            move |key| rerun.enqueue(key),
            w.cancel.clone(),
        ));
    }
    w.pending.push(c);
    Ok(())
}

impl Pending for ServiceController {
    fn pending(&self) -> usize {
        ServiceController::pending(self)
    }

    fn export_gauges(&self) {
        self.runner.export_in_flight();
    }
}
