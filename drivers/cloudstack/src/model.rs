//! The CloudStack objects the driver reads, as the API renders them. Every field has a default:
//! CloudStack omits empty fields, and renders some numbers as strings (LB rule ports, ACL
//! ports) and others as numbers (firewall ports), so ports accept both.

use serde::{Deserialize, Deserializer};

/// A VM (`virtualmachine`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Vm {
    /// The VM's UUID, the part after `external-cloudstack://` in a provider ID.
    pub id: String,
    /// The VM's name; a node without a provider ID is looked up by it (or by its first label).
    pub name: String,
    /// The hypervisor host (shown to admins only); never used as an address.
    pub hostname: String,
    /// `Running`, `Stopped`, `Expunging`, …; `Stopped`, `Shutdown` and `Destroyed` count as shut
    /// down.
    pub state: String,
    /// The service offering, e.g. `m1.large`; without non-alphanumerics it is the node's instance
    /// type.
    pub serviceofferingname: String,
    /// The zone's name: the node's zone, and its region unless `region` is configured.
    pub zonename: String,
    /// Static NAT address.
    pub publicip: String,
    /// The VM's NICs; the default one gives the node's internal addresses.
    pub nic: Vec<Nic>,
}

impl Vm {
    /// The default NIC, else the first; `None` for a VM without NICs.
    pub fn primary_nic(&self) -> Option<&Nic> {
        self.nic
            .iter()
            .find(|n| n.isdefault)
            .or_else(|| self.nic.first())
    }
}

/// A VM's NIC.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Nic {
    /// The guest network the NIC is on (the network of new public IPs and openings).
    pub networkid: String,
    /// The NIC's IPv4 address: the node's `InternalIP`, and an LB rule member.
    pub ipaddress: String,
    /// The NIC's IPv6 address, empty when none: also an `InternalIP`.
    pub ip6address: String,
    /// Whether this is the VM's default NIC.
    pub isdefault: bool,
}

/// A load-balancer rule (`loadbalancerrule`, or `loadbalancer` in job results).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct LbRule {
    /// The rule's UUID.
    pub id: String,
    /// The rule's name: `<lbname>-<protocol>-<port>` for ours.
    pub name: String,
    /// `roundrobin`, or `source` for `sessionAffinity: ClientIP`.
    pub algorithm: String,
    /// `tcp`, `udp` or `tcp-proxy`.
    pub protocol: String,
    /// The public IP address the rule listens on.
    pub publicip: String,
    /// The UUID of that public IP.
    pub publicipid: String,
    /// The public port: the Service port; `None` when absent or unreadable.
    #[serde(deserialize_with = "port")]
    pub publicport: Option<u16>,
    /// The private port on the members: the Service port's node port.
    #[serde(deserialize_with = "port")]
    pub privateport: Option<u16>,
    /// The guest network of the members.
    pub networkid: String,
    /// Source CIDRs, comma- or space-separated; empty means open to all (`0.0.0.0/0`).
    pub cidrlist: String,
    /// `Add`, `Active` or `Revoke` (being deleted).
    pub state: String,
}

/// A public IP address (`publicipaddress`, or `ipaddress` in job results).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct PublicIp {
    /// The public IP's UUID.
    pub id: String,
    /// The address itself.
    pub ipaddress: String,
    /// When it was allocated; empty while free.
    pub allocated: String,
    /// `Allocating`, `Allocated`, `Releasing` or `Free` (any case).
    pub state: String,
    /// The isolated network it is associated with; empty for a VPC's IP.
    pub associatednetworkid: String,
    /// The VPC it is associated with; empty in an isolated network.
    pub vpcid: String,
    /// Whether it is the network's source NAT IP (never released by the driver).
    pub issourcenat: bool,
    /// Whether static NAT is on (never released by the driver).
    pub isstaticnat: bool,
    /// Its resource tags (CloudStack renders them on every public IP).
    pub tags: Vec<ResourceTag>,
}

impl PublicIp {
    /// Whether it carries `key=value` (both exact).
    pub fn has_tag(&self, key: &str, value: &str) -> bool {
        self.tags.iter().any(|t| t.key == key && t.value == value)
    }

    /// Whether its state is `state` (any case).
    pub fn is(&self, state: &str) -> bool {
        self.state.eq_ignore_ascii_case(state)
    }
}

/// A resource tag (`tag`, and the items of an object's `tags`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ResourceTag {
    /// The tag's key, e.g. `wasm-ccm/load-balancer`.
    pub key: String,
    /// The tag's value.
    pub value: String,
}

