//! The simulator's state: one account's zones, projects, VPCs, ACL lists, guest networks, VMs,
//! public IP addresses, load-balancer rules, firewall rules and ACL items in creation order, the
//! asynchronous jobs, and the settings tests change at run time.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::job::Job;
use super::options::{CidrSeparator, CloudstackOptions};
use crate::serving::new_uuid;

pub(crate) use super::records::{IpState, LbRule, RuleState, Tag};

/// The management server version reported by `listCapabilities` and
/// `listManagementServersMetrics` unless changed.
pub(crate) const DEFAULT_VERSION: &str = "4.22.0.0";
/// `4.18.1.0` → `(4, 18)`; None for text that is not a version.
pub(crate) fn parse_version(text: &str) -> Option<(u32, u32)> {
    let mut parts = text.trim().split('.');
    let major = parts.next()?.parse().ok()?;
    let minor: String = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some((major, minor.parse().ok()?))
}

/// Names of the system ACL lists every zone has; they cannot be changed.
pub(crate) const DEFAULT_ALLOW: &str = "default_allow";
/// See [`DEFAULT_ALLOW`].
pub(crate) const DEFAULT_DENY: &str = "default_deny";
/// Services of an isolated guest network (its virtual router has a firewall).
pub(crate) const ISOLATED_SERVICES: &[&str] = &[
    "Dhcp",
    "Dns",
    "Firewall",
    "Lb",
    "SourceNat",
    "StaticNat",
    "PortForwarding",
    "UserData",
];
/// Services of a VPC tier: network ACLs instead of a firewall.
pub(crate) const TIER_SERVICES: &[&str] = &[
    "Dhcp",
    "Dns",
    "Lb",
    "NetworkACL",
    "SourceNat",
    "StaticNat",
    "PortForwarding",
    "UserData",
];

/// What a UUID names; a UUID parameter only resolves to its command's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Zone,
    Project,
    Vpc,
    AclList,
    Network,
    Vm,
    PublicIp,
    LbRule,
    FirewallRule,
    AclItem,
}

/// A zone with its (unlisted) public network, which public IPs report as `networkid`.
#[derive(Clone, Debug)]
pub(crate) struct Zone {
    pub id: String,
    pub name: String,
    pub public_network_id: String,
}

/// A project the account is a member of.
#[derive(Clone, Debug)]
pub(crate) struct Project {
    pub id: String,
    pub name: String,
}

/// A VPC.
#[derive(Clone, Debug)]
pub(crate) struct Vpc {
    pub id: String,
    pub name: String,
    pub zone_id: String,
    pub project: Option<String>,
}

/// A network ACL list: a VPC's, or one of the two system lists (no VPC).
#[derive(Clone, Debug)]
pub(crate) struct AclList {
    pub id: String,
    pub name: String,
    pub description: String,
    pub vpc_id: Option<String>,
}

impl AclList {
    /// Whether it is `default_allow` or `default_deny`.
    pub(crate) fn is_system(&self) -> bool {
        self.vpc_id.is_none()
    }
}

/// A guest network: isolated, or a VPC tier (with a VPC and an ACL list).
#[derive(Clone, Debug)]
pub(crate) struct Network {
    pub id: String,
    pub name: String,
    pub zone_id: String,
    pub vpc_id: Option<String>,
    pub acl_id: Option<String>,
    pub project: Option<String>,
}

impl Network {
    /// The services it offers.
    pub(crate) fn services(&self) -> &'static [&'static str] {
        if self.vpc_id.is_some() {
            TIER_SERVICES
        } else {
            ISOLATED_SERVICES
        }
    }

    /// Whether it offers `service` (e.g. `Firewall`).
    pub(crate) fn has_service(&self, service: &str) -> bool {
        self.services()
            .iter()
            .any(|s| s.eq_ignore_ascii_case(service))
    }
}

/// A VM's network interface.
#[derive(Clone, Debug)]
pub(crate) struct Nic {
    pub id: String,
    pub network_id: String,
    pub ip: String,
    pub ip6: Option<String>,
    /// Makes the MAC address.
    pub seq: u64,
}

