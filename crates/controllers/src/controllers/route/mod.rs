//! The node-route controller (upstream:
//! `k8s.io/cloud-provider/controllers/route/route_controller.go`): keeps one cloud route per node
//! pod CIDR and the nodes' `NetworkUnavailable` condition; periodic, or on node changes with
//! KEP-5237's gate ([`watch`]).

pub(crate) mod rules;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod upstream;
mod watch;

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use self::rules::{Cidr, RouteNode, network_condition, parse_cluster_cidrs, plan_routes};
use crate::cloud::{About, Function, Subject};
use crate::controllers::entry::{ControllerEntry, Needs, Wiring};
use crate::convert::node_to_wit;
use crate::ctx::Ctx;
use crate::events::reference;
use crate::machinery::error::ReconcileError;
use watch::{Changes, Trigger};

/// Reporter name of the route controller's events.
pub(crate) const REPORTER: &str = "route_controller";

/// At most this many route operations in flight (upstream's cap).
const MAX_IN_FLIGHT: usize = 200;

/// What one pass did: route creates and deletes it planned, and how many of them failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PassOutcome {
    pub(crate) planned: usize,
    pub(crate) failed: usize,
}

/// The route controller.
pub(crate) struct RouteController {
    ctx: Arc<Ctx>,
    cluster_cidrs: Vec<Cidr>,
}

impl RouteController {
    /// A controller for `cluster_cidrs` (validated by the caller).
    pub(crate) fn new(ctx: Arc<Ctx>, cluster_cidrs: Vec<Cidr>) -> Arc<Self> {
        Arc::new(RouteController { ctx, cluster_cidrs })
    }

