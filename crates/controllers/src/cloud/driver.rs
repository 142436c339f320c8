//! The loaded driver behind the seam: [`Driver`] implements [`CloudProvider`] itself, each
//! method one call of the runtime's, so a new driver export costs this impl's method, the
//! fake's and the trait's, and nothing forwards.

use futures::future::BoxFuture;
use wasm_ccm_runtime::Exports;
use wasm_ccm_runtime::types::{
    EnsureResult, Ingress, InstanceMetadata, InstancePage, Node, ProviderInfo, Route, Service,
};
use wasm_ccm_runtime::{CallScope, Driver, Outcome, SharedNodes};

use super::CloudProvider;
use crate::metrics::Metrics;

impl CloudProvider for Driver {
    fn name(&self) -> String {
        Driver::name(self).to_string()
    }

    fn info(&self) -> ProviderInfo {
        Driver::info(self).clone()
    }

    fn provider_id_scheme(&self) -> String {
        Driver::info(self).provider_id_scheme.clone()
    }

    fn exports(&self) -> Exports {
        self.compiled().surface.exports
    }

    fn instance_exists<'a>(
        &'a self,
        node: &'a Node,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<bool>> {
        Box::pin(Driver::instance_exists(self, node, scope))
    }

    fn instance_shutdown<'a>(
        &'a self,
        node: &'a Node,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<bool>> {
        Box::pin(Driver::instance_shutdown(self, node, scope))
    }

    fn instance_metadata<'a>(
        &'a self,
        node: &'a Node,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<InstanceMetadata>> {
        Box::pin(Driver::instance_metadata(self, node, scope))
    }

    fn list_instances<'a>(
        &'a self,
        page: Option<&'a str>,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<InstancePage>> {
        Box::pin(Driver::list_instances(self, page, scope))
    }

    fn load_balancer_get<'a>(
        &'a self,
        service: &'a Service,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<Option<Vec<Ingress>>>> {
        Box::pin(Driver::load_balancer_get(self, service, scope))
    }

    fn load_balancer_ensure<'a>(
        &'a self,
        service: &'a Service,
        nodes: &'a SharedNodes,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<EnsureResult>> {
        Box::pin(self.load_balancer_ensure_shared(service, nodes, scope))
    }

    fn load_balancer_update<'a>(
        &'a self,
        service: &'a Service,
        nodes: &'a SharedNodes,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<()>> {
        Box::pin(self.load_balancer_update_shared(service, nodes, scope))
    }

    fn load_balancer_delete<'a>(
        &'a self,
        service: &'a Service,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<()>> {
        Box::pin(Driver::load_balancer_delete(self, service, scope))
    }

    fn routes_list<'a>(&'a self, scope: &'a CallScope) -> BoxFuture<'a, Outcome<Vec<Route>>> {
        Box::pin(Driver::routes_list(self, scope))
    }

    fn routes_create<'a>(
        &'a self,
        name_hint: &'a str,
        route: &'a Route,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<()>> {
        Box::pin(Driver::routes_create(self, name_hint, route, scope))
    }

    fn routes_delete<'a>(
        &'a self,
        route: &'a Route,
        scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<()>> {
        Box::pin(Driver::routes_delete(self, route, scope))
    }

    fn housekeeping<'a>(&'a self, scope: &'a CallScope) -> BoxFuture<'a, Outcome<()>> {
        Box::pin(Driver::housekeeping(self, scope))
    }

    fn export_counters(&self, metrics: &Metrics, driver: &str) {
        metrics.clear_where("wasm_ccm_driver_http_requests_total", ("driver", driver));
        for ((host, status), n) in self.http_counters() {
            metrics.set(
                "wasm_ccm_driver_http_requests_total",
                &[("driver", driver), ("host", &host), ("status", &status)],
                n as f64,
            );
        }
        for ((secret, reason), n) in self.secret_misuse() {
            metrics.set(
                "wasm_ccm_secret_misuse_total",
                &[("driver", driver), ("secret", &secret), ("reason", reason)],
                n as f64,
            );
        }
        // Only a driver the operator gave a budget has these series (no budget: nothing paced).
        if let Some(counts) = self.cloud_requests() {
            for outcome in wasm_ccm_runtime::http::budget::Outcome::ALL {
                metrics.set(
                    "wasm_ccm_cloud_requests_total",
                    &[("driver", driver), ("outcome", outcome.label())],
                    counts.get(outcome) as f64,
                );
            }
            metrics.set(
                "wasm_ccm_cloud_request_wait_seconds_total",
                &[("driver", driver)],
                counts.wait_seconds,
            );
        }
        metrics.set(
            "wasm_ccm_driver_dropped_log_lines_total",
            &[("driver", driver)],
            self.dropped_log_lines() as f64,
        );
        metrics.set(
            "wasm_ccm_driver_lowered_bytes_total",
            &[("driver", driver)],
            self.lowered_bytes() as f64,
        );
        let stats = self.stats();
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
