//! The Cloud seam: everything the controllers ask of a cloud, as one trait.
//!
//! The controllers never name the concrete driver. In production the [`DriverSlot`] (the driver
//! in service, swapped by a hot reload between calls) implements [`CloudProvider`]; the crate's
//! tests implement it with a scripted fake (`test_support::FakeCloud`), so reconcile bodies run
//! in process without a WebAssembly component. Routing several drivers (nodes by owner, load
//! balancers by class) is another implementation of the same trait.
//!
//! Every call returns the runtime's [`Outcome`]: the result plus what the metrics and events
//! need (the driver's events, the elapsed time). A fake fills in what it has.

use std::sync::Arc;

use futures::future::BoxFuture;
use wasm_ccm_runtime::surface::Exports;
use wasm_ccm_runtime::types::{
    EnsureResult, Ingress, InstanceMetadata, Node, ProviderInfo, Route, Service,
};
use wasm_ccm_runtime::{CallScope, Outcome, SharedNodes};

use crate::metrics::Metrics;
use crate::reload::DriverSlot;

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
