//! What to change: the diff between the desired load balancer and the one in the cloud, as
//! upstream computes it (`nextLbActions` in `reconcile.go`), in pure functions.
//!
//! Objects are matched by explicit tuple keys: a difference in a key field means delete and
//! re-create, a difference elsewhere means an in-place PATCH of that one field.

use serde_json::{Value, json};

use crate::annotations::floating_ip_address;
use crate::desired::{
    DesiredLb, DesiredListener, DesiredMember, DesiredMonitor, DesiredPool, api_defaults,
};
use crate::model::{FloatingIp, Listener, LoadBalancer, Member, Monitor, Pool};

/// A pool in the cloud with everything attached to it.
#[derive(Clone, Debug, Default)]
pub struct PoolState {
    /// The pool itself.
    pub pool: Pool,
    /// Its members.
    pub members: Vec<Member>,
    /// The listeners forwarding to it.
    pub listeners: Vec<Listener>,
    /// The health monitors checking its members.
    pub monitors: Vec<Monitor>,
}

type PoolKey<'a> = (&'a str, &'a str, &'a str);

fn pool_key(p: &Pool) -> PoolKey<'_> {
    (&p.name, &p.algorithm, &p.protocol)
}

fn desired_pool_key(p: &DesiredPool) -> PoolKey<'_> {
    (&p.name, &p.algorithm, &p.protocol)
}

/// Pools to delete (with their members) and to create.
#[derive(Debug, Default)]
pub struct PoolPlan<'a> {
    /// Pools in the cloud no desired pool matches, or duplicates of an earlier pool's key.
    pub delete: Vec<&'a PoolState>,
    /// Desired pools with no pool of their key in the cloud.
    pub create: Vec<&'a DesiredPool>,
}

impl PoolPlan<'_> {
    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        self.delete.is_empty() && self.create.is_empty()
    }
}

/// Pools are keyed by (name, algorithm, protocol): a change of algorithm, pool protocol or port
/// name recreates the pool; a port number change does not (the listener changes instead).
/// A second pool with the key of an earlier one (left by a concurrent create) is deleted too, so
/// members, listener and monitor are always reconciled on one pool per key.
pub fn plan_pools<'a>(desired: &'a DesiredLb, actual: &'a [PoolState]) -> PoolPlan<'a> {
    PoolPlan {
        delete: actual
            .iter()
            .enumerate()
            .filter(|(i, a)| {
                let key = pool_key(&a.pool);
                !desired.pools.iter().any(|d| desired_pool_key(d) == key)
                    || actual[..*i].iter().any(|e| pool_key(&e.pool) == key)
            })
            .map(|(_, a)| a)
            .collect(),
        create: desired
            .pools
            .iter()
            .filter(|d| {
                !actual
                    .iter()
                    .any(|a| desired_pool_key(d) == pool_key(&a.pool))
            })
            .collect(),
    }
}

/// Members, listeners and monitors of one pool to delete and to create.
#[derive(Debug, Default)]
pub struct ChildPlan<'a> {
    /// Members no desired member matches in name, address, subnet, ports and `enabled`.
    pub delete_members: Vec<&'a Member>,
    /// Desired members missing from the pool.
    pub create_members: Vec<&'a DesiredMember>,
    /// Listeners whose name, protocol or port no desired listener matches.
    pub delete_listeners: Vec<&'a Listener>,
    /// Desired listeners missing from the pool.
    pub create_listeners: Vec<&'a DesiredListener>,
    /// Monitors whose type or HTTP version no longer matches.
    pub delete_monitors: Vec<&'a Monitor>,
    /// Desired monitors missing from the pool.
    pub create_monitors: Vec<&'a DesiredMonitor>,
}

impl ChildPlan<'_> {
    /// Anything to delete.
    pub fn deletes(&self) -> bool {
        !(self.delete_members.is_empty()
            && self.delete_listeners.is_empty()
            && self.delete_monitors.is_empty())
    }

    /// Anything to create.
    pub fn creates(&self) -> bool {
        !(self.create_members.is_empty()
            && self.create_listeners.is_empty()
            && self.create_monitors.is_empty())
    }
}

