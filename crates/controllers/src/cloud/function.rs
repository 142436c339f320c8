//! [`Function`]: the driver functions the controllers call, named once. Metrics, the shadow
//! report, refusal counters and log lines all label a call by its WIT name, which this enum
//! spells in one place instead of at every call site.

use std::fmt;

/// A driver export function the controllers call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Function {
    /// `instances.instance-exists`.
    InstanceExists,
    /// `instances.instance-shutdown`.
    InstanceShutdown,
    /// `instances.instance-metadata`.
    InstanceMetadata,
    /// `instance-listing.list-instances`.
    ListInstances,
    /// `load-balancer.get`.
    LoadBalancerGet,
    /// `load-balancer.ensure`.
    LoadBalancerEnsure,
    /// `load-balancer.update`.
    LoadBalancerUpdate,
    /// `load-balancer.delete`.
    LoadBalancerDelete,
    /// `routes.list`.
    RoutesList,
    /// `routes.create`.
    RoutesCreate,
    /// `routes.delete`.
    RoutesDelete,
    /// `provider.housekeeping`.
    Housekeeping,
}

impl Function {
    /// The function's WIT name (`interface.function`), the `function` label of the metrics.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Function::InstanceExists => "instances.instance-exists",
            Function::InstanceShutdown => "instances.instance-shutdown",
            Function::InstanceMetadata => "instances.instance-metadata",
            Function::ListInstances => "instance-listing.list-instances",
            Function::LoadBalancerGet => "load-balancer.get",
            Function::LoadBalancerEnsure => "load-balancer.ensure",
            Function::LoadBalancerUpdate => "load-balancer.update",
            Function::LoadBalancerDelete => "load-balancer.delete",
            Function::RoutesList => "routes.list",
            Function::RoutesCreate => "routes.create",
            Function::RoutesDelete => "routes.delete",
            Function::Housekeeping => "provider.housekeeping",
        }
    }
}

impl fmt::Display for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Function;

    /// Every name is a function of the contract's WIT, in the interface it names (a typo would
    /// label metrics and shadow records with a function no driver has).
    #[test]
    fn every_name_is_a_function_of_the_wit() {
        let wit_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../wit/provider.wit");
        let wit = std::fs::read_to_string(wit_path).expect("wit/provider.wit is in the repository");
        let all = [
            Function::InstanceExists,
            Function::InstanceShutdown,
            Function::InstanceMetadata,
            Function::ListInstances,
            Function::LoadBalancerGet,
            Function::LoadBalancerEnsure,
            Function::LoadBalancerUpdate,
            Function::LoadBalancerDelete,
            Function::RoutesList,
            Function::RoutesCreate,
            Function::RoutesDelete,
            Function::Housekeeping,
        ];
        for function in all {
            let (interface, name) = function.as_str().split_once('.').expect("iface.fn");
            let body = wit
                .split(&format!("\ninterface {interface} {{\n"))
                .nth(1)
                .and_then(|rest| rest.split("\n}").next())
                .unwrap_or_else(|| panic!("no interface {interface} in the WIT"));
            let declared = body.lines().any(|line| {
                let line = line.trim_start().trim_start_matches('%');
                line.starts_with(&format!("{name}: func("))
            });
            assert!(declared, "{function} is not a function of the WIT");
        }
    }
}
