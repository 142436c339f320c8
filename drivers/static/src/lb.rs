//! Load-balancer decisions, kept free of host calls so they test natively.
//!
//! The driver is stateless: a service's address lives in the annotation [`IP_ANNOTATION`] on the
//! Service itself, which the host writes from `ensure`'s result.

use std::collections::HashSet;
use std::net::IpAddr;

use wasm_ccm_sdk::types::{
    AddressClaim, AddressUse, Ingress, IpFamily, Protocol, ProviderError, Service,
};

use crate::pool::{AddressPool, Family};

/// The annotation holding the address allocated to a service.
pub const IP_ANNOTATION: &str = "static.wasm-ccm.io/load-balancer-ip";

/// Upstream's default load-balancer name: `a` + the UID without dashes, at most 32 characters.
pub fn name(service: &Service) -> String {
    let mut name: String = std::iter::once('a')
        .chain(service.uid.chars().filter(|c| *c != '-'))
        .collect();
    // UIDs are ASCII; truncating on a char boundary keeps this panic-free for anything else.
    if let Some((i, _)) = name.char_indices().nth(32) {
        name.truncate(i);
    }
    name
}

/// Refuses what this "cloud" cannot do.
pub fn check_service(service: &Service) -> Result<(), ProviderError> {
    if let Some(p) = service.ports.iter().find(|p| p.protocol == Protocol::Sctp) {
        return Err(ProviderError::InvalidConfig(format!(
            "port {} ({}) uses SCTP, which static load balancers do not support; use TCP or UDP",
            p.port,
            if p.name.is_empty() {
                "unnamed"
            } else {
                &p.name
            }
        )));
    }
    Ok(())
}

/// Why no address could be chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllocationError {
    /// An operator mistake (annotation, `spec.loadBalancerIP`, empty pool).
    Invalid(String),
    /// Every pool address is claimed.
    Exhausted(String),
}

/// The addresses claimed by services other than `service` (matched by UID): their annotation and
/// their published ingress IPs (a `spec.loadBalancerIP` that was never granted claims nothing).
pub fn claimed_by_others(service: &Service, claims: &[AddressClaim]) -> HashSet<IpAddr> {
    claims
        .iter()
        .filter(|c| c.service_uid != service.uid && c.used_as != AddressUse::LoadBalancerIp)
        .filter_map(|c| c.ip.trim().parse().ok())
        .collect()
}

/// The addresses other services publish in their status.
fn published_by_others(service: &Service, claims: &[AddressClaim]) -> HashSet<IpAddr> {
    claims
        .iter()
        .filter(|c| c.service_uid != service.uid && c.used_as == AddressUse::Ingress)
        .filter_map(|c| c.ip.trim().parse().ok())
        .collect()
}

/// Who holds which of the given addresses (by annotation, `spec.loadBalancerIP` or ingress):
/// the driver asks the host (`cluster.address-claims`), which answers with addresses and UIDs, not
/// whole Services; tests answer from a list.
pub type Claims<'a> = &'a dyn Fn(&[IpAddr]) -> Vec<AddressClaim>;

/// How many pool addresses the first query asks about; each next query asks about twice as many
/// (up to [`MAX_CANDIDATES`]), so a fresh address deep in a busy pool takes few host calls.
const FIRST_CANDIDATES: usize = 256;
/// The largest query.
const MAX_CANDIDATES: usize = 4096;

/// Chooses the service's address:
/// 1. `spec.loadBalancerIP` when set — it must be in the pool and not claimed by another service;
/// 2. else the address in the annotation, while it is still in the pool and no other service
///    already publishes it (a Service copied with its annotation does not steal the original's
///    address);
/// 3. else the first free pool address of the service's primary IP family.
///
/// Only the Services that may claim a candidate are asked for, never every Service: the cost of
/// an ensure does not grow with the number of Services once the service has its address.
pub fn choose_ip(
    service: &Service,
    pool: &AddressPool,
    claims: Claims<'_>,
) -> Result<IpAddr, AllocationError> {
    if pool.is_empty() {
        return Err(AllocationError::Invalid(
            "no load-balancer addresses configured: set loadBalancer.addresses in the cloud-config"
                .to_string(),
        ));
    }

    if let Some(requested) = service
        .load_balancer_ip
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let ip: IpAddr = requested.parse().map_err(|_| {
            AllocationError::Invalid(format!(
                "spec.loadBalancerIP {requested:?} is not an IP address"
            ))
        })?;
        if !pool.contains(ip) {
            return Err(AllocationError::Invalid(format!(
                "spec.loadBalancerIP {ip} is not in the address pool (loadBalancer.addresses)"
            )));
        }
        if claimed_by_others(service, &claims(&[ip])).contains(&ip) {
            return Err(AllocationError::Invalid(format!(
                "spec.loadBalancerIP {ip} is already used by another service"
            )));
        }
        return Ok(ip);
    }

    if let Some(ip) = service
        .annotation(IP_ANNOTATION)
        .and_then(|v| v.trim().parse::<IpAddr>().ok())
        && pool.contains(ip)
        && !published_by_others(service, &claims(&[ip])).contains(&ip)
    {
        return Ok(ip);
    }

    let family = match service.ip_families.first() {
        Some(IpFamily::Ipv4) => Some(Family::V4),
        Some(IpFamily::Ipv6) => Some(Family::V6),
        None => None,
    };
    let mut candidates = pool.addresses(family);
    let mut asked = FIRST_CANDIDATES;
    let mut claimed = 0usize;
    loop {
        let chunk: Vec<IpAddr> = candidates.by_ref().take(asked).collect();
        if chunk.is_empty() {
            break;
        }
        let taken = claimed_by_others(service, &claims(&chunk));
        if let Some(ip) = chunk.iter().find(|ip| !taken.contains(ip)) {
            return Ok(*ip);
        }
        claimed += chunk.len();
        asked = (asked * 2).min(MAX_CANDIDATES);
    }
    Err(AllocationError::Exhausted(format!(
        "no free address left in the load-balancer pool for {} ({claimed} claimed by other services)",
        service.key(),
    )))
}

