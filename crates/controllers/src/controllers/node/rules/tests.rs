//! Cases ported from upstream's `Test_syncNode`, `TestNodeAddressesChangeDetected`,
//! `Test_reconcileNodeLabels` and the provided-node-IP helpers, as data.

use super::*;

fn addr(kind: &str, address: &str) -> NodeAddress {
    NodeAddress {
        type_: kind.into(),
        address: address.into(),
    }
}

fn addrs(list: &[(&str, &str)]) -> Vec<NodeAddress> {
    list.iter().map(|(k, a)| addr(k, a)).collect()
}

fn labels(list: &[(&str, &str)]) -> BTreeMap<String, String> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn address_merge_table() {
    struct Case {
        name: &'static str,
        cloud: &'static [(&'static str, &'static str)],
        current: &'static [(&'static str, &'static str)],
        provided: Option<&'static str>,
        want: Result<Option<&'static [(&'static str, &'static str)]>, &'static str>,
    }
    let cases = [
        Case {
            name: "empty cloud list leaves the node alone",
            cloud: &[],
            current: &[("InternalIP", "10.0.0.1")],
            provided: None,
            want: Ok(None),
        },
        Case {
            name: "kubelet hostname carried over when the cloud has none",
            cloud: &[("InternalIP", "10.0.0.1")],
            current: &[("Hostname", "node0.local"), ("InternalIP", "192.168.0.9")],
            provided: None,
            want: Ok(Some(&[
                ("InternalIP", "10.0.0.1"),
                ("Hostname", "node0.local"),
            ])),
        },
        Case {
            name: "cloud hostname wins",
            cloud: &[("InternalIP", "10.0.0.1"), ("Hostname", "cloud-name")],
            current: &[("Hostname", "node0.local")],
            provided: None,
            want: Ok(Some(&[
                ("InternalIP", "10.0.0.1"),
                ("Hostname", "cloud-name"),
            ])),
        },
        Case {
            name: "provided IP first, other addresses of its type dropped",
            cloud: &[
                ("InternalIP", "10.0.0.1"),
                ("InternalIP", "10.0.0.2"),
                ("ExternalIP", "132.143.154.163"),
            ],
            current: &[],
            provided: Some("10.0.0.2"),
            want: Ok(Some(&[
                ("InternalIP", "10.0.0.2"),
                ("ExternalIP", "132.143.154.163"),
            ])),
        },
        Case {
            name: "provided IP matching an external address",
            cloud: &[
                ("InternalIP", "10.0.0.1"),
                ("ExternalIP", "132.143.154.163"),
            ],
            current: &[],
            provided: Some("132.143.154.163"),
            want: Ok(Some(&[
                ("ExternalIP", "132.143.154.163"),
                ("InternalIP", "10.0.0.1"),
            ])),
        },
        Case {
            name: "provided IP compared as an IP, not a string",
            cloud: &[("InternalIP", "fd00::0001")],
            current: &[],
            provided: Some("fd00::1"),
            want: Ok(Some(&[("InternalIP", "fd00::0001")])),
        },
        Case {
            name: "dual-stack pair, both first in the given order",
            cloud: &[
                ("InternalIP", "10.0.0.1"),
                ("InternalIP", "fd00::1"),
                ("InternalIP", "10.0.0.2"),
                ("Hostname", "h"),
            ],
            current: &[],
            provided: Some("fd00::1,10.0.0.1"),
            want: Ok(Some(&[
                ("InternalIP", "fd00::1"),
                ("InternalIP", "10.0.0.1"),
                ("Hostname", "h"),
            ])),
        },
        Case {
            name: "provided IP not among the cloud's addresses",
            cloud: &[("InternalIP", "10.0.0.1")],
            current: &[],
            provided: Some("10.0.0.9"),
            want: Err("failed to get node address from cloud provider that matches ip 10.0.0.9"),
        },
        Case {
            name: "garbage annotation",
            cloud: &[("InternalIP", "10.0.0.1")],
            current: &[],
            provided: Some("not-an-ip"),
            want: Err("is not valid"),
        },
        Case {
            name: "two IPv4 addresses are not a dual-stack pair",
            cloud: &[("InternalIP", "10.0.0.1"), ("InternalIP", "10.0.0.2")],
            current: &[],
            provided: Some("10.0.0.1,10.0.0.2"),
            want: Err("one IPv4 and one IPv6"),
        },
        Case {
            name: "unspecified address in a pair",
            cloud: &[("InternalIP", "10.0.0.1")],
            current: &[],
            provided: Some("0.0.0.0,fd00::1"),
            want: Err("unspecified"),
        },
    ];
    for case in cases {
        let got = merge_addresses(&addrs(case.cloud), &addrs(case.current), case.provided);
        match (got, case.want) {
            (Ok(got), Ok(want)) => {
                assert_eq!(got, want.map(addrs), "{}", case.name)
            }
            (Err(e), Err(fragment)) => assert!(
                e.to_string().contains(fragment),
                "{}: {e} lacks {fragment:?}",
                case.name
            ),
            (got, want) => panic!("{}: got {got:?}, want {want:?}", case.name),
        }
    }
}

