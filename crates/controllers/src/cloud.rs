//! The Cloud seam: everything the controllers ask of a cloud, as one trait, and the state of
//! the seam.
//!
//! The controllers never name the concrete driver. In production the [`DriverSlot`] (the driver
//! in service, swapped by a hot reload between calls; `reload.rs` swaps it, this module owns it)
//! implements [`CloudProvider`]; the crate's tests implement it with a scripted fake
//! (`test_support::FakeCloud`), so reconcile bodies run in process without a WebAssembly
//! component. With several drivers each has its own slot and its own [`Cloud`]; routing decides
//! which one a node or Service goes to.
//!
//! [`Cloud`] is the seam as the controllers hold it: the provider with metrics around every call,
//! the drivers' cluster view it hands each call, and a shadow run's recording of the cloud writes
//! the runtime refused. [`Subject`] names what a call is about.
//!
//! Every call returns the runtime's [`Outcome`]: the result plus what the metrics and events
//! need (the driver's events, the elapsed time). A fake fills in what it has.

use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ObjectReference;
use wasm_ccm_runtime::surface::Exports;
use wasm_ccm_runtime::types::{
    EnsureResult, Ingress, InstanceMetadata, Node, ProviderInfo, Route, Service,
};
use wasm_ccm_runtime::{
    CallError, CallScope, ClusterView, Driver, DriverEvent, Outcome, SharedNodes,
};

use crate::cluster_view::StoreCluster;
use crate::metrics::Metrics;
use crate::shadow::{Recorded, ShadowLog};

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

/// The driver in service; swapped whole by a reload.
pub struct DriverSlot {
    current: RwLock<Arc<Driver>>,
}

impl DriverSlot {
    /// A slot holding `driver`.
    pub fn new(driver: Arc<Driver>) -> Self {
        DriverSlot {
            current: RwLock::new(driver),
        }
    }

    /// The driver in service now. Callers hold the `Arc` for one call, so a swap never
    /// interrupts a call in flight.
    pub(crate) fn get(&self) -> Arc<Driver> {
        Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Puts `driver` in service; returns the one it replaced.
    pub(crate) fn swap(&self, driver: Arc<Driver>) -> Arc<Driver> {
        std::mem::replace(
            &mut *self.current.write().unwrap_or_else(|p| p.into_inner()),
            driver,
        )
    }
}

/// The cloud behind the seam ([`CloudProvider`]) with metrics around every call.
pub(crate) struct Cloud {
    provider: SharedCloud,
    /// The `driver` label of its metrics: the configured name with several drivers, else the
    /// driver's own name (read per call: a reload may not change it, but a fake may).
    label: Option<String>,
    metrics: Arc<Metrics>,
    cluster: Arc<StoreCluster>,
    shadow: Option<Arc<ShadowLog>>,
}

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

impl Cloud {
    /// Wraps `provider` (in production the slot of the driver in service); with `shadow`, the
    /// writes the runtime refused are recorded there.
    pub(crate) fn new(
        provider: SharedCloud,
        label: Option<String>,
        metrics: Arc<Metrics>,
        cluster: Arc<StoreCluster>,
        shadow: Option<Arc<ShadowLog>>,
    ) -> Self {
        Cloud {
            provider,
            label,
            metrics,
            cluster,
            shadow,
        }
    }

    fn record_shadowed<T>(
        &self,
        shadow: &ShadowLog,
        function: &str,
        subject: Subject,
        outcome: &Outcome<T>,
    ) {
        let refused: Vec<String> = outcome
            .http
            .iter()
            .filter_map(|e| e.shadowed.clone())
            .collect();
        let any = !refused.is_empty();
        let recorded = shadow.record_cloud(
            function,
            subject.kind,
            &subject.object,
            refused,
            outcome.result.is_ok(),
        );
        if any && recorded == Recorded::Changed {
            self.metrics.inc(
                "wasm_ccm_shadow_writes_total",
                &[("controller", function), ("target", "cloud")],
            );
            tracing::info!(
                function,
                kind = subject.kind,
                object = %subject.object,
                "shadow: the driver would write to the cloud (refused, recorded)"
            );
        }
    }

    /// The calls to the cloud (a reload may swap the driver between calls, never during one).
    pub(crate) fn api(&self) -> &dyn CloudProvider {
        self.provider.as_ref()
    }

    /// The cloud's name, for messages and metric labels: the configured name with several
    /// drivers, else the driver's own.
    pub(crate) fn name(&self) -> String {
        match &self.label {
            Some(label) => label.clone(),
            None => self.provider.name(),
        }
    }

    /// The provider-ID scheme the driver declared (`<scheme>://…`).
    pub(crate) fn provider_id_scheme(&self) -> String {
        self.provider.provider_id_scheme()
    }

    /// The cluster view the driver sees.
    pub(crate) fn cluster(&self) -> &StoreCluster {
        &self.cluster
    }

    /// The call scope for `object`.
    pub(crate) fn scope(&self, object: &str) -> CallScope {
        CallScope {
            object: object.to_string(),
            cluster: Arc::clone(&self.cluster) as Arc<dyn ClusterView>,
        }
    }

