//! How many bytes the host copies into a guest's memory for a call (its arguments) or an import
//! (what `cluster.load-balancer-services` returns): counted per driver so that benchmarks and
//! operators see what a cluster's size costs each call. The count is the canonical ABI's: string
//! and list contents plus 8 bytes (pointer and length) per string and list, and the flat size of
//! scalars; alignment padding is left out.

use std::sync::Arc;

use crate::model::cluster::AddressClaim;
use crate::model::types::{Ingress, Node, NodeAddress, NodeSet, Route, Service};

/// A value the host lowers into a guest.
pub(crate) trait Lowered {
    /// Bytes the canonical ABI copies for it (see the module doc).
    fn lowered_bytes(&self) -> u64;
}

const HEADER: u64 = 8;

fn text(s: &str) -> u64 {
    HEADER + s.len() as u64
}

fn pairs(list: &[(String, String)]) -> u64 {
    HEADER + list.iter().map(|(k, v)| text(k) + text(v)).sum::<u64>()
}

fn addresses(list: &[NodeAddress]) -> u64 {
    HEADER + list.iter().map(|a| 1 + text(&a.address)).sum::<u64>()
}

impl Lowered for str {
    fn lowered_bytes(&self) -> u64 {
        text(self)
    }
}

impl Lowered for Node {
    fn lowered_bytes(&self) -> u64 {
        text(&self.name)
            + text(&self.uid)
            + text(&self.provider_id)
            + pairs(&self.labels)
            + pairs(&self.annotations)
            + addresses(&self.addresses)
            + HEADER
            + self
                .taints
                .iter()
                .map(|t| text(&t.key) + text(&t.value) + text(&t.effect))
                .sum::<u64>()
            + 1
    }
}

impl Lowered for AddressClaim {
    fn lowered_bytes(&self) -> u64 {
        text(&self.ip) + text(&self.service_uid) + 1
    }
}

impl Lowered for NodeSet {
    fn lowered_bytes(&self) -> u64 {
        12
    }
}

impl<T: Lowered> Lowered for [T] {
    fn lowered_bytes(&self) -> u64 {
        HEADER + self.iter().map(Lowered::lowered_bytes).sum::<u64>()
    }
}

impl<T: Lowered + ?Sized> Lowered for Arc<T> {
    fn lowered_bytes(&self) -> u64 {
        (**self).lowered_bytes()
    }
}

impl<T: Lowered + ?Sized> Lowered for &T {
    fn lowered_bytes(&self) -> u64 {
        (**self).lowered_bytes()
    }
}

fn ingress(list: &[Ingress]) -> u64 {
    HEADER
        + list
            .iter()
            .map(|i| {
                i.ip.as_deref().map_or(1, |s| 1 + text(s))
                    + i.hostname.as_deref().map_or(1, |s| 1 + text(s))
                    + 2
            })
            .sum::<u64>()
}

impl Lowered for Service {
    fn lowered_bytes(&self) -> u64 {
        text(&self.namespace)
            + text(&self.name)
            + text(&self.uid)
            + pairs(&self.labels)
            + pairs(&self.annotations)
            + HEADER
            + self.ports.iter().map(|p| text(&p.name) + 5).sum::<u64>()
            + 1
            + 2
            + self.load_balancer_ip.as_deref().map_or(1, |s| 1 + text(s))
            + HEADER
            + self
                .load_balancer_source_ranges
                .iter()
                .map(|r| text(r))
                .sum::<u64>()
            + 1
            + 5
            + HEADER
            + self.ip_families.len() as u64
            + self
                .load_balancer_class
                .as_deref()
                .map_or(1, |s| 1 + text(s))
            + ingress(&self.ingress)
    }
}

impl Lowered for Route {
    fn lowered_bytes(&self) -> u64 {
        text(&self.name)
            + text(&self.target_node)
            + addresses(&self.target_node_addresses)
            + text(&self.destination_cidr)
            + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_counts_its_strings_and_headers() {
        let node = Node {
            name: "n1".into(),
            uid: String::new(),
            provider_id: "x://1".into(),
            labels: vec![("a".into(), "bc".into())],
            annotations: Vec::new(),
            addresses: Vec::new(),
            taints: Vec::new(),
            ready: true,
        };
        // name 8+2, uid 8, provider-id 8+5, labels 8+(8+1)+(8+2), annotations 8, addresses 8,
        // taints 8, ready 1.
        assert_eq!(node.lowered_bytes(), 10 + 8 + 13 + 27 + 8 + 8 + 8 + 1);
        let two: Arc<[Node]> = vec![node.clone(), node].into();
        assert_eq!(two.lowered_bytes(), 8 + 2 * 83);
    }
}
