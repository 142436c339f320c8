//! Nodes ↔ VMs (upstream `cloudstack_instances.go`, `verifyHosts`): one lookup rule for instances
//! and load balancers, existence, shutdown and metadata.
//!
//! A node with a provider ID is looked up by it; otherwise by name, where the VM's name must equal
//! the node's name or, for an FQDN node name, its first label (case-insensitive) — upstream used
//! the name only and the short form only for load balancers.

use wasm_ccm_sdk::types::{AddressType, InstanceMetadata, Node, NodeAddress, ProviderError};

use crate::api::{Api, Params};
use crate::model::Vm;
use crate::provider_id;

/// The VM states in which the instance counts as shut down (a destroyed VM can still be
/// recovered until it is expunged).
const SHUT_DOWN: &[&str] = &["Stopped", "Shutdown", "Destroyed"];
/// The VM states in which the instance is gone for good.
const GONE: &[&str] = &["Expunging", "Expunged"];

/// The node's name and its first label, lower-cased.
fn names(node_name: &str) -> (String, String) {
    let full = node_name.to_ascii_lowercase();
    let short = full.split('.').next().unwrap_or(&full).to_string();
    (full, short)
}

/// The VM among `vms` whose name is the node's, by the rule above. Several VMs with that name
/// are an error: which one is the node cannot be told.
pub fn match_by_name<'a>(node_name: &str, vms: &'a [Vm]) -> Result<Option<&'a Vm>, ProviderError> {
    let (wanted, found) = named(node_name, vms);
    match found[..] {
        [] => Ok(None),
        [vm] => Ok(Some(vm)),
        _ => Err(ProviderError::Permanent(format!(
            "{} CloudStack VMs are named {wanted:?}, so node {node_name} cannot be matched by name; set its providerID to {}://<vm-uuid>",
            found.len(),
            provider_id::SCHEME
        ))),
    }
}

/// Every VM among `vms` the node's name matches, by the rule above (the full name first, the
/// short one only when the full name matches none), with the name they matched. More than one is
/// ambiguous; the load balancer needs all of them to keep such a node's member (see `hosts`).
pub fn named<'a>(node_name: &str, vms: &'a [Vm]) -> (String, Vec<&'a Vm>) {
    let (full, short) = names(node_name);
    for wanted in [full, short] {
        let found: Vec<&Vm> = vms
            .iter()
            .filter(|vm| vm.name.eq_ignore_ascii_case(&wanted))
            .collect();
        if !found.is_empty() {
            return (wanted, found);
        }
    }
    (node_name.to_ascii_lowercase(), Vec::new())
}

