//! The starting inventory: tags, servers, public networks and IP blocks, from Rust or from a YAML
//! or JSON file (`wasm-ccm-sim phoenixnap --seed FILE`). Field names are the API's (camelCase);
//! unknown fields are errors.

use std::net::IpAddr;
use std::path::Path;
use std::time::Instant;

use serde::Deserialize;

use super::model::{
    Assignment, BLOCK_STATUSES, Cidr4, HOSTNAME_RULE, IpBlock, LOCATIONS, NETWORK_STATUSES,
    NETWORK_TYPES, PublicNetwork, Server, State, TAG_TEXT_RULE, Tag, TagValue, new_id, now_rfc3339,
    parse_block_size, valid_hostname, valid_tag_text,
};

/// Everything to start with. Applied in the order tags, servers, public networks, IP blocks, so
/// blocks may use the seed's tags and networks.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Seed {
    /// Tag names in the tag manager.
    pub tags: Vec<SeedTag>,
    /// Bare-metal servers.
    pub servers: Vec<SeedServer>,
    /// Public networks.
    pub public_networks: Vec<SeedPublicNetwork>,
    /// IP blocks, e.g. one already assigned elsewhere.
    pub ip_blocks: Vec<SeedIpBlock>,
}

/// A bare-metal server.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SeedServer {
    /// The ID; a random 24-hex-digit one when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// The hostname; need not be unique. What the API takes (bmcapi.spec.yaml
    /// `ServerCreate.hostname`): upper case too, so the Kubernetes node name is this
    /// lower-cased (as kubelet names a Node).
    pub hostname: String,
    /// `powered-on` (default), `powered-off`, `creating`, `rebooting`, ... (any non-empty string).
    #[serde(default = "default_server_status")]
    pub status: String,
    /// The server type, default `s1.c1.medium`.
    #[serde(default = "default_server_type", rename = "type")]
    pub server_type: String,
    /// The location, default `PHX`.
    #[serde(default = "default_location")]
    pub location: String,
    /// The OS, default `ubuntu/jammy`.
    #[serde(default = "default_os")]
    pub os: String,
    /// Optional description.
    #[serde(default)]
    pub description: Option<String>,
    /// Public IPv4/IPv6 addresses.
    #[serde(default)]
    pub public_ip_addresses: Vec<String>,
    /// Private addresses.
    #[serde(default)]
    pub private_ip_addresses: Vec<String>,
    /// `PUBLIC_AND_PRIVATE`, `PRIVATE_ONLY`, `PUBLIC_ONLY` or `NONE`; default `PRIVATE_ONLY` without
    /// public addresses, else `PUBLIC_AND_PRIVATE`.
    #[serde(default)]
    pub network_type: Option<String>,
    /// Tags (names must be seeded tags), for `GET /bmc/v1/servers?tag=name.value`.
    #[serde(default)]
    pub tags: Vec<SeedTagValue>,
}

/// A public network.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SeedPublicNetwork {
    /// The ID; a random 24-hex-digit one when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// The name.
    pub name: String,
    /// The location, default `PHX`.
    #[serde(default = "default_location")]
    pub location: String,
    /// The VLAN (2–4094, unique per location); default the lowest free one from 10.
    #[serde(default)]
    pub vlan_id: Option<u32>,
    /// Optional description.
    #[serde(default)]
    pub description: Option<String>,
    /// CIDRs of blocks already assigned to the network (e.g. the nodes' addresses): each becomes
    /// an untagged `assigned` IP block.
    #[serde(default)]
    pub ip_blocks: Vec<String>,
    /// `BUSY`, `READY` (default), `DELETING` or `ERROR`; only a `READY` network takes blocks.
    #[serde(default)]
    pub status: Option<String>,
}

/// A tag name.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SeedTag {
    /// The name, unique.
    pub name: String,
    /// Optional description.
    #[serde(default)]
    pub description: Option<String>,
    /// Whether it is a billing tag (default false).
    #[serde(default)]
    pub is_billing_tag: bool,
}

