//! Floating IPs (`/v1/floating-ips/{ip}`, the address without its prefix).

use std::net::IpAddr;

use super::body::Fields;
use super::error::{ApiError, does_not_exist};
use super::model::{FloatingIp, State};
use super::server::Reply;

/// The floating IP for the path segment, or 404.
pub(crate) fn find<'a>(state: &'a State, ip: &str) -> Result<&'a FloatingIp, ApiError> {
    ip.parse::<IpAddr>()
        .ok()
        .and_then(|ip| state.floating_ips.get(&ip))
        .ok_or_else(ApiError::not_found)
}

/// A target field: absent → no change, null → unassign, a UUID → it must exist in `known`.
fn target(f: &mut Fields, key: &str, exists: impl Fn(&str) -> bool) -> Option<Option<String>> {
    if !f.has(key) {
        return None;
    }
    let uuid = f.nullable_string(key);
    if let Some(u) = &uuid
        && !exists(u)
    {
        f.fail(key, does_not_exist(u));
    }
    Some(uuid)
}

/// `PATCH /v1/floating-ips/{ip}`: `{"load_balancer": uuid}` moves it to that LB (away from a
/// server or another LB), `{"server": uuid}` to a server; null unassigns; also `reverse_ptr`
/// and `tags`.
pub(crate) fn patch(state: &mut State, ip: &str, body: &[u8]) -> Result<Reply, ApiError> {
    let key = find(state, ip)?.ip;
    let mut f = Fields::parse(body)?;
    let lb = target(&mut f, "load_balancer", |u| {
        state.load_balancers.contains_key(u)
    });
    let server = target(&mut f, "server", |u| state.servers.contains_key(u));
    if let (Some(Some(_)), Some(Some(_))) = (&lb, &server) {
        f.fail(
            "non_field_errors",
            "A floating IP can point to a server or a load balancer, not both.",
        );
    }
    let reverse_ptr = f
        .has("reverse_ptr")
        .then(|| f.nullable_string("reverse_ptr"));
    let tags = f.opt_tags();
    f.finish()?;
    if let Some(fip) = state.floating_ips.get_mut(&key) {
        if let Some(lb) = lb {
            // Pointing at a load balancer takes it away from any server, and vice versa.
            if lb.is_some() {
                fip.server = None;
            }
            fip.lb = lb;
        }
        if let Some(server) = server {
            if server.is_some() {
                fip.lb = None;
            }
            fip.server = server;
        }
        if let Some(ptr) = reverse_ptr {
            fip.reverse_ptr = ptr;
        }
        if let Some(tags) = tags {
            fip.meta.tags = tags;
        }
    }
    Ok(Reply::NoContent)
}
