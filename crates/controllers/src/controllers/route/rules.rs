//! The route controller's pure rules (upstream: `reconcile` in
//! `k8s.io/cloud-provider/controllers/route/route_controller.go`): which cloud routes to keep,
//! create, replace and delete, and the `NetworkUnavailable` condition each node gets.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use wasm_ccm_runtime::types::{NodeAddress, Route};

/// An IP network, e.g. `10.244.0.0/16`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Parses `ADDR/PREFIX`; host bits are ignored as Go's `net.ParseCIDR` does.
    pub(crate) fn parse(s: &str) -> Result<Cidr, String> {
        let (addr, prefix) = s
            .trim()
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not a CIDR (expected ADDRESS/PREFIX)"))?;
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("{s:?} is not a CIDR: {addr:?} is not an IP address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|p| *p <= max)
            .ok_or_else(|| format!("{s:?} is not a CIDR: the prefix must be 0..={max}"))?;
        Ok(Cidr { addr, prefix })
    }

    fn bits(ip: IpAddr) -> (u128, u8) {
        match ip {
            IpAddr::V4(v) => (u128::from(u32::from(v)), 32),
            IpAddr::V6(v) => (u128::from(v), 128),
        }
    }

    /// Whether `ip` lies inside the network.
    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        if ip.is_ipv4() != self.addr.is_ipv4() {
            return false;
        }
        let ((net, width), (other, _)) = (Self::bits(self.addr), Self::bits(ip));
        let shift = u32::from(width - self.prefix);
        if shift >= 128 {
            return true;
        }
        (net >> shift) == (other >> shift)
    }

    /// The first and last address of the network.
    pub(crate) fn bounds(&self) -> (IpAddr, IpAddr) {
        let (net, width) = Self::bits(self.addr);
        let host_bits = u32::from(width - self.prefix);
        let mask: u128 = if host_bits >= 128 {
            u128::MAX
        } else {
            (1u128 << host_bits) - 1
        };
        let (first, last) = (net & !mask, net | mask);
        let make = |v: u128| match self.addr {
            IpAddr::V4(_) => {
                IpAddr::from(u32::try_from(v & 0xffff_ffff).unwrap_or(0).to_be_bytes())
            }
            IpAddr::V6(_) => IpAddr::from(v.to_be_bytes()),
        };
        (make(first), make(last))
    }

    /// Whether the family is IPv4.
    pub(crate) fn is_ipv4(&self) -> bool {
        self.addr.is_ipv4()
    }
}

/// Parses `--cluster-cidr`: one CIDR, or a dual-stack pair separated by a comma.
pub(crate) fn parse_cluster_cidrs(value: &str) -> Result<Vec<Cidr>, String> {
    if value.trim().is_empty() {
        return Err("--cluster-cidr is empty".into());
    }
    let cidrs = value
        .split(',')
        .map(Cidr::parse)
        .collect::<Result<Vec<_>, _>>()?;
    match cidrs.as_slice() {
        [_] => Ok(cidrs),
        [a, b] if a.is_ipv4() != b.is_ipv4() => Ok(cidrs),
        [_, _] => Err(format!(
            "--cluster-cidr {value:?}: two CIDRs must be one IPv4 and one IPv6"
        )),
        _ => Err(format!(
            "--cluster-cidr {value:?}: at most two CIDRs (one per family)"
        )),
    }
}

/// Whether the cluster's CIDRs cover a route's destination (its first or last address), i.e.
/// whether the controller may delete it.
pub(crate) fn is_responsible_for(cluster: &[Cidr], destination: &str) -> bool {
    let Ok(dest) = Cidr::parse(destination) else {
        return false;
    };
    let (first, last) = dest.bounds();
    cluster
        .iter()
        .any(|c| c.contains(first) || c.contains(last))
}