/// An IP block.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SeedIpBlock {
    /// The ID; a random 24-hex-digit one when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// The location, default `PHX`.
    #[serde(default = "default_location")]
    pub location: String,
    /// The CIDR (IPv4, /22–/31); default: allocated from the pools like `POST` does.
    #[serde(default)]
    pub cidr: Option<String>,
    /// `/22`–`/31`, default `/29` (must agree with `cidr` when both are given).
    #[serde(default)]
    pub cidr_block_size: Option<String>,
    /// Default `assigned` with an assigned resource, else `unassigned`. `assigning` and
    /// `unassigning` complete like API transitions.
    #[serde(default)]
    pub status: Option<String>,
    /// What the block is assigned to (with `assignedResourceType`).
    #[serde(default)]
    pub assigned_resource_id: Option<String>,
    /// `PUBLIC_NETWORK`, `public network`, `server`, ... (with `assignedResourceId`).
    #[serde(default)]
    pub assigned_resource_type: Option<String>,
    /// Optional description.
    #[serde(default)]
    pub description: Option<String>,
    /// Tags; names must be seeded tags.
    #[serde(default)]
    pub tags: Vec<SeedTagValue>,
    /// Bring-your-own block (default false).
    #[serde(default)]
    pub is_bring_your_own: bool,
}

/// A tag on a seeded IP block.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedTagValue {
    /// A tag name from the tag manager.
    pub name: String,
    /// The value (letters, digits, `_`, `-`).
    #[serde(default)]
    pub value: Option<String>,
}

fn default_server_status() -> String {
    "powered-on".into()
}

fn default_server_type() -> String {
    "s1.c1.medium".into()
}

fn default_location() -> String {
    "PHX".into()
}

fn default_os() -> String {
    "ubuntu/jammy".into()
}

impl SeedServer {
    /// A `powered-on` `s1.c1.medium` server in PHX without addresses.
    pub fn new(hostname: &str) -> SeedServer {
        SeedServer {
            id: None,
            hostname: hostname.into(),
            status: default_server_status(),
            server_type: default_server_type(),
            location: default_location(),
            os: default_os(),
            description: None,
            public_ip_addresses: Vec::new(),
            private_ip_addresses: Vec::new(),
            network_type: None,
            tags: Vec::new(),
        }
    }

    /// Adds a tag (the name must be a seeded tag).
    pub fn with_tag(mut self, name: &str, value: &str) -> SeedServer {
        self.tags.push(SeedTagValue {
            name: name.into(),
            value: Some(value.into()),
        });
        self
    }

    /// Sets the ID.
    pub fn with_id(mut self, id: &str) -> SeedServer {
        self.id = Some(id.into());
        self
    }

    /// Sets the status.
    pub fn with_status(mut self, status: &str) -> SeedServer {
        self.status = status.into();
        self
    }

    /// Sets the server type.
    pub fn with_type(mut self, server_type: &str) -> SeedServer {
        self.server_type = server_type.into();
        self
    }

    /// Sets the location.
    pub fn with_location(mut self, location: &str) -> SeedServer {
        self.location = location.into();
        self
    }

    /// Sets the network type.
    pub fn with_network_type(mut self, network_type: &str) -> SeedServer {
        self.network_type = Some(network_type.into());
        self
    }

    /// Adds public addresses.
    pub fn public(mut self, addrs: &[&str]) -> SeedServer {
        self.public_ip_addresses
            .extend(addrs.iter().map(|a| (*a).to_string()));
        self
    }

    /// Adds private addresses.
    pub fn private(mut self, addrs: &[&str]) -> SeedServer {
        self.private_ip_addresses
            .extend(addrs.iter().map(|a| (*a).to_string()));
        self
    }
}

impl SeedPublicNetwork {
    /// A network in PHX on the lowest free VLAN from 10, without blocks.
    pub fn new(name: &str) -> SeedPublicNetwork {
        SeedPublicNetwork {
            id: None,
            name: name.into(),
            location: default_location(),
            vlan_id: None,
            description: None,
            ip_blocks: Vec::new(),
            status: None,
        }
    }

    /// Sets the status (`BUSY`, `READY`, `DELETING` or `ERROR`).
    pub fn with_status(mut self, status: &str) -> SeedPublicNetwork {
        self.status = Some(status.into());
        self
    }

    /// Sets the ID.
    pub fn with_id(mut self, id: &str) -> SeedPublicNetwork {
        self.id = Some(id.into());
        self
    }

    /// Sets the location.
    pub fn with_location(mut self, location: &str) -> SeedPublicNetwork {
        self.location = location.into();
        self
    }