    /// Gate off: reconciles at once and then every `--route-reconciliation-period` (fixed
    /// rate, upstream's `wait.NonSlidingUntil`).
    pub(crate) async fn run(self: Arc<Self>, cancel: CancellationToken) {
        self.ctx.nodes.wait_synced().await;
        let mut ticker = tokio::time::interval(self.ctx.config.route_reconciliation_period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = ticker.tick() => {}
            }
            self.pass(Trigger::Periodic).await;
        }
    }

    /// Gate on (KEP-5237): reconciles on the node changes `changes` collects, at most once per
    /// 10 s, and once in a random interval of `--min-resync-period` to twice that.
    async fn run_on_changes(self: Arc<Self>, changes: Arc<Changes>, cancel: CancellationToken) {
        self.ctx.nodes.wait_synced().await;
        let periodic = watch::periodic_interval(self.ctx.config.min_resync_period);
        tracing::info!(
            safety_net_seconds = periodic.as_secs(),
            "route controller reconciles on node changes (CloudControllerManagerWatchBasedRoutesReconciliation)"
        );
        watch::run_on_changes(changes, periodic, cancel, |trigger| {
            let this = Arc::clone(&self);
            async move { this.pass(trigger).await }
        })
        .await;
    }

    /// One reconcile pass, logged and counted: `route_controller_route_sync_total` by trigger
    /// and outcome, and (gate on) `route_controller_route_corrections_total` when a periodic
    /// pass had routes to create or delete, i.e. a change the node events missed. Whether the
    /// pass succeeded: a failed route operation counts as a failure here, so the watch-based
    /// loop retries it in 10 s (a deviation: upstream retries only a failed listing, and a
    /// failed create waits for the next node event or resync).
    async fn pass(&self, trigger: Trigger) -> bool {
        // One span per pass: the pass reconciles the route table as a whole.
        let span = crate::machinery::runner::reconcile_span("route", "Route", "");
        let result = self.reconcile().instrument(span).await;
        // Upstream's outcomes (kubernetes#140147, #140824): `error` when the pass itself failed
        // (listing routes), `changed` when it made at least one route create or delete (whether
        // each succeeded is the driver call metrics' and the events' to say), else `noop`.
        let outcome = match &result {
            Ok(o) if o.planned > 0 => "changed",
            Ok(_) => "noop",
            Err(_) => "error",
        };
        let metrics = &self.ctx.metrics;
        metrics.inc(
            "route_controller_route_sync_total",
            &[("trigger", trigger.label()), ("outcome", outcome)],
        );
        if self.ctx.config.watch_based_routes
            && trigger == Trigger::Periodic
            && outcome == "changed"
        {
            metrics.inc("route_controller_route_corrections_total", &[]);
        }
        match result {
            Ok(o) => o.failed == 0,
            Err(e) => {
                tracing::warn!(kind = e.kind.label(), error = %e, "route reconciliation failed; retrying");
                metrics.inc(
                    "wasm_ccm_reconcile_errors_total",
                    &[("controller", "route"), ("kind", e.kind.label())],
                );
                false
            }
        }
    }

    /// What a route call's driver events are about: the route's target node (upstream's route
    /// controller reports on the Node too), as cached, or by name when it is gone (a stale
    /// route's delete).
    fn node_reference(&self, name: &str) -> ObjectReference {
        match self.ctx.nodes.get(name) {
            Some(node) => reference(node.as_ref()),
            None => ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(name.to_string()),
                ..Default::default()
            },
        }
    }

    /// One reconcile pass: what it planned and how many of those route operations failed.
    pub(crate) async fn reconcile(&self) -> Result<PassOutcome, ReconcileError> {
        let scope = self.ctx.cloud.scope("");
        let routes = self
            .ctx
            .cloud
            .call(
                Function::RoutesList,
                About::subject(Subject::driver("routes")),
                self.ctx.cloud.provider().routes_list(&scope),
            )
            .await;
        let routes = routes
            .map_err(|e| ReconcileError::driver(format!("could not list routes: {e}"), &e))?;
        // With several drivers, routes are planned over this driver's nodes only: a route to
        // another cloud's node is never made, and one listed is stale.
        let nodes: Vec<Arc<Node>> = self
            .ctx
            .nodes
            .list()
            .into_iter()
            .filter(|n| self.ctx.route.is_single() || self.ctx.route.owns_node(n))
            .collect();
        let route_nodes: Vec<RouteNode> = nodes
            .iter()
            .map(|n| {
                let wit = node_to_wit(n);
                RouteNode {
                    name: wit.name,
                    uid: wit.uid,
                    pod_cidrs: n
                        .spec
                        .as_ref()
                        .and_then(|s| {
                            s.pod_cidrs
                                .clone()
                                .or_else(|| s.pod_cidr.clone().map(|c| vec![c]))
                        })
                        .unwrap_or_default(),
                    addresses: wit.addresses,
                }
            })
            .collect();
        let mut plan = plan_routes(&routes, &route_nodes, &self.cluster_cidrs);
        let mut outcome = PassOutcome {
            planned: plan.creates.len() + plan.deletes.len(),
            failed: 0,
        };
        if let Some(shadow) = &self.ctx.shadow {
            let creates = plan.creates.iter();
            let planned = creates.map(|c| c.route.destination_cidr.as_str()).collect();
            shadow.settle_unplanned("Route", Function::RoutesCreate.as_str(), &planned);
            let deletes = plan.deletes.iter();
            let planned = deletes.map(|r| r.destination_cidr.as_str()).collect();
            shadow.settle_unplanned("Route", Function::RoutesDelete.as_str(), &planned);
        }
        let deleted: Vec<bool> = futures::stream::iter(plan.deletes.clone())
            .map(|route| async move {
                let scope = self.ctx.cloud.scope(&route.target_node);
                let node = self.node_reference(&route.target_node);
                let about = About::subject(Subject::route(&route.destination_cidr))
                    .with_events_on(REPORTER, &node);
                let cloud = self.ctx.cloud.provider();
                let call = cloud.routes_delete(&route, &scope);
                let result = self.ctx.cloud.call(Function::RoutesDelete, about, call).await;
                match &result {
                    Ok(()) => tracing::info!(route = %route.name, cidr = %route.destination_cidr, "deleted route"),
                    Err(e) => tracing::warn!(route = %route.name, error = %e, "could not delete route"),
                }
                result.is_ok()
            })
            .buffer_unordered(MAX_IN_FLIGHT)
            .collect()
            // Deletions finish before creations: required when the provider tracks addresses
            // (an update is delete + create), harmless otherwise.
            .await;
        outcome.failed += deleted.iter().filter(|ok| !**ok).count();
        let results: Vec<(String, String, Result<(), String>)> =
            futures::stream::iter(plan.creates.clone())
                .map(|create| async move {
                    let scope = self.ctx.cloud.scope(&create.node);
                    let node = self.node_reference(&create.node);
                    let about = About::subject(Subject::route(&create.route.destination_cidr))
                        .with_events_on(REPORTER, &node);
                    let cloud = self.ctx.cloud.provider();
                    let call = cloud.routes_create(&create.name_hint, &create.route, &scope);
                    let result = self
                        .ctx
                        .cloud
                        .call(Function::RoutesCreate, about, call)
                        .await;
                    (
                        create.node,
                        create.route.destination_cidr,
                        result.map_err(|e| e.to_string()),
                    )
                })
                .buffer_unordered(MAX_IN_FLIGHT)
                .collect()
                .await;
        for (node, cidr, result) in results {
            match result {
                Ok(()) => {
                    if let Some(entry) = plan.status.get_mut(&node) {
                        entry.insert(cidr, true);
                    }
                }
                Err(e) => {
                    outcome.failed += 1;
                    tracing::warn!(node = %node, cidr = %cidr, error = %e, "could not create route");
                    if let Some(n) = self.ctx.nodes.get(&node) {
                        self.ctx
                            .events
                            .publish(
                                REPORTER,
                                &reference(n.as_ref()),
                                true,
                                "FailedToCreateRoute",
                                &format!("Could not create route {cidr} for node {node}: {e}"),
                                "CreateRoute",
                            )
                            .await;
                    }
                }
            }
        }
        for (node, cidrs) in &plan.status {
            let (status, reason, message) = network_condition(cidrs);
            if let Some(n) = self.ctx.nodes.get(node)
                && let Err(e) = self.set_condition(&n, status, reason, message).await
            {
                tracing::warn!(node = %node, error = %e, "could not update NetworkUnavailable");
            }
        }
        Ok(outcome)
    }

    /// Writes `NetworkUnavailable` unless it already has this status and reason (a different
    /// reason, e.g. from a CNI, is overwritten).
    async fn set_condition(
        &self,
        node: &Node,
        status: &str,
        reason: &str,
        message: &str,
    ) -> Result<(), kube::Error> {
        let current = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "NetworkUnavailable"));
        if current.is_some_and(|c| c.status == status && c.reason.as_deref() == Some(reason)) {
            return Ok(());
        }
        let now = jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        let patch = json!({
            "status": { "conditions": [{
                "type": "NetworkUnavailable",
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": now,
                "lastHeartbeatTime": now,
            }]}
        });
        let name = node.metadata.name.clone().unwrap_or_default();
        self.ctx
            .kube
            .patch_conditions(REPORTER, &name, &patch)
            .await?;
        Ok(())
    }
}

