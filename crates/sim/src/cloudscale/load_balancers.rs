//! `POST/PATCH/DELETE /v1/load-balancers[/{uuid}]`, including VIP allocation.

use std::net::IpAddr;

use serde_json::Value;

use super::body::Fields;
use super::error::{ApiError, does_not_exist};
use super::model::{Ctx, DEFAULT_ZONE, LB_FLAVORS, LoadBalancer, State, Vip, ZONES, new_uuid};
use super::render;
use super::reply::Reply;

/// One requested VIP: a subnet, an address, or both.
struct VipRequest {
    address: Option<IpAddr>,
    subnet: Option<String>,
}

/// Reads `vip_addresses`; absent or `[]` means the public pair.
fn vip_requests(f: &mut Fields) -> Vec<VipRequest> {
    let key = "vip_addresses";
    let items = match f.raw(key) {
        None => return Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(Value::Null) => {
            f.fail(key, "This field may not be null.");
            return Vec::new();
        }
        Some(_) => {
            f.fail(key, "Expected a list of items.");
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let Value::Object(map) = item else {
            f.fail(
                key,
                format!("Item {}: Expected a dictionary of items.", i + 1),
            );
            continue;
        };
        let mut entry = Fields::from_map(map);
        let subnet = entry.nullable_string("subnet");
        let address = entry.nullable_string("address");
        let parsed = address.as_deref().map(str::parse::<IpAddr>);
        if let Some(Err(_)) = parsed {
            entry.fail("address", "Enter a valid IPv4 or IPv6 address.");
        }
        if subnet.is_none() && address.is_none() {
            entry.fail("subnet", "Either a subnet or an address is required.");
        }
        if !entry.ok() {
            for (k, msg) in entry.into_errors() {
                f.fail(key, format!("Item {}: {k}: {msg}", i + 1));
            }
            continue;
        }
        out.push(VipRequest {
            address: parsed.and_then(Result::ok),
            subnet,
        });
    }
    out
}

/// Resolves the requested VIPs to addresses, or the public IPv4/IPv6 pair when none are asked.
fn allocate_vips(state: &mut State, requests: &[VipRequest]) -> Result<Vec<Vip>, ApiError> {
    let mut used = state.used_addresses();
    let key = "vip_addresses";
    if requests.is_empty() {
        let mut vips = Vec::new();
        for v6 in [false, true] {
            let vip = state
                .allocate_public(v6, &used)
                .ok_or_else(|| ApiError::field(key, "No public addresses are left."))?;
            used.insert(vip.ip);
            vips.push(vip);
        }
        return Ok(vips);
    }
    let mut vips = Vec::new();
    for (i, req) in requests.iter().enumerate() {
        let item = |msg: String| ApiError::field(key, format!("Item {}: {msg}", i + 1));
        let subnet = match (&req.subnet, req.address) {
            (Some(uuid), _) => state
                .private_subnet(uuid)
                .ok_or_else(|| item(format!("subnet: {}", does_not_exist(uuid))))?,
            (None, Some(ip)) => state
                .subnets
                .values()
                .find(|s| !s.public && s.cidr.contains(ip))
                .ok_or_else(|| item(format!("address: No known subnet contains {ip}.")))?,
            (None, None) => return Err(item("subnet: This field is required.".into())),
        };
        let ip = match req.address {
            Some(ip) if !subnet.cidr.contains(ip) => {
                return Err(item(format!(
                    "address: {ip} is not in subnet {}.",
                    subnet.cidr
                )));
            }
            Some(ip) if subnet.cidr.is_reserved(ip) => {
                return Err(item(format!(
                    "address: {ip} is reserved in {}.",
                    subnet.cidr
                )));
            }
            Some(ip) if used.contains(&ip) => {
                return Err(item(format!("address: {ip} is already in use.")));
            }
            Some(ip) => ip,
            None => subnet
                .cidr
                .hosts()
                .take(65_536)
                .find(|h| !used.contains(h))
                .ok_or_else(|| item(format!("subnet: No free address in {}.", subnet.cidr)))?,
        };
        used.insert(ip);
        vips.push(Vip {
            ip,
            subnet: subnet.uuid.clone(),
        });
    }
    Ok(vips)
}

/// `POST /v1/load-balancers`.
pub(crate) fn create(state: &mut State, ctx: &Ctx, body: &[u8]) -> Result<Reply, ApiError> {
    let mut f = Fields::parse(body)?;
    let name = f.string("name");
    let flavor = f.choice("flavor", LB_FLAVORS, None);
    let zone = f.choice("zone", ZONES, Some(DEFAULT_ZONE));
    let tags = f.opt_tags().unwrap_or_default();
    let requests = vip_requests(&mut f);
    f.finish()?;
    let vips = allocate_vips(state, &requests)?;
    let uuid = new_uuid();
    let lb = LoadBalancer {
        meta: state.new_meta(tags),
        uuid: uuid.clone(),
        name,
        flavor,
        zone,
        vips,
        ready_at: ctx.now + state.lb_ready_after,
    };
    let mut json = render::load_balancer(state, ctx, &lb);
    // The API answers before provisioning starts: the new LB always reads `changing` here.
    json["status"] = "changing".into();
    state.load_balancers.insert(uuid, lb);
    Ok(Reply::Created(json))
}

/// `PATCH /v1/load-balancers/{uuid}`: `name` and `tags` (other fields are read-only and
/// ignored, as DRF does).
pub(crate) fn patch(
    state: &mut State,
    ctx: &Ctx,
    uuid: &str,
    body: &[u8],
) -> Result<Reply, ApiError> {
    if !state.load_balancers.contains_key(uuid) {
        return Err(ApiError::not_found());
    }
    let mut f = Fields::parse(body)?;
    let name = f.opt_string("name");
    let tags = f.opt_tags();
    f.finish()?;
    state.ensure_not_changing(ctx, uuid)?;
    if let Some(lb) = state.load_balancers.get_mut(uuid) {
        if let Some(name) = name {
            lb.name = name;
        }
        if let Some(tags) = tags {
            lb.meta.tags = tags;
        }
    }
    Ok(Reply::NoContent)
}

/// `DELETE /v1/load-balancers/{uuid}`: cascades to pools, members, listeners and monitors;
/// floating IPs on it are unassigned.
pub(crate) fn delete(state: &mut State, ctx: &Ctx, uuid: &str) -> Result<Reply, ApiError> {
    if !state.load_balancers.contains_key(uuid) {
        return Err(ApiError::not_found());
    }
    state.ensure_not_changing(ctx, uuid)?;
    state.delete_lb(uuid);
    Ok(Reply::NoContent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::time::{Duration, Instant};

    fn vip_set(state: &State) -> HashSet<IpAddr> {
        state
            .load_balancers
            .values()
            .flat_map(|lb| lb.vips.iter().map(|v| v.ip))
            .collect()
    }

    #[test]
    fn public_vips_are_sequential_and_not_reused_while_in_use() {
        let mut state = State::new(Duration::ZERO);
        let ctx = Ctx {
            base: "http://sim".into(),
            now: Instant::now(),
            refuse_changing: false,
        };
        let body = br#"{"name": "a", "flavor": "lb-standard"}"#;
        let mut uuids = Vec::new();
        for _ in 0..3 {
            match create(&mut state, &ctx, body) {
                Ok(Reply::Created(v)) => uuids.push(v["uuid"].as_str().unwrap_or("").to_string()),
                other => panic!("create failed: {other:?}"),
            }
        }
        let v4: Vec<String> = uuids
            .iter()
            .filter_map(|u| state.load_balancers.get(u))
            .map(|lb| lb.vips[0].ip.to_string())
            .collect();
        assert_eq!(v4, ["5.102.151.2", "5.102.151.3", "5.102.151.4"]);
        state.delete_lb(&uuids[0]);
        assert!(create(&mut state, &ctx, body).is_ok());
        // The freed .2 is not handed out again right away.
        let fifth: IpAddr = "5.102.151.5".parse().expect("literal address");
        assert!(vip_set(&state).contains(&fifth));
        assert_eq!(vip_set(&state).len(), 6);
    }
}
