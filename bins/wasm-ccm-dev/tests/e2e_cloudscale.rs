//! End to end with the cloudscale driver: the real `wasm-ccm run` binary, the real
//! `cloudscale_driver.wasm`, the Kubernetes API simulator and the cloudscale API simulator.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use wasm_ccm_sim::cloudscale::{CloudscaleOptions, CloudscaleSim, SeedServer};
use wasm_ccm_sim::kit::SimCloud as _;
use wasm_ccm_sim::kube::KubeSim;

const SUBNET: &str = "5c0ffee0-1111-4222-8333-944445555666";
const P: &str = "k8s.cloudscale.ch/";

fn worker(name: &str, last_octet: u8) -> SeedServer {
    SeedServer::new(name)
        .public(&[&format!("5.102.148.{last_octet}")])
        .private(SUBNET, "10.1.1.0/24", &[&format!("10.1.1.{last_octet}")])
}

async fn start() -> (KubeSim, CloudscaleSim, Ccm, Vec<String>) {
    let sim = KubeSim::start(localhost()).await.expect("kube sim");
    // The load balancer provisions for a second: the first ensure returns retry-after and the
    // host must come back on its own.
    let cloud = CloudscaleSim::start(
        localhost(),
        CloudscaleOptions {
            lb_ready_after: Duration::from_secs(1),
            ..Default::default()
        },
    )
    .await
    .expect("cloudscale sim");
    let uuids = vec![
        cloud.add_server(worker("worker-1", 11)),
        cloud.add_server(worker("worker-2", 12)),
    ];
    for name in ["worker-1", "worker-2"] {
        sim.create(node(name, None, true)).expect("node");
    }
    let ccm = Ccm::start_setup(&sim, &cloud.driver_setup(), &[]);
    (sim, cloud, ccm, uuids)
}

