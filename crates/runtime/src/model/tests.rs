//! The model against the JSON encoding its module doc describes: what reads, what is written,
//! and what the errors say.

use serde_json::{Value, json};

use super::cluster::{AddressClaim, AddressUse};
use super::http::{HttpError, Method, Request};
use super::json::{from_value, to_value};
use super::types::*;

fn read<T: serde::de::DeserializeOwned + Default>(v: Value) -> Result<T, String> {
    from_value(&v, "input")
}

/// `value` written and read back is itself.
fn round_trip<T>(value: T)
where
    T: serde::Serialize + serde::de::DeserializeOwned + Default + PartialEq + std::fmt::Debug,
{
    let written = to_value(&value);
    let back: T = read(written.clone()).unwrap_or_else(|e| panic!("{written}: {e}"));
    assert_eq!(back, value, "{written}");
}

#[test]
fn services_read_with_wit_names_and_zero_defaults() {
    let s: Service = read(json!({
        "namespace": "default", "name": "web", "uid": "u1",
        "annotations": {"static.wasm-ccm.io/load-balancer-ip": "192.0.2.10"},
        "ports": [{"port": 80, "node-port": 30080, "protocol": "udp"}],
        "ingress": [{"ip": "192.0.2.10", "ip-mode": "vip"}],
        "external-traffic-policy": "local",
        "ip-families": ["ipv4", "ipv6"],
        "session-affinity-timeout": 30
    }))
    .expect("valid");
    assert_eq!(
        s.annotations,
        vec![(
            "static.wasm-ccm.io/load-balancer-ip".to_string(),
            "192.0.2.10".to_string()
        )]
    );
    assert_eq!(s.ports[0].port, 80);
    assert_eq!(s.ports[0].protocol, Protocol::Udp);
    assert_eq!(s.ports[0].name, "");
    assert_eq!(s.ingress[0].ip.as_deref(), Some("192.0.2.10"));
    assert_eq!(s.ingress[0].ip_mode, Some(IpMode::Vip));
    assert_eq!(s.external_traffic_policy, TrafficPolicy::Local);
    assert_eq!(s.session_affinity, SessionAffinity::None);
    assert_eq!(s.session_affinity_timeout, Some(30));
    assert_eq!(s.ip_families, vec![IpFamily::Ipv4, IpFamily::Ipv6]);
    assert_eq!(s.load_balancer_ip, None);
    assert_eq!(s.health_check_node_port, 0);
}

#[test]
fn service_mistakes_name_the_input_and_the_field() {
    let e = read::<Service>(json!({"name": "web", "prots": []})).unwrap_err();
    assert!(e.starts_with("input"), "{e}");
    assert!(e.contains("unknown field `prots`"), "{e}");
    let e = read::<Service>(json!({"ports": [{"port": 70000}]})).unwrap_err();
    assert!(e.contains("input.ports[0].port"), "{e}");
    let e = read::<Service>(json!({"session-affinity": "sticky"})).unwrap_err();
    assert!(e.contains("input.session-affinity"), "{e}");
    assert!(e.contains("`sticky`") && e.contains("`client-ip`"), "{e}");
    let e = read::<Service>(json!({"labels": {"a": 1}})).unwrap_err();
    assert!(e.contains("input.labels"), "{e}");
    let e = read::<Service>(json!({"ports": {"port": 80}})).unwrap_err();
    assert!(e.contains("input.ports") && e.contains("sequence"), "{e}");
    let e = read::<Service>(json!("web")).unwrap_err();
    assert!(e.starts_with("input: "), "{e}");
    let e =
        from_value::<Vec<Service>>(&json!([{}, {"nmae": "x"}]), "--cluster-services").unwrap_err();
    assert!(e.starts_with("--cluster-services[1]"), "{e}");
    assert!(e.contains("unknown field `nmae`"), "{e}");
}

#[test]
fn labels_are_an_object_or_an_array_of_pairs() {
    let pairs = vec![
        ("a".to_string(), "1".to_string()),
        ("b".to_string(), "2".to_string()),
    ];
    let n: Node = read(json!({"labels": {"a": "1", "b": "2"}})).expect("object");
    assert_eq!(n.labels, pairs);
    let n: Node = read(json!({"labels": [["a", "1"], ["b", "2"]]})).expect("pairs");
    assert_eq!(n.labels, pairs);
    assert_eq!(to_value(&n)["labels"], json!({"a": "1", "b": "2"}));
    let e = read::<Node>(json!({"labels": [["a"]]})).unwrap_err();
    assert!(e.contains("input.labels"), "{e}");
}

