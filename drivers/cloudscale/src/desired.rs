//! The load balancer a Service asks for, computed on every call from the Service, its
//! annotations and the servers behind the selected nodes (upstream's "desired state").
//!
//! Names are identity keys shared with the upstream CCM, so they must stay byte-identical: a load
//! balancer built by the Go CCM is adopted, not rebuilt.

use serde::Serialize;
use wasm_ccm_sdk::types::{Protocol, ProviderError, Service, TrafficPolicy};

use crate::annotations::{Annotations, VipRequest};
use crate::model::{MonitorHttp, Server};

/// The whole load balancer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredLb {
    /// The name: `k8s-service-<uid>` or the `loadbalancer-name` annotation.
    pub name: String,
    /// The flavor slug (`loadbalancer-flavor`, `lb-standard` by default).
    pub flavor: String,
    /// Empty: no preference (no zone annotation and no nodes to take one from).
    pub zone: String,
    /// The requested VIPs (`loadbalancer-vip-addresses`); empty for the public IPv4 + IPv6 pair.
    pub vips: Vec<VipRequest>,
    /// The floating IPs to point at the load balancer, each an `address/prefix` network.
    pub floating_ips: Vec<String>,
    /// One pool per Service port, in port order.
    pub pools: Vec<DesiredPool>,
    /// Addresses whose existing members stay as they are, neither created nor deleted: the
    /// private addresses of servers that a node matched ambiguously (see
    /// [`crate::instances::Mapping::ambiguous_addresses`]).
    pub keep_members_at: Vec<String>,
}

/// One pool per Service port, with its members, listener and health monitor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredPool {
    /// The pool's name: the protocol, plus `/<port name>` when the port has one.
    pub name: String,
    /// The balancing algorithm (`loadbalancer-pool-algorithm`).
    pub algorithm: String,
    /// The protocol to the members: `loadbalancer-pool-protocol` for TCP ports, `udp` for UDP
    /// ports.
    pub protocol: String,
    /// One member per private address of each selected node (in an allowed subnet, if any are
    /// given).
    pub members: Vec<DesiredMember>,
    /// The listener on the Service port.
    pub listener: DesiredListener,
    /// The health monitor checking the members.
    pub monitor: DesiredMonitor,
}

/// A pool member: one private address of one node.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DesiredMember {
    /// The member's name: `<address>:<node port>`.
    pub name: String,
    /// The node's private address.
    pub address: String,
    /// The UUID of the subnet `address` is in.
    pub subnet: String,
    /// The port traffic goes to: the Service port's node port.
    pub protocol_port: u32,
    /// The port the monitor checks: the health-check node port with traffic policy `Local`, else
    /// the node port.
    pub monitor_port: u32,
}

/// The listener of a pool (the public port).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredListener {
    /// The listener's name: `<protocol>/<port>`.
    pub name: String,
    /// `loadbalancer-listener-protocol` for TCP ports, `udp` for UDP ports.
    pub protocol: String,
    /// The public port: the Service port.
    pub protocol_port: u32,
    /// Source CIDRs allowed to connect (`loadbalancer-listener-allowed-cidrs`); empty allows all.
    pub allowed_cidrs: Vec<String>,
    /// Client inactivity timeout in milliseconds (the annotation, or the API default for `0`).
    pub timeout_client_data_ms: u64,
    /// Member connect timeout in milliseconds (the annotation, or the API default for `0`).
    pub timeout_member_connect_ms: u64,
    /// Member inactivity timeout in milliseconds (the annotation, or the API default for `0`).
    pub timeout_member_data_ms: u64,
}

/// The health monitor of a pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredMonitor {
    /// The check type: `loadbalancer-health-monitor-type`, or `http` with traffic policy `Local`.
    pub kind: String,
    /// Seconds between checks (the annotation, or the API default for `0`).
    pub delay_s: u64,
    /// Seconds a check may take (the annotation, or the API default for `0`).
    pub timeout_s: u64,
    /// Consecutive successes before a member is up (the annotation, or the API default for `0`).
    pub up_threshold: u64,
    /// Consecutive failures before a member is down (the annotation, or the API default for `0`).
    pub down_threshold: u64,
    /// `None`: the API's defaults (or no HTTP block for non-HTTP types).
    pub http: Option<MonitorHttp>,
}

