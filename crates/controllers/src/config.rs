//! The controllers' settings (from `wasm-ccm run`'s flags) and `--controllers` parsing.

use std::time::Duration;

use crate::registry::{CONTROLLERS, position};

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
    /// `--shadow`: run beside the CCM in charge and write nothing (see [`crate::shadow`]).
    pub shadow: Option<crate::shadow::ShadowOptions>,
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
