//! One table per rule; each case names the apiserver behaviour it mirrors.

use super::*;
use wasm_ccm_runtime::types::IpMode;

fn addr(kind: AddressType, address: &str) -> NodeAddress {
    NodeAddress {
        kind,
        address: address.into(),
    }
}

fn rules(violations: &[Violation]) -> Vec<Rule> {
    violations.iter().map(|v| v.rule).collect()
}

#[test]
fn dns1123_subdomain_mirrors_is_dns1123_subdomain() {
    for ok in [
        "a",
        "node-1",
        "lb.example.com",
        "1.2.3.4.nip.io",
        &format!("{}.{}", "a".repeat(63), "b".repeat(189)),
    ] {
        assert_eq!(is_dns1123_subdomain(ok), Ok(()), "{ok}");
    }
    for bad in [
        "",
        "Node-1",
        "bad host name!",
        "-a",
        "a-",
        "a..b",
        ".a",
        "a_b",
        &"a".repeat(254),
    ] {
        assert!(is_dns1123_subdomain(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn qualified_names_mirror_is_qualified_name() {
    for ok in [
        "a",
        "A",
        "example.com/rack",
        "example.com/Rack_1.x-y",
        "k8s.io/x",
        &format!("example.com/{}", "n".repeat(63)),
    ] {
        assert_eq!(is_qualified_name(ok), Ok(()), "{ok}");
    }
    for bad in [
        "",
        "/x",
        "example.com/",
        "bad key!",
        "Example.com/x",
        "a/b/c",
        "_x",
        "x-",
        &format!("example.com/{}", "n".repeat(64)),
        &format!("{}/x", "a".repeat(254)),
    ] {
        assert!(is_qualified_name(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn label_values_mirror_is_valid_label_value() {
    for ok in ["", "a", "s1.large", "eu-1a", "A_b.c-D", &"v".repeat(63)] {
        assert_eq!(is_valid_label_value(ok), Ok(()), "{ok}");
    }
    for bad in ["bad value!", "-a", "a.", &"v".repeat(64), "ü", "a b"] {
        assert!(is_valid_label_value(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn ips_are_strict() {
    for ok in ["10.0.0.1", "192.0.2.10", "fd00::1", "2001:db8::5"] {
        assert!(is_valid_ip(ok).is_ok(), "{ok}");
    }
    for bad in [
        "not-an-ip",
        "999.1.1.1",
        "010.0.0.1",
        "10.0.0.1 ",
        "fe80::1%eth0",
        "::ffff:10.0.0.1",
        "",
    ] {
        assert!(is_valid_ip(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn kubernetes_namespaces_are_recognised_in_any_case() {
    for (key, k8s, kubectl) in [
        ("kubernetes.io/hostname", true, false),
        ("KUBERNETES.IO/shout", true, false),
        ("Node.Kubernetes.Io/x", true, false),
        ("a.b.K8S.io/x", true, false),
        (
            "kubectl.kubernetes.io/last-applied-configuration",
            true,
            true,
        ),
        ("KUBECTL.kubernetes.io/x", true, true),
        ("x.kubectl.kubernetes.io/y", true, true),
        ("kubernetes.io.example.com/x", false, false),
        ("notkubernetes.io/x", false, false),
        ("plain", false, false),
    ] {
        assert_eq!(in_kubernetes_namespace(key), k8s, "{key}");
        assert_eq!(is_reserved_label(key), k8s, "{key}");
        assert_eq!(in_kubectl_namespace(key), kubectl, "{key}");
    }
}

#[test]
fn provider_ids_mirror_validate_node_update_and_the_scheme_convention() {
    type Case<'a> = (&'a str, &'a str, Option<&'a str>, Option<Rule>);
    let cases: [Case; 11] = [
        // (returned, existing, taken by, refused under)
        ("hostile://n1", "", None, None),
        ("hostile://n1", "hostile://n1", None, None),
        ("", "hostile://n1", None, None),
        ("", "", None, None),
        (
            "aws:///us-east-1a/i-0123456789",
            "",
            None,
            Some(Rule::ProviderIdScheme),
        ),
        ("hostile-x://n1", "", None, Some(Rule::ProviderIdScheme)),
        ("hostile://", "", None, Some(Rule::ProviderIdScheme)),
        ("hostile:/n1", "", None, Some(Rule::ProviderIdScheme)),
        ("hostile://n 1", "", None, Some(Rule::ProviderIdInvalid)),
        (
            "hostile://other",
            "hostile://n1",
            None,
            Some(Rule::ProviderIdChanged),
        ),
        (
            "hostile://ok-1",
            "",
            Some("ok-1"),
            Some(Rule::ProviderIdTaken),
        ),
    ];
    for (returned, existing, taken, want) in cases {
        let got = check_provider_id(returned, "hostile", existing, taken).map_err(|v| v.rule);
        assert_eq!(got.err(), want, "{returned:?} on {existing:?}");
    }
    let long = format!("hostile://{}", "x".repeat(MAX_PROVIDER_ID_BYTES));
    assert_eq!(
        check_provider_id(&long, "hostile", "", None)
            .unwrap_err()
            .rule,
        Rule::ProviderIdInvalid
    );
    // A driver that declares no scheme can set no provider ID.
    assert_eq!(
        check_provider_id("://x", "", "", None).unwrap_err().rule,
        Rule::ProviderIdScheme
    );
}

#[test]
fn foreign_provider_ids() {
    assert!(is_foreign_provider_id(
        "aws:///us-east-1a/i-0victim",
        "hostile"
    ));
    assert!(is_foreign_provider_id("i-0123", "hostile"));
    assert!(is_foreign_provider_id("HOSTILE://n1", "hostile"));
    assert!(!is_foreign_provider_id("hostile://n1", "hostile"));
    assert!(!is_foreign_provider_id("", "hostile"));
}

#[test]
fn addresses_are_parsed_deduplicated_and_capped() {
    use AddressType::*;
    let mut input = vec![
        addr(InternalIp, "not-an-ip"),
        addr(ExternalIp, "999.1.1.1"),
        addr(Hostname, "bad host name!"),
        addr(InternalDns, ""),
        addr(InternalIp, "10.0.0.5"),
        addr(InternalIp, "10.0.0.5"),
        // Same address, another type: not a duplicate for the apiserver.
        addr(ExternalIp, "10.0.0.5"),
        addr(Hostname, "node-1.example.com"),
    ];
    for i in 0..40 {
        input.push(addr(InternalIp, &format!("10.1.0.{i}")));
    }
    let (kept, violations) = sanitize_addresses(&input);
    assert_eq!(kept.len(), MAX_ADDRESSES);
    assert_eq!(kept[0], addr(InternalIp, "10.0.0.5"));
    assert_eq!(kept[1], addr(ExternalIp, "10.0.0.5"));
    assert_eq!(kept[2], addr(Hostname, "node-1.example.com"));
    assert_eq!(kept[31], addr(InternalIp, "10.1.0.28"));
    assert_eq!(
        rules(&violations),
        [
            Rule::AddressInvalid,
            Rule::AddressInvalid,
            Rule::AddressInvalid,
            Rule::AddressInvalid,
            Rule::AddressDuplicate,
            Rule::AddressCount,
        ]
    );
    assert!(
        violations[5].detail.contains("11 address"),
        "{violations:?}"
    );
    // A clean list passes untouched.
    let clean = vec![addr(InternalIp, "10.0.0.1"), addr(Hostname, "n1")];
    assert_eq!(sanitize_addresses(&clean), (clean, Vec::new()));
}

#[test]
fn written_addresses_are_deduplicated_keeping_the_first() {
    let a = |t: &str, v: &str| KubeAddress {
        type_: t.into(),
        address: v.into(),
    };
    assert_eq!(
        dedupe_addresses(vec![
            a("InternalIP", "10.0.0.15"),
            a("Hostname", "n1"),
            a("InternalIP", "10.0.0.15"),
            a("ExternalIP", "10.0.0.15"),
        ]),
        vec![
            a("InternalIP", "10.0.0.15"),
            a("Hostname", "n1"),
            a("ExternalIP", "10.0.0.15"),
        ]
    );
}

fn metadata(labels: Vec<(String, String)>) -> InstanceMetadata {
    InstanceMetadata {
        provider_id: "hostile://n1".into(),
        instance_type: "bad value!".into(),
        zone: "z".repeat(300),
        region: "r1".into(),
        addresses: vec![addr(AddressType::InternalIp, "10.0.0.1")],
        additional_labels: labels,
    }
}

#[test]
fn labels_follow_validate_labels_and_the_reserved_namespaces() {
    let mut labels: Vec<(String, String)> = [
        ("bad key!", "x"),
        ("KUBERNETES.IO/shout", "x"),
        ("Node.Kubernetes.Io/x", "x"),
        ("example.com/big", &"v".repeat(10_000)),
        ("example.com/ok", "yes"),
        ("Upper.example.com/x", "x"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for i in 0..70 {
        labels.push((format!("example.com/l{i}"), format!("v{i}")));
    }
    let (meta, violations) = sanitize_metadata(metadata(labels));
    assert_eq!(meta.instance_type, "", "invalid value: not written");
    assert_eq!(meta.zone, "", "over 63 bytes: not written");
    assert_eq!(meta.region, "r1");
    assert_eq!(meta.provider_id, "hostile://n1", "checked elsewhere");
    assert_eq!(meta.additional_labels.len(), MAX_LABELS);
    assert_eq!(
        meta.additional_labels[0],
        ("example.com/ok".to_string(), "yes".to_string())
    );
    assert_eq!(meta.additional_labels[63].0, "example.com/l62");
    assert_eq!(
        rules(&violations),
        [
            Rule::LabelValue,
            Rule::LabelValue,
            Rule::LabelKey,
            Rule::LabelReserved,
            Rule::LabelReserved,
            Rule::LabelValue,
            Rule::LabelKey,
            Rule::LabelCount,
        ]
    );
    // The 10 KB value shows only its head.
    assert!(
        violations.iter().all(|v| v.detail.len() < 400),
        "{violations:?}"
    );
}

fn policy() -> AnnotationPolicy {
    AnnotationPolicy::new(&[
        "hostile-lb.example/".into(),
        "service.beta.kubernetes.io/hostile-lb-type".into(),
    ])
}

#[test]
fn annotation_keys_need_a_declared_prefix_and_never_kubectl() {
    let p = policy();
    for ok in [
        "hostile-lb.example/id",
        "hostile-lb.example/Some_Name.x",
        "service.beta.kubernetes.io/hostile-lb-type",
    ] {
        assert_eq!(p.check(ok), Ok(()), "{ok}");
    }
    for (bad, rule) in [
        ("bad key!", Rule::AnnotationKey),
        ("hostile-lb.example/", Rule::AnnotationKey),
        (
            "kubectl.kubernetes.io/last-applied-configuration",
            Rule::AnnotationReserved,
        ),
        (
            "service.beta.kubernetes.io/aws-load-balancer-type",
            Rule::AnnotationNotDeclared,
        ),
        (
            "service.beta.kubernetes.io/hostile-lb-type-x",
            Rule::AnnotationNotDeclared,
        ),
        ("owner.example/keep-me", Rule::AnnotationNotDeclared),
        ("Hostile-LB.example/id", Rule::AnnotationNotDeclared),
        ("hostile-lb.example.evil/id", Rule::AnnotationNotDeclared),
    ] {
        assert_eq!(p.check(bad).map_err(|v| v.rule), Err(rule), "{bad}");
    }
    // Even a driver declaring kubectl's namespace never writes there (the runtime also refuses
    // such a declaration at load).
    let greedy = AnnotationPolicy::new(&["kubectl.kubernetes.io/".into()]);
    assert_eq!(
        greedy
            .check("kubectl.kubernetes.io/last-applied-configuration")
            .map_err(|v| v.rule),
        Err(Rule::AnnotationReserved)
    );
    // Upper case is a valid annotation key (the apiserver lowercases before checking), so it is
    // refused for not being declared, not as malformed.
    assert_eq!(
        AnnotationPolicy::new(&["Upper.example/".into()]).check("Upper.example/x"),
        Ok(())
    );
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn annotation_changes_are_filtered_and_budgeted() {
    let big = "v".repeat(40 * 1024);
    let set = pairs(&[
        (
            "kubectl.kubernetes.io/last-applied-configuration",
            "{\"hijacked\":true}",
        ),
        ("service.beta.kubernetes.io/aws-load-balancer-type", "nlb"),
        ("bad key!", "x"),
        ("hostile-lb.example/ok", "yes"),
        ("hostile-lb.example/big-1", &big),
        // Does not fit the 64 KiB left after big-1; the small one after it still does.
        ("hostile-lb.example/big-2", &big),
        ("hostile-lb.example/small", "s"),
    ]);
    let remove = vec![
        "owner.example/keep-me".to_string(),
        "hostile-lb.example/stale".to_string(),
    ];
    let (changes, violations) = sanitize_annotations(&set, &remove, &policy(), &BTreeMap::new());
    let keys: Vec<&str> = changes.set.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "hostile-lb.example/ok",
            "hostile-lb.example/big-1",
            "hostile-lb.example/small"
        ]
    );
    assert_eq!(changes.remove, ["hostile-lb.example/stale"]);
    assert_eq!(
        rules(&violations),
        [
            Rule::AnnotationReserved,
            Rule::AnnotationNotDeclared,
            Rule::AnnotationKey,
            Rule::AnnotationNotDeclared,
            Rule::AnnotationBudget,
        ]
    );
}

#[test]
fn annotation_counts_are_capped() {
    let set: Vec<(String, String)> = (0..40)
        .map(|i| (format!("hostile-lb.example/k{i}"), "v".to_string()))
        .collect();
    let remove: Vec<String> = (0..33)
        .map(|i| format!("hostile-lb.example/r{i}"))
        .collect();
    let (changes, violations) = sanitize_annotations(&set, &remove, &policy(), &BTreeMap::new());
    assert_eq!(changes.set.len(), MAX_ANNOTATIONS);
    assert_eq!(changes.remove.len(), MAX_ANNOTATIONS);
    assert_eq!(rules(&violations), [Rule::AnnotationBudget]);
    assert!(violations[0].detail.starts_with("9 "), "{violations:?}");
}

#[test]
fn annotations_never_push_the_object_over_the_apiserver_limit() {
    // The user's annotations already use most of the 256 KiB.
    let current: BTreeMap<String, String> = (0..4)
        .map(|i| (format!("owner.example/blob{i}"), "u".repeat(60 * 1024)))
        .collect();
    let set = pairs(&[("hostile-lb.example/x", &"v".repeat(20 * 1024))]);
    let remove = vec!["hostile-lb.example/gone".to_string()];
    let (changes, violations) = sanitize_annotations(&set, &remove, &policy(), &current);
    assert!(changes.set.is_empty());
    assert_eq!(
        changes.remove,
        ["hostile-lb.example/gone"],
        "removals still go"
    );
    assert_eq!(rules(&violations), [Rule::AnnotationObjectSize]);
    // Below the limit the same set goes through.
    let small: BTreeMap<String, String> = current.into_iter().take(3).collect();
    let (changes, violations) = sanitize_annotations(&set, &remove, &policy(), &small);
    assert_eq!(changes.set.len(), 1);
    assert!(violations.is_empty());
}

#[test]
fn only_effective_annotation_changes_are_written() {
    let current: BTreeMap<String, String> = pairs(&[
        ("hostile-lb.example/id", "svc-good"),
        ("owner.example/keep-me", "yes"),
    ])
    .into_iter()
    .collect();
    let steady = AnnotationChanges {
        set: pairs(&[("hostile-lb.example/id", "svc-good")]),
        remove: vec!["hostile-lb.example/absent".into()],
    };
    assert!(steady.effective(&current).is_empty());
    let changed = AnnotationChanges {
        set: pairs(&[("hostile-lb.example/id", "other")]),
        remove: vec!["owner.example/keep-me".into()],
    };
    assert_eq!(changed.effective(&current), changed);
}

fn ingress(ip: Option<&str>, hostname: Option<&str>, mode: Option<IpMode>) -> Ingress {
    Ingress {
        ip: ip.map(Into::into),
        hostname: hostname.map(Into::into),
        ip_mode: mode,
    }
}

#[test]
fn ingress_mirrors_validate_load_balancer_status() {
    let input = vec![
        ingress(Some("not-an-ip"), None, None),
        ingress(None, None, None),
        ingress(Some(""), Some(""), None),
        ingress(None, Some("10.0.0.1"), None),
        ingress(None, Some("Bad_Host"), None),
        ingress(None, Some("lb.example.com"), Some(IpMode::Proxy)),
        ingress(Some("192.0.2.20"), None, None),
        ingress(None, Some("ok.example.com"), None),
        ingress(
            Some("192.0.2.21"),
            Some("both.example.com"),
            Some(IpMode::Proxy),
        ),
    ];
    let (kept, violations) = sanitize_ingress(&input);
    assert_eq!(kept, input[6..].to_vec());
    assert_eq!(rules(&violations), [Rule::IngressInvalid; 6]);
    assert!(violations[5].detail.contains("ipMode"), "{violations:?}");
    assert!(violations[3].detail.contains("not an IP"), "{violations:?}");
}

#[test]
fn ingress_is_capped() {
    let input: Vec<Ingress> = (0..20)
        .map(|i| ingress(Some(&format!("192.0.2.{i}")), None, Some(IpMode::Vip)))
        .collect();
    let (kept, violations) = sanitize_ingress(&input);
    assert_eq!(kept, input[..MAX_INGRESS].to_vec());
    assert_eq!(rules(&violations), [Rule::IngressCount]);
}

#[test]
fn ingress_comparison_applies_the_apiservers_ip_mode_default() {
    let k = |ip: Option<&str>, host: Option<&str>, mode: Option<&str>| LoadBalancerIngress {
        ip: ip.map(Into::into),
        hostname: host.map(Into::into),
        ip_mode: mode.map(Into::into),
        ports: None,
    };
    let desired = vec![k(Some("203.0.113.10"), None, None)];
    // A >= 1.30 apiserver stored VIP; an older one stored nothing: both are converged.
    assert!(same_ingress(
        &[k(Some("203.0.113.10"), None, Some("VIP"))],
        &desired
    ));
    assert!(same_ingress(
        &[k(Some("203.0.113.10"), None, None)],
        &desired
    ));
    // An empty ports list is no ports.
    let mut with_ports = k(Some("203.0.113.10"), None, Some("VIP"));
    with_ports.ports = Some(Vec::new());
    assert!(same_ingress(&[with_ports], &desired));
    // Real differences still count.
    assert!(!same_ingress(
        &[k(Some("203.0.113.10"), None, Some("Proxy"))],
        &desired
    ));
    assert!(!same_ingress(
        &[k(Some("203.0.113.11"), None, None)],
        &desired
    ));
    assert!(!same_ingress(&[], &desired));
    // A hostname entry gets no ipMode.
    assert_eq!(
        normalize_ingress(&[k(None, Some("lb.example.com"), None)]),
        [k(None, Some("lb.example.com"), None)]
    );
    assert_eq!(
        normalize_ingress(&desired)[0].ip_mode.as_deref(),
        Some("VIP")
    );
}

#[test]
fn event_text_is_cut_by_bytes_on_a_char_boundary() {
    let s = "é".repeat(600); // 1200 bytes
    let cut = cut_to_bytes(&s, EVENT_NOTE_LIMIT);
    assert_eq!(cut.len(), 1024);
    let odd = format!("a{s}");
    let cut = cut_to_bytes(&odd, EVENT_NOTE_LIMIT);
    assert_eq!(cut.len(), 1023, "never splits a character");
    assert!(cut.is_char_boundary(cut.len()));
    assert_eq!(cut_to_bytes("short", 1024), "short");
    assert_eq!(cut_to_bytes("🙂", 3), "");
}

#[test]
fn driver_event_reasons_are_upper_camel_case() {
    for ok in ["LoadBalancerReady", "A", "Step2Done", &"R".repeat(128)] {
        assert_eq!(check_event_reason(ok), Ok(()), "{ok}");
    }
    for bad in [
        "",
        "bad reason!",
        "lowerCase",
        "Has Space",
        "Ünicode",
        &"R".repeat(129),
    ] {
        assert_eq!(
            check_event_reason(bad).map_err(|v| v.rule),
            Err(Rule::EventReason),
            "{bad:?}"
        );
    }
}

#[test]
fn shown_values_are_short_and_escaped() {
    assert_eq!(shown("a\nb"), "\"a\\nb\"");
    let long = shown(&"x".repeat(100_000));
    assert!(
        long.len() < 100 && long.ends_with("(100000 bytes)"),
        "{long}"
    );
}

#[test]
fn every_rule_has_a_distinct_metric_label() {
    use Rule::*;
    let all = [
        ProviderIdScheme,
        ProviderIdInvalid,
        ProviderIdTaken,
        ProviderIdChanged,
        AnnotationKey,
        AnnotationNotDeclared,
        AnnotationReserved,
        AnnotationBudget,
        AnnotationObjectSize,
        AddressInvalid,
        AddressDuplicate,
        AddressCount,
        LabelKey,
        LabelValue,
        LabelReserved,
        LabelCount,
        IngressInvalid,
        IngressCount,
        EventReason,
    ];
    let names: HashSet<&str> = all.iter().map(|r| r.name()).collect();
    assert_eq!(names.len(), all.len());
}

#[test]
fn hostnames_may_carry_capitals_as_clouds_spell_them() {
    use wasm_ccm_runtime::types::{AddressType, NodeAddress};
    let vm = NodeAddress {
        kind: AddressType::Hostname,
        address: "testDummyVM".into(),
    };
    assert_eq!(check_address(&vm), Ok(()));
    let bad = NodeAddress {
        kind: AddressType::Hostname,
        address: "bad host name!".into(),
    };
    assert!(check_address(&bad).is_err());
}
