//! The starting inventory, from Rust or from a YAML or JSON file (`wasm-ccm-sim cloudstack
//! --seed FILE`): zones, projects, VPCs, ACL lists, guest networks, free public IP pools,
//! allocated public IPs and VMs. Entries refer to each other by name or ID; unknown fields are
//! errors. A project left out defaults to the owner of what the entity is attached to (a tier's
//! VPC, a VM's first network, an address's network or VPC).

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use serde::Deserialize;

use std::collections::BTreeSet;

use super::model::{
    AclList, DEFAULT_ALLOW, IpState, LbRule, Network, Nic, Project, PublicIp, RuleState, State, Vm,
    Vpc, Zone,
};
use super::render::now_cs;
use crate::serving::new_uuid;

/// The example account (`seeds/cloudstack.yaml`), also the CLI's default.
pub const EXAMPLE_YAML: &str = include_str!("../../seeds/cloudstack.yaml");
/// Addresses one pool entry (`a-b`) may span at most.
const MAX_RANGE: u32 = 65_536;

/// Everything to start with. Applied in the order zones, projects, VPCs, ACL lists, networks,
/// public IP pools, public IPs, VMs, so later kinds may refer to earlier ones.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Seed {
    /// Zones.
    pub zones: Vec<SeedZone>,
    /// Projects the account is a member of.
    pub projects: Vec<SeedProject>,
    /// VPCs.
    pub vpcs: Vec<SeedVpc>,
    /// Network ACL lists of VPCs (`default_allow` and `default_deny` always exist).
    pub acl_lists: Vec<SeedAclList>,
    /// Isolated networks and VPC tiers.
    pub networks: Vec<SeedNetwork>,
    /// Free public addresses per zone.
    pub public_ip_pools: Vec<SeedIpPool>,
    /// Allocated public addresses (source NAT, or allocated earlier).
    pub public_ips: Vec<SeedPublicIp>,
    /// Virtual machines.
    pub vms: Vec<SeedVm>,
    /// The management server's behaviour (version, page size); unset fields keep theirs.
    pub settings: SeedSettings,
}

/// How the simulated management server behaves, as its version and global settings decide.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SeedSettings {
    /// The CloudStack version, e.g. `4.15.2.0` (default `4.22.0.0`): `listCapabilities`
    /// reports it, and before 4.18 `createLoadBalancerRule` refuses `cidrlist`.
    pub version: Option<String>,
    /// The global setting `default.page.size` (default 500): the default and the largest
    /// `pagesize` a list accepts.
    pub page_size: Option<usize>,
}

/// A zone.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedZone {
    /// The ID; a random UUID when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// The name, unique.
    pub name: String,
}

/// A project.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedProject {
    /// The ID; a random UUID when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// The name, unique.
    pub name: String,
}

/// A VPC.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedVpc {
    /// The ID; a random UUID when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// The name.
    pub name: String,
    /// The zone (name or ID).
    pub zone: String,
    /// The project (name or ID), if any.
    #[serde(default)]
    pub project: Option<String>,
}

/// A network ACL list of a VPC.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedAclList {
    /// The ID; a random UUID when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// The name, unique in the VPC and not a system list's.
    pub name: String,
    /// The VPC (name or ID).
    pub vpc: String,
    /// The description (default: the name).
    #[serde(default)]
    pub description: Option<String>,
}

/// An isolated guest network, or a VPC tier when `vpc` is set.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedNetwork {
    /// The ID; a random UUID when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// The name.
    pub name: String,
    /// The zone (name or ID).
    pub zone: String,
    /// The VPC (name or ID): the network is a tier of it.
    #[serde(default)]
    pub vpc: Option<String>,
    /// A tier's ACL list (name or ID, the VPC's or a system list); default `default_allow`.
    #[serde(default)]
    pub acl: Option<String>,
    /// The project (name or ID); default the VPC's.
    #[serde(default)]
    pub project: Option<String>,
}

/// Free addresses of a zone's public IP range.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedIpPool {
    /// The zone (name or ID).
    pub zone: String,
    /// IPv4 addresses or ranges `first-last`, handed out in this order.
    pub ips: Vec<String>,
}

/// An allocated public IP address.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedPublicIp {
    /// The address (IPv4); taken from the zone's pool when it is there.
    pub ip: String,
    /// The zone (name or ID).
    pub zone: String,
    /// The guest network it is associated with (name or ID).
    #[serde(default)]
    pub network: Option<String>,
    /// The VPC it belongs to (name or ID); default the network's VPC.
    #[serde(default)]
    pub vpc: Option<String>,
    /// Whether it is the network's or VPC's source NAT address (cannot be released).
    #[serde(default)]
    pub source_nat: bool,
    /// The project (name or ID); default the network's or VPC's.
    #[serde(default)]
    pub project: Option<String>,
}

