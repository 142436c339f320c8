//! End to end: the real `wasm-ccm run` against the Kubernetes API simulator with the hostile-lb
//! test driver, whose answers break every rule of what may be written to Kubernetes. Each test
//! reads the objects back and checks that nothing invalid was written, that a Warning event names
//! the driver and the rule, that user annotations survive, that nodes of another provider are
//! left alone, and that a converged cluster restarts without a single write. Every wait polls
//! with a bound.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::{Duration, Instant};

mod common;

use common::*;
use serde_json::{Value, json};
use wasm_ccm_sim::kube::{KubeSim, Verb};

const DRIVER: &str = "hostile-lb";
const REFUSED: &str = "DriverAnswerRefused";

fn start(sim: &KubeSim, port: Option<u16>) -> Ccm {
    let port = port.map(|p| p.to_string());
    let mut extra = vec!["--leader-elect=false", "--configure-cloud-routes=false"];
    if let Some(p) = &port {
        extra.extend(["--secure-port", p, "--bind-address", "127.0.0.1"]);
    }
    Ccm::start(
        sim,
        wasm_ccm_drivers::HOSTILE_LB_DRIVER,
        DRIVER,
        &Value::Null,
        &extra,
    )
}

fn lb_service(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
    })
}

fn get_node(sim: &KubeSim, name: &str) -> Value {
    sim.get("nodes", None, name)
        .unwrap_or_else(|| panic!("node {name}"))
}

/// The notes of the refusal events on `object`.
fn refusals(sim: &KubeSim, object: &str) -> Vec<String> {
    events(sim, object, REFUSED)
        .iter()
        .filter(|e| e["type"] == "Warning")
        .filter_map(|e| e["note"].as_str().map(str::to_string))
        .collect()
}

/// Waits for a refusal event on `object` naming the driver and every rule in `rules`.
async fn refused(sim: &KubeSim, object: &str, rules: &[&str]) {
    eventually(&format!("{object}: {REFUSED} naming {rules:?}"), || {
        refusals(sim, object).iter().any(|note| {
            let summary = note.split_once("): ").map_or("", |(s, _)| s);
            note.starts_with(&format!("driver \"{DRIVER}\""))
                && rules.iter().all(|r| summary.contains(r))
        })
    })
    .await;
}

