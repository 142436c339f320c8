//! The cloud-node-lifecycle controller (upstream:
//! `k8s.io/cloud-provider/controllers/nodelifecycle/node_lifecycle_controller.go`): deletes nodes
//! whose instance is gone and taints nodes whose instance is shut down.

#[cfg(test)]
mod upstream;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Taint};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use wasm_ccm_runtime::CallError;
use wasm_ccm_runtime::types::ProviderError;

use crate::cloud::listing::Listed;
use crate::cloud::{About, Function};
use crate::controllers::entry::{ControllerEntry, Needs, Wiring, always};
use crate::controllers::node::rules::SHUTDOWN_TAINT;
use crate::convert::{node_is_ready, node_to_wit};
use crate::ctx::Ctx;
use crate::events::reference;
use crate::kube::{Target, is_status};

/// Reporter name of the lifecycle controller's events.
pub(crate) const REPORTER: &str = "cloud-node-lifecycle-controller";

/// What one node needs this pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    Nothing,
    RemoveShutdownTaint,
    AddShutdownTaint,
    Delete,
}

fn has_shutdown_taint(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == SHUTDOWN_TAINT))
}

/// Upstream's decision table (`MonitorNodes`). `exists` and `shutdown` are the driver's answers
/// (asked only for nodes that are not Ready); a `not-found` from instance-exists means "does not
/// exist".
pub(crate) fn decide(
    ready: bool,
    shutdown_tainted: bool,
    exists: Option<&Result<bool, CallError>>,
    shutdown: Option<&Result<bool, CallError>>,
) -> Decision {
    if ready {
        return if shutdown_tainted {
            Decision::RemoveShutdownTaint
        } else {
            Decision::Nothing
        };
    }
    match exists {
        Some(Ok(false)) | Some(Err(CallError::Provider(ProviderError::NotFound(_)))) => {
            Decision::Delete
        }
        Some(Ok(true)) => match shutdown {
            Some(Ok(true)) if !shutdown_tainted => Decision::AddShutdownTaint,
            _ => Decision::Nothing,
        },
        _ => Decision::Nothing,
    }
}

/// The lifecycle controller.
pub(crate) struct LifecycleController {
    ctx: Arc<Ctx>,
}

impl LifecycleController {
    /// A controller over `ctx`.
    pub(crate) fn new(ctx: Arc<Ctx>) -> Arc<Self> {
        Arc::new(LifecycleController { ctx })
    }

