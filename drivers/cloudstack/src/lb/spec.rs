//! What a Service asks of CloudStack (upstream `cloudstack_loadbalancer.go`, `protocol.go`): the LB
//! name, one rule per port with its CloudStack protocol, the algorithm, the CIDR lists, the
//! hostname and the requested IP. Every annotation and field is checked here, before any request,
//! so bad input changes nothing.

use std::net::IpAddr;

use wasm_ccm_sdk::types::{Protocol, ProviderError, Service, SessionAffinity};

/// `"true"`: TCP ports use CloudStack's `tcp-proxy` protocol.
pub const PROXY_PROTOCOL: &str =
    "service.beta.kubernetes.io/cloudstack-load-balancer-proxy-protocol";
/// A hostname reported as the Service's ingress instead of the IP.
pub const HOSTNAME: &str = "service.beta.kubernetes.io/cloudstack-load-balancer-hostname";
/// Comma-separated CIDRs placed on the LB rules.
pub const SOURCE_CIDRS: &str = "service.beta.kubernetes.io/cloudstack-load-balancer-source-cidrs";
/// `"true"` once the driver associated the Service's `spec.loadBalancerIP` itself; it is then
/// released on delete.
pub const IP_ASSOCIATED: &str =
    "service.beta.kubernetes.io/cloudstack-load-balancer-ip-associated-by-controller";

/// Everything, IPv4 (upstream's default for rules, firewall and ACLs).
pub const ANYWHERE: &str = "0.0.0.0/0";

/// One LB rule as wanted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WantedRule {
    /// `<lbname>-<protocol>-<port>`.
    pub name: String,
    /// `tcp`, `udp` or `tcp-proxy`.
    pub protocol: &'static str,
    /// The public port: the Service port.
    pub port: u16,
    /// The private port on the members: the Service port's node port.
    pub node_port: u16,
}

impl WantedRule {
    /// The IP protocol for firewall rules and ACLs (`tcp-proxy` is TCP).
    pub fn ip_protocol(&self) -> &'static str {
        ip_protocol(self.protocol)
    }
}

/// The IP protocol of a CloudStack LB protocol.
pub fn ip_protocol(protocol: &str) -> &'static str {
    if protocol == "udp" { "udp" } else { "tcp" }
}

/// The Service's load balancer as wanted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// The LB name: `a` + the Service UID without dashes, at most 32 characters.
    pub name: String,
    /// `roundrobin`, or `source` for `sessionAffinity: ClientIP`.
    pub algorithm: &'static str,
    /// One rule per Service port.
    pub rules: Vec<WantedRule>,
    /// The LB rules' `cidrlist`.
    pub rule_cidrs: Vec<String>,
    /// The CIDRs of firewall rules and ACL entries.
    pub firewall_cidrs: Vec<String>,
    /// The `cloudstack-load-balancer-hostname` annotation, reported as the ingress instead of the
    /// IP; `None` when unset or blank.
    pub hostname: Option<String>,
    /// `spec.loadBalancerIP`.
    pub requested_ip: Option<String>,
    /// The Service says we associated its requested IP.
    pub ip_associated_by_us: bool,
}

/// Kubernetes' default LB name: `a` + the UID without dashes, at most 32 characters.
pub fn lb_name(service: &Service) -> String {
    let mut name = format!("a{}", service.uid.replace('-', ""));
    name.truncate(32);
    name
}

/// `(protocol, port)` when `rule` is exactly `<lbname>-<protocol>-<port>`: CloudStack's keyword
/// search matches substrings, and a rule of another Service must never be adopted.
pub fn parse_rule_name(lbname: &str, rule: &str) -> Option<(&'static str, u16)> {
    let rest = rule.strip_prefix(lbname)?.strip_prefix('-')?;
    let (protocol, port) = rest.rsplit_once('-')?;
    let protocol = ["tcp", "udp", "tcp-proxy"]
        .into_iter()
        .find(|p| *p == protocol)?;
    if port.starts_with('0') || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((protocol, port.parse().ok()?))
}

