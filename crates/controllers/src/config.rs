//! The controllers' settings (from `wasm-ccm run`'s flags) and `--controllers` parsing.

use std::time::Duration;

/// The four controllers, by upstream's canonical name.
pub(crate) const CONTROLLERS: [(&str, &str); 4] = [
    ("cloud-node-controller", "cloud-node"),
    ("cloud-node-lifecycle-controller", "cloud-node-lifecycle"),
    ("service-lb-controller", "service"),
    ("node-route-controller", "route"),
];

/// Which controllers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnabledControllers {
    /// `cloud-node`: initialises new nodes and keeps their addresses current.
    pub node: bool,
    /// `cloud-node-lifecycle`: deletes nodes whose instance is gone, taints shut-down ones.
    pub lifecycle: bool,
    /// `service`: load balancers for Services of type LoadBalancer.
    pub service: bool,
    /// `route`: cloud routes for the nodes' pod CIDRs.
    pub route: bool,
}

impl EnabledControllers {
    /// All four (upstream's `*`).
    pub(crate) const ALL: EnabledControllers = EnabledControllers {
        node: true,
        lifecycle: true,
        service: true,
        route: true,
    };

    /// Parses `--controllers` with upstream's rules: `*` enables every controller that is on by
    /// default (all four), `name` enables, `-name` disables, the first explicit mention of a
    /// controller wins, aliases map to canonical names, unknown names are an error.
    pub fn parse(items: &[String]) -> Result<Self, String> {
        let canonical = |name: &str| {
            CONTROLLERS
                .iter()
                .position(|(full, alias)| *full == name || *alias == name)
        };
        let mut explicit: [Option<bool>; 4] = [None; 4];
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
            let Some(i) = canonical(name) else {
                let known: Vec<String> = CONTROLLERS
                    .iter()
                    .map(|(f, a)| format!("{f} ({a})"))
                    .collect();
                return Err(format!(
                    "--controllers: unknown controller {name:?}; known: *, {}",
                    known.join(", ")
                ));
            };
            explicit[i].get_or_insert(on);
        }
        let pick = |i: usize| explicit[i].unwrap_or(star);
        Ok(EnabledControllers {
            node: pick(0),
            lifecycle: pick(1),
            service: pick(2),
            route: pick(3),
        })
    }
}

/// Settings of the control loops.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// `--cluster-name`. The controllers do not read it (the driver gets the cluster name in
    /// `init`); it is here so the settings mirror upstream's.
    pub cluster_name: String,
    /// `--controllers`: which loops run.
    pub controllers: EnabledControllers,
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
}

impl Default for ControllerConfig {
    /// Upstream's defaults (`k8s.io/cloud-provider/config/v1alpha1/defaults.go`).
    fn default() -> Self {
        ControllerConfig {
            cluster_name: "kubernetes".into(),
            controllers: EnabledControllers::ALL,
            concurrent_node_syncs: 1,
            concurrent_node_status_updates: 0,
            concurrent_service_syncs: 1,
            node_monitor_period: Duration::from_secs(5),
            node_status_update_frequency: Duration::from_secs(300),
            route_reconciliation_period: Duration::from_secs(10),
            housekeeping_period: Duration::from_secs(60),
            configure_cloud_routes: true,
            cluster_cidr: String::new(),
            kube_api_qps: 20.0,
            kube_api_burst: 30,
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

    fn parse(s: &str) -> Result<EnabledControllers, String> {
        EnabledControllers::parse(&[s.to_string()])
    }

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

    #[test]
    fn controllers_flag_table() {
        let all = EnabledControllers::ALL;
        assert_eq!(parse("*"), Ok(all));
        assert_eq!(
            parse("*,-route"),
            Ok(EnabledControllers {
                route: false,
                ..all
            })
        );
        assert_eq!(
            parse("-node-route-controller,*"),
            Ok(EnabledControllers {
                route: false,
                ..all
            })
        );
        assert_eq!(
            parse("service,cloud-node"),
            Ok(EnabledControllers {
                node: true,
                lifecycle: false,
                service: true,
                route: false
            })
        );
        // The first explicit mention wins.
        assert_eq!(parse("service,-service").map(|c| c.service), Ok(true));
        assert_eq!(
            parse(""),
            Ok(EnabledControllers {
                node: false,
                lifecycle: false,
                service: false,
                route: false
            })
        );
        let err = parse("*,nodes").unwrap_err();
        assert!(
            err.contains("unknown controller \"nodes\"") && err.contains("cloud-node"),
            "{err}"
        );
    }
}
