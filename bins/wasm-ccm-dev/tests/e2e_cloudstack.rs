//! End to end with the CloudStack driver: the real `wasm-ccm run` binary, the real
//! `cloudstack_driver.wasm` configured from upstream's INI `cloud-config`, the Kubernetes API
//! simulator and the CloudStack API simulator.

mod common;

use common::*;
use serde_json::{Value, json};
use wasm_ccm_sim::cloudstack::{CloudstackOptions, CloudstackSim, Seed};
use wasm_ccm_sim::kit::SimCloud as _;
use wasm_ccm_sim::kube::KubeSim;

const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";

fn vm_id(cloud: &CloudstackSim, name: &str) -> String {
    cloud
        .vms()
        .iter()
        .find(|v| v["name"] == name)
        .and_then(|v| v["id"].as_str())
        .map(String::from)
        .unwrap_or_else(|| panic!("no VM {name}"))
}

/// Members of every rule, as sorted VM ids per rule.
fn members(cloud: &CloudstackSim) -> Vec<usize> {
    cloud
        .load_balancer_rules()
        .iter()
        .map(|r| r["members"].as_array().map_or(0, Vec::len))
        .collect()
}

fn allocated(cloud: &CloudstackSim) -> Vec<String> {
    cloud
        .public_ips()
        .iter()
        .filter(|ip| ip["state"] != "Free" && ip["issourcenat"] != true)
        .filter_map(|ip| ip["ipaddress"].as_str().map(String::from))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_and_load_balancer_rules_through_the_controllers() {
    let sim = KubeSim::start(localhost()).await.expect("kube sim");
    // Jobs need two polls: every change goes through the asynchronous path.
    let cloud = CloudstackSim::start_with(CloudstackOptions {
        job_polls: 2,
        ..Default::default()
    })
    .await
    .expect("cloudstack sim");
    cloud.seed(Seed::example()).expect("seed");
    for name in ["k8s-node-1", "k8s-node-2", "k8s-node-3"] {
        sim.create(node(name, None, true)).expect("node");
    }
    // Upstream's cloud-config, unchanged but for the simulator's address and keys (the kit's
    // setup for this simulator).
    let _ccm = Ccm::start_setup(&sim, &cloud.driver_setup(), &[]);

    eventually("nodes initialised", || {
        ["k8s-node-1", "k8s-node-2", "k8s-node-3"]
            .iter()
            .all(|n| initialised(&sim, n))
    })
    .await;
    let expected = json!([
        {"type": "InternalIP", "address": "10.1.1.12"},
        {"type": "InternalIP", "address": "fd00:10:1:1::12"},
        {"type": "Hostname", "address": "k8s-node-2"},
    ]);
    addresses_become(&sim, "k8s-node-2", &expected).await;
    let n = sim.get("nodes", None, "k8s-node-2").expect("node");
    assert_eq!(
        n["spec"]["providerID"],
        format!("external-cloudstack://{}", vm_id(&cloud, "k8s-node-2"))
    );
    let labels = &n["metadata"]["labels"];
    assert_eq!(labels["node.kubernetes.io/instance-type"], "MediumInstance");
    assert_eq!(labels["topology.kubernetes.io/zone"], "zone1");
    assert_eq!(labels["topology.kubernetes.io/region"], "zone1");

    // TCP and UDP on one port: CloudStack allows one LB rule per public IP and port whatever
    // the protocol, so the driver refuses the Service (a Warning event) before any request:
    // no IP is associated, nothing is billed.
    cloud.clear_requests();
    sim.create(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "same-port", "namespace": "default"},
        "spec": {"type": "LoadBalancer", "ports": [
            {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
            {"name": "dns-udp", "port": 53, "protocol": "UDP"},
        ]},
    }))
    .expect("service");
    eventually("same-port is refused", || {
        events(&sim, "same-port", "SyncLoadBalancerFailed")
            .iter()
            .any(|e| {
                e["type"] == "Warning"
                    && e["note"]
                        .as_str()
                        .is_some_and(|m| m.contains("port 53 is used by both TCP and UDP"))
            })
    })
    .await;
    assert!(cloud.mutations().is_empty(), "{:?}", cloud.mutations());
    assert!(allocated(&cloud).is_empty());
    sim.remove("services", Some("default"), "same-port")
        .expect("delete same-port");
    eventually("same-port gone", || service(&sim, "same-port").is_none()).await;

    // A Service with TCP and UDP on different ports: two rules on one new public IP, every node
    // a member, the firewall opened.
    sim.create(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "dns", "namespace": "default"},
        "spec": {"type": "LoadBalancer", "ports": [
            {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
            {"name": "dns-udp", "port": 5353, "protocol": "UDP"},
        ]},
    }))
    .expect("service");
    eventually("ingress IP", || {
        service(&sim, "dns").is_some_and(|s| ingress_ip(&s).is_some())
    })
    .await;
    let ip = ingress_ip(&service(&sim, "dns").expect("service")).expect("ip");
    assert_eq!(allocated(&cloud), std::slice::from_ref(&ip));
    let rules = cloud.load_balancer_rules();
    let mut protocols: Vec<&str> = rules
        .iter()
        .filter_map(|r| r["protocol"].as_str())
        .collect();
    protocols.sort();
    assert_eq!(protocols, ["tcp", "udp"]);
    assert!(rules.iter().all(|r| r["publicip"] == ip.as_str()));
    eventually("all members", || members(&cloud) == [3, 3]).await;
    assert_eq!(cloud.firewall_rules().len(), 2);

    // Lifecycle: a stopped VM taints its NotReady node; an expunged one deletes the node
    // (upstream never did: it reported the missing VM as an error), and the rules lose it.
    let node3 = vm_id(&cloud, "k8s-node-3");
    cloud.set_vm_state(&node3, "Stopped");
    set_ready(&sim, "k8s-node-3", false);
    eventually("shutdown taint", || {
        sim.get("nodes", None, "k8s-node-3")
            .is_some_and(|n| has_taint(&n, SHUTDOWN))
    })
    .await;
    cloud.remove_vm(&node3);
    eventually("node deleted", || {
        sim.get("nodes", None, "k8s-node-3").is_none()
    })
    .await;
    eventually("member removed", || members(&cloud) == [2, 2]).await;

    // Deleting the Service deletes the rules and firewall rules and releases the IP.
    sim.remove("services", Some("default"), "dns")
        .expect("delete service");
    eventually("service gone", || service(&sim, "dns").is_none()).await;
    assert!(cloud.load_balancer_rules().is_empty());
    assert!(cloud.firewall_rules().is_empty());
    assert!(allocated(&cloud).is_empty(), "{:?}", allocated(&cloud));
}

