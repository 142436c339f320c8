//! The Cloud seam: everything the controllers ask of a cloud, as one trait, and the state of
//! the seam.
//!
//! The controllers never name the concrete driver. The loaded driver implements
//! [`CloudProvider`] itself (`driver.rs`); the crate's tests implement it with a scripted fake
//! (`test_support::FakeCloud`), so reconcile bodies run in process without a WebAssembly
//! component. A [`CloudSource`] says which provider serves the next call: in production the
//! [`DriverSlot`] (the driver in service, swapped by a hot reload between calls). With several
//! drivers each has its own slot and its own [`Cloud`]; routing decides which one a node or
//! Service goes to.
//!
//! [`Cloud`] (`metered.rs`) is the seam as the controllers hold it and the one decorator around
//! every call: counting, timing, span, shadow recording and the driver's events. Call sites
//! name the function by [`Function`] and what the call is about by [`About`]/[`Subject`], and
//! get the typed result.
//!
//! Every call returns the runtime's [`Outcome`]: the result plus what the metrics and events
//! need (the driver's events, the elapsed time). A fake fills in what it has.

mod driver;
mod function;
pub(crate) mod listing;
mod metered;
mod slot;

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ObjectReference;
use wasm_ccm_runtime::Exports;
use wasm_ccm_runtime::types::{
    EnsureResult, Ingress, InstanceMetadata, InstancePage, Node, ProviderInfo, Route, Service,
};
use wasm_ccm_runtime::{CallScope, Outcome, SharedNodes};

use crate::metrics::Metrics;

pub(crate) use function::Function;
pub(crate) use metered::{Cloud, CloudParts};
pub(crate) use slot::CloudSource;
pub use slot::DriverSlot;
#[cfg(test)]
pub(crate) use slot::Fixed;

/// What the controllers ask of a cloud: upstream's `cloudprovider.Interface` reduced to the
/// calls the four controllers make, plus `housekeeping`.
pub(crate) trait CloudProvider: Send + Sync {
    /// The driver's name, for metric labels and messages.
    fn name(&self) -> String;
    /// What the driver declared at load (provider-ID scheme, annotation prefixes, …).
    fn info(&self) -> ProviderInfo;
    /// The provider-ID scheme alone: asked per node on every pass, so a driver need not copy
    /// its whole info for it.
    fn provider_id_scheme(&self) -> String {
        self.info().provider_id_scheme
    }
    /// Which interfaces it implements: a controller whose interface is missing is not started.
    fn exports(&self) -> Exports;

    /// `instances.instance-exists`.
    fn instance_exists<'a>(
        &'a self,
        node: &'a Node,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<bool>>;
    /// `instances.instance-shutdown`.
    fn instance_shutdown<'a>(
        &'a self,
        node: &'a Node,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<bool>>;
    /// `instances.instance-metadata`.
    fn instance_metadata<'a>(
        &'a self,
        node: &'a Node,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<InstanceMetadata>>;

    /// `instance-listing.list-instances` (contract 0.2.2): one page, `page` `None` for the
    /// first. A provider that cannot list answers `not-implemented`.
    fn list_instances<'a>(
        &'a self,
        page: Option<&'a str>,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<InstancePage>>;

    /// `load-balancer.get`.
    fn load_balancer_get<'a>(
        &'a self,
        service: &'a Service,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<Option<Vec<Ingress>>>>;
    /// `load-balancer.ensure` with the shared backend set.
    fn load_balancer_ensure<'a>(
        &'a self,
        service: &'a Service,
        nodes: &'a SharedNodes,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<EnsureResult>>;
    /// `load-balancer.update` with the shared backend set.
    fn load_balancer_update<'a>(
        &'a self,
        service: &'a Service,
        nodes: &'a SharedNodes,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<()>>;
    /// `load-balancer.delete`.
    fn load_balancer_delete<'a>(
        &'a self,
        service: &'a Service,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<()>>;

    /// `routes.list`.
    fn routes_list<'a>(&'a self, scope: &'a CallScope) -> BoxFuture<'a, Outcome<Vec<Route>>>;
    /// `routes.create`.
    fn routes_create<'a>(
        &'a self,
        name_hint: &'a str,
        route: &'a Route,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<()>>;
    /// `routes.delete`.
    fn routes_delete<'a>(
        &'a self,
        route: &'a Route,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<()>>;

    /// `provider.housekeeping`.
    fn housekeeping<'a>(&'a self, scope: &'a CallScope) -> BoxFuture<'a, Outcome<()>>;

    /// Copies the cloud's own counters (HTTP requests, dropped log lines, instances) into the
    /// registry at scrape time, labelled `driver=label`. A cloud without counters keeps the
    /// default.
    fn export_counters(&self, _metrics: &Metrics, _label: &str) {}
}

/// A shared cloud, as the controllers hold it.
pub(crate) type SharedCloud = Arc<dyn CloudProvider>;

/// What a driver call is about, for the shadow report: a kind (`Node`, `Service`, or `Driver`
/// for calls about no one object) and the object's key (a Service's `namespace/name`).
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    pub(crate) kind: &'static str,
    pub(crate) object: String,
}

impl Subject {
    /// A Node by name.
    pub(crate) fn node(name: &str) -> Self {
        Subject {
            kind: "Node",
            object: name.to_string(),
        }
    }

    /// A Service by `namespace/name`.
    pub(crate) fn service(key: &str) -> Self {
        Subject {
            kind: "Service",
            object: key.to_string(),
        }
    }

    /// A call about no one object (housekeeping, the route pass).
    pub(crate) fn driver(what: &str) -> Self {
        Subject {
            kind: "Driver",
            object: what.to_string(),
        }
    }

    /// A route by destination CIDR.
    pub(crate) fn route(destination: &str) -> Self {
        Subject {
            kind: "Route",
            object: destination.to_string(),
        }
    }

    /// The subject an event reference names.
    pub(crate) fn of(regarding: &ObjectReference) -> Self {
        let name = regarding.name.as_deref().unwrap_or_default();
        match (regarding.kind.as_deref(), regarding.namespace.as_deref()) {
            (Some("Node"), _) => Subject::node(name),
            (Some("Service"), Some(ns)) => Subject::service(&format!("{ns}/{name}")),
            _ => Subject::driver(name),
        }
    }
}

/// What a driver call is about: the [`Subject`] its metrics, spans and shadow record name, and
/// the object (with the controller reporting on it) that carries the driver's events.
pub(crate) struct About<'a> {
    pub(crate) subject: Subject,
    pub(crate) regarding: Option<(&'static str, &'a ObjectReference)>,
}

impl<'a> About<'a> {
    /// A call about the Node or Service `regarding`, reported by `reporter`.
    pub(crate) fn object(reporter: &'static str, regarding: &'a ObjectReference) -> Self {
        About {
            subject: Subject::of(regarding),
            regarding: Some((reporter, regarding)),
        }
    }

    /// A call about `subject` with no object to carry events (they are logged).
    pub(crate) fn subject(subject: Subject) -> Self {
        About {
            subject,
            regarding: None,
        }
    }

    /// The same call, its events on `regarding` (a route's target node), reported by `reporter`.
    pub(crate) fn with_events_on(
        mut self,
        reporter: &'static str,
        regarding: &'a ObjectReference,
    ) -> Self {
        self.regarding = Some((reporter, regarding));
        self
    }
}

#[cfg(test)]
mod tests;