fn annotation(svc: &Value, key: &str) -> Option<String> {
    svc["metadata"]["annotations"][format!("{P}{key}")]
        .as_str()
        .map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_and_load_balancers_through_the_controllers() {
    let (sim, cloud, _ccm, uuids) = start().await;

    // Nodes: provider ID, labels and addresses from the servers, as the upstream CCM sets them.
    eventually("nodes initialised", || {
        initialised(&sim, "worker-1") && initialised(&sim, "worker-2")
    })
    .await;
    let worker_1_addresses = json!([
        {"type": "Hostname", "address": "worker-1"},
        {"type": "ExternalIP", "address": "5.102.148.11"},
        {"type": "InternalIP", "address": "10.1.1.11"},
    ]);
    addresses_become(&sim, "worker-1", &worker_1_addresses).await;
    let n = sim.get("nodes", None, "worker-1").expect("node");
    assert_eq!(
        n["spec"]["providerID"],
        format!("cloudscale://{}", uuids[0])
    );
    let labels = &n["metadata"]["labels"];
    assert_eq!(labels["node.kubernetes.io/instance-type"], "flex-4-2");
    assert_eq!(labels["topology.kubernetes.io/zone"], "rma1");
    assert_eq!(labels["topology.kubernetes.io/region"], "rma");
    assert_eq!(n["status"]["addresses"], worker_1_addresses);

    // A Service gets a load balancer: retry-after while it provisions, then the status, the
    // written-back annotations and the finalizer.
    sim.create(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default",
                     "annotations": {format!("{P}loadbalancer-timeout-member-data-ms"): "40000"}},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
    }))
    .expect("service");
    eventually("load balancer status", || {
        service(&sim, "web").is_some_and(|s| ingress_ip(&s).is_some() && has_finalizer(&s))
    })
    .await;
    let svc = service(&sim, "web").expect("service");
    let lbs = cloud.load_balancers();
    assert_eq!(
        lbs.len(),
        1,
        "provisioning did not create a second load balancer"
    );
    assert_eq!(
        annotation(&svc, "loadbalancer-uuid").as_deref(),
        lbs[0]["uuid"].as_str()
    );
    assert_eq!(
        annotation(&svc, "loadbalancer-config-version").as_deref(),
        Some("1")
    );
    assert_eq!(
        annotation(&svc, "loadbalancer-zone").as_deref(),
        Some("rma1")
    );
    let ingress = svc["status"]["loadBalancer"]["ingress"]
        .as_array()
        .expect("ingress")
        .clone();
    let vips: Vec<&Value> = lbs[0]["vip_addresses"]
        .as_array()
        .expect("vips")
        .iter()
        .map(|v| &v["address"])
        .collect();
    assert_eq!(ingress.iter().map(|i| &i["ip"]).collect::<Vec<_>>(), vips);
    assert!(
        ingress.iter().all(|i| i["ipMode"] == "Proxy"),
        "{ingress:?}"
    );
    let node_port = svc["spec"]["ports"][0]["nodePort"]
        .as_u64()
        .expect("node port");
    let mut members: Vec<String> = cloud
        .members()
        .iter()
        .map(|m| m["name"].as_str().unwrap_or_default().to_string())
        .collect();
    members.sort();
    assert_eq!(
        members,
        [
            format!("10.1.1.11:{node_port}"),
            format!("10.1.1.12:{node_port}")
        ]
    );
    assert_eq!(cloud.listeners()[0]["timeout_member_data_ms"], 40000);
    assert_eq!(events(&sim, "web", "EnsuredLoadBalancer").len(), 1);
    // Provisioning (retry-after) is progress, not a failure: no Warning event for it.
    assert!(events(&sim, "web", "SyncLoadBalancerFailed").is_empty());

    // An annotation change is an in-place PATCH, nothing recreated.
    let pool = cloud.pools()[0]["uuid"].clone();
    cloud.clear_requests();
    sim.modify("services", Some("default"), "web", |s| {
        s["metadata"]["annotations"][format!("{P}loadbalancer-timeout-member-data-ms")] =
            json!("60000");
    })
    .expect("annotate");
    eventually("listener patched", || {
        cloud.listeners()[0]["timeout_member_data_ms"] == 60000
    })
    .await;
    assert_eq!(cloud.pools()[0]["uuid"], pool);
    let writes: Vec<String> = cloud.mutations().iter().map(|r| r.method.clone()).collect();
    assert_eq!(writes, ["PATCH"]);

    // A new node becomes a member once initialised (the update path).
    cloud.add_server(worker("worker-3", 13));
    sim.create(node("worker-3", None, true)).expect("node");
    eventually("third member", || cloud.members().len() == 3).await;

    // Lifecycle: a stopped server taints its NotReady node; a deleted one deletes the node.
    cloud.set_server_status(&uuids[1], "stopped");
    set_ready(&sim, "worker-2", false);
    eventually("shutdown taint", || {
        sim.get("nodes", None, "worker-2")
            .is_some_and(|n| has_taint(&n, SHUTDOWN))
    })
    .await;
    cloud.remove_server(&uuids[1]);
    eventually("node deleted", || {
        sim.get("nodes", None, "worker-2").is_none()
    })
    .await;
    eventually("member of the deleted node removed", || {
        cloud.members().len() == 2
    })
    .await;

    // Deleting the Service deletes the load balancer and everything in it, then the finalizer.
    sim.remove("services", Some("default"), "web")
        .expect("delete service");
    eventually("service gone", || service(&sim, "web").is_none()).await;
    assert!(cloud.load_balancers().is_empty());
    assert!(cloud.pools().is_empty() && cloud.members().is_empty() && cloud.listeners().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_change_is_a_warning_event_and_changes_nothing() {
    let (sim, cloud, _ccm, _) = start().await;
    cloud.settle();
    sim.create(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]},
    }))
    .expect("service");
    eventually("load balancer status", || {
        service(&sim, "web").is_some_and(|s| ingress_ip(&s).is_some())
    })
    .await;
    cloud.clear_requests();
    sim.modify("services", Some("default"), "web", |s| {
        s["metadata"]["annotations"][format!("{P}loadbalancer-flavor")] = json!("lb-large");
    })
    .expect("annotate");
    eventually("warning event", || {
        events(&sim, "web", "SyncLoadBalancerFailed")
            .iter()
            .any(|e| {
                e["note"]
                    .as_str()
                    .is_some_and(|n| n.contains("flavor") && n.contains("re-create"))
            })
    })
    .await;
    assert!(cloud.mutations().is_empty(), "{:?}", cloud.mutations());
    assert_eq!(cloud.load_balancers()[0]["flavor"]["slug"], "lb-standard");
}

