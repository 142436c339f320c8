//! The state as tests inspect it: every entity rendered as the API would, whatever its project
//! (the library's accessors and `GET /sim/state`).

use serde_json::Value;

use super::model::State;
use super::render::{
    render_acl_item, render_firewall_rule, render_ip, render_lb_rule, render_network, render_vm,
};

/// Every load-balancer rule, each with `members`: the assigned VM IDs, sorted.
pub(crate) fn load_balancer_rules(state: &State) -> Vec<Value> {
    state
        .lb_rules
        .iter()
        .map(|r| {
            let mut v = render_lb_rule(state, r);
            // BTreeSet iterates in order.
            v["members"] = r.members.iter().cloned().collect::<Vec<_>>().into();
            v
        })
        .collect()
}

/// Every public IP address, free ones included.
pub(crate) fn public_ips(state: &State) -> Vec<Value> {
    state.ips.iter().map(|ip| render_ip(state, ip)).collect()
}

/// Every firewall rule.
pub(crate) fn firewall_rules(state: &State) -> Vec<Value> {
    state
        .firewall_rules
        .iter()
        .map(|r| render_firewall_rule(state, r))
        .collect()
}

/// Every item of the VPCs' ACL lists (the system lists' fixed items are left out).
pub(crate) fn network_acls(state: &State) -> Vec<Value> {
    state
        .acl_items
        .iter()
        .filter(|i| state.acl_list(&i.acl_id).is_some_and(|a| !a.is_system()))
        .map(|i| render_acl_item(state, i))
        .collect()
}

/// Every VM.
pub(crate) fn vms(state: &State) -> Vec<Value> {
    state.vms.iter().map(|vm| render_vm(state, vm)).collect()
}

/// Every guest network.
pub(crate) fn networks(state: &State) -> Vec<Value> {
    state
        .networks
        .iter()
        .map(|n| render_network(state, n))
        .collect()
}
