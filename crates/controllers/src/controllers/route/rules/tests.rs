//! Cases ported from upstream's `TestIsResponsibleForRoute` and `TestReconcile`, as data.

use super::*;
use wasm_ccm_runtime::types::AddressType;

#[test]
fn responsibility_table() {
    let cases = [
        ("10.244.0.0/16", "10.244.10.0/24", true),
        ("10.244.0.0/16", "10.245.0.0/24", false),
        ("10.244.0.0/16", "10.244.0.0/16", true),
        // A destination overlapping the cluster CIDR at one end still counts.
        ("10.244.0.0/16", "10.244.0.0/15", true),
        ("10.244.0.0/16", "10.242.0.0/15", false),
        ("10.244.0.0/16", "fd00::/64", false),
        ("fd00::/48", "fd00:0:0:1::/64", true),
        ("10.244.0.0/16", "garbage", false),
        ("0.0.0.0/0", "192.168.1.0/24", true),
    ];
    for (cluster, dest, want) in cases {
        let cluster = parse_cluster_cidrs(cluster).expect("cluster cidr");
        assert_eq!(is_responsible_for(&cluster, dest), want, "{dest}");
    }
}

#[test]
fn cluster_cidr_validation() {
    assert!(parse_cluster_cidrs("10.244.0.0/16").is_ok());
    assert!(parse_cluster_cidrs("10.244.0.0/16,fd00::/48").is_ok());
    for bad in [
        "",
        "10.244.0.0",
        "10.244.0.0/33",
        "10.0.0.0/8,10.1.0.0/16",
        "a,b,c",
    ] {
        assert!(parse_cluster_cidrs(bad).is_err(), "{bad}");
    }
}

fn route(name: &str, node: &str, cidr: &str) -> Route {
    Route {
        name: name.into(),
        target_node: node.into(),
        target_node_addresses: Vec::new(),
        destination_cidr: cidr.into(),
        blackhole: false,
    }
}

fn node(name: &str, cidrs: &[&str]) -> RouteNode {
    RouteNode {
        name: name.into(),
        uid: format!("uid-{name}"),
        pod_cidrs: cidrs.iter().map(|c| c.to_string()).collect(),
        addresses: vec![NodeAddress {
            kind: AddressType::InternalIp,
            address: format!("10.0.0.{}", name.len()),
        }],
    }
}

fn names(plan_deletes: &[Route]) -> Vec<&str> {
    plan_deletes.iter().map(|r| r.name.as_str()).collect()
}

fn created(plan: &RoutePlan) -> Vec<(&str, &str)> {
    plan.creates
        .iter()
        .map(|c| (c.node.as_str(), c.route.destination_cidr.as_str()))
        .collect()
}

#[test]
fn reconcile_table() {
    let cluster = parse_cluster_cidrs("10.120.0.0/16").expect("cidr");
    // Two nodes, two correct routes: nothing to do, both conditions False/RouteCreated.
    let nodes = [
        node("n1", &["10.120.0.0/24"]),
        node("n2", &["10.120.1.0/24"]),
    ];
    let plan = plan_routes(
        &[
            route("r1", "n1", "10.120.0.0/24"),
            route("r2", "n2", "10.120.1.0/24"),
        ],
        &nodes,
        &cluster,
    );
    assert!(plan.deletes.is_empty() && plan.creates.is_empty());
    assert_eq!(network_condition(&plan.status["n1"]).1, "RouteCreated");

    // One route missing: created with the node's UID as the name hint.
    let plan = plan_routes(&[route("r1", "n1", "10.120.0.0/24")], &nodes, &cluster);
    assert_eq!(created(&plan), vec![("n2", "10.120.1.0/24")]);
    assert_eq!(plan.creates[0].name_hint, "uid-n2");
    assert_eq!(network_condition(&plan.status["n2"]).1, "NoRouteCreated");

    // Wrong CIDR for a node: the stale one goes, the right one comes.
    let plan = plan_routes(
        &[
            route("r1", "n1", "10.120.0.0/24"),
            route("r2", "n2", "10.120.9.0/24"),
        ],
        &nodes,
        &cluster,
    );
    assert_eq!(names(&plan.deletes), vec!["r2"]);
    assert_eq!(created(&plan), vec![("n2", "10.120.1.0/24")]);

    // Route of an unknown node inside the cluster CIDR: deleted; outside: left alone.
    let plan = plan_routes(
        &[
            route("r1", "n1", "10.120.0.0/24"),
            route("r2", "n2", "10.120.1.0/24"),
            route("gone", "n9", "10.120.7.0/24"),
            route("foreign", "n9", "192.168.0.0/24"),
        ],
        &nodes,
        &cluster,
    );
    assert_eq!(names(&plan.deletes), vec!["gone"]);

    // Blackhole routes are replaced.
    let mut hole = route("r1", "n1", "10.120.0.0/24");
    hole.blackhole = true;
    let plan = plan_routes(
        &[hole, route("r2", "n2", "10.120.1.0/24")],
        &nodes,
        &cluster,
    );
    assert_eq!(names(&plan.deletes), vec!["r1"]);
    assert_eq!(created(&plan), vec![("n1", "10.120.0.0/24")]);

    // A node without pod CIDRs is skipped; its route removed; it still gets a condition.
    let nodes2 = [node("n1", &[]), node("n2", &["10.120.1.0/24"])];
    let plan = plan_routes(
        &[
            route("r1", "n1", "10.120.0.0/24"),
            route("r2", "n2", "10.120.1.0/24"),
        ],
        &nodes2,
        &cluster,
    );
    assert_eq!(names(&plan.deletes), vec!["r1"]);
    assert!(plan.creates.is_empty());
    assert_eq!(network_condition(&plan.status["n1"]).0, "True");

    // Dual-stack node: one route per CIDR.
    let dual = parse_cluster_cidrs("10.120.0.0/16,fd00:10::/48").expect("cidr");
    let plan = plan_routes(
        &[],
        &[node("n1", &["10.120.0.0/24", "fd00:10:0:1::/64"])],
        &dual,
    );
    assert_eq!(plan.creates.len(), 2);
}

#[test]
fn a_pod_cidr_listed_twice_is_one_route() {
    // The apiserver refuses such a Node; a cache fed by something laxer still makes one route
    // (a second create of the same route fails on a real cloud, every period).
    let cluster = parse_cluster_cidrs("10.120.0.0/16").expect("cidr");
    let plan = plan_routes(
        &[],
        &[node("n1", &["10.120.1.0/24", "10.120.1.0/24"])],
        &cluster,
    );
    assert_eq!(created(&plan), vec![("n1", "10.120.1.0/24")]);
}

#[test]
fn providers_tracking_addresses_replace_routes_whose_addresses_changed() {
    let cluster = parse_cluster_cidrs("10.120.0.0/16").expect("cidr");
    let n1 = node("n1", &["10.120.0.0/24"]);
    let mut current = route("r1", "n1", "10.120.0.0/24");
    current.target_node_addresses = vec![NodeAddress {
        kind: AddressType::InternalIp,
        address: "10.9.9.9".into(),
    }];
    let plan = plan_routes(&[current.clone()], std::slice::from_ref(&n1), &cluster);
    assert_eq!(names(&plan.deletes), vec!["r1"]);
    assert_eq!(created(&plan), vec![("n1", "10.120.0.0/24")]);

    current.target_node_addresses = n1.addresses.clone();
    let plan = plan_routes(&[current], &[n1], &cluster);
    assert!(plan.deletes.is_empty() && plan.creates.is_empty());
}
