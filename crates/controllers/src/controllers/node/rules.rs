//! The node controller's pure rules (upstream:
//! `k8s.io/cloud-provider/controllers/node/node_controller.go`,
//! `k8s.io/cloud-provider/node/helpers/address.go`): which labels initialisation writes, how cloud
//! addresses merge with the node's, the provided-node-IP annotation, beta→GA labels.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::NodeAddress;
use wasm_ccm_runtime::types::InstanceMetadata;

/// The taint a kubelet started with `--cloud-provider=external` registers its node with.
pub(crate) const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// The taint the lifecycle controller puts on nodes whose instance is shut down.
pub(crate) const SHUTDOWN_TAINT: &str = "node.cloudprovider.kubernetes.io/shutdown";
/// The kubelet's `--node-ip`, which the cloud's addresses must contain.
pub(crate) const PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";

/// (GA label, beta label) pairs written at initialisation and reconciled afterwards.
pub(crate) const INSTANCE_TYPE_LABELS: (&str, &str) = (
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
);
/// Zone labels (GA, beta).
pub(crate) const ZONE_LABELS: (&str, &str) = (
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/zone",
);
/// Region labels (GA, beta).
pub(crate) const REGION_LABELS: (&str, &str) = (
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/region",
);

/// Why a node's addresses could not be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AddressError {
    /// The annotation is not an IP or a dual-stack pair.
    #[error(
        "annotation {PROVIDED_NODE_IP}={value:?} is not valid: {reason}; fix the kubelet's --node-ip"
    )]
    InvalidProvidedIp { value: String, reason: String },
    /// The annotation names an IP the cloud does not report for the instance.
    #[error(
        "failed to get node address from cloud provider that matches ip {ip}: the kubelet's --node-ip ({PROVIDED_NODE_IP}) is not among the instance's addresses [{cloud}]; fix --node-ip or the instance's addresses"
    )]
    NoMatchingAddress { ip: IpAddr, cloud: String },
}

/// Parses the provided-node-IP annotation: one IP, or one IPv4 and one IPv6 separated by a
/// comma (neither unspecified).
pub(crate) fn parse_provided_node_ip(value: &str) -> Result<Vec<IpAddr>, AddressError> {
    let invalid = |reason: &str| AddressError::InvalidProvidedIp {
        value: value.to_string(),
        reason: reason.to_string(),
    };
    let parts: Vec<&str> = value.split(',').map(str::trim).collect();
    let ips = parts
        .iter()
        .map(|p| p.parse::<IpAddr>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| invalid("not an IP address or a comma-separated dual-stack pair"))?;
    match ips.as_slice() {
        [_] => Ok(ips),
        [a, b] => {
            if a.is_ipv4() == b.is_ipv4() {
                return Err(invalid("a pair must be one IPv4 and one IPv6 address"));
            }
            if a.is_unspecified() || b.is_unspecified() {
                return Err(invalid(
                    "a dual-stack pair may not hold an unspecified address",
                ));
            }
            Ok(ips)
        }
        _ => Err(invalid("at most two addresses (one per family)")),
    }
}

fn same_ip(address: &str, ip: &IpAddr) -> bool {
    address.parse::<IpAddr>().is_ok_and(|a| a == *ip)
}

/// The address list to write for a node, or `None` to leave the node's addresses alone (the cloud
/// reported none). `current` is what the node carries now; `provided` the annotation's value.
pub(crate) fn merge_addresses(
    cloud: &[NodeAddress],
    current: &[NodeAddress],
    provided: Option<&str>,
) -> Result<Option<Vec<NodeAddress>>, AddressError> {
    if cloud.is_empty() {
        return Ok(None);
    }
    let mut merged = cloud.to_vec();
    // The kubelet's hostname survives when the cloud does not report one.
    if !cloud.iter().any(|a| a.type_ == "Hostname") {
        merged.extend(current.iter().filter(|a| a.type_ == "Hostname").cloned());
    }
    let Some(provided) = provided else {
        return Ok(Some(merged));
    };
    let ips = parse_provided_node_ip(provided)?;
    let mut first = Vec::new();
    let mut matched_types: Vec<&str> = Vec::new();
    for ip in &ips {
        let matching: Vec<&NodeAddress> =
            merged.iter().filter(|a| same_ip(&a.address, ip)).collect();
        if matching.is_empty() {
            return Err(AddressError::NoMatchingAddress {
                ip: *ip,
                cloud: cloud
                    .iter()
                    .map(|a| format!("{}:{}", a.type_, a.address))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        for a in matching {
            if !first.contains(a) {
                first.push(a.clone());
            }
            if !matched_types.contains(&a.type_.as_str()) {
                matched_types.push(a.type_.as_str());
            }
        }
    }
    let rest = merged
        .iter()
        .filter(|a| !matched_types.contains(&a.type_.as_str()))
        .cloned();
    let mut result = first;
    result.extend(rest);
    Ok(Some(result))
}

/// Whether the node's addresses must be rewritten. Exact ordered comparison (upstream's map-based
/// check misses changes among several addresses of one type).
pub(crate) fn addresses_changed(old: &[NodeAddress], new: &[NodeAddress]) -> bool {
    old != new
}

/// Whether an additional label from the driver is in a namespace Kubernetes reserves
/// (`kubernetes.io`, `k8s.io` and their subdomains), ignoring case: `KUBERNETES.IO/x` is refused
/// too (sandbox review S1-9).
pub(crate) fn is_reserved_label(key: &str) -> bool {
    crate::answer_rules::is_reserved_label(key)
}

/// What initialisation does to the labels: the labels to set, and the driver's additional labels
/// that were left out (with why), for the log.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct LabelPlan {
    pub(crate) set: BTreeMap<String, String>,
    pub(crate) skipped: Vec<String>,
}

/// Labels written at initialisation from the instance's metadata.
pub(crate) fn init_labels(
    existing: &BTreeMap<String, String>,
    meta: &InstanceMetadata,
) -> LabelPlan {
    let mut plan = LabelPlan::default();
    for ((ga, beta), value) in [
        (INSTANCE_TYPE_LABELS, &meta.instance_type),
        (ZONE_LABELS, &meta.zone),
        (REGION_LABELS, &meta.region),
    ] {
        if !value.is_empty() {
            plan.set.insert(ga.to_string(), value.clone());
            plan.set.insert(beta.to_string(), value.clone());
        }
    }
    for (key, value) in &meta.additional_labels {
        if is_reserved_label(key) {
            plan.skipped
                .push(format!("{key}: in a namespace reserved for Kubernetes"));
        } else if let Some(current) = existing.get(key).or(plan.set.get(key)) {
            if current != value {
                plan.skipped.push(format!(
                    "{key}: already set to {current:?}, cloud says {value:?}"
                ));
            }
        } else {
            plan.set.insert(key.clone(), value.clone());
        }
    }
    plan
}

/// GA labels to set on an initialised node from its beta labels (beta is the source of truth
/// upstream); empty when nothing is to change.
pub(crate) fn beta_to_ga(labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    [INSTANCE_TYPE_LABELS, ZONE_LABELS, REGION_LABELS]
        .iter()
        .filter_map(|(ga, beta)| {
            let value = labels.get(*beta)?;
            (labels.get(*ga) != Some(value)).then(|| (ga.to_string(), value.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests;
