//! Kubernetes objects to the WIT records a driver sees, and driver results back.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, Node as KubeNode, NodeAddress as KubeAddress, Service as KubeService,
};
use wasm_ccm_runtime::types::{
    AddressType, Ingress, IpFamily, IpMode, Node, NodeAddress, Protocol, Service, ServicePort,
    SessionAffinity, Taint, TrafficPolicy,
};

/// The Kubernetes name of an address type.
pub(crate) fn address_type_name(kind: AddressType) -> &'static str {
    match kind {
        AddressType::Hostname => "Hostname",
        AddressType::InternalIp => "InternalIP",
        AddressType::ExternalIp => "ExternalIP",
        AddressType::InternalDns => "InternalDNS",
        AddressType::ExternalDns => "ExternalDNS",
    }
}

/// The address type for a Kubernetes name; `None` for a type the contract does not know.
pub(crate) fn address_type_from_name(name: &str) -> Option<AddressType> {
    Some(match name {
        "Hostname" => AddressType::Hostname,
        "InternalIP" => AddressType::InternalIp,
        "ExternalIP" => AddressType::ExternalIp,
        "InternalDNS" => AddressType::InternalDns,
        "ExternalDNS" => AddressType::ExternalDns,
        _ => return None,
    })
}

/// A driver's address as a Kubernetes `NodeAddress`.
pub(crate) fn to_kube_address(a: &NodeAddress) -> KubeAddress {
    KubeAddress {
        type_: address_type_name(a.kind).to_string(),
        address: a.address.clone(),
    }
}

fn pairs(map: &Option<BTreeMap<String, String>>) -> Vec<(String, String)> {
    map.iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Whether the node's `Ready` condition is `True`.
pub(crate) fn node_is_ready(node: &KubeNode) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// The node as a driver sees it. Addresses of types the contract does not know are left out.
pub(crate) fn node_to_wit(node: &KubeNode) -> Node {
    let meta = &node.metadata;
    let spec = node.spec.as_ref();
    Node {
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        provider_id: spec.and_then(|s| s.provider_id.clone()).unwrap_or_default(),
        labels: pairs(&meta.labels),
        annotations: pairs(&meta.annotations),
        addresses: node
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|a| {
                Some(NodeAddress {
                    kind: address_type_from_name(&a.type_)?,
                    address: a.address.clone(),
                })
            })
            .collect(),
        taints: spec
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .map(|t| Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect: t.effect.clone(),
            })
            .collect(),
        ready: node_is_ready(node),
    }
}

fn protocol(name: Option<&str>) -> Protocol {
    match name {
        Some("UDP") => Protocol::Udp,
        Some("SCTP") => Protocol::Sctp,
        _ => Protocol::Tcp,
    }
}

fn port_u16(value: i32) -> u16 {
    u16::try_from(value).unwrap_or(0)
}

/// The Service as a driver sees it.
pub(crate) fn service_to_wit(svc: &KubeService) -> Service {
    let meta = &svc.metadata;
    let spec = svc.spec.as_ref();
    let ingress = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .map(ingress_to_wit)
        .collect();
    Service {
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        labels: pairs(&meta.labels),
        annotations: pairs(&meta.annotations),
        ports: spec
            .and_then(|s| s.ports.as_ref())
            .into_iter()
            .flatten()
            .map(|p| ServicePort {
                name: p.name.clone().unwrap_or_default(),
                protocol: protocol(p.protocol.as_deref()),
                port: port_u16(p.port),
                node_port: p.node_port.map(port_u16).unwrap_or(0),
            })
            .collect(),
        external_traffic_policy: match spec.and_then(|s| s.external_traffic_policy.as_deref()) {
            Some("Local") => TrafficPolicy::Local,
            _ => TrafficPolicy::Cluster,
        },
        health_check_node_port: spec
            .and_then(|s| s.health_check_node_port)
            .map(port_u16)
            .unwrap_or(0),
        load_balancer_ip: spec
            .and_then(|s| s.load_balancer_ip.clone())
            .filter(|ip| !ip.is_empty()),
        load_balancer_source_ranges: spec
            .and_then(|s| s.load_balancer_source_ranges.clone())
            .unwrap_or_default(),
        session_affinity: match spec.and_then(|s| s.session_affinity.as_deref()) {
            Some("ClientIP") => SessionAffinity::ClientIp,
            _ => SessionAffinity::None,
        },
        session_affinity_timeout: spec
            .and_then(|s| s.session_affinity_config.as_ref())
            .and_then(|c| c.client_ip.as_ref())
            .and_then(|c| c.timeout_seconds)
            .and_then(|t| u32::try_from(t).ok()),
        ip_families: spec
            .and_then(|s| s.ip_families.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|f| match f.as_str() {
                "IPv4" => Some(IpFamily::Ipv4),
                "IPv6" => Some(IpFamily::Ipv6),
                _ => None,
            })
            .collect(),
        load_balancer_class: spec.and_then(|s| s.load_balancer_class.clone()),
        ingress,
    }
}

/// One status ingress entry as a driver sees it.
pub(crate) fn ingress_to_wit(g: &LoadBalancerIngress) -> Ingress {
    Ingress {
        ip: g.ip.clone(),
        hostname: g.hostname.clone(),
        ip_mode: match g.ip_mode.as_deref() {
            Some("VIP") => Some(IpMode::Vip),
            Some("Proxy") => Some(IpMode::Proxy),
            _ => None,
        },
    }
}

/// A driver's ingress list as the Service status carries it.
pub(crate) fn ingress_to_kube(ingress: &[Ingress]) -> Vec<LoadBalancerIngress> {
    ingress
        .iter()
        .map(|g| LoadBalancerIngress {
            ip: g.ip.clone(),
            hostname: g.hostname.clone(),
            ip_mode: g.ip_mode.map(|m| {
                match m {
                    IpMode::Vip => "VIP",
                    IpMode::Proxy => "Proxy",
                }
                .to_string()
            }),
            ports: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus, Taint as KubeTaint};
    use kube::api::ObjectMeta;

    #[test]
    fn node_conversion_keeps_known_addresses_and_readiness() {
        let node = KubeNode {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                uid: Some("u1".into()),
                labels: Some([("a".to_string(), "b".to_string())].into()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some("static://n1".into()),
                taints: Some(vec![KubeTaint {
                    key: "k".into(),
                    effect: "NoSchedule".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                addresses: Some(vec![
                    KubeAddress {
                        type_: "InternalIP".into(),
                        address: "10.0.0.1".into(),
                    },
                    KubeAddress {
                        type_: "Weird".into(),
                        address: "x".into(),
                    },
                ]),
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        };
        let wit = node_to_wit(&node);
        assert_eq!(wit.provider_id, "static://n1");
        assert_eq!(wit.addresses.len(), 1);
        assert_eq!(wit.taints[0].key, "k");
        assert!(wit.ready);
        assert_eq!(wit.labels, vec![("a".to_string(), "b".to_string())]);
    }

    #[test]
    fn ingress_round_trips_ip_mode() {
        let wit = vec![Ingress {
            ip: Some("192.0.2.1".into()),
            hostname: None,
            ip_mode: Some(IpMode::Proxy),
        }];
        let kube = ingress_to_kube(&wit);
        assert_eq!(kube[0].ip_mode.as_deref(), Some("Proxy"));
        assert_eq!(ingress_to_wit(&kube[0]), wit[0]);
    }
}
