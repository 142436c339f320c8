//! The controllers, listed once. `--controllers` parsing ([`EnabledControllers`], here), the
//! export check and the start-up (`run.rs`) all read [`CONTROLLERS`]; adding a controller is one
//! entry here plus its module.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Service};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use wasm_ccm_runtime::surface::Exports;

use crate::config::ControllerConfig;
use crate::ctx::Ctx;
use crate::informer::Informer;
use crate::lifecycle::LifecycleController;
use crate::node::NodeController;
use crate::route::RouteController;
use crate::route_rules::parse_cluster_cidrs;
use crate::service::ServiceController;

/// The driver interface a controller calls; without it the controller is not started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Needs {
    /// `instances`.
    Instances,
    /// `load-balancer`.
    LoadBalancer,
    /// `routes`.
    Routes,
}

impl Needs {
    /// Whether `exports` has the interface.
    pub(crate) fn met_by(self, exports: &Exports) -> bool {
        match self {
            Needs::Instances => exports.instances,
            Needs::LoadBalancer => exports.load_balancer,
            Needs::Routes => exports.routes,
        }
    }

    /// Whether a driver without the interface is worth a warning: a driver without `routes` is
    /// the common case (most clouds route pod traffic themselves), so that is only noted.
    pub(crate) fn missing_is_notable(self) -> bool {
        self != Needs::Routes
    }

    /// The interface's WIT name, for messages.
    pub(crate) fn interface(self) -> &'static str {
        match self {
            Needs::Instances => "instances",
            Needs::LoadBalancer => "load-balancer",
            Needs::Routes => "routes",
        }
    }
}

/// Something whose outstanding work the playground waits for.
pub(crate) trait Pending: Send + Sync {
    /// Keys queued, in flight or waiting for a retry (0 when idle).
    fn pending(&self) -> usize;
}

impl Pending for NodeController {
    fn pending(&self) -> usize {
        NodeController::pending(self)
    }
}

impl Pending for ServiceController {
    fn pending(&self) -> usize {
        ServiceController::pending(self)
    }
}

/// What a controller's `start` gets: the shared context, the informers to register handlers
/// on (before they run), and where to put its tasks.
pub(crate) struct Wiring<'a> {
    pub(crate) ctx: &'a Arc<Ctx>,
    pub(crate) nodes: &'a mut Informer<Node>,
    pub(crate) services: &'a mut Informer<Service>,
    pub(crate) tasks: &'a mut JoinSet<()>,
    pub(crate) cancel: &'a CancellationToken,
    pub(crate) pending: &'a mut Vec<Arc<dyn Pending>>,
}

/// One controller: upstream's canonical name and alias (for `--controllers`), the interface it
/// needs, and how it starts (an `Err` says why it cannot run; the others still do).
pub(crate) struct ControllerEntry {
    pub(crate) name: &'static str,
    pub(crate) alias: &'static str,
    /// How log lines name it ("route controller").
    pub(crate) title: &'static str,
    pub(crate) needs: Needs,
    /// Whether its own switch is on (beside `--controllers`), e.g. `--configure-cloud-routes`.
    pub(crate) switched_on: fn(&ControllerConfig) -> bool,
    pub(crate) start: fn(&mut Wiring<'_>) -> Result<(), String>,
}

fn always(_: &ControllerConfig) -> bool {
    true
}

/// Every controller, in upstream's order. At most 8 (the enabled set is a bit mask).
pub(crate) const CONTROLLERS: &[ControllerEntry] = &[
    ControllerEntry {
        name: "cloud-node-controller",
        alias: "cloud-node",
        title: "cloud node controller",
        needs: Needs::Instances,
        switched_on: always,
        start: start_node,
    },
    ControllerEntry {
        name: "cloud-node-lifecycle-controller",
        alias: "cloud-node-lifecycle",
        title: "cloud node lifecycle controller",
        needs: Needs::Instances,
        switched_on: always,
        start: start_lifecycle,
    },
    ControllerEntry {
        name: "service-lb-controller",
        alias: "service",
        title: "service controller",
        needs: Needs::LoadBalancer,
        switched_on: always,
        start: start_service,
    },
    ControllerEntry {
        name: "node-route-controller",
        alias: "route",
        title: "route controller",
        needs: Needs::Routes,
        // Upstream's switch: off means quiet, the operator asked for it.
        switched_on: |c| c.configure_cloud_routes,
        start: start_route,
    },
];

fn start_node(w: &mut Wiring<'_>) -> Result<(), String> {
    let c = NodeController::new(Arc::clone(w.ctx));
    let h = Arc::clone(&c);
    w.nodes.on_change(move |old, new| h.handle(old, new));
    w.tasks.spawn(Arc::clone(&c).run(w.cancel.clone()));
    w.pending.push(c);
    Ok(())
}

fn start_lifecycle(w: &mut Wiring<'_>) -> Result<(), String> {
    w.tasks
        .spawn(LifecycleController::new(Arc::clone(w.ctx)).run(w.cancel.clone()));
    Ok(())
}

fn start_service(w: &mut Wiring<'_>) -> Result<(), String> {
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

fn start_route(w: &mut Wiring<'_>) -> Result<(), String> {
    // Upstream exits here; a CCM that cannot run routes can still run everything else.
    let cidrs = parse_cluster_cidrs(&w.ctx.config.cluster_cidr).map_err(|e| {
        format!("{e}; pass --cluster-cidr, or --configure-cloud-routes=false to silence this")
    })?;
    w.tasks
        .spawn(RouteController::new(Arc::clone(w.ctx), cidrs).run(w.cancel.clone()));
    Ok(())
}

/// Which controllers run: a set over the table in `registry.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnabledControllers {
    /// Bit `i` set: `CONTROLLERS[i]` runs.
    mask: u8,
}

impl EnabledControllers {
    /// Every controller (upstream's `*`: all are on by default).
    pub const ALL: EnabledControllers = EnabledControllers {
        mask: ((1u16 << CONTROLLERS.len()) - 1) as u8,
    };