/// The API's defaults, which an annotation of `0` stands for (upstream omits zero values from
/// requests, so the API applies its default).
pub mod api_defaults {
    /// Seconds between two health checks.
    pub const DELAY_S: u64 = 2;
    /// Seconds a health check may take.
    pub const TIMEOUT_S: u64 = 1;
    /// Consecutive successful checks before a member counts as up.
    pub const UP_THRESHOLD: u64 = 2;
    /// Consecutive failed checks before a member counts as down.
    pub const DOWN_THRESHOLD: u64 = 3;
    /// Listener client inactivity timeout, in milliseconds.
    pub const TIMEOUT_CLIENT_DATA_MS: u64 = 50_000;
    /// Listener timeout for connecting to a member, in milliseconds.
    pub const TIMEOUT_MEMBER_CONNECT_MS: u64 = 5_000;
    /// Listener member inactivity timeout, in milliseconds.
    pub const TIMEOUT_MEMBER_DATA_MS: u64 = 50_000;
    /// The HTTP version of HTTP health checks.
    pub const HTTP_VERSION: &str = "1.1";
}

fn or_default(value: u64, default: u64) -> u64 {
    if value == 0 { default } else { value }
}

/// Pool name: the lowercase protocol, plus `/<port name>` when the port has one.
pub fn pool_name(protocol: Protocol, port_name: &str) -> String {
    let proto = protocol_name(protocol);
    if port_name.is_empty() {
        proto.to_string()
    } else {
        format!("{proto}/{port_name}")
    }
}

/// Listener name: `<listener protocol>/<port>`, lowercase.
pub fn listener_name(protocol: &str, port: u16) -> String {
    format!("{protocol}/{port}").to_lowercase()
}

/// Member name: `<address>:<node port>`, IPv6 in brackets.
pub fn member_name(address: &str, node_port: u32) -> String {
    if address.contains(':') {
        format!("[{address}]:{node_port}")
    } else {
        format!("{address}:{node_port}")
    }
}

fn protocol_name(p: Protocol) -> &'static str {
    match p {
        Protocol::Tcp => "tcp",
        Protocol::Udp => "udp",
        Protocol::Sctp => "sctp",
    }
}

/// The zone every server is in, `""` when there are none, an error when they disagree.
pub fn common_zone(servers: &[&Server]) -> Result<String, ProviderError> {
    let mut zones: Vec<&str> = servers.iter().map(|s| s.zone.slug.as_str()).collect();
    zones.sort_unstable();
    zones.dedup();
    match zones[..] {
        [] => Ok(String::new()),
        [zone] => Ok(zone.to_string()),
        _ => Err(ProviderError::invalid_config(format!(
            "no loadbalancer zone set and nodes in multiple zones ({}): set the annotation \
             k8s.cloudscale.ch/loadbalancer-zone or select nodes of one zone with \
             k8s.cloudscale.ch/loadbalancer-node-selector",
            zones.join(", ")
        ))),
    }
}

/// Computes the load balancer for `service` backed by `servers` (one per selected node).
pub fn desired(
    service: &Service,
    a: &Annotations,
    servers: &[&Server],
) -> Result<DesiredLb, ProviderError> {
    let zone = if a.zone.is_empty() {
        common_zone(servers)?
    } else {
        a.zone.clone()
    };
    let local = service.external_traffic_policy == TrafficPolicy::Local;
    let monitor = monitor(a, local);
    let mut pools = Vec::with_capacity(service.ports.len());
    for port in &service.ports {
        let protocol = match port.protocol {
            Protocol::Tcp => a.pool_protocol.clone(),
            Protocol::Udp => "udp".to_string(),
            Protocol::Sctp => {
                return Err(ProviderError::invalid_config(format!(
                    "port {} is SCTP: cloudscale load balancers support TCP and UDP only",
                    port.port
                )));
            }
        };
        if port.node_port == 0 {
            return Err(ProviderError::invalid_config(format!(
                "port {} has no node port: cloudscale load balancers send traffic to node ports, \
                 so spec.allocateLoadBalancerNodePorts must not be false",
                port.port
            )));
        }
        let node_port = u32::from(port.node_port);
        let monitor_port = if local && service.health_check_node_port > 0 {
            u32::from(service.health_check_node_port)
        } else {
            node_port
        };
        let listener_protocol = match port.protocol {
            Protocol::Udp => "udp".to_string(),
            _ => a.listener_protocol.clone(),
        };
        pools.push(DesiredPool {
            name: pool_name(port.protocol, &port.name),
            algorithm: a.pool_algorithm.clone(),
            protocol,
            members: members(servers, &a.allowed_subnets, node_port, monitor_port),
            listener: DesiredListener {
                name: listener_name(&listener_protocol, port.port),
                protocol: listener_protocol,
                protocol_port: u32::from(port.port),
                allowed_cidrs: a.allowed_cidrs.clone(),
                timeout_client_data_ms: or_default(
                    a.timeout_client_data_ms,
                    api_defaults::TIMEOUT_CLIENT_DATA_MS,
                ),
                timeout_member_connect_ms: or_default(
                    a.timeout_member_connect_ms,
                    api_defaults::TIMEOUT_MEMBER_CONNECT_MS,
                ),
                timeout_member_data_ms: or_default(
                    a.timeout_member_data_ms,
                    api_defaults::TIMEOUT_MEMBER_DATA_MS,
                ),
            },
            monitor: monitor.clone(),
        });
    }
    Ok(DesiredLb {
        name: a.name.clone(),
        flavor: a.flavor.clone(),
        zone,
        vips: a.vip_addresses.clone(),
        floating_ips: a.floating_ips.clone(),
        pools,
        keep_members_at: Vec::new(),
    })
}

