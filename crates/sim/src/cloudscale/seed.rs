//! The starting inventory: servers (with their networks and subnets) and floating IPs, from Rust
//! or from a YAML/JSON file (`wasm-ccm-sim cloudscale --seed FILE`).

use std::net::IpAddr;
use std::path::Path;

use serde::Deserialize;

use super::model::{
    Address, FloatingIp, Interface, Network, PUBLIC_NETWORK, Server, State, Subnet, Tags, ZONES,
    new_uuid,
};
use super::net::Cidr;

/// Servers and floating IPs to start with.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Seed {
    /// Servers, registered in order (their private subnets become known subnets).
    pub servers: Vec<SeedServer>,
    /// Floating IPs, unassigned.
    pub floating_ips: Vec<SeedFloatingIp>,
}

/// A server.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedServer {
    /// The UUID; a random one when absent.
    #[serde(default)]
    pub uuid: Option<String>,
    /// The name: a host name or FQDN, upper case allowed (see `valid_server_name`); need not be
    /// unique, as in the real API.
    pub name: String,
    /// Flavor slug `<family>-<memory GB>-<vCPUs>`, default `flex-4-2`.
    #[serde(default = "default_flavor")]
    pub flavor: String,
    /// Zone slug (`rma1` or `lpg1`), default `rma1`.
    #[serde(default = "default_zone")]
    pub zone: String,
    /// Status (`running`, `stopped`, `changing`, ...), default `running`.
    #[serde(default = "default_status")]
    pub status: String,
    /// Network interfaces.
    #[serde(default)]
    pub interfaces: Vec<SeedInterface>,
    /// Tags (`tags` of the API's server object), for the lists' `tag:` filters.
    #[serde(default)]
    pub tags: std::collections::BTreeMap<String, String>,
}

fn default_flavor() -> String {
    "flex-4-2".into()
}

fn default_zone() -> String {
    "rma1".into()
}

fn default_status() -> String {
    "running".into()
}

/// A network interface of a seeded server.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedInterface {
    /// `public` or `private`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The network's UUID. Absent: public interfaces share the public network; private ones
    /// take the network of their first address's known subnet, else one shared private network.
    #[serde(default)]
    pub network: Option<String>,
    /// Addresses on the interface.
    #[serde(default)]
    pub addresses: Vec<SeedAddress>,
}

/// An address of a seeded interface.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedAddress {
    /// The IP address.
    pub address: String,
    /// The subnet's UUID. Absent for a private address: the known subnet with the same CIDR,
    /// else a new one. Absent for a public address: the API's empty subnet UUID.
    #[serde(default)]
    pub subnet: Option<String>,
    /// The subnet's CIDR, e.g. `10.1.1.0/24`. Absent: the known subnet's CIDR, else the /24
    /// (IPv4) or /64 (IPv6) around the address.
    #[serde(default)]
    pub cidr: Option<String>,
}

/// A floating IP.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedFloatingIp {
    /// `5.102.150.123/32`, `2a06:c01::123/128` (or an IPv6 `/56`).
    pub network: String,
    /// Region slug (`rma`, `lpg`), default `rma`; `global` makes a global floating IP.
    #[serde(default)]
    pub region: Option<String>,
}

impl SeedServer {
    /// A running `flex-4-2` server in `rma1` without interfaces.
    pub fn new(name: &str) -> SeedServer {
        SeedServer {
            uuid: None,
            name: name.into(),
            flavor: default_flavor(),
            zone: default_zone(),
            status: default_status(),
            interfaces: Vec::new(),
            tags: std::collections::BTreeMap::new(),
        }
    }

    /// Adds a tag (an empty value is a tag with an empty value, as the API allows).
    pub fn with_tag(mut self, key: &str, value: &str) -> SeedServer {
        self.tags.insert(key.into(), value.into());
        self
    }

    /// Sets the UUID.
    pub fn with_uuid(mut self, uuid: &str) -> SeedServer {
        self.uuid = Some(uuid.into());
        self
    }

    /// Sets the zone.
    pub fn with_zone(mut self, zone: &str) -> SeedServer {
        self.zone = zone.into();
        self
    }

    /// Sets the flavor.
    pub fn with_flavor(mut self, flavor: &str) -> SeedServer {
        self.flavor = flavor.into();
        self
    }

    /// Sets the status.
    pub fn with_status(mut self, status: &str) -> SeedServer {
        self.status = status.into();
        self
    }

    /// Adds a public interface with these addresses (IPv4 and/or IPv6).
    pub fn public(mut self, addrs: &[&str]) -> SeedServer {
        self.interfaces.push(SeedInterface {
            kind: "public".into(),
            network: None,
            addresses: addrs
                .iter()
                .map(|a| SeedAddress {
                    address: (*a).into(),
                    subnet: None,
                    cidr: None,
                })
                .collect(),
        });
        self
    }

