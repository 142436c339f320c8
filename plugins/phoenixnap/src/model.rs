//! The PhoenixNAP objects the driver reads (unknown fields are ignored: the API adds fields).

use serde::{Deserialize, Serialize};

/// A BMC server (`/bmc/v1/servers`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Server {
    pub id: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub hostname: String,
    #[serde(default, rename = "type")]
    pub server_type: String,
    #[serde(default)]
    pub location: String,
    #[serde(default)]
    pub private_ip_addresses: Vec<String>,
    #[serde(default)]
    pub public_ip_addresses: Vec<String>,
}

/// A tag on an IP block.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct BlockTag {
    pub name: String,
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
    #[serde(default)]
    pub location: String,
    #[serde(default)]
    pub cidr: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub assigned_resource_id: Option<String>,
    #[serde(default)]
    pub assigned_resource_type: Option<String>,
    #[serde(default)]
    pub tags: Vec<BlockTag>,
}

impl IpBlock {
    /// Whether the block carries tag `name`.
    pub fn has_tag(&self, name: &str) -> bool {
        self.tags.iter().any(|t| t.name == name)
    }
}

/// A public network (`/networks/v1/public-networks/{id}`); `location` is required in
/// networkapi.spec.yaml's `PublicNetwork`.
#[derive(Debug, Clone, Deserialize)]
pub struct PublicNetwork {
    #[serde(default)]
    pub location: String,
}

/// A tag definition (`/tag-manager/v1/tags`).
#[derive(Debug, Clone, Deserialize)]
pub struct TagDefinition {
    pub name: String,
}