/// Members: every address with a subnet on every non-public interface of every server,
/// restricted to the allowed subnets when there are any. Nodes with only public interfaces
/// contribute none.
fn members(
    servers: &[&Server],
    allowed_subnets: &[String],
    node_port: u32,
    monitor_port: u32,
) -> Vec<DesiredMember> {
    let mut out = Vec::new();
    for server in servers {
        for interface in server.interfaces.iter().filter(|i| i.kind != "public") {
            for address in &interface.addresses {
                let subnet = address.subnet_uuid();
                if subnet.is_empty()
                    || (!allowed_subnets.is_empty() && !allowed_subnets.iter().any(|s| s == subnet))
                {
                    continue;
                }
                out.push(DesiredMember {
                    name: member_name(&address.address, node_port),
                    address: address.address.clone(),
                    subnet: subnet.to_string(),
                    protocol_port: node_port,
                    monitor_port,
                });
            }
        }
    }
    out
}

/// The names of the servers that get no member: no private address with a subnet (in the
/// allowed subnets, if any are given). Upstream skips them silently; the caller reports them,
/// since such a node receives no traffic from the load balancer.
pub fn servers_without_members(servers: &[&Server], allowed_subnets: &[String]) -> Vec<String> {
    servers
        .iter()
        .filter(|s| members(std::slice::from_ref(*s), allowed_subnets, 1, 1).is_empty())
        .map(|s| format!("{} ({})", s.name, s.uuid))
        .collect()
}

fn monitor(a: &Annotations, local: bool) -> DesiredMonitor {
    let user_http = a.hm_http.as_ref().map(|h| MonitorHttp {
        method: h.method.clone().unwrap_or_else(|| "GET".into()),
        url_path: h.url_path.clone().unwrap_or_else(|| "/".into()),
        version: h
            .version
            .clone()
            .unwrap_or_else(|| api_defaults::HTTP_VERSION.into()),
        host: h.host.clone(),
        expected_codes: h
            .expected_codes
            .clone()
            .unwrap_or_else(|| vec!["200".into()]),
    });
    let (kind, http) = if local {
        // kube-proxy answers on the health-check node port with HTTP/1.0 at /livez.
        let http = user_http.or_else(|| {
            Some(MonitorHttp {
                method: "GET".into(),
                url_path: "/livez".into(),
                version: "1.0".into(),
                host: None,
                expected_codes: vec!["200".into()],
            })
        });
        ("http".to_string(), http)
    } else {
        // The API keeps no HTTP block on other monitor types (it answers `http: null`), so one
        // here would be a difference that never settles.
        let http = user_http.filter(|_| matches!(a.hm_type.as_str(), "http" | "https"));
        (a.hm_type.clone(), http)
    };
    DesiredMonitor {
        kind,
        delay_s: or_default(a.hm_delay_s, api_defaults::DELAY_S),
        timeout_s: or_default(a.hm_timeout_s, api_defaults::TIMEOUT_S),
        up_threshold: or_default(a.hm_up_threshold, api_defaults::UP_THRESHOLD),
        down_threshold: or_default(a.hm_down_threshold, api_defaults::DOWN_THRESHOLD),
        http,
    }
}

/// The body of `POST /v1/load-balancers`.
#[derive(Serialize)]
pub struct CreateLb<'a> {
    /// The load balancer's name.
    pub name: &'a str,
    /// The flavor slug.
    pub flavor: &'a str,
    /// Always present, `[]` for the public IPv4 + IPv6 pair.
    pub vip_addresses: Vec<CreateVip<'a>>,
    /// The zone slug; omitted when empty, so the API picks one.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub zone: &'a str,
}