fn invalid(service: &Service, message: String) -> ProviderError {
    ProviderError::InvalidConfig(format!("Service {}: {message}", service.key()))
}

/// A CIDR such as `10.0.0.0/8` or `2001:db8::/32`.
fn valid_cidr(cidr: &str) -> bool {
    let Some((ip, prefix)) = cidr.split_once('/') else {
        return false;
    };
    let Ok(ip) = ip.parse::<IpAddr>() else {
        return false;
    };
    let max = if ip.is_ipv4() { 32 } else { 128 };
    prefix.parse::<u8>().is_ok_and(|p| p <= max) && !prefix.starts_with('+')
}

fn cidr_list(
    service: &Service,
    source: &str,
    items: &[&str],
) -> Result<Vec<String>, ProviderError> {
    let mut out = Vec::new();
    for c in items.iter().map(|c| c.trim()).filter(|c| !c.is_empty()) {
        if !valid_cidr(c) {
            return Err(invalid(
                service,
                format!("{source}: {c:?} is not a CIDR such as 203.0.113.0/24"),
            ));
        }
        out.push(c.to_string());
    }
    Ok(out)
}

/// The wanted load balancer, or `invalid-config` naming what to fix.
pub fn wanted(service: &Service) -> Result<Wanted, ProviderError> {
    if service.ports.is_empty() {
        return Err(invalid(service, "it has no ports".into()));
    }
    let proxy = match service.annotation(PROXY_PROTOCOL).map(str::trim) {
        Some("true") => true,
        // Upstream: anything but "true" is the default.
        _ => false,
    };
    let algorithm = match service.session_affinity {
        SessionAffinity::None => "roundrobin",
        SessionAffinity::ClientIp => "source",
    };
    let name = lb_name(service);
    let mut rules = Vec::new();
    for p in &service.ports {
        let protocol = match p.protocol {
            Protocol::Tcp if proxy => "tcp-proxy",
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => {
                return Err(invalid(
                    service,
                    format!(
                        "port {} is SCTP; CloudStack load balancers carry TCP and UDP only",
                        p.port
                    ),
                ));
            }
        };
        if p.node_port == 0 {
            return Err(invalid(
                service,
                format!(
                    "port {} has no node port; CloudStack forwards to node ports, so keep allocateLoadBalancerNodePorts true",
                    p.port
                ),
            ));
        }
        // CloudStack stores every LB rule as protocol `tcp` (`LoadBalancerVO`'s constructor
        // passes `NetUtils.TCP_PROTO`; the LB protocol is a separate column), and
        // `FirewallManagerImpl.detectRulesConflict` has no exception for two LB rules: a second
        // rule on the same IP and port is refused with 537 whatever its protocol. Refused here,
        // before any request, so nothing is associated for a load balancer that cannot exist.
        if let Some(other) = rules.iter().find(|r: &&WantedRule| r.port == p.port) {
            return Err(invalid(
                service,
                format!(
                    "port {} is used by both {} and {}; CloudStack allows one load-balancer rule per public IP and port whatever its protocol, so use different ports (or two Services)",
                    p.port,
                    ip_protocol(other.protocol).to_uppercase(),
                    ip_protocol(protocol).to_uppercase(),
                ),
            ));
        }
        rules.push(WantedRule {
            name: format!("{name}-{protocol}-{}", p.port),
            protocol,
            port: p.port,
            node_port: p.node_port,
        });
    }
    let annotated = match service.annotation(SOURCE_CIDRS) {
        None => None,
        Some(v) => {
            let list = cidr_list(service, SOURCE_CIDRS, &v.split(',').collect::<Vec<_>>())?;
            if list.is_empty() {
                return Err(invalid(
                    service,
                    format!(
                        "{SOURCE_CIDRS} is empty; list CIDRs, or remove it to allow {ANYWHERE}"
                    ),
                ));
            }
            Some(list)
        }
    };
    let ranges: Vec<&str> = service
        .load_balancer_source_ranges
        .iter()
        .map(String::as_str)
        .collect();
    let ranges = cidr_list(service, "spec.loadBalancerSourceRanges", &ranges)?;
    let rule_cidrs = annotated.clone().unwrap_or_else(|| vec![ANYWHERE.into()]);
    // The firewall follows spec.loadBalancerSourceRanges as upstream; without it, the
    // annotation (upstream left the firewall open then, issue #92).
    let firewall_cidrs = if !ranges.is_empty() {
        ranges
    } else {
        annotated.unwrap_or_else(|| vec![ANYWHERE.into()])
    };
    let hostname = service
        .annotation(HOSTNAME)
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(str::to_string);
    let requested_ip = match service.load_balancer_ip.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(ip) => {
            if ip.parse::<IpAddr>().is_err() {
                return Err(invalid(
                    service,
                    format!("spec.loadBalancerIP {ip:?} is not an IP address"),
                ));
            }
            Some(ip.to_string())
        }
    };
    Ok(Wanted {
        name,
        algorithm,
        rules,
        rule_cidrs,
        firewall_cidrs,
        hostname,
        requested_ip,
        ip_associated_by_us: service.annotation(IP_ASSOCIATED) == Some("true"),
    })
}

