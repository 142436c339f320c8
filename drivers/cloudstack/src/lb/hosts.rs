//! The backends of a load balancer: the CloudStack VMs behind the Service's nodes, found by the
//! same rule as every instance lookup, on the one guest network the load balancer serves.
//!
//! One bad node never takes the load balancer down for the others: a node whose VM CloudStack
//! would refuse as a member, or that cannot be told apart, is left out and named (a Warning
//! event), and the rest are the members. What CloudStack refuses is
//! `LoadBalancingRulesManagerImpl.assignToLoadBalancer`'s checks: a VM that is gone,
//! `Destroyed` or `Expunging` ("Invalid instance id specified"), or one without a NIC on the
//! rule's network ("VM with id specified cannot be added because it doesn't belong in the same
//! network."). One refused VM fails the whole assignment, so they are left out beforehand.

use std::collections::BTreeMap;

use wasm_ccm_sdk::types::{Node, ProviderError};

use crate::api::{Api, Params};
use crate::instances::{match_by_name, named};
use crate::model::Vm;
use crate::provider_id;

/// VM states in which a VM is not made a member: CloudStack refuses `Destroyed` and
/// `Expunging` (`assignToLoadBalancer`, and `RulesManagerImpl.checkRuleAndUserVm`); an
/// `Expunged` VM is gone; an `Error` VM (a failed deployment) never serves traffic. `Stopped`
/// VMs stay members, as upstream keeps them: they come back.
pub const NOT_MEMBERS: &[&str] = &["Destroyed", "Expunging", "Expunged", "Error"];

/// The VMs behind the nodes.
#[derive(Debug, Default)]
pub struct Hosts {
    /// VM ids, sorted.
    pub vm_ids: Vec<String>,
    /// The node of each VM id (for messages).
    pub nodes_of: BTreeMap<String, String>,
    /// The network the load balancer serves; `None` without members.
    pub network_id: Option<String>,
    /// Nodes no VM was found for.
    pub unmatched: Vec<String>,
    /// Nodes left out, each with why (`node: reason`).
    pub left_out: Vec<String>,
    /// Every VM an ambiguous node name matched. Which of them is the node cannot be told, so a
    /// member among them is not removed (an ambiguous answer never deletes), and none is added
    /// for that node (they are not in `vm_ids` unless another node names one for certain).
    pub keep: Vec<String>,
}

/// A node's VM, before the network is chosen.
struct Candidate<'a> {
    node: &'a str,
    vm: &'a Vm,
}

/// Every VM of the account (one paginated list), with its NICs.
pub fn all_vms(api: &Api) -> Result<Vec<Vm>, ProviderError> {
    api.list(
        "listVirtualMachines",
        api.scoped(
            Params::new()
                .set("listall", "true")
                .set("details", "min,nics"),
        )?,
        "virtualmachine",
    )
}

/// Why `vm` cannot be a member of a load balancer on `network`, or None.
pub fn refusal(vm: &Vm, network: &str) -> Option<String> {
    if NOT_MEMBERS.contains(&vm.state.as_str()) {
        return Some(format!("VM {} ({}) is {}", vm.name, vm.id, vm.state));
    }
    if !vm.nic.iter().any(|n| n.networkid == network) {
        let on = vm
            .primary_nic()
            .map_or_else(|| "no network".to_string(), |n| n.networkid.clone());
        return Some(format!(
            "VM {} ({}) is on {on}, not on the load balancer's network {network}",
            vm.name, vm.id
        ));
    }
    None
}

