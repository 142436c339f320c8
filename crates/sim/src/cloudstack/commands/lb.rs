//! Load-balancer rules and their members.
//!
//! A rule maps one public port of an allocated public IP to a private port on its members (VMs
//! with a NIC on the rule's network). Two live rules on one address may not share a public port,
//! whatever their protocols (537): CloudStack stores every LB rule as a firewall rule of protocol
//! `tcp` (`LoadBalancerVO`'s constructor passes `NetUtils.TCP_PROTO`, the LB protocol is the
//! separate `lb_protocol` column), and `FirewallManagerImpl.detectRulesConflict` has no exception
//! for two LB rules. On a VPC address the first rule decides the tier the address is associated
//! with.

use std::collections::BTreeSet;

use serde_json::Value;

use super::context::{Ctx, Ref, cidr_list, contains_ci, paged};
use crate::cloudstack::error::CsError;
use crate::cloudstack::job::Effect;
use crate::cloudstack::model::{IpState, Kind, LbRule, RuleState, State};
use crate::cloudstack::render::{render_lb_rule, render_vm};
use crate::serving::new_uuid;

/// Balancing algorithms CloudStack accepts.
const ALGORITHMS: &[&str] = &["roundrobin", "leastconn", "source"];
/// Load-balancer protocols CloudStack accepts.
const PROTOCOLS: &[&str] = &["tcp", "udp", "tcp-proxy"];

/// A valid algorithm, as given (CloudStack compares case-insensitively and stores the value).
fn algorithm(value: &str) -> Result<String, CsError> {
    if ALGORITHMS.iter().any(|a| a.eq_ignore_ascii_case(value)) {
        Ok(value.to_string())
    } else {
        Err(CsError::param(format!("Invalid algorithm: {value}")))
    }
}

/// A valid load-balancer protocol, lowercase.
fn protocol(value: &str) -> Result<String, CsError> {
    let lower = value.to_lowercase();
    if PROTOCOLS.contains(&lower.as_str()) {
        Ok(lower)
    } else {
        Err(CsError::param(format!(
            "Invalid protocol {value}: it must be tcp, udp or tcp-proxy"
        )))
    }
}

/// 537 when another live rule on the address uses the public port, whatever the protocols
/// (see the module docs). The text is `FirewallManagerImpl.detectRulesConflict`'s, the
/// conflicting rule shown as `FirewallRuleVO.toString` renders it (`Rule[<id>-<purpose>-<state>]`).
fn check_conflict(state: &State, ip_id: &str, port: u16) -> Result<(), CsError> {
    let clash = state
        .lb_rules
        .iter()
        .find(|r| r.ip_id == ip_id && r.state != RuleState::Revoke && r.public_port == port);
    match clash {
        Some(r) => Err(CsError::conflict(format!(
            "The range specified, {port}-{port}, conflicts with rule Rule[{}-LoadBalancing-{}] which has {}-{}",
            r.seq,
            r.state.as_str(),
            r.public_port,
            r.public_port
        ))),
        None => Ok(()),
    }
}

/// `listLoadBalancerRules`: filters `id`, `name` (substring, like CloudStack's
/// `LIKE '%name%'`), `keyword` (substring of name or description), `publicipid`, `networkid`,
/// `zoneid`, project scope. Matching is case-insensitive, as MySQL's collation is.
pub(super) fn list_load_balancer_rules(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    let page = ctx.page()?;
    let scope = ctx.scope()?;
    let empty = || paged(page, "loadbalancerrule", Vec::<Value>::new(), |v| v);
    let id = match ctx.reference("id", Kind::LbRule)? {
        Ref::Removed => return Ok(empty()),
        Ref::Live(id) => Some(id),
        Ref::Absent => None,
    };
    let ip = match ctx.reference("publicipid", Kind::PublicIp)? {
        Ref::Removed => return Ok(empty()),
        Ref::Live(id) => Some(id),
        Ref::Absent => None,
    };
    let network = ctx.opt_live("networkid", Kind::Network)?;
    let zone = ctx.opt_live("zoneid", Kind::Zone)?;
    let name = ctx.args.opt("name");
    let keyword = ctx.args.opt("keyword");
    let state = &*ctx.state;
    let matches: Vec<_> = state
        .lb_rules
        .iter()
        .filter(|r| scope.admits(r.project.as_deref()))
        .filter(|r| id.as_deref().is_none_or(|i| r.id == i))
        .filter(|r| ip.as_deref().is_none_or(|i| r.ip_id == i))
        .filter(|r| network.as_deref().is_none_or(|n| r.network_id == n))
        .filter(|r| zone.as_deref().is_none_or(|z| r.zone_id == z))
        .filter(|r| name.is_none_or(|n| contains_ci(&r.name, n)))
        .filter(|r| {
            keyword.is_none_or(|k| {
                contains_ci(&r.name, k)
                    || r.description.as_deref().is_some_and(|d| contains_ci(d, k))
            })
        })
        .collect();
    Ok(paged(page, "loadbalancerrule", matches, |r| {
        render_lb_rule(state, r)
    }))
}