    /// Adds a private interface with these addresses in the subnet `subnet_uuid` (`""`: the
    /// subnet is found or made by CIDR) of CIDR `cidr`.
    pub fn private(mut self, subnet_uuid: &str, cidr: &str, addrs: &[&str]) -> SeedServer {
        let subnet = (!subnet_uuid.is_empty()).then(|| subnet_uuid.to_string());
        self.interfaces.push(SeedInterface {
            kind: "private".into(),
            network: None,
            addresses: addrs
                .iter()
                .map(|a| SeedAddress {
                    address: (*a).into(),
                    subnet: subnet.clone(),
                    cidr: Some(cidr.into()),
                })
                .collect(),
        });
        self
    }
}

impl Seed {
    /// Parses YAML or JSON seed text.
    pub fn parse(text: &str) -> Result<Seed, String> {
        crate::request_core::parse_seed(text)
    }

    /// Reads and checks a seed file; errors name the file and what is wrong.
    pub fn load_file(path: &Path) -> anyhow::Result<Seed> {
        crate::request_core::load_seed_file(path, Seed::parse, Seed::check)
    }

    /// Validates the seed against an empty simulator, without starting one.
    pub fn check(&self) -> Result<(), String> {
        let mut state = State::new(std::time::Duration::ZERO);
        apply(&mut state, self)
    }
}

/// Adds a seed to the state; on error the state may be partly changed, so callers apply to a
/// copy and keep it only on success.
pub(crate) fn apply(state: &mut State, seed: &Seed) -> Result<(), String> {
    for server in &seed.servers {
        add_server(state, server)?;
    }
    for fip in &seed.floating_ips {
        add_floating_ip(state, &fip.network, fip.region.as_deref())?;
    }
    Ok(())
}

/// `<family>-<memory GB>-<vCPUs>` → (memory, vCPUs).
fn parse_flavor(slug: &str) -> Option<(u32, u32)> {
    let mut parts = slug.split('-');
    let family = parts.next()?;
    let memory = parts.next()?.parse().ok()?;
    let vcpus = parts.next()?.parse().ok()?;
    (!family.is_empty() && parts.next().is_none()).then_some((memory, vcpus))
}

