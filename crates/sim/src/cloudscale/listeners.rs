//! Listeners (`/v1/load-balancers/listeners`).

use super::body::Fields;
use super::error::{ApiError, does_not_exist};
use super::model::{Ctx, Listener, State, new_uuid};
use super::render;
use super::reply::Reply;

/// Listener protocols the API accepts.
const PROTOCOLS: &[&str] = &["tcp", "udp"];
/// Timeouts in milliseconds.
const TIMEOUTS: std::ops::RangeInclusive<i64> = 1..=86_400_000;

/// `POST /v1/load-balancers/listeners`. `pool` may be null when `load_balancer` is given (a
/// listener without a pool); with both, the pool must belong to that LB.
pub(crate) fn create(state: &mut State, ctx: &Ctx, body: &[u8]) -> Result<Reply, ApiError> {
    let mut f = Fields::parse(body)?;
    let pool = f.nullable_string("pool");
    let lb_field = f.nullable_string("load_balancer");
    let name = f.string("name");
    let protocol = f.choice("protocol", PROTOCOLS, None);
    let protocol_port = f.int("protocol_port", 1..=65_535, None);
    let allowed_cidrs = f.opt_cidrs("allowed_cidrs").unwrap_or_default();
    let client_data = f.int("timeout_client_data_ms", TIMEOUTS, Some(50_000));
    let member_connect = f.int("timeout_member_connect_ms", TIMEOUTS, Some(5_000));
    let member_data = f.int("timeout_member_data_ms", TIMEOUTS, Some(50_000));
    let tags = f.opt_tags().unwrap_or_default();
    let pool_lb = pool
        .as_deref()
        .map(|p| state.pools.get(p).map(|p| p.lb.clone()));
    let lb = match (&pool, pool_lb, &lb_field) {
        (Some(p), Some(None), _) => {
            f.fail("pool", does_not_exist(p));
            String::new()
        }
        (_, Some(Some(from_pool)), Some(given)) if &from_pool != given => {
            f.fail(
                "load_balancer",
                "The pool does not belong to this load balancer.",
            );
            String::new()
        }
        (_, Some(Some(from_pool)), _) => from_pool,
        (_, _, Some(given)) if !state.load_balancers.contains_key(given) => {
            f.fail("load_balancer", does_not_exist(given));
            String::new()
        }
        (_, _, Some(given)) => given.clone(),
        (_, _, None) => {
            f.fail("pool", "This field is required.");
            String::new()
        }
    };
    if f.ok() {
        let taken = state
            .listeners
            .values()
            .any(|l| l.lb == lb && l.protocol == protocol && l.protocol_port == protocol_port);
        if taken {
            f.fail(
                "protocol_port",
                format!(
                    "A listener for {protocol} port {protocol_port} already exists on this load balancer."
                ),
            );
        }
    }
    f.finish()?;
    state.ensure_not_changing(ctx, &lb)?;
    let uuid = new_uuid();
    let listener = Listener {
        meta: state.new_meta(tags),
        uuid: uuid.clone(),
        name,
        pool,
        lb,
        protocol,
        protocol_port,
        allowed_cidrs,
        timeout_client_data_ms: client_data,
        timeout_member_connect_ms: member_connect,
        timeout_member_data_ms: member_data,
    };
    let json = render::listener(state, ctx, &listener);
    state.listeners.insert(uuid, listener);
    Ok(Reply::Created(json))
}

/// The listener's LB UUID, or 404.
fn listener_lb(state: &State, uuid: &str) -> Result<String, ApiError> {
    state
        .listeners
        .get(uuid)
        .map(|l| l.lb.clone())
        .ok_or_else(ApiError::not_found)
}

/// `PATCH /v1/load-balancers/listeners/{uuid}`: any of `name`, `allowed_cidrs`, the three
/// timeouts, `tags`.
pub(crate) fn patch(
    state: &mut State,
    ctx: &Ctx,
    uuid: &str,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let lb = listener_lb(state, uuid)?;
    let mut f = Fields::parse(body)?;
    let name = f.opt_string("name");
    let allowed_cidrs = f.opt_cidrs("allowed_cidrs");
    let client_data = f.opt_int("timeout_client_data_ms", TIMEOUTS);
    let member_connect = f.opt_int("timeout_member_connect_ms", TIMEOUTS);
    let member_data = f.opt_int("timeout_member_data_ms", TIMEOUTS);
    let tags = f.opt_tags();
    f.finish()?;
    state.ensure_not_changing(ctx, &lb)?;
    if let Some(l) = state.listeners.get_mut(uuid) {
        if let Some(v) = name {
            l.name = v;
        }
        if let Some(v) = allowed_cidrs {
            l.allowed_cidrs = v;
        }
        if let Some(v) = client_data {
            l.timeout_client_data_ms = v;
        }
        if let Some(v) = member_connect {
            l.timeout_member_connect_ms = v;
        }
        if let Some(v) = member_data {
            l.timeout_member_data_ms = v;
        }
        if let Some(v) = tags {
            l.meta.tags = v;
        }
    }
    Ok(Reply::NoContent)
}

/// `DELETE /v1/load-balancers/listeners/{uuid}`.
pub(crate) fn delete(state: &mut State, ctx: &Ctx, uuid: &str) -> Result<Reply, ApiError> {
    let lb = listener_lb(state, uuid)?;
    state.ensure_not_changing(ctx, &lb)?;
    state.listeners.remove(uuid);
    Ok(Reply::NoContent)
}
