//! The backends of a load balancer: the CloudStack VMs behind the Service's nodes, found by the
//! same rule as every instance lookup, and the one guest network they share.

use wasm_ccm_sdk::log;
use wasm_ccm_sdk::types::{Node, ProviderError};

use crate::api::{Api, Params};
use crate::instances::match_by_name;
use crate::model::Vm;
use crate::provider_id;

/// The VMs behind the nodes.
#[derive(Debug, Default)]
pub struct Hosts {
    /// VM ids, sorted.
    pub vm_ids: Vec<String>,
    /// The network of the VMs' primary NICs; `None` without VMs.
    pub network_id: Option<String>,
    /// Nodes no VM was found for.
    pub unmatched: Vec<String>,
}

/// Matches `nodes` against every VM of the account (one paginated list). Nodes without a VM and
/// VMs without a NIC are skipped and named; VMs on different networks are an error, as upstream.
pub fn find(api: &Api, nodes: &[Node]) -> Result<Hosts, ProviderError> {
    if nodes.is_empty() {
        return Ok(Hosts::default());
    }
    let vms: Vec<Vm> = api.list(
        "listVirtualMachines",
        api.scoped(
            Params::new()
                .set("listall", "true")
                .set("details", "min,nics"),
        )?,
        "virtualmachine",
    )?;
    let mut hosts = Hosts::default();
    let mut networks: Vec<(String, String)> = Vec::new();
    for node in nodes {
        let vm = if node.provider_id.is_empty() {
            match_by_name(&node.name, &vms)?
        } else {
            let id = provider_id::parse(&node.provider_id)?;
            vms.iter().find(|vm| vm.id == id)
        };
        let Some(vm) = vm else {
            hosts.unmatched.push(node.name.clone());
            continue;
        };
        let Some(nic) = vm.primary_nic() else {
            log::warn(
                "skipping a node whose VM has no NIC",
                &[("node", &node.name), ("vm", &vm.id)],
            );
            hosts.unmatched.push(node.name.clone());
            continue;
        };
        networks.push((node.name.clone(), nic.networkid.clone()));
        hosts.vm_ids.push(vm.id.clone());
    }
    hosts.vm_ids.sort();
    hosts.vm_ids.dedup();
    if let Some((_, first)) = networks.first() {
        if let Some((node, other)) = networks.iter().find(|(_, n)| n != first) {
            return Err(ProviderError::Permanent(format!(
                "found hosts that belong to different networks: node {node} is on network {other}, node {} on {first}; a CloudStack load balancer serves one network",
                networks[0].0
            )));
        }
        hosts.network_id = Some(first.clone());
    }
    Ok(hosts)
}
