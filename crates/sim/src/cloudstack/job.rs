//! What an asynchronous job is: its [`Effect`] (what it changes, and undoes on failure), its
//! [`Outcome`] and the [`Job`] record the state keeps. A leaf over the model's records, so the
//! state can hold jobs while `jobs.rs` (which runs them) names the commands' checks.

use std::time::Instant;

use serde_json::Value;

use super::records::{IpState, LbRule, RuleState, Tag};

/// What a job changes when it completes, and what it undoes when it fails.
#[derive(Clone, Debug)]
pub(crate) enum Effect {
    /// `Add` → `Active`; failure removes the rule.
    CreateLbRule { id: String },
    /// The new values are in place (`Add`) → `Active`; failure restores `before`.
    UpdateLbRule { id: String, before: Box<LbRule> },
    /// `Revoke` → removed; failure restores the state.
    DeleteLbRule { id: String, before: RuleState },
    /// Adds members.
    Assign { id: String, vms: Vec<String> },
    /// Removes members.
    Remove { id: String, vms: Vec<String> },
    /// `Allocating` → `Allocated`; failure frees the address.
    Associate { id: String },
    /// `Releasing` → free, with its load-balancer and firewall rules; nothing when the address
    /// was not allocated. Failure restores the states.
    Disassociate {
        id: String,
        before: IpState,
        lb_rules: Vec<(String, RuleState)>,
        firewall_rules: Vec<(String, RuleState)>,
    },
    /// `Add` → `Active`; failure removes the rule.
    CreateFirewallRule { id: String },
    /// `Revoke` → removed; failure restores the state.
    DeleteFirewallRule { id: String, before: RuleState },
    /// `Add` → `Active`; failure removes the item.
    CreateAclItem { id: String },
    /// `Revoke` → removed; failure restores the state.
    DeleteAclItem { id: String, before: RuleState },
    /// `createTags`: the tags appear when the job runs (`CreateTagsCmd` is a `BaseAsyncCmd`
    /// whose `execute` persists them), all or none. `refused` is the error `execute` throws
    /// (its checks run in the job, so they are job failures, not immediate answers).
    CreateTags {
        tags: Vec<Tag>,
        refused: Option<(u16, String)>,
    },
    /// `deleteTags`: the matching tags of the resources go when the job runs; none matching
    /// fails the job (`DeleteTagsCmd`: "Failed to delete tags").
    DeleteTags {
        resource_type: &'static str,
        resource_ids: Vec<String>,
        /// Key and, optionally, value (both case-insensitive); empty: every tag.
        keys: Vec<(String, Option<String>)>,
        refused: Option<(u16, String)>,
    },
}

