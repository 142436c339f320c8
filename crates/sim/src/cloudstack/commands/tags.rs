//! Resource tags: `createTags`, `deleteTags`, `listTags`, and the `tags[i].key`/`tags[i].value`
//! filter of list commands, as apache/cloudstack implements them:
//!
//! - `CreateTagsCmd` and `DeleteTagsCmd` are `BaseAsyncCmd`s: the answer is a `jobid` only, and
//!   every check of `TaggedResourceManagerImpl.createTags`/`deleteTags` runs in the job, so a bad
//!   resource type, an unknown resource or an empty value is a failed job (`errorcode` 431,
//!   `InvalidParameterValueException`), not an immediate error. Only a missing required
//!   parameter (`tags`, `resourcetype`, `resourceids`) is refused at once.
//! - Resource types are `ResourceTag.ResourceObjectType` names, any case
//!   (`ResourceObjectType.getResourceObjectType` lower-cases); an unknown name is "Invalid
//!   resource type X" (`ResourceManagerUtilImpl.getResourceType`), a type without tag support
//!   "The resource type X doesn't support resource tags".
//! - A resource is found by UUID ("Unable to find resource by uuid X and type T"); the tag
//!   belongs to the resource's owner.
//! - A list filter `tags[0].key=k&tags[0].value=v&tags[1]…` joins `resource_tags` with one
//!   OR'ed `(key = ? AND value = ?)` clause per pair (e.g. `searchForIPAddresses`,
//!   `listFirewallRules`: `tagSearch.or().op("key" + count …)`): an entity matches when it has
//!   ANY of the pairs, not all of them. Comparisons are case-insensitive (the database's
//!   collation).

use serde_json::Value;

use super::context::{Ctx, paged};
use crate::cloudstack::error::CsError;
use crate::cloudstack::job::Effect;
use crate::cloudstack::model::{State, Tag};
use crate::cloudstack::render::render_tag;

/// `ResourceTag.ResourceObjectType`: every name and whether it takes tags
/// (`resourceTagsSupport`).
const RESOURCE_TYPES: &[(&str, bool)] = &[
    ("VMInstance", true),
    ("UserVm", true),
    ("Template", true),
    ("ISO", true),
    ("Volume", true),
    ("Snapshot", true),
    ("Backup", true),
    ("Network", true),
    ("DomainRouter", false),
    ("Nic", false),
    ("LoadBalancer", true),
    ("PortForwardingRule", true),
    ("FirewallRule", true),
    ("SecurityGroup", true),
    ("SecurityGroupRule", true),
    ("PublicIpAddress", true),
    ("Project", true),
    ("Account", true),
    ("Vpc", true),
    ("NetworkACL", true),
    ("StaticRoute", true),
    ("VMSnapshot", true),
    ("RemoteAccessVpn", true),
    ("Zone", false),
    ("ServiceOffering", false),
    ("Storage", false),
    ("PrivateGateway", false),
    ("NetworkACLList", false),
    ("VpnGateway", false),
    ("CustomerGateway", false),
    ("VpnConnection", false),
    ("User", true),
    ("DiskOffering", false),
    ("AutoScaleVmProfile", false),
    ("AutoScaleVmGroup", false),
    ("LBStickinessPolicy", false),
    ("LBHealthCheckPolicy", false),
    ("SnapshotPolicy", true),
    ("GuestOs", false),
    ("NetworkOffering", false),
    ("VpcOffering", true),
    ("Domain", false),
];

/// The canonical name and tag support of a resource type given in any case.
fn resource_type(name: &str) -> Option<(&'static str, bool)> {
    RESOURCE_TYPES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .copied()
}

/// The owner's project of a live simulated entity of `resource_type`; None when there is no
/// such entity (`Some(None)`: owned by the account).
fn owner(state: &State, resource_type: &str, id: &str) -> Option<Option<String>> {
    match resource_type {
        "UserVm" => state.vm(id).map(|v| v.project.clone()),
        "Network" => state.network(id).map(|n| n.project.clone()),
        "LoadBalancer" => state.lb_rule(id).map(|r| r.project.clone()),
        "FirewallRule" => state.firewall_rule(id).map(|r| r.project.clone()),
        "PublicIpAddress" => state.ip(id).map(|ip| ip.project.clone()),
        "Project" => state.project(id).map(|p| Some(p.id.clone())),
        "Vpc" => state.vpc(id).map(|v| v.project.clone()),
        "NetworkACL" => state.acl_item(id).map(|a| a.project.clone()),
        _ => None,
    }
}

/// Whether a tag's resource still exists (a job may run after it went).
pub(crate) fn tag_target_exists(state: &State, resource_type: &str, id: &str) -> bool {
    owner(state, resource_type, id).is_some()
}

/// A tag made outside the API (a test's set-up): the type and resource must exist.
pub(crate) fn new_tag(
    state: &State,
    type_name: &str,
    resource_id: &str,
    key: &str,
    value: &str,
) -> Result<Tag, String> {
    let (resource_type, _) =
        resource_type(type_name).ok_or_else(|| format!("Invalid resource type {type_name}"))?;
    let project = owner(state, resource_type, resource_id).ok_or_else(|| {
        format!("Unable to find resource by uuid {resource_id} and type {resource_type}")
    })?;
    Ok(Tag {
        key: key.to_string(),
        value: value.to_string(),
        resource_type,
        resource_id: resource_id.to_string(),
        project,
        customer: None,
    })
}

/// The resource type a tag job works on, or the error its `execute` throws.
fn checked_type(name: &str) -> Result<&'static str, (u16, String)> {
    resource_type(name)
        .map(|(n, _)| n)
        .ok_or_else(|| (431, format!("Invalid resource type {name}")))
}

