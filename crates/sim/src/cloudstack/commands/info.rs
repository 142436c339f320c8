//! The management server's version (admin-only metrics, capabilities), zones, projects, and
//! async job results.

use serde_json::{Value, json};

use super::context::{Ctx, Ref, contains_ci, paged};
use crate::cloudstack::error::CsError;
use crate::cloudstack::model::Kind;
use crate::cloudstack::render::{render_project, render_zone};

/// The management server's host name.
const MANAGEMENT_SERVER: &str = "cloudstack-mgmt-1";

/// `listManagementServersMetrics` (root admins only): one server with the version.
pub(super) fn list_management_servers_metrics(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    let page = ctx.page()?;
    let server = json!({
        "id": ctx.state.account.server_id,
        "name": MANAGEMENT_SERVER,
        "state": "Up",
        "version": ctx.state.settings.version,
        "ipaddress": "127.0.0.1",
        "javadistribution": "Ubuntu 21.0.5",
        "osdistribution": "Ubuntu 24.04 LTS",
        "dbislocal": true,
        "usageislocal": true,
    });
    Ok(paged(page, "managementserver", vec![server], |s| s))
}

/// `listCapabilities`, for every account: the fields and JSON types of cloudstack-go's recorded
/// answer (ConfigurationService.json, a 4.15.2.0 server) with this simulator's version.
/// `cloudstackversion` is the only field telling what the server supports (there is no
/// capability for LB `cidrlist`). `defaultuipagesize` is the UI's `default.ui.page.size`
/// (recorded: 20), not the API's `default.page.size` limit, which no user-visible field reports.
pub(super) fn list_capabilities(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    Ok(json!({
        "capability": {
            "securitygroupsenabled": false,
            "dynamicrolesenabled": true,
            "cloudstackversion": ctx.state.settings.version,
            "userpublictemplateenabled": true,
            "supportELB": "false",
            "projectinviterequired": false,
            "allowusercreateprojects": true,
            "customdiskofferingminsize": 1,
            "customdiskofferingmaxsize": 1024,
            "regionsecondaryenabled": false,
            "kvmsnapshotenabled": false,
            "allowuserviewdestroyedvm": false,
            "allowuserexpungerecovervm": false,
            "allowuserexpungerecovervolume": false,
            "allowuserviewalldomainaccounts": false,
            "kubernetesserviceenabled": false,
            "kubernetesclusterexperimentalfeaturesenabled": false,
            "defaultuipagesize": 20,
        }
    }))
}

/// `listZones`: filters `id`, `name`.
pub(super) fn list_zones(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    let page = ctx.page()?;
    let id = match ctx.reference("id", Kind::Zone)? {
        Ref::Removed => return Ok(paged(page, "zone", Vec::<Value>::new(), |v| v)),
        Ref::Live(id) => Some(id),
        Ref::Absent => None,
    };
    let name = ctx.args.opt("name");
    let matches: Vec<_> = ctx
        .state
        .zones
        .iter()
        .filter(|z| id.as_deref().is_none_or(|i| z.id == i))
        .filter(|z| name.is_none_or(|n| z.name.eq_ignore_ascii_case(n)))
        .collect();
    Ok(paged(page, "zone", matches, render_zone))
}

/// `listProjects`: filters `id`, `name` (exact, case-insensitive), `keyword` (substring).
pub(super) fn list_projects(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    let page = ctx.page()?;
    let id = match ctx.reference("id", Kind::Project)? {
        Ref::Removed => return Ok(paged(page, "project", Vec::<Value>::new(), |v| v)),
        Ref::Live(id) => Some(id),
        Ref::Absent => None,
    };
    let name = ctx.args.opt("name");
    let keyword = ctx.args.opt("keyword");
    let state = &*ctx.state;
    let matches: Vec<_> = state
        .projects
        .iter()
        .filter(|p| id.as_deref().is_none_or(|i| p.id == i))
        .filter(|p| name.is_none_or(|n| p.name.eq_ignore_ascii_case(n)))
        .filter(|p| keyword.is_none_or(|k| contains_ci(&p.name, k)))
        .collect();
    Ok(paged(page, "project", matches, |p| {
        render_project(state, p)
    }))
}

/// `queryAsyncJobResult jobid=<uuid>`: counts a poll and reports the job.
pub(super) fn query_async_job_result(ctx: &mut Ctx<'_>) -> Result<Value, CsError> {
    let id = ctx.args.required("jobid")?;
    ctx.state
        .poll(id)
        .ok_or_else(|| CsError::unknown_id("jobid", id))
}
