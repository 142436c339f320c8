//! Nodes ↔ servers (upstream `instances.go`): lookups, shutdown and metadata.

use wasm_ccm_sdk::listing::Listed;
use wasm_ccm_sdk::types::{AddressType, InstanceMetadata, Node, NodeAddress, ProviderError};

use crate::api::Api;
use crate::model::Server;
use crate::{node_name, provider_id};

/// The server behind a provider ID; `None` only when the server is confirmed gone.
///
/// `GET /bmc/v1/servers/{id}` answers 403 for a deleted server (upstream's commit d84a2c5
/// "handle 403 for deleted node"; bmcapi.spec.yaml documents 403 only as a permission problem
/// and no 404 for it), so a 403 or 404 alone is ambiguous: a credential that lost read access,
/// or a wrong `base-url`, answers the same, and "gone" makes the host delete the Node (review
/// finding D2). It is confirmed with `GET /bmc/v1/servers`: gone only when that list succeeds
/// and lacks the ID. A failing list is its error (`unauthorized` for 401/403); the server in
/// the list is `unauthorized` too (this credential may list it but not read it).
pub fn by_provider_id(api: &Api, node: &Node) -> Result<Option<Server>, ProviderError> {
    let id = provider_id::parse(&node.provider_id)?;
    let status = match api.get_or_status::<Server>(&format!(
        "/bmc/v1/servers/{}",
        wasm_ccm_sdk::http::encode_path_segment(&id)
    ))? {
        // An answer about another server is not an answer about this one.
        Ok(server) if server.id == id => return Ok(Some(server)),
        Ok(server) => {
            return Err(ProviderError::Permanent(format!(
                "GET /bmc/v1/servers/{id} answered server {:?}; node {} is not bound to it",
                server.id, node.name
            )));
        }
        Err(status) => status,
    };
    let listed: Vec<Server> = match api.get_or_status("/bmc/v1/servers")? {
        Ok(list) => list,
        Err(list_status) => {
            return Err(ProviderError::Unauthorized(format!(
                "GET /bmc/v1/servers/{id} answered {status}, and listing the servers to confirm the server is gone answered {list_status}; the credentials may lack the bmc.read scope, so whether node {} exists is not decided",
                node.name
            )));
        }
    };
    if listed.iter().any(|s| s.id == id) {
        return Err(ProviderError::Unauthorized(format!(
            "GET /bmc/v1/servers/{id} answered {status}, but the server is in the list of servers; the credentials may not read it, so node {} is not treated as gone",
            node.name
        )));
    }
    Ok(None)
}

/// Upstream decides existence and shutdown only by provider ID: a name is too weak a reason to
/// delete a Node.
pub fn require_provider_id(node: &Node, what: &str) -> Result<(), ProviderError> {
    if node.provider_id.is_empty() {
        return Err(ProviderError::Permanent(format!(
            "node {} has no provider ID, so whether its server {what} cannot be decided; it gets one when the node is initialised",
            node.name
        )));
    }
    Ok(())
}

/// The server behind `node`: by provider ID, else the one server whose hostname is the node's
/// name as kubelet makes Node names ([`node_name::of_hostname`]: trimmed, lower-cased; PhoenixNAP
/// hostnames may hold upper case, Node names never do). Several such servers (`Node-E` and
/// `node-e`, or one hostname in two locations) are ambiguous: an error naming them (the host turns
/// it into a Warning event on the Node), and nothing is bound (upstream's `serverByName` compared
/// exactly and took the first, so a node could be initialised with another machine's provider ID
/// and addresses, and a server `Node-F` was never found).
pub fn find(api: &Api, node: &Node) -> Result<Server, ProviderError> {
    if !node.provider_id.is_empty() {
        return by_provider_id(api, node)?.ok_or_else(|| {
            ProviderError::NotFound(format!(
                "no PhoenixNAP server with provider ID {:?}",
                node.provider_id
            ))
        });
    }
    by_hostname(api.get("/bmc/v1/servers")?, &node.name)
}

/// The one server of `servers` whose hostname kubelet would make Node name `name`: the by-name
/// half of [`find`], which the listing's `node-name` must agree with.
pub fn by_hostname(servers: Vec<Server>, name: &str) -> Result<Server, ProviderError> {
    let mut matches: Vec<Server> = servers
        .into_iter()
        .filter(|s| node_name::of_hostname(&s.hostname) == name)
        .collect();
    match matches.len() {
        0 => Err(ProviderError::NotFound(format!(
            "no PhoenixNAP server has a hostname that kubelet would name {:?} (compared without \
             case and surrounding whitespace): name the node like its server, or set its \
             providerID to phoenixnap://<server-id>",
            name
        ))),
        1 => Ok(matches.remove(0)),
        n => Err(ProviderError::Permanent(format!(
            "{n} PhoenixNAP servers have a hostname that kubelet would name {:?} ({}), so node {} \
             is bound to none of them; set the node's providerID to phoenixnap://<server-id> \
             (e.g. kubelet --provider-id) or give the servers hostnames that differ in more than \
             case",
            name,
            matches
                .iter()
                .map(|s| format!("{} {:?} in {}", s.id, s.hostname, s.location))
                .collect::<Vec<_>>()
                .join(", "),
            name
        ))),
    }
}