    /// No controller.
    pub const NONE: EnabledControllers = EnabledControllers { mask: 0 };

    /// Whether the controller named `name` (canonical or alias) runs; unknown names do not.
    pub fn is_enabled(&self, name: &str) -> bool {
        position(name).is_some_and(|i| self.mask & (1 << i) != 0)
    }

    /// The canonical names of the controllers that run, in upstream's order.
    pub fn names(&self) -> Vec<&'static str> {
        CONTROLLERS
            .iter()
            .enumerate()
            .filter(|(i, _)| self.mask & (1 << i) != 0)
            .map(|(_, c)| c.name)
            .collect()
    }

    /// Parses `--controllers` with upstream's rules: `*` enables every controller that is on by
    /// default (all of them), `name` enables, `-name` disables, the first explicit mention of a
    /// controller wins, aliases map to canonical names, unknown names are an error.
    pub fn parse(items: &[String]) -> Result<Self, String> {
        let mut explicit: Vec<Option<bool>> = vec![None; CONTROLLERS.len()];
        let mut star = false;
        for item in items.iter().flat_map(|i| i.split(',')).map(str::trim) {
            if item.is_empty() {
                continue;
            }
            if item == "*" {
                star = true;
                continue;
            }
            let (on, name) = match item.strip_prefix('-') {
                Some(name) => (false, name),
                None => (true, item),
            };
            let Some(i) = position(name) else {
                let known: Vec<String> = CONTROLLERS
                    .iter()
                    .map(|c| format!("{} ({})", c.name, c.alias))
                    .collect();
                return Err(format!(
                    "--controllers: unknown controller {name:?}; known: *, {}",
                    known.join(", ")
                ));
            };
            explicit[i].get_or_insert(on);
        }
        let mask = explicit
            .iter()
            .enumerate()
            .filter(|(_, on)| on.unwrap_or(star))
            .fold(0u8, |mask, (i, _)| mask | (1 << i));
        Ok(EnabledControllers { mask })
    }
}

/// The position of `name` (canonical or alias) in [`CONTROLLERS`].
pub(crate) fn position(name: &str) -> Option<usize> {
    CONTROLLERS
        .iter()
        .position(|c| c.name == name || c.alias == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<EnabledControllers, String> {
        EnabledControllers::parse(&[s.to_string()])
    }

    #[test]
    fn names_are_unique_and_fit_the_mask() {
        assert!(CONTROLLERS.len() <= 8);
        let mut seen = std::collections::HashSet::new();
        for c in CONTROLLERS {
            assert!(seen.insert(c.name) && seen.insert(c.alias), "{}", c.name);
        }
        assert_eq!(position("service"), Some(2));
        assert_eq!(position("node-route-controller"), Some(3));
        assert_eq!(position("nodes"), None);
    }

    #[test]
    fn controllers_flag_table() {
        let names = |s: &str| parse(s).map(|c| c.names());
        let all = EnabledControllers::ALL.names();
        assert_eq!(all.len(), 4);
        assert_eq!(names("*"), Ok(all.clone()));
        let no_route = vec![
            "cloud-node-controller",
            "cloud-node-lifecycle-controller",
            "service-lb-controller",
        ];
        assert_eq!(names("*,-route"), Ok(no_route.clone()));
        assert_eq!(names("-node-route-controller,*"), Ok(no_route));
        assert_eq!(
            names("service,cloud-node"),
            Ok(vec!["cloud-node-controller", "service-lb-controller"])
        );
        // The first explicit mention wins.
        assert_eq!(
            parse("service,-service").map(|c| c.is_enabled("service")),
            Ok(true)
        );
        assert_eq!(parse(""), Ok(EnabledControllers::NONE));
        let err = parse("*,nodes").unwrap_err();
        assert!(
            err.contains("unknown controller \"nodes\"") && err.contains("cloud-node"),
            "{err}"
        );
        assert!(EnabledControllers::ALL.is_enabled("cloud-node-lifecycle"));
        assert!(!EnabledControllers::ALL.is_enabled("nodes"));
    }
}
