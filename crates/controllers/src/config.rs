//! The controllers' settings (from `wasm-ccm run`'s flags). A leaf: which controllers run
//! (`--controllers`) is [`crate::registry::EnabledControllers`], passed beside these settings,
//! because parsing it reads the registry, which starts the controllers, which read these.

use std::time::Duration;

/// Settings of the control loops.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// `--cluster-name`. The controllers do not read it (the driver gets the cluster name in
    /// `init`); it is here so the settings mirror upstream's.
    pub cluster_name: String,
    /// `--concurrent-node-syncs`: workers initialising nodes.
    pub concurrent_node_syncs: usize,
    /// `--concurrent-node-status-updates`: workers of the periodic address update; 0 means as
    /// many as `concurrent_node_syncs`.
    pub concurrent_node_status_updates: usize,
    /// `--concurrent-service-syncs`: Services synced at once.
    pub concurrent_service_syncs: usize,
    /// `--node-monitor-period`: period of the node lifecycle check.
    pub node_monitor_period: Duration,
    /// `--node-status-update-frequency`: period of the node address update.
    pub node_status_update_frequency: Duration,
    /// `--route-reconciliation-period`: period of the route reconciliation.
    pub route_reconciliation_period: Duration,
    /// The `CloudControllerManagerWatchBasedRoutesReconciliation` feature gate (KEP-5237):
    /// the route controller reconciles when nodes change (at most once per 10 s) and once in a
    /// random interval of [`Self::min_resync_period`] to twice that, instead of every
    /// `route_reconciliation_period`.
    pub watch_based_routes: bool,
    /// `--min-resync-period`: with `watch_based_routes`, the shortest interval of the route
    /// controller's periodic reconcile (upstream's informer resync, 12 h by default).
    pub min_resync_period: Duration,
    /// `--instance-listing-max-age`: how long one listing of a driver that exports
    /// `instance-listing` (contract 0.2.2) answers for its nodes before the next is taken; zero
    /// asks about every node alone, as upstream does (the default).
    pub instance_listing_max_age: Duration,
    /// How often the driver's `housekeeping` runs.
    pub housekeeping_period: Duration,
    /// `--configure-cloud-routes`: whether the route controller may run at all.
    pub configure_cloud_routes: bool,
    /// `--cluster-cidr` as given.
    pub cluster_cidr: String,
    /// `--kube-api-qps`: client-side limit on Kubernetes API requests per second.
    pub kube_api_qps: f32,
    /// `--kube-api-burst`: the token bucket's size, i.e. requests sent at once before
    /// `kube_api_qps` paces them.
    pub kube_api_burst: u32,
    /// `--shadow`: run beside the CCM in charge and write nothing (see [`crate::shadow`]).
    pub shadow: Option<crate::shadow::ShadowOptions>,
}

impl Default for ControllerConfig {
    /// Upstream's defaults (`k8s.io/cloud-provider/config/v1alpha1/defaults.go`).
    fn default() -> Self {
        ControllerConfig {
            cluster_name: "kubernetes".into(),
            concurrent_node_syncs: 1,
            concurrent_node_status_updates: 0,
            concurrent_service_syncs: 1,
            node_monitor_period: Duration::from_secs(5),
            node_status_update_frequency: Duration::from_secs(300),
            route_reconciliation_period: Duration::from_secs(10),
            watch_based_routes: false,
            min_resync_period: Duration::from_secs(12 * 3600),
            // Off by default: a listing changes how old an answer may be, so the operator opts in.
            instance_listing_max_age: Duration::ZERO,
            housekeeping_period: Duration::from_secs(60),
            configure_cloud_routes: true,
            cluster_cidr: String::new(),
            kube_api_qps: 20.0,
            kube_api_burst: 30,
            shadow: None,
        }
    }
}

impl ControllerConfig {
    /// Workers of the periodic address loop: `--concurrent-node-status-updates`, or
    /// `--concurrent-node-syncs` when that is 0 (unspecified), as upstream's `ApplyTo` in
    /// `k8s.io/cloud-provider/options/nodecontroller.go`; at least 1.
    pub fn address_workers(&self) -> usize {
        if self.concurrent_node_status_updates == 0 {
            self.concurrent_node_syncs
        } else {
            self.concurrent_node_status_updates
        }
        .max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_workers_fall_back_to_node_syncs() {
        let with = |syncs, status| ControllerConfig {
            concurrent_node_syncs: syncs,
            concurrent_node_status_updates: status,
            ..ControllerConfig::default()
        };
        assert_eq!(ControllerConfig::default().address_workers(), 1);
        assert_eq!(with(5, 0).address_workers(), 5);
        assert_eq!(with(5, 2).address_workers(), 2);
        assert_eq!(with(1, 8).address_workers(), 8);
        // A configuration built in code with 0 syncs still gets one worker.
        assert_eq!(with(0, 0).address_workers(), 1);
    }
}