/// The ingress for an allocated address: a hostname `<namespace>-<name>.<suffix>` when a suffix
/// is configured, else the IP with `ip-mode: vip`.
pub fn ingress(
    service: &Service,
    ip: Option<IpAddr>,
    hostname_suffix: Option<&str>,
) -> Vec<Ingress> {
    match (hostname_suffix, ip) {
        (Some(suffix), _) => vec![Ingress::hostname(hostname(service, suffix))],
        (None, Some(ip)) => vec![Ingress::vip(ip.to_string())],
        (None, None) => Vec::new(),
    }
}

/// `<namespace>-<name>.<suffix>`.
pub fn hostname(service: &Service, suffix: &str) -> String {
    format!("{}-{}.{suffix}", service.namespace, service.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_ccm_sdk::types::{ServicePort, SessionAffinity, TrafficPolicy};

    fn svc(uid: &str) -> Service {
        Service {
            namespace: "default".into(),
            name: format!("svc-{uid}"),
            uid: uid.into(),
            labels: vec![],
            annotations: vec![],
            ports: vec![ServicePort {
                name: "http".into(),
                protocol: Protocol::Tcp,
                port: 80,
                node_port: 30080,
            }],
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

    fn annotated(uid: &str, ip: &str) -> Service {
        let mut s = svc(uid);
        s.annotations.push((IP_ANNOTATION.into(), ip.into()));
        s
    }

    fn pool(entries: &[&str]) -> AddressPool {
        let v: Vec<String> = entries.iter().map(|s| s.to_string()).collect();
        AddressPool::parse(&v, "p").unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// What `cluster.address-claims` answers for `ips` and the annotation, from a list of
    /// Services (the host's rule, `wasm_ccm_runtime::claims_of`, over WIT Services).
    fn claims_from(all: &[Service], ips: &[IpAddr]) -> Vec<AddressClaim> {
        let mut out = Vec::new();
        for s in all {
            let mut claim = |text: &str, used_as| {
                if let Ok(ip) = text.trim().parse::<IpAddr>()
                    && ips.contains(&ip)
                {
                    out.push(AddressClaim {
                        ip: ip.to_string(),
                        service_uid: s.uid.clone(),
                        used_as,
                    });
                }
            };
            if let Some(ip) = &s.load_balancer_ip {
                claim(ip, AddressUse::LoadBalancerIp);
            }
            if let Some(ip) = s.annotation(IP_ANNOTATION) {
                claim(ip, AddressUse::Annotation);
            }
            for i in &s.ingress {
                if let Some(ip) = &i.ip {
                    claim(ip, AddressUse::Ingress);
                }
            }
        }
        out
    }

    /// `choose_ip` with the host's answers taken from a fixed list of Services.
    fn choose(me: &Service, p: &AddressPool, all: &[Service]) -> Result<IpAddr, AllocationError> {
        choose_ip(me, p, &|ips| claims_from(all, ips))
    }

    #[test]
    fn a_requested_but_ungranted_address_claims_nothing() {
        let p = pool(&["192.0.2.10", "192.0.2.11"]);
        let mut asking = svc("asking");
        asking.load_balancer_ip = Some("192.0.2.10".into());
        assert_eq!(choose(&svc("me"), &p, &[asking]), Ok(ip("192.0.2.10")));
    }

    #[test]
    fn first_free_asks_only_about_candidates_in_growing_chunks() {
        let p = pool(&["10.0.0.0/22"]);
        let me = svc("me");
        let addresses: Vec<IpAddr> = p.addresses(None).take(301).collect();
        let others: Vec<Service> = addresses[..300]
            .iter()
            .enumerate()
            .map(|(i, ip)| annotated(&format!("o{i}"), &ip.to_string()))
            .collect();
        let asked = std::cell::RefCell::new(Vec::new());
        let claims = |ips: &[IpAddr]| {
            asked.borrow_mut().push(ips.len());
            claims_from(&others, ips)
        };
        assert_eq!(choose_ip(&me, &p, &claims), Ok(addresses[300]));
        assert_eq!(
            *asked.borrow(),
            vec![FIRST_CANDIDATES, 2 * FIRST_CANDIDATES]
        );
    }

    #[test]
    fn names_follow_upstream() {
        let s = svc("9b0e3c4e-1d2f-4a5b-8c6d-7e8f9a0b1c2d");
        assert_eq!(name(&s), "a9b0e3c4e1d2f4a5b8c6d7e8f9a0b1c2");
        assert_eq!(name(&s).len(), 32);
        assert_eq!(name(&svc("ab-c")), "aabc");
    }

    #[test]
    fn first_free_skips_other_services() {
        let p = pool(&["192.0.2.10", "192.0.2.16/30"]);
        let me = svc("me");
        let mut other = svc("o2");
        other.ingress.push(Ingress::vip("192.0.2.17"));
        let all = vec![annotated("o1", "192.0.2.10"), other, me.clone()];
        assert_eq!(choose(&me, &p, &all), Ok(ip("192.0.2.18")));
    }

    #[test]
    fn annotation_is_reused_while_in_pool() {
        let p = pool(&["192.0.2.10", "192.0.2.16/30"]);
        let me = annotated("me", "192.0.2.18");
        assert_eq!(
            choose(&me, &p, std::slice::from_ref(&me)),
            Ok(ip("192.0.2.18"))
        );
        let gone = annotated("me", "198.51.100.1");
        assert_eq!(choose(&gone, &p, &[]), Ok(ip("192.0.2.10")));
    }

    #[test]
    fn copied_annotation_does_not_steal_a_published_address() {
        let p = pool(&["192.0.2.10", "192.0.2.11"]);
        let mut original = annotated("orig", "192.0.2.10");
        original.ingress.push(Ingress::vip("192.0.2.10"));
        let copy = annotated("copy", "192.0.2.10");
        assert_eq!(choose(&copy, &p, &[original.clone()]), Ok(ip("192.0.2.11")));
        assert_eq!(choose(&original, &p, &[copy]), Ok(ip("192.0.2.10")));
    }

    #[test]
    fn requested_ip_is_checked() {
        let p = pool(&["192.0.2.16/30"]);
        let mut me = svc("me");
        me.load_balancer_ip = Some("192.0.2.18".into());
        assert_eq!(choose(&me, &p, &[]), Ok(ip("192.0.2.18")));
        let taken = vec![annotated("x", "192.0.2.18")];
        assert!(
            matches!(choose(&me, &p, &taken), Err(AllocationError::Invalid(m)) if m.contains("already used"))
        );
        me.load_balancer_ip = Some("192.0.2.19".into());
        assert!(
            matches!(choose(&me, &p, &[]), Err(AllocationError::Invalid(m)) if m.contains("not in the address pool"))
        );
        me.load_balancer_ip = Some("nope".into());
        assert!(matches!(
            choose(&me, &p, &[]),
            Err(AllocationError::Invalid(_))
        ));
    }

    #[test]
    fn exhaustion_and_empty_pool() {
        let p = pool(&["192.0.2.10"]);
        let me = svc("me");
        assert!(matches!(
            choose(&me, &p, &[annotated("x", "192.0.2.10")]),
            Err(AllocationError::Exhausted(_))
        ));
        assert!(matches!(
            choose(&me, &AddressPool::default(), &[]),
            Err(AllocationError::Invalid(_))
        ));
    }

    #[test]
    fn families_are_respected() {
        let p = pool(&["192.0.2.10", "2001:db8::1"]);
        let mut me = svc("me");
        me.ip_families = vec![IpFamily::Ipv6];
        assert_eq!(choose(&me, &p, &[]), Ok(ip("2001:db8::1")));
    }

    #[test]
    fn sctp_is_refused_and_ingress_forms() {
        let mut s = svc("me");
        assert!(check_service(&s).is_ok());
        s.ports[0].protocol = Protocol::Sctp;
        assert!(
            matches!(check_service(&s), Err(ProviderError::InvalidConfig(m)) if m.contains("SCTP"))
        );
        let s = svc("me");
        assert_eq!(
            ingress(&s, Some(ip("192.0.2.10")), None),
            vec![Ingress::vip("192.0.2.10")]
        );
        assert_eq!(
            ingress(&s, Some(ip("192.0.2.10")), Some("lb.example.com")),
            vec![Ingress::hostname("default-svc-me.lb.example.com")]
        );
    }
}
