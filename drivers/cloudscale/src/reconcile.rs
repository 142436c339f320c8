//! Drives the load balancer towards the desired state, one pass at a time (upstream
//! `reconcileLbState` in `reconcile.go`).
//!
//! Upstream loops inside one call and sleeps 5–7.5 s whenever the load balancer is busy. A driver
//! call must not sleep, so a busy load balancer ends the call with `retry-after` and the host
//! calls again; everything else runs in up to [`MAX_PASSES`] passes of one call, each pass
//! re-reading the cloud so a retried call always starts from what really exists.

use serde_json::json;
use wasm_ccm_sdk::http::encode_path_segment;
use wasm_ccm_sdk::types::ProviderError;
use wasm_ccm_sdk::{cluster, log};

use crate::api::{self, Api};
use crate::desired::DesiredLb;
use crate::model::{FloatingIp, Listener, LoadBalancer, Member, Monitor, Pool, pool_uuid};
use crate::plan::{self, PoolState};

/// Passes per call: create, pools, children, in-place changes, and slack for a concurrent edit.
pub const MAX_PASSES: usize = 6;

/// How long the host waits before calling again while the load balancer is busy; upstream waits
/// 5–7.5 s between passes.
pub const BUSY_RETRY_SECONDS: u32 = 5;

/// The status of a load balancer that is still being built or changed.
const CHANGING: &str = "changing";