/// The VM with this id, `None` when CloudStack has none.
pub fn by_id(api: &Api, id: &str) -> Result<Option<Vm>, ProviderError> {
    let result: Result<Vec<Vm>, _> = api.list(
        "listVirtualMachines",
        api.scoped(Params::new().set("id", id))?,
        "virtualmachine",
    );
    match result {
        Ok(vms) => Ok(vms.into_iter().find(|vm| vm.id == id)),
        Err(ProviderError::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The VM behind `node`, `None` when CloudStack has none.
pub fn lookup(api: &Api, node: &Node) -> Result<Option<Vm>, ProviderError> {
    if !node.provider_id.is_empty() {
        return by_id(api, &provider_id::parse(&node.provider_id)?);
    }
    let (_, short) = names(&node.name);
    // `name` is matched loosely by CloudStack; the exact pick is ours.
    let vms: Vec<Vm> = api.list(
        "listVirtualMachines",
        api.scoped(Params::new().set("name", &short))?,
        "virtualmachine",
    )?;
    Ok(match_by_name(&node.name, &vms)?.cloned())
}

/// The VM behind `node`, or `not-found` saying how to fix the match.
pub fn find(api: &Api, node: &Node) -> Result<Vm, ProviderError> {
    lookup(api, node)?.ok_or_else(|| {
        ProviderError::NotFound(if node.provider_id.is_empty() {
            format!(
                "no CloudStack VM is named {:?}: name the node like its VM (upstream's rule), or set its providerID to {}://<vm-uuid>",
                node.name,
                provider_id::SCHEME
            )
        } else {
            format!("no CloudStack VM has provider ID {:?}", node.provider_id)
        })
    })
}

/// Whether the VM exists: `false` only when CloudStack has none or it is being expunged.
pub fn exists(api: &Api, node: &Node) -> Result<bool, ProviderError> {
    Ok(lookup(api, node)?.is_some_and(|vm| !GONE.contains(&vm.state.as_str())))
}

/// Whether the VM is shut down (stopped, or destroyed but recoverable).
pub fn shutdown(api: &Api, node: &Node) -> Result<bool, ProviderError> {
    Ok(SHUT_DOWN.contains(&find(api, node)?.state.as_str()))
}

/// Upstream's instance type: the service offering's name without anything outside
/// `[A-Za-z0-9]` (`m1.large` → `m1large`), so existing labels stay the same.
pub fn instance_type(offering: &str) -> String {
    offering
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect()
}

/// Provider ID, type, zone, region and addresses: the primary NIC's IPv4 and IPv6 as InternalIP,
/// the VM's name as Hostname, the static NAT address as ExternalIP.
pub fn metadata(vm: &Vm, region: Option<&str>) -> Result<InstanceMetadata, ProviderError> {
    let nic = vm.primary_nic().ok_or_else(|| {
        ProviderError::Permanent(format!(
            "CloudStack VM {} ({}) has no NIC, so the node has no internal IP; attach the VM to the cluster's network",
            vm.name, vm.id
        ))
    })?;
    let mut addresses = Vec::new();
    for ip in [&nic.ipaddress, &nic.ip6address] {
        if !ip.is_empty() {
            addresses.push(NodeAddress::new(AddressType::InternalIp, ip));
        }
    }
    if addresses.is_empty() {
        return Err(ProviderError::Permanent(format!(
            "CloudStack VM {} ({}) has no IP address on its NIC yet",
            vm.name, vm.id
        )));
    }
    addresses.push(NodeAddress::new(AddressType::Hostname, &vm.name));
    if !vm.publicip.is_empty() {
        addresses.push(NodeAddress::new(AddressType::ExternalIp, &vm.publicip));
    }
    Ok(InstanceMetadata {
        provider_id: provider_id::format(&vm.id),
        instance_type: instance_type(&vm.serviceofferingname),
        zone: vm.zonename.clone(),
        region: region.map_or_else(|| vm.zonename.clone(), str::to_string),
        addresses,
        additional_labels: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(name: &str) -> Vm {
        Vm {
            id: format!("id-{name}"),
            name: name.into(),
            ..Vm::default()
        }
    }

    #[test]
    fn offering_names_as_upstream() {
        assert_eq!(instance_type("CKS Instance"), "CKSInstance");
        assert_eq!(instance_type("m1.large"), "m1large");
        assert_eq!(instance_type("2vCPU-4GB"), "2vCPU4GB");
    }

    #[test]
    fn names_exact_then_first_label() {
        let vms = [vm("node-1"), vm("node-10"), vm("Node-2")];
        assert_eq!(
            match_by_name("node-1", &vms).unwrap().unwrap().name,
            "node-1"
        );
        assert_eq!(
            match_by_name("node-1.example.com", &vms)
                .unwrap()
                .unwrap()
                .name,
            "node-1"
        );
        assert_eq!(
            match_by_name("node-2", &vms).unwrap().unwrap().name,
            "Node-2"
        );
        assert!(match_by_name("node", &vms).unwrap().is_none());
        let twice = [vm("a"), vm("A")];
        assert!(matches!(
            match_by_name("a", &twice),
            Err(ProviderError::Permanent(_))
        ));
    }

    #[test]
    fn metadata_addresses() {
        let mut v: Vm = serde_json::from_str(
            r#"{"id":"u","name":"n1","hostname":"kvm-host-7","zonename":"zone1","serviceofferingname":"Medium Instance","publicip":"198.51.100.7",
                "nic":[{"ipaddress":"10.1.1.11","ip6address":"fd00::11","isdefault":true}]}"#,
        )
        .unwrap();
        let m = metadata(&v, None).unwrap();
        assert_eq!(m.provider_id, "external-cloudstack://u");
        assert_eq!((m.zone.as_str(), m.region.as_str()), ("zone1", "zone1"));
        assert_eq!(m.instance_type, "MediumInstance");
        let got: Vec<(AddressType, &str)> = m
            .addresses
            .iter()
            .map(|a| (a.kind, a.address.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (AddressType::InternalIp, "10.1.1.11"),
                (AddressType::InternalIp, "fd00::11"),
                (AddressType::Hostname, "n1"),
                (AddressType::ExternalIp, "198.51.100.7"),
            ]
        );
        assert_eq!(metadata(&v, Some("eu")).unwrap().region, "eu");
        v.nic.clear();
        assert!(
            matches!(metadata(&v, None), Err(ProviderError::Permanent(m)) if m.contains("no NIC"))
        );
    }
}
