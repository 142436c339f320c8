//! The API's JSON rendering of each resource. Related objects appear as stubs
//! (`{uuid, href, name}`); every `href` is absolute and points at this simulator.

use serde_json::{Value, json};

use super::model::{
    Ctx, FloatingIp, LoadBalancer, Member, Monitor, Network, Pool, Server, State, Subnet, Tags,
};

/// `<base>/v1/<path>`.
pub(crate) fn href(ctx: &Ctx, path: &str) -> String {
    format!("{}/v1/{path}", ctx.base)
}

fn tags(tags: &Tags) -> Value {
    json!(tags)
}

fn stub(ctx: &Ctx, path: &str, uuid: &str, name: &str) -> Value {
    json!({"uuid": uuid, "href": href(ctx, &format!("{path}/{uuid}")), "name": name})
}

fn lb_stub(state: &State, ctx: &Ctx, uuid: &str) -> Value {
    let name = state
        .load_balancers
        .get(uuid)
        .map_or("", |lb| lb.name.as_str());
    stub(ctx, "load-balancers", uuid, name)
}

fn pool_stub(state: &State, ctx: &Ctx, uuid: &str) -> Value {
    let name = state.pools.get(uuid).map_or("", |p| p.name.as_str());
    stub(ctx, "load-balancers/pools", uuid, name)
}

fn network_stub(state: &State, ctx: &Ctx, uuid: &str) -> Value {
    let name = state.networks.get(uuid).map_or("", |n| n.name.as_str());
    stub(ctx, "networks", uuid, name)
}

/// `{uuid, cidr, href}` of a subnet (empty strings for an unknown or empty UUID).
fn subnet_stub(state: &State, ctx: &Ctx, uuid: &str) -> Value {
    match state.subnets.get(uuid) {
        Some(s) => json!({
            "uuid": s.uuid,
            "cidr": s.cidr.to_string(),
            "href": href(ctx, &format!("subnets/{}", s.uuid)),
        }),
        None => json!({"uuid": uuid, "cidr": "", "href": ""}),
    }
}

/// A server.
pub(crate) fn server(state: &State, ctx: &Ctx, s: &Server) -> Value {
    let interfaces: Vec<Value> = s
        .interfaces
        .iter()
        .map(|i| {
            let addresses: Vec<Value> = i
                .addresses
                .iter()
                .map(|a| {
                    // Public addresses usually carry no subnet UUID; their CIDR is still shown.
                    let subnet = if a.subnet.is_empty() {
                        json!({"uuid": "", "cidr": a.cidr.to_string(), "href": ""})
                    } else {
                        subnet_stub(state, ctx, &a.subnet)
                    };
                    json!({
                        "version": a.cidr.version(),
                        "address": a.ip.to_string(),
                        "prefix_length": a.cidr.prefix,
                        "gateway": a.gateway.map(|g| g.to_string()),
                        "reverse_ptr": i.public.then(|| s.name.clone()),
                        "subnet": subnet,
                    })
                })
                .collect();
            json!({
                "type": if i.public { "public" } else { "private" },
                "network": network_stub(state, ctx, &i.network),
                "addresses": addresses,
            })
        })
        .collect();
    let family = s.flavor.split('-').next().unwrap_or("");
    let mut flavor_name = family.to_string();
    if let Some(first) = flavor_name.get_mut(0..1) {
        first.make_ascii_uppercase();
    }
    json!({
        "href": href(ctx, &format!("servers/{}", s.uuid)),
        "uuid": s.uuid,
        "name": s.name,
        "status": s.status,
        "flavor": {
            "slug": s.flavor,
            "name": format!("{flavor_name}-{}-{}", s.memory_gb, s.vcpus),
            "vcpu_count": s.vcpus,
            "memory_gb": s.memory_gb,
        },
        "zone": {"slug": s.zone},
        // The SDK's `Server` model (cloudscale-go-sdk servers.go) and the API doc "Servers" list
        // these too (review 2026-11-23, finding 9; cloudscale-cli's `server list -v` shows
        // them). Seeds carry no image, volumes or groups: a fixed Debian image and empty lists.
        "image": {
            "slug": "debian-12",
            "name": "Debian 12",
            "operating_system": "Debian",
            "default_username": "debian",
        },
        "volumes": [],
        "interfaces": interfaces,
        "ssh_fingerprints": [],
        "ssh_host_keys": [],
        "anti_affinity_with": [],
        "server_groups": [],
        "tags": tags(&s.meta.tags),
        "created_at": s.meta.created_at,
    })
}