/// Two CIDR lists hold the same CIDRs (order and repeats aside).
pub fn same_cidrs(a: &[String], b: &[String]) -> bool {
    let norm = |l: &[String]| {
        let mut v: Vec<String> = l.iter().map(|c| c.trim().to_ascii_lowercase()).collect();
        v.sort();
        v.dedup();
        v
    };
    norm(a) == norm(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_ccm_sdk::types::{ServicePort, TrafficPolicy};

    pub(crate) fn service() -> Service {
        Service {
            namespace: "default".into(),
            name: "web".into(),
            uid: "a37ce2d2-0b85-4d9d-9714-da03c0e59513".into(),
            labels: vec![],
            annotations: vec![],
            ports: vec![
                ServicePort {
                    name: "http".into(),
                    protocol: Protocol::Tcp,
                    port: 80,
                    node_port: 30080,
                },
                ServicePort {
                    name: "dns".into(),
                    protocol: Protocol::Udp,
                    port: 53,
                    node_port: 30053,
                },
            ],
            external_traffic_policy: TrafficPolicy::Cluster,
            health_check_node_port: 0,
            load_balancer_ip: None,
            load_balancer_source_ranges: vec![],
            session_affinity: SessionAffinity::None,
            session_affinity_timeout: None,
            ip_families: vec![],
            load_balancer_class: None,
            ingress: vec![],
        }
    }

    #[test]
    fn names_as_kubernetes() {
        let s = service();
        assert_eq!(lb_name(&s), "aa37ce2d20b854d9d9714da03c0e5951");
        let w = wanted(&s).unwrap();
        let names: Vec<&str> = w.rules.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "aa37ce2d20b854d9d9714da03c0e5951-tcp-80",
                "aa37ce2d20b854d9d9714da03c0e5951-udp-53"
            ]
        );
        assert_eq!(w.algorithm, "roundrobin");
        assert_eq!(w.rule_cidrs, [ANYWHERE]);
        assert_eq!(w.firewall_cidrs, [ANYWHERE]);
    }

    #[test]
    fn exact_rule_names_only() {
        let lb = "aa37ce2d20b854d9d9714da03c0e5951";
        assert_eq!(
            parse_rule_name(lb, &format!("{lb}-tcp-80")),
            Some(("tcp", 80))
        );
        assert_eq!(
            parse_rule_name(lb, &format!("{lb}-tcp-proxy-443")),
            Some(("tcp-proxy", 443))
        );
        assert_eq!(
            parse_rule_name(lb, &format!("{lb}-udp-53")),
            Some(("udp", 53))
        );
        for other in [
            format!("x{lb}-tcp-80"),
            format!("{lb}x-tcp-80"),
            format!("{lb}-tcp-80-copy"),
            format!("{lb}-sctp-80"),
            format!("{lb}-tcp-080"),
            format!("{lb}-tcp-99999"),
            format!("{lb}-tcp-"),
        ] {
            assert_eq!(parse_rule_name(lb, &other), None, "{other}");
        }
    }

    #[test]
    fn annotations() {
        let mut s = service();
        s.annotations = vec![
            (PROXY_PROTOCOL.into(), "true".into()),
            (SOURCE_CIDRS.into(), " 10.0.0.0/8 , 192.168.0.0/16".into()),
            (HOSTNAME.into(), "lb.example.com".into()),
            (IP_ASSOCIATED.into(), "true".into()),
        ];
        s.session_affinity = SessionAffinity::ClientIp;
        s.load_balancer_ip = Some("203.0.113.7".into());
        let w = wanted(&s).unwrap();
        assert_eq!(w.rules[0].protocol, "tcp-proxy");
        assert_eq!(w.rules[0].ip_protocol(), "tcp");
        assert_eq!(w.rules[1].protocol, "udp");
        assert_eq!(w.algorithm, "source");
        assert_eq!(w.rule_cidrs, ["10.0.0.0/8", "192.168.0.0/16"]);
        assert_eq!(w.firewall_cidrs, w.rule_cidrs);
        assert_eq!(w.hostname.as_deref(), Some("lb.example.com"));
        assert_eq!(w.requested_ip.as_deref(), Some("203.0.113.7"));
        assert!(w.ip_associated_by_us);
        s.load_balancer_source_ranges = vec!["198.51.100.0/24".into()];
        assert_eq!(wanted(&s).unwrap().firewall_cidrs, ["198.51.100.0/24"]);
        s.annotations[0].1 = "maybe".into();
        assert_eq!(wanted(&s).unwrap().rules[0].protocol, "tcp");
    }

    #[test]
    fn refusals() {
        let refused = |f: &dyn Fn(&mut Service)| {
            let mut s = service();
            f(&mut s);
            match wanted(&s) {
                Err(ProviderError::InvalidConfig(m)) => m,
                other => panic!("expected invalid-config, got {other:?}"),
            }
        };
        assert!(refused(&|s| s.ports.clear()).contains("no ports"));
        assert!(refused(&|s| s.ports[0].protocol = Protocol::Sctp).contains("SCTP"));
        assert!(refused(&|s| s.ports[0].node_port = 0).contains("node port"));
        // TCP and UDP on one port: one LB rule per IP and port in CloudStack.
        assert!(refused(&|s| s.ports[1].port = 80).contains("port 80 is used by both TCP and UDP"));
        let mut proxy = service();
        proxy.ports[1].port = 80;
        proxy.annotations = vec![(PROXY_PROTOCOL.into(), "true".into())];
        assert!(matches!(
            wanted(&proxy),
            Err(ProviderError::InvalidConfig(_))
        ));
        assert!(
            refused(&|s| s.annotations = vec![(SOURCE_CIDRS.into(), "10.0.0.0/33".into())])
                .contains("10.0.0.0/33")
        );
        assert!(
            refused(&|s| s.annotations = vec![(SOURCE_CIDRS.into(), " ".into())])
                .contains("is empty")
        );
        assert!(
            refused(&|s| s.load_balancer_source_ranges = vec!["nope".into()])
                .contains("loadBalancerSourceRanges")
        );
        assert!(refused(&|s| s.load_balancer_ip = Some("1.2.3".into())).contains("loadBalancerIP"));
    }

    #[test]
    fn cidr_sets() {
        let v = |s: &[&str]| s.iter().map(|c| c.to_string()).collect::<Vec<_>>();
        assert!(same_cidrs(
            &v(&["10.0.0.0/8", "1.0.0.0/8"]),
            &v(&["1.0.0.0/8", "10.0.0.0/8"])
        ));
        assert!(!same_cidrs(
            &v(&["10.0.0.0/8"]),
            &v(&["10.0.0.0/8", "1.0.0.0/8"])
        ));
    }
}