type MemberKey<'a> = (&'a str, bool, u32, u32, &'a str, &'a str);

fn member_key(m: &Member) -> MemberKey<'_> {
    (
        &m.name,
        m.enabled,
        m.monitor_port,
        m.protocol_port,
        &m.address,
        &m.subnet.uuid,
    )
}

fn desired_member_key(m: &DesiredMember) -> MemberKey<'_> {
    (
        &m.name,
        true,
        m.monitor_port,
        m.protocol_port,
        &m.address,
        &m.subnet,
    )
}

fn listener_key(l: &Listener) -> (&str, &str, u32) {
    (&l.name, &l.protocol, l.protocol_port)
}

fn desired_listener_key(l: &DesiredListener) -> (&str, &str, u32) {
    (&l.name, &l.protocol, l.protocol_port)
}

/// Monitors are keyed by type and HTTP version (`1.1` when there is no HTTP block).
fn monitor_key(m: &Monitor) -> (&str, &str) {
    let version = m
        .http
        .as_ref()
        .map_or(api_defaults::HTTP_VERSION, |h| h.version.as_str());
    (&m.kind, version)
}

fn desired_monitor_key(m: &DesiredMonitor) -> (&str, &str) {
    let version = m
        .http
        .as_ref()
        .map_or(api_defaults::HTTP_VERSION, |h| h.version.as_str());
    (&m.kind, version)
}

