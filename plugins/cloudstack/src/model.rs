//! The CloudStack objects the driver reads, as the API renders them. Every field has a default:
//! CloudStack omits empty fields, and renders some numbers as strings (LB rule ports, ACL
//! ports) and others as numbers (firewall ports), so ports accept both.

use serde::{Deserialize, Deserializer};

/// A VM (`virtualmachine`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Vm {
    pub id: String,
    pub name: String,
    /// The hypervisor host (shown to admins only); never used as an address.
    pub hostname: String,
    pub state: String,
    pub serviceofferingname: String,
    pub zonename: String,
    /// Static NAT address.
    pub publicip: String,
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
    pub networkid: String,
    pub ipaddress: String,
    pub ip6address: String,
    pub isdefault: bool,
}

/// A load-balancer rule (`loadbalancerrule`, or `loadbalancer` in job results).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct LbRule {
    pub id: String,
    pub name: String,
    pub algorithm: String,
    pub protocol: String,
    pub publicip: String,
    pub publicipid: String,
    #[serde(deserialize_with = "port")]
    pub publicport: Option<u16>,
    #[serde(deserialize_with = "port")]
    pub privateport: Option<u16>,
    pub networkid: String,
    pub cidrlist: String,
    pub state: String,
}

/// A public IP address (`publicipaddress`, or `ipaddress` in job results).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct PublicIp {
    pub id: String,
    pub ipaddress: String,
    /// When it was allocated; empty while free.
    pub allocated: String,
    pub state: String,
    pub associatednetworkid: String,
    pub vpcid: String,
    pub issourcenat: bool,
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
    pub key: String,
    pub value: String,
}

/// A guest network (`network`): an isolated network or a VPC tier.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Network {
    pub id: String,
    pub name: String,
    pub vpcid: String,
    pub aclid: String,
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
    pub name: String,
}

/// A firewall rule on a public IP (`firewallrule`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct FirewallRule {
    pub id: String,
    pub protocol: String,
    #[serde(deserialize_with = "port")]
    pub startport: Option<u16>,
    #[serde(deserialize_with = "port")]
    pub endport: Option<u16>,
    pub cidrlist: String,
    pub state: String,
}

/// A network ACL list (`networkacllist`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct AclList {
    pub id: String,
    pub name: String,
}

/// One entry of a network ACL list (`networkacl`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct AclItem {
    pub id: String,
    pub protocol: String,
    #[serde(deserialize_with = "port")]
    pub startport: Option<u16>,
    #[serde(deserialize_with = "port")]
    pub endport: Option<u16>,
    pub cidrlist: String,
    pub traffictype: String,
    pub action: String,
}

/// A project (`project`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Project {
    pub id: String,
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
