//! Firewall rules: ingress rules on the public IPs of isolated networks (VPC tiers have network
//! ACLs instead and refuse them).

use serde_json::Value;

use super::context::{Ctx, Ref, cidr_list, paged};
use crate::cloudstack::error::CsError;
use crate::cloudstack::job::Effect;
use crate::cloudstack::model::{FirewallRule, IpState, Kind, RuleState};
use crate::cloudstack::render::render_firewall_rule;
use crate::serving::new_uuid;

/// Firewall rule protocols.
const PROTOCOLS: &[&str] = &["tcp", "udp", "icmp", "all"];

/// `(start, end)` of a protocol that takes ports (`endport` defaults to `startport`), or
/// nothing for one that does not.
fn port_range(ctx: &Ctx<'_>, with_ports: bool) -> Result<(Option<u16>, Option<u16>), CsError> {
    let start = ctx.args.port("startport")?;
    let end = ctx.args.port("endport")?;
    if !with_ports {
        if start.is_some() || end.is_some() {
            return Err(CsError::param(
                "Can specify start/end port only for protocols tcp and udp",
            ));
        }
        return Ok((None, None));
    }
    match (start, end) {
        (None, Some(_)) => Err(CsError::param("Start port is required with an end port")),
        (Some(s), Some(e)) if s > e => Err(CsError::param(format!(
            "Start port can't be bigger than end port: {s} > {e}"
        ))),
        (Some(s), e) => Ok((Some(s), Some(e.unwrap_or(s)))),
        (None, None) => Ok((None, None)),
    }
}

/// The CIDRs as a set, for comparing rules.
fn cidr_set(cidrs: &[String]) -> Vec<&str> {
    let mut set: Vec<&str> = cidrs.iter().map(String::as_str).collect();
    set.sort_unstable();
    set.dedup();
    set
}

/// `listFirewallRules`: filters `id`, `ipaddressid`, `networkid`, project scope.
pub(super) fn list_firewall_rules(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    const KEY: &str = "firewallrule";
    let page = ctx.page()?;
    let scope = ctx.scope()?;
    let empty = || paged(page, KEY, Vec::<Value>::new(), |v| v);
    let id = match ctx.reference("id", Kind::FirewallRule)? {
        Ref::Removed => return Ok(empty()),
        Ref::Live(id) => Some(id),
        Ref::Absent => None,
    };
    let ip = match ctx.reference("ipaddressid", Kind::PublicIp)? {
        Ref::Removed => return Ok(empty()),
        Ref::Live(id) => Some(id),
        Ref::Absent => None,
    };
    let network = ctx.opt_live("networkid", Kind::Network)?;
    let state = &*ctx.state;
    let matches: Vec<_> = state
        .firewall_rules
        .iter()
        .filter(|r| scope.admits(r.project.as_deref()))
        .filter(|r| id.as_deref().is_none_or(|i| r.id == i))
        .filter(|r| ip.as_deref().is_none_or(|i| r.ip_id == i))
        .filter(|r| {
            network.is_none()
                || state
                    .ip(&r.ip_id)
                    .is_some_and(|ip| ip.network_id == network)
        })
        .collect();
    Ok(paged(page, KEY, matches, |r| {
        render_firewall_rule(state, r)
    }))
}

/// `createFirewallRule`: `ipaddressid`, `protocol` (tcp, udp, icmp, all), `startport`/`endport`
/// (tcp and udp only), `cidrlist` (default `0.0.0.0/0`). The address's network needs the
/// `Firewall` service (431 on VPC addresses); a live rule with the same protocol, the same CIDR
/// set and overlapping ports is a conflict (537).
pub(super) fn create_firewall_rule(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    let ip_id = ctx.live("ipaddressid", Kind::PublicIp)?;
    let protocol = ctx.args.required("protocol")?.to_lowercase();
    if !PROTOCOLS.contains(&protocol.as_str()) {
        return Err(CsError::param(format!(
            "Invalid protocol {protocol}: it must be tcp, udp, icmp or all"
        )));
    }
    let with_ports = protocol == "tcp" || protocol == "udp";
    let (start_port, end_port) = port_range(ctx, with_ports)?;
    let cidrs = cidr_list(&ctx.args)?;

    let state = &*ctx.state;
    let Some(ip) = state.ip(&ip_id) else {
        return Err(CsError::unknown_id("ipaddressid", &ip_id));
    };
    if ip.state != IpState::Allocated {
        return Err(CsError::param(format!(
            "Unable to create firewall rule; public IP {} is not allocated (state {})",
            ip.address,
            ip.state.as_str()
        )));
    }
    let network = ip.network_id.as_deref().and_then(|n| state.network(n));
    let firewalled = ip.vpc_id.is_none() && network.is_some_and(|n| n.has_service("Firewall"));
    if !firewalled {
        let where_ = network.map_or_else(|| format!("VPC of {}", ip.address), |n| n.name.clone());
        return Err(CsError::param(format!(
            "Firewall service is not supported in network {where_}"
        )));
    }
    let wanted = cidr_set(&cidrs);
    for rule in state.firewall_rules.iter().filter(|r| {
        r.ip_id == ip_id
            && r.state != RuleState::Revoke
            && r.protocol == protocol
            && cidr_set(&r.cidrs) == wanted
    }) {
        match protocol.as_str() {
            "all" => {
                return Err(CsError::conflict(
                    "There is already a firewall rule specified with protocol = all",
                ));
            }
            "icmp" => {
                return Err(CsError::param(format!(
                    "New rule conflicts with existing rule id={}",
                    rule.seq
                )));
            }
            _ => {}
        }
        if let (Some(s), Some(e), Some(rs), Some(re)) =
            (start_port, end_port, rule.start_port, rule.end_port)
            && s <= re
            && rs <= e
        {
            return Err(CsError::conflict(format!(
                "The range specified, {s}-{e}, conflicts with rule {} which has {rs}-{re}",
                rule.seq
            )));
        }
    }
    let project = ip.project.clone();
    let seq = ctx.state.next_seq();
    let id = new_uuid();
    ctx.state.firewall_rules.push(FirewallRule {
        id: id.clone(),
        seq,
        ip_id,
        protocol,
        start_port,
        end_port,
        cidrs,
        state: RuleState::Add,
        project,
    });
    Ok(ctx.state.submit(Effect::CreateFirewallRule { id }, ctx.now))
}

/// `deleteFirewallRule id`: `Revoke` until the job completes.
pub(super) fn delete_firewall_rule(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    let id = ctx.live("id", Kind::FirewallRule)?;
    let Some(rule) = ctx.state.firewall_rule_mut(&id) else {
        return Err(CsError::unknown_id("id", &id));
    };
    let before = rule.state;
    rule.state = RuleState::Revoke;
    Ok(ctx
        .state
        .submit(Effect::DeleteFirewallRule { id, before }, ctx.now))
}