    /// Sets the VLAN.
    pub fn with_vlan(mut self, vlan_id: u32) -> SeedPublicNetwork {
        self.vlan_id = Some(vlan_id);
        self
    }

    /// Adds an `assigned` block with this CIDR.
    pub fn with_ip_block(mut self, cidr: &str) -> SeedPublicNetwork {
        self.ip_blocks.push(cidr.into());
        self
    }
}

impl SeedTag {
    /// A non-billing tag without description.
    pub fn new(name: &str) -> SeedTag {
        SeedTag {
            name: name.into(),
            description: None,
            is_billing_tag: false,
        }
    }
}

impl Default for SeedIpBlock {
    /// An unassigned /29 in PHX from the pools, untagged.
    fn default() -> Self {
        SeedIpBlock {
            id: None,
            location: default_location(),
            cidr: None,
            cidr_block_size: None,
            status: None,
            assigned_resource_id: None,
            assigned_resource_type: None,
            description: None,
            tags: Vec::new(),
            is_bring_your_own: false,
        }
    }
}

impl SeedIpBlock {
    /// An unassigned /29 in PHX from the pools, untagged.
    pub fn new() -> SeedIpBlock {
        SeedIpBlock::default()
    }

    /// Sets the ID.
    pub fn with_id(mut self, id: &str) -> SeedIpBlock {
        self.id = Some(id.into());
        self
    }

    /// Sets the CIDR.
    pub fn with_cidr(mut self, cidr: &str) -> SeedIpBlock {
        self.cidr = Some(cidr.into());
        self
    }

    /// Sets the location.
    pub fn with_location(mut self, location: &str) -> SeedIpBlock {
        self.location = location.into();
        self
    }

    /// Sets the status.
    pub fn with_status(mut self, status: &str) -> SeedIpBlock {
        self.status = Some(status.into());
        self
    }

    /// Assigns the block to a resource, e.g. `("PUBLIC_NETWORK", network_id)`.
    pub fn assigned_to(mut self, resource_type: &str, resource_id: &str) -> SeedIpBlock {
        self.assigned_resource_type = Some(resource_type.into());
        self.assigned_resource_id = Some(resource_id.into());
        self
    }

