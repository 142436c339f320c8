//! Reading VMs and guest networks.

use serde_json::Value;

use super::context::{Ctx, Ref, contains_ci, paged};
use crate::cloudstack::error::CsError;
use crate::cloudstack::model::Kind;
use crate::cloudstack::render::{render_network, render_vm};

/// `listVirtualMachines`: filters `id`, `name` (case-insensitive substring, like SQL `LIKE`, so
/// callers must pick the exact match themselves), `keyword` (name or display name), `state`,
/// `zoneid`, `networkid`, project scope; `listall` and `details` change nothing.
pub(super) fn list_virtual_machines(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    let page = ctx.page()?;
    let scope = ctx.scope()?;
    let id = match ctx.reference("id", Kind::Vm)? {
        Ref::Removed => return Ok(paged(page, "virtualmachine", Vec::<Value>::new(), |v| v)),
        Ref::Live(id) => Some(id),
        Ref::Absent => None,
    };
    let zone = ctx.opt_live("zoneid", Kind::Zone)?;
    let network = ctx.opt_live("networkid", Kind::Network)?;
    let name = ctx.args.opt("name");
    let keyword = ctx.args.opt("keyword");
    let vm_state = ctx.args.opt("state");
    let state = &*ctx.state;
    let matches: Vec<_> = state
        .vms
        .iter()
        .filter(|vm| scope.admits(vm.project.as_deref()))
        .filter(|vm| id.as_deref().is_none_or(|i| vm.id == i))
        .filter(|vm| name.is_none_or(|n| contains_ci(&vm.name, n)))
        .filter(|vm| {
            keyword.is_none_or(|k| contains_ci(&vm.name, k) || contains_ci(&vm.display_name, k))
        })
        .filter(|vm| vm_state.is_none_or(|s| vm.state.eq_ignore_ascii_case(s)))
        .filter(|vm| zone.as_deref().is_none_or(|z| vm.zone_id == z))
        .filter(|vm| network.as_deref().is_none_or(|n| vm.on_network(n)))
        .collect();
    Ok(paged(page, "virtualmachine", matches, |vm| {
        render_vm(state, vm)
    }))
}

/// `listNetworks`: filters `id`, `vpcid`, `zoneid`, `forvpc`, `keyword`/`name` (substring),
/// `supportedservices` (all of them), project scope.
pub(super) fn list_networks(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    let page = ctx.page()?;
    let scope = ctx.scope()?;
    let id = match ctx.reference("id", Kind::Network)? {
        Ref::Removed => return Ok(paged(page, "network", Vec::<Value>::new(), |v| v)),
        Ref::Live(id) => Some(id),
        Ref::Absent => None,
    };
    let vpc = ctx.opt_live("vpcid", Kind::Vpc)?;
    let zone = ctx.opt_live("zoneid", Kind::Zone)?;
    let for_vpc = ctx
        .args
        .opt("forvpc")
        .map(|v| v.eq_ignore_ascii_case("true"));
    let keyword = ctx.args.opt("keyword").or(ctx.args.opt("name"));
    let services = ctx.args.list("supportedservices").unwrap_or_default();
    let state = &*ctx.state;
    let matches: Vec<_> = state
        .networks
        .iter()
        .filter(|n| scope.admits(n.project.as_deref()))
        .filter(|n| id.as_deref().is_none_or(|i| n.id == i))
        .filter(|n| vpc.is_none() || n.vpc_id == vpc)
        .filter(|n| zone.as_deref().is_none_or(|z| n.zone_id == z))
        .filter(|n| for_vpc.is_none_or(|f| n.vpc_id.is_some() == f))
        .filter(|n| keyword.is_none_or(|k| contains_ci(&n.name, k)))
        .filter(|n| services.iter().all(|s| n.has_service(s)))
        .collect();
    Ok(paged(page, "network", matches, |n| {
        render_network(state, n)
    }))
}