/// `createLoadBalancerRule`: `name`, `algorithm`, `privateport`, `publicport`, `publicipid`,
/// `networkid` (default: the address's network), `protocol` (default tcp), `cidrlist`
/// (4.18+; default none, i.e. open to all), `description`; `openfirewall` is accepted and
/// ignored.
pub(super) fn create_load_balancer_rule(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    let name = ctx.args.required("name")?.to_string();
    let algorithm = algorithm(ctx.args.required("algorithm")?)?;
    ctx.args.required("privateport")?;
    ctx.args.required("publicport")?;
    let private_port = ctx.args.port("privateport")?.unwrap_or_default();
    let public_port = ctx.args.port("publicport")?.unwrap_or_default();
    let protocol = protocol(ctx.args.opt("protocol").unwrap_or("tcp"))?;
    let ip_id = ctx.live("publicipid", Kind::PublicIp)?;
    let network_param = ctx.opt_live("networkid", Kind::Network)?;
    // Before 4.18 `CreateLoadBalancerRuleCmd.create()` refuses a non-empty `cidrlist` with
    // `InvalidParameterValueException` (431, cserrorcode 4350; the text as in its source and in
    // apache/cloudstack#4036); 4.18 took it again (apache/cloudstack#6460). Without it the rule
    // stores no CIDRs and renders `"cidrlist": ""` (cloudstack-go's recorded
    // LoadBalancerService.json, createLoadBalancerRule on 4.15).
    let cidrs = match ctx.args.opt("cidrlist") {
        Some(_) if !ctx.state.settings.at_least(4, 18) => {
            return Err(CsError::param(
                "Parameter cidrList is deprecated; if you need to open firewall rule for the \
                 specific CIDR, please refer to createFirewallRule command",
            ));
        }
        Some(_) => cidr_list(&ctx.args)?,
        None => Vec::new(),
    };
    let description = ctx.args.opt("description").map(str::to_string);

    let state = &*ctx.state;
    let Some(ip) = state.ip(&ip_id) else {
        return Err(CsError::unknown_id("publicipid", &ip_id));
    };
    if ip.state != IpState::Allocated {
        return Err(CsError::param(format!(
            "Unable to create load balancer rule; public IP {} is not allocated (state {})",
            ip.address,
            ip.state.as_str()
        )));
    }
    let network_id = match network_param.or_else(|| ip.network_id.clone()) {
        Some(n) => n,
        None => {
            return Err(CsError::param(format!(
                "Unable to create load balancer rule; public IP {} is not associated with a \
                 network: specify networkid",
                ip.address
            )));
        }
    };
    let Some(network) = state.network(&network_id) else {
        return Err(CsError::unknown_id("networkid", &network_id));
    };
    match &network.vpc_id {
        Some(vpc) => {
            if ip.vpc_id.as_ref() != Some(vpc) {
                return Err(CsError::param(format!(
                    "Public IP {} does not belong to the VPC of network {}",
                    ip.address, network.name
                )));
            }
            if let Some(other) = ip.network_id.as_deref().filter(|n| *n != network_id) {
                return Err(CsError::param(format!(
                    "Public IP {} is already associated with network {other} of the VPC; its \
                     load balancer rules must be on that network",
                    ip.address
                )));
            }
        }
        None => {
            if ip.network_id.as_deref() != Some(network_id.as_str()) {
                return Err(CsError::param(format!(
                    "Public IP {} is not associated with network {}",
                    ip.address, network.name
                )));
            }
        }
    }
    check_conflict(state, &ip_id, public_port)?;
    let (project, zone_id) = (ip.project.clone(), ip.zone_id.clone());

    let seq = ctx.state.next_seq();
    let id = new_uuid();
    ctx.state.lb_rules.push(LbRule {
        id: id.clone(),
        seq,
        name,
        description,
        algorithm,
        protocol,
        ip_id: ip_id.clone(),
        public_port,
        private_port,
        network_id: network_id.clone(),
        cidrs,
        state: RuleState::Add,
        project,
        zone_id,
        members: BTreeSet::new(),
    });
    // A VPC address serves the tier of its first rule from now on.
    if let Some(ip) = ctx.state.ip_mut(&ip_id)
        && ip.network_id.is_none()
    {
        ip.network_id = Some(network_id);
    }
    Ok(ctx.state.submit(Effect::CreateLbRule { id }, ctx.now))
}