#[test]
fn address_change_detection_is_ordered_and_exact() {
    let a = addrs(&[("InternalIP", "10.0.0.1"), ("InternalIP", "10.0.0.2")]);
    let swapped = addrs(&[("InternalIP", "10.0.0.2"), ("InternalIP", "10.0.0.1")]);
    let replaced = addrs(&[("InternalIP", "10.0.0.1"), ("InternalIP", "10.0.0.3")]);
    assert!(!addresses_changed(&a, &a.clone()));
    assert!(addresses_changed(&a, &swapped));
    // Upstream's type→address map misses this one; exact comparison does not.
    assert!(addresses_changed(&a, &replaced));
    assert!(addresses_changed(&a, &a[..1]));
    assert!(addresses_changed(&[], &a));
}

fn meta(kind: &str, zone: &str, region: &str, extra: &[(&str, &str)]) -> InstanceMetadata {
    InstanceMetadata {
        provider_id: "static://x".into(),
        instance_type: kind.into(),
        zone: zone.into(),
        region: region.into(),
        addresses: Vec::new(),
        additional_labels: extra
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

#[test]
fn init_labels_write_ga_and_beta_and_filter_additional_ones() {
    let plan = init_labels(
        &labels(&[
            ("example.com/rack", "r1"),
            ("topology.kubernetes.io/zone", "old"),
        ]),
        &meta(
            "s1.large",
            "eu-1a",
            "",
            &[
                ("example.com/rack", "r2"),
                ("example.com/gpu", "yes"),
                ("node.kubernetes.io/foo", "no"),
                ("sub.k8s.io/bar", "no"),
                ("k8s.io.example.com/ok", "yes"),
            ],
        ),
    );
    assert_eq!(
        plan.set,
        labels(&[
            ("beta.kubernetes.io/instance-type", "s1.large"),
            ("example.com/gpu", "yes"),
            ("failure-domain.beta.kubernetes.io/zone", "eu-1a"),
            ("k8s.io.example.com/ok", "yes"),
            ("node.kubernetes.io/instance-type", "s1.large"),
            // Zone and region labels overwrite what is there, like upstream.
            ("topology.kubernetes.io/zone", "eu-1a"),
        ])
    );
    assert_eq!(plan.skipped.len(), 3, "{:?}", plan.skipped);
    assert!(plan.skipped[0].contains("already set"));
}

#[test]
fn empty_metadata_writes_no_labels() {
    assert_eq!(
        init_labels(&BTreeMap::new(), &meta("", "", "", &[])),
        LabelPlan::default()
    );
}

#[test]
fn beta_to_ga_table() {
    type Labels = &'static [(&'static str, &'static str)];
    let cases: [(Labels, Labels); 4] = [
        // Beta present, GA missing → copied.
        (
            &[
                ("failure-domain.beta.kubernetes.io/zone", "z1"),
                ("beta.kubernetes.io/instance-type", "t"),
            ],
            &[
                ("topology.kubernetes.io/zone", "z1"),
                ("node.kubernetes.io/instance-type", "t"),
            ],
        ),
        // GA differs → beta wins.
        (
            &[
                ("failure-domain.beta.kubernetes.io/region", "r1"),
                ("topology.kubernetes.io/region", "r0"),
            ],
            &[("topology.kubernetes.io/region", "r1")],
        ),
        // Already equal → nothing.
        (
            &[
                ("failure-domain.beta.kubernetes.io/zone", "z1"),
                ("topology.kubernetes.io/zone", "z1"),
            ],
            &[],
        ),
        // Only GA → nothing.
        (&[("topology.kubernetes.io/zone", "z1")], &[]),
    ];
    for (have, want) in cases {
        assert_eq!(beta_to_ga(&labels(have)), labels(want), "{have:?}");
    }
}

#[test]
fn reserved_label_namespaces() {
    for (key, reserved) in [
        ("kubernetes.io/hostname", true),
        ("node.kubernetes.io/x", true),
        ("k8s.io/x", true),
        ("a.b.k8s.io/x", true),
        ("example.com/x", false),
        ("plain", false),
        ("kubernetes.io.example.com/x", false),
        // Case does not hide a reserved namespace.
        ("KUBERNETES.IO/shout", true),
        ("Node.Kubernetes.Io/x", true),
        ("a.B.K8s.IO/x", true),
    ] {
        assert_eq!(is_reserved_label(key), reserved, "{key}");
    }
}