/// A load balancer, with its status as of `ctx.now`.
pub(crate) fn load_balancer(state: &State, ctx: &Ctx, lb: &LoadBalancer) -> Value {
    let vips: Vec<Value> = lb
        .vips
        .iter()
        .map(|v| {
            json!({
                "version": if v.ip.is_ipv4() { 4 } else { 6 },
                "address": v.ip.to_string(),
                "subnet": subnet_stub(state, ctx, &v.subnet),
            })
        })
        .collect();
    let flavor_name = match lb.flavor.as_str() {
        "lb-large" => "LB-Large",
        _ => "LB-Standard",
    };
    json!({
        "href": href(ctx, &format!("load-balancers/{}", lb.uuid)),
        "uuid": lb.uuid,
        "name": lb.name,
        "status": State::lb_status(lb, ctx.now),
        "flavor": {"slug": lb.flavor, "name": flavor_name},
        "zone": {"slug": lb.zone},
        "vip_addresses": vips,
        "tags": tags(&lb.meta.tags),
        "created_at": lb.meta.created_at,
    })
}

/// A pool.
pub(crate) fn pool(state: &State, ctx: &Ctx, p: &Pool) -> Value {
    json!({
        "href": href(ctx, &format!("load-balancers/pools/{}", p.uuid)),
        "uuid": p.uuid,
        "name": p.name,
        "algorithm": p.algorithm,
        "protocol": p.protocol,
        "load_balancer": lb_stub(state, ctx, &p.lb),
        "tags": tags(&p.meta.tags),
        "created_at": p.meta.created_at,
    })
}

/// A pool member.
pub(crate) fn member(state: &State, ctx: &Ctx, m: &Member) -> Value {
    let lb = state.pools.get(&m.pool).map_or("", |p| p.lb.as_str());
    json!({
        "href": href(ctx, &format!("load-balancers/pools/{}/members/{}", m.pool, m.uuid)),
        "uuid": m.uuid,
        "name": m.name,
        "enabled": m.enabled,
        "protocol_port": m.protocol_port,
        "monitor_port": m.monitor_port,
        "address": m.address.to_string(),
        "subnet": subnet_stub(state, ctx, &m.subnet),
        "pool": pool_stub(state, ctx, &m.pool),
        "load_balancer": lb_stub(state, ctx, lb),
        "monitor_status": "up",
        "tags": tags(&m.meta.tags),
        "created_at": m.meta.created_at,
    })
}

/// A listener.
pub(crate) fn listener(state: &State, ctx: &Ctx, l: &super::model::Listener) -> Value {
    json!({
        "href": href(ctx, &format!("load-balancers/listeners/{}", l.uuid)),
        "uuid": l.uuid,
        "name": l.name,
        "pool": l.pool.as_deref().map(|p| pool_stub(state, ctx, p)),
        "load_balancer": lb_stub(state, ctx, &l.lb),
        "protocol": l.protocol,
        "protocol_port": l.protocol_port,
        "allowed_cidrs": l.allowed_cidrs,
        "timeout_client_data_ms": l.timeout_client_data_ms,
        "timeout_member_connect_ms": l.timeout_member_connect_ms,
        "timeout_member_data_ms": l.timeout_member_data_ms,
        "tags": tags(&l.meta.tags),
        "created_at": l.meta.created_at,
    })
}