/// A virtual machine (seeded; the API only reads VMs).
#[derive(Clone, Debug)]
pub(crate) struct Vm {
    pub id: String,
    pub name: String,
    pub display_name: String,
    pub state: String,
    pub offering: String,
    pub zone_id: String,
    pub project: Option<String>,
    /// The hypervisor host, shown as `hostname` to admins only.
    pub host: Option<String>,
    pub nics: Vec<Nic>,
    pub created: String,
}

impl Vm {
    /// Whether it has a NIC on `network`.
    pub(crate) fn on_network(&self, network: &str) -> bool {
        self.nics.iter().any(|n| n.network_id == network)
    }
}

/// A public IP address of a zone: free in the pool, or allocated to the account (or a
/// project) for an isolated network or a VPC.
#[derive(Clone, Debug)]
pub(crate) struct PublicIp {
    pub id: String,
    pub address: String,
    pub zone_id: String,
    pub state: IpState,
    /// When the allocation completed (CloudStack time format).
    pub allocated: Option<String>,
    /// The guest network it is associated with (`associatednetworkid`): the isolated network,
    /// or the VPC tier its first load-balancer rule is on.
    pub network_id: Option<String>,
    pub vpc_id: Option<String>,
    pub source_nat: bool,
    /// The VM it is the static NAT address of.
    pub static_nat_vm: Option<String>,
    pub project: Option<String>,
}

impl PublicIp {
    /// Back to the free pool.
    pub(crate) fn release(&mut self) {
        self.state = IpState::Free;
        self.allocated = None;
        self.network_id = None;
        self.vpc_id = None;
        self.source_nat = false;
        self.static_nat_vm = None;
        self.project = None;
    }
}

/// A firewall rule on a public IP of an isolated network.
#[derive(Clone, Debug)]
pub(crate) struct FirewallRule {
    pub id: String,
    pub seq: u64,
    pub ip_id: String,
    /// `tcp`, `udp`, `icmp` or `all`, lowercase.
    pub protocol: String,
    pub start_port: Option<u16>,
    pub end_port: Option<u16>,
    pub cidrs: Vec<String>,
    pub state: RuleState,
    pub project: Option<String>,
}

/// An item of a network ACL list.
#[derive(Clone, Debug)]
pub(crate) struct AclItem {
    pub id: String,
    pub acl_id: String,
    /// `tcp`, `udp`, `icmp`, `all` or a protocol number, lowercase.
    pub protocol: String,
    pub start_port: Option<u16>,
    pub end_port: Option<u16>,
    pub cidrs: Vec<String>,
    /// `Allow` or `Deny`.
    pub action: String,
    /// `Ingress` or `Egress`.
    pub traffic_type: String,
    pub number: u32,
    pub state: RuleState,
    pub project: Option<String>,
}

/// Who the API key belongs to.
#[derive(Clone, Debug)]
pub(crate) struct Account {
    pub account_id: String,
    pub user_id: String,
    pub domain_id: String,
    /// The management server's ID.
    pub server_id: String,
}

/// What tests change at run time.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// Whether the account is a root admin: admin-only APIs and fields.
    pub admin: bool,
    /// Polls of `queryAsyncJobResult` until a new job completes (0: at once).
    pub job_polls: u32,
    /// When set, new jobs complete this long after submission instead (polls do not count).
    pub job_duration: Option<Duration>,
    /// How load-balancer rules render `cidrlist`.
    pub cidr_separator: CidrSeparator,
    /// `default.page.size`: default and maximum `pagesize`.
    pub page_size_limit: usize,
    /// The management server version.
    pub version: String,
    /// Command (lowercase) → how many of its next jobs fail.
    pub failing_jobs: BTreeMap<String, usize>,
}