/// A network interface of a VM.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedNic {
    /// The network (name or ID), in the VM's zone.
    pub network: String,
    /// The IPv4 address.
    pub ip: String,
    /// An IPv6 address, if any.
    #[serde(default)]
    pub ip6: Option<String>,
}

/// A virtual machine.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedVm {
    /// The ID; a random UUID when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// The name: CloudStack's host name of the VM, which the guest gets as its hostname (the
    /// Kubernetes node name is it lower-cased). An RFC 1123 label, upper case allowed, and unique
    /// (exactly, not without case) among the VMs on each of its networks; see `check_vm_name`.
    pub name: String,
    /// The display name (default: the name): free text, never checked as a host name.
    #[serde(default)]
    pub display_name: Option<String>,
    /// `Running` (default), `Stopped`, ... (any non-empty string).
    #[serde(default = "default_vm_state")]
    pub state: String,
    /// The service offering's name (default `Medium Instance`).
    #[serde(default = "default_offering")]
    pub service_offering: String,
    /// The zone (name or ID).
    pub zone: String,
    /// The project (name or ID); default the first NIC's network's.
    #[serde(default)]
    pub project: Option<String>,
    /// The hypervisor host, shown as `hostname` to admins only.
    #[serde(default)]
    pub hypervisor_host: Option<String>,
    /// Network interfaces; the first is the default NIC. May be empty.
    #[serde(default)]
    pub nics: Vec<SeedNic>,
    /// A static NAT public address (taken from the zone's pool when it is there).
    #[serde(default)]
    pub public_ip: Option<String>,
}

fn default_vm_state() -> String {
    "Running".into()
}

fn default_offering() -> String {
    "Medium Instance".into()
}

impl Default for SeedVm {
    /// A `Running` `Medium Instance` without name, zone or NICs.
    fn default() -> Self {
        SeedVm {
            id: None,
            name: String::new(),
            display_name: None,
            state: default_vm_state(),
            service_offering: default_offering(),
            zone: String::new(),
            project: None,
            hypervisor_host: None,
            nics: Vec::new(),
            public_ip: None,
        }
    }
}

impl SeedVm {
    /// A `Running` `Medium Instance` in `zone` without NICs.
    pub fn new(name: &str, zone: &str) -> SeedVm {
        SeedVm {
            name: name.into(),
            zone: zone.into(),
            ..SeedVm::default()
        }
    }

    /// Sets the ID.
    pub fn with_id(mut self, id: &str) -> SeedVm {
        self.id = Some(id.into());
        self
    }

    /// Sets the state.
    pub fn with_state(mut self, state: &str) -> SeedVm {
        self.state = state.into();
        self
    }

    /// Puts it in a project.
    pub fn in_project(mut self, project: &str) -> SeedVm {
        self.project = Some(project.into());
        self
    }

    /// Adds a NIC with an IPv4 address.
    pub fn nic(mut self, network: &str, ip: &str) -> SeedVm {
        self.nics.push(SeedNic {
            network: network.into(),
            ip: ip.into(),
            ip6: None,
        });
        self
    }
}

impl SeedNetwork {
    /// An isolated network.
    pub fn isolated(name: &str, zone: &str) -> SeedNetwork {
        SeedNetwork {
            name: name.into(),
            zone: zone.into(),
            ..SeedNetwork::default()
        }
    }

    /// A tier of `vpc` on ACL list `acl` (None: `default_allow`).
    pub fn tier(name: &str, zone: &str, vpc: &str, acl: Option<&str>) -> SeedNetwork {
        SeedNetwork {
            vpc: Some(vpc.into()),
            acl: acl.map(str::to_string),
            ..SeedNetwork::isolated(name, zone)
        }
    }

    /// Puts it in a project.
    pub fn in_project(mut self, project: &str) -> SeedNetwork {
        self.project = Some(project.into());
        self
    }
}

impl Seed {
    /// Parses YAML or JSON seed text.
    pub fn parse(text: &str) -> Result<Seed, String> {
        crate::request_core::parse_seed(text)
    }

