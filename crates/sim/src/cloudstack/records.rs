//! The records a job's effect carries ([`IpState`], [`RuleState`], [`LbRule`], [`Tag`]): a leaf
//! both the state (`model.rs`, which holds the jobs) and the jobs' types (`job.rs`) read.

use std::collections::BTreeSet;

/// A public IP address's life cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IpState {
    Free,
    Allocating,
    Allocated,
    Releasing,
}

impl IpState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            IpState::Free => "Free",
            IpState::Allocating => "Allocating",
            IpState::Allocated => "Allocated",
            IpState::Releasing => "Releasing",
        }
    }
}

/// The life cycle of load-balancer rules, firewall rules and ACL items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RuleState {
    Add,
    Active,
    Revoke,
}

impl RuleState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RuleState::Add => "Add",
            RuleState::Active => "Active",
            RuleState::Revoke => "Revoke",
        }
    }
}

/// A load-balancer rule: one public port of a public IP to one private port of its members.
#[derive(Clone, Debug)]
pub(crate) struct LbRule {
    pub id: String,
    /// CloudStack's internal id, named in conflict messages.
    pub seq: u64,
    pub name: String,
    pub description: Option<String>,
    pub algorithm: String,
    /// `tcp`, `udp` or `tcp-proxy`, lowercase.
    pub protocol: String,
    pub ip_id: String,
    pub public_port: u16,
    pub private_port: u16,
    pub network_id: String,
    pub cidrs: Vec<String>,
    pub state: RuleState,
    pub project: Option<String>,
    pub zone_id: String,
    /// Assigned VM IDs.
    pub members: BTreeSet<String>,
}

/// A resource tag (`createTags`): a key and value on one entity, owned by the entity's owner.
/// CloudStack keeps one value per key and entity (`resource_tags` has a unique key on
/// resource, type and key; the collation makes keys case-insensitive).
#[derive(Clone, Debug)]
pub(crate) struct Tag {
    pub key: String,
    pub value: String,
    /// The `ResourceObjectType` name as CloudStack spells it, e.g. `PublicIpAddress`.
    pub resource_type: &'static str,
    pub resource_id: String,
    /// The owner's project (None: the account).
    pub project: Option<String>,
    pub customer: Option<String>,
}

impl Tag {
    /// Whether it is on `resource_id` of `resource_type`.
    pub(crate) fn on(&self, resource_type: &str, resource_id: &str) -> bool {
        self.resource_type == resource_type && self.resource_id == resource_id
    }
}