/// A node as the route controller sees it.
#[derive(Debug, Clone)]
pub(crate) struct RouteNode {
    pub(crate) name: String,
    pub(crate) uid: String,
    pub(crate) pod_cidrs: Vec<String>,
    pub(crate) addresses: Vec<NodeAddress>,
}

/// A route to create: `name_hint` is the node's UID, as upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RouteCreate {
    pub(crate) node: String,
    pub(crate) name_hint: String,
    pub(crate) route: Route,
}

/// What one reconcile does.
#[derive(Debug, Default)]
pub(crate) struct RoutePlan {
    pub(crate) deletes: Vec<Route>,
    pub(crate) creates: Vec<RouteCreate>,
    /// Per node with an entry: CIDR → whether its route is in place.
    pub(crate) status: BTreeMap<String, BTreeMap<String, bool>>,
}

fn address_set(a: &[NodeAddress]) -> BTreeSet<(String, String)> {
    a.iter()
        .map(|a| (format!("{:?}", a.kind), a.address.clone()))
        .collect()
}

/// Plans one reconcile from the cloud's routes and the nodes.
pub(crate) fn plan_routes(routes: &[Route], nodes: &[RouteNode], cluster: &[Cidr]) -> RoutePlan {
    let tracks_addresses = routes
        .first()
        .is_some_and(|r| !r.target_node_addresses.is_empty());
    let mut plan = RoutePlan::default();
    let by_node: BTreeMap<&str, &RouteNode> = nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut updates: BTreeSet<(String, String)> = BTreeSet::new();
    for node in nodes.iter().filter(|n| !n.pod_cidrs.is_empty()) {
        let entry = plan.status.entry(node.name.clone()).or_default();
        // A CIDR listed twice is one route (upstream's "duplicate pod cidr" case): a second
        // create of the same route fails on a real cloud, every period.
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        for cidr in node.pod_cidrs.iter().filter(|c| seen.insert(c.as_str())) {
            let existing = routes.iter().find(|r| {
                r.target_node == node.name && r.destination_cidr == *cidr && !r.blackhole
            });
            let keep = match existing {
                Some(r) => {
                    if !tracks_addresses
                        || address_set(&r.target_node_addresses) == address_set(&node.addresses)
                    {
                        true
                    } else {
                        updates.insert((node.name.clone(), cidr.clone()));
                        false
                    }
                }
                None => false,
            };
            entry.insert(cidr.clone(), keep);
            if !keep {
                plan.creates.push(RouteCreate {
                    node: node.name.clone(),
                    name_hint: node.uid.clone(),
                    route: Route {
                        name: String::new(),
                        target_node: node.name.clone(),
                        target_node_addresses: node.addresses.clone(),
                        destination_cidr: cidr.clone(),
                        blackhole: false,
                    },
                });
            }
        }
    }
    for route in routes {
        if !is_responsible_for(cluster, &route.destination_cidr) {
            continue;
        }
        let node = by_node.get(route.target_node.as_str());
        let stale = route.blackhole
            || node.is_none()
            || node.is_some_and(|n| !n.pod_cidrs.contains(&route.destination_cidr))
            || updates.contains(&(route.target_node.clone(), route.destination_cidr.clone()));
        if stale {
            plan.deletes.push(route.clone());
        }
        // A node that has routes but no pod CIDRs still gets a condition.
        if let Some(n) = node
            && n.pod_cidrs.is_empty()
        {
            plan.status.entry(n.name.clone()).or_default();
        }
    }
    plan
}

/// The `NetworkUnavailable` condition for a node: (status, reason, message).
pub(crate) fn network_condition(
    cidrs: &BTreeMap<String, bool>,
) -> (&'static str, &'static str, &'static str) {
    if !cidrs.is_empty() && cidrs.values().all(|keep| *keep) {
        ("False", "RouteCreated", "RouteController created a route")
    } else {
        (
            "True",
            "NoRouteCreated",
            "RouteController failed to create a route",
        )
    }
}

#[cfg(test)]
mod tests;
