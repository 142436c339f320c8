//! Round trip of every exported function of the reference (static) driver through the host.

mod common;

use std::sync::Arc;

use common::{load, node};
use wasm_ccm_drivers::STATIC_DRIVER;
use wasm_ccm_runtime::types::{
    AddressType, IpMode, NodeAddress, Protocol, ProviderError, Route, Service, ServicePort,
    SessionAffinity, TrafficPolicy,
};
use wasm_ccm_runtime::{CallError, CallScope, DriverOptions, EventKind, StaticCluster};
use wasm_ccm_runtime::{InitInput, http};

const CONFIG: &str = r#"
region: eu-1
zone: eu-1a
instances:
  - name: node-a
    id: a
    type: s1.medium
    addresses:
      - {type: InternalIP, address: 10.0.0.11}
      - {type: Hostname, address: node-a}
    labels: {example.com/rack: r1}
  - name: node-b
    id: b
    type: s1.large
    zone: eu-1b
    shutdown: true
    addresses: [{type: InternalIP, address: 10.0.0.12}]
loadBalancer:
  addresses: ["192.0.2.10", "192.0.2.11"]
routes:
  - {name: r1, targetNode: node-a, destinationCidr: 10.244.0.0/24}
"#;

const IP_ANNOTATION: &str = "static.wasm-ccm.io/load-balancer-ip";