/// A health monitor.
pub(crate) fn monitor(state: &State, ctx: &Ctx, m: &Monitor) -> Value {
    let lb = state.pools.get(&m.pool).map_or("", |p| p.lb.as_str());
    let http = m.http.as_ref().map(|h| {
        json!({
            "method": h.method,
            "url_path": h.url_path,
            "version": h.version,
            "host": h.host,
            "expected_codes": h.expected_codes,
        })
    });
    json!({
        "href": href(ctx, &format!("load-balancers/health-monitors/{}", m.uuid)),
        "uuid": m.uuid,
        "pool": pool_stub(state, ctx, &m.pool),
        "load_balancer": lb_stub(state, ctx, lb),
        "delay_s": m.delay_s,
        "timeout_s": m.timeout_s,
        "up_threshold": m.up_threshold,
        "down_threshold": m.down_threshold,
        "type": m.kind,
        "http": http,
        "tags": tags(&m.meta.tags),
        "created_at": m.meta.created_at,
    })
}

/// A floating IP. `next_hop` is the target's address of the same family (a server's public
/// address, an LB's VIP), as the real API routes the floating IP to it.
pub(crate) fn floating_ip(state: &State, ctx: &Ctx, f: &FloatingIp) -> Value {
    let same_family = |ip: &std::net::IpAddr| ip.is_ipv4() == f.ip.is_ipv4();
    let server = f.server.as_deref().and_then(|u| state.servers.get(u));
    let lb = f.lb.as_deref().and_then(|u| state.load_balancers.get(u));
    let next_hop = match (server, lb) {
        (Some(s), _) => s
            .interfaces
            .iter()
            .filter(|i| i.public)
            .flat_map(|i| i.addresses.iter().map(|a| a.ip))
            .find(same_family),
        (None, Some(lb)) => lb.vips.iter().map(|v| v.ip).find(same_family),
        (None, None) => None,
    };
    json!({
        "href": href(ctx, &format!("floating-ips/{}", f.ip)),
        "created_at": f.meta.created_at,
        "network": format!("{}/{}", f.ip, f.prefix),
        "ip_version": if f.ip.is_ipv4() { 4 } else { 6 },
        "type": if f.region.is_some() { "regional" } else { "global" },
        "region": f.region.as_ref().map(|r| json!({"slug": r})),
        "server": server.map(|s| stub(ctx, "servers", &s.uuid, &s.name)),
        "load_balancer": lb.map(|lb| stub(ctx, "load-balancers", &lb.uuid, &lb.name)),
        "next_hop": next_hop.map(|ip| ip.to_string()),
        "reverse_ptr": f.reverse_ptr,
        "tags": tags(&f.meta.tags),
    })
}

/// A network with its subnets.
pub(crate) fn network(state: &State, ctx: &Ctx, n: &Network) -> Value {
    let subnets: Vec<Value> = super::model::ordered(&state.subnets)
        .into_iter()
        .filter(|s| s.network == n.uuid)
        .map(|s| subnet_stub(state, ctx, &s.uuid))
        .collect();
    // Networks are zonal (API doc "Networks": `zone`; cloudscale-cli's `network list` fails
    // with KeyError 'zone' without it). Seeds give none: the zone of the first server on the
    // network, else `rma1`.
    let zone = super::model::ordered(&state.servers)
        .into_iter()
        .find(|s| s.interfaces.iter().any(|i| i.network == n.uuid))
        .map_or("rma1", |s| s.zone.as_str());
    json!({
        "href": href(ctx, &format!("networks/{}", n.uuid)),
        "uuid": n.uuid,
        "name": n.name,
        "zone": {"slug": zone},
        "created_at": n.meta.created_at,
        "mtu": 9000,
        "subnets": subnets,
        "tags": tags(&n.meta.tags),
    })
}

/// A subnet.
pub(crate) fn subnet(state: &State, ctx: &Ctx, s: &Subnet) -> Value {
    json!({
        "href": href(ctx, &format!("subnets/{}", s.uuid)),
        "uuid": s.uuid,
        "cidr": s.cidr.to_string(),
        "network": network_stub(state, ctx, &s.network),
        "gateway_address": null,
        "dns_servers": [],
        "tags": tags(&s.meta.tags),
        "created_at": s.meta.created_at,
    })
}
