//! Network ACL lists and their items, the VPC tiers' firewall. The system lists
//! `default_allow` and `default_deny` exist always, belong to no VPC and cannot be changed.

use serde_json::Value;

use super::context::{Ctx, Ref, cidr_list, contains_ci, paged};
use crate::cloudstack::error::CsError;
use crate::cloudstack::job::Effect;
use crate::cloudstack::model::{AclItem, Kind, RuleState};
use crate::cloudstack::render::{render_acl_item, render_acl_list};
use crate::serving::new_uuid;

/// Named ACL protocols; a protocol number (0–255) is valid too.
const PROTOCOLS: &[&str] = &["tcp", "udp", "icmp", "all"];

/// The refusal to change a system list.
fn default_acl() -> CsError {
    CsError::param("Default ACL cannot be modified")
}

/// `value` matched case-insensitively against `choices`, in the choice's spelling.
fn choice(value: &str, choices: &[&'static str]) -> Option<&'static str> {
    choices
        .iter()
        .copied()
        .find(|c| c.eq_ignore_ascii_case(value))
}

/// `listNetworkACLLists`: filters `id`, `vpcid` (that VPC's lists and the system lists, whatever
/// the project, as CloudStack only checks access to the VPC), `name` (exact, case-insensitive),
/// `keyword` (substring of name or description), `networkid` (the tier's list); without `vpcid`
/// the project scope applies to VPC lists (the system lists are always there).
pub(super) fn list_network_acl_lists(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    const KEY: &str = "networkacllist";
    let page = ctx.page()?;
    let scope = ctx.scope()?;
    let id = match ctx.reference("id", Kind::AclList)? {
        Ref::Removed => return Ok(paged(page, KEY, Vec::<Value>::new(), |v| v)),
        Ref::Live(id) => Some(id),
        Ref::Absent => None,
    };
    let vpc = ctx.opt_live("vpcid", Kind::Vpc)?;
    let network = ctx.opt_live("networkid", Kind::Network)?;
    let name = ctx.args.opt("name");
    let keyword = ctx.args.opt("keyword");
    let state = &*ctx.state;
    let network_acl = network
        .as_deref()
        .and_then(|n| state.network(n))
        .map(|n| n.acl_id.clone());
    let vpc_project = |vpc_id: Option<&str>| {
        vpc_id
            .and_then(|v| state.vpc(v))
            .and_then(|v| v.project.as_deref())
    };
    let matches: Vec<_> = state
        .acl_lists
        .iter()
        .filter(|a| match &vpc {
            Some(v) => a.is_system() || a.vpc_id.as_ref() == Some(v),
            None => a.is_system() || scope.admits(vpc_project(a.vpc_id.as_deref())),
        })
        .filter(|a| id.as_deref().is_none_or(|i| a.id == i))
        .filter(|a| name.is_none_or(|n| a.name.eq_ignore_ascii_case(n)))
        .filter(|a| {
            keyword.is_none_or(|k| contains_ci(&a.name, k) || contains_ci(&a.description, k))
        })
        .filter(|a| {
            network_acl
                .as_ref()
                .is_none_or(|acl| acl.as_deref() == Some(a.id.as_str()))
        })
        .collect();
    Ok(paged(page, KEY, matches, render_acl_list))
}

/// `listNetworkACLs`: filters `id`, `aclid`, `networkid` (the tier's list; none for an
/// isolated network), `protocol`, `traffictype`, `action`. With a list (by `aclid` or
/// `networkid`) CloudStack only checks access to its VPC, so every project's items show;
/// otherwise the project scope applies (items of the system lists always show).
pub(super) fn list_network_acls(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    const KEY: &str = "networkacl";
    let page = ctx.page()?;
    let scope = ctx.scope()?;
    let empty = || paged(page, KEY, Vec::<Value>::new(), |v| v);
    let id = match ctx.reference("id", Kind::AclItem)? {
        Ref::Removed => return Ok(empty()),
        Ref::Live(id) => Some(id),
        Ref::Absent => None,
    };
    let mut acl = match ctx.reference("aclid", Kind::AclList)? {
        Ref::Removed => return Ok(empty()),
        Ref::Live(id) => Some(id),
        Ref::Absent => None,
    };
    if let Some(network) = ctx.opt_live("networkid", Kind::Network)? {
        match ctx.state.network(&network).and_then(|n| n.acl_id.clone()) {
            Some(a) => acl = Some(a),
            None => return Ok(empty()),
        }
    }
    let protocol = ctx.args.opt("protocol");
    let traffic = ctx.args.opt("traffictype");
    let action = ctx.args.opt("action");
    let state = &*ctx.state;
    let matches: Vec<_> = state
        .acl_items
        .iter()
        .filter(|i| match &acl {
            Some(a) => i.acl_id == *a,
            None => {
                state.acl_list(&i.acl_id).is_some_and(|a| a.is_system())
                    || scope.admits(i.project.as_deref())
            }
        })
        .filter(|i| id.as_deref().is_none_or(|x| i.id == x))
        .filter(|i| protocol.is_none_or(|p| i.protocol.eq_ignore_ascii_case(p)))
        .filter(|i| traffic.is_none_or(|t| i.traffic_type.eq_ignore_ascii_case(t)))
        .filter(|i| action.is_none_or(|a| i.action.eq_ignore_ascii_case(a)))
        .collect();
    Ok(paged(page, KEY, matches, |i| render_acl_item(state, i)))
}

/// `startport`/`endport` of an ACL item (`endport` defaults to `startport`): none for ICMP
/// and `all`, in CloudStack's words.
fn acl_ports(ctx: &Ctx<'_>, protocol: &str) -> Result<(Option<u16>, Option<u16>), CsError> {
    let start = ctx.args.port("startport")?;
    let end = ctx.args.port("endport")?.or(start);
    let (s, e) = match (start, end) {
        (None, None) => return Ok((None, None)),
        (None, Some(_)) => {
            return Err(CsError::param(
                "Start public port is an invalid value: null",
            ));
        }
        (Some(s), e) => (s, e.unwrap_or(s)),
    };
    if s > e {
        return Err(CsError::param(format!(
            "Start port can't be bigger than end port [startport={s},endport={e}]"
        )));
    }
    match protocol {
        "all" => Err(CsError::param(
            "start port and end port must be null if protocol = 'all'",
        )),
        "icmp" => Err(CsError::param(
            "Can't specify start/end port when protocol is ICMP",
        )),
        _ => Ok((Some(s), Some(e))),
    }
}

/// `createNetworkACL`: `protocol` (tcp, udp, icmp, all or a number 0–255; not `tcp-proxy`),
/// `aclid` (or the list of `networkid`; not a system list), `action` (default Allow),
/// `traffictype` (default Ingress), `startport`/`endport` (not for icmp and all), `cidrlist`
/// (default `0.0.0.0/0`), `number` (default the list's highest plus one; unique in the list).
pub(super) fn create_network_acl(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    let raw_protocol = ctx.args.required("protocol")?;
    let protocol = raw_protocol.to_lowercase();
    if protocol.bytes().all(|b| b.is_ascii_digit()) {
        if protocol.parse::<u8>().is_err() {
            return Err(CsError::param(format!(
                "Invalid protocol number: {raw_protocol}"
            )));
        }
    } else if !PROTOCOLS.contains(&protocol.as_str()) {
        return Err(CsError::param(format!(
            "Invalid protocol [{raw_protocol}]. Expected one of: [{}]",
            PROTOCOLS.join(",")
        )));
    }
    let acl_param = ctx.opt_live("aclid", Kind::AclList)?;
    let network = ctx.opt_live("networkid", Kind::Network)?;
    let action = match ctx.args.opt("action") {
        None => "Allow",
        Some(a) => choice(a, &["Allow", "Deny"]).ok_or_else(|| {
            CsError::param(format!(
                "Invalid action [{a}]. Permitted actions are Allow and Deny"
            ))
        })?,
    };
    let traffic = match ctx.args.opt("traffictype") {
        None => "Ingress",
        Some(t) => choice(t, &["Ingress", "Egress"])
            .ok_or_else(|| CsError::param(format!("Invalid traffic type {t}")))?,
    };
    let (start_port, end_port) = acl_ports(ctx, &protocol)?;
    let cidrs = cidr_list(&ctx.args)?;
    let number = ctx.args.int("number")?;

    let state = &*ctx.state;
    let acl_id = match (acl_param, &network) {
        (Some(a), _) => a,
        (None, Some(n)) => match state.network(n).and_then(|n| n.acl_id.clone()) {
            Some(a) => a,
            None => {
                return Err(CsError::param(format!(
                    "Network: {n} does not belong to VPC"
                )));
            }
        },
        (None, None) => {
            return Err(CsError::param(
                "Cannot create Network ACL Item. ACL Id or network Id is required",
            ));
        }
    };
    if state.acl_list(&acl_id).is_none_or(|a| a.is_system()) {
        return Err(default_acl());
    }
    let taken = |n: u32| {
        state
            .acl_items
            .iter()
            .any(|i| i.acl_id == acl_id && i.number == n)
    };
    let number = match number {
        Some(n) => {
            let n = u32::try_from(n).ok().filter(|n| *n >= 1).ok_or_else(|| {
                CsError::param(format!("Invalid number [{n}]. Number cannot be < 1"))
            })?;
            if taken(n) {
                return Err(CsError::param(format!(
                    "ACL item with number {n} already exists in ACL: {acl_id}"
                )));
            }
            n
        }
        None => {
            state
                .acl_items
                .iter()
                .filter(|i| i.acl_id == acl_id)
                .map(|i| i.number)
                .max()
                .unwrap_or(0)
                + 1
        }
    };
    let project = state.acl_project(&acl_id);
    let id = new_uuid();
    ctx.state.acl_items.push(AclItem {
        id: id.clone(),
        acl_id,
        protocol,
        start_port,
        end_port,
        cidrs,
        action: action.into(),
        traffic_type: traffic.into(),
        number,
        state: RuleState::Add,
        project,
    });
    Ok(ctx.state.submit(Effect::CreateAclItem { id }, ctx.now))
}

/// `deleteNetworkACL id`: `Revoke` until the job completes; items of system lists stay (431).
pub(super) fn delete_network_acl(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    let id = ctx.live("id", Kind::AclItem)?;
    let Some(item) = ctx.state.acl_item(&id) else {
        return Err(CsError::unknown_id("id", &id));
    };
    if ctx
        .state
        .acl_list(&item.acl_id)
        .is_none_or(|a| a.is_system())
    {
        return Err(CsError::param("ACL Items in default ACL cannot be deleted"));
    }
    let Some(item) = ctx.state.acl_item_mut(&id) else {
        return Err(CsError::unknown_id("id", &id));
    };
    let before = item.state;
    item.state = RuleState::Revoke;
    Ok(ctx
        .state
        .submit(Effect::DeleteAclItem { id, before }, ctx.now))
}