/// Whether `server` is powered off: what `instance-shutdown` answers and what the listing
/// carries, from this one function so the two cannot drift.
pub fn powered_off(server: &Server) -> bool {
    server.status == "powered-off"
}

/// Lists `servers`: the account's every server, the set both per-node lookups search (by ID
/// any server of the account, by name the unfiltered list), so no tag or location narrows it.
///
/// A server's `node-name` is its hostname as kubelet makes Node names, empty when another server
/// of the list makes the same one ([`find`] binds such a node to none). A server whose ID would
/// not read back from its provider ID (empty, or holding `/`) is left out.
pub fn listing(servers: &[Server]) -> Listed {
    Listed::of(
        servers,
        |s| node_name::of_hostname(&s.hostname),
        |s| match provider_id::parse(&provider_id::format(&s.id)) {
            Ok(id) if id == s.id => Ok((metadata(s), powered_off(s))),
            _ => Err(format!(
                "server {:?} has ID {:?}, which is no provider ID",
                s.hostname, s.id
            )),
        },
    )
}

/// Provider ID, type, region (the location; PhoenixNAP has no zones) and addresses: the
/// hostname, every public IP as ExternalIP, every private IP as InternalIP. A server without
/// public IPs (`PRIVATE_ONLY`) initialises too.
pub fn metadata(server: &Server) -> InstanceMetadata {
    let mut m = InstanceMetadata::new(provider_id::format(&server.id));
    m.instance_type = server.server_type.clone();
    m.region = server.location.clone();
    let mut addresses = vec![NodeAddress::new(AddressType::Hostname, &server.hostname)];
    addresses.extend(
        server
            .public_ip_addresses
            .iter()
            .map(|a| NodeAddress::new(AddressType::ExternalIp, a)),
    );
    addresses.extend(
        server
            .private_ip_addresses
            .iter()
            .map(|a| NodeAddress::new(AddressType::InternalIp, a)),
    );
    m.addresses = addresses;
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(public: &[&str]) -> Server {
        Server {
            id: "5ff5cc9bc1acf144d9106233".into(),
            status: "powered-on".into(),
            hostname: "worker-1".into(),
            server_type: "s1.c1.medium".into(),
            location: "PHX".into(),
            private_ip_addresses: vec!["10.0.0.11".into()],
            public_ip_addresses: public.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn metadata_in_upstream_order() {
        let m = metadata(&server(&["198.51.100.5"]));
        assert_eq!(m.provider_id, "phoenixnap://5ff5cc9bc1acf144d9106233");
        assert_eq!(
            (m.instance_type.as_str(), m.region.as_str(), m.zone.as_str()),
            ("s1.c1.medium", "PHX", "")
        );
        let kinds: Vec<AddressType> = m.addresses.iter().map(|a| a.kind).collect();
        assert_eq!(
            kinds,
            vec![
                AddressType::Hostname,
                AddressType::ExternalIp,
                AddressType::InternalIp
            ]
        );
    }

    fn named(id: &str, hostname: &str, status: &str) -> Server {
        Server {
            id: id.into(),
            hostname: hostname.into(),
            status: status.into(),
            ..server(&["198.51.100.5"])
        }
    }

    /// For every server the per-node path binds, the listing carries its answers: the same
    /// metadata, the same shutdown, and the node name the by-name lookup binds to it.
    #[test]
    fn the_listing_agrees_with_the_per_node_lookups() {
        let servers = vec![
            named("5ff5cc9bc1acf144d9106201", "worker-1", "powered-on"),
            named("5ff5cc9bc1acf144d9106202", " Worker-2", "powered-off"),
            named("5ff5cc9bc1acf144d9106203", "twin", "powered-on"),
            named("5ff5cc9bc1acf144d9106204", "TWIN", "creating"),
            // Left out for its ID, yet the name lookup sees it: `Odd` is ambiguous there.
            named("", "odd", "powered-on"),
            named("5ff5cc9bc1acf144d9106205", "Odd", "powered-on"),
            named("a/b", "slash", "powered-on"),
        ];
        let listed = listing(&servers);
        assert_eq!(listed.left_out.len(), 2, "{:?}", listed.left_out);
        for item in &listed.instances {
            let id = item
                .metadata
                .provider_id
                .trim_start_matches("phoenixnap://");
            let server = servers.iter().find(|s| s.id == id).expect("one of ours");
            assert_eq!(item.metadata, metadata(server));
            assert_eq!(item.shutdown, powered_off(server), "{}", server.hostname);
            let name = node_name::of_hostname(&server.hostname);
            match by_hostname(servers.clone(), &name) {
                Ok(bound) => {
                    assert_eq!(bound.id, server.id);
                    assert_eq!(item.node_name, name);
                }
                Err(e) => {
                    assert!(matches!(e, ProviderError::Permanent(_)), "{e}");
                    assert_eq!(item.node_name, "", "{} is ambiguous", server.hostname);
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
                ("", false),
                ("", false),
                ("", false),
            ]
        );
    }

    #[test]
    fn private_only_servers_initialise() {
        let m = metadata(&server(&[]));
        assert_eq!(m.addresses.len(), 2);
    }
}
