use super::*;
use k8s_openapi::api::core::v1::{NodeSpec, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

fn selector(labels: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        match_expressions: None,
    }
}

fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.into(),
        operator: op.into(),
        values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
    }
}

fn exprs(e: Vec<LabelSelectorRequirement>) -> LabelSelector {
    LabelSelector {
        match_labels: None,
        match_expressions: Some(e),
    }
}

fn driver(name: &str, scheme: &str) -> DriverRoles {
    DriverRoles {
        name: name.into(),
        label: Some(name.into()),
        provider_id_scheme: scheme.into(),
        ..Default::default()
    }
}

/// cloud: default nodes and class-less Services; metal: nodes labelled site=metal, class
/// `example.com/metal`; routes on cloud.
fn hybrid() -> Arc<Routing> {
    let mut cloud = driver("cloud", "cloudscale");
    cloud.nodes.default = true;
    cloud.load_balancer.default = true;
    cloud.routes = true;
    let mut metal = driver("metal", "phoenixnap");
    metal.nodes.selector = Some(selector(&[("site", "metal")]));
    metal.load_balancer.classes = vec!["example.com/metal".into()];
    Routing::new(vec![cloud, metal]).expect("valid")
}

fn node(provider_id: &str, labels: &[(&str, &str)]) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some("n".into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            provider_id: (!provider_id.is_empty()).then(|| provider_id.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn svc(type_: &str, class: Option<&str>, finalizers: &[&str]) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("s".into()),
            namespace: Some("default".into()),
            finalizers: Some(finalizers.iter().map(|f| f.to_string()).collect()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some(type_.into()),
            load_balancer_class: class.map(str::to_string),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn deleting(mut s: Service) -> Service {
    s.metadata.deletion_timestamp = Some(Time(Default::default()));
    s
}

#[test]
fn nodes_go_to_their_owner() {
    let r = hybrid();
    /// (provider ID, labels, owner)
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], NodeOwner);
    let cases: &[Case] = &[
        ("cloudscale://a", &[], NodeOwner::Driver(0)),
        ("phoenixnap://b", &[], NodeOwner::Driver(1)),
        // The provider ID wins over a selector pointing elsewhere (it never changes).
        ("cloudscale://a", &[("site", "metal")], NodeOwner::Driver(0)),
        ("aws:///i-1", &[], NodeOwner::Foreign),
        ("no-scheme", &[], NodeOwner::Foreign),
        ("", &[("site", "metal")], NodeOwner::Driver(1)),
        ("", &[("site", "cloud")], NodeOwner::Driver(0)),
        ("", &[], NodeOwner::Driver(0)),
    ];
    for (id, labels, owner) in cases {
        assert_eq!(r.node_owner(&node(id, labels)), *owner, "{id} {labels:?}");
    }
    let cloud = r.view(0);
    assert!(cloud.owns_node(&node("", &[])));
    assert!(!cloud.owns_node(&node("", &[("site", "metal")])));
    assert!(r.view(1).owns_node(&node("", &[("site", "metal")])));
}

#[test]
fn without_a_default_an_unmatched_node_is_unrouted() {
    let mut a = driver("a", "a");
    a.nodes.selector = Some(selector(&[("site", "a")]));
    let mut b = driver("b", "b");
    b.nodes.selector = Some(exprs(vec![expr("site", "In", &["b", "c"])]));
    let r = Routing::new(vec![a, b]).expect("exclusive selectors");
    assert_eq!(r.node_owner(&node("", &[])), NodeOwner::Unrouted);
    assert_eq!(
        r.node_owner(&node("", &[("site", "c")])),
        NodeOwner::Driver(1)
    );
}

#[test]
fn one_driver_behaves_as_today() {
    let r = Routing::new(vec![DriverRoles::alone("static", "static")]).expect("one driver");
    let v = r.view(0);
    assert!(v.is_single());
    assert_eq!(v.label(), None);
    assert_eq!(v.finalizer(), LB_FINALIZER);
    assert!(v.owns_node(&node("", &[])));
    assert!(v.owns_node(&node("static://x", &[])));
    assert!(!v.owns_node(&node("other://x", &[])));
    assert!(v.serves(&svc("LoadBalancer", None, &[])));
    assert!(!v.serves(&svc("LoadBalancer", Some("x.io/y"), &[])));
    assert!(!v.serves(&svc("ClusterIP", None, &[])));
    let ours = svc("LoadBalancer", None, &[LB_FINALIZER]);
    assert!(v.owns_service(&ours));
    assert!(!v.needs_cleanup(&ours));
    assert!(v.needs_cleanup(&svc("ClusterIP", None, &[LB_FINALIZER])));
    assert_eq!(v.held_by(&ours), None);
    assert_eq!(
        v.finalizers_after(&svc("LoadBalancer", None, &["x.io/keep"]), true),
        vec!["x.io/keep".to_string(), LB_FINALIZER.to_string()]
    );
    assert_eq!(
        v.finalizers_after(&ours, false),
        Vec::<String>::new(),
        "upstream's finalizer goes"
    );
}

/// The one-driver table has no branch of its own: with upstream's finalizer, the set's rules
/// must give upstream's answers (`controllers::service::rules`, which the upstream tables
/// check) for every Service, including ones carrying finalizers a DriverSet run left behind.
#[test]
fn the_drivers_rules_with_upstreams_finalizer_are_upstreams() {
    use crate::controllers::service::rules as service_rules;
    let r = Routing::new(vec![DriverRoles::alone("static", "static")]).expect("one driver");
    let v = r.view(0);
    // Finalizers: none, upstream's, one a DriverSet's driver named like this one left, one of
    // a driver no longer configured, someone else's.
    let sets: &[&[&str]] = &[
        &[],
        &[LB_FINALIZER],
        &["wasm-ccm.io/lb-cleanup.static"],
        &["wasm-ccm.io/lb-cleanup.static", LB_FINALIZER],
        &["wasm-ccm.io/lb-cleanup.gone", LB_FINALIZER],
        &["x.io/keep"],
        &["x.io/keep", LB_FINALIZER],
    ];
    let mut checked = 0;
    for type_ in ["LoadBalancer", "ClusterIP", "NodePort"] {
        for class in [None, Some("x.io/other")] {
            for fins in sets {
                for deleted in [false, true] {
                    let mut s = svc(type_, class, fins);
                    if deleted {
                        s = deleting(s);
                    }
                    let at = format!("{type_} {class:?} {fins:?} deleted={deleted}");
                    assert_eq!(v.serves(&s), service_rules::wants_load_balancer(&s), "{at}");
                    assert_eq!(v.owns_service(&s), service_rules::has_finalizer(&s), "{at}");
                    assert_eq!(
                        v.needs_cleanup(&s),
                        service_rules::needs_cleanup(&s),
                        "{at}"
                    );
                    assert_eq!(
                        v.may_update_backends(&s),
                        service_rules::may_update_backends(&s),
                        "{at}"
                    );
                    assert_eq!(v.held_by(&s), None, "{at}: no other driver holds it");
                    assert_eq!(v.sees(&s), v.serves(&s), "{at}: the cluster view");
                    // Upstream adds or removes its finalizer and touches no other.
                    let others: Vec<String> = fins
                        .iter()
                        .filter(|f| **f != LB_FINALIZER)
                        .map(|f| f.to_string())
                        .collect();
                    let mut with = others.clone();
                    with.push(LB_FINALIZER.to_string());
                    assert_eq!(v.finalizers_after(&s, true), with, "{at}");
                    assert_eq!(v.finalizers_after(&s, false), others, "{at}");
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 3 * 2 * sets.len() * 2);
    // Positive control: the same Service's answers differ for a labelled driver of a set.
    let left = svc("LoadBalancer", None, &["wasm-ccm.io/lb-cleanup.static"]);
    assert!(!service_rules::has_finalizer(&left));
    let mut labelled = DriverRoles::alone("static", "static");
    labelled.label = Some("static".into());
    let set = Routing::new(vec![labelled]).expect("one labelled driver");
    assert!(set.view(0).owns_service(&left));
}

#[test]
fn only_a_driver_alone_may_keep_upstreams_names() {
    let mut second = driver("b", "b");
    second.label = None;
    let err =
        Routing::new(vec![driver("a", "a"), second]).expect_err("two drivers, one unlabelled");
    assert!(err.contains("has no label among 2 drivers"), "{err}");
    // Alone, any name will do: it is the driver's own, in no finalizer or metric label.
    Routing::new(vec![DriverRoles::alone("Static_Cloud", "static")]).expect("alone");
    // A label is held to the name rule.
    let mut bad = DriverRoles::alone("static", "static");
    bad.label = Some("Upper".into());
    let err = Routing::new(vec![bad]).expect_err("a bad label");
    assert!(err.contains("must be a DNS label"), "{err}");
}

#[test]
fn services_go_to_the_driver_of_their_class() {
    let r = hybrid();
    let (cloud, metal) = (r.view(0), r.view(1));
    let classless = svc("LoadBalancer", None, &[]);
    let metal_svc = svc("LoadBalancer", Some("example.com/metal"), &[]);
    let foreign = svc("LoadBalancer", Some("example.com/other"), &[]);
    assert!(cloud.serves(&classless) && !metal.serves(&classless));
    assert!(metal.serves(&metal_svc) && !cloud.serves(&metal_svc));
    assert!(
        !cloud.serves(&foreign) && !metal.serves(&foreign),
        "a foreign class is ignored"
    );
    assert!(!cloud.serves(&svc("NodePort", None, &[])));
    // Each driver adds its own finalizer; class-less Services also keep upstream's.
    assert_eq!(
        cloud.finalizers_after(&classless, true),
        vec![
            "wasm-ccm.io/lb-cleanup.cloud".to_string(),
            LB_FINALIZER.to_string()
        ]
    );
    assert_eq!(
        metal.finalizers_after(&metal_svc, true),
        vec!["wasm-ccm.io/lb-cleanup.metal".to_string()]
    );
}

#[test]
fn a_class_change_hands_the_load_balancer_over() {
    let r = hybrid();
    let (cloud, metal) = (r.view(0), r.view(1));
    let f_cloud = "wasm-ccm.io/lb-cleanup.cloud";
    // LB(cloud) → ClusterIP: the apiserver cleared the class; cloud cleans up, drops both.
    let at_cluster_ip = svc("ClusterIP", None, &[f_cloud, LB_FINALIZER]);
    assert!(cloud.needs_cleanup(&at_cluster_ip));
    assert!(!metal.needs_cleanup(&at_cluster_ip));
    assert_eq!(
        cloud.finalizers_after(&at_cluster_ip, false),
        Vec::<String>::new()
    );
    // Seen only at LB(metal), the process down in between: cloud cleans up, metal waits.
    let moved = svc(
        "LoadBalancer",
        Some("example.com/metal"),
        &[f_cloud, LB_FINALIZER],
    );
    assert!(cloud.needs_cleanup(&moved));
    assert_eq!(metal.held_by(&moved), Some("cloud"));
    assert!(!metal.owns_service(&moved));
    assert_eq!(cloud.finalizers_after(&moved, false), Vec::<String>::new());
    let released = svc("LoadBalancer", Some("example.com/metal"), &[]);
    assert_eq!(metal.held_by(&released), None);
    // Deletion: the owner cleans up, the other does nothing.
    let gone = deleting(svc(
        "LoadBalancer",
        Some("example.com/metal"),
        &["wasm-ccm.io/lb-cleanup.metal"],
    ));
    assert!(metal.needs_cleanup(&gone));
    assert!(!cloud.needs_cleanup(&gone));
}

#[test]
fn upstreams_finalizer_alone_belongs_to_the_default_driver() {
    let r = hybrid();
    let (cloud, metal) = (r.view(0), r.view(1));
    // Made by a single-driver run: adopted by the default driver, no new load balancer.
    let legacy = svc("LoadBalancer", None, &[LB_FINALIZER]);
    assert!(cloud.owns_service(&legacy));
    assert!(!cloud.needs_cleanup(&legacy));
    assert!(cloud.may_update_backends(&legacy));
    assert!(!metal.owns_service(&legacy));
    // Moved to metal's class while the process was down: the default cleans up first.
    let moved = svc("LoadBalancer", Some("example.com/metal"), &[LB_FINALIZER]);
    assert!(cloud.needs_cleanup(&moved));
    assert_eq!(metal.held_by(&moved), Some("cloud"));
    assert_eq!(cloud.finalizers_after(&moved, false), Vec::<String>::new());
}

#[test]
fn a_driver_no_longer_configured_holds_nothing_but_is_reported() {
    let r = hybrid();
    let metal = r.view(1);
    let s = svc(
        "LoadBalancer",
        Some("example.com/metal"),
        &["wasm-ccm.io/lb-cleanup.removed"],
    );
    assert_eq!(metal.held_by(&s), None);
    assert_eq!(metal.orphaned_owners(&s), vec!["removed"]);
    assert!(!metal.owns_service(&s));
    // Its finalizer is kept when another driver adds or drops its own.
    assert_eq!(
        metal.finalizers_after(&s, true),
        vec![
            "wasm-ccm.io/lb-cleanup.removed".to_string(),
            "wasm-ccm.io/lb-cleanup.metal".to_string()
        ]
    );
}

#[test]
fn bad_tables_are_refused_with_the_names() {
    let ok = || {
        let mut a = driver("a", "a");
        a.nodes.default = true;
        a.load_balancer.default = true;
        a.routes = true;
        let mut b = driver("b", "b");
        b.load_balancer.classes = vec!["example.com/b".into()];
        b.nodes.selector = Some(selector(&[("site", "b")]));
        vec![a, b]
    };
    Routing::new(ok()).expect("the base is valid");
    type Edit = fn(&mut Vec<DriverRoles>);
    let cases: &[(Edit, &str)] = &[
        (|d| d[1].name = "a".into(), "two drivers are named \"a\""),
        (
            |d| d[1].provider_id_scheme = "a".into(),
            "both have providerIDScheme",
        ),
        (
            |d| d[1].nodes.default = true,
            "nodes.default is set on 2 drivers (a, b)",
        ),
        (
            |d| d[1].load_balancer.default = true,
            "loadBalancer.default is set on 2 drivers",
        ),
        (|d| d[1].routes = true, "routes is set on 2 drivers"),
        (
            |d| d[0].load_balancer.classes = vec!["example.com/b".into()],
            "both serve loadBalancerClass",
        ),
        (
            |d| d[1].load_balancer.classes.push("example.com/b".into()),
            "twice",
        ),
        (
            |d| d[1].load_balancer.classes = vec!["Bad Class".into()],
            "is not a qualified name",
        ),
        (
            |d| d[1].load_balancer.classes = vec!["UPPER.io/x".into()],
            "is not a qualified name",
        ),
        (|d| d[1].label = Some("Upper".into()), "must be a DNS label"),
        (|d| d[1].label = Some("x".repeat(41)), "must be a DNS label"),
        (
            |d| d[1].label = Some("a".into()),
            "two drivers are labelled \"a\" (a and b)",
        ),
        (
            |d| d[1].provider_id_scheme = "b://".into(),
            "must be a scheme alone",
        ),
        (
            |d| d[0].nodes.selector = Some(selector(&[("zone", "z1")])),
            "can match the same node",
        ),
        (
            |d| d[0].nodes.selector = Some(exprs(vec![expr("site", "Exists", &[])])),
            "can match the same node",
        ),
        (
            |d| d[1].nodes.selector = Some(exprs(vec![expr("site", "Gt", &["1"])])),
            "is not one of In, NotIn",
        ),
        (
            |d| d[1].nodes.selector = Some(exprs(vec![expr("site", "In", &[])])),
            "needs at least one value",
        ),
        (
            |d| d[1].nodes.selector = Some(LabelSelector::default()),
            "an empty selector",
        ),
        (|d| d.clear(), "no driver is configured"),
    ];
    for (edit, expected) in cases {
        let mut d = ok();
        edit(&mut d);
        let err = Routing::new(d).expect_err(expected);
        assert!(err.contains(expected), "{expected:?} not in {err:?}");
    }
}

#[test]
fn selector_overlap_is_decided_per_key() {
    let s = selector;
    // (a, b, may overlap)
    let cases: Vec<(LabelSelector, LabelSelector, bool)> = vec![
        (s(&[("site", "a")]), s(&[("site", "b")]), false),
        (s(&[("site", "a")]), s(&[("zone", "z")]), true),
        (
            s(&[("site", "a")]),
            exprs(vec![expr("site", "NotIn", &["a"])]),
            false,
        ),
        (
            s(&[("site", "a")]),
            exprs(vec![expr("site", "NotIn", &["b"])]),
            true,
        ),
        (
            s(&[("site", "a")]),
            exprs(vec![expr("site", "DoesNotExist", &[])]),
            false,
        ),
        (
            exprs(vec![expr("site", "Exists", &[])]),
            exprs(vec![expr("site", "DoesNotExist", &[])]),
            false,
        ),
        (
            exprs(vec![expr("site", "In", &["a", "b"])]),
            exprs(vec![expr("site", "In", &["b", "c"])]),
            true,
        ),
        (
            exprs(vec![expr("site", "In", &["a", "b"])]),
            exprs(vec![expr("site", "In", &["c"])]),
            false,
        ),
        (
            exprs(vec![expr("site", "NotIn", &["a"])]),
            exprs(vec![expr("site", "NotIn", &["b"])]),
            true,
        ),
        (
            exprs(vec![expr("metal", "Exists", &[])]),
            exprs(vec![expr("metal", "DoesNotExist", &[])]),
            false,
        ),
    ];
    for (a, b, expected) in cases {
        assert_eq!(may_overlap(&a, &b), expected, "{a:?} / {b:?}");
        assert_eq!(may_overlap(&b, &a), expected, "symmetric: {b:?} / {a:?}");
    }
}

#[test]
fn selectors_match_as_kubernetes_does() {
    let labels: BTreeMap<String, String> = [("site".to_string(), "a".to_string())].into();
    assert!(matches(&selector(&[("site", "a")]), &labels));
    assert!(!matches(&selector(&[("site", "b")]), &labels));
    assert!(
        matches(&exprs(vec![expr("zone", "NotIn", &["z"])]), &labels),
        "absent key"
    );
    assert!(matches(
        &exprs(vec![expr("zone", "DoesNotExist", &[])]),
        &labels
    ));
    assert!(!matches(
        &exprs(vec![expr("site", "NotIn", &["a"])]),
        &labels
    ));
    assert!(matches(
        &exprs(vec![expr("site", "In", &["a", "b"])]),
        &labels
    ));
    assert!(!matches(&exprs(vec![expr("zone", "Exists", &[])]), &labels));
}