/// `createTags tags[i].key/value resourcetype resourceids (customer)`: async; see the module
/// docs for what fails the job.
pub(super) fn create_tags(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    let pairs = ctx
        .args
        .map("tags")
        .ok_or_else(|| CsError::missing(ctx.args.command, "tags"))?;
    let type_name = ctx.args.required("resourcetype")?;
    let ids = ctx
        .args
        .list("resourceids")
        .filter(|l| !l.is_empty())
        .ok_or_else(|| CsError::missing(ctx.args.command, "resourceids"))?;
    let customer = ctx.args.opt("customer").map(str::to_string);
    let state = &*ctx.state;
    // `TaggedResourceManagerImpl.createTags`: for each key, for each resource: tag support,
    // then the resource by UUID, then a non-empty value.
    let prepared = (|| -> Result<Vec<Tag>, (u16, String)> {
        let type_name = checked_type(type_name)?;
        let mut tags = Vec::new();
        for (key, value) in &pairs {
            for id in &ids {
                if resource_type(type_name).is_some_and(|(_, tags)| !tags) {
                    return Err((
                        431,
                        format!("The resource type {type_name} doesn't support resource tags"),
                    ));
                }
                let Some(project) = owner(state, type_name, id) else {
                    return Err((
                        431,
                        format!("Unable to find resource by uuid {id} and type {type_name}"),
                    ));
                };
                let Some(value) = value.as_deref().filter(|v| !v.is_empty()) else {
                    return Err((
                        431,
                        format!("Value for the key {key} is either null or empty"),
                    ));
                };
                tags.push(Tag {
                    key: key.clone(),
                    value: value.to_string(),
                    resource_type: type_name,
                    resource_id: id.clone(),
                    project,
                    customer: customer.clone(),
                });
            }
        }
        Ok(tags)
    })();
    let effect = match prepared {
        Ok(tags) => Effect::CreateTags {
            tags,
            refused: None,
        },
        Err(refused) => Effect::CreateTags {
            tags: Vec::new(),
            refused: Some(refused),
        },
    };
    Ok(ctx.state.submit(effect, ctx.now))
}

/// `deleteTags resourcetype resourceids (tags[i].key/value)`: async; the job fails when no tag
/// matches.
pub(super) fn delete_tags(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    let type_name = ctx.args.required("resourcetype")?;
    let ids = ctx
        .args
        .list("resourceids")
        .filter(|l| !l.is_empty())
        .ok_or_else(|| CsError::missing(ctx.args.command, "resourceids"))?;
    let keys = ctx.args.map("tags").unwrap_or_default();
    let effect = match checked_type(type_name) {
        Ok(resource_type) => Effect::DeleteTags {
            resource_type,
            resource_ids: ids,
            keys,
            refused: None,
        },
        Err(refused) => Effect::DeleteTags {
            resource_type: "",
            resource_ids: ids,
            keys,
            refused: Some(refused),
        },
    };
    Ok(ctx.state.submit(effect, ctx.now))
}

/// `listTags`: filters `resourcetype` (an unknown one is 431 at once: the list runs
/// synchronously), `resourceid`, `key`, `value`, `customer`, project scope.
pub(super) fn list_tags(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    let page = ctx.page()?;
    let scope = ctx.scope()?;
    let type_name = match ctx.args.opt("resourcetype") {
        Some(t) => Some(checked_type(t).map_err(|(_, text)| CsError::param(text))?),
        None => None,
    };
    let id = ctx.args.opt("resourceid");
    let key = ctx.args.opt("key");
    let value = ctx.args.opt("value");
    let customer = ctx.args.opt("customer");
    let state = &*ctx.state;
    let matches: Vec<&Tag> = state
        .tags
        .iter()
        .filter(|t| scope.admits(t.project.as_deref()))
        .filter(|t| type_name.is_none_or(|n| t.resource_type == n))
        .filter(|t| id.is_none_or(|i| t.resource_id == i))
        .filter(|t| key.is_none_or(|k| t.key.eq_ignore_ascii_case(k)))
        .filter(|t| value.is_none_or(|v| t.value.eq_ignore_ascii_case(v)))
        .filter(|t| customer.is_none_or(|c| t.customer.as_deref() == Some(c)))
        .collect();
    Ok(paged(page, "tag", matches, |t| render_tag(state, t)))
}

/// A list command's `tags[i]` filter: None when none was sent, else whether an entity with
/// `tags` has ANY of the pairs (key and value compared in any case; a pair without a value
/// matches the key alone).
pub(crate) struct TagFilter(Option<Vec<(String, Option<String>)>>);

impl TagFilter {
    /// The filter of the current request.
    pub(crate) fn of(ctx: &Ctx<'_>) -> TagFilter {
        TagFilter(ctx.args.map("tags"))
    }

    /// Whether the entity `resource_id` of `resource_type` passes.
    pub(crate) fn admits(&self, state: &State, resource_type: &str, resource_id: &str) -> bool {
        let Some(pairs) = &self.0 else {
            return true;
        };
        state.tags_of(resource_type, resource_id).iter().any(|t| {
            pairs.iter().any(|(k, v)| {
                t.key.eq_ignore_ascii_case(k)
                    && v.as_deref().is_none_or(|v| t.value.eq_ignore_ascii_case(v))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_types_any_case() {
        assert_eq!(
            resource_type("publicipaddress"),
            Some(("PublicIpAddress", true))
        );
        assert_eq!(resource_type("Zone"), Some(("Zone", false)));
        assert_eq!(resource_type("PublicIp"), None);
        assert_eq!(
            checked_type("ipaddress"),
            Err((431, "Invalid resource type ipaddress".into()))
        );
    }
}
