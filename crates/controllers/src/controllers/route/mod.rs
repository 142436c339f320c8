//! The node-route controller (upstream:
//! `k8s.io/cloud-provider/controllers/route/route_controller.go`): keeps one cloud route per node
//! pod CIDR and the nodes' `NetworkUnavailable` condition.

pub(crate) mod rules;
#[cfg(test)]
mod upstream;

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

/// Reporter name of the route controller's events.
pub(crate) const REPORTER: &str = "route_controller";

/// At most this many route operations in flight (upstream's cap).
const MAX_IN_FLIGHT: usize = 200;

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

    /// Reconciles at once and then every `--route-reconciliation-period` (fixed rate).
    pub(crate) async fn run(self: Arc<Self>, cancel: CancellationToken) {
        self.ctx.nodes.wait_synced().await;
        let mut ticker = tokio::time::interval(self.ctx.config.route_reconciliation_period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = ticker.tick() => {}
            }
            // One span per pass: the pass reconciles the route table as a whole.
            let span = crate::machinery::runner::reconcile_span("route", "Route", "");
            if let Err(e) = self.reconcile().instrument(span).await {
                tracing::warn!(kind = e.kind.label(), error = %e, "route reconciliation failed; retrying next period");
                self.ctx.metrics.inc(
                    "wasm_ccm_reconcile_errors_total",
                    &[("controller", "route"), ("kind", e.kind.label())],
                );
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

    /// One reconcile pass.
    pub(crate) async fn reconcile(&self) -> Result<(), ReconcileError> {
        self.ctx
            .metrics
            .inc("route_controller_route_sync_total", &[]);
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
        if let Some(shadow) = &self.ctx.shadow {
            let creates = plan.creates.iter();
            let planned = creates.map(|c| c.route.destination_cidr.as_str()).collect();
            shadow.settle_unplanned("Route", Function::RoutesCreate.as_str(), &planned);
            let deletes = plan.deletes.iter();
            let planned = deletes.map(|r| r.destination_cidr.as_str()).collect();
            shadow.settle_unplanned("Route", Function::RoutesDelete.as_str(), &planned);
        }
        let deletes = futures::stream::iter(plan.deletes.clone())
            .for_each_concurrent(MAX_IN_FLIGHT, |route| async move {
                let scope = self.ctx.cloud.scope(&route.target_node);
                let node = self.node_reference(&route.target_node);
                let about = About::subject(Subject::route(&route.destination_cidr))
                    .with_events_on(REPORTER, &node);
                let cloud = self.ctx.cloud.provider();
                let call = cloud.routes_delete(&route, &scope);
                let result = self.ctx.cloud.call(Function::RoutesDelete, about, call).await;
                match result {
                    Ok(()) => tracing::info!(route = %route.name, cidr = %route.destination_cidr, "deleted route"),
                    Err(e) => tracing::warn!(route = %route.name, error = %e, "could not delete route"),
                }
            });
        // Deletions finish before creations: required when the provider tracks addresses (an
        // update is delete + create), harmless otherwise.
        deletes.await;
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
        Ok(())
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
    w.tasks
        .spawn(RouteController::new(Arc::clone(w.ctx), cidrs).run(w.cancel.clone()));
    Ok(())
}