    /// Adds a tag (the name must be a known tag).
    pub fn with_tag(mut self, name: &str, value: &str) -> SeedIpBlock {
        self.tags.push(SeedTagValue {
            name: name.into(),
            value: Some(value.into()),
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
        apply(&mut state, self, Instant::now())
    }
}

/// Adds a seed to the state; on error the state may be partly changed, so callers apply to a
/// copy and keep it only on success.
pub(crate) fn apply(state: &mut State, seed: &Seed, now: Instant) -> Result<(), String> {
    for (i, tag) in seed.tags.iter().enumerate() {
        add_tag(state, tag).map_err(|e| format!("tags[{i}]: {e}"))?;
    }
    for (i, server) in seed.servers.iter().enumerate() {
        add_server(state, server).map_err(|e| format!("servers[{i}]: {e}"))?;
    }
    for (i, network) in seed.public_networks.iter().enumerate() {
        add_network(state, network).map_err(|e| format!("publicNetworks[{i}]: {e}"))?;
    }
    for (i, block) in seed.ip_blocks.iter().enumerate() {
        add_block(state, block, now).map_err(|e| format!("ipBlocks[{i}]: {e}"))?;
    }
    Ok(())
}

/// The given ID (checked: non-empty, path-safe, unused) or a new one.
fn take_id(state: &State, id: Option<&String>) -> Result<String, String> {
    match id {
        None => Ok(new_id()),
        Some(id) if id.trim().is_empty() => Err("`id` may not be empty".into()),
        Some(id) if id.contains(['/', '?', '#', '%', ' ']) => Err(format!(
            "`id` {id:?} may not contain '/', '?', '#', '%' or spaces"
        )),
        Some(id) if state.id_taken(id) => Err(format!("duplicate `id` {id}")),
        Some(id) => Ok(id.clone()),
    }
}

fn check_location(location: &str) -> Result<(), String> {
    if LOCATIONS.contains(&location) {
        Ok(())
    } else {
        Err(format!(
            "`location` {location:?} is not one of {}",
            LOCATIONS.join(", ")
        ))
    }
}

/// Registers a tag name; returns its ID.
pub(crate) fn add_tag(state: &mut State, seed: &SeedTag) -> Result<String, String> {
    if !valid_tag_text(&seed.name) {
        return Err(format!("`name` {:?} must be {TAG_TEXT_RULE}", seed.name));
    }
    if state.tag_named(&seed.name).is_some() {
        return Err(format!("duplicate tag name {:?}", seed.name));
    }
    let id = new_id();
    state.tags.push(Tag {
        id: id.clone(),
        name: seed.name.clone(),
        description: seed.description.clone(),
        billing: seed.is_billing_tag,
    });
    Ok(id)
}

/// Registers a server; returns its ID.
pub(crate) fn add_server(state: &mut State, seed: &SeedServer) -> Result<String, String> {
    let err = |msg: String| format!("server {:?}: {msg}", seed.hostname);
    if !valid_hostname(&seed.hostname) {
        return Err(err(format!("`hostname` must be {HOSTNAME_RULE}")));
    }
    let id = take_id(state, seed.id.as_ref()).map_err(err)?;
    if seed.status.trim().is_empty() {
        return Err(err("`status` may not be empty".into()));
    }
    if seed.server_type.trim().is_empty() {
        return Err(err("`type` may not be empty".into()));
    }
    check_location(&seed.location).map_err(err)?;
    let parse = |list: &[String], field: &str| -> Result<Vec<IpAddr>, String> {
        list.iter()
            .map(|a| {
                a.parse()
                    .map_err(|_| format!("`{field}`: {a:?} is not an IP address"))
            })
            .collect()
    };
    let public_ips = parse(&seed.public_ip_addresses, "publicIpAddresses").map_err(err)?;
    let private_ips = parse(&seed.private_ip_addresses, "privateIpAddresses").map_err(err)?;
    let network_type = match &seed.network_type {
        Some(t) if NETWORK_TYPES.contains(&t.as_str()) => t.clone(),
        Some(t) => {
            return Err(err(format!(
                "`networkType` {t:?} is not one of {}",
                NETWORK_TYPES.join(", ")
            )));
        }
        None if public_ips.is_empty() => "PRIVATE_ONLY".into(),
        None => "PUBLIC_AND_PRIVATE".into(),
    };
    let tags = seed_tags(state, &seed.tags).map_err(err)?;
    state.servers.push(Server {
        id: id.clone(),
        hostname: seed.hostname.clone(),
        description: seed.description.clone(),
        status: seed.status.clone(),
        os: seed.os.clone(),
        server_type: seed.server_type.clone(),
        location: seed.location.clone(),
        private_ips,
        public_ips,
        network_type,
        provisioned_on: now_rfc3339(),
        tags,
    });
    Ok(id)
}

/// Registers a public network and its blocks; returns its ID.
pub(crate) fn add_network(state: &mut State, seed: &SeedPublicNetwork) -> Result<String, String> {
    let err = |msg: String| format!("public network {:?}: {msg}", seed.name);
    if seed.name.trim().is_empty() {
        return Err("public network: `name` may not be empty".into());
    }
    let id = take_id(state, seed.id.as_ref()).map_err(err)?;
    check_location(&seed.location).map_err(err)?;
    let vlan_taken = |vlan: u32| {
        state
            .networks
            .iter()
            .any(|n| n.location == seed.location && n.vlan_id == vlan)
    };
    let vlan_id = match seed.vlan_id {
        Some(v) if !(2..=4094).contains(&v) => {
            return Err(err(format!("`vlanId` {v} is not in 2-4094")));
        }
        Some(v) if vlan_taken(v) => {
            return Err(err(format!(
                "`vlanId` {v} is already used in {}",
                seed.location
            )));
        }
        Some(v) => v,
        None => (10..=4094)
            .find(|v| !vlan_taken(*v))
            .ok_or_else(|| err("no free VLAN".into()))?,
    };
    let status = match seed.status.as_deref() {
        None => "READY".to_string(),
        Some(s) if NETWORK_STATUSES.contains(&s) => s.to_string(),
        Some(s) => {
            return Err(err(format!(
                "`status` {s:?} is not one of {}",
                NETWORK_STATUSES.join(", ")
            )));
        }
    };
    state.networks.push(PublicNetwork {
        id: id.clone(),
        name: seed.name.clone(),
        location: seed.location.clone(),
        vlan_id,
        description: seed.description.clone(),
        created_on: now_rfc3339(),
        status,
    });
    let resource_type = state.network_resource_type.clone();
    for (i, cidr) in seed.ip_blocks.iter().enumerate() {
        let block = SeedIpBlock {
            location: seed.location.clone(),
            ..SeedIpBlock::new()
                .with_cidr(cidr)
                .assigned_to(&resource_type, &id)
        };
        add_block(state, &block, Instant::now()).map_err(|e| err(format!("ipBlocks[{i}]: {e}")))?;
    }
    Ok(id)
}

/// Registers an IP block; returns its ID.
pub(crate) fn add_block(
    state: &mut State,
    seed: &SeedIpBlock,
    now: Instant,
) -> Result<String, String> {
    let label = seed
        .cidr
        .as_deref()
        .or(seed.id.as_deref())
        .unwrap_or("(allocated)");
    let err = |msg: String| format!("IP block {label}: {msg}");
    let id = take_id(state, seed.id.as_ref()).map_err(err)?;
    check_location(&seed.location).map_err(err)?;
    let size = seed
        .cidr_block_size
        .as_deref()
        .map(parse_block_size)
        .transpose()
        .map_err(|e| err(format!("`cidrBlockSize`: {e}")))?;
    let cidr = match &seed.cidr {
        Some(text) => {
            let cidr = Cidr4::parse(text).map_err(|e| err(format!("`cidr`: {e}")))?;
            parse_block_size(&format!("/{}", cidr.prefix))
                .map_err(|e| err(format!("`cidr`: {e}")))?;
            if size.is_some_and(|s| s != cidr.prefix) {
                return Err(err(format!(
                    "`cidrBlockSize` /{} does not match the CIDR",
                    size.unwrap_or_default()
                )));
            }
            if let Some(other) = state.blocks.iter().find(|b| b.cidr.overlaps(cidr)) {
                return Err(err(format!(
                    "overlaps IP block {} ({})",
                    other.id, other.cidr
                )));
            }
            cidr
        }
        None => {
            let prefix = size.unwrap_or(29);
            state
                .allocate(prefix)
                .ok_or_else(|| err(format!("no free /{prefix} left in the pools")))?
        }
    };
    let assignment = match (&seed.assigned_resource_id, &seed.assigned_resource_type) {
        (Some(id), Some(kind)) if !id.trim().is_empty() && !kind.trim().is_empty() => {
            Some(Assignment {
                resource_id: id.clone(),
                resource_type: kind.clone(),
            })
        }
        (None, None) => None,
        _ => {
            return Err(err(
                "`assignedResourceId` and `assignedResourceType` go together (both non-empty)"
                    .into(),
            ));
        }
    };
    let status = match (&seed.status, &assignment) {
        (None, Some(_)) => "assigned".to_string(),
        (None, None) => "unassigned".to_string(),
        (Some(s), _) if !BLOCK_STATUSES.contains(&s.as_str()) => {
            return Err(err(format!(
                "`status` {s:?} is not one of {}",
                BLOCK_STATUSES.join(", ")
            )));
        }
        (Some(s), Some(_)) if s == "unassigned" => {
            return Err(err("an `unassigned` block has no assigned resource".into()));
        }
        (Some(s), None) if matches!(s.as_str(), "assigned" | "assigning" | "unassigning") => {
            return Err(err(format!("an `{s}` block needs an assigned resource")));
        }
        (Some(s), _) => s.clone(),
    };
    let tags = seed_tags(state, &seed.tags).map_err(err)?;
    let due = matches!(status.as_str(), "assigning" | "unassigning").then(|| state.due(now));
    state.blocks.push(IpBlock {
        id: id.clone(),
        location: seed.location.clone(),
        cidr,
        status,
        assignment,
        due,
        description: seed.description.clone(),
        tags,
        bring_your_own: seed.is_bring_your_own,
        created_on: now_rfc3339(),
    });
    Ok(id)
}

/// Seeded tags of a block or server: names must be seeded tags and appear once; values follow
/// [`valid_tag_text`].
fn seed_tags(state: &State, seeded: &[SeedTagValue]) -> Result<Vec<TagValue>, String> {
    let mut tags: Vec<TagValue> = Vec::new();
    for t in seeded {
        if state.tag_named(&t.name).is_none() {
            return Err(format!("tag {:?} is not a seeded tag", t.name));
        }
        if tags.iter().any(|x| x.name == t.name) {
            return Err(format!("tag {:?} is given twice", t.name));
        }
        if let Some(v) = &t.value
            && !valid_tag_text(v)
        {
            return Err(format!(
                "tag {:?}: value {v:?} must be {TAG_TEXT_RULE}",
                t.name
            ));
        }
        tags.push(TagValue {
            name: t.name.clone(),
            value: t.value.clone(),
        });
    }
    Ok(tags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_seed_applies() {
        let text = r#"
tags:
  - name: cluster
servers:
  - hostname: node-1
    id: 0123456789abcdef01234567
    publicIpAddresses: [198.51.100.130]
    privateIpAddresses: [10.0.0.11]
publicNetworks:
  - id: aaaaaaaaaaaaaaaaaaaaaaaa
    name: k8s
    vlanId: 20
    ipBlocks: [198.51.100.128/29]
ipBlocks:
  - cidr: 203.0.113.0/29
    assignedResourceType: PUBLIC_NETWORK
    assignedResourceId: bbbbbbbbbbbbbbbbbbbbbbbb
    tags: [{name: cluster, value: other}]
"#;
        let seed = Seed::parse(text).expect("valid seed");
        let mut state = State::new(std::time::Duration::ZERO);
        apply(&mut state, &seed, Instant::now()).expect("seed applies");
        assert_eq!(state.servers[0].network_type, "PUBLIC_AND_PRIVATE");
        assert_eq!(state.blocks.len(), 2);
        assert!(state.blocks[0].on_network("aaaaaaaaaaaaaaaaaaaaaaaa"));
        assert_eq!(state.blocks[1].status, "assigned");
    }

    /// Hostnames as bmcapi.spec.yaml `ServerCreate.hostname` allows them: upper case is taken
    /// (review 2026-11-28 §3: `Node-E` and `node-e` can both exist), whitespace, `_`, other
    /// letters, a name without a letter and more than 100 characters are not.
    #[test]
    fn hostnames_follow_the_spec() {
        let add = |hostname: &str| {
            let mut state = State::new(std::time::Duration::ZERO);
            add_server(&mut state, &SeedServer::new(hostname)).map(|_| state.servers.len())
        };
        let long = format!("a{}", "1".repeat(99));
        for ok in [
            "Node-E",
            "node-e",
            "NODE.e(1)",
            "a",
            "node-e.",
            long.as_str(),
        ] {
            assert_eq!(add(ok), Ok(1), "{ok:?} is a hostname the API takes");
        }
        let too_long = format!("{long}1");
        for bad in [
            "",
            " node-e",
            "node-e ",
            "node e",
            "node_e",
            "nöde",
            "1234",
            "10.0.0.1",
            too_long.as_str(),
        ] {
            let e = add(bad).expect_err(bad);
            assert!(e.contains("`hostname` must be"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn bad_seeds_are_reported() {
        let unknown = Seed::parse("servers:\n  - hostname: a\n    hostnmae: b\n").err();
        assert!(unknown.is_some_and(|e| e.contains("hostnmae")));
        let check = |seed: Seed, needle: &str| {
            let e = seed.check().expect_err("invalid seed");
            assert!(e.contains(needle), "{e:?} does not mention {needle:?}");
        };
        check(
            Seed {
                servers: vec![SeedServer::new("a").public(&["nope"])],
                ..Seed::default()
            },
            "not an IP address",
        );
        check(
            Seed {
                servers: vec![SeedServer::new("a").with_location("MARS")],
                ..Seed::default()
            },
            "MARS",
        );
        check(
            Seed {
                ip_blocks: vec![
                    SeedIpBlock::new().with_cidr("198.51.100.0/29"),
                    SeedIpBlock::new().with_cidr("198.51.100.4/30"),
                ],
                ..Seed::default()
            },
            "overlaps",
        );
        check(
            Seed {
                ip_blocks: vec![SeedIpBlock::new().with_tag("cluster", "x")],
                ..Seed::default()
            },
            "not a seeded tag",
        );
        check(
            Seed {
                ip_blocks: vec![SeedIpBlock::new().with_status("assigned")],
                ..Seed::default()
            },
            "needs an assigned resource",
        );
        check(
            Seed {
                servers: vec![
                    SeedServer::new("a").with_id("x1"),
                    SeedServer::new("b").with_id("x1"),
                ],
                ..Seed::default()
            },
            "duplicate",
        );
    }
}