/// Finds the Service's load balancer: by the UUID annotation and by name, as upstream. An API
/// error is an error (upstream dropped lookup errors and could create a duplicate during an
/// outage); two different load balancers are an error.
pub fn find(api: &Api, uuid: &str, name: &str) -> Result<Option<LoadBalancer>, ProviderError> {
    let mut found: Vec<LoadBalancer> = Vec::new();
    if !uuid.is_empty() {
        let path = format!("load-balancers/{}", encode_path_segment(uuid));
        if let Some(lb) = api.get_optional::<LoadBalancer>(&path)? {
            found.push(lb);
        }
    } else if name.is_empty() {
        return Err(ProviderError::invalid_config(
            "the load balancer has neither a UUID nor a name to look it up by",
        ));
    }
    if !name.is_empty() {
        let all: Vec<LoadBalancer> = api.get("load-balancers")?;
        for lb in all.into_iter().filter(|lb| lb.name == name) {
            if !found.iter().any(|f| f.uuid == lb.uuid) {
                found.push(lb);
            }
        }
    }
    if found.len() > 1 {
        return Err(ProviderError::permanent(format!(
            "found more than one load balancer for this Service ({}): the UUID annotation and the \
             name point at different load balancers, or several share the name {name:?}; delete \
             the wrong one or fix k8s.cloudscale.ch/loadbalancer-uuid",
            found
                .iter()
                .map(|l| format!("{} {:?}", l.uuid, l.name))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(found.pop())
}

fn busy(lb: &LoadBalancer) -> ProviderError {
    ProviderError::retry_after(
        BUSY_RETRY_SECONDS,
        format!("load balancer {} ({}) is {CHANGING}", lb.name, lb.uuid),
    )
}

/// A refused request on `lb` or its children. The real API's answer to a change of a busy load
/// balancer is unknown (README, "Assumptions"), so whatever the status, if the load balancer
/// reads `changing` now the refusal is taken as "busy" and the call ends with `retry-after`;
/// otherwise the error stands. `retry-after`, `not-found` and rate limits are kept as they are.
fn busy_or(api: &Api, lb: &LoadBalancer, e: ProviderError) -> ProviderError {
    if !matches!(
        e,
        ProviderError::InvalidConfig(_) | ProviderError::Permanent(_) | ProviderError::Transient(_)
    ) {
        return e;
    }
    let path = format!("load-balancers/{}", encode_path_segment(&lb.uuid));
    match api.get_optional::<LoadBalancer>(&path) {
        Ok(Some(now)) if now.status == CHANGING => busy(&now),
        _ => e,
    }
}

/// Creates or changes the load balancer until it matches `desired`; returns it.
///
/// A member the API refuses with a 400 is left out for the rest of the call (with a
/// `MembersRefused` Warning event naming it), so one bad member does not keep the good ones
/// from being added; the next call tries it again. A pool whose every wanted member was
/// refused is reconciled like the others, but the call then ends with `invalid-config` naming
/// it: its old members were deleted, so reporting success would hide a pool with no backend.
/// A 409 or 423 (a race with another client) is answered by reading the state again in the
/// next pass, never taken as a definite failure.
pub fn ensure(api: &Api, uuid: &str, desired: &DesiredLb) -> Result<LoadBalancer, ProviderError> {
    let mut desired = desired.clone();
    let mut emptied = Vec::new();
    for _ in 0..MAX_PASSES {
        let lb = match find(api, uuid, &desired.name)? {
            Some(lb) => lb,
            None => {
                check_before_create(api, &desired)?;
                let created: LoadBalancer =
                    api.post("load-balancers", &desired.create_request())?;
                log::info(
                    "created load balancer",
                    &[("name", &created.name), ("uuid", &created.uuid)],
                );
                // The API answers `changing`; the next pass looks again and ends the call with
                // retry-after if it still is.
                continue;
            }
        };
        if lb.status == CHANGING {
            return Err(busy(&lb));
        }
        if let Some(why) = plan::refusal(&desired, &lb) {
            return Err(ProviderError::invalid_config(why));
        }
        if lb.name != desired.name {
            api.patch(
                &format!("load-balancers/{}", lb.uuid),
                &json!({"name": desired.name}),
            )
            .map_err(|e| busy_or(api, &lb, e))?;
        }
        let mut refused = Vec::new();
        match pass(api, &desired, &lb, &mut refused) {
            Ok(Pass::Done) if emptied.is_empty() => return Ok(lb),
            Ok(Pass::Done) => {
                return Err(ProviderError::invalid_config(format!(
                    "the cloudscale API refused every member of {}, so no node gets traffic \
                     through it (the rest of load balancer {:?} is in place); check the nodes' \
                     private addresses and subnets",
                    emptied.join("; "),
                    desired.name
                )));
            }
            Ok(Pass::Again) => {}
            Err(e) if api::is_conflict(&e) => {
                log::warn(
                    "a change raced with another client; reading the state again",
                    &[("lb", &lb.name), ("error", &e.to_string())],
                );
            }
            Err(e) => return Err(busy_or(api, &lb, e)),
        }
        emptied.extend(leave_out_refused(&mut desired, &refused));
    }
    // Not retry-after: a difference that never settles must show up as a Warning event.
    Err(ProviderError::transient(format!(
        "load balancer {:?} still differs from the Service after {MAX_PASSES} passes of changes; \
         something (another client, or an API that rewrites a value) keeps changing it",
        desired.name
    )))
}

/// What can be checked before a billed load balancer is created: every floating IP the Service
/// names exists in the account. (Flavor, zone and VIP subnets are checked by the create request
/// itself, which the API refuses as a whole.)
fn check_before_create(api: &Api, desired: &DesiredLb) -> Result<(), ProviderError> {
    if desired.floating_ips.is_empty() {
        return Ok(());
    }
    let all: Vec<FloatingIp> = api.get("floating-ips")?;
    let absent = plan::absent_floating_ips(desired, &all);
    if absent.is_empty() {
        return Ok(());
    }
    Err(ProviderError::invalid_config(format!(
        "floating IPs {} from k8s.cloudscale.ch/loadbalancer-floating-ips do not exist in this \
         cloudscale account, so no load balancer was created; create them first or remove them \
         from the annotation",
        absent.join(", ")
    )))
}

/// A member the API refused: the pool, the member and the API's answer.
struct Refused {
    pool: String,
    member: String,
    why: String,
}

/// Drops the refused members from `desired` for the rest of the call and reports them in one
/// Warning event. Returns each pool left with no wanted member by it (`pool P: the API's
/// answer`), which the call must not report as a success.
fn leave_out_refused(desired: &mut DesiredLb, refused: &[Refused]) -> Vec<String> {
    let mut emptied = Vec::new();
    if refused.is_empty() {
        return emptied;
    }
    for pool in &mut desired.pools {
        let here: Vec<&Refused> = refused.iter().filter(|r| r.pool == pool.name).collect();
        if here.is_empty() {
            continue;
        }
        pool.members
            .retain(|m| !here.iter().any(|r| r.member == m.name));
        if pool.members.is_empty() {
            emptied.push(format!(
                "pool {} ({})",
                pool.name,
                here.iter()
                    .map(|r| format!("{}: {}", r.member, r.why))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
    }
    cluster::warning(
        "MembersRefused",
        &format!(
            "the cloudscale API refused these pool members, which are left out until the next \
             reconcile (the other members are kept): {}; check the nodes' private addresses \
             and subnets",
            refused
                .iter()
                .map(|r| format!("{} in pool {}: {}", r.member, r.pool, r.why))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    );
    emptied
}

#[derive(PartialEq, Eq)]
enum Pass {
    Done,
    Again,
}

/// One pass over pools, children, in-place changes and floating IPs. Members the API refuses
/// are added to `refused` (the pass then asks for another).
fn pass(
    api: &Api,
    desired: &DesiredLb,
    lb: &LoadBalancer,
    refused: &mut Vec<Refused>,
) -> Result<Pass, ProviderError> {
    let state = fetch(api, lb)?;
    let pools = plan::plan_pools(desired, &state);
    if !pools.is_empty() {
        for obsolete in &pools.delete {
            for member in &obsolete.members {
                api.delete_href(&member.href)?;
            }
            api.delete_href(&obsolete.pool.href)?;
        }
        for pool in &pools.create {
            api.post::<_, Pool>(
                "load-balancers/pools",
                &json!({
                    "name": pool.name,
                    "load_balancer": lb.uuid,
                    "algorithm": pool.algorithm,
                    "protocol": pool.protocol,
                }),
            )?;
        }
        return Ok(Pass::Again);
    }

    let mut changed = false;
    for want in &desired.pools {
        let Some(have) = state.iter().find(|s| s.pool.name == want.name) else {
            continue;
        };
        let mut children = plan::plan_children(want, have);
        // A node matched ambiguously: its members are neither added nor removed.
        children
            .delete_members
            .retain(|m| !desired.keep_members_at.contains(&m.address));
        for m in &children.delete_members {
            api.delete_href(&m.href)?;
        }
        for l in &children.delete_listeners {
            api.delete_href(&l.href)?;
        }
        for m in &children.delete_monitors {
            api.delete_href(&m.href)?;
        }
        // Upstream pauses 5 s between deletes and creates so the load balancer settles; look
        // instead, and come back later if it is busy.
        if children.deletes() && children.creates() {
            let path = format!("load-balancers/{}", lb.uuid);
            if let Some(now) = api.get_optional::<LoadBalancer>(&path)?
                && now.status == CHANGING
            {
                return Err(busy(&now));
            }
        }
        let pool = &have.pool.uuid;
        for m in &children.create_members {
            let created = api.post::<_, Member>(
                &format!("load-balancers/pools/{pool}/members"),
                &json!({
                    "name": m.name,
                    "protocol_port": m.protocol_port,
                    "monitor_port": m.monitor_port,
                    "address": m.address,
                    "subnet": m.subnet,
                }),
            );
            match created {
                Ok(_) => {}
                // A 400 that is not "busy" refuses this member only (its address or subnet);
                // a busy load balancer refuses everything, so that is checked first.
                Err(e @ ProviderError::InvalidConfig(_)) => match busy_or(api, lb, e) {
                    ProviderError::InvalidConfig(why) => refused.push(Refused {
                        pool: want.name.clone(),
                        member: m.name.clone(),
                        why,
                    }),
                    other => return Err(other),
                },
                Err(e) => return Err(e),
            }
        }
        for l in &children.create_listeners {
            api.post::<_, Listener>(
                "load-balancers/listeners",
                &json!({
                    "pool": pool,
                    "name": l.name,
                    "protocol": l.protocol,
                    "protocol_port": l.protocol_port,
                    "allowed_cidrs": l.allowed_cidrs,
                    "timeout_client_data_ms": l.timeout_client_data_ms,
                    "timeout_member_connect_ms": l.timeout_member_connect_ms,
                    "timeout_member_data_ms": l.timeout_member_data_ms,
                }),
            )?;
        }
        for m in &children.create_monitors {
            api.post::<_, Monitor>(
                "load-balancers/health-monitors",
                &json!({
                    "pool": pool,
                    "delay_s": m.delay_s,
                    "timeout_s": m.timeout_s,
                    "up_threshold": m.up_threshold,
                    "down_threshold": m.down_threshold,
                    "type": m.kind,
                    "http": m.http.as_ref().map_or_else(|| json!({}), |h| json!(h)),
                }),
            )?;
        }
        changed |= children.deletes() || children.creates();
    }
    if changed || !refused.is_empty() {
        return Ok(Pass::Again);
    }

    for want in &desired.pools {
        if let Some(have) = state.iter().find(|s| s.pool.name == want.name) {
            for patch in plan::plan_patches(want, have) {
                api.patch(&patch.path, &patch.body)?;
            }
        }
    }

    if !desired.floating_ips.is_empty() {
        let all: Vec<FloatingIp> = api.get("floating-ips")?;
        for network in plan::missing_floating_ips(desired, &lb.uuid, &all) {
            // The address without its prefix length (validated with the annotations), verbatim:
            // `:` is allowed in a path segment and the API names IPv6 floating IPs that way.
            let ip = network.split('/').next().unwrap_or(network);
            let path = format!("floating-ips/{ip}");
            match api.patch(&path, &json!({"load_balancer": lb.uuid})) {
                Err(ProviderError::NotFound(_)) => {
                    return Err(ProviderError::invalid_config(format!(
                        "floating IP {network} from k8s.cloudscale.ch/loadbalancer-floating-ips \
                         does not exist in this cloudscale account; create it first or remove it \
                         from the annotation"
                    )));
                }
                other => other?,
            }
        }
    }
    Ok(Pass::Done)
}

/// Everything attached to `lb`: its pools with their members, listeners and monitors.
pub fn fetch(api: &Api, lb: &LoadBalancer) -> Result<Vec<PoolState>, ProviderError> {
    let monitors: Vec<Monitor> = api.get("load-balancers/health-monitors")?;
    let listeners: Vec<Listener> = api.get("load-balancers/listeners")?;
    let pools: Vec<Pool> = api.get("load-balancers/pools")?;
    let mut out = Vec::new();
    for pool in pools.into_iter().filter(|p| p.belongs_to(&lb.uuid)) {
        let members: Vec<Member> =
            api.get(&format!("load-balancers/pools/{}/members", pool.uuid))?;
        out.push(PoolState {
            listeners: listeners
                .iter()
                .filter(|l| pool_uuid(&l.pool) == pool.uuid)
                .cloned()
                .collect(),
            monitors: monitors
                .iter()
                .filter(|m| pool_uuid(&m.pool) == pool.uuid)
                .cloned()
                .collect(),
            members,
            pool,
        });
    }
    Ok(out)
}

/// Deletes the load balancer (the API deletes everything in it); nothing to do when it is gone.
pub fn delete(api: &Api, uuid: &str, name: &str) -> Result<(), ProviderError> {
    let Some(lb) = find(api, uuid, name)? else {
        return Ok(());
    };
    if lb.status == CHANGING {
        return Err(busy(&lb));
    }
    api.delete_href(&lb.href)
        .map_err(|e| busy_or(api, &lb, e))?;
    log::info(
        "deleted load balancer",
        &[("name", &lb.name), ("uuid", &lb.uuid)],
    );
    Ok(())
}
