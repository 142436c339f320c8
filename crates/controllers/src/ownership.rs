//! Node ownership: which nodes a driver may act on. A node carrying another provider's ID, or
//! (with several drivers) another driver's node, an ambiguous one or one no driver claims, is
//! never initialised, deleted or tainted on this driver's word; the first sighting of each is
//! logged and recorded as one event.
//!
//! The rule is a method of the controllers' context ([`Ctx::skip_foreign_node`]): it reads the
//! routing view, the cloud's scheme, the metrics, the events and their memory. It is written
//! here, beside its reasons, and `ctx.rs` does not name this module.

use k8s_openapi::api::core::v1::Node;

use crate::answer_rules::shown;
use crate::ctx::Ctx;
use crate::events::reference;
use crate::routing::NodeOwner;

/// Reason of the Warning event on a node whose provider ID belongs to another provider.
pub(crate) const FOREIGN_NODE_REASON: &str = "ForeignProviderID";
/// Reason of the Warning event on an uninitialised node two drivers' selectors claim.
pub(crate) const AMBIGUOUS_NODE_REASON: &str = "AmbiguousNodeOwner";
/// Reason of the Normal event on an uninitialised node no configured driver claims.
pub(crate) const NO_DRIVER_REASON: &str = "NoDriverForNode";

impl Ctx {
    /// Whether this driver must leave `node` alone: it carries another provider's ID, or (with
    /// several drivers) it belongs to another configured driver, or no driver or more than one
    /// claims it. The first time per node and reason this logs and records one event (by one
    /// driver only, so a node gets one event however many drivers run), later passes log at
    /// debug level. Such a node is never initialised, deleted or tainted on this driver's word.
    pub(crate) async fn skip_foreign_node(
        &self,
        reporter: &'static str,
        node: &Node,
        action: &str,
    ) -> bool {
        let existing = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .unwrap_or_default();
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let (reason, warning, message) = match self.route.node_owner(node) {
            NodeOwner::Driver(i) if i == self.route.index() => return false,
            NodeOwner::Driver(i) => {
                tracing::debug!(node = %name, owner = %self.route.name_of(i), driver = %self.route.name(), "another driver's node");
                return true;
            }
            NodeOwner::Foreign => {
                let scheme = self.cloud.provider_id_scheme();
                let message = if self.route.is_single() {
                    format!(
                        "node {name} has provider ID {}, which is not of the driver's scheme {}; the driver {} is not asked about it and the node is never initialised, deleted or tainted by this controller manager",
                        shown(existing),
                        shown(&format!("{scheme}://")),
                        shown(&self.cloud.name())
                    )
                } else {
                    format!(
                        "node {name} has provider ID {}, whose scheme no configured driver has ({}); no driver is asked about it and the node is never initialised, deleted or tainted by this controller manager",
                        shown(existing),
                        self.schemes()
                    )
                };
                (FOREIGN_NODE_REASON, true, message)
            }
            NodeOwner::Ambiguous(drivers) => {
                let names: Vec<&str> = drivers.iter().map(|i| self.route.name_of(*i)).collect();
                (
                    AMBIGUOUS_NODE_REASON,
                    true,
                    format!(
                        "node {name} has no provider ID and the node selectors of drivers {} all match its labels; no driver is asked about it and it keeps its taint until its labels or the selectors name one driver",
                        names.join(" and ")
                    ),
                )
            }
            NodeOwner::Unrouted => (
                NO_DRIVER_REASON,
                false,
                format!(
                    "node {name} has no provider ID, no driver's node selector matches its labels and no driver is the default for nodes; it is left to whoever owns it (another controller manager)"
                ),
            ),
        };
        if !self.route.reports_unowned() {
            return true;
        }
        let first = self.refusals.first_unowned(format!(
            "{}\n{existing}\n{reason}",
            node.metadata.uid.as_deref().unwrap_or(name)
        ));
        if !first {
            tracing::debug!(node = %name, provider_id = %existing, reason, "skipping a node no driver here owns");
            return true;
        }
        let label = match reason {
            FOREIGN_NODE_REASON => "foreign",
            AMBIGUOUS_NODE_REASON => "ambiguous",
            _ => "unrouted",
        };
        self.metrics.inc(
            "wasm_ccm_node_ownership_skipped_total",
            &[("reason", label)],
        );
        tracing::info!(node = %name, provider_id = %existing, reason, "skipping a node: {message}");
        self.events
            .publish(
                reporter,
                &reference(node),
                warning,
                reason,
                &message,
                action,
            )
            .await;
        true
    }

    /// The configured drivers' schemes, for messages.
    fn schemes(&self) -> String {
        self.route
            .routing()
            .drivers()
            .iter()
            .map(|d| format!("{}://", d.provider_id_scheme))
            .collect::<Vec<_>>()
            .join(", ")
    }
}