    /// The example account of `seeds/cloudstack.yaml`: zone `zone1`; isolated network `k8s-net`
    /// with a source NAT address and VMs `k8s-node-1..3`; VPC `vpc1` with source NAT address,
    /// tier `k8s-tier` on ACL list `k8s-acl` and VM `k8s-vpc-node-1`; free addresses
    /// 203.0.113.10–203.0.113.60.
    pub fn example() -> Seed {
        // The file is part of the crate and checked by a unit test.
        Seed::parse(EXAMPLE_YAML).unwrap_or_else(|e| panic!("seeds/cloudstack.yaml: {e}"))
    }

    /// Reads and checks a seed file; errors name the file and what is wrong.
    pub fn load_file(path: &Path) -> anyhow::Result<Seed> {
        crate::request_core::load_seed_file(path, Seed::parse, Seed::check)
    }

    /// Validates the seed against an empty simulator, without starting one.
    pub fn check(&self) -> Result<(), String> {
        let mut state = State::new(super::CloudstackOptions::default().settings());
        apply(&mut state, self)
    }
}

/// Adds a seed to the state; on error the state may be partly changed, so callers apply to a
/// copy and keep it only on success.
pub(crate) fn apply(state: &mut State, seed: &Seed) -> Result<(), String> {
    if let Some(version) = &seed.settings.version {
        if super::model::parse_version(version).is_none() {
            return Err(format!(
                "settings.version: {version:?} is not a version such as 4.18.0.0"
            ));
        }
        state.settings.version = version.clone();
    }
    if let Some(size) = seed.settings.page_size {
        if size == 0 {
            return Err("settings.page_size: must be at least 1".into());
        }
        state.settings.page_size_limit = size;
    }
    for (i, z) in seed.zones.iter().enumerate() {
        add_zone(state, z).map_err(|e| format!("zones[{i}]: {e}"))?;
    }
    for (i, p) in seed.projects.iter().enumerate() {
        add_project(state, p).map_err(|e| format!("projects[{i}]: {e}"))?;
    }
    for (i, v) in seed.vpcs.iter().enumerate() {
        add_vpc(state, v).map_err(|e| format!("vpcs[{i}]: {e}"))?;
    }
    for (i, a) in seed.acl_lists.iter().enumerate() {
        add_acl_list(state, a).map_err(|e| format!("acl_lists[{i}]: {e}"))?;
    }
    for (i, n) in seed.networks.iter().enumerate() {
        add_network(state, n).map_err(|e| format!("networks[{i}]: {e}"))?;
    }
    for (i, p) in seed.public_ip_pools.iter().enumerate() {
        add_pool(state, &p.zone, &p.ips).map_err(|e| format!("public_ip_pools[{i}]: {e}"))?;
    }
    for (i, ip) in seed.public_ips.iter().enumerate() {
        add_public_ip(state, ip).map_err(|e| format!("public_ips[{i}]: {e}"))?;
    }
    for (i, vm) in seed.vms.iter().enumerate() {
        add_vm(state, vm).map_err(|e| format!("vms[{i}]: {e}"))?;
    }
    Ok(())
}

/// The given ID (checked: non-empty, URL-safe, unused) or a new one.
fn take_id(state: &State, id: Option<&String>) -> Result<String, String> {
    match id {
        None => Ok(new_uuid()),
        Some(id) if id.trim().is_empty() => Err("`id` may not be empty".into()),
        Some(id) if id.contains(['/', '?', '#', '%', '&', '=', '+', ',', ' ']) => Err(format!(
            "`id` {id:?} may not contain '/', '?', '#', '%', '&', '=', '+', ',' or spaces"
        )),
        Some(id) if state.id_taken(id) => Err(format!("duplicate `id` {id}")),
        Some(id) => Ok(id.clone()),
    }
}

/// Whether CloudStack takes `name` for a VM (`deployVirtualMachine name=`, the VM's host name):
/// apache/cloudstack `UserVmManagerImpl.checkNameForRFCCompliance`, which is
/// `NetUtils.verifyDomainNameLabel(name, true)`: 1 to 63 characters, each an ASCII letter (the
/// check lower-cases before matching `[a-z0-9-]*`, so either case), a digit or `-`; not starting
/// or ending with `-`, not starting with a digit. Upper case stays in the name: `Node-E` and
/// `node-e` are two names.
pub(crate) fn valid_vm_name(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !name.starts_with(|c: char| c == '-' || c.is_ascii_digit())
        && !name.ends_with('-')
}

