//! The API commands: a table from command name (case-sensitive, as CloudStack's command map is)
//! to handler, and what every handler shares — resolving UUID parameters, project scope,
//! pagination and the list envelope.

mod acl;
mod context;
mod firewall;
mod info;
mod ips;
mod lb;
mod tags;
mod vms;

pub(crate) use context::Ctx;
pub(crate) use lb::assign_refusal;
pub(crate) use tags::{new_tag, tag_target_exists};

use serde_json::Value;

use super::error::CsError;

/// A command handler: the body inside the command's response envelope, or an error.
type Handler = fn(&mut Ctx<'_>) -> Result<Value, CsError>;

/// A served command.
pub(crate) struct Command {
    pub name: &'static str,
    handler: Handler,
    /// Only root admins may call it (432 for others).
    pub admin_only: bool,
}

impl Command {
    /// Runs the handler.
    pub(crate) fn run(&self, ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
        (self.handler)(ctx)
    }
}

const fn user(name: &'static str, handler: Handler) -> Command {
    Command {
        name,
        handler,
        admin_only: false,
    }
}

/// Every served command.
static COMMANDS: &[Command] = &[
    Command {
        name: "listManagementServersMetrics",
        handler: info::list_management_servers_metrics,
        admin_only: true,
    },
    user("listCapabilities", info::list_capabilities),
    user("listZones", info::list_zones),
    user("listProjects", info::list_projects),
    user("queryAsyncJobResult", info::query_async_job_result),
    user("listVirtualMachines", vms::list_virtual_machines),
    user("listNetworks", vms::list_networks),
    user("listLoadBalancerRules", lb::list_load_balancer_rules),
    user("createLoadBalancerRule", lb::create_load_balancer_rule),
    user("updateLoadBalancerRule", lb::update_load_balancer_rule),
    user("deleteLoadBalancerRule", lb::delete_load_balancer_rule),
    user("assignToLoadBalancerRule", lb::assign_to_load_balancer_rule),
    user(
        "removeFromLoadBalancerRule",
        lb::remove_from_load_balancer_rule,
    ),
    user(
        "listLoadBalancerRuleInstances",
        lb::list_load_balancer_rule_instances,
    ),
    user("listPublicIpAddresses", ips::list_public_ip_addresses),
    user("associateIpAddress", ips::associate_ip_address),
    user("disassociateIpAddress", ips::disassociate_ip_address),
    user("listFirewallRules", firewall::list_firewall_rules),
    user("createFirewallRule", firewall::create_firewall_rule),
    user("deleteFirewallRule", firewall::delete_firewall_rule),
    user("listNetworkACLLists", acl::list_network_acl_lists),
    user("listNetworkACLs", acl::list_network_acls),
    user("createNetworkACL", acl::create_network_acl),
    user("deleteNetworkACL", acl::delete_network_acl),
    user("createTags", tags::create_tags),
    user("deleteTags", tags::delete_tags),
    user("listTags", tags::list_tags),
];

/// The command named exactly `name`.
pub(crate) fn find(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.name == name)
}

#[cfg(test)]
mod tests {
    use super::context::{list_body, valid_cidr};
    use super::*;

    #[test]
    fn commands_are_unique_and_exact() {
        for (i, c) in COMMANDS.iter().enumerate() {
            assert!(COMMANDS[..i].iter().all(|o| o.name != c.name), "{}", c.name);
        }
        assert!(find("listZones").is_some());
        assert!(find("listzones").is_none());
    }

    #[test]
    fn list_bodies() {
        assert_eq!(list_body("zone", 0, vec![]), serde_json::json!({}));
        assert_eq!(
            list_body("zone", 3, vec![Value::Null]),
            serde_json::json!({"count": 3, "zone": [null]})
        );
        assert_eq!(
            list_body("zone", 3, vec![]),
            serde_json::json!({"count": 3})
        );
    }

    #[test]
    fn cidrs() {
        assert!(valid_cidr("10.0.0.1/8"));
        assert!(valid_cidr("2001:db8::/32"));
        assert!(!valid_cidr("10.0.0.0"));
        assert!(!valid_cidr("10.0.0.0/33"));
        assert!(!valid_cidr("x/8"));
    }
}
