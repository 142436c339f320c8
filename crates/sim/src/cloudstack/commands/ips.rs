//! Public IP addresses: each zone has a pool; an address is allocated for an isolated network
//! (associated with it at once) or a VPC (associated with a tier by its first load-balancer
//! rule), and released with its rules.

use serde_json::Value;

use super::context::{Ctx, Ref, paged};
use super::tags::TagFilter;
use crate::cloudstack::error::CsError;
use crate::cloudstack::job::Effect;
use crate::cloudstack::model::{IpState, Kind, RuleState};
use crate::cloudstack::render::render_ip;

/// `listPublicIpAddresses`: filters `id`, `ipaddress`, `allocatedonly` (default true: free
/// addresses only with `allocatedonly=false`, whatever the project scope), `associatednetworkid`,
/// `vpcid`, `zoneid`, `issourcenat`, `isstaticnat`, `tags[i].key/value` (any pair matches; see
/// `tags.rs`), project scope.
pub(super) fn list_public_ip_addresses(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    const KEY: &str = "publicipaddress";
    let page = ctx.page()?;
    let scope = ctx.scope()?;
    let id = match ctx.reference("id", Kind::PublicIp)? {
        Ref::Removed => return Ok(paged(page, KEY, Vec::<Value>::new(), |v| v)),
        Ref::Live(id) => Some(id),
        Ref::Absent => None,
    };
    let network = ctx.opt_live("associatednetworkid", Kind::Network)?;
    let vpc = ctx.opt_live("vpcid", Kind::Vpc)?;
    let zone = ctx.opt_live("zoneid", Kind::Zone)?;
    let address = ctx.args.opt("ipaddress");
    let allocated_only = ctx.args.flag("allocatedonly", true);
    let source_nat = ctx
        .args
        .opt("issourcenat")
        .map(|v| v.eq_ignore_ascii_case("true"));
    let static_nat = ctx
        .args
        .opt("isstaticnat")
        .map(|v| v.eq_ignore_ascii_case("true"));
    let tagged = TagFilter::of(ctx);
    let state = &*ctx.state;
    let matches: Vec<_> = state
        .ips
        .iter()
        .filter(|ip| {
            if ip.state == IpState::Free {
                !allocated_only
            } else {
                scope.admits(ip.project.as_deref())
            }
        })
        .filter(|ip| id.as_deref().is_none_or(|i| ip.id == i))
        .filter(|ip| address.is_none_or(|a| ip.address == a))
        .filter(|ip| network.is_none() || ip.network_id == network)
        .filter(|ip| vpc.is_none() || ip.vpc_id == vpc)
        .filter(|ip| zone.as_deref().is_none_or(|z| ip.zone_id == z))
        .filter(|ip| source_nat.is_none_or(|s| ip.source_nat == s))
        .filter(|ip| static_nat.is_none_or(|s| ip.static_nat_vm.is_some() == s))
        .filter(|ip| tagged.admits(state, "PublicIpAddress", &ip.id))
        .collect();
    Ok(paged(page, KEY, matches, |ip| render_ip(state, ip)))
}

/// `associateIpAddress`: `networkid` (isolated network or VPC tier) or `vpcid`, optional
/// `ipaddress` (a free address of the zone's pool; default the first free one) and
/// `projectid` (must match the network's or VPC's owner). `Allocating` until the job completes.
pub(super) fn associate_ip_address(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    let network_id = ctx.opt_live("networkid", Kind::Network)?;
    let vpc_id = ctx.opt_live("vpcid", Kind::Vpc)?;
    let project = ctx.opt_live("projectid", Kind::Project)?;
    let state = &*ctx.state;
    // (zone, owner, associated network, VPC) of the new address.
    let (zone_id, owner, associated, vpc) = match (&network_id, &vpc_id) {
        (Some(_), Some(_)) => {
            return Err(CsError::param(
                "Specify either networkid or vpcid, not both",
            ));
        }
        (None, None) => return Err(CsError::param("Either networkid or vpcid is required")),
        (Some(n), None) => {
            let Some(network) = state.network(n) else {
                return Err(CsError::unknown_id("networkid", n));
            };
            (
                network.zone_id.clone(),
                network.project.clone(),
                Some(n.clone()),
                network.vpc_id.clone(),
            )
        }
        (None, Some(v)) => {
            let Some(vpc) = state.vpc(v) else {
                return Err(CsError::unknown_id("vpcid", v));
            };
            (
                vpc.zone_id.clone(),
                vpc.project.clone(),
                None,
                Some(v.clone()),
            )
        }
    };
    if project != owner {
        let whose = |p: &Option<String>| match p {
            Some(p) => format!("project {p}"),
            None => "the account".to_string(),
        };
        return Err(CsError::param(format!(
            "Unable to associate an IP address for {}: the network belongs to {}",
            whose(&project),
            whose(&owner)
        )));
    }
    let zone_name = state
        .zone(&zone_id)
        .map(|z| z.name.clone())
        .unwrap_or_default();
    let index = match ctx.args.opt("ipaddress") {
        Some(address) => {
            let Some(index) = state
                .ips
                .iter()
                .position(|ip| ip.zone_id == zone_id && ip.address == address)
            else {
                return Err(CsError::param(format!(
                    "Unable to find public IP address {address} in zone {zone_name}"
                )));
            };
            if state.ips[index].state != IpState::Free {
                return Err(CsError::param(format!(
                    "IP address {address} is already allocated"
                )));
            }
            index
        }
        None => state
            .ips
            .iter()
            .position(|ip| ip.zone_id == zone_id && ip.state == IpState::Free)
            .ok_or_else(|| {
                CsError::no_address(format!(
                    "Insufficient address capacity: no free public IP address in zone {zone_name}"
                ))
            })?,
    };
    let ip = &mut ctx.state.ips[index];
    ip.state = IpState::Allocating;
    ip.project = project;
    ip.network_id = associated;
    ip.vpc_id = vpc;
    let id = ip.id.clone();
    Ok(ctx.state.submit(Effect::Associate { id }, ctx.now))
}

/// `disassociateIpAddress id`: `Releasing` (its load-balancer and firewall rules `Revoke`)
/// until the job completes, then free with those rules gone. A source NAT address cannot be
/// released (431); a free one is a successful no-op, as in CloudStack.
pub(super) fn disassociate_ip_address(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    let id = ctx.live("id", Kind::PublicIp)?;
    let Some(ip) = ctx.state.ip(&id) else {
        return Err(CsError::unknown_id("id", &id));
    };
    if ip.source_nat {
        return Err(CsError::param("Can't release source nat ip address"));
    }
    let before = ip.state;
    let mut lb_rules = Vec::new();
    let mut firewall_rules = Vec::new();
    if before != IpState::Free {
        for rule in ctx.state.lb_rules.iter_mut().filter(|r| r.ip_id == id) {
            lb_rules.push((rule.id.clone(), rule.state));
            rule.state = RuleState::Revoke;
        }
        for rule in ctx
            .state
            .firewall_rules
            .iter_mut()
            .filter(|r| r.ip_id == id)
        {
            firewall_rules.push((rule.id.clone(), rule.state));
            rule.state = RuleState::Revoke;
        }
        if let Some(ip) = ctx.state.ip_mut(&id) {
            ip.state = IpState::Releasing;
        }
    }
    let effect = Effect::Disassociate {
        id,
        before,
        lb_rules,
        firewall_rules,
    };
    Ok(ctx.state.submit(effect, ctx.now))
}