/// The refusal text for a name that [`valid_vm_name`] refuses (CloudStack's own words).
pub(crate) const VM_NAME_RULE: &str = "an RFC 1123 host name label: ASCII letters, digits and \
     '-', 1 to 63 characters, not starting or ending with '-' and not starting with a digit \
     (CloudStack's checkNameForRFCCompliance)";

/// CloudStack refuses a VM whose host name another VM on one of its networks has already
/// (apache/cloudstack `UserVmManagerImpl`: "hostName has to be unique in the network domain",
/// `listDistinctHostNames(networkId).contains(hostName)`, a case-sensitive Java `List.contains`;
/// `vm.distinct.hostname.scope` can only widen it to more networks). So `Node-E` and `node-e`
/// may share a network, two `node-e` may not (they may on two networks).
fn check_vm_name_unique(state: &State, name: &str, networks: &[String]) -> Result<(), String> {
    for network in networks {
        if state
            .vms
            .iter()
            .any(|vm| vm.name == name && vm.on_network(network))
        {
            let shown = state.network(network).map_or(network.as_str(), |n| &n.name);
            return Err(format!(
                "a VM with host name {name:?} already exists on network {shown:?} (CloudStack \
                 keeps host names unique per network; use another name or network)"
            ));
        }
    }
    Ok(())
}

/// A non-blank name.
fn name(what: &str, name: &str) -> Result<(), String> {
    if name.trim().is_empty() {
        Err(format!("{what}: `name` may not be empty"))
    } else {
        Ok(())
    }
}

/// The ID of the one item whose ID or name is `key`.
fn resolve<T>(
    items: &[T],
    what: &str,
    key: &str,
    id: impl Fn(&T) -> &str,
    name: impl Fn(&T) -> &str,
) -> Result<String, String> {
    if let Some(item) = items.iter().find(|x| id(x) == key) {
        return Ok(id(item).to_string());
    }
    let named: Vec<&T> = items.iter().filter(|x| name(x) == key).collect();
    match named.as_slice() {
        [one] => Ok(id(one).to_string()),
        [] => Err(format!("unknown {what} {key:?}")),
        many => Err(format!(
            "{what} name {key:?} is ambiguous ({} match); use the ID",
            many.len()
        )),
    }
}

fn zone_id(state: &State, key: &str) -> Result<String, String> {
    resolve(&state.zones, "zone", key, |z| &z.id, |z| &z.name)
}

fn project_id(state: &State, key: Option<&String>) -> Result<Option<String>, String> {
    key.map(|k| resolve(&state.projects, "project", k, |p| &p.id, |p| &p.name))
        .transpose()
}

fn vpc_id(state: &State, key: &str) -> Result<String, String> {
    resolve(&state.vpcs, "VPC", key, |v| &v.id, |v| &v.name)
}

fn network_id(state: &State, key: &str) -> Result<String, String> {
    resolve(&state.networks, "network", key, |n| &n.id, |n| &n.name)
}

/// An explicit project, else the inherited one; both given must agree.
fn owner(
    explicit: Option<String>,
    inherited: Option<String>,
    from: &str,
) -> Result<Option<String>, String> {
    match (explicit, inherited) {
        (Some(e), Some(i)) if e != i => Err(format!(
            "project {e} differs from the project {i} of its {from}"
        )),
        (Some(p), _) | (None, Some(p)) => Ok(Some(p)),
        (None, None) => Ok(None),
    }
}

/// Registers a zone; returns its ID.
pub(crate) fn add_zone(state: &mut State, seed: &SeedZone) -> Result<String, String> {
    name("zone", &seed.name)?;
    if state
        .zones
        .iter()
        .any(|z| z.name.eq_ignore_ascii_case(&seed.name))
    {
        return Err(format!("duplicate zone name {:?}", seed.name));
    }
    let id = take_id(state, seed.id.as_ref())?;
    state.zones.push(Zone {
        id: id.clone(),
        name: seed.name.clone(),
        public_network_id: new_uuid(),
    });
    Ok(id)
}

/// Registers a project; returns its ID.
pub(crate) fn add_project(state: &mut State, seed: &SeedProject) -> Result<String, String> {
    name("project", &seed.name)?;
    if state
        .projects
        .iter()
        .any(|p| p.name.eq_ignore_ascii_case(&seed.name))
    {
        return Err(format!("duplicate project name {:?}", seed.name));
    }
    let id = take_id(state, seed.id.as_ref())?;
    state.projects.push(Project {
        id: id.clone(),
        name: seed.name.clone(),
    });
    Ok(id)
}

