//! Nodes ↔ servers (upstream `server_mapper.go`, `instances.go`): lookups, metadata and the address
//! order.

use wasm_ccm_sdk::http::encode_path_segment;
use wasm_ccm_sdk::listing::Listed;
use wasm_ccm_sdk::types::{AddressType, InstanceMetadata, Node, NodeAddress, ProviderError};

use crate::api::Api;
use crate::model::Server;
use crate::{node_name, provider_id};

/// The server behind `node` by its provider ID; `None` when the API says 404.
pub fn by_provider_id(api: &Api, node: &Node) -> Result<Option<Server>, ProviderError> {
    let uuid = provider_id::parse(&node.provider_id)?;
    api.get_optional(&format!("servers/{}", encode_path_segment(&uuid)))
}

/// Whether `server` is the one a kubelet on it would have registered as Node `node_name`: its
/// name as kubelet makes Node names ([`node_name::of_hostname`]: trimmed, lower-cased). cloudscale
/// takes any host name or FQDN, upper case included, while a Node name never has upper case;
/// upstream compared exactly, so a server `Node-F` was never found.
pub fn is_named(server: &Server, node_name: &str) -> bool {
    node_name::of_hostname(&server.name) == node_name
}

/// The servers a node named `name` matches by [`is_named`] (zero, one or several).
pub fn by_name(servers: Vec<Server>, name: &str) -> Vec<Server> {
    servers.into_iter().filter(|s| is_named(s, name)).collect()
}

/// The one server behind `node`: by provider ID when it has one, else by name ([`is_named`]).
/// None is `not-found`; several (`Node-E` and `node-e`) are ambiguous: a `permanent` error
/// naming them, and nothing is bound.
pub fn exactly_one(api: &Api, node: &Node) -> Result<Server, ProviderError> {
    if !node.provider_id.is_empty() {
        return by_provider_id(api, node)?.ok_or_else(|| {
            ProviderError::not_found(format!(
                "no cloudscale server with provider ID {:?} (node {})",
                node.provider_id, node.name
            ))
        });
    }
    by_node_name(api.get("servers")?, &node.name)
}

/// The one server of `servers` a node named `name` (without a provider ID) is bound to: the
/// by-name half of [`exactly_one`], which the listing's `node-name` must agree with.
pub fn by_node_name(servers: Vec<Server>, name: &str) -> Result<Server, ProviderError> {
    one_of(by_name(servers, name), name)
}

