//! What a controller is to the rest of the process: its [`ControllerEntry`] (names, the driver
//! interface it needs, its switch and how it starts) and what starting gets ([`Wiring`]). Each
//! controller's folder defines its `ENTRY`; `registry.rs` lists them. A leaf: it names no
//! controller, so the controllers and the list can both use it without an import circle.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Service};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use wasm_ccm_runtime::Exports;

use crate::config::ControllerConfig;
use crate::ctx::Ctx;
use crate::machinery::informer::Informer;

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

/// A queue-driven controller, as the rest of the process reads it: its outstanding work (the
/// playground waits for it) and its queue's scrape-time gauges.
pub(crate) trait Pending: Send + Sync {
    /// Keys queued, in flight or waiting for a retry (0 when idle).
    fn pending(&self) -> usize;

    /// Sets the work queue's gauges that are read rather than kept.
    fn export_gauges(&self);
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

/// `switched_on` of a controller that only `--controllers` turns off.
pub(crate) fn always(_: &ControllerConfig) -> bool {
    true
}