/// Registers a VPC; returns its ID.
pub(crate) fn add_vpc(state: &mut State, seed: &SeedVpc) -> Result<String, String> {
    name("VPC", &seed.name)?;
    let err = |e: String| format!("VPC {:?}: {e}", seed.name);
    let zone_id = zone_id(state, &seed.zone).map_err(err)?;
    let project = project_id(state, seed.project.as_ref()).map_err(err)?;
    let id = take_id(state, seed.id.as_ref()).map_err(err)?;
    state.vpcs.push(Vpc {
        id: id.clone(),
        name: seed.name.clone(),
        zone_id,
        project,
    });
    Ok(id)
}

/// Registers an ACL list of a VPC; returns its ID.
pub(crate) fn add_acl_list(state: &mut State, seed: &SeedAclList) -> Result<String, String> {
    name("ACL list", &seed.name)?;
    let err = |e: String| format!("ACL list {:?}: {e}", seed.name);
    let vpc = vpc_id(state, &seed.vpc).map_err(err)?;
    let clash = state.acl_lists.iter().any(|a| {
        a.name.eq_ignore_ascii_case(&seed.name)
            && (a.is_system() || a.vpc_id.as_ref() == Some(&vpc))
    });
    if clash {
        return Err(err(
            "the name is taken in the VPC or by a system list".into()
        ));
    }
    let id = take_id(state, seed.id.as_ref()).map_err(err)?;
    state.acl_lists.push(AclList {
        id: id.clone(),
        name: seed.name.clone(),
        description: seed
            .description
            .clone()
            .unwrap_or_else(|| seed.name.clone()),
        vpc_id: Some(vpc),
    });
    Ok(id)
}

/// Registers an isolated network or VPC tier; returns its ID.
pub(crate) fn add_network(state: &mut State, seed: &SeedNetwork) -> Result<String, String> {
    name("network", &seed.name)?;
    let err = |e: String| format!("network {:?}: {e}", seed.name);
    let zone_id = zone_id(state, &seed.zone).map_err(err)?;
    let explicit = project_id(state, seed.project.as_ref()).map_err(err)?;
    let (vpc_id, acl_id, project) = match &seed.vpc {
        None => {
            if seed.acl.is_some() {
                return Err(err("`acl` is only for VPC tiers (set `vpc`)".into()));
            }
            (None, None, explicit)
        }
        Some(key) => {
            let vpc_id = vpc_id(state, key).map_err(err)?;
            let Some(vpc) = state.vpc(&vpc_id) else {
                return Err(err(format!("unknown VPC {key:?}")));
            };
            if vpc.zone_id != zone_id {
                return Err(err(format!("VPC {:?} is in another zone", vpc.name)));
            }
            let acl_key = seed.acl.as_deref().unwrap_or(DEFAULT_ALLOW);
            let usable: Vec<&AclList> = state
                .acl_lists
                .iter()
                .filter(|a| a.is_system() || a.vpc_id.as_deref() == Some(vpc_id.as_str()))
                .collect();
            let acl = resolve(
                &usable,
                "ACL list of the VPC",
                acl_key,
                |a| &a.id,
                |a| &a.name,
            )
            .map_err(err)?;
            let project = owner(explicit, vpc.project.clone(), "VPC").map_err(err)?;
            (Some(vpc_id), Some(acl), project)
        }
    };
    let id = take_id(state, seed.id.as_ref()).map_err(err)?;
    state.networks.push(Network {
        id: id.clone(),
        name: seed.name.clone(),
        zone_id,
        vpc_id,
        acl_id,
        project,
    });
    Ok(id)
}

/// The addresses of a pool entry: one IPv4 address or a range `first-last`.
fn pool_entry(entry: &str) -> Result<Vec<Ipv4Addr>, String> {
    let parse = |s: &str| {
        s.trim()
            .parse::<Ipv4Addr>()
            .map_err(|_| format!("{s:?} is not an IPv4 address"))
    };
    match entry.split_once('-') {
        None => Ok(vec![parse(entry)?]),
        Some((first, last)) => {
            let (first, last) = (u32::from(parse(first)?), u32::from(parse(last)?));
            if first > last || last - first >= MAX_RANGE {
                return Err(format!(
                    "range {entry:?} must run upwards and span at most {MAX_RANGE} addresses"
                ));
            }
            Ok((first..=last).map(Ipv4Addr::from).collect())
        }
    }
}

