//! Nodes ↔ VMs (upstream `cloudstack_instances.go`, `verifyHosts`): one lookup rule for instances
//! and load balancers, existence, shutdown and metadata.
//!
//! A node with a provider ID is looked up by it; otherwise by name, where the VM's name must equal
//! the node's name or, for an FQDN node name, its first label (case-insensitive) — upstream used
//! the name only and the short form only for load balancers.

use wasm_ccm_sdk::listing::Listed;
use wasm_ccm_sdk::types::{AddressType, InstanceMetadata, Node, NodeAddress, ProviderError};

use crate::api::{Api, PageAt, Params};
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
    Ok(lookup(api, node)?.is_some_and(|vm| !is_gone(&vm)))
}

/// Whether the VM is shut down (stopped, or destroyed but recoverable).
pub fn shutdown(api: &Api, node: &Node) -> Result<bool, ProviderError> {
    Ok(is_shut_down(&find(api, node)?))
}

/// Whether `vm` is being expunged or is: `instance-exists` answers `false` for it.
pub fn is_gone(vm: &Vm) -> bool {
    GONE.contains(&vm.state.as_str())
}

/// Whether `vm` is shut down: what `instance-shutdown` answers and what the listing carries,
/// from this one function so the two cannot drift.
pub fn is_shut_down(vm: &Vm) -> bool {
    SHUT_DOWN.contains(&vm.state.as_str())
}

/// One page of `listVirtualMachines` as the instance listing: the VMs the per-node lookups can
/// find, i.e. the same scope as theirs (`projectid` when a project is configured, no `listall`,
/// no `details`, so every field the per-node answer reads is there), page by page as
/// [`Api::list_one_page`] pages.
pub fn list_page(
    api: &Api,
    at: Option<PageAt>,
    region: Option<&str>,
) -> Result<(Listed, Option<PageAt>), ProviderError> {
    let (vms, next) = api.list_one_page::<Vm>(
        "listVirtualMachines",
        api.scoped(Params::new())?,
        "virtualmachine",
        at,
    )?;
    Ok((listing(&vms, region), next))
}

/// The listed instances of `vms` (one page), each with what the per-node functions answer for
/// it: [`metadata`], [`is_shut_down`], and as `node-name` the VM's name lower-cased, the Node
/// name [`match_by_name`] binds to it.
///
/// Left out, so that their nodes are asked about by themselves: a VM being expunged
/// (`instance-exists` answers `false` for it, and a listed instance exists), and one whose
/// metadata is an error (no NIC or no address yet; the per-node call reports it). A name that
/// two VMs of the page share binds neither per node, so both are listed without a `node-name`;
/// across pages the host finds such a name twice and matches neither.
pub fn listing(vms: &[Vm], region: Option<&str>) -> Listed {
    Listed::of(
        vms,
        |vm| vm.name.to_ascii_lowercase(),
        |vm| {
            if is_gone(vm) {
                return Err(format!("VM {} ({}) is {}", vm.name, vm.id, vm.state));
            }
            let metadata = metadata(vm, region).map_err(|e| e.to_string())?;
            Ok((metadata, is_shut_down(vm)))
        },
    )
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

    fn running(name: &str, state: &str, ip: &str) -> Vm {
        Vm {
            state: state.into(),
            zonename: "zone1".into(),
            serviceofferingname: "m1.large".into(),
            nic: vec![crate::model::Nic {
                networkid: "net-1".into(),
                ipaddress: ip.into(),
                isdefault: true,
                ..Default::default()
            }],
            ..vm(name)
        }
    }

    /// For every VM the per-node path answers for, the listing carries its answers: the same
    /// metadata, the same shutdown, and the node name the by-name lookup binds to it.
    #[test]
    fn the_listing_agrees_with_the_per_node_lookups() {
        let vms = vec![
            running("worker-1", "Running", "10.1.1.1"),
            running("Worker-2", "Stopped", "10.1.1.2"),
            running("worker-3", "Destroyed", "10.1.1.3"),
            running("twin", "Running", "10.1.1.4"),
            running("TWIN", "Running", "10.1.1.5"),
            running("gone", "Expunging", "10.1.1.6"),
            // The name lookup sees the expunging `gone` too: `Gone` is ambiguous there.
            running("Gone", "Running", "10.1.1.7"),
            Vm {
                nic: Vec::new(),
                ..running("nicless", "Running", "")
            },
        ];
        let listed = listing(&vms, Some("eu"));
        assert_eq!(listed.left_out.len(), 2, "{:?}", listed.left_out);
        assert!(listed.left_out[0].contains("Expunging"));
        assert!(listed.left_out[1].contains("no NIC"));
        for item in &listed.instances {
            let id = item
                .metadata
                .provider_id
                .trim_start_matches("external-cloudstack://");
            let vm = vms
                .iter()
                .find(|v| v.id == id)
                .expect("a listed VM is one of ours");
            assert_eq!(item.metadata, metadata(vm, Some("eu")).unwrap());
            assert_eq!(item.shutdown, is_shut_down(vm), "{}", vm.name);
            let node_name = vm.name.to_ascii_lowercase();
            match match_by_name(&node_name, &vms) {
                Ok(Some(bound)) => {
                    assert_eq!(bound.id, vm.id);
                    assert_eq!(item.node_name, node_name);
                }
                other => {
                    assert!(
                        matches!(other, Err(ProviderError::Permanent(_))),
                        "{other:?}"
                    );
                    assert_eq!(item.node_name, "", "{} is ambiguous", vm.name);
                }
            }
        }
        let got: Vec<_> = listed
            .instances
            .iter()
            .map(|i| (i.node_name.as_str(), i.shutdown))
            .collect();
        assert_eq!(
            got,
            [
                ("worker-1", false),
                ("worker-2", true),
                ("worker-3", true),
                ("", false),
                ("", false),
                ("", false),
            ]
        );
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