fn one_of(mut found: Vec<Server>, name: &str) -> Result<Server, ProviderError> {
    match found.len() {
        0 => Err(ProviderError::not_found(format!(
            "no cloudscale server named {name:?} (compared as kubelet names Nodes: without case \
             and surrounding whitespace): name the node like its server, or set its providerID \
             to cloudscale://<server-uuid>"
        ))),
        1 => Ok(found.remove(0)),
        n => Err(ProviderError::permanent(format!(
            "found {n} cloudscale servers named {name:?} ({}), compared as kubelet names Nodes \
             (without case and surrounding whitespace), so the node is bound to none: set its \
             providerID to cloudscale://<server-uuid> to say which one, or rename a server",
            found
                .iter()
                .map(|s| format!("{} {:?}", s.uuid, s.name))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The nodes behind a load balancer, mapped to their servers (upstream `server_mapper.go`
/// `mapNodes`).
#[derive(Debug, Default)]
pub struct Mapping<'a> {
    /// The server of every node that maps to exactly one, in node order.
    pub servers: Vec<&'a Server>,
    /// Nodes that map to no server or are malformed, each with why and what to do.
    pub left_out: Vec<String>,
    /// The private addresses of the servers a node matched by name when it matched several:
    /// that answer is ambiguous, so existing members at these addresses are neither added nor
    /// removed.
    pub ambiguous_addresses: Vec<String>,
}

/// Maps every node to its server from one list of all servers (upstream asks once per node).
///
/// Upstream fails the whole reconcile when one node does not map to exactly one server, so one
/// bad node (its server deleted, a node of another cloud, a name shared by two servers) leaves
/// every good node without traffic. Here such a node is left out, with the reason in
/// [`Mapping::left_out`] (the caller emits a Warning event naming it), and the load balancer is
/// built from the others. Only when every node is left out does the reconcile fail (nothing is
/// changed then: an answer that maps no node at all may be a wrong project or token).
pub fn map_nodes<'a>(servers: &'a [Server], nodes: &[Node]) -> Result<Mapping<'a>, ProviderError> {
    let mut mapping = Mapping::default();
    for node in nodes {
        let found: Vec<&Server> = if node.provider_id.is_empty() {
            servers.iter().filter(|s| is_named(s, &node.name)).collect()
        } else {
            match provider_id::parse(&node.provider_id) {
                Ok(uuid) => servers.iter().filter(|s| s.uuid == uuid).collect(),
                Err(e) => {
                    mapping.left_out.push(format!(
                        "node {}: {e}; fix its providerID or exclude it with the label \
                         node.kubernetes.io/exclude-from-external-load-balancers",
                        node.name
                    ));
                    continue;
                }
            }
        };
        match found[..] {
            [one] => mapping.servers.push(one),
            // No provider ID and no server of that name: upstream's `findByName` finds none. If
            // its server was deleted before the node was initialised, no controller deletes the
            // Node (without a provider ID nothing decides that its server is gone).
            [] if node.provider_id.is_empty() => mapping.left_out.push(format!(
                "node {} has no provider ID and no cloudscale server is named so; if its server \
                 was deleted, delete the Node, otherwise exclude it with \
                 k8s.cloudscale.ch/loadbalancer-node-selector or the label \
                 node.kubernetes.io/exclude-from-external-load-balancers",
                node.name
            )),
            [] => mapping.left_out.push(format!(
                "node {} maps to no cloudscale server (provider ID {:?}): its server is gone or \
                 in another account; the node lifecycle controller deletes such a Node",
                node.name, node.provider_id
            )),
            _ => {
                mapping.left_out.push(format!(
                    "node {} matches {} cloudscale servers by name, compared as kubelet names \
                     Nodes ({}); set its providerID to say which one",
                    node.name,
                    found.len(),
                    found
                        .iter()
                        .map(|s| format!("{} {:?}", s.uuid, s.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                mapping.ambiguous_addresses.extend(
                    found
                        .iter()
                        .flat_map(|s| &s.interfaces)
                        .filter(|i| i.kind != "public")
                        .flat_map(|i| &i.addresses)
                        .map(|a| a.address.clone()),
                );
            }
        }
    }
    if mapping.servers.is_empty() && !mapping.left_out.is_empty() {
        return Err(ProviderError::permanent(format!(
            "no node behind this load balancer maps to a cloudscale server, so nothing was \
             changed: {}",
            mapping.left_out.join("; ")
        )));
    }
    Ok(mapping)
}

/// Whether `server` is shut down: what `instance-shutdown` answers and what the listing carries,
/// from this one function so the two cannot drift.
pub fn shut_down(server: &Server) -> bool {
    server.status == "stopped"
}

/// Lists `servers` (the project's every server: the per-node path may match any of them, by
/// provider ID or by name, so the listing has no narrower filter).
///
/// A server's `node-name` is its name as kubelet makes Node names ([`is_named`]), and empty when
/// another server makes the same Node name: the per-node lookup binds such a node to none
/// ([`by_node_name`] refuses the ambiguity), so the listing names no node either. A server whose
/// UUID is not a UUID would get a provider ID the per-node path cannot parse; it is left out
/// rather than listed under an ID that means nothing.
pub fn listing(servers: &[Server]) -> Listed {
    Listed::of(
        servers,
        |s| node_name::of_hostname(&s.name),
        |s| {
            if provider_id::parse_uuid(&s.uuid).as_deref() == Some(s.uuid.as_str()) {
                Ok((metadata(s), shut_down(s)))
            } else {
                Err(format!(
                    "server {:?} has UUID {:?}, not a canonical UUID",
                    s.name, s.uuid
                ))
            }
        },
    )
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

    fn node(name: &str, provider_id: &str) -> Node {
        Node {
            name: name.into(),
            uid: format!("uid-{name}"),
            provider_id: provider_id.into(),
            labels: vec![],
            annotations: vec![],
            addresses: vec![],
            taints: vec![],
            ready: true,
        }
    }

    fn named(uuid: &str, name: &str, private: &str) -> Server {
        let mut s = server();
        s.uuid = uuid.into();
        s.name = name.into();
        s.interfaces[1].addresses[0].address = private.into();
        s
    }

    #[test]
    fn one_bad_node_is_left_out_and_the_others_stay() {
        let good = named("11111111-1111-4111-8111-111111111111", "good", "10.1.1.1");
        let twin_a = named("22222222-2222-4222-8222-222222222222", "twin", "10.1.1.2");
        // Not the same name, but the same Node name: kubelet lower-cases its hostname.
        let twin_b = named("33333333-3333-4333-8333-333333333333", "Twin", "10.1.1.3");
        let servers = vec![good.clone(), twin_a, twin_b];
        let nodes = [
            node("good", "cloudscale://11111111-1111-4111-8111-111111111111"),
            // Its server was deleted.
            node("gone", "cloudscale://44444444-4444-4444-8444-444444444444"),
            // Another cloud's provider ID.
            node("alien", "aws:///eu-west-1a/i-0123"),
            // No provider ID, no server of that name.
            node("nameless", ""),
            // No provider ID, two servers of that name: ambiguous.
            node("twin", ""),
        ];
        let m = map_nodes(&servers, &nodes).unwrap();
        assert_eq!(m.servers, vec![&good]);
        assert_eq!(m.left_out.len(), 4, "{:?}", m.left_out);
        for (reason, name) in m.left_out.iter().zip(["gone", "alien", "nameless", "twin"]) {
            assert!(reason.starts_with(&format!("node {name}")), "{reason}");
        }
        assert!(m.left_out[3].contains("22222222-2222-4222-8222-222222222222"));
        // The ambiguous node's possible private addresses are protected, its public ones are
        // never members anyway.
        assert_eq!(m.ambiguous_addresses, ["10.1.1.2", "10.1.1.3"]);
    }

    /// A server whose name has upper case is the Node kubelet names in lower case.
    #[test]
    fn names_compare_as_kubelet_makes_node_names() {
        let lone = named("44444444-4444-4444-8444-444444444444", "Node-F", "10.1.1.4");
        assert!(is_named(&lone, "node-f"));
        assert!(
            !is_named(&lone, "Node-F"),
            "a Node name is never upper case"
        );
        let servers = [lone.clone()];
        let m = map_nodes(&servers, &[node("node-f", "")]).unwrap();
        assert_eq!(m.servers, vec![&lone]);
        assert_eq!(by_name(vec![lone.clone()], "node-f"), vec![lone]);
    }

    /// For every server the per-node path binds, the listing carries its answers: the same
    /// metadata, the same shutdown, and the node name the by-name lookup binds to it.
    #[test]
    fn the_listing_agrees_with_the_per_node_lookups() {
        let mut stopped = named(
            "55555555-5555-4555-8555-555555555555",
            "worker-3",
            "10.1.1.5",
        );
        stopped.status = "stopped".into();
        let servers = vec![
            named(
                "11111111-1111-4111-8111-111111111111",
                "worker-1",
                "10.1.1.1",
            ),
            // kubelet lower-cases: the node is `worker-2`.
            named(
                "22222222-2222-4222-8222-222222222222",
                " Worker-2 ",
                "10.1.1.2",
            ),
            stopped,
            // Two servers make the Node name `twin`: the per-node lookup binds neither.
            named("33333333-3333-4333-8333-333333333333", "twin", "10.1.1.3"),
            named("44444444-4444-4444-8444-444444444444", "TWIN", "10.1.1.4"),
        ];
        let listed = listing(&servers);
        assert!(listed.left_out.is_empty(), "{:?}", listed.left_out);
        assert_eq!(listed.instances.len(), servers.len());
        for (server, item) in servers.iter().zip(&listed.instances) {
            assert_eq!(item.metadata, metadata(server), "{}", server.name);
            assert_eq!(item.shutdown, shut_down(server), "{}", server.name);
            let name = node_name::of_hostname(&server.name);
            match by_node_name(servers.clone(), &name) {
                Ok(bound) => {
                    assert_eq!(&bound, server);
                    assert_eq!(item.node_name, name);
                }
                Err(e) => {
                    assert!(matches!(e, ProviderError::Permanent(_)), "{e}");
                    assert_eq!(item.node_name, "", "{} is ambiguous", server.name);
                }
            }
        }
        let names: Vec<_> = listed
            .instances
            .iter()
            .map(|i| i.node_name.as_str())
            .collect();
        assert_eq!(names, ["worker-1", "worker-2", "worker-3", "", ""]);
        assert_eq!(
            listed
                .instances
                .iter()
                .map(|i| i.shutdown)
                .collect::<Vec<_>>(),
            [false, false, true, false, false]
        );
    }

    /// A server whose UUID is not a canonical UUID would be listed under a provider ID the
    /// per-node path reads differently: left out, so its node is asked about by itself.
    #[test]
    fn servers_without_a_canonical_uuid_are_left_out() {
        let servers = vec![
            named("", "blank", "10.1.1.1"),
            named("66666666-6666-4666-8666-66666666666Z", "bad", "10.1.1.2"),
            named("77777777-7777-4777-8777-7777777777AB", "upper", "10.1.1.3"),
            named("88888888-8888-4888-8888-888888888888", "good", "10.1.1.4"),
            // The by-name lookup sees the left-out `bad` too, so `Bad` is ambiguous there.
            named("99999999-9999-4999-8999-999999999999", "Bad", "10.1.1.5"),
        ];
        let listed = listing(&servers);
        assert_eq!(listed.left_out.len(), 3, "{:?}", listed.left_out);
        assert_eq!(listed.instances.len(), 2);
        assert_eq!(listed.instances[0].node_name, "good");
        assert_eq!(listed.instances[1].node_name, "", "ambiguous per node");
        assert_eq!(
            listed.instances[0].metadata.provider_id,
            "cloudscale://88888888-8888-4888-8888-888888888888"
        );
        assert!(listing(&[]).instances.is_empty());
    }

    #[test]
    fn no_node_mapping_changes_nothing() {
        let nodes = [node(
            "gone",
            "cloudscale://44444444-4444-4444-8444-444444444444",
        )];
        let e = map_nodes(&[], &nodes).unwrap_err();
        assert!(
            matches!(&e, ProviderError::Permanent(m) if m.contains("nothing was changed") && m.contains("node gone")),
            "{e}"
        );
        // No nodes at all is not an error: the caller emits NoValidNodes.
        let m = map_nodes(&[], &[]).unwrap();
        assert!(m.servers.is_empty() && m.left_out.is_empty());
    }
}