/// Adds free addresses to a zone's pool; returns their IDs.
pub(crate) fn add_pool(
    state: &mut State,
    zone: &str,
    entries: &[String],
) -> Result<Vec<String>, String> {
    let zone_id = zone_id(state, zone)?;
    let mut ids = Vec::new();
    for entry in entries {
        for address in pool_entry(entry)? {
            let address = address.to_string();
            if state.ips.iter().any(|ip| ip.address == address) {
                return Err(format!("duplicate public IP address {address}"));
            }
            let id = new_uuid();
            state.ips.push(PublicIp {
                id: id.clone(),
                address,
                zone_id: zone_id.clone(),
                state: IpState::Free,
                allocated: None,
                network_id: None,
                vpc_id: None,
                source_nat: false,
                static_nat_vm: None,
                project: None,
            });
            ids.push(id);
        }
    }
    Ok(ids)
}

/// Allocates an address (from the pool when it is there); returns its index in `state.ips`.
fn allocate(state: &mut State, address: &str, zone_id: &str) -> Result<usize, String> {
    address
        .parse::<Ipv4Addr>()
        .map_err(|_| format!("{address:?} is not an IPv4 address"))?;
    match state.ips.iter().position(|ip| ip.address == address) {
        Some(i) if state.ips[i].zone_id != zone_id => {
            Err(format!("{address} belongs to another zone"))
        }
        Some(i) if state.ips[i].state != IpState::Free => {
            Err(format!("{address} is already allocated"))
        }
        Some(i) => Ok(i),
        None => {
            state.ips.push(PublicIp {
                id: new_uuid(),
                address: address.to_string(),
                zone_id: zone_id.to_string(),
                state: IpState::Free,
                allocated: None,
                network_id: None,
                vpc_id: None,
                source_nat: false,
                static_nat_vm: None,
                project: None,
            });
            Ok(state.ips.len() - 1)
        }
    }
}

/// Registers an allocated public address; returns its ID.
pub(crate) fn add_public_ip(state: &mut State, seed: &SeedPublicIp) -> Result<String, String> {
    let err = |e: String| format!("public IP {}: {e}", seed.ip);
    let zone_id = zone_id(state, &seed.zone).map_err(err)?;
    let network = seed
        .network
        .as_deref()
        .map(|n| network_id(state, n))
        .transpose()
        .map_err(err)?
        .and_then(|n| state.network(&n).cloned());
    let explicit_vpc = seed
        .vpc
        .as_deref()
        .map(|v| vpc_id(state, v))
        .transpose()
        .map_err(err)?;
    let vpc = match (
        explicit_vpc,
        network.as_ref().and_then(|n| n.vpc_id.clone()),
    ) {
        (Some(v), Some(n)) if v != n => return Err(err("the network is not in that VPC".into())),
        (Some(v), _) | (None, Some(v)) => Some(v),
        (None, None) => None,
    };
    let inherited = match (&network, &vpc) {
        (Some(n), _) => n.project.clone(),
        (None, Some(v)) => state.vpc(v).and_then(|v| v.project.clone()),
        (None, None) => None,
    };
    let explicit = project_id(state, seed.project.as_ref()).map_err(err)?;
    let project = owner(explicit, inherited, "network or VPC").map_err(err)?;
    if network.as_ref().is_some_and(|n| n.zone_id != zone_id) {
        return Err(err("the network is in another zone".into()));
    }
    if seed.source_nat {
        if network.is_none() && vpc.is_none() {
            return Err(err("a source NAT address needs a network or VPC".into()));
        }
        let taken = state.ips.iter().any(|ip| {
            ip.source_nat
                && match &vpc {
                    Some(v) => ip.vpc_id.as_ref() == Some(v),
                    None => ip.network_id == network.as_ref().map(|n| n.id.clone()),
                }
        });
        if taken {
            return Err(err(
                "the network or VPC already has a source NAT address".into()
            ));
        }
    }
    let index = allocate(state, &seed.ip, &zone_id).map_err(err)?;
    let ip = &mut state.ips[index];
    ip.state = IpState::Allocated;
    ip.allocated = Some(now_cs());
    // A VPC's source NAT address serves the whole VPC, not a tier.
    ip.network_id = network.map(|n| n.id);
    ip.vpc_id = vpc;
    ip.source_nat = seed.source_nat;
    ip.project = project;
    Ok(ip.id.clone())
}