/// One requested VIP.
#[derive(Serialize)]
pub struct CreateVip<'a> {
    /// A fixed address; omitted to let the API pick one from the subnet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<&'a str>,
    /// The subnet UUID; omitted when empty.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub subnet: &'a str,
}

impl DesiredLb {
    /// The create request for this load balancer.
    pub fn create_request(&self) -> CreateLb<'_> {
        CreateLb {
            name: &self.name,
            flavor: &self.flavor,
            vip_addresses: self
                .vips
                .iter()
                .map(|v| CreateVip {
                    address: v.address.as_deref(),
                    subnet: &v.subnet,
                })
                .collect(),
            zone: &self.zone,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotations::tests::service;
    use crate::annotations::*;
    use crate::model::{Address, Interface, Slug, SubnetRef};
    use wasm_ccm_sdk::types::ServicePort;

    fn server(name: &str, zone: &str, interfaces: Vec<(&str, Vec<(&str, &str)>)>) -> Server {
        Server {
            uuid: format!("uuid-{name}"),
            name: name.into(),
            status: "running".into(),
            flavor: Slug {
                slug: "flex-4-2".into(),
            },
            zone: Slug { slug: zone.into() },
            interfaces: interfaces
                .into_iter()
                .map(|(kind, addrs)| Interface {
                    kind: kind.into(),
                    addresses: addrs
                        .into_iter()
                        .map(|(a, subnet)| Address {
                            version: if a.contains(':') { 6 } else { 4 },
                            address: a.into(),
                            subnet: Some(SubnetRef {
                                uuid: subnet.into(),
                                cidr: String::new(),
                            }),
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    fn port(name: &str, protocol: Protocol, port: u16, node_port: u16) -> ServicePort {
        ServicePort {
            name: name.into(),
            protocol,
            port,
            node_port,
        }
    }

    #[test]
    fn names_are_upstreams() {
        assert_eq!(pool_name(Protocol::Tcp, ""), "tcp");
        assert_eq!(pool_name(Protocol::Udp, "dns"), "udp/dns");
        assert_eq!(listener_name("TCP", 80), "tcp/80");
        assert_eq!(member_name("10.0.0.1", 30080), "10.0.0.1:30080");
        assert_eq!(member_name("fd00::1", 30080), "[fd00::1]:30080");
    }

    #[test]
    fn members_come_from_private_subnets_only() {
        let a = server(
            "a",
            "rma1",
            vec![
                ("public", vec![("5.102.148.1", ""), ("2a06:c01::1", "")]),
                (
                    "private",
                    vec![("10.0.0.1", "s1"), ("fd00::1", "s1"), ("10.9.0.1", "s9")],
                ),
            ],
        );
        let b = server("b", "rma1", vec![("public", vec![("5.102.148.2", "")])]);
        let mut svc = service(&[]);
        svc.ports = vec![port("", Protocol::Tcp, 80, 30080)];
        let ann = Annotations::parse(&svc).unwrap();
        let d = desired(&svc, &ann, &[&a, &b]).unwrap();
        let names: Vec<_> = d.pools[0].members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            ["10.0.0.1:30080", "[fd00::1]:30080", "10.9.0.1:30080"]
        );
        assert_eq!(d.zone, "rma1");
        // `b` has only a public interface: it is reported, `a` is not.
        let without = servers_without_members(&[&a, &b], &[]);
        assert_eq!(without.len(), 1, "{without:?}");
        assert!(without[0].starts_with("b ("), "{without:?}");
        assert_eq!(
            servers_without_members(&[&a, &b], &["s-none".to_string()]).len(),
            2
        );

        svc.annotations = vec![(LB_ALLOWED_SUBNETS.into(), r#"["s9"]"#.into())];
        let ann = Annotations::parse(&svc).unwrap();
        let d = desired(&svc, &ann, &[&a, &b]).unwrap();
        assert_eq!(d.pools[0].members.len(), 1);
        assert_eq!(d.pools[0].members[0].subnet, "s9");
    }

    #[test]
    fn udp_ports_and_protocol_annotations() {
        let mut svc = service(&[(LB_POOL_PROTOCOL, "proxyv2"), (LB_LISTENER_PROTOCOL, "tcp")]);
        svc.ports = vec![
            port("dns-tcp", Protocol::Tcp, 53, 30053),
            port("dns-udp", Protocol::Udp, 53, 30054),
        ];
        let ann = Annotations::parse(&svc).unwrap();
        let d = desired(&svc, &ann, &[]).unwrap();
        assert_eq!(d.pools[0].name, "tcp/dns-tcp");
        assert_eq!(d.pools[0].protocol, "proxyv2");
        assert_eq!(d.pools[0].listener.name, "tcp/53");
        assert_eq!(d.pools[1].name, "udp/dns-udp");
        assert_eq!(d.pools[1].protocol, "udp");
        assert_eq!(d.pools[1].listener.name, "udp/53");
        assert_eq!(d.zone, "");
    }

    #[test]
    fn local_traffic_policy_checks_kube_proxy() {
        let mut svc = service(&[(LB_HM_TYPE, "tcp")]);
        svc.ports = vec![port("", Protocol::Tcp, 80, 30080)];
        svc.external_traffic_policy = TrafficPolicy::Local;
        svc.health_check_node_port = 32000;
        let a = server("a", "lpg1", vec![("private", vec![("10.0.0.1", "s1")])]);
        let ann = Annotations::parse(&svc).unwrap();
        let d = desired(&svc, &ann, &[&a]).unwrap();
        let m = &d.pools[0].monitor;
        assert_eq!(m.kind, "http");
        let http = m.http.as_ref().unwrap();
        assert_eq!(
            (
                http.method.as_str(),
                http.url_path.as_str(),
                http.version.as_str()
            ),
            ("GET", "/livez", "1.0")
        );
        assert_eq!(d.pools[0].members[0].monitor_port, 32000);
        assert_eq!(d.pools[0].members[0].protocol_port, 30080);
    }

    #[test]
    fn refusals_before_any_request() {
        let mut svc = service(&[]);
        svc.ports = vec![port("", Protocol::Sctp, 80, 30080)];
        let ann = Annotations::parse(&svc).unwrap();
        assert!(
            matches!(desired(&svc, &ann, &[]), Err(ProviderError::InvalidConfig(m)) if m.contains("SCTP"))
        );
        svc.ports = vec![port("", Protocol::Tcp, 80, 0)];
        assert!(
            matches!(desired(&svc, &ann, &[]), Err(ProviderError::InvalidConfig(m)) if m.contains("node port"))
        );
        svc.ports = vec![port("", Protocol::Tcp, 80, 30080)];
        let a = server("a", "rma1", vec![]);
        let b = server("b", "lpg1", vec![]);
        assert!(
            matches!(desired(&svc, &ann, &[&a, &b]), Err(ProviderError::InvalidConfig(m)) if m.contains("multiple zones"))
        );
        let svc = service(&[(LB_ZONE, "lpg1")]);
        let ann = Annotations::parse(&svc).unwrap();
        assert_eq!(desired(&svc, &ann, &[&a, &b]).unwrap().zone, "lpg1");
    }

    #[test]
    fn http_blocks_only_on_http_monitors_with_empty_fields_defaulted() {
        let mut svc = service(&[(LB_HM_HTTP, r#"{"version": "1.0"}"#)]);
        svc.ports = vec![port("", Protocol::Tcp, 80, 30080)];
        let ann = Annotations::parse(&svc).unwrap();
        let d = desired(&svc, &ann, &[]).unwrap();
        assert_eq!(
            d.pools[0].monitor.http, None,
            "a tcp monitor has no HTTP block"
        );

        let mut svc = service(&[
            (LB_HM_TYPE, "http"),
            (
                LB_HM_HTTP,
                r#"{"version": "", "expected_codes": [], "url_path": "/x"}"#,
            ),
        ]);
        svc.ports = vec![port("", Protocol::Tcp, 80, 30080)];
        let ann = Annotations::parse(&svc).unwrap();
        let http = desired(&svc, &ann, &[]).unwrap().pools[0]
            .monitor
            .http
            .clone()
            .unwrap();
        assert_eq!(http.version, "1.1");
        assert_eq!(http.expected_codes, vec!["200"]);
        assert_eq!(http.url_path, "/x");
    }

    #[test]
    fn zero_means_the_api_default() {
        let mut svc = service(&[(LB_HM_DELAY, "0"), (LB_TIMEOUT_CLIENT_DATA, "0")]);
        svc.ports = vec![port("", Protocol::Tcp, 80, 30080)];
        let ann = Annotations::parse(&svc).unwrap();
        let d = desired(&svc, &ann, &[]).unwrap();
        assert_eq!(d.pools[0].monitor.delay_s, 2);
        assert_eq!(d.pools[0].listener.timeout_client_data_ms, 50_000);
    }
}