fn addresses(node: &Value) -> Vec<(String, String)> {
    node["status"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            (
                a["type"].as_str().unwrap_or_default().to_string(),
                a["address"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn labels(node: &Value) -> serde_json::Map<String, Value> {
    node["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// Checks what `events.k8s.io` validation requires of every event (`legacyValidateEvent`).
fn assert_valid_events(sim: &KubeSim) {
    for e in sim.list("events.events.k8s.io") {
        let reason = e["reason"].as_str().unwrap_or_default();
        let note = e["note"].as_str().unwrap_or_default();
        let action = e["action"].as_str().unwrap_or_default();
        assert!(
            !reason.is_empty() && reason.len() <= 128,
            "reason {reason:?}"
        );
        assert!(
            !action.is_empty() && action.len() <= 128,
            "action {action:?}"
        );
        assert!(note.len() <= 1024, "note of {} bytes: {e}", note.len());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_node_answers_are_refused_and_nothing_invalid_is_written() {
    let sim = KubeSim::start(localhost()).await.expect("sim");
    for n in [
        "ok-1",
        "bad-scheme",
        "bad-addresses",
        "bad-labels",
        "bad-event",
    ] {
        sim.create(node(n, None, true)).expect("node");
    }
    // The kubelet set a provider ID of the driver's scheme; the driver answers another one.
    let mut change = node("change-id", None, true);
    change["spec"]["providerID"] = json!("hostile-lb://change-id");
    sim.create(change).expect("node");
    let port = free_port();
    let _ccm = start(&sim, Some(port));

    eventually("ok-1 initialised", || initialised(&sim, "ok-1")).await;
    assert_eq!(
        get_node(&sim, "ok-1")["spec"]["providerID"],
        "hostile-lb://ok-1"
    );
    // Created only now, so the cache already knows ok-1's provider ID.
    sim.create(node("steal", None, true)).expect("node");

    // Whole answers refused: no provider ID, the taint stays, the event says why.
    refused(&sim, "bad-scheme", &["provider-id-scheme"]).await;
    refused(&sim, "steal", &["provider-id-taken"]).await;
    refused(&sim, "change-id", &["provider-id-changed"]).await;
    for (name, id) in [
        ("bad-scheme", Value::Null),
        ("steal", Value::Null),
        ("change-id", json!("hostile-lb://change-id")),
    ] {
        // The refusal event is recorded before the failed sync's own event: wait for both.
        eventually(&format!("{name}: FailedToInitializeNode"), || {
            events(&sim, name, "FailedToInitializeNode")
                .iter()
                .any(|e| e["note"].as_str().is_some_and(|m| m.contains("refused")))
        })
        .await;
        let n = get_node(&sim, name);
        assert!(has_taint(&n, UNINITIALIZED), "{name} keeps its taint");
        assert_eq!(n["spec"]["providerID"], id, "{name}'s provider ID");
    }
    let providers: Vec<String> = sim
        .list("nodes")
        .iter()
        .filter_map(|n| n["spec"]["providerID"].as_str().map(str::to_string))
        .collect();
    let unique: BTreeSet<&String> = providers.iter().collect();
    assert_eq!(
        unique.len(),
        providers.len(),
        "provider IDs are unique: {providers:?}"
    );

    // Bad addresses dropped, duplicates removed, at most 32 from the driver (+ the kubelet's
    // hostname); the node is initialised with what is valid.
    eventually("bad-addresses initialised", || {
        initialised(&sim, "bad-addresses")
    })
    .await;
    refused(
        &sim,
        "bad-addresses",
        &["address-invalid", "address-duplicate", "address-count"],
    )
    .await;
    eventually("bad-addresses has addresses", || {
        addresses(&get_node(&sim, "bad-addresses")).len() > 1
    })
    .await;
    let written = addresses(&get_node(&sim, "bad-addresses"));
    assert_eq!(written.len(), 33, "{written:?}");
    assert_eq!(written[0], ("InternalIP".into(), "10.0.0.5".into()));
    assert_eq!(
        written[1],
        ("InternalDNS".into(), "node-1.example.com".into())
    );
    assert_eq!(
        written[32],
        ("Hostname".into(), "bad-addresses.kubelet".into())
    );
    let distinct: BTreeSet<&(String, String)> = written.iter().collect();
    assert_eq!(distinct.len(), written.len(), "no duplicates: {written:?}");
    for (kind, address) in &written {
        if kind.ends_with("IP") {
            assert!(address.parse::<IpAddr>().is_ok(), "{kind} {address}");
        }
    }

    // Labels: invalid values and keys, reserved namespaces in any case, and beyond 64 dropped.
    eventually("bad-labels initialised", || initialised(&sim, "bad-labels")).await;
    refused(
        &sim,
        "bad-labels",
        &["label-value", "label-key", "label-reserved", "label-count"],
    )
    .await;
    let l = labels(&get_node(&sim, "bad-labels"));
    for absent in [
        "node.kubernetes.io/instance-type",
        "beta.kubernetes.io/instance-type",
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/zone",
        "bad key!",
        "KUBERNETES.IO/shout",
        "Node.Kubernetes.Io/sneaky",
        "example.com/big",
    ] {
        assert!(!l.contains_key(absent), "{absent} written: {l:?}");
    }
    assert_eq!(l["topology.kubernetes.io/region"], "r1");
    assert_eq!(l["example.com/ok"], "yes");
    let extra = l.keys().filter(|k| k.starts_with("example.com/l")).count();
    assert_eq!(extra, 63, "64 additional labels in all");
    for (k, v) in &l {
        let v = v.as_str().unwrap_or_default();
        assert!(v.len() <= 63, "{k}={v}");
    }

    // A driver event with an invalid reason and a 3,000-byte note is recorded valid.
    eventually("bad-event's driver event", || {
        !events(&sim, "bad-event", "DriverEvent").is_empty()
    })
    .await;
    let e = &events(&sim, "bad-event", "DriverEvent")[0];
    let note = e["note"].as_str().expect("note");
    assert!(
        note.starts_with("(the driver's reason \"bad reason!\""),
        "{note}"
    );
    assert!(
        note.len() <= 1024 && note.len() > 1000,
        "{} bytes",
        note.len()
    );
    assert!(events(&sim, "bad-event", "bad reason!").is_empty());
    assert_valid_events(&sim);

    let text = scrape(port).await;
    for rule in [
        "provider-id-scheme",
        "provider-id-taken",
        "provider-id-changed",
        "address-invalid",
        "label-reserved",
        "event-reason",
    ] {
        let series = format!("wasm_ccm_driver_answers_refused_total{{rule=\"{rule}\"}}");
        assert!(
            metric(&text, &series).is_some_and(|v| v >= 1.0),
            "{series} missing:\n{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_load_balancer_answers_are_refused_and_user_annotations_survive() {
    let sim = KubeSim::start(localhost()).await.expect("sim");
    sim.create(node("n1", None, true)).expect("node");
    let mut annotated = lb_service("svc-annotations");
    annotated["metadata"]["annotations"] = json!({
        "owner.example/keep-me": "yes",
        "kubectl.kubernetes.io/last-applied-configuration": "{\"user\":true}",
        "hostile-lb.example/stale": "old",
    });
    sim.create(annotated).expect("svc");
    for s in ["svc-bad-ingress", "svc-many-ingress", "svc-bad-event"] {
        sim.create(lb_service(s)).expect("svc");
    }
    let _ccm = start(&sim, None);

    refused(
        &sim,
        "svc-annotations",
        &[
            "annotation-reserved",
            "annotation-not-declared",
            "annotation-key",
            "annotation-budget",
        ],
    )
    .await;
    eventually("svc-annotations ensured", || {
        service(&sim, "svc-annotations").is_some_and(|s| {
            ingress_ip(&s).is_some()
                && s["metadata"]["annotations"]["hostile-lb.example/ok"] == "yes"
        })
    })
    .await;
    let svc = service(&sim, "svc-annotations").expect("svc");
    let a = svc["metadata"]["annotations"]
        .as_object()
        .expect("annotations");
    assert_eq!(
        a["owner.example/keep-me"], "yes",
        "the user's annotation survives"
    );
    assert_eq!(
        a["kubectl.kubernetes.io/last-applied-configuration"], "{\"user\":true}",
        "kubectl's annotation is untouched"
    );
    assert!(
        !a.contains_key("hostile-lb.example/stale"),
        "declared removal done"
    );
    assert_eq!(a["service.beta.kubernetes.io/hostile-lb-type"], "declared");
    assert_eq!(
        a["hostile-lb.example/big-1"].as_str().map(str::len),
        Some(40 * 1024)
    );
    for absent in [
        "hostile-lb.example/big-2",
        "service.beta.kubernetes.io/aws-load-balancer-type",
        "bad key!",
    ] {
        assert!(!a.contains_key(absent), "{absent} written");
    }
    assert_eq!(
        svc["status"]["loadBalancer"]["ingress"],
        json!([{"ip": "192.0.2.10", "ipMode": "VIP"}]),
        "written as the apiserver stores it"
    );

    // Invalid ingress entries dropped, valid ones written.
    refused(&sim, "svc-bad-ingress", &["ingress-invalid"]).await;
    eventually("svc-bad-ingress ensured", || {
        service(&sim, "svc-bad-ingress").is_some_and(|s| ingress_ip(&s).is_some())
    })
    .await;
    assert_eq!(
        service(&sim, "svc-bad-ingress").expect("svc")["status"]["loadBalancer"]["ingress"],
        json!([
            {"ip": "192.0.2.20", "ipMode": "VIP"},
            {"hostname": "ok.example.com"},
        ])
    );
    let note = &refusals(&sim, "svc-bad-ingress")[0];
    for fragment in [
        "not-an-ip",
        "neither an ip nor a hostname",
        "not an IP",
        "ipMode",
    ] {
        assert!(note.contains(fragment), "{fragment} in {note}");
    }

    // At most 16 entries.
    refused(&sim, "svc-many-ingress", &["ingress-count"]).await;
    eventually("svc-many-ingress ensured", || {
        service(&sim, "svc-many-ingress").is_some_and(|s| ingress_ip(&s).is_some())
    })
    .await;
    let many = service(&sim, "svc-many-ingress").expect("svc");
    let ingress = many["status"]["loadBalancer"]["ingress"]
        .as_array()
        .expect("ingress");
    assert_eq!(ingress.len(), 16);
    assert_eq!(ingress[15]["ip"], "192.0.2.115");

    // The driver's own event, made valid.
    eventually("svc-bad-event's driver event", || {
        !events(&sim, "svc-bad-event", "DriverEvent").is_empty()
    })
    .await;
    assert_valid_events(&sim);

    // A resync with the same answers repeats no refusal event: a port change re-ensures.
    let before = refusals(&sim, "svc-annotations").len();
    sim.modify("services", Some("default"), "svc-annotations", |s| {
        s["spec"]["ports"][0]["port"] = json!(8080);
    })
    .expect("port");
    eventually("re-ensured", || {
        events(&sim, "svc-annotations", "EnsuredLoadBalancer")
            .iter()
            .map(|e| e["series"]["count"].as_u64().unwrap_or(1))
            .sum::<u64>()
            > 1
    })
    .await;
    assert_eq!(refusals(&sim, "svc-annotations").len(), before);
    assert!(
        events(&sim, "svc-annotations", REFUSED)
            .iter()
            .all(|e| e["series"].is_null()),
        "no repeated refusal event"
    );
    let a = service(&sim, "svc-annotations").expect("svc")["metadata"]["annotations"].clone();
    assert_eq!(a["owner.example/keep-me"], "yes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_nodes_are_never_deleted_tainted_or_initialised() {
    let sim = KubeSim::start(localhost()).await.expect("sim");
    let initialised_node = |name: &str, provider_id: &str, ready: bool| {
        let mut n = node(name, None, ready);
        n["spec"] = json!({"providerID": provider_id});
        n
    };
    for n in [
        // Another provider's nodes: the driver says the first is gone and the second shut down.
        initialised_node("victim-foreign", "aws:///us-east-1a/i-0victim", false),
        initialised_node("sleepy-foreign", "gce://project/zone/sleepy", false),
        initialised_node("ready-foreign", "aws:///us-east-1a/i-0ready", true),
        // The driver's own, as controls: deleted and tainted.
        initialised_node("gone-ours", "hostile-lb://gone-ours", false),
        initialised_node("sleepy-ours", "hostile-lb://sleepy-ours", false),
    ] {
        sim.create(n).expect("node");
    }
    // Registered by a kubelet with another provider's ID: never initialised by this driver.
    let mut uninit = node("uninit-foreign", None, true);
    uninit["spec"]["providerID"] = json!("aws:///us-east-1a/i-0uninit");
    sim.create(uninit).expect("node");
    let _ccm = start(&sim, None);

    eventually("gone-ours deleted", || {
        sim.get("nodes", None, "gone-ours").is_none()
    })
    .await;
    eventually("sleepy-ours tainted", || {
        has_taint(&get_node(&sim, "sleepy-ours"), SHUTDOWN)
    })
    .await;
    // Two more controls, one after the other: passes are sequential, so when the second is gone
    // the pass that removed the first has visited every node.
    for control in ["gone-later-1", "gone-later-2"] {
        sim.create(initialised_node(
            control,
            &format!("hostile-lb://{control}"),
            false,
        ))
        .expect("node");
        eventually(&format!("{control} deleted"), || {
            sim.get("nodes", None, control).is_none()
        })
        .await;
    }

    let victim = get_node(&sim, "victim-foreign");
    assert_eq!(victim["spec"]["providerID"], "aws:///us-east-1a/i-0victim");
    assert!(events(&sim, "victim-foreign", "DeletingNode").is_empty());
    assert!(!has_taint(&get_node(&sim, "sleepy-foreign"), SHUTDOWN));
    let uninit = get_node(&sim, "uninit-foreign");
    assert!(has_taint(&uninit, UNINITIALIZED), "not initialised");
    assert_eq!(uninit["spec"]["providerID"], "aws:///us-east-1a/i-0uninit");
    assert!(
        refusals(&sim, "uninit-foreign").is_empty(),
        "not even asked"
    );

    // One event per foreign node that needed attention, not one per pass.
    for name in ["victim-foreign", "sleepy-foreign", "uninit-foreign"] {
        let found = events(&sim, name, "ForeignProviderID");
        assert_eq!(found.len(), 1, "{name}: {found:?}");
        assert!(found[0]["series"].is_null(), "{name} repeated: {found:?}");
        let note = found[0]["note"].as_str().unwrap_or_default();
        assert!(note.contains("hostile-lb://"), "{note}");
    }
    assert!(events(&sim, "ready-foreign", "ForeignProviderID").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converged_cluster_restarts_with_zero_writes_and_names_itself() {
    let sim = KubeSim::start(localhost()).await.expect("sim");
    for n in ["n1", "n2"] {
        sim.create(node(n, None, true)).expect("node");
    }
    let mut good = lb_service("svc-good");
    good["metadata"]["annotations"] = json!({"owner.example/keep-me": "yes"});
    sim.create(good).expect("svc");
    sim.create(lb_service("svc-plain")).expect("svc");
    {
        let _first = start(&sim, None);
        eventually("converged", || {
            ["n1", "n2"]
                .iter()
                .all(|n| initialised(&sim, n) && addresses(&get_node(&sim, n)).len() == 2)
                && ["svc-good", "svc-plain"].iter().all(|s| {
                    service(&sim, s).is_some_and(|s| {
                        has_finalizer(&s)
                            && ingress_ip(&s).is_some()
                            && !events(
                                &sim,
                                s["metadata"]["name"].as_str().unwrap_or(""),
                                "EnsuredLoadBalancer",
                            )
                            .is_empty()
                    })
                })
                && service(&sim, "svc-good").is_some_and(|s| {
                    s["metadata"]["annotations"]["hostile-lb.example/id"] == "svc-good"
                })
        })
        .await;
    }
    // An apiserver older than 1.30 stores no ipMode: that is converged too.
    sim.modify("services", Some("default"), "svc-plain", |s| {
        s["status"]["loadBalancer"]["ingress"] = json!([{"ip": "192.0.2.10"}]);
    })
    .expect("status");
    sim.clear_requests();

    let port = free_port();
    let _second = start(&sim, Some(port));
    // Both Services re-ensured and both nodes' addresses refreshed by the driver…
    let started = Instant::now();
    loop {
        let text = scrape(port).await;
        let calls = |function: &str| {
            metric(
                &text,
                &format!(
                    "wasm_ccm_driver_calls_total{{driver=\"{DRIVER}\",function=\"{function}\",result=\"ok\"}}"
                ),
            )
            .unwrap_or(0.0)
        };
        if calls("load-balancer.ensure") >= 2.0 && calls("instances.instance-metadata") >= 2.0 {
            break;
        }
        assert!(
            started.elapsed() < WAIT,
            "no re-ensure after the restart:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // …then a marker: the one service worker reaches it only after the others were written.
    sim.create(lb_service("svc-marker")).expect("svc");
    eventually("marker ensured", || {
        service(&sim, "svc-marker").is_some_and(|s| ingress_ip(&s).is_some())
    })
    .await;

    let requests = sim.requests();
    let writes: Vec<String> = requests
        .iter()
        .filter(|r| {
            matches!(
                r.verb,
                Some(Verb::Create | Verb::Update | Verb::Patch | Verb::Delete)
            )
        })
        .filter(|r| {
            let marker = r.name.as_deref() == Some("svc-marker")
                || r.body.as_deref().is_some_and(|b| b.contains("svc-marker"));
            !marker
        })
        .map(|r| format!("{} {} {:?}", r.method, r.path, r.body))
        .collect();
    assert!(
        writes.is_empty(),
        "a converged cluster was written to: {writes:#?}"
    );

    // Every request names the program and, once it is loaded, the driver.
    let version = env!("CARGO_PKG_VERSION");
    let full = format!("wasm-ccm/{version} ({DRIVER}/{version})");
    assert!(!requests.is_empty());
    for r in &requests {
        let agent = r.user_agent.as_deref().unwrap_or_default();
        assert!(
            agent.starts_with(&format!("wasm-ccm/{version}")),
            "{} {}: {agent:?}",
            r.method,
            r.path
        );
        // Only the cluster facts `init` needs are read before the driver is loaded.
        let before_load = r.path == "/version" || r.resource.as_deref() == Some("namespaces");
        if !before_load {
            assert_eq!(agent, full, "{} {}", r.method, r.path);
        }
    }
}