const SHADOW: [&str; 6] = [
    "--shadow",
    "--shadow-grace",
    "0s",
    "--leader-elect=false",
    "--node-status-update-frequency",
    "1s",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_beside_a_converged_cluster_agrees_and_reports_each_seeded_divergence_once() {
    let (sim, cloud, ccm, uuids) = start().await;
    eventually("nodes initialised", || {
        initialised(&sim, "worker-1") && initialised(&sim, "worker-2")
    })
    .await;
    // worker-2 serves no load balancer, so its server going away (seeded below) touches only
    // the node lifecycle and each seeded divergence stays alone in its object.
    sim.modify("nodes", None, "worker-2", |n| {
        n["metadata"]["labels"]["node.kubernetes.io/exclude-from-external-load-balancers"] =
            json!("true");
    })
    .expect("exclude worker-2");
    for name in ["web", "api"] {
        sim.create(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]},
        }))
        .expect("service");
    }
    eventually("converged", || {
        initialised(&sim, "worker-1")
            && initialised(&sim, "worker-2")
            && ["web", "api"].iter().all(|s| {
                service(&sim, s).is_some_and(|s| ingress_ip(&s).is_some() && has_finalizer(&s))
            })
            && cloud.members().len() == 2
    })
    .await;
    cloud.clear_requests();
    let since = last_seq(&sim);

    // A shadow beside the CCM in charge of a converged cluster: its first passes find nothing
    // to write.
    let port = free_port();
    let port_arg = port.to_string();
    let mut args = SHADOW.to_vec();
    args.extend(["--secure-port", &port_arg]);
    let shadow = Ccm::start_setup(&sim, &cloud.driver_setup(), &args);
    shadow_first_passes(port, 2.0, 4.0).await;
    let report = shadow_report(port).await;
    assert_eq!(report["summary"]["diverged"], 0, "{report:#}");
    let (code, text) = shadow_report_cli(port, "text");
    assert_eq!(code, Some(0), "a converged cluster: exit 0\n{text}");
    drop(shadow);
    // The shadow's requests name it in their User-Agent: none of them wrote.
    assert_eq!(shadow_writes_since(&sim, since), Vec::<String>::new());
    assert!(
        sim.requests().iter().any(|r| r.seq > since
            && r.user_agent
                .as_deref()
                .is_some_and(|a| a.contains("; shadow)"))),
        "the shadow's reads carry its User-Agent"
    );
    assert!(cloud.mutations().is_empty(), "{:?}", cloud.mutations());
    // The CCM in charge stops; what follows is the second shadow's alone.
    drop(ccm);
    let since = last_seq(&sim);

    // Seeded divergences: addresses in another order, a server gone from the cloud, a member
    // gone from a pool, a written-back annotation gone.
    sim.modify("nodes", None, "worker-1", |n| {
        let addresses = n["status"]["addresses"].as_array_mut().expect("addresses");
        addresses.reverse();
    })
    .expect("reorder addresses");
    cloud.remove_server(&uuids[1]);
    set_ready(&sim, "worker-2", false);
    let web_lb = annotation(&service(&sim, "web").expect("web"), "loadbalancer-uuid");
    let member = cloud
        .members()
        .into_iter()
        .find(|m| {
            let pool = m["pool"]["uuid"].as_str().unwrap_or_default();
            cloud.pools().iter().any(|p| {
                p["uuid"] == pool && p["load_balancer"]["uuid"].as_str() == web_lb.as_deref()
            })
        })
        .expect("a member of web's pool");
    let deleted = https_client()
        .delete(format!(
            "{}/v1/load-balancers/pools/{}/members/{}",
            cloud.url(),
            member["pool"]["uuid"].as_str().unwrap_or_default(),
            member["uuid"].as_str().unwrap_or_default()
        ))
        .bearer_auth(cloud.token())
        .send()
        .await
        .expect("delete a member by hand");
    assert!(deleted.status().is_success(), "{}", deleted.status());
    sim.modify("services", Some("default"), "api", |s| {
        let annotations = s["metadata"]["annotations"]
            .as_object_mut()
            .expect("annotations");
        annotations.remove(&format!("{P}loadbalancer-uuid"));
    })
    .expect("drop an annotation");
    cloud.clear_requests();

    let shadow = Ccm::start_setup(&sim, &cloud.driver_setup(), &args);
    let report = report_until(port, "four divergences", |r| r["summary"]["diverged"] == 4).await;
    let find = |kind: &str, object: &str, action: &str| -> Value {
        let matching: Vec<&Value> = report["differences"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|d| d["kind"] == kind && d["object"] == object && d["action"] == action)
            .collect();
        assert_eq!(
            matching.len(),
            1,
            "{kind} {object} {action} once: {report:#}"
        );
        matching[0].clone()
    };
    let addresses = find("Node", "worker-1", "patch-status");
    assert_eq!(
        addresses["changes"][0]["path"], "status.addresses",
        "{addresses:#}"
    );
    find("Node", "worker-2", "delete");
    let member_write = find("Service", "default/web", "load-balancer.ensure");
    let writes = member_write["cloud_writes"].to_string();
    assert!(
        writes.contains("POST") && writes.contains("/members"),
        "{writes}"
    );
    let annotation_write = find("Service", "default/api", "patch");
    assert_eq!(
        annotation_write["changes"][0]["path"],
        format!("metadata.annotations[\"{P}loadbalancer-uuid\"]"),
        "{annotation_write:#}"
    );
    // Reported once: later address passes repeat the write without a new difference.
    report_until(port, "a repeated address pass", |r| {
        r["differences"].as_array().into_iter().flatten().any(|d| {
            d["object"] == "worker-1"
                && d["action"] == "patch-status"
                && d["attempts"].as_u64() >= Some(2)
        })
    })
    .await;
    let text = scrape(port).await;
    let distinct: f64 = text
        .lines()
        .filter(|l| l.starts_with("wasm_ccm_shadow_writes_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(distinct, 4.0, "{text}");
    assert_eq!(
        metric(
            &text,
            "wasm_ccm_shadow_differences{driver=\"cloudscale\",verdict=\"diverged\"}"
        ),
        Some(4.0)
    );
    let (code, text) = shadow_report_cli(port, "text");
    assert_eq!(code, Some(1), "diverged: exit 1\n{text}");
    assert!(
        text.contains("- would delete the Node") && text.contains("+ POST"),
        "{text}"
    );

    // Nothing written by either shadow: the simulators' own logs.
    assert_eq!(kube_writes_since(&sim, since), Vec::<String>::new());
    let cloud_writes: Vec<String> = cloud.mutations().iter().map(|r| r.line()).collect();
    assert_eq!(cloud_writes, Vec::<String>::new());
    assert!(
        sim.get("nodes", None, "worker-2").is_some(),
        "the node is still there"
    );
    drop(shadow);
}