impl Settings {
    /// Whether the simulated management server is at least `major.minor` (an unparsable
    /// version counts as the newest).
    pub(crate) fn at_least(&self, major: u32, minor: u32) -> bool {
        parse_version(&self.version).is_none_or(|v| v >= (major, minor))
    }
}

/// Everything the simulator holds; lists are in creation order.
#[derive(Clone, Debug)]
pub(crate) struct State {
    pub zones: Vec<Zone>,
    pub projects: Vec<Project>,
    pub vpcs: Vec<Vpc>,
    pub acl_lists: Vec<AclList>,
    pub networks: Vec<Network>,
    pub vms: Vec<Vm>,
    pub ips: Vec<PublicIp>,
    pub lb_rules: Vec<LbRule>,
    pub firewall_rules: Vec<FirewallRule>,
    pub acl_items: Vec<AclItem>,
    /// Resource tags, in creation order.
    pub tags: Vec<Tag>,
    pub jobs: Vec<Job>,
    /// IDs of removed entities: CloudStack resolves them (lists answer empty) where an unknown
    /// UUID is a parameter error.
    pub removed: HashMap<String, Kind>,
    /// Service offering name → ID.
    pub offerings: BTreeMap<String, String>,
    pub account: Account,
    pub settings: Settings,
    seq: u64,
}

/// Which entities a list shows: the account's own (no project), one project's, every
/// project's, or everything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    Own,
    Project(String),
    AllProjects,
    Any,
}

impl Scope {
    /// Whether an entity of `project` is in scope.
    pub(crate) fn admits(&self, project: Option<&str>) -> bool {
        match self {
            Scope::Own => project.is_none(),
            Scope::Project(p) => project == Some(p.as_str()),
            Scope::AllProjects => project.is_some(),
            Scope::Any => true,
        }
    }
}

impl State {
    /// An empty account with the two system ACL lists and their items.
    pub(crate) fn new(settings: Settings) -> State {
        let mut state = State {
            zones: Vec::new(),
            projects: Vec::new(),
            vpcs: Vec::new(),
            acl_lists: Vec::new(),
            networks: Vec::new(),
            vms: Vec::new(),
            ips: Vec::new(),
            lb_rules: Vec::new(),
            firewall_rules: Vec::new(),
            acl_items: Vec::new(),
            tags: Vec::new(),
            jobs: Vec::new(),
            removed: HashMap::new(),
            offerings: BTreeMap::new(),
            account: Account {
                account_id: new_uuid(),
                user_id: new_uuid(),
                domain_id: new_uuid(),
                server_id: new_uuid(),
            },
            settings,
            seq: 0,
        };
        for (name, description, action) in [
            (DEFAULT_ALLOW, "Default Network ACL Allow All", "Allow"),
            (DEFAULT_DENY, "Default Network ACL Deny All", "Deny"),
        ] {
            let acl_id = new_uuid();
            state.acl_lists.push(AclList {
                id: acl_id.clone(),
                name: name.into(),
                description: description.into(),
                vpc_id: None,
            });
            for (number, traffic) in [(1, "Ingress"), (2, "Egress")] {
                state.acl_items.push(AclItem {
                    id: new_uuid(),
                    acl_id: acl_id.clone(),
                    protocol: "all".into(),
                    start_port: None,
                    end_port: None,
                    cidrs: vec!["0.0.0.0/0".into()],
                    action: action.into(),
                    traffic_type: traffic.into(),
                    number,
                    state: RuleState::Active,
                    project: None,
                });
            }
        }
        state
    }

