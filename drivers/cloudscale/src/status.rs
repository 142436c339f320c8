//! The Service status and the annotations written back after an ensure (upstream
//! `EnsureLoadBalancer`, `loadBalancerStatus` in `loadbalancer.go`).

use wasm_ccm_sdk::types::{Ingress, IpMode, Service};

use crate::annotations::{self, Annotations, IpModeChoice};
use crate::model::LoadBalancer;

/// `status.loadBalancer.ingress`: the forced hostname alone, or one entry per VIP in API order
/// (floating IPs are not reported, as upstream). `ipMode` only when the cluster knows it.
pub fn ingress(lb: &LoadBalancer, a: &Annotations, ip_mode_supported: bool) -> Vec<Ingress> {
    ingress_with(lb, &a.force_hostname, a.ip_mode, ip_mode_supported)
}

/// [`ingress`] from the two annotations it depends on, for `get`, which must not fail on an
/// unrelated bad annotation.
pub fn ingress_with(
    lb: &LoadBalancer,
    force_hostname: &str,
    ip_mode: IpModeChoice,
    ip_mode_supported: bool,
) -> Vec<Ingress> {
    if !force_hostname.is_empty() {
        return vec![Ingress::hostname(force_hostname)];
    }
    lb.vip_addresses
        .iter()
        .map(|vip| Ingress {
            ip: Some(vip.address.clone()),
            hostname: None,
            ip_mode: ip_mode_supported.then_some(match ip_mode {
                IpModeChoice::Proxy => IpMode::Proxy,
                IpModeChoice::Vip => IpMode::Vip,
            }),
        })
        .collect()
}

/// The annotations upstream writes after a successful ensure — UUID, config version `1` and the
/// zone — limited to those whose value differs, so a steady state writes nothing.
pub fn annotations_to_set(service: &Service, lb: &LoadBalancer) -> Vec<(String, String)> {
    [
        (annotations::LB_UUID, lb.uuid.as_str()),
        (annotations::LB_CONFIG_VERSION, "1"),
        (annotations::LB_ZONE, lb.zone.slug.as_str()),
    ]
    .into_iter()
    .filter(|(key, value)| service.annotation(key) != Some(*value))
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Whether a Kubernetes version (`v1.31.2`, `1.30`, `v1.30.1-gke.1`) has `ipMode` (≥ 1.30).
/// An unknown version counts as new: every supported release has it.
pub fn supports_ip_mode(version: &str) -> bool {
    let v = version.trim().trim_start_matches('v');
    let mut parts = v.split('.');
    let major = parts.next().and_then(|p| p.parse::<u32>().ok());
    let minor = parts.next().map(|p| {
        p.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
    });
    match (major, minor.and_then(|m| m.parse::<u32>().ok())) {
        (Some(major), Some(minor)) => (major, minor) >= (1, 30),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotations::tests::service;
    use crate::annotations::*;
    use crate::model::{Slug, Vip};

    fn lb() -> LoadBalancer {
        LoadBalancer {
            uuid: "lb1".into(),
            zone: Slug {
                slug: "rma1".into(),
            },
            vip_addresses: vec![
                Vip {
                    address: "5.102.151.1".into(),
                    ..Default::default()
                },
                Vip {
                    address: "2a06:c01::1".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn ingress_lists_vips_with_ip_mode() {
        let svc = service(&[]);
        let a = Annotations::parse(&svc).unwrap();
        let i = ingress(&lb(), &a, true);
        assert_eq!(
            i,
            vec![Ingress::proxy("5.102.151.1"), Ingress::proxy("2a06:c01::1")]
        );
        let i = ingress(&lb(), &a, false);
        assert_eq!(i[0].ip_mode, None);
        let a = Annotations::parse(&service(&[(LB_IP_MODE, "VIP")])).unwrap();
        assert_eq!(ingress(&lb(), &a, true)[0], Ingress::vip("5.102.151.1"));
        let a = Annotations::parse(&service(&[(LB_FORCE_HOSTNAME, "lb.example.com")])).unwrap();
        assert_eq!(
            ingress(&lb(), &a, true),
            vec![Ingress::hostname("lb.example.com")]
        );
    }

    #[test]
    fn only_changed_annotations_are_written() {
        let svc = service(&[]);
        assert_eq!(annotations_to_set(&svc, &lb()).len(), 3);
        let svc = service(&[
            (LB_UUID, "lb1"),
            (LB_CONFIG_VERSION, "1"),
            (LB_ZONE, "rma1"),
        ]);
        assert!(annotations_to_set(&svc, &lb()).is_empty());
    }

    #[test]
    fn ip_mode_from_version() {
        assert!(supports_ip_mode("v1.30.0"));
        assert!(supports_ip_mode("v1.31.2-gke.100"));
        assert!(supports_ip_mode("2.0"));
        assert!(!supports_ip_mode("v1.29.9"));
        assert!(supports_ip_mode(""));
    }
}