/// Matches `nodes` against every VM of the account. `network` is the load balancer's network
/// when its rules exist; otherwise it is the network most of the nodes' VMs are on (their
/// default NIC's), and a tie between networks is refused: which one is meant cannot be told.
pub fn find(api: &Api, nodes: &[Node], network: Option<&str>) -> Result<Hosts, ProviderError> {
    if nodes.is_empty() {
        return Ok(Hosts::default());
    }
    let vms = all_vms(api)?;
    let mut hosts = Hosts::default();
    let mut candidates: Vec<Candidate<'_>> = Vec::new();
    for node in nodes {
        let vm = if node.provider_id.is_empty() {
            match match_by_name(&node.name, &vms) {
                Ok(vm) => vm,
                // Two VMs of that name: ambiguous, so neither is bound, and neither is taken
                // off a rule it is a member of (it may be the node's working member).
                Err(e) => {
                    hosts.left_out.push(format!("{}: {e}", node.name));
                    let (_, matched) = named(&node.name, &vms);
                    hosts.keep.extend(matched.iter().map(|vm| vm.id.clone()));
                    continue;
                }
            }
        } else {
            match provider_id::parse(&node.provider_id) {
                Ok(id) => vms.iter().find(|vm| vm.id == id),
                Err(e) => {
                    hosts.left_out.push(format!("{}: {e}", node.name));
                    continue;
                }
            }
        };
        let Some(vm) = vm else {
            hosts.unmatched.push(node.name.clone());
            continue;
        };
        if vm.primary_nic().is_none() {
            hosts.left_out.push(format!(
                "{}: VM {} ({}) has no NIC",
                node.name, vm.name, vm.id
            ));
            continue;
        }
        if NOT_MEMBERS.contains(&vm.state.as_str()) {
            hosts.left_out.push(format!(
                "{}: VM {} ({}) is {}",
                node.name, vm.name, vm.id, vm.state
            ));
            continue;
        }
        candidates.push(Candidate {
            node: &node.name,
            vm,
        });
    }
    let chosen = match network {
        Some(n) => n.to_string(),
        None => match majority_network(&candidates)? {
            Some(n) => n,
            None => return Ok(hosts),
        },
    };
    for c in candidates {
        if let Some(why) = refusal(c.vm, &chosen) {
            hosts.left_out.push(format!("{}: {why}", c.node));
            continue;
        }
        hosts.nodes_of.insert(c.vm.id.clone(), c.node.to_string());
        hosts.vm_ids.push(c.vm.id.clone());
    }
    hosts.vm_ids.sort();
    hosts.vm_ids.dedup();
    hosts.keep.sort();
    hosts.keep.dedup();
    if !hosts.vm_ids.is_empty() {
        hosts.network_id = Some(chosen);
    }
    Ok(hosts)
}

/// The network of most candidates' default NICs; `None` without candidates; an error when two
/// networks have the most.
fn majority_network(candidates: &[Candidate<'_>]) -> Result<Option<String>, ProviderError> {
    let mut tally: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for c in candidates {
        if let Some(nic) = c.vm.primary_nic() {
            tally.entry(&nic.networkid).or_default().push(c.node);
        }
    }
    let Some(most) = tally.values().map(Vec::len).max() else {
        return Ok(None);
    };
    let top: Vec<(&&str, &Vec<&str>)> = tally.iter().filter(|(_, v)| v.len() == most).collect();
    match top[..] {
        [(network, _)] => Ok(Some(network.to_string())),
        _ => Err(ProviderError::Permanent(format!(
            "the nodes' VMs are on different networks, equally many on each ({}), so which network the load balancer serves cannot be told; a CloudStack load balancer serves one network: label the nodes of the other network node.kubernetes.io/exclude-from-external-load-balancers, or move their VMs to one network",
            top.iter()
                .map(|(n, nodes)| format!("{n}: {}", nodes.join(", ")))
                .collect::<Vec<_>>()
                .join("; ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Nic;

    fn vm(id: &str, state: &str, networks: &[&str]) -> Vm {
        Vm {
            id: id.into(),
            name: id.into(),
            state: state.into(),
            nic: networks
                .iter()
                .enumerate()
                .map(|(i, n)| Nic {
                    networkid: n.to_string(),
                    isdefault: i == 0,
                    ..Nic::default()
                })
                .collect(),
            ..Vm::default()
        }
    }

    #[test]
    fn refused_states_and_networks() {
        for state in ["Destroyed", "Expunging", "Expunged", "Error"] {
            let why = refusal(&vm("a", state, &["n1"]), "n1");
            assert!(why.is_some_and(|w| w.contains(state)), "{state}");
        }
        assert_eq!(refusal(&vm("a", "Stopped", &["n1"]), "n1"), None);
        assert_eq!(refusal(&vm("a", "Running", &["n2", "n1"]), "n1"), None);
        let off = refusal(&vm("a", "Running", &["n2"]), "n1");
        assert!(off.is_some_and(|w| w.contains("n2") && w.contains("n1")));
        assert!(refusal(&vm("a", "Running", &[]), "n1").is_some());
    }

    #[test]
    fn the_majority_network_and_a_tie() {
        let vms = [
            vm("a", "Running", &["n1"]),
            vm("b", "Running", &["n2"]),
            vm("c", "Running", &["n1"]),
        ];
        let c = |i: usize| Candidate {
            node: &vms[i].id,
            vm: &vms[i],
        };
        assert_eq!(
            majority_network(&[c(0), c(1), c(2)])
                .ok()
                .flatten()
                .as_deref(),
            Some("n1")
        );
        assert_eq!(majority_network(&[]).ok().flatten(), None);
        let tie = majority_network(&[c(0), c(1)]);
        assert!(
            matches!(tie, Err(ProviderError::Permanent(m)) if m.contains("n1: a") && m.contains("n2: b"))
        );
    }
}