    /// Runs a pass at once and then every `--node-monitor-period` after the previous one ended.
    pub(crate) async fn run(self: Arc<Self>, cancel: CancellationToken) {
        // Unlike upstream, wait for the cache: a first pass over an empty cache does nothing.
        self.ctx.nodes.wait_synced().await;
        loop {
            self.monitor_nodes().await;
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(self.ctx.config.node_monitor_period) => {}
            }
        }
    }

    /// One pass over every node; an error on one node never stops the others.
    pub(crate) async fn monitor_nodes(&self) {
        for node in self.ctx.nodes.list() {
            self.monitor(&node).await;
        }
    }

    /// Asks `instances.instance-shutdown` (`function` is [`Function::InstanceShutdown`]) or
    /// `instances.instance-exists` about `node`. A listing at hand no older than
    /// `--node-monitor-period` that names the node by its provider ID answers instead (listed means it exists; its
    /// shutdown state is the listed one); the pass never takes a listing itself, so a stopped or
    /// deleted instance is seen as soon as upstream's per-node check sees it, and only the
    /// driver's own per-node answer can delete a Node.
    async fn ask(&self, function: Function, node: &Node) -> Result<bool, CallError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let wit = node_to_wit(node);
        let within = self.ctx.config.node_monitor_period;
        // Only by provider ID: some drivers decline to say by a node's name whether its
        // machine is gone or stopped, and a listing matched by name must not decide for them.
        if !wit.provider_id.is_empty()
            && let Listed::Found(listed) = self.ctx.cloud.listed_at_hand(&wit, within).await
        {
            return Ok(match function {
                Function::InstanceShutdown => listed.shutdown,
                _ => true,
            });
        }
        let scope = self.ctx.cloud.scope(&name);
        let regarding = reference(node);
        let cloud = self.ctx.cloud.provider();
        let call = if function == Function::InstanceShutdown {
            cloud.instance_shutdown(&wit, &scope)
        } else {
            cloud.instance_exists(&wit, &scope)
        };
        let about = About::object(REPORTER, &regarding);
        self.ctx.cloud.call(function, about, call).await
    }

    async fn monitor(&self, node: &Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let ready = node_is_ready(node);
        let tainted = has_shutdown_taint(node);
        // A node of another provider is never deleted or tainted on this driver's word, and the
        // driver is not asked about it. A Ready, untainted one needs nothing anyway: skipped
        // without a word, so a mixed cluster is not flooded with events.
        let existing = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .unwrap_or_default();
        if !self.ctx.route.owns_node(node) {
            if !ready || tainted {
                self.ctx
                    .skip_foreign_node(REPORTER, node, "MonitorNode")
                    .await;
            }
            return;
        }
        // With several drivers, a node without a provider ID was never initialised: its owner
        // by selector is only a claim, and no driver's "not found" about it may delete it (the
        // draft KEP-5778's worry about probing a node twice before it is initialised).
        if existing.is_empty() && !self.ctx.route.is_single() {
            return;
        }
        if ready && !tainted {
            return self.act(node, &name, ready, tainted).await;
        }
        // Only a node the pass asks the driver about gets a reconcile span: a span per Ready
        // node every period would bury the ones that matter.
        let span = crate::machinery::runner::reconcile_span("node-lifecycle", "Node", &name);
        self.act(node, &name, ready, tainted).instrument(span).await
    }

    /// Asks the driver about a node that is not Ready (or is tainted) and acts on the answer.
    async fn act(&self, node: &Node, name: &str, ready: bool, tainted: bool) {
        let (exists, shutdown) = if ready {
            (None, None)
        } else {
            let exists = self.ask(Function::InstanceExists, node).await;
            let shutdown = if matches!(exists, Ok(true)) {
                Some(self.ask(Function::InstanceShutdown, node).await)
            } else {
                None
            };
            (Some(exists), shutdown)
        };
        if let Some(Err(e)) = &exists
            && !matches!(e, CallError::Provider(ProviderError::NotFound(_)))
        {
            tracing::warn!(node = %name, error = %e, "could not check whether the instance exists; skipping the node this pass");
        }
        match decide(ready, tainted, exists.as_ref(), shutdown.as_ref()) {
            Decision::Nothing => {}
            Decision::RemoveShutdownTaint => self.set_shutdown_taint(node, false).await,
            Decision::AddShutdownTaint => self.set_shutdown_taint(node, true).await,
            Decision::Delete => self.delete(node).await,
        }
    }

    async fn delete(&self, node: &Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let regarding = reference(node);
        self.ctx
            .events
            .publish(
                REPORTER,
                &regarding,
                false,
                "DeletingNode",
                &format!("Deleting node {name} because it does not exist in the cloud provider"),
                "DeleteNode",
            )
            .await;
        // The UID precondition protects a node re-registered under the same name meanwhile.
        let result = self
            .ctx
            .kube
            .delete_node(REPORTER, &name, node.metadata.uid.as_deref())
            .await;
        match result {
            Ok(_) => tracing::info!(node = %name, "deleted node: its instance no longer exists"),
            Err(e) if is_status(&e, 404) => {}
            Err(e) => {
                tracing::warn!(node = %name, error = %e, "could not delete node");
                self.ctx
                    .events
                    .publish(
                        REPORTER,
                        &regarding,
                        true,
                        "DeletingNodeFailed",
                        // Upstream's wording (`deleteNodeFailedEvent` in MonitorNodes).
                        &format!("Failed deleting node {name}: {e}"),
                        "DeleteNode",
                    )
                    .await;
            }
        }
    }

    /// Adds or removes the shutdown taint with an optimistic lock (taints have no merge key),
    /// retrying conflicts up to five times from a fresh read.
    async fn set_shutdown_taint(&self, node: &Node, present: bool) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let mut current = node.clone();
        for _ in 0..5 {
            let mut taints: Vec<Taint> = current
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default()
                .into_iter()
                .filter(|t| t.key != SHUTDOWN_TAINT)
                .collect();
            if present {
                taints.push(Taint {
                    key: SHUTDOWN_TAINT.into(),
                    effect: "NoSchedule".into(),
                    value: None,
                    time_added: None,
                });
            }
            let patch = json!({
                "metadata": { "resourceVersion": current.metadata.resource_version },
                "spec": { "taints": taints },
            });
            let result = self
                .ctx
                .kube
                .patch(REPORTER, Target::Node(&name), &patch, false)
                .await;
            match result {
                Ok(_) => {
                    tracing::info!(node = %name, shutdown = present, "shutdown taint updated");
                    return;
                }
                Err(e) if is_status(&e, 409) => {
                    let nodes = self.ctx.kube.nodes(REPORTER);
                    match self.ctx.kube.request("get", nodes.get(&name)).await {
                        Ok(fresh) => current = fresh,
                        Err(e) => {
                            tracing::warn!(node = %name, error = %e, "could not re-read node");
                            return;
                        }
                    }
                    if has_shutdown_taint(&current) == present {
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!(node = %name, error = %e, "could not update the shutdown taint");
                    return;
                }
            }
        }
    }
}

/// This controller's line in [`crate::registry::CONTROLLERS`].
pub(crate) const ENTRY: ControllerEntry = ControllerEntry {
    name: "cloud-node-lifecycle-controller",
    alias: "cloud-node-lifecycle",
    title: "cloud node lifecycle controller",
    needs: Needs::Instances,
    switched_on: always,
    start,
};