    /// The next internal id (rule numbers in messages, MAC addresses).
    pub(crate) fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// The name the API key's user goes by.
    pub(crate) fn user_name(&self) -> &'static str {
        if self.settings.admin {
            "admin"
        } else {
            "sim-user"
        }
    }

    /// The ID of a service offering, made up the first time the name is seen.
    pub(crate) fn offering_id(&mut self, name: &str) -> String {
        self.offerings
            .entry(name.to_string())
            .or_insert_with(new_uuid)
            .clone()
    }

    pub(crate) fn zone(&self, id: &str) -> Option<&Zone> {
        self.zones.iter().find(|z| z.id == id)
    }

    pub(crate) fn project(&self, id: &str) -> Option<&Project> {
        self.projects.iter().find(|p| p.id == id)
    }

    pub(crate) fn vpc(&self, id: &str) -> Option<&Vpc> {
        self.vpcs.iter().find(|v| v.id == id)
    }

    pub(crate) fn acl_list(&self, id: &str) -> Option<&AclList> {
        self.acl_lists.iter().find(|a| a.id == id)
    }

    pub(crate) fn network(&self, id: &str) -> Option<&Network> {
        self.networks.iter().find(|n| n.id == id)
    }

    pub(crate) fn vm(&self, id: &str) -> Option<&Vm> {
        self.vms.iter().find(|v| v.id == id)
    }

    pub(crate) fn ip(&self, id: &str) -> Option<&PublicIp> {
        self.ips.iter().find(|i| i.id == id)
    }

    pub(crate) fn ip_mut(&mut self, id: &str) -> Option<&mut PublicIp> {
        self.ips.iter_mut().find(|i| i.id == id)
    }

    pub(crate) fn lb_rule(&self, id: &str) -> Option<&LbRule> {
        self.lb_rules.iter().find(|r| r.id == id)
    }

    pub(crate) fn lb_rule_mut(&mut self, id: &str) -> Option<&mut LbRule> {
        self.lb_rules.iter_mut().find(|r| r.id == id)
    }

    pub(crate) fn firewall_rule(&self, id: &str) -> Option<&FirewallRule> {
        self.firewall_rules.iter().find(|r| r.id == id)
    }

    pub(crate) fn firewall_rule_mut(&mut self, id: &str) -> Option<&mut FirewallRule> {
        self.firewall_rules.iter_mut().find(|r| r.id == id)
    }

    pub(crate) fn acl_item(&self, id: &str) -> Option<&AclItem> {
        self.acl_items.iter().find(|a| a.id == id)
    }

    pub(crate) fn acl_item_mut(&mut self, id: &str) -> Option<&mut AclItem> {
        self.acl_items.iter_mut().find(|a| a.id == id)
    }

    /// Whether a live entity of `kind` has this ID.
    pub(crate) fn exists(&self, kind: Kind, id: &str) -> bool {
        match kind {
            Kind::Zone => self.zone(id).is_some(),
            Kind::Project => self.project(id).is_some(),
            Kind::Vpc => self.vpc(id).is_some(),
            Kind::AclList => self.acl_list(id).is_some(),
            Kind::Network => self.network(id).is_some(),
            Kind::Vm => self.vm(id).is_some(),
            Kind::PublicIp => self.ip(id).is_some(),
            Kind::LbRule => self.lb_rule(id).is_some(),
            Kind::FirewallRule => self.firewall_rule(id).is_some(),
            Kind::AclItem => self.acl_item(id).is_some(),
        }
    }

    /// Whether any entity (live or removed) has this ID; seeds must not reuse IDs.
    pub(crate) fn id_taken(&self, id: &str) -> bool {
        self.removed.contains_key(id)
            || [
                Kind::Zone,
                Kind::Project,
                Kind::Vpc,
                Kind::AclList,
                Kind::Network,
                Kind::Vm,
                Kind::PublicIp,
                Kind::LbRule,
                Kind::FirewallRule,
                Kind::AclItem,
            ]
            .into_iter()
            .any(|k| self.exists(k, id))
            || self.zones.iter().any(|z| z.public_network_id == id)
    }

    /// Removes a load-balancer rule, remembering its ID. A VPC address whose last rule this
    /// was is no longer tied to a tier (unless it is the source NAT or a static NAT address).
    pub(crate) fn remove_lb_rule(&mut self, id: &str) {
        let Some(index) = self.lb_rules.iter().position(|r| r.id == id) else {
            return;
        };
        let rule = self.lb_rules.remove(index);
        self.drop_tags("LoadBalancer", &rule.id);
        self.removed.insert(rule.id, Kind::LbRule);
        let still_used = self.lb_rules.iter().any(|r| r.ip_id == rule.ip_id);
        if let Some(ip) = self.ip_mut(&rule.ip_id)
            && ip.vpc_id.is_some()
            && !ip.source_nat
            && ip.static_nat_vm.is_none()
            && !still_used
        {
            ip.network_id = None;
        }
    }

    /// Removes a firewall rule, remembering its ID.
    pub(crate) fn remove_firewall_rule(&mut self, id: &str) {
        self.firewall_rules.retain(|r| r.id != id);
        self.drop_tags("FirewallRule", id);
        self.removed.insert(id.to_string(), Kind::FirewallRule);
    }

    /// Removes an ACL item, remembering its ID.
    pub(crate) fn remove_acl_item(&mut self, id: &str) {
        self.acl_items.retain(|a| a.id != id);
        self.drop_tags("NetworkACL", id);
        self.removed.insert(id.to_string(), Kind::AclItem);
    }

    /// Expunges a VM: gone from load balancers, its static NAT address stays allocated.
    /// Returns whether it existed.
    pub(crate) fn remove_vm(&mut self, id: &str) -> bool {
        let before = self.vms.len();
        self.vms.retain(|v| v.id != id);
        if self.vms.len() == before {
            return false;
        }
        for rule in &mut self.lb_rules {
            rule.members.remove(id);
        }
        for ip in &mut self.ips {
            if ip.static_nat_vm.as_deref() == Some(id) {
                ip.static_nat_vm = None;
            }
        }
        self.drop_tags("UserVm", id);
        self.removed.insert(id.to_string(), Kind::Vm);
        true
    }

    /// Removes the tags of an entity that is removed or, for a public IP, released: CloudStack
    /// does so in each delete path (e.g. `NetworkServiceImpl.releaseIpAddressInternal` calls
    /// `_resourceTagDao.removeByIdAndType(ipAddressId, ResourceObjectType.PublicIpAddress)` once
    /// the address is disassociated).
    pub(crate) fn drop_tags(&mut self, resource_type: &str, resource_id: &str) {
        self.tags.retain(|t| !t.on(resource_type, resource_id));
    }

    /// The tags of an entity, in creation order.
    pub(crate) fn tags_of(&self, resource_type: &str, resource_id: &str) -> Vec<&Tag> {
        self.tags
            .iter()
            .filter(|t| t.on(resource_type, resource_id))
            .collect()
    }

    /// The project an ACL list's rules belong to: its VPC's.
    pub(crate) fn acl_project(&self, acl_id: &str) -> Option<String> {
        self.acl_list(acl_id)
            .and_then(|a| a.vpc_id.as_deref())
            .and_then(|v| self.vpc(v))
            .and_then(|v| v.project.clone())
    }
}

impl CloudstackOptions {
    /// The run-time settings these options start with.
    pub(crate) fn settings(&self) -> Settings {
        Settings {
            admin: self.admin,
            job_polls: self.job_polls,
            job_duration: self.job_duration,
            cidr_separator: self.cidr_separator,
            page_size_limit: self.page_size_limit.max(1),
            version: DEFAULT_VERSION.into(),
            failing_jobs: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes() {
        assert!(Scope::Own.admits(None));
        assert!(!Scope::Own.admits(Some("p")));
        assert!(Scope::Project("p".into()).admits(Some("p")));
        assert!(!Scope::Project("p".into()).admits(Some("q")));
        assert!(!Scope::Project("p".into()).admits(None));
        assert!(Scope::AllProjects.admits(Some("q")));
        assert!(!Scope::AllProjects.admits(None));
        assert!(Scope::Any.admits(None) && Scope::Any.admits(Some("p")));
    }

    #[test]
    fn versions() {
        assert_eq!(parse_version("4.15.2.0"), Some((4, 15)));
        assert_eq!(parse_version("4.18"), Some((4, 18)));
        assert_eq!(parse_version("four"), None);
    }
}
