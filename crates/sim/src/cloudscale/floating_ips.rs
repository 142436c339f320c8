//! Floating IPs (`/v1/floating-ips/{ip}`, the address without its prefix).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::body::Fields;
use super::error::{ApiError, does_not_exist};
use super::model::{Ctx, FloatingIp, State};
use super::render;
use super::reply::Reply;

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

/// Where created IPv4 floating IPs come from: `5.102.151.1`, `.2`, … (a simulator choice inside
/// cloudscale's `5.102.144.0/21`; the real API picks any free address).
const V4_POOL: Ipv4Addr = Ipv4Addr::new(5, 102, 151, 0);
/// Where created IPv6 floating IPs come from: `2a06:c01:f1::1/128`, … and
/// `2a06:c01:f1:100::/56`, … (a simulator choice inside cloudscale's `2a06:c00::/24`).
const V6_POOL: u128 = 0x2a06_0c01_00f1_0000_0000_0000_0000_0000;

/// `POST /v1/floating-ips` (API doc "Floating IPs: Create a Floating IP"; cloudscale-cli 1.5.0's
/// `floating-ip create` sends `ip_version`, `prefix_length`, `reverse_ptr`, `server`, `type`,
/// `region` and `tags`, the SDK's `FloatingIPCreateRequest` also `load_balancer`).
/// `ip_version` is required; IPv4 is always `/32`, IPv6 `/128` unless `prefix_length` is `56`
/// (the API's only other choice); `type` is `regional` (default, region `rma` unless given) or
/// `global` (no region). A server and a load balancer are exclusive, as in PATCH.
pub(crate) fn create(state: &mut State, ctx: &Ctx, body: &[u8]) -> Result<Reply, ApiError> {
    let mut f = Fields::parse(body)?;
    let version = f.int("ip_version", 4..=6, None);
    if !matches!(version, 4 | 6) {
        f.fail(
            "ip_version",
            format!("\"{version}\" is not a valid choice."),
        );
    }
    let prefix = f.opt_int("prefix_length", 0..=128);
    let prefix = match (version, prefix) {
        (4, None | Some(32)) => 32,
        (6, None | Some(128)) => 128,
        (6, Some(56)) => 56,
        (_, Some(p)) => {
            f.fail("prefix_length", format!("\"{p}\" is not a valid choice."));
            0
        }
        _ => 0,
    };
    let kind = f.choice("type", &["regional", "global"], Some("regional"));
    let region = if kind == "global" {
        f.opt_string("region");
        None
    } else {
        let r = f.opt_string("region").unwrap_or_else(|| "rma".to_string());
        if !matches!(r.as_str(), "rma" | "lpg") {
            f.fail("region", format!("Object with slug={r} does not exist."));
        }
        Some(r)
    };
    let lb = target(&mut f, "load_balancer", |u| {
        state.load_balancers.contains_key(u)
    })
    .flatten();
    let server = target(&mut f, "server", |u| state.servers.contains_key(u)).flatten();
    if lb.is_some() && server.is_some() {
        f.fail(
            "non_field_errors",
            "A floating IP can point to a server or a load balancer, not both.",
        );
    }
    let reverse_ptr = f.opt_string("reverse_ptr");
    let tags = f.opt_tags().unwrap_or_default();
    f.finish()?;
    let ip = next_free(state, version == 4, prefix);
    let meta = state.new_meta(tags);
    let fip = FloatingIp {
        meta,
        ip,
        prefix: prefix as u8,
        region,
        server,
        lb,
        reverse_ptr,
    };
    let rendered = render::floating_ip(state, ctx, &fip);
    state.floating_ips.insert(ip, fip);
    Ok(Reply::Created(rendered))
}

/// The first address of the simulator's pool (see [`V4_POOL`], [`V6_POOL`]) not yet taken.
fn next_free(state: &State, v4: bool, prefix: i64) -> IpAddr {
    (1u32..)
        .map(|n| {
            if v4 {
                IpAddr::V4(Ipv4Addr::from(u32::from(V4_POOL) + n))
            } else if prefix == 56 {
                IpAddr::V6(Ipv6Addr::from(V6_POOL + (u128::from(n) << 72)))
            } else {
                IpAddr::V6(Ipv6Addr::from(V6_POOL + u128::from(n)))
            }
        })
        .find(|ip| !state.floating_ips.contains_key(ip))
        .unwrap_or(IpAddr::V4(V4_POOL))
}

/// `DELETE /v1/floating-ips/{ip}` (API doc "Floating IPs: Delete a Floating IP"): 204, also for
/// an assigned one (the API releases it from its server or load balancer).
pub(crate) fn delete(state: &mut State, ip: &str) -> Result<Reply, ApiError> {
    let key = find(state, ip)?.ip;
    state.floating_ips.remove(&key);
    Ok(Reply::NoContent)
}
