//! Pools (`/v1/load-balancers/pools`) and their members (`.../pools/{pool}/members`).

use super::body::Fields;
use super::error::ApiError;
use super::model::{Ctx, Member, Pool, State, new_uuid};
use super::render;
use super::reply::Reply;

/// Pool algorithms the API accepts.
const ALGORITHMS: &[&str] = &["round_robin", "least_connections", "source_ip"];
/// Pool protocols the API accepts.
const PROTOCOLS: &[&str] = &["tcp", "proxy", "proxyv2", "udp"];
/// TCP/UDP ports.
const PORTS: std::ops::RangeInclusive<i64> = 1..=65_535;

/// `POST /v1/load-balancers/pools`.
pub(crate) fn create(state: &mut State, ctx: &Ctx, body: &[u8]) -> Result<Reply, ApiError> {
    let mut f = Fields::parse(body)?;
    let name = f.string("name");
    let lb = f.string("load_balancer");
    let algorithm = f.choice("algorithm", ALGORITHMS, None);
    let protocol = f.choice("protocol", PROTOCOLS, None);
    let tags = f.opt_tags().unwrap_or_default();
    if !lb.is_empty() && !state.load_balancers.contains_key(&lb) {
        f.fail("load_balancer", super::error::does_not_exist(&lb));
    }
    f.finish()?;
    state.ensure_not_changing(ctx, &lb)?;
    let uuid = new_uuid();
    let pool = Pool {
        meta: state.new_meta(tags),
        uuid: uuid.clone(),
        name,
        lb,
        algorithm,
        protocol,
    };
    let json = render::pool(state, ctx, &pool);
    state.pools.insert(uuid, pool);
    Ok(Reply::Created(json))
}

/// `PATCH /v1/load-balancers/pools/{uuid}`: `name`, `tags`.
pub(crate) fn patch(
    state: &mut State,
    ctx: &Ctx,
    uuid: &str,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let lb = pool_lb(state, uuid)?;
    let mut f = Fields::parse(body)?;
    let name = f.opt_string("name");
    let tags = f.opt_tags();
    f.finish()?;
    state.ensure_not_changing(ctx, &lb)?;
    if let Some(pool) = state.pools.get_mut(uuid) {
        if let Some(name) = name {
            pool.name = name;
        }
        if let Some(tags) = tags {
            pool.meta.tags = tags;
        }
    }
    Ok(Reply::NoContent)
}

/// `DELETE /v1/load-balancers/pools/{uuid}`: cascades to members, monitor and listeners.
pub(crate) fn delete(state: &mut State, ctx: &Ctx, uuid: &str) -> Result<Reply, ApiError> {
    let lb = pool_lb(state, uuid)?;
    state.ensure_not_changing(ctx, &lb)?;
    state.delete_pool(uuid);
    Ok(Reply::NoContent)
}

/// The pool's LB UUID, or 404 when the pool in the path does not exist.
fn pool_lb(state: &State, pool: &str) -> Result<String, ApiError> {
    state
        .pools
        .get(pool)
        .map(|p| p.lb.clone())
        .ok_or_else(ApiError::not_found)
}

/// A member of `pool`, or 404 (also when it belongs to another pool).
pub(crate) fn find_member<'a>(
    state: &'a State,
    pool: &str,
    uuid: &str,
) -> Result<&'a Member, ApiError> {
    state
        .members
        .get(uuid)
        .filter(|m| m.pool == pool)
        .ok_or_else(ApiError::not_found)
}

/// `POST /v1/load-balancers/pools/{pool}/members`.
pub(crate) fn create_member(
    state: &mut State,
    ctx: &Ctx,
    pool: &str,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let lb = pool_lb(state, pool)?;
    let mut f = Fields::parse(body)?;
    let name = f.string("name");
    let protocol_port = f.int("protocol_port", PORTS, None);
    let monitor_port = f.int("monitor_port", PORTS, Some(protocol_port));
    let address = f.ip("address");
    let subnet = f.string("subnet");
    let enabled = f.bool("enabled", true);
    let tags = f.opt_tags().unwrap_or_default();
    if !subnet.is_empty() {
        match (state.private_subnet(&subnet), address) {
            (None, _) => f.fail("subnet", super::error::does_not_exist(&subnet)),
            (Some(s), Some(ip)) if !s.cidr.contains(ip) => {
                f.fail("address", format!("{ip} is not in subnet {}.", s.cidr));
            }
            _ => {}
        }
    }
    f.finish()?;
    let Some(address) = address else {
        // finish() reported the missing or invalid address; this is unreachable in practice.
        return Err(ApiError::field("address", "This field is required."));
    };
    state.ensure_not_changing(ctx, &lb)?;
    let uuid = new_uuid();
    let member = Member {
        meta: state.new_meta(tags),
        uuid: uuid.clone(),
        name,
        pool: pool.to_string(),
        enabled,
        protocol_port,
        monitor_port,
        address,
        subnet,
    };
    let json = render::member(state, ctx, &member);
    state.members.insert(uuid, member);
    Ok(Reply::Created(json))
}

/// `PATCH .../members/{uuid}`: `name`, `enabled`, `tags`.
pub(crate) fn patch_member(
    state: &mut State,
    ctx: &Ctx,
    pool: &str,
    uuid: &str,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let lb = pool_lb(state, pool)?;
    find_member(state, pool, uuid)?;
    let mut f = Fields::parse(body)?;
    let name = f.opt_string("name");
    let enabled = f.opt_bool("enabled");
    let tags = f.opt_tags();
    f.finish()?;
    state.ensure_not_changing(ctx, &lb)?;
    if let Some(m) = state.members.get_mut(uuid) {
        if let Some(name) = name {
            m.name = name;
        }
        if let Some(enabled) = enabled {
            m.enabled = enabled;
        }
        if let Some(tags) = tags {
            m.meta.tags = tags;
        }
    }
    Ok(Reply::NoContent)
}

/// `DELETE .../members/{uuid}`.
pub(crate) fn delete_member(
    state: &mut State,
    ctx: &Ctx,
    pool: &str,
    uuid: &str,
) -> Result<Reply, ApiError> {
    let lb = pool_lb(state, pool)?;
    find_member(state, pool, uuid)?;
    state.ensure_not_changing(ctx, &lb)?;
    state.members.remove(uuid);
    Ok(Reply::NoContent)
}