impl Effect {
    /// The command that started it.
    pub(crate) fn command(&self) -> &'static str {
        match self {
            Effect::CreateLbRule { .. } => "createLoadBalancerRule",
            Effect::UpdateLbRule { .. } => "updateLoadBalancerRule",
            Effect::DeleteLbRule { .. } => "deleteLoadBalancerRule",
            Effect::Assign { .. } => "assignToLoadBalancerRule",
            Effect::Remove { .. } => "removeFromLoadBalancerRule",
            Effect::Associate { .. } => "associateIpAddress",
            Effect::Disassociate { .. } => "disassociateIpAddress",
            Effect::CreateFirewallRule { .. } => "createFirewallRule",
            Effect::DeleteFirewallRule { .. } => "deleteFirewallRule",
            Effect::CreateAclItem { .. } => "createNetworkACL",
            Effect::DeleteAclItem { .. } => "deleteNetworkACL",
            Effect::CreateTags { .. } => "createTags",
            Effect::DeleteTags { .. } => "deleteTags",
        }
    }

    /// The API command class, reported as the job's `cmd`.
    pub(super) fn class(&self) -> &'static str {
        match self {
            Effect::CreateLbRule { .. } => {
                "org.apache.cloudstack.api.command.user.loadbalancer.CreateLoadBalancerRuleCmd"
            }
            Effect::UpdateLbRule { .. } => {
                "org.apache.cloudstack.api.command.user.loadbalancer.UpdateLoadBalancerRuleCmd"
            }
            Effect::DeleteLbRule { .. } => {
                "org.apache.cloudstack.api.command.user.loadbalancer.DeleteLoadBalancerRuleCmd"
            }
            Effect::Assign { .. } => {
                "org.apache.cloudstack.api.command.user.loadbalancer.AssignToLoadBalancerRuleCmd"
            }
            Effect::Remove { .. } => {
                "org.apache.cloudstack.api.command.user.loadbalancer.RemoveFromLoadBalancerRuleCmd"
            }
            Effect::Associate { .. } => {
                "org.apache.cloudstack.api.command.user.address.AssociateIPAddrCmd"
            }
            Effect::Disassociate { .. } => {
                "org.apache.cloudstack.api.command.user.address.DisassociateIPAddrCmd"
            }
            Effect::CreateFirewallRule { .. } => {
                "org.apache.cloudstack.api.command.user.firewall.CreateFirewallRuleCmd"
            }
            Effect::DeleteFirewallRule { .. } => {
                "org.apache.cloudstack.api.command.user.firewall.DeleteFirewallRuleCmd"
            }
            Effect::CreateAclItem { .. } => {
                "org.apache.cloudstack.api.command.user.network.CreateNetworkACLCmd"
            }
            Effect::DeleteAclItem { .. } => {
                "org.apache.cloudstack.api.command.user.network.DeleteNetworkACLCmd"
            }
            Effect::CreateTags { .. } => "org.apache.cloudstack.api.command.user.tag.CreateTagsCmd",
            Effect::DeleteTags { .. } => "org.apache.cloudstack.api.command.user.tag.DeleteTagsCmd",
        }
    }

    /// `jobinstancetype`; tag commands name none (`BaseAsyncCmd.getApiResourceType` is null).
    pub(super) fn instance_type(&self) -> Option<&'static str> {
        Some(match self {
            Effect::CreateLbRule { .. }
            | Effect::UpdateLbRule { .. }
            | Effect::DeleteLbRule { .. }
            | Effect::Assign { .. }
            | Effect::Remove { .. } => "LoadBalancerRule",
            Effect::Associate { .. } | Effect::Disassociate { .. } => "IpAddress",
            Effect::CreateFirewallRule { .. } | Effect::DeleteFirewallRule { .. } => "FirewallRule",
            Effect::CreateAclItem { .. } | Effect::DeleteAclItem { .. } => "NetworkAcl",
            Effect::CreateTags { .. } | Effect::DeleteTags { .. } => return None,
        })
    }

    /// The entity it works on (`jobinstanceid`); none for tag commands.
    pub(crate) fn instance_id(&self) -> Option<&str> {
        Some(match self {
            Effect::CreateLbRule { id }
            | Effect::UpdateLbRule { id, .. }
            | Effect::DeleteLbRule { id, .. }
            | Effect::Assign { id, .. }
            | Effect::Remove { id, .. }
            | Effect::Associate { id }
            | Effect::Disassociate { id, .. }
            | Effect::CreateFirewallRule { id }
            | Effect::DeleteFirewallRule { id, .. }
            | Effect::CreateAclItem { id }
            | Effect::DeleteAclItem { id, .. } => id,
            Effect::CreateTags { .. } | Effect::DeleteTags { .. } => return None,
        })
    }

    /// Whether the command creates the entity (its immediate answer carries the `id`).
    pub(super) fn creates(&self) -> bool {
        matches!(
            self,
            Effect::CreateLbRule { .. }
                | Effect::Associate { .. }
                | Effect::CreateFirewallRule { .. }
                | Effect::CreateAclItem { .. }
        )
    }

    /// The `errortext` of a failed job.
    pub(super) fn failure_text(&self) -> String {
        match self {
            Effect::CreateLbRule { id } => format!("Failed to create load balancer rule {id}"),
            Effect::UpdateLbRule { id, .. } => format!("Failed to update load balancer rule {id}"),
            Effect::DeleteLbRule { .. } => "Failed to delete load balancer".into(),
            Effect::Assign { .. } => "Failed to assign load balancer rule".into(),
            Effect::Remove { .. } => "Failed to remove instance from load balancer rule".into(),
            Effect::Associate { .. } => "Failed to allocate IP address".into(),
            Effect::Disassociate { .. } => "Failed to disassociate IP address".into(),
            Effect::CreateFirewallRule { .. } => "Failed to create firewall rule".into(),
            Effect::DeleteFirewallRule { .. } => "Failed to delete firewall rule".into(),
            Effect::CreateAclItem { .. } => "Failed to create network ACL item".into(),
            Effect::DeleteAclItem { .. } => "Failed to delete network ACL item".into(),
            Effect::CreateTags { .. } => "Failed to create resource tag(s)".into(),
            Effect::DeleteTags { .. } => "Failed to delete tags".into(),
        }
    }
}

/// How a job ended.
#[derive(Clone, Debug)]
pub(crate) enum Outcome {
    /// `jobstatus: 1` with this `jobresult`.
    Succeeded(Value),
    /// `jobstatus: 2` with this `errorcode` and `errortext`.
    Failed(u16, String),
}

/// An asynchronous job.
#[derive(Clone, Debug)]
pub(crate) struct Job {
    pub id: String,
    pub effect: Effect,
    pub created: String,
    /// Polls so far.
    pub polls: u32,
    /// Polls after which it completes (when `due` is None).
    pub polls_needed: u32,
    /// When it completes, for time-based jobs.
    pub due: Option<Instant>,
    /// Whether it fails and rolls back.
    pub fail: bool,
    /// None while pending.
    pub outcome: Option<Outcome>,
    pub completed: Option<String>,
}