/// Generic keyed diff: actual items whose key is not desired, desired items whose key is absent.
fn diff<'a, A, D, K: PartialEq>(
    actual: &'a [A],
    desired: &'a [D],
    ka: impl Fn(&'a A) -> K,
    kd: impl Fn(&'a D) -> K,
) -> (Vec<&'a A>, Vec<&'a D>) {
    let delete = actual
        .iter()
        .filter(|a| !desired.iter().any(|d| kd(d) == ka(a)))
        .collect();
    // Each key once: two nodes naming one server must not create the same member twice.
    let create = desired
        .iter()
        .enumerate()
        .filter(|(i, d)| {
            !actual.iter().any(|a| kd(d) == ka(a)) && !desired[..*i].iter().any(|e| kd(e) == kd(d))
        })
        .map(|(_, d)| d)
        .collect();
    (delete, create)
}

/// The member, listener and monitor changes of one pool.
pub fn plan_children<'a>(desired: &'a DesiredPool, actual: &'a PoolState) -> ChildPlan<'a> {
    let (delete_members, create_members) = diff(
        &actual.members,
        &desired.members,
        member_key,
        desired_member_key,
    );
    let (delete_listeners, create_listeners) = diff(
        &actual.listeners,
        std::slice::from_ref(&desired.listener),
        listener_key,
        desired_listener_key,
    );
    let (delete_monitors, create_monitors) = diff(
        &actual.monitors,
        std::slice::from_ref(&desired.monitor),
        monitor_key,
        desired_monitor_key,
    );
    ChildPlan {
        delete_members,
        create_members,
        delete_listeners,
        create_listeners,
        delete_monitors,
        create_monitors,
    }
}

/// One in-place change: `PATCH <path>` with a one-field body.
#[derive(Clone, Debug, PartialEq)]
pub struct Patch {
    /// Relative to `/v1/`.
    pub path: String,
    /// The one field to change, e.g. `{"delay_s": 5}`.
    pub body: Value,
}

/// PATCHes for fields that are not part of a key: one per differing field, like upstream.
pub fn plan_patches(desired: &DesiredPool, actual: &PoolState) -> Vec<Patch> {
    let mut out = Vec::new();
    let d = &desired.listener;
    for l in actual
        .listeners
        .iter()
        .filter(|l| listener_key(l) == desired_listener_key(d))
    {
        let path = format!("load-balancers/listeners/{}", l.uuid);
        let mut field = |differs: bool, body: Value| {
            if differs {
                out.push(Patch {
                    path: path.clone(),
                    body,
                });
            }
        };
        // An empty list is sent explicitly, so removing every CIDR resets the listener.
        field(
            l.allowed_cidrs != d.allowed_cidrs,
            json!({"allowed_cidrs": d.allowed_cidrs}),
        );
        field(
            l.timeout_client_data_ms != d.timeout_client_data_ms,
            json!({"timeout_client_data_ms": d.timeout_client_data_ms}),
        );
        field(
            l.timeout_member_connect_ms != d.timeout_member_connect_ms,
            json!({"timeout_member_connect_ms": d.timeout_member_connect_ms}),
        );
        field(
            l.timeout_member_data_ms != d.timeout_member_data_ms,
            json!({"timeout_member_data_ms": d.timeout_member_data_ms}),
        );
    }
    let d = &desired.monitor;
    for m in actual
        .monitors
        .iter()
        .filter(|m| monitor_key(m) == desired_monitor_key(d))
    {
        let path = format!("load-balancers/health-monitors/{}", m.uuid);
        let mut field = |differs: bool, body: Value| {
            if differs {
                out.push(Patch {
                    path: path.clone(),
                    body,
                });
            }
        };
        if let (Some(want), Some(have)) = (&d.http, &m.http) {
            field(want.host != have.host, json!({"http": {"host": want.host}}));
            field(
                want.url_path != have.url_path,
                json!({"http": {"url_path": want.url_path}}),
            );
            field(
                want.method != have.method,
                json!({"http": {"method": want.method}}),
            );
            field(
                want.expected_codes != have.expected_codes,
                json!({"http": {"expected_codes": want.expected_codes}}),
            );
        }
        field(m.delay_s != d.delay_s, json!({"delay_s": d.delay_s}));
        field(
            m.timeout_s != d.timeout_s,
            json!({"timeout_s": d.timeout_s}),
        );
        field(
            m.up_threshold != d.up_threshold,
            json!({"up_threshold": d.up_threshold}),
        );
        field(
            m.down_threshold != d.down_threshold,
            json!({"down_threshold": d.down_threshold}),
        );
    }
    out
}

/// Why the load balancer cannot be changed into the desired one; these need a new Service.
pub fn refusal(desired: &DesiredLb, actual: &LoadBalancer) -> Option<String> {
    let recreate = "; this cannot be changed on an existing load balancer: delete and re-create \
                    the Service (or revert the annotation)";
    if !desired.vips.is_empty() {
        let same = desired.vips.len() == actual.vip_addresses.len()
            && desired
                .vips
                .iter()
                .zip(&actual.vip_addresses)
                .all(|(d, a)| {
                    d.subnet == a.subnet.uuid && d.address.as_ref().is_none_or(|x| *x == a.address)
                });
        if !same {
            return Some(format!(
                "k8s.cloudscale.ch/loadbalancer-vip-addresses does not match the VIP addresses of \
                 load balancer {} ({}){recreate}",
                actual.uuid,
                actual
                    .vip_addresses
                    .iter()
                    .map(|v| format!("{} in subnet {}", v.address, v.subnet.uuid))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    if desired.flavor != actual.flavor.slug {
        return Some(format!(
            "k8s.cloudscale.ch/loadbalancer-flavor is {:?} but load balancer {} has flavor {:?}{recreate}",
            desired.flavor, actual.uuid, actual.flavor.slug
        ));
    }
    // An empty desired zone means "no preference" (no annotation and no nodes to take one
    // from); upstream compared it anyway and refused forever (see README, deviations).
    if !desired.zone.is_empty() && desired.zone != actual.zone.slug {
        return Some(format!(
            "the load balancer zone would be {:?} but load balancer {} is in {:?}{recreate}",
            desired.zone, actual.uuid, actual.zone.slug
        ));
    }
    None
}

/// The floating IPs of `desired` that the account does not have at all (compared by address).
/// Checked before a load balancer is created: a billed load balancer must not be built for a
/// Service whose floating IP can never be assigned.
pub fn absent_floating_ips<'a>(desired: &'a DesiredLb, actual: &[FloatingIp]) -> Vec<&'a str> {
    desired
        .floating_ips
        .iter()
        .filter(|want| {
            let addr = floating_ip_address(want);
            !actual.iter().any(|f| {
                f.network == **want || (addr.is_some() && floating_ip_address(&f.network) == addr)
            })
        })
        .map(String::as_str)
        .collect()
}

/// The desired floating IPs that do not point at the load balancer yet. Floating IPs are never
/// unassigned (upstream: removing one from the annotation leaves it on the load balancer).
pub fn missing_floating_ips<'a>(
    desired: &'a DesiredLb,
    lb_uuid: &str,
    actual: &[FloatingIp],
) -> Vec<&'a str> {
    desired
        .floating_ips
        .iter()
        .filter(|want| {
            // By address: the API lists `5.102.150.123/32`, the annotation may say
            // `5.102.150.123` or spell an IPv6 address differently (review finding 1).
            let addr = floating_ip_address(want);
            !actual.iter().any(|f| {
                (f.network == **want || (addr.is_some() && floating_ip_address(&f.network) == addr))
                    && f.load_balancer.as_ref().is_some_and(|l| l.uuid == lb_uuid)
            })
        })
        .map(String::as_str)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotations::VipRequest;
    use crate::model::{MonitorHttp, Slug, Stub, SubnetRef, Vip};

    fn dpool(name: &str, algorithm: &str) -> DesiredPool {
        DesiredPool {
            name: name.into(),
            algorithm: algorithm.into(),
            protocol: "tcp".into(),
            members: vec![DesiredMember {
                name: "10.0.0.1:30080".into(),
                address: "10.0.0.1".into(),
                subnet: "s1".into(),
                protocol_port: 30080,
                monitor_port: 30080,
            }],
            listener: DesiredListener {
                name: "tcp/80".into(),
                protocol: "tcp".into(),
                protocol_port: 80,
                allowed_cidrs: vec![],
                timeout_client_data_ms: 50_000,
                timeout_member_connect_ms: 5_000,
                timeout_member_data_ms: 50_000,
            },
            monitor: DesiredMonitor {
                kind: "tcp".into(),
                delay_s: 2,
                timeout_s: 1,
                up_threshold: 2,
                down_threshold: 3,
                http: None,
            },
        }
    }

    fn state_of(d: &DesiredPool) -> PoolState {
        PoolState {
            pool: Pool {
                uuid: "p1".into(),
                name: d.name.clone(),
                algorithm: d.algorithm.clone(),
                protocol: d.protocol.clone(),
                ..Default::default()
            },
            members: d
                .members
                .iter()
                .map(|m| Member {
                    uuid: "m1".into(),
                    name: m.name.clone(),
                    enabled: true,
                    protocol_port: m.protocol_port,
                    monitor_port: m.monitor_port,
                    address: m.address.clone(),
                    subnet: SubnetRef {
                        uuid: m.subnet.clone(),
                        cidr: String::new(),
                    },
                    ..Default::default()
                })
                .collect(),
            listeners: vec![Listener {
                uuid: "l1".into(),
                name: d.listener.name.clone(),
                protocol: d.listener.protocol.clone(),
                protocol_port: d.listener.protocol_port,
                allowed_cidrs: d.listener.allowed_cidrs.clone(),
                timeout_client_data_ms: 50_000,
                timeout_member_connect_ms: 5_000,
                timeout_member_data_ms: 50_000,
                ..Default::default()
            }],
            monitors: vec![Monitor {
                uuid: "h1".into(),
                kind: d.monitor.kind.clone(),
                delay_s: 2,
                timeout_s: 1,
                up_threshold: 2,
                down_threshold: 3,
                http: None,
                ..Default::default()
            }],
        }
    }

    fn lb(pools: Vec<DesiredPool>) -> DesiredLb {
        DesiredLb {
            name: "lb".into(),
            flavor: "lb-standard".into(),
            zone: "rma1".into(),
            vips: vec![],
            floating_ips: vec![],
            pools,
            keep_members_at: vec![],
        }
    }

    #[test]
    fn an_equal_state_plans_nothing() {
        let d = dpool("tcp", "round_robin");
        let s = state_of(&d);
        let want = lb(vec![d.clone()]);
        assert!(plan_pools(&want, std::slice::from_ref(&s)).is_empty());
        let c = plan_children(&d, &s);
        assert!(!c.deletes() && !c.creates());
        assert!(plan_patches(&d, &s).is_empty());
    }

    #[test]
    fn algorithm_change_recreates_the_pool_port_change_only_the_listener() {
        let old = dpool("tcp", "round_robin");
        let s = state_of(&old);
        let want = lb(vec![dpool("tcp", "source_ip")]);
        let p = plan_pools(&want, std::slice::from_ref(&s));
        assert_eq!((p.delete.len(), p.create.len()), (1, 1));

        let mut moved = old.clone();
        moved.listener.protocol_port = 8080;
        moved.listener.name = "tcp/8080".into();
        assert!(plan_pools(&lb(vec![moved.clone()]), std::slice::from_ref(&s)).is_empty());
        let c = plan_children(&moved, &s);
        assert_eq!((c.delete_listeners.len(), c.create_listeners.len()), (1, 1));
        assert!(c.delete_members.is_empty() && c.create_monitors.is_empty());
    }

    #[test]
    fn timeouts_cidrs_and_monitor_values_patch_in_place() {
        let old = dpool("tcp", "round_robin");
        let s = state_of(&old);
        let mut new = old.clone();
        new.listener.timeout_member_data_ms = 60_000;
        new.listener.allowed_cidrs = vec!["1.2.3.0/24".into()];
        new.monitor.delay_s = 5;
        let c = plan_children(&new, &s);
        assert!(!c.deletes() && !c.creates());
        let patches = plan_patches(&new, &s);
        assert_eq!(
            patches,
            vec![
                Patch {
                    path: "load-balancers/listeners/l1".into(),
                    body: json!({"allowed_cidrs": ["1.2.3.0/24"]})
                },
                Patch {
                    path: "load-balancers/listeners/l1".into(),
                    body: json!({"timeout_member_data_ms": 60000})
                },
                Patch {
                    path: "load-balancers/health-monitors/h1".into(),
                    body: json!({"delay_s": 5})
                },
            ]
        );
    }

    #[test]
    fn monitor_type_and_http_version_recreate_other_http_fields_patch() {
        let old = dpool("tcp", "round_robin");
        let mut s = state_of(&old);
        let mut http = old.clone();
        http.monitor.kind = "http".into();
        let c = plan_children(&http, &s);
        assert_eq!((c.delete_monitors.len(), c.create_monitors.len()), (1, 1));

        s.monitors[0].kind = "http".into();
        s.monitors[0].http = Some(MonitorHttp {
            method: "GET".into(),
            url_path: "/".into(),
            version: "1.1".into(),
            host: None,
            expected_codes: vec!["200".into()],
        });
        // No HTTP block wanted: the API's defaults stand, nothing to do.
        assert!(plan_patches(&http, &s).is_empty());
        let mut path = http.clone();
        path.monitor.http = Some(MonitorHttp {
            url_path: "/healthz".into(),
            ..s.monitors[0].http.clone().unwrap()
        });
        assert_eq!(
            plan_patches(&path, &s),
            vec![Patch {
                path: "load-balancers/health-monitors/h1".into(),
                body: json!({"http": {"url_path": "/healthz"}})
            }]
        );
        let mut v10 = path.clone();
        v10.monitor.http.as_mut().unwrap().version = "1.0".into();
        let c = plan_children(&v10, &s);
        assert_eq!((c.delete_monitors.len(), c.create_monitors.len()), (1, 1));
    }

    #[test]
    fn duplicate_pools_and_duplicate_members_are_reconciled_once() {
        let d = dpool("tcp", "round_robin");
        let mut second = state_of(&d);
        second.pool.uuid = "p2".into();
        let actual = vec![state_of(&d), second];
        let want = lb(vec![d.clone()]);
        let p = plan_pools(&want, &actual);
        assert_eq!(p.delete.len(), 1);
        assert_eq!(p.delete[0].pool.uuid, "p2", "the later duplicate goes");
        assert!(p.create.is_empty());

        let mut twice = d.clone();
        twice.members.push(twice.members[0].clone());
        let mut empty = state_of(&d);
        empty.members.clear();
        assert_eq!(plan_children(&twice, &empty).create_members.len(), 1);
    }

    #[test]
    fn member_keys_include_the_monitor_port() {
        let old = dpool("tcp", "round_robin");
        let s = state_of(&old);
        let mut local = old.clone();
        local.members[0].monitor_port = 32000;
        let c = plan_children(&local, &s);
        assert_eq!((c.delete_members.len(), c.create_members.len()), (1, 1));
    }

    #[test]
    fn refusals() {
        let actual = LoadBalancer {
            uuid: "lb1".into(),
            flavor: Slug {
                slug: "lb-standard".into(),
            },
            zone: Slug {
                slug: "rma1".into(),
            },
            vip_addresses: vec![Vip {
                version: 4,
                address: "10.0.0.5".into(),
                subnet: SubnetRef {
                    uuid: "s1".into(),
                    cidr: String::new(),
                },
            }],
            ..Default::default()
        };
        let mut want = lb(vec![]);
        assert_eq!(refusal(&want, &actual), None);
        want.zone = String::new();
        assert_eq!(refusal(&want, &actual), None, "no zone preference");
        want.zone = "lpg1".into();
        assert!(refusal(&want, &actual).unwrap().contains("zone"));
        want.zone = "rma1".into();
        want.flavor = "lb-large".into();
        assert!(refusal(&want, &actual).unwrap().contains("flavor"));
        want.flavor = "lb-standard".into();
        want.vips = vec![VipRequest {
            subnet: "s1".into(),
            address: None,
        }];
        assert_eq!(refusal(&want, &actual), None);
        want.vips[0].address = Some("10.0.0.6".into());
        assert!(refusal(&want, &actual).unwrap().contains("vip-addresses"));
    }

    #[test]
    fn floating_ips_are_only_added() {
        let mut want = lb(vec![]);
        want.floating_ips = vec!["5.102.150.1/32".into(), "5.102.150.2/32".into()];
        let on = |uuid: &str| {
            Some(Stub {
                uuid: uuid.into(),
                ..Default::default()
            })
        };
        let actual = vec![
            FloatingIp {
                network: "5.102.150.1/32".into(),
                load_balancer: on("lb1"),
            },
            FloatingIp {
                network: "5.102.150.2/32".into(),
                load_balancer: on("other"),
            },
        ];
        assert_eq!(
            missing_floating_ips(&want, "lb1", &actual),
            vec!["5.102.150.2/32"]
        );
    }

    #[test]
    fn floating_ips_match_by_address() {
        let mut want = lb(vec![]);
        want.floating_ips = vec!["2a06:c01:0:0::1/128".into(), "5.102.150.3/32".into()];
        let actual = vec![FloatingIp {
            network: "2a06:c01::1/128".into(),
            load_balancer: Some(Stub {
                uuid: "lb1".into(),
                ..Default::default()
            }),
        }];
        assert_eq!(
            missing_floating_ips(&want, "lb1", &actual),
            vec!["5.102.150.3/32"]
        );
    }

    #[test]
    fn absent_floating_ips_are_those_the_account_lacks() {
        let mut want = lb(vec![]);
        want.floating_ips = vec!["2a06:c01:0:0::1".into(), "5.102.150.3/32".into()];
        // Assigned elsewhere or not at all, it exists: only the unknown address is absent.
        let actual = vec![FloatingIp {
            network: "2a06:c01::1/128".into(),
            load_balancer: None,
        }];
        assert_eq!(absent_floating_ips(&want, &actual), vec!["5.102.150.3/32"]);
        assert!(absent_floating_ips(&lb(vec![]), &[]).is_empty());
    }
}
