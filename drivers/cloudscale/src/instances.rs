//! Nodes ↔ servers (upstream `server_mapper.go`, `instances.go`): lookups, metadata and the address
//! order.

use wasm_ccm_sdk::http::encode_path_segment;
use wasm_ccm_sdk::types::{AddressType, InstanceMetadata, Node, NodeAddress, ProviderError};

use crate::api::Api;
use crate::model::Server;
use crate::provider_id;

/// The server behind `node` by its provider ID; `None` when the API says 404.
pub fn by_provider_id(api: &Api, node: &Node) -> Result<Option<Server>, ProviderError> {
    let uuid = provider_id::parse(&node.provider_id)?;
    api.get_optional(&format!("servers/{}", encode_path_segment(&uuid)))
}

/// The servers whose name is exactly `name` (zero, one or several).
pub fn by_name(servers: Vec<Server>, name: &str) -> Vec<Server> {
    servers.into_iter().filter(|s| s.name == name).collect()
}

/// The one server behind `node`: by provider ID when it has one, else by exact name. None or
/// several is an error.
pub fn exactly_one(api: &Api, node: &Node) -> Result<Server, ProviderError> {
    if !node.provider_id.is_empty() {
        return by_provider_id(api, node)?.ok_or_else(|| {
            ProviderError::not_found(format!(
                "no cloudscale server with provider ID {:?} (node {})",
                node.provider_id, node.name
            ))
        });
    }
    one_of(by_name(api.get("servers")?, &node.name), &node.name)
}

fn one_of(mut found: Vec<Server>, name: &str) -> Result<Server, ProviderError> {
    match found.len() {
        0 => Err(ProviderError::not_found(format!(
            "no cloudscale server named {name:?}: name the node like its server, or set its \
             providerID to cloudscale://<server-uuid>"
        ))),
        1 => Ok(found.remove(0)),
        n => Err(ProviderError::permanent(format!(
            "found {n} cloudscale servers named {name:?}: set the node's providerID to \
             cloudscale://<server-uuid> to say which one"
        ))),
    }
}

/// The server of each node, from one list of all servers (upstream asks once per node). A node
/// that maps to no server or to several aborts the reconcile, as upstream: a load balancer must
/// not silently lose backends.
pub fn map_nodes<'a>(
    servers: &'a [Server],
    nodes: &[Node],
) -> Result<Vec<&'a Server>, ProviderError> {
    nodes
        .iter()
        .map(|node| {
            let found: Vec<&Server> = if node.provider_id.is_empty() {
                servers.iter().filter(|s| s.name == node.name).collect()
            } else {
                let uuid = provider_id::parse(&node.provider_id)?;
                servers.iter().filter(|s| s.uuid == uuid).collect()
            };
            match found[..] {
                [one] => Ok(one),
                // Upstream (`mapNodes`, `findByName`) fails here too, also for an
                // uninitialised node whose server is gone: `instance-exists` cannot delete such
                // a Node (no provider ID), so the operator must.
                [] if node.provider_id.is_empty() => Err(ProviderError::permanent(format!(
                    "node {} has no provider ID and no cloudscale server is named so; every \
                     node behind a load balancer must be a cloudscale server. If its server was \
                     deleted before the node was initialised, delete the Node (without a \
                     provider ID no controller decides that its server is gone); otherwise \
                     exclude it with k8s.cloudscale.ch/loadbalancer-node-selector or the label \
                     node.kubernetes.io/exclude-from-external-load-balancers",
                    node.name
                ))),
                [] => Err(ProviderError::permanent(format!(
                    "node {} maps to no cloudscale server (provider ID {:?}); every node behind a \
                     load balancer must be a cloudscale server — exclude it with \
                     k8s.cloudscale.ch/loadbalancer-node-selector or the label \
                     node.kubernetes.io/exclude-from-external-load-balancers",
                    node.name, node.provider_id
                ))),
                _ => Err(ProviderError::permanent(format!(
                    "node {} matches {} cloudscale servers by name; set its providerID",
                    node.name,
                    found.len()
                ))),
            }
        })
        .collect()
}

/// Metadata of a server: provider ID, flavor, zone, region (the zone without its trailing
/// digits) and addresses.
pub fn metadata(server: &Server) -> InstanceMetadata {
    let mut m = InstanceMetadata::new(provider_id::format(&server.uuid));
    m.instance_type = server.flavor.slug.clone();
    m.zone = server.zone.slug.clone();
    m.region = region_of(&server.zone.slug);
    m.addresses = addresses(server);
    m
}

/// `rma1` → `rma`.
pub fn region_of(zone: &str) -> String {
    zone.trim_end_matches(|c: char| c.is_ascii_digit())
        .to_string()
}

/// Hostname first, then every address in API order: ExternalIP on public interfaces,
/// InternalIP elsewhere. No de-duplication, no filtering by IP version.
pub fn addresses(server: &Server) -> Vec<NodeAddress> {
    let mut out = vec![NodeAddress::new(AddressType::Hostname, &server.name)];
    for interface in &server.interfaces {
        let kind = if interface.kind == "public" {
            AddressType::ExternalIp
        } else {
            AddressType::InternalIp
        };
        out.extend(
            interface
                .addresses
                .iter()
                .map(|a| NodeAddress::new(kind, &a.address)),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Address, Interface, Slug};

    fn server() -> Server {
        let addr = |a: &str| Address {
            version: if a.contains(':') { 6 } else { 4 },
            address: a.into(),
            subnet: None,
        };
        Server {
            uuid: "2f7b1e3c-8f0a-4b5e-9c1d-0123456789ab".into(),
            name: "k8test-worker-1".into(),
            status: "running".into(),
            flavor: Slug {
                slug: "plus-32-16".into(),
            },
            zone: Slug {
                slug: "lpg1".into(),
            },
            interfaces: vec![
                Interface {
                    kind: "public".into(),
                    addresses: vec![addr("5.102.148.123"), addr("2a06:c01:1000:1165::123")],
                },
                Interface {
                    kind: "private".into(),
                    addresses: vec![addr("10.1.1.123")],
                },
            ],
        }
    }

    #[test]
    fn metadata_matches_the_upstream_readme() {
        let m = metadata(&server());
        assert_eq!(
            m.provider_id,
            "cloudscale://2f7b1e3c-8f0a-4b5e-9c1d-0123456789ab"
        );
        assert_eq!(m.instance_type, "plus-32-16");
        assert_eq!((m.zone.as_str(), m.region.as_str()), ("lpg1", "lpg"));
        let got: Vec<_> = m
            .addresses
            .iter()
            .map(|a| (a.kind.as_kubernetes(), a.address.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("Hostname", "k8test-worker-1"),
                ("ExternalIP", "5.102.148.123"),
                ("ExternalIP", "2a06:c01:1000:1165::123"),
                ("InternalIP", "10.1.1.123"),
            ]
        );
    }

    #[test]
    fn regions_drop_trailing_digits() {
        assert_eq!(region_of("rma1"), "rma");
        assert_eq!(region_of("lpg12"), "lpg");
        assert_eq!(region_of(""), "");
    }
}