/// Starts it: registers its informer handlers and spawns its tasks.
fn start(w: &mut Wiring<'_>) -> Result<(), String> {
    w.tasks
        .spawn(LifecycleController::new(Arc::clone(w.ctx)).run(w.cancel.clone()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ControllerConfig;
    use crate::test_support::{FakeCloud, Harness, node_json};
    use std::time::Duration;
    use wasm_ccm_runtime::HostError;
    use wasm_ccm_sim::kube::RequestMatcher;

    /// A refused delete is reported as upstream words it (`DeletingNodeFailed`, "Failed
    /// deleting node …"), and the node stays.
    #[tokio::test]
    async fn failed_delete_is_reported_in_upstreams_words() {
        let cloud = FakeCloud::default();
        cloud
            .exists
            .lock()
            .unwrap()
            .insert("node0".into(), Ok(false));
        let node = node_json("node0", Some("fake://node0"), false, false);
        let h = Harness::start(cloud, vec![node]).await;
        h.sim.faults().fail_next(
            1,
            500,
            RequestMatcher::resource("nodes").with_method("DELETE"),
        );
        LifecycleController::new(Arc::clone(&h.ctx))
            .monitor_nodes()
            .await;
        // The fault fired: the delete was tried and the node is still there.
        assert_eq!(h.sim.faults().pending(), 0);
        assert!(h.node("node0").is_some());
        let events = h.events_for("node0");
        assert!(
            events
                .iter()
                .any(|e| e.starts_with("DeletingNode: Deleting node node0 because")),
            "{events:?}"
        );
        assert!(
            events
                .iter()
                .any(|e| e.starts_with("DeletingNodeFailed: Failed deleting node node0: ")),
            "{events:?}"
        );
    }

    /// `--node-monitor-period`: a pass at once, then one a period after the previous one ended
    /// (upstream's `wait.UntilWithContext`). In paused time, with a period other than the 5 s
    /// default; each pass asks the cloud once about the one NotReady node (which exists, so
    /// nothing is written and a pass takes no virtual time).
    #[tokio::test]
    async fn a_pass_runs_every_node_monitor_period() {
        let period = Duration::from_secs(7);
        let config = ControllerConfig {
            node_monitor_period: period,
            ..ControllerConfig::default()
        };
        let node = node_json("node0", Some("fake://node0"), false, false);
        let h = Harness::start_with(FakeCloud::default(), vec![node], config).await;
        tokio::time::pause();
        let start = tokio::time::Instant::now();
        let cancel = CancellationToken::new();
        let controller = LifecycleController::new(Arc::clone(&h.ctx));
        let task = tokio::spawn(controller.run(cancel.clone()));
        // The timer wheel rounds each wait up to its next millisecond: the checks keep clear.
        let margin = Duration::from_millis(100);
        // (virtual time since the start, passes by then)
        for (at, passes) in [
            (margin, 1),
            (period - margin, 1),
            (period + margin, 2),
            (period * 2 - margin, 2),
            (period * 2 + margin, 3),
        ] {
            tokio::time::sleep_until(start + at).await;
            let asked = h.cloud.calls_of("instances.instance-exists");
            assert_eq!(asked, passes, "passes after {at:?}");
        }
        cancel.cancel();
        task.await.expect("the controller's task");
    }

    fn host_err() -> Result<bool, CallError> {
        Err(CallError::Host(HostError::Deadline {
            driver: "d".into(),
            function: "f".into(),
            deadline: std::time::Duration::from_secs(1),
        }))
    }

    #[test]
    fn decision_table() {
        use Decision::*;
        let not_found = Err(CallError::Provider(ProviderError::NotFound("x".into())));
        type Answer = Option<Result<bool, CallError>>;
        let cases: Vec<(&str, bool, bool, Answer, Answer, Decision)> = vec![
            ("ready, untainted", true, false, None, None, Nothing),
            (
                "ready, tainted: taint removed",
                true,
                true,
                None,
                None,
                RemoveShutdownTaint,
            ),
            (
                "not ready, gone",
                false,
                false,
                Some(Ok(false)),
                None,
                Delete,
            ),
            (
                "not ready, not-found means gone",
                false,
                false,
                Some(not_found),
                None,
                Delete,
            ),
            (
                "not ready, exists errors: skip",
                false,
                false,
                Some(host_err()),
                None,
                Nothing,
            ),
            (
                "not ready, shut down",
                false,
                false,
                Some(Ok(true)),
                Some(Ok(true)),
                AddShutdownTaint,
            ),
            (
                "not ready, shut down, already tainted",
                false,
                true,
                Some(Ok(true)),
                Some(Ok(true)),
                Nothing,
            ),
            (
                "not ready, running: taint stays",
                false,
                true,
                Some(Ok(true)),
                Some(Ok(false)),
                Nothing,
            ),
            (
                "not ready, shutdown errors",
                false,
                false,
                Some(Ok(true)),
                Some(host_err()),
                Nothing,
            ),
        ];
        for (name, ready, tainted, exists, shutdown, want) in cases {
            assert_eq!(
                decide(ready, tainted, exists.as_ref(), shutdown.as_ref()),
                want,
                "{name}"
            );
        }
    }
}