    /// Counts and times a finished call about `subject`; returns its result and the events the
    /// driver recorded. In a shadow run, records the cloud writes the runtime refused.
    pub(crate) fn observe<T>(
        &self,
        function: &str,
        subject: Subject,
        outcome: Outcome<T>,
    ) -> (Result<T, CallError>, Vec<DriverEvent>) {
        if let Some(shadow) = &self.shadow {
            self.record_shadowed(shadow, function, subject, &outcome);
        }
        let result = match &outcome.result {
            Ok(_) => "ok",
            Err(CallError::Provider(p)) => p.case(),
            Err(CallError::Host(_)) => "host-error",
        };
        let driver = self.name();
        self.metrics.inc(
            "wasm_ccm_driver_calls_total",
            &[
                ("driver", &driver),
                ("function", function),
                ("result", result),
            ],
        );
        self.metrics.observe(
            "wasm_ccm_driver_call_duration_seconds",
            &[("driver", &driver), ("function", function)],
            outcome.elapsed.as_secs_f64(),
        );
        (outcome.result, outcome.events)
    }

    /// Copies the cloud's own counters into the registry (at scrape time).
    pub(crate) fn export_counters(&self) {
        self.provider.export_counters(&self.metrics, &self.name());
    }
}

/// The driver in service: each call takes the current driver once and holds it for the call, so
/// a reload never cuts a call.
impl CloudProvider for DriverSlot {
    fn name(&self) -> String {
        self.get().name().to_string()
    }

    fn info(&self) -> ProviderInfo {
        self.get().info().clone()
    }

    fn provider_id_scheme(&self) -> String {
        self.get().info().provider_id_scheme.clone()
    }

    fn exports(&self) -> Exports {
        self.get().compiled().surface.exports
    }

    fn instance_exists<'a>(
        &'a self,
        node: &'a Node,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<bool>> {
        Box::pin(async move { self.get().instance_exists(node, scope).await })
    }

    fn instance_shutdown<'a>(
        &'a self,
        node: &'a Node,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<bool>> {
        Box::pin(async move { self.get().instance_shutdown(node, scope).await })
    }

    fn instance_metadata<'a>(
        &'a self,
        node: &'a Node,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<InstanceMetadata>> {
        Box::pin(async move { self.get().instance_metadata(node, scope).await })
    }

    fn load_balancer_get<'a>(
        &'a self,
        service: &'a Service,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<Option<Vec<Ingress>>>> {
        Box::pin(async move { self.get().load_balancer_get(service, scope).await })
    }

    fn load_balancer_ensure<'a>(
        &'a self,
        service: &'a Service,
        nodes: &'a SharedNodes,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<EnsureResult>> {
        Box::pin(async move {
            self.get()
                .load_balancer_ensure_shared(service, nodes, scope)
                .await
        })
    }

    fn load_balancer_update<'a>(
        &'a self,
        service: &'a Service,
        nodes: &'a SharedNodes,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<()>> {
        Box::pin(async move {
            self.get()
                .load_balancer_update_shared(service, nodes, scope)
                .await
        })
    }

    fn load_balancer_delete<'a>(
        &'a self,
        service: &'a Service,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<()>> {
        Box::pin(async move { self.get().load_balancer_delete(service, scope).await })
    }

    fn routes_list<'a>(&'a self, scope: &'a CallScope) -> BoxFuture<'a, Outcome<Vec<Route>>> {
        Box::pin(async move { self.get().routes_list(scope).await })
    }

    fn routes_create<'a>(
        &'a self,
        name_hint: &'a str,
        route: &'a Route,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<()>> {
        Box::pin(async move { self.get().routes_create(name_hint, route, scope).await })
    }

    fn routes_delete<'a>(
        &'a self,
        route: &'a Route,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<()>> {
        Box::pin(async move { self.get().routes_delete(route, scope).await })
    }

    fn housekeeping<'a>(&'a self, scope: &'a CallScope) -> BoxFuture<'a, Outcome<()>> {
        Box::pin(async move { self.get().housekeeping(scope).await })
    }

    fn export_counters(&self, metrics: &Metrics, driver: &str) {
        let current = self.get();
        metrics.clear_where("wasm_ccm_driver_http_requests_total", ("driver", driver));
        for ((host, status), n) in current.http_counters() {
            metrics.set(
                "wasm_ccm_driver_http_requests_total",
                &[("driver", driver), ("host", &host), ("status", &status)],
                n as f64,
            );
        }
        for ((secret, reason), n) in current.secret_misuse() {
            metrics.set(
                "wasm_ccm_secret_misuse_total",
                &[("driver", driver), ("secret", &secret), ("reason", reason)],
                n as f64,
            );
        }
        metrics.set(
            "wasm_ccm_driver_dropped_log_lines_total",
            &[("driver", driver)],
            current.dropped_log_lines() as f64,
        );
        metrics.set(
            "wasm_ccm_driver_lowered_bytes_total",
            &[("driver", driver)],
            current.lowered_bytes() as f64,
        );
        let stats = current.stats();
        let load =
            |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed) as f64;
        metrics.set(
            "wasm_ccm_driver_instances_total",
            &[("driver", driver)],
            load(&stats.instances_created),
        );
        metrics.set(
            "wasm_ccm_driver_instances_recycled_total",
            &[("driver", driver)],
            load(&stats.instances_recycled),
        );
        metrics.set(
            "wasm_ccm_driver_calls_in_flight",
            &[("driver", driver)],
            load(&stats.in_flight),
        );
    }
}