fn opts() -> DriverOptions {
    DriverOptions {
        init: InitInput {
            config: CONFIG.as_bytes().to_vec(),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn service(name: &str, uid: &str) -> Service {
    Service {
        namespace: "default".into(),
        name: name.into(),
        uid: uid.into(),
        labels: vec![],
        annotations: vec![],
        ports: vec![ServicePort {
            name: "http".into(),
            protocol: Protocol::Tcp,
            port: 80,
            node_port: 30080,
        }],
        external_traffic_policy: TrafficPolicy::Cluster,
        health_check_node_port: 0,
        load_balancer_ip: None,
        load_balancer_source_ranges: vec![],
        session_affinity: SessionAffinity::None,
        session_affinity_timeout: None,
        ip_families: vec![],
        load_balancer_class: None,
        ingress: vec![],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_round_trip() {
    let d = load(STATIC_DRIVER, opts()).await;
    let s = CallScope::object("node");
    assert_eq!(d.info().name, "static");
    assert_eq!(d.info().provider_id_scheme, "static");
    assert_eq!(
        d.instance_exists(&node("node-a"), &s).await.result,
        Ok(true)
    );
    assert_eq!(
        d.instance_exists(&node("nope"), &s).await.result,
        Ok(false),
        "unknown is false, never an error"
    );
    assert_eq!(
        d.instance_shutdown(&node("node-a"), &s).await.result,
        Ok(false)
    );
    assert_eq!(
        d.instance_shutdown(&node("node-b"), &s).await.result,
        Ok(true)
    );

    let m = d
        .instance_metadata(&node("node-a"), &s)
        .await
        .result
        .expect("metadata");
    assert_eq!(m.provider_id, "static://a");
    assert_eq!(m.instance_type, "s1.medium");
    assert_eq!((m.zone.as_str(), m.region.as_str()), ("eu-1a", "eu-1"));
    assert_eq!(
        m.addresses,
        vec![
            NodeAddress {
                kind: AddressType::InternalIp,
                address: "10.0.0.11".into()
            },
            NodeAddress {
                kind: AddressType::Hostname,
                address: "node-a".into()
            }
        ]
    );
    assert_eq!(
        m.additional_labels,
        vec![("example.com/rack".to_string(), "r1".to_string())]
    );

    // Lookup by provider ID wins over the name.
    let mut by_id = node("renamed");
    by_id.provider_id = "static://b".into();
    let m = d
        .instance_metadata(&by_id, &s)
        .await
        .result
        .expect("by provider id");
    assert_eq!(
        (m.provider_id.as_str(), m.zone.as_str()),
        ("static://b", "eu-1b")
    );

    match d.instance_metadata(&node("nope"), &s).await.result {
        Err(CallError::Provider(ProviderError::NotFound(_))) => {}
        other => panic!("expected not-found, got {other:?}"),
    }
    d.housekeeping(&s).await.result.expect("housekeeping");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_balancer_round_trip() {
    let d = load(STATIC_DRIVER, opts()).await;
    let s = CallScope::object("default/web");
    let web = service("web", "11111111-2222-3333-4444-555555555555");
    assert_eq!(
        d.load_balancer_name(&web, &s).await.result.expect("name"),
        "a11111111222233334444555555555555"[..32].to_string()
    );
    assert_eq!(d.load_balancer_get(&web, &s).await.result, Ok(None));

    let nodes = vec![node("node-a")];
    let r = d
        .load_balancer_ensure(&web, &nodes, &s)
        .await
        .result
        .expect("ensure");
    assert_eq!(r.ingress.len(), 1);
    assert_eq!(r.ingress[0].ip.as_deref(), Some("192.0.2.10"));
    assert_eq!(r.ingress[0].ip_mode, Some(IpMode::Vip));
    assert_eq!(
        r.set_annotations,
        vec![(IP_ANNOTATION.to_string(), "192.0.2.10".to_string())]
    );

    // The state lives on the Service: with the annotation written back, ensure is stable and get sees it.
    let mut web2 = web.clone();
    web2.annotations = r.set_annotations.clone();
    web2.ingress = r.ingress.clone();
    let again = d.load_balancer_ensure(&web2, &nodes, &s).await;
    assert_eq!(
        again.result.as_ref().expect("ensure again").ingress,
        r.ingress
    );
    assert!(again.http.is_empty());
    assert_eq!(
        d.load_balancer_get(&web2, &s).await.result.expect("get"),
        Some(r.ingress.clone())
    );

    // Another Service gets the next free address, seeing the first through the cluster view.
    let with_web = CallScope {
        object: "default/api".into(),
        cluster: Arc::new(StaticCluster(vec![web2.clone()])),
    };
    let api = service("api", "66666666-7777-8888-9999-000000000000");
    let r2 = d
        .load_balancer_ensure(&api, &nodes, &with_web)
        .await
        .result
        .expect("ensure api");
    assert_eq!(r2.ingress[0].ip.as_deref(), Some("192.0.2.11"));

    // The pool is now exhausted for a third Service: an error and a Warning event.
    let mut api2 = api.clone();
    api2.annotations = r2.set_annotations.clone();
    let full = CallScope {
        object: "default/db".into(),
        cluster: Arc::new(StaticCluster(vec![web2.clone(), api2])),
    };
    let db = service("db", "99999999-0000-0000-0000-000000000000");
    let o = d.load_balancer_ensure(&db, &nodes, &full).await;
    assert!(
        matches!(
            o.result,
            Err(CallError::Provider(ProviderError::Permanent(_)))
        ),
        "{:?}",
        o.result
    );
    assert!(
        o.events
            .iter()
            .any(|e| e.kind == EventKind::Warning && e.reason == "AddressPoolExhausted"),
        "{:?}",
        o.events
    );

    // SCTP is refused as a configuration mistake.
    let mut sctp = service("sctp", "12121212-0000-0000-0000-000000000000");
    sctp.ports[0].protocol = Protocol::Sctp;
    assert!(matches!(
        d.load_balancer_ensure(&sctp, &nodes, &s).await.result,
        Err(CallError::Provider(ProviderError::InvalidConfig(_)))
    ));

    d.load_balancer_update(&web2, &[node("node-a"), node("node-b")], &s)
        .await
        .result
        .expect("update");
    d.load_balancer_delete(&web2, &s)
        .await
        .result
        .expect("delete");
    d.load_balancer_delete(&web2, &s)
        .await
        .result
        .expect("delete twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_and_configuration_errors() {
    let d = load(STATIC_DRIVER, opts()).await;
    let s = CallScope::default();
    let routes = d.routes_list(&s).await.result.expect("list");
    assert_eq!(routes.len(), 1);
    assert_eq!(
        (
            routes[0].target_node.as_str(),
            routes[0].destination_cidr.as_str()
        ),
        ("node-a", "10.244.0.0/24")
    );
    let r = Route {
        name: String::new(),
        target_node: "node-b".into(),
        target_node_addresses: vec![],
        destination_cidr: "10.244.1.0/24".into(),
        blackhole: false,
    };
    match d.routes_create("uid-b", &r, &s).await.result {
        Err(CallError::Provider(ProviderError::InvalidConfig(m))) => {
            assert!(m.contains("inventoryUrl"), "{m}")
        }
        other => panic!("expected invalid-config, got {other:?}"),
    }

    // A bad configuration is refused at load with the path of the mistake.
    let bad = DriverOptions {
init: InitInput {
config: b"instances:\n  - name: x\n    id: x\n    addresses: [{type: Foo, address: 1.2.3.4}]\n"
                .to_vec(),
..Default::default()
},
..Default::default()
};
    let compiled = common::compile(STATIC_DRIVER).await;
    let err = common::runtime()
        .load(&compiled, bad)
        .await
        .err()
        .expect("refused");
    let text = err.to_string();
    assert!(text.contains("instances[0].addresses[0]"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_json_calls_use_wit_names() {
    let d = load(STATIC_DRIVER, opts()).await;
    let s = CallScope::default();
    let v = d
        .call_json(
            "instances.instance-metadata",
            serde_json::json!({"name": "node-a"}),
            &s,
        )
        .await
        .result
        .expect("json call");
    assert_eq!(v["provider-id"], "static://a");
    assert_eq!(v["addresses"][0]["kind"], "internal-ip");
    assert_eq!(v["additional-labels"]["example.com/rack"], "r1");
    let e = d
        .call_json(
            "instances.instance-metadata",
            serde_json::json!({"nmae": "x"}),
            &s,
        )
        .await
        .result
        .expect_err("typo");
    assert!(e.to_string().contains("unknown field `nmae`"), "{e}");
    let e = d
        .call_json("zones.get", serde_json::json!(null), &s)
        .await
        .result
        .expect_err("no such interface");
    assert!(e.to_string().contains("no interface `zones`"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inventory_mode_reads_instances_and_keeps_routes_over_http() {
    let inv = common::inventory(serde_json::json!([
        {"name": "node-x", "id": "x", "type": "m1", "zone": "z", "region": "r", "addresses": [{"type": "InternalIP", "address": "10.1.0.1"}]}
    ]))
    .await;
    let base = format!("http://127.0.0.1:{}", inv.port);
    let opts = DriverOptions {
        init: InitInput {
            config: format!("inventoryUrl: {base}\n").into_bytes(),
            env: vec![(
                "STATIC_INVENTORY_TOKEN".into(),
                "inventory-token-1234".into(),
            )],
            ..Default::default()
        },
        http: http::Config {
            egress: Some(
                wasm_ccm_runtime::EgressPolicy::parse(std::slice::from_ref(&base))
                    .expect("egress grants"),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    let d = load(STATIC_DRIVER, opts).await;
    let s = CallScope::default();
    let m = d.instance_metadata(&node("node-x"), &s).await;
    assert_eq!(m.result.expect("metadata").provider_id, "static://x");
    assert_eq!(m.http.len(), 1, "one request per call: {:?}", m.http);
    assert_eq!(d.instance_exists(&node("gone"), &s).await.result, Ok(false));

    let r = Route {
        name: String::new(),
        target_node: "node-x".into(),
        target_node_addresses: vec![],
        destination_cidr: "10.244.7.0/24".into(),
        blackhole: false,
    };
    let created = d.routes_create("uid-x", &r, &s).await;
    created.result.expect("create");
    assert!(
        created
            .http
            .iter()
            .all(|h| h.mutating && h.status == Some(200)),
        "{:?}",
        created.http
    );
    let listed = d.routes_list(&s).await.result.expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].name.as_str(), listed[0].destination_cidr.as_str()),
        ("uid-x", "10.244.7.0/24")
    );
    d.routes_delete(&listed[0], &s)
        .await
        .result
        .expect("delete");
    d.routes_delete(&listed[0], &s)
        .await
        .result
        .expect("deleting a deleted route succeeds");
    assert!(inv.routes.lock().expect("routes").is_empty());
    // The token from the environment authenticates every request.
    let log = inv.requests.lock().expect("log").clone();
    assert!(
        log.iter()
            .all(|l| l.ends_with("Bearer inventory-token-1234")),
        "{log:?}"
    );
}

/// What one ensure copies into the guest: the Service, the node-set record and, for a generation
/// the instance has not seen, the nodes.
async fn lowered_by(
    d: &wasm_ccm_runtime::Driver,
    svc: &Service,
    nodes: &wasm_ccm_runtime::SharedNodes,
) -> u64 {
    let before = d.lowered_bytes();
    d.load_balancer_ensure_shared(svc, nodes, &CallScope::object("default/web"))
        .await
        .result
        .expect("ensure");
    d.lowered_bytes() - before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_set_is_copied_into_an_instance_once_per_generation() {
    let d = load(STATIC_DRIVER, opts()).await;
    let web = service("web", "11111111-2222-3333-4444-555555555555");
    let many: Vec<_> = (0..200).map(|i| node(&format!("node-{i:03}"))).collect();
    let set = wasm_ccm_runtime::SharedNodes::new(many.clone());
    let first = lowered_by(&d, &web, &set).await;
    let second = lowered_by(&d, &web, &set).await;
    // Calls run one after the other, so the warm instance is reused: the second ensure of the
    // same generation copies no node, the first copied 200.
    assert!(
        second * 10 < first,
        "the same generation was copied again: {first} then {second} bytes"
    );
    // `update` with that generation copies nothing either.
    let before = d.lowered_bytes();
    d.load_balancer_update_shared(&web, &set, &CallScope::object("default/web"))
        .await
        .result
        .expect("update");
    assert!(d.lowered_bytes() - before <= second);
    // Equal content under a new generation is fetched again: a generation, not a guess, decides.
    let renewed = wasm_ccm_runtime::SharedNodes::new(many);
    assert_ne!(renewed.generation(), set.generation());
    assert_eq!(lowered_by(&d, &web, &renewed).await, first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_ensure_takes_the_nodes_themselves() {
    let d = load(STATIC_DRIVER, opts()).await;
    let s = CallScope::default();
    let svc = serde_json::json!({"namespace": "default", "name": "web", "uid": "u-1",
        "ports": [{"name": "http", "protocol": "tcp", "port": 80, "node-port": 30080}]});
    let v = d
        .call_json(
            "load-balancer.ensure",
            serde_json::json!({"service": svc, "nodes": [{"name": "node-a"}]}),
            &s,
        )
        .await
        .result
        .expect("ensure by JSON");
    assert_eq!(v["ingress"][0]["ip"], "192.0.2.10");
    let e = d
        .call_json(
            "load-balancer.update",
            serde_json::json!([svc, [{"name": "node-a", "colour": "red"}]]),
            &s,
        )
        .await
        .result
        .expect_err("a node with an unknown field");
    assert!(e.to_string().contains("nodes[0]"), "{e}");
    let e = d
        .call_json(
            "load-balancer.ensure",
            serde_json::json!({"service": svc, "nodes": "node-a"}),
            &s,
        )
        .await
        .result
        .expect_err("nodes not a list");
    assert!(e.to_string().contains("array of nodes"), "{e}");
}