/// This controller's line in [`crate::registry::CONTROLLERS`].
pub(crate) const ENTRY: ControllerEntry = ControllerEntry {
    name: "node-route-controller",
    alias: "route",
    title: "route controller",
    needs: Needs::Routes,
    // Upstream's switch: off means quiet, the operator asked for it.
    switched_on: |c| c.configure_cloud_routes,
    start,
};

/// Starts it: registers its informer handlers and spawns its tasks.
fn start(w: &mut Wiring<'_>) -> Result<(), String> {
    // Upstream exits here; a CCM that cannot run routes can still run everything else.
    let cidrs = parse_cluster_cidrs(&w.ctx.config.cluster_cidr).map_err(|e| {
        format!("{e}; pass --cluster-cidr, or --configure-cloud-routes=false to silence this")
    })?;
    let controller = RouteController::new(Arc::clone(w.ctx), cidrs);
    if w.ctx.config.watch_based_routes {
        let changes = Arc::new(Changes::default());
        let noted = Arc::clone(&changes);
        w.nodes.on_change(move |old, new| {
            if let Some(trigger) = watch::route_trigger(old, new) {
                noted.note(trigger);
            }
        });
        w.tasks
            .spawn(controller.run_on_changes(changes, w.cancel.clone()));
    } else {
        w.tasks.spawn(controller.run(w.cancel.clone()));
    }
    Ok(())
}
