//! End to end with the PhoenixNAP driver: the real `wasm-ccm run` binary, the real
//! `phoenixnap_driver.wasm` configured from an upstream `cloud-sa.json`, the Kubernetes API
//! simulator and the PhoenixNAP API simulator.

mod common;

use common::*;
use serde_json::{Value, json};
use wasm_ccm_sim::kube::KubeSim;
use wasm_ccm_sim::phoenixnap::{PhoenixnapOptions, PhoenixnapSim, SeedPublicNetwork, SeedServer};

const NETWORK: &str = "60473c2509268bc77fd06d29";
const KUBE_VIP: &str = "kube-vip.io/loadbalancerIPs";

fn marked(cloud: &PhoenixnapSim) -> usize {
    cloud
        .ip_blocks()
        .iter()
        .filter(|b| b["tags"].to_string().contains("\"delete\""))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_and_ip_blocks_through_the_controllers() {
    let sim = KubeSim::start(localhost()).await.expect("kube sim");
    let cloud = PhoenixnapSim::start(localhost(), PhoenixnapOptions::default())
        .await
        .expect("phoenixnap sim");
    cloud.add_public_network(SeedPublicNetwork::new("k8s-vips").with_id(NETWORK));
    let public = cloud.add_server(
        SeedServer::new("worker-1")
            .public(&["198.51.100.201"])
            .private(&["10.0.0.11"]),
    );
    // Private only: the upstream CCM never initialised such a node.
    let private = cloud.add_server(SeedServer::new("worker-2").private(&["10.0.0.12"]));
    for name in ["worker-1", "worker-2"] {
        sim.create(node(name, None, true)).expect("node");
    }
    // The upstream Secret's cloud-sa.json, unchanged but for the simulator's addresses.
    let cloud_sa = json!({
        "clientID": cloud.client_id(),
        "clientSecret": cloud.client_secret(),
        "location": "PHX",
        "loadbalancer": format!("kube-vip://{NETWORK}"),
        "base-url": cloud.url(),
        "auth-url": cloud.url(),
    });
    let _ccm = Ccm::start(
        &sim,
        wasm_ccm_drivers::PHOENIXNAP_DRIVER,
        "phoenixnap",
        &cloud_sa,
        &[
            "--allow-egress",
            &cloud.url(),
            "--housekeeping-period",
            "1s",
        ],
    );

    eventually("nodes initialised", || {
        initialised(&sim, "worker-1") && initialised(&sim, "worker-2")
    })
    .await;
    let private_addresses = json!([
        {"type": "Hostname", "address": "worker-2"},
        {"type": "InternalIP", "address": "10.0.0.12"},
    ]);
    addresses_become(&sim, "worker-2", &private_addresses).await;
    let n = sim.get("nodes", None, "worker-2").expect("node");
    assert_eq!(n["spec"]["providerID"], format!("phoenixnap://{private}"));
    assert_eq!(
        n["metadata"]["labels"]["topology.kubernetes.io/region"],
        "PHX"
    );
    assert_eq!(n["status"]["addresses"], private_addresses);
    let n = sim.get("nodes", None, "worker-1").expect("node");
    assert_eq!(n["spec"]["providerID"], format!("phoenixnap://{public}"));

    // A Service gets an IP block: the address in the status and in kube-vip's annotation, and
    // no write to the deprecated spec.loadBalancerIP.
    sim.create(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
    }))
    .expect("service");
    eventually("status and annotation", || {
        service(&sim, "web").is_some_and(|s| {
            ingress_ip(&s).is_some() && s["metadata"]["annotations"][KUBE_VIP].is_string()
        })
    })
    .await;
    let svc = service(&sim, "web").expect("service");
    let ip = ingress_ip(&svc).expect("ip");
    assert_eq!(
        svc["metadata"]["annotations"][KUBE_VIP],
        Value::String(ip.clone())
    );
    assert!(svc["spec"]["loadBalancerIP"].is_null(), "{svc}");
    let blocks = cloud.ip_blocks();
    assert_eq!(blocks.len(), 1);
    let network_addr = blocks[0]["cidr"]
        .as_str()
        .and_then(|c| c.split('/').next())
        .and_then(|a| a.parse::<std::net::Ipv4Addr>().ok())
        .expect("cidr");
    assert_eq!(
        ip,
        std::net::Ipv4Addr::from(u32::from(network_addr) + 2).to_string()
    );

    // Deleting the Service marks its block; housekeeping unassigns it, then deletes it.
    sim.remove("services", Some("default"), "web")
        .expect("delete");
    eventually("service gone", || service(&sim, "web").is_none()).await;
    eventually("block released by housekeeping", || {
        cloud.settle();
        cloud.ip_blocks().is_empty()
    })
    .await;
    assert_eq!(marked(&cloud), 0);
}