/// `updateLoadBalancerRule id` with any of `algorithm`, `protocol`, `cidrlist` (4.22+), `name`,
/// `description`: the new values show at once (state `Add`); a failed job restores the old.
pub(super) fn update_load_balancer_rule(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    let id = ctx.live("id", Kind::LbRule)?;
    let algorithm = ctx.args.opt("algorithm").map(algorithm).transpose()?;
    let protocol = ctx.args.opt("protocol").map(protocol).transpose()?;
    // `cidrlist` on updateLoadBalancerRule arrived in 4.22 (apache/cloudstack#11568,
    // `since = "4.22"`); before, it is an unknown parameter, which the management server only
    // logs (`ParamGenericValidationWorker`) and otherwise ignores.
    let cidrs = match ctx.args.list("cidrlist") {
        Some(_) if ctx.state.settings.at_least(4, 22) => Some(cidr_list(&ctx.args)?),
        _ => None,
    };
    let name = ctx.args.opt("name").map(str::to_string);
    let description = ctx.args.opt("description").map(str::to_string);
    let Some(before) = ctx.state.lb_rule(&id).cloned() else {
        return Err(CsError::unknown_id("id", &id));
    };
    if let Some(rule) = ctx.state.lb_rule_mut(&id) {
        if let Some(a) = algorithm {
            rule.algorithm = a;
        }
        if let Some(p) = protocol {
            rule.protocol = p;
        }
        if let Some(c) = cidrs {
            rule.cidrs = c;
        }
        if let Some(n) = name {
            rule.name = n;
        }
        if description.is_some() {
            rule.description = description;
        }
        if rule.state == RuleState::Active {
            rule.state = RuleState::Add;
        }
    }
    let effect = Effect::UpdateLbRule {
        id,
        before: Box::new(before),
    };
    Ok(ctx.state.submit(effect, ctx.now))
}

/// `deleteLoadBalancerRule id`: `Revoke` until the job completes.
pub(super) fn delete_load_balancer_rule(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    let id = ctx.live("id", Kind::LbRule)?;
    let Some(rule) = ctx.state.lb_rule_mut(&id) else {
        return Err(CsError::unknown_id("id", &id));
    };
    let before = rule.state;
    rule.state = RuleState::Revoke;
    Ok(ctx
        .state
        .submit(Effect::DeleteLbRule { id, before }, ctx.now))
}

/// The rule `id` and the VMs of `virtualmachineids` (every one must exist), deduplicated.
fn rule_and_vms(ctx: &Ctx<'_>) -> Result<(LbRule, Vec<String>), CsError> {
    let id = ctx.live("id", Kind::LbRule)?;
    let Some(rule) = ctx.state.lb_rule(&id).cloned() else {
        return Err(CsError::unknown_id("id", &id));
    };
    let vms = ctx.args.list("virtualmachineids").unwrap_or_default();
    if vms.is_empty() {
        return Err(CsError::missing(ctx.args.command, "virtualmachineids"));
    }
    let mut unique: Vec<String> = Vec::new();
    for vm in vms {
        if ctx.state.vm(&vm).is_none() {
            return Err(CsError::unknown_id("virtualmachineids", &vm));
        }
        if !unique.contains(&vm) {
            unique.push(vm);
        }
    }
    Ok((rule, unique))
}