#[test]
fn nodes_are_ready_unless_told_and_null_is_missing() {
    let n: Node = read(json!({"name": "a"})).expect("valid");
    assert!(n.ready);
    assert_eq!(n, Node::named("a"));
    let n: Node = read(json!({"name": "a", "ready": false, "uid": null})).expect("valid");
    assert!(!n.ready);
    assert_eq!(n.uid, "");
    let n: Node = read(Value::Null).expect("null is the zero value");
    assert_eq!(n, Node::default());
    let e = read::<Node>(json!({"ready": "yes"})).unwrap_err();
    assert!(e.contains("input.ready"), "{e}");
    let e = read::<Node>(json!({"addresses": [{"kind": "internal", "address": "x"}]})).unwrap_err();
    assert!(e.contains("input.addresses[0].kind"), "{e}");
    assert!(e.contains("`internal-ip`"), "{e}");
}

#[test]
fn enums_are_their_wit_case_names() {
    let cases = [
        (AddressType::Hostname, "hostname"),
        (AddressType::InternalIp, "internal-ip"),
        (AddressType::ExternalIp, "external-ip"),
        (AddressType::InternalDns, "internal-dns"),
        (AddressType::ExternalDns, "external-dns"),
    ];
    for (kind, name) in cases {
        assert_eq!(to_value(&kind), json!(name));
        assert_eq!(kind.wit_name(), name);
        assert_eq!(kind.to_string(), name);
        assert_eq!(read::<AddressType>(json!(name)), Ok(kind));
    }
    assert_eq!(to_value(&SessionAffinity::ClientIp), json!("client-ip"));
    assert_eq!(to_value(&IpFamily::Ipv6), json!("ipv6"));
    assert_eq!(
        to_value(&AddressUse::LoadBalancerIp),
        json!("load-balancer-ip")
    );
    assert_eq!(to_value(&Method::Options), json!("options"));
}

#[test]
fn variants_are_a_case_name_or_an_object_of_one_case() {
    let cases = [
        (
            ProviderError::NotFound("gone".into()),
            json!({"not-found": "gone"}),
        ),
        (ProviderError::NotImplemented, json!("not-implemented")),
        (
            ProviderError::ImplementedElsewhere,
            json!("implemented-elsewhere"),
        ),
        (
            ProviderError::InvalidConfig("x".into()),
            json!({"invalid-config": "x"}),
        ),
        (
            ProviderError::Unauthorized("x".into()),
            json!({"unauthorized": "x"}),
        ),
        (
            ProviderError::RateLimited(None),
            json!({"rate-limited": null}),
        ),
        (
            ProviderError::RateLimited(Some(7)),
            json!({"rate-limited": 7}),
        ),
        (
            ProviderError::RetryAfter(Retry {
                seconds: 5,
                reason: "provisioning".into(),
            }),
            json!({"retry-after": {"seconds": 5, "reason": "provisioning"}}),
        ),
        (
            ProviderError::Transient("x".into()),
            json!({"transient": "x"}),
        ),
        (
            ProviderError::Permanent("x".into()),
            json!({"permanent": "x"}),
        ),
    ];
    for (error, encoded) in cases {
        assert_eq!(to_value(&error), encoded);
        assert_eq!(
            serde_json::from_value::<ProviderError>(encoded.clone()).ok(),
            Some(error.clone()),
            "{encoded}"
        );
        assert!(encoded.to_string().contains(error.case()), "{encoded}");
    }
    assert!(serde_json::from_value::<ProviderError>(json!({"lost": "x"})).is_err());
    assert_eq!(
        to_value(&HttpError::TooLarge("big".into())),
        json!({"too-large": "big"})
    );
}

#[test]
fn answers_are_written_with_wit_names() {
    let m = InstanceMetadata {
        provider_id: "static://a".into(),
        addresses: vec![NodeAddress {
            kind: AddressType::InternalIp,
            address: "10.0.0.1".into(),
        }],
        additional_labels: vec![("example.com/rack".into(), "r1".into())],
        ..Default::default()
    };
    assert_eq!(
        to_value(&m),
        json!({
            "provider-id": "static://a", "instance-type": "", "zone": "", "region": "",
            "addresses": [{"kind": "internal-ip", "address": "10.0.0.1"}],
            "additional-labels": {"example.com/rack": "r1"},
        })
    );
    let ingress = vec![Ingress {
        ip: Some("192.0.2.1".into()),
        hostname: None,
        ip_mode: Some(IpMode::Proxy),
    }];
    assert_eq!(
        to_value(&Some(ingress)),
        json!([{"ip": "192.0.2.1", "hostname": null, "ip-mode": "proxy"}])
    );
}

