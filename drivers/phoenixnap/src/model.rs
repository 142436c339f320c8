//! The PhoenixNAP objects the driver reads (unknown fields are ignored: the API adds fields).

use serde::{Deserialize, Serialize};

/// A BMC server (`/bmc/v1/servers`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Server {
    /// The server ID, the part after `phoenixnap://` in a provider ID.
    pub id: String,
    /// `powered-on`, `powered-off`, …; `powered-off` means the instance is shut down.
    #[serde(default)]
    pub status: String,
    /// The server's hostname; a node without a provider ID is looked up by it.
    #[serde(default)]
    pub hostname: String,
    /// The server type (API field `type`, e.g. `s1.c1.medium`): the node's instance type.
    #[serde(default, rename = "type")]
    pub server_type: String,
    /// The location, e.g. `PHX`: the node's region.
    #[serde(default)]
    pub location: String,
    /// Private IPs, listed as the node's `InternalIP`s.
    #[serde(default)]
    pub private_ip_addresses: Vec<String>,
    /// Public IPs, listed as the node's `ExternalIP`s.
    #[serde(default)]
    pub public_ip_addresses: Vec<String>,
}

/// A tag on an IP block.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct BlockTag {
    /// The tag name, e.g. `usage` or `serviceName`.
    pub name: String,
    /// The tag value; `None` for a tag without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

impl BlockTag {
    /// `name=value`.
    pub fn new(name: &str, value: &str) -> Self {
        BlockTag {
            name: name.into(),
            value: Some(value.into()),
        }
    }
}

/// An IP block (`/ips/v1/ip-blocks`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IpBlock {
    /// Optional in ipapi.spec.yaml's `IpBlock` (nothing is required there); empty when absent,
    /// and such a block is skipped.
    #[serde(default)]
    pub id: String,
    /// The location the block is in, e.g. `PHX`.
    #[serde(default)]
    pub location: String,
    /// The block, e.g. `198.51.100.8/29`; the Service's address is its network address + 2.
    #[serde(default)]
    pub cidr: String,
    /// `unassigned`, `assigning`, `assigned`, `unassigning`, `error assigning`, …
    #[serde(default)]
    pub status: String,
    /// The ID of what the block is assigned to (a public network ID for ours); `None` when
    /// unassigned.
    #[serde(default)]
    pub assigned_resource_id: Option<String>,
    /// The kind of `assigned_resource_id`: `public network` or `PUBLIC_NETWORK` for a public
    /// network.
    #[serde(default)]
    pub assigned_resource_type: Option<String>,
    /// The block's tags: `usage`, `cluster`, `serviceNamespace`, `serviceName`, `delete` for ours.
    #[serde(default)]
    pub tags: Vec<BlockTag>,
}

impl IpBlock {
    /// Whether the block carries tag `name`.
    pub fn has_tag(&self, name: &str) -> bool {
        self.tags.iter().any(|t| t.name == name)
    }
}

/// A public network (`/networks/v1/public-networks/{id}`); `location` and `status` are required
/// in networkapi.spec.yaml's `PublicNetwork`.
#[derive(Debug, Clone, Deserialize)]
pub struct PublicNetwork {
    /// The network's location, e.g. `PHX`; new blocks must be in it to be assigned.
    #[serde(default)]
    pub location: String,
    /// `BUSY`, `READY`, `DELETING` or `ERROR`; only a `READY` network is given blocks. Empty when
    /// absent, which counts as not ready.
    #[serde(default)]
    pub status: String,
}

impl IpBlock {
    /// Whether the block carries every `(name, value)` with exactly that value. The list
    /// filters by tag on the server; this checks the answer, so a server that ignored a filter
    /// (or a block whose tags changed) is never taken for this cluster's or Service's block.
    pub fn carries(&self, tags: &[(&str, &str)]) -> bool {
        tags.iter().all(|(name, value)| {
            self.tags
                .iter()
                .any(|t| t.name == *name && t.value.as_deref() == Some(*value))
        })
    }
}

/// A tag definition (`/tag-manager/v1/tags`).
#[derive(Debug, Clone, Deserialize)]
pub struct TagDefinition {
    /// The tag's name; missing names of the driver's tags are created.
    pub name: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tagged(tags: &[(&str, Option<&str>)]) -> IpBlock {
        IpBlock {
            id: "b1".into(),
            location: "PHX".into(),
            cidr: "198.51.100.8/29".into(),
            status: "unassigned".into(),
            assigned_resource_id: None,
            assigned_resource_type: None,
            tags: tags
                .iter()
                .map(|(n, v)| BlockTag {
                    name: (*n).into(),
                    value: v.map(Into::into),
                })
                .collect(),
        }
    }

    #[test]
    fn carries_needs_every_tag_with_its_exact_value() {
        let b = tagged(&[("cluster", Some("u-1")), ("serviceName", Some("web"))]);
        assert!(b.carries(&[("cluster", "u-1"), ("serviceName", "web")]));
        assert!(!b.carries(&[("cluster", "u-1"), ("serviceName", "web2")]));
        assert!(!b.carries(&[("cluster", "u-1"), ("serviceNamespace", "default")]));
        assert!(!b.carries(&[("cluster", "u-")]));
        // A tag without a value matches no value.
        assert!(!tagged(&[("cluster", None)]).carries(&[("cluster", "")]));
    }
}