/// Whether cloudscale takes `name` for a server. cloudscale's API documentation of the server's
/// `name` (quoted in cloudscale-ch/terraform-provider-cloudscale docs/resources/server.md, for
/// creating and renaming alike): "The name has to be a valid host name or a fully qualified domain
/// name (FQDN)". Host names as RFC 1123 §2.1 (after RFC 952) define them: dot-separated labels of
/// 1 to 63 ASCII letters, digits and `-`, neither first nor last a `-`, at most 253 characters in
/// all. Letters of either case (RFC 4343: DNS names are case-insensitive), so a server `Node-F`
/// exists, while the Node a kubelet on it registers is `node-f`. Where the documentation is silent
/// the rule is the stricter one: no trailing root dot (`a.example.`), no `_`.
pub(crate) fn valid_server_name(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// The refusal text for a name that [`valid_server_name`] refuses.
pub(crate) const SERVER_NAME_RULE: &str = "a host name or FQDN (cloudscale's API documentation): \
     dot-separated labels of 1 to 63 letters, digits and '-', no '-' first or last in a label, at \
     most 253 characters, no trailing dot";

/// Registers a server and its networks and subnets; returns its UUID.
pub(crate) fn add_server(state: &mut State, seed: &SeedServer) -> Result<String, String> {
    let label = if seed.name.is_empty() {
        "server with an empty name".to_string()
    } else {
        format!("server {:?}", seed.name)
    };
    let err = |msg: String| format!("{label}: {msg}");
    if !valid_server_name(&seed.name) {
        return Err(err(format!("`name` must be {SERVER_NAME_RULE}")));
    }
    let uuid = match &seed.uuid {
        Some(u) if u.trim().is_empty() => return Err(err("`uuid` may not be empty".into())),
        Some(u) if state.servers.contains_key(u) => {
            return Err(err(format!("duplicate `uuid` {u}")));
        }
        Some(u) => u.clone(),
        None => new_uuid(),
    };
    let (memory_gb, vcpus) = parse_flavor(&seed.flavor).ok_or_else(|| {
        err(format!(
            "`flavor` {:?} is not <family>-<memory GB>-<vCPUs> (e.g. flex-4-2)",
            seed.flavor
        ))
    })?;
    if !ZONES.contains(&seed.zone.as_str()) {
        return Err(err(format!(
            "`zone` {:?} is not one of {}",
            seed.zone,
            ZONES.join(", ")
        )));
    }
    if seed.status.trim().is_empty() {
        return Err(err("`status` may not be empty".into()));
    }
    let mut interfaces = Vec::new();
    for (i, iface) in seed.interfaces.iter().enumerate() {
        let interface =
            add_interface(state, iface).map_err(|e| err(format!("interfaces[{i}]: {e}")))?;
        interfaces.push(interface);
    }
    let meta = state.new_meta(seed.tags.clone());
    state.servers.insert(
        uuid.clone(),
        Server {
            meta,
            uuid: uuid.clone(),
            name: seed.name.clone(),
            flavor: seed.flavor.clone(),
            vcpus,
            memory_gb,
            zone: seed.zone.clone(),
            status: seed.status.clone(),
            interfaces,
        },
    );
    Ok(uuid)
}

fn add_interface(state: &mut State, seed: &SeedInterface) -> Result<Interface, String> {
    let public = match seed.kind.as_str() {
        "public" => true,
        "private" => false,
        other => return Err(format!("`type` {other:?} is not public or private")),
    };
    let network = match (&seed.network, public) {
        (Some(n), _) if n.trim().is_empty() => return Err("`network` may not be empty".into()),
        (Some(n), _) => n.clone(),
        (None, true) => PUBLIC_NETWORK.to_string(),
        (None, false) => {
            // A private interface joins the network of a subnet it is already known in.
            let known = seed
                .addresses
                .iter()
                .filter_map(|a| a.subnet.as_deref())
                .find_map(|s| state.subnets.get(s).map(|s| s.network.clone()));
            match known {
                Some(n) => n,
                None => default_private_network(state),
            }
        }
    };
    match state.networks.get(&network) {
        Some(n) if n.public != public => {
            return Err(format!(
                "network {network} is {}, the interface is {}",
                if n.public { "public" } else { "private" },
                seed.kind
            ));
        }
        Some(_) => {}
        None => {
            let meta = state.new_meta(Tags::new());
            let name = if public {
                "public".to_string()
            } else {
                format!("private-{}", network.get(..8).unwrap_or(&network))
            };
            state.networks.insert(
                network.clone(),
                Network {
                    meta,
                    uuid: network.clone(),
                    name,
                    public,
                },
            );
        }
    }
    let mut addresses = Vec::new();
    for (i, a) in seed.addresses.iter().enumerate() {
        let address = add_address(state, a, public, &network)
            .map_err(|e| format!("addresses[{i}] ({}): {e}", a.address))?;
        addresses.push(address);
    }
    Ok(Interface {
        public,
        network,
        addresses,
    })
}

fn default_private_network(state: &mut State) -> String {
    state
        .default_private_network
        .get_or_insert_with(new_uuid)
        .clone()
}

fn add_address(
    state: &mut State,
    seed: &SeedAddress,
    public: bool,
    network: &str,
) -> Result<Address, String> {
    let ip: IpAddr = seed
        .address
        .parse()
        .map_err(|_| "`address` is not an IP address".to_string())?;
    let given_cidr = seed.cidr.as_deref().map(Cidr::parse).transpose()?;
    let known = seed.subnet.as_deref().and_then(|u| state.subnets.get(u));
    let cidr = match (given_cidr, known) {
        (Some(c), Some(k)) if c != k.cidr => {
            return Err(format!("subnet {} has CIDR {}, not {c}", k.uuid, k.cidr));
        }
        (Some(c), _) => c,
        (None, Some(k)) => k.cidr,
        (None, None) => Cidr::around(ip, if ip.is_ipv4() { 24 } else { 64 }),
    };
    if !cidr.contains(ip) {
        return Err(format!("the address is not in {cidr}"));
    }
    let subnet = match (&seed.subnet, public) {
        (Some(u), _) if u.trim().is_empty() => return Err("`subnet` may not be empty".into()),
        (Some(u), _) => u.clone(),
        (None, true) => String::new(),
        (None, false) => state
            .subnets
            .values()
            .find(|s| !s.public && s.cidr == cidr && s.network == network)
            .map_or_else(new_uuid, |s| s.uuid.clone()),
    };
    if !subnet.is_empty() {
        register_subnet(state, &subnet, cidr, network, public)?;
    }
    // Public networks route through the first host of the subnet; private ones have no gateway
    // unless configured, which the seed cannot express.
    let gateway = public.then(|| super::net::from_bits(ip, super::net::bits(cidr.network) + 1));
    Ok(Address {
        ip,
        cidr,
        subnet,
        gateway,
    })
}

fn register_subnet(
    state: &mut State,
    uuid: &str,
    cidr: Cidr,
    network: &str,
    public: bool,
) -> Result<(), String> {
    if let Some(s) = state.subnets.get(uuid) {
        if s.network != network {
            return Err(format!(
                "subnet {uuid} is on network {}, the interface on {network}",
                s.network
            ));
        }
        if s.public != public {
            return Err(format!("subnet {uuid} is public and private at once"));
        }
        return Ok(());
    }
    let meta = state.new_meta(Tags::new());
    state.subnets.insert(
        uuid.to_string(),
        Subnet {
            meta,
            uuid: uuid.to_string(),
            cidr,
            network: network.to_string(),
            public,
        },
    );
    Ok(())
}

/// Registers an unassigned floating IP (`region` None → `rma`, `global` → a global one).
pub(crate) fn add_floating_ip(
    state: &mut State,
    network: &str,
    region: Option<&str>,
) -> Result<(), String> {
    let err = |msg: String| format!("floating IP {network:?}: {msg}");
    let cidr = Cidr::parse(network).map_err(err)?;
    let allowed = if cidr.network.is_ipv4() {
        cidr.prefix == 32
    } else {
        matches!(cidr.prefix, 56 | 128)
    };
    if !allowed {
        return Err(err(
            "the prefix must be /32 (IPv4), /128 or /56 (IPv6)".into()
        ));
    }
    if state.floating_ips.contains_key(&cidr.network) {
        return Err(err("duplicate floating IP".into()));
    }
    let region = match region.unwrap_or("rma") {
        "global" => None,
        r @ ("rma" | "lpg") => Some(r.to_string()),
        other => return Err(err(format!("`region` {other:?} is not rma, lpg or global"))),
    };
    let meta = state.new_meta(Tags::new());
    state.floating_ips.insert(
        cidr.network,
        FloatingIp {
            meta,
            ip: cidr.network,
            prefix: cidr.prefix,
            region,
            server: None,
            lb: None,
            reverse_ptr: None,
        },
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_seed_with_shared_derived_subnet() {
        let text = r#"
servers:
  - name: a
    interfaces:
      - type: public
        addresses: [{address: 5.102.145.10}]
      - type: private
        addresses: [{address: 10.1.1.10, cidr: 10.1.1.0/24}]
  - name: b
    zone: lpg1
    interfaces:
      - type: private
        addresses: [{address: 10.1.1.11, cidr: 10.1.1.0/24}]
floating_ips:
  - network: 5.102.150.123/32
  - network: "2a06:c01::123/128"
    region: global
"#;
        let seed = Seed::parse(text).expect("valid seed");
        let mut state = State::new(std::time::Duration::ZERO);
        apply(&mut state, &seed).expect("seed applies");
        let subnets: Vec<&Subnet> = state.subnets.values().filter(|s| !s.public).collect();
        assert_eq!(subnets.len(), 1, "both servers share the derived subnet");
        assert_eq!(state.floating_ips.len(), 2);
    }

    /// Names as cloudscale documents them (host name or FQDN): upper case is taken (review
    /// 2026-11-28 §3: `Node-E` and `node-e` can both exist), whitespace, `_`, empty labels,
    /// hyphens at a label's ends and over-long labels or names are not.
    #[test]
    fn server_names_are_host_names_or_fqdns() {
        let add = |name: &str| {
            let mut state = State::new(std::time::Duration::ZERO);
            add_server(&mut state, &SeedServer::new(name)).map(|_| state.servers.len())
        };
        let label = "a".repeat(63);
        let longest = [label.as_str(); 4].join(".")[..253].to_string();
        for ok in [
            "Node-E",
            "node-e",
            "worker-1.k8s.Example.com",
            "1node",
            label.as_str(),
            longest.as_str(),
        ] {
            assert_eq!(add(ok), Ok(1), "{ok:?} is a host name or FQDN");
        }
        let long_label = "a".repeat(64);
        let too_long = format!("{longest}a");
        for bad in [
            "",
            " node-e",
            "node-e ",
            "node e",
            "node_e",
            "-node",
            "node-",
            "node..e",
            "node-e.",
            ".node-e",
            "nöde",
            long_label.as_str(),
            too_long.as_str(),
        ] {
            let e = add(bad).expect_err(bad);
            assert!(e.contains("`name` must be"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn bad_seeds_are_reported() {
        let unknown = Seed::parse("servers:\n  - name: a\n    nmae: b\n").err();
        assert!(unknown.is_some_and(|e| e.contains("nmae")));
        let outside = Seed {
            servers: vec![SeedServer::new("a").private("", "10.0.0.0/24", &["10.0.1.1"])],
            ..Seed::default()
        };
        assert!(
            outside
                .check()
                .is_err_and(|e| e.contains("not in 10.0.0.0/24"))
        );
        let dup = Seed {
            servers: vec![
                SeedServer::new("a").with_uuid("u1"),
                SeedServer::new("b").with_uuid("u1"),
            ],
            ..Seed::default()
        };
        assert!(dup.check().is_err_and(|e| e.contains("duplicate")));
        let zone = Seed {
            servers: vec![SeedServer::new("a").with_zone("nowhere")],
            ..Seed::default()
        };
        assert!(zone.check().is_err());
    }
}