/// Registers a VM (and its static NAT address); returns its ID.
pub(crate) fn add_vm(state: &mut State, seed: &SeedVm) -> Result<String, String> {
    let err = |e: String| format!("VM {:?}: {e}", seed.name);
    if !valid_vm_name(&seed.name) {
        return Err(err(format!("`name` must be {VM_NAME_RULE}")));
    }
    if seed.state.trim().is_empty() {
        return Err(err("`state` may not be empty".into()));
    }
    if seed.service_offering.trim().is_empty() {
        return Err(err("`service_offering` may not be empty".into()));
    }
    let zone_id = zone_id(state, &seed.zone).map_err(err)?;
    let mut nics = Vec::new();
    let mut nic_projects = Vec::new();
    for nic in &seed.nics {
        let network_id = network_id(state, &nic.network).map_err(err)?;
        let Some(network) = state.network(&network_id) else {
            return Err(err(format!("unknown network {:?}", nic.network)));
        };
        if network.zone_id != zone_id {
            return Err(err(format!(
                "network {:?} is in another zone",
                network.name
            )));
        }
        nic_projects.push(network.project.clone());
        nic.ip
            .parse::<Ipv4Addr>()
            .map_err(|_| err(format!("NIC address {:?} is not an IPv4 address", nic.ip)))?;
        if let Some(ip6) = &nic.ip6
            && !matches!(ip6.parse::<IpAddr>(), Ok(IpAddr::V6(_)))
        {
            return Err(err(format!("NIC address {ip6:?} is not an IPv6 address")));
        }
        let seq = state.next_seq();
        nics.push(Nic {
            id: new_uuid(),
            network_id,
            ip: nic.ip.clone(),
            ip6: nic.ip6.clone(),
            seq,
        });
    }
    let networks: Vec<String> = nics.iter().map(|n| n.network_id.clone()).collect();
    check_vm_name_unique(state, &seed.name, &networks).map_err(err)?;
    let explicit = project_id(state, seed.project.as_ref()).map_err(err)?;
    let project = owner(
        explicit,
        nic_projects.first().cloned().flatten(),
        "first network",
    )
    .map_err(err)?;
    if nic_projects.iter().any(|p| *p != project) {
        return Err(err("its networks belong to different owners".into()));
    }
    let id = take_id(state, seed.id.as_ref()).map_err(err)?;
    if let Some(address) = &seed.public_ip {
        let Some(first) = nics.first() else {
            return Err(err("a static NAT address needs a NIC".into()));
        };
        let network = state.network(&first.network_id).cloned();
        let index = allocate(state, address, &zone_id).map_err(err)?;
        let ip = &mut state.ips[index];
        ip.state = IpState::Allocated;
        ip.allocated = Some(now_cs());
        ip.network_id = network.as_ref().map(|n| n.id.clone());
        ip.vpc_id = network.and_then(|n| n.vpc_id);
        ip.static_nat_vm = Some(id.clone());
        ip.project = project.clone();
    }
    state.offering_id(&seed.service_offering);
    state.vms.push(Vm {
        id: id.clone(),
        name: seed.name.clone(),
        display_name: seed
            .display_name
            .clone()
            .unwrap_or_else(|| seed.name.clone()),
        state: seed.state.clone(),
        offering: seed.service_offering.clone(),
        zone_id,
        project,
        host: seed.hypervisor_host.clone(),
        nics,
        created: now_cs(),
    });
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State {
        State::new(super::super::CloudstackOptions::default().settings())
    }

    #[test]
    fn the_example_applies() {
        let seed = Seed::example();
        seed.check().expect("example seed");
        let mut s = state();
        apply(&mut s, &seed).expect("apply");
        assert_eq!(s.vms.len(), 4);
        assert_eq!(
            s.ips.iter().filter(|i| i.state == IpState::Free).count(),
            51
        );
        let tier = s
            .networks
            .iter()
            .find(|n| n.name == "k8s-tier")
            .expect("tier");
        assert_eq!(
            s.acl_list(tier.acl_id.as_deref().unwrap_or_default())
                .map(|a| a.name.as_str()),
            Some("k8s-acl")
        );
    }

    #[test]
    fn pool_entries() {
        assert_eq!(pool_entry("192.0.2.1").map(|v| v.len()), Ok(1));
        assert_eq!(pool_entry("192.0.2.1-192.0.2.3").map(|v| v.len()), Ok(3));
        assert!(pool_entry("192.0.2.3-192.0.2.1").is_err());
        assert!(pool_entry("x").is_err());
    }

    #[test]
    fn errors_name_the_entry() {
        let seed = Seed::parse("vms: [{name: a, zone: nowhere}]").expect("parse");
        let e = seed.check().expect_err("unknown zone");
        assert!(e.contains("vms[0]") && e.contains("nowhere"), "{e}");
        assert!(Seed::parse("zones: [{name: z, color: red}]").is_err());
        let seed = Seed::parse(
            "zones: [{name: z}]\nprojects: [{name: p}]\nnetworks: [{name: n, zone: z, project: p}]\n\
             vms: [{name: a, zone: z, project: p, nics: [{network: n, ip: 10.0.0.1}]},\n\
                   {name: b, zone: z, nics: [{network: n, ip: 10.0.0.2}]}]",
        )
        .expect("parse");
        let mut s = state();
        apply(&mut s, &seed).expect("projects inherit");
        assert!(s.vms.iter().all(|v| v.project.is_some()));
    }

    /// VM names as CloudStack checks them (`checkNameForRFCCompliance`, host names unique per
    /// network, case-sensitively): `Node-E` beside `node-e` on one network is taken (review
    /// 2026-11-28 §3), a second `node-e` there is not, on another network it is.
    #[test]
    fn vm_names_follow_cloudstack() {
        let mut s = state();
        apply(&mut s, &Seed::example()).expect("example");
        let vm = |name: &str, network: &str, ip: &str| SeedVm::new(name, "zone1").nic(network, ip);
        let long = format!("a{}", "1".repeat(62));
        for (i, ok) in ["node-e", "Node-E", "NODE-E", "n", long.as_str()]
            .into_iter()
            .enumerate()
        {
            add_vm(&mut s, &vm(ok, "k8s-net", &format!("10.1.1.{}", 100 + i)))
                .unwrap_or_else(|e| panic!("{ok:?} is a name CloudStack takes: {e}"));
        }
        let e = add_vm(&mut s, &vm("node-e", "k8s-net", "10.1.1.120")).expect_err("twice");
        assert!(e.contains("already exists on network \"k8s-net\""), "{e}");
        add_vm(&mut s, &vm("node-e", "k8s-tier", "10.1.2.120")).expect("another network");
        let too_long = format!("{long}1");
        for bad in [
            "",
            " node-f",
            "node f",
            "node_f",
            "node.f",
            "-node",
            "node-",
            "1node",
            "nöde",
            too_long.as_str(),
        ] {
            let e = add_vm(&mut s, &vm(bad, "k8s-net", "10.1.1.130")).expect_err(bad);
            assert!(e.contains("`name` must be"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn names_resolve_unless_ambiguous() {
        let seed = Seed::parse(
            "zones: [{name: z}]\nnetworks: [{name: n, zone: z}, {name: n, zone: z}]\n\
             vms: [{name: a, zone: z, nics: [{network: n, ip: 10.0.0.1}]}]",
        )
        .expect("parse");
        let e = seed.check().expect_err("ambiguous");
        assert!(e.contains("ambiguous"), "{e}");
    }
}

/// An active LB rule on the allocated address `ip` (an operator's, or another tool's), as
/// `add_load_balancer_rule` seeds it.
pub(crate) fn add_lb_rule(state: &mut State, rule: &SeedLbRule) -> Result<String, String> {
    let err = |e: String| format!("LB rule {}: {e}", rule.name);
    let network_id = network_id(state, &rule.network).map_err(err)?;
    let ip = state
        .ips
        .iter()
        .find(|i| i.address == rule.ip)
        .cloned()
        .ok_or_else(|| err(format!("no public IP {}", rule.ip)))?;
    let seq = state.next_seq();
    let id = new_uuid();
    state.lb_rules.push(LbRule {
        id: id.clone(),
        seq,
        name: rule.name.clone(),
        description: None,
        algorithm: "roundrobin".into(),
        protocol: rule.protocol.clone(),
        ip_id: ip.id.clone(),
        public_port: rule.public_port,
        private_port: rule.private_port,
        network_id,
        cidrs: vec!["0.0.0.0/0".into()],
        state: RuleState::Active,
        project: ip.project.clone(),
        zone_id: ip.zone_id.clone(),
        members: BTreeSet::new(),
    });
    Ok(id)
}

/// An LB rule made outside the driver under test.
#[derive(Clone, Debug, Default)]
pub struct SeedLbRule {
    /// The rule's name.
    pub name: String,
    /// The allocated public address it is on.
    pub ip: String,
    /// The network (name or ID).
    pub network: String,
    /// `tcp`, `udp` or `tcp-proxy`.
    pub protocol: String,
    /// The port on the public IP.
    pub public_port: u16,
    /// The port on the members.
    pub private_port: u16,
}