#[test]
fn every_record_round_trips() {
    round_trip(Service {
        namespace: "default".into(),
        name: "web".into(),
        uid: "u1".into(),
        labels: vec![("app".into(), "web".into())],
        annotations: vec![("a/b".into(), "c".into())],
        ports: vec![ServicePort {
            name: "http".into(),
            protocol: Protocol::Sctp,
            port: 80,
            node_port: 30080,
        }],
        external_traffic_policy: TrafficPolicy::Local,
        health_check_node_port: 30999,
        load_balancer_ip: Some("192.0.2.9".into()),
        load_balancer_source_ranges: vec!["10.0.0.0/8".into()],
        session_affinity: SessionAffinity::ClientIp,
        session_affinity_timeout: Some(60),
        ip_families: vec![IpFamily::Ipv6],
        load_balancer_class: Some("example.com/lb".into()),
        ingress: vec![Ingress {
            ip: None,
            hostname: Some("lb.example.com".into()),
            ip_mode: None,
        }],
    });
    round_trip(Node {
        name: "n1".into(),
        uid: "u".into(),
        provider_id: "x://1".into(),
        labels: vec![("k".into(), "v".into())],
        annotations: Vec::new(),
        addresses: vec![NodeAddress {
            kind: AddressType::ExternalDns,
            address: "n1.example.com".into(),
        }],
        taints: vec![Taint {
            key: "k".into(),
            value: "v".into(),
            effect: "NoSchedule".into(),
        }],
        ready: false,
    });
    round_trip(NodeSet {
        generation: 7,
        count: 3,
    });
    round_trip(EnsureResult {
        ingress: vec![Ingress::default()],
        set_annotations: vec![("a/b".into(), "c".into())],
        remove_annotations: vec!["a/d".into()],
    });
    round_trip(Route {
        name: "r".into(),
        target_node: "n1".into(),
        target_node_addresses: vec![NodeAddress::default()],
        destination_cidr: "10.244.1.0/24".into(),
        blackhole: true,
    });
    round_trip(Context {
        cluster_name: "c".into(),
        cluster_id: "id".into(),
        kubernetes_version: "v1.33.0".into(),
    });
    round_trip(ProviderInfo {
        name: "static".into(),
        version: "0.1.0".into(),
        provider_id_scheme: "static".into(),
        default_egress: vec!["https://api.example.com".into()],
        env_prefixes: vec!["STATIC_".into()],
        annotation_prefixes: vec!["static.wasm-ccm.io/".into()],
        secrets: vec![SecretDecl {
            name: "client-secret".into(),
            at: vec![
                SecretLocation::Env("STATIC_SECRET".into()),
                SecretLocation::Ini(("Global".into(), "secret".into())),
                SecretLocation::Json("/clientSecret".into()),
            ],
            origin: SecretOrigin {
                settings: vec![SecretLocation::Json("/auth-url".into())],
                default_url: "https://auth.example.com".into(),
            },
            uses: vec![
                SecretUse::Bearer,
                SecretUse::Header("x-api-key".into()),
                SecretUse::Param("client_secret".into()),
                SecretUse::BasicUser,
                SecretUse::BasicPassword,
                SecretUse::CloudstackSignature,
                SecretUse::Oauth2Client(Oauth2Seal {
                    token_path: "/token".into(),
                    token_origins: vec![SecretOrigin::default()],
                }),
            ],
        }],
    });
    round_trip(AddressClaim {
        ip: "192.0.2.1".into(),
        service_uid: "u".into(),
        used_as: AddressUse::Ingress,
    });
    round_trip(Request {
        method: Method::Post,
        url: "https://api.example.com/v1".into(),
        headers: vec![("content-type".into(), "application/json".into())],
        body: b"{}".to_vec(),
        timeout_ms: Some(500),
    });
}

#[test]
fn bytes_are_numbers_or_text() {
    let r: Request = read(json!({"body": "hi"})).expect("text");
    assert_eq!(r.body, b"hi");
    let r: Request = read(json!({"body": [104, 105]})).expect("numbers");
    assert_eq!(r.body, b"hi");
    let e = read::<Request>(json!({"body": [300]})).unwrap_err();
    assert!(e.contains("input.body"), "{e}");
}