/// Issue 22, item 3, with the real process: `wasm-ccm` is SIGKILLed right after it tagged a
/// new public IP and before any load-balancer rule exists. The next leader (a new process)
/// adopts that IP: exactly one IP is ever associated, and deleting the Service releases it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_controller_leaves_its_successor_the_ip_to_adopt() {
    let sim = KubeSim::start(localhost()).await.expect("kube sim");
    let cloud = CloudstackSim::start().await.expect("cloudstack sim");
    cloud.seed(Seed::example()).expect("seed");
    for name in ["k8s-node-1", "k8s-node-2", "k8s-node-3"] {
        sim.create(node(name, None, true)).expect("node");
    }
    let cloud_config = Value::String(format!(
        "[Global]\napi-url = {}\napi-key = {}\nsecret-key = {}\n",
        cloud.url(),
        cloud.api_key(),
        cloud.secret_key()
    ));
    let egress = cloud.base_url();
    // A short lease, so that the successor takes over within the test's wait.
    let args = [
        "--allow-egress",
        egress.as_str(),
        "--cluster-name",
        "e2e-crash",
        "--leader-elect-lease-duration",
        "2s",
        "--leader-elect-renew-deadline",
        "1500ms",
        "--leader-elect-retry-period",
        "200ms",
    ];
    // Every cloud request after the first createTags fails: the controller is as good as dead
    // from then on; the SIGKILL below makes it so.
    cloud.faults().kill_after(
        wasm_ccm_sim::cloudstack::Match::command("createTags"),
        1,
        503,
    );
    let mut first = Ccm::start(
        &sim,
        wasm_ccm_drivers::CLOUDSTACK_DRIVER,
        "external-cloudstack",
        &cloud_config,
        &args,
    );
    sim.create(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
    }))
    .expect("service");
    eventually("the first controller tagged an IP", || {
        cloud.faults().killed()
    })
    .await;
    first.signal("-KILL");
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(
        first.wait_status().signal(),
        Some(9),
        "killed by SIGKILL, not exited"
    );
    drop(first);
    cloud.faults().clear();
    // The cloud finishes what it accepted: the association and the tag.
    cloud.settle();
    assert_eq!(allocated(&cloud).len(), 1);
    assert!(cloud.load_balancer_rules().is_empty());

    let _second = Ccm::start(
        &sim,
        wasm_ccm_drivers::CLOUDSTACK_DRIVER,
        "external-cloudstack",
        &cloud_config,
        &args,
    );
    eventually("ingress IP", || {
        service(&sim, "web").is_some_and(|s| ingress_ip(&s).is_some())
    })
    .await;
    let ip = ingress_ip(&service(&sim, "web").expect("service")).expect("ip");
    assert_eq!(allocated(&cloud), std::slice::from_ref(&ip), "adopted");
    let associations = cloud
        .mutations()
        .iter()
        .filter(|r| r.command == "associateIpAddress")
        .count();
    assert_eq!(associations, 1);
    let tags = cloud.tags();
    assert!(
        tags.iter()
            .any(|t| t["key"] == "wasm-ccm/cluster" && t["value"] == "e2e-crash"),
        "{tags:?}"
    );
    eventually("all members", || members(&cloud) == [3]).await;

    sim.remove("services", Some("default"), "web")
        .expect("delete service");
    eventually("service gone", || service(&sim, "web").is_none()).await;
    assert!(cloud.load_balancer_rules().is_empty());
    assert!(allocated(&cloud).is_empty(), "{:?}", allocated(&cloud));
}