/// `assignToLoadBalancerRule id virtualmachineids`. Only the parameters are checked when the
/// command is accepted (the rule and every VM UUID must resolve: `ParamProcessWorker`, which
/// runs before an async command is queued, `ApiServer.queueCommand`); the checks on the VMs
/// themselves are `LoadBalancingRulesManagerImpl.assignToLoadBalancer`'s, which runs inside the
/// job (`AssignToLoadBalancerRuleCmd.execute`), so they fail the job: see [`assign_refusal`].
pub(super) fn assign_to_load_balancer_rule(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    let (rule, vms) = rule_and_vms(ctx)?;
    let effect = Effect::Assign { id: rule.id, vms };
    Ok(ctx.state.submit(effect, ctx.now))
}

/// Why CloudStack refuses to add `vms` to `rule` when the job runs, or None. The whole
/// assignment is refused for the first bad VM (nothing is added), in
/// `LoadBalancingRulesManagerImpl.assignToLoadBalancer`'s order and words; the job fails with
/// 431 (`ApiAsyncJobDispatcher.runJob` turns its `InvalidParameterValueException` into
/// `PARAM_ERROR`) and, as there, the `errortext` does not say which VM it was:
///
/// 1. a VM that is gone, `Destroyed` or `Expunging`: "Invalid instance id specified";
/// 2. `RulesManagerImpl.checkRuleAndUserVm`: a VM of another owner (here: another project)
///    than the rule's: "New rule … and vm id=… belong to different accounts";
/// 3. no NIC on the rule's network: "VM with id specified cannot be added because it doesn't
///    belong in the same network.";
/// 4. a VM already mapped with that address: "VM <id> with <ip> is already mapped to load
///    balancer.".
///
/// Where CloudStack prints its internal numeric ids, the UUIDs are shown (the simulator has no
/// numeric VM ids).
pub(crate) fn assign_refusal(state: &State, rule: &LbRule, vms: &[String]) -> Option<String> {
    for id in vms {
        let Some(vm) = state
            .vm(id)
            .filter(|vm| !["Destroyed", "Expunging"].contains(&vm.state.as_str()))
        else {
            return Some("Invalid instance id specified".into());
        };
        if vm.project != rule.project {
            return Some(format!(
                "New rule Rule[{}-LoadBalancing-{}] and vm id={id} belong to different accounts",
                rule.seq,
                rule.state.as_str()
            ));
        }
        let Some(nic) = vm.nics.iter().find(|n| n.network_id == rule.network_id) else {
            return Some(
                "VM with id specified cannot be added because it doesn't belong in the same \
                 network."
                    .into(),
            );
        };
        if rule.members.contains(id) {
            return Some(format!(
                "VM {id} with {} is already mapped to load balancer.",
                nic.ip
            ));
        }
    }
    None
}

/// `removeFromLoadBalancerRule id virtualmachineids`: each VM must be a member (431); members
/// change when the job completes.
pub(super) fn remove_from_load_balancer_rule(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    let (rule, vms) = rule_and_vms(ctx)?;
    if let Some(id) = vms.iter().find(|v| !rule.members.contains(*v)) {
        return Err(CsError::param(format!(
            "VM {id} is not assigned to load balancer rule {}",
            rule.id
        )));
    }
    let effect = Effect::Remove { id: rule.id, vms };
    Ok(ctx.state.submit(effect, ctx.now))
}

/// `listLoadBalancerRuleInstances id`: the members as full VM objects
/// (`loadbalancerruleinstance`); `applied=false` lists the VMs on the rule's network that are
/// not members. The rule is found whatever its project.
pub(super) fn list_load_balancer_rule_instances(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    const KEY: &str = "loadbalancerruleinstance";
    // A missing `id` is ParamProcessWorker's refusal, which comes before BaseListCmd's
    // paging rule (SpecificCmdValidationWorker).
    ctx.args.required("id")?;
    let page = ctx.page()?;
    let id = match ctx.reference("id", Kind::LbRule)? {
        Ref::Live(id) => id,
        Ref::Removed | Ref::Absent => return Ok(paged(page, KEY, Vec::<Value>::new(), |v| v)),
    };
    let applied = ctx.args.flag("applied", true);
    let state = &*ctx.state;
    let Some(rule) = state.lb_rule(&id) else {
        return Ok(paged(page, KEY, Vec::<Value>::new(), |v| v));
    };
    let matches: Vec<_> = state
        .vms
        .iter()
        .filter(|vm| {
            if applied {
                rule.members.contains(&vm.id)
            } else {
                vm.on_network(&rule.network_id) && !rule.members.contains(&vm.id)
            }
        })
        .collect();
    Ok(paged(page, KEY, matches, |vm| render_vm(state, vm)))
}