/// A guest network (`network`): an isolated network or a VPC tier.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Network {
    /// The network's UUID.
    pub id: String,
    /// The network's name.
    pub name: String,
    /// The VPC of a tier; empty for an isolated network.
    pub vpcid: String,
    /// The ACL list of a VPC tier; empty when none.
    pub aclid: String,
    /// The services the network offers; `Firewall` or `NetworkACL` says how ports are opened.
    pub service: Vec<NetworkService>,
}

impl Network {
    /// Whether the network offers service `name` (`Firewall`, `NetworkACL`, …).
    pub fn has_service(&self, name: &str) -> bool {
        self.service.iter().any(|s| s.name == name)
    }
}

/// One service of a network.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct NetworkService {
    /// The service's name, e.g. `Firewall`, `NetworkACL` or `Lb`.
    pub name: String,
}

/// A firewall rule on a public IP (`firewallrule`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct FirewallRule {
    /// The firewall rule's UUID.
    pub id: String,
    /// `tcp` or `udp` (or another IP protocol for rules not ours).
    pub protocol: String,
    /// The first port of the range; `None` when absent (e.g. ICMP).
    #[serde(deserialize_with = "port")]
    pub startport: Option<u16>,
    /// The last port of the range; `None` when absent.
    #[serde(deserialize_with = "port")]
    pub endport: Option<u16>,
    /// Source CIDRs, comma- or space-separated.
    pub cidrlist: String,
    /// `Add`, `Active` or `Revoke`.
    pub state: String,
}

/// A network ACL list (`networkacllist`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct AclList {
    /// The ACL list's UUID.
    pub id: String,
    /// The ACL list's name; `default_allow` and `default_deny` are CloudStack's own.
    pub name: String,
}

/// One entry of a network ACL list (`networkacl`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct AclItem {
    /// The entry's UUID.
    pub id: String,
    /// `tcp`, `udp`, `all`, …; `all` without ports covers every port.
    pub protocol: String,
    /// The first port of the range; `None` when absent.
    #[serde(deserialize_with = "port")]
    pub startport: Option<u16>,
    /// The last port of the range; `None` when absent.
    #[serde(deserialize_with = "port")]
    pub endport: Option<u16>,
    /// Source CIDRs, comma- or space-separated.
    pub cidrlist: String,
    /// `Ingress` or `Egress` (any case).
    pub traffictype: String,
    /// `Allow` or `Deny` (any case).
    pub action: String,
}

/// A project (`project`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Project {
    /// The project's UUID.
    pub id: String,
    /// The project's name; the `project-id` setting may give either.
    pub name: String,
}

/// A port rendered as a number or a string; absent, empty or out of range is `None`.
fn port<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u16>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Number(i64),
        Text(String),
        Nothing(()),
    }
    Ok(match Raw::deserialize(d)? {
        Raw::Number(n) => u16::try_from(n).ok(),
        Raw::Text(s) => s.trim().parse().ok(),
        Raw::Nothing(()) => None,
    })
}

/// Splits a CIDR list whether CloudStack joined it with commas or spaces.
pub fn split_cidrs(list: &str) -> Vec<String> {
    list.split([',', ' '])
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_as_numbers_or_strings() {
        let r: LbRule =
            serde_json::from_str(r#"{"id":"1","publicport":"80","privateport":30080}"#).unwrap();
        assert_eq!((r.publicport, r.privateport), (Some(80), Some(30080)));
        let f: FirewallRule = serde_json::from_str(r#"{"startport":"x","endport":null}"#).unwrap();
        assert_eq!((f.startport, f.endport), (None, None));
    }

    #[test]
    fn cidr_lists_either_way() {
        assert_eq!(
            split_cidrs("10.0.0.0/8,192.168.0.0/16"),
            ["10.0.0.0/8", "192.168.0.0/16"]
        );
        assert_eq!(
            split_cidrs("10.0.0.0/8 192.168.0.0/16"),
            ["10.0.0.0/8", "192.168.0.0/16"]
        );
        assert_eq!(
            split_cidrs("10.0.0.0/8, 192.168.0.0/16"),
            ["10.0.0.0/8", "192.168.0.0/16"]
        );
        assert!(split_cidrs("").is_empty());
    }

    #[test]
    fn primary_nic() {
        let vm: Vm = serde_json::from_str(
            r#"{"nic":[{"ipaddress":"10.0.0.2"},{"ipaddress":"10.0.0.3","isdefault":true}]}"#,
        )
        .unwrap();
        assert_eq!(vm.primary_nic().unwrap().ipaddress, "10.0.0.3");
        assert!(Vm::default().primary_nic().is_none());
    }
}
