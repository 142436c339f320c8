//! The CloudStack driver through the host runtime against the CloudStack simulator: signed
//! requests, instances, load balancers on isolated networks and VPC tiers from creation to
//! deletion, asynchronous jobs that outlive a call, and every fix of upstream's bugs.

mod common;

use std::sync::atomic::Ordering;

use serde_json::Value;
use tokio::sync::OnceCell;
use wasm_ccm_drivers::CLOUDSTACK_DRIVER;
use wasm_ccm_runtime::types::{
    AddressType, EnsureResult, Ingress, Node, Protocol, ProviderError, Service, ServicePort,
    SessionAffinity,
};
use wasm_ccm_runtime::{CallError, CallScope, Compiled, Driver, DriverOptions, EventKind};
use wasm_ccm_runtime::{InitInput, http};
use wasm_ccm_sim::cloudstack::{
    CidrSeparator, CloudstackOptions, CloudstackSim, Match, Seed, SeedLbRule, SeedNic,
    SeedPublicIp, SeedVm,
};

const PROXY: &str = "service.beta.kubernetes.io/cloudstack-load-balancer-proxy-protocol";
const HOSTNAME: &str = "service.beta.kubernetes.io/cloudstack-load-balancer-hostname";
const SOURCE_CIDRS: &str = "service.beta.kubernetes.io/cloudstack-load-balancer-source-cidrs";
const IP_ASSOCIATED: &str =
    "service.beta.kubernetes.io/cloudstack-load-balancer-ip-associated-by-controller";
const NODES: [&str; 3] = ["k8s-node-1", "k8s-node-2", "k8s-node-3"];
/// The ownership tag the driver puts on the public IPs it associates.
const TAG_LB: &str = "wasm-ccm/load-balancer";

async fn compiled() -> &'static Compiled {
    static COMPILED: OnceCell<Compiled> = OnceCell::const_new();
    COMPILED
        .get_or_init(|| common::compile(CLOUDSTACK_DRIVER))
        .await
}

struct Cloud {
    sim: CloudstackSim,
    driver: Driver,
}

fn ini(sim: &CloudstackSim, secret: &str, extra: &str) -> String {
    format!(
        "[Global]\napi-url = {}\napi-key = {}\nsecret-key = {secret}\n{extra}",
        sim.url(),
        sim.api_key()
    )
}

async fn load(
    sim: &CloudstackSim,
    config: String,
    env: &[(&str, &str)],
) -> Result<Driver, wasm_ccm_runtime::HostError> {
    let opts = DriverOptions {
        init: InitInput {
            config: config.into_bytes(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        },
        http: http::Config {
            egress: Some(
                wasm_ccm_runtime::EgressPolicy::parse(&[sim.base_url()]).expect("egress grants"),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    common::runtime().load(compiled().await, opts).await
}

/// The example account (isolated `k8s-net` with three nodes, VPC tier `k8s-tier`).
async fn cloud_with(opts: CloudstackOptions, env: &[(&str, &str)]) -> Cloud {
    let sim = CloudstackSim::start_with(opts).await.expect("simulator");
    sim.seed(Seed::example()).expect("seed");
    let driver = load(&sim, ini(&sim, &sim.secret_key(), ""), env)
        .await
        .expect("loads");
    Cloud { sim, driver }
}

async fn cloud() -> Cloud {
    cloud_with(CloudstackOptions::default(), &[]).await
}

fn scope() -> CallScope {
    CallScope::object("default/web")
}

fn nodes(names: &[&str]) -> Vec<Node> {
    names.iter().map(|n| common::node(n)).collect()
}

fn port(protocol: Protocol, port: u16, node_port: u16) -> ServicePort {
    ServicePort {
        name: format!("p{port}"),
        protocol,
        port,
        node_port,
    }
}

fn service(name: &str, ports: Vec<ServicePort>) -> Service {
    let mut s = common::lb_service(
        name,
        &format!("{:0>8}-7c2b-4a8e-9d3f-1b2c3d4e5f60", name.len()),
    );
    s.ports = ports;
    s
}

/// A Service with its own UID (the LB name comes from it).
fn web(uid_digit: char, ports: Vec<ServicePort>) -> Service {
    let mut s = service("web", ports);
    s.uid = format!(
        "{}-7c2b-4a8e-9d3f-1b2c3d4e5f60",
        uid_digit.to_string().repeat(8)
    );
    s
}

fn lbname(s: &Service) -> String {
    let mut n = format!("a{}", s.uid.replace('-', ""));
    n.truncate(32);
    n
}

fn annotate(mut s: Service, pairs: &[(&str, &str)]) -> Service {
    for (k, v) in pairs {
        s.annotations.retain(|(key, _)| key != k);
        s.annotations.push((k.to_string(), v.to_string()));
    }
    s
}

async fn ensure(c: &Cloud, svc: &Service, names: &[&str]) -> Result<EnsureResult, CallError> {
    c.driver
        .load_balancer_ensure(svc, &nodes(names), &scope())
        .await
        .into_result()
}

async fn delete(c: &Cloud, svc: &Service) -> Result<(), CallError> {
    c.driver
        .load_balancer_delete(svc, &scope())
        .await
        .into_result()
}

fn vm_id(sim: &CloudstackSim, name: &str) -> String {
    sim.vms()
        .iter()
        .find(|v| v["name"] == name)
        .and_then(|v| v["id"].as_str())
        .unwrap_or_else(|| panic!("no VM {name}"))
        .to_string()
}

fn rules(sim: &CloudstackSim) -> Vec<Value> {
    sim.load_balancer_rules()
}

fn rule<'a>(rules: &'a [Value], name: &str) -> &'a Value {
    rules
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no rule {name} in {rules:#?}"))
}

fn members(rule: &Value) -> Vec<String> {
    let mut m: Vec<String> = rule["members"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    m.sort();
    m
}

fn ids(sim: &CloudstackSim, names: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = names.iter().map(|n| vm_id(sim, n)).collect();
    v.sort();
    v
}

fn allocated(sim: &CloudstackSim) -> Vec<String> {
    sim.public_ips()
        .iter()
        .filter(|ip| ip["state"] != "Free" && ip["issourcenat"] != true)
        .filter_map(|ip| ip["ipaddress"].as_str().map(String::from))
        .collect()
}

fn changes(sim: &CloudstackSim) -> Vec<String> {
    sim.mutations().iter().map(|r| r.line()).collect()
}

fn commands(sim: &CloudstackSim) -> Vec<String> {
    sim.mutations().iter().map(|r| r.command.clone()).collect()
}

fn ip_of(r: &EnsureResult) -> String {
    r.ingress[0].ip.clone().expect("an IP in the ingress")
}

fn provider_error(e: CallError) -> ProviderError {
    match e {
        CallError::Provider(p) => p,
        other => panic!("expected a provider error, got {other:?}"),
    }
}

#[tokio::test]
async fn init_makes_no_request_and_a_bad_file_is_refused() {
    let sim = CloudstackSim::start().await.expect("simulator");
    let driver = load(&sim, ini(&sim, &sim.secret_key(), "project-id =\n"), &[]).await;
    assert!(driver.is_ok(), "{:?}", driver.err());
    // Upstream called the admin-only listManagementServersMetrics here and died with 432.
    assert!(sim.requests().is_empty(), "{:?}", sim.requests());
    let bad = load(&sim, ini(&sim, "s", "api-token = x\n"), &[])
        .await
        .err()
        .expect("refused");
    assert!(
        bad.to_string().contains("unknown key \"api-token\""),
        "{bad}"
    );
    let missing = load(
        &sim,
        "[Global]\napi-url = https://x/client/api\n".into(),
        &[],
    )
    .await
    .err()
    .expect("refused");
    assert!(
        missing.to_string().contains("api-key, secret-key"),
        "{missing}"
    );
}

#[tokio::test]
async fn a_wrong_secret_is_unauthorized_and_requests_are_signed() {
    let c = cloud().await;
    let wrong = load(&c.sim, ini(&c.sim, "not-the-secret", ""), &[])
        .await
        .expect("loads");
    let e = wrong
        .instance_metadata(&common::node("k8s-node-1"), &scope())
        .await
        .into_result()
        .expect_err("refused");
    assert!(
        matches!(provider_error(e), ProviderError::Unauthorized(m) if m.contains("secret-key")),
    );
    // The right key: reads are signed GETs, and the log never shows the key or signature.
    c.driver
        .instance_metadata(&common::node("k8s-node-1"), &scope())
        .await
        .into_result()
        .expect("metadata");
    let log = c.sim.requests();
    let last = log.last().expect("a request");
    assert_eq!((last.method.as_str(), last.status), ("GET", 200));
    assert_eq!(
        last.params.get("signatureversion").map(String::as_str),
        Some("3")
    );
    // `expires` with a numeric offset, the form every CloudStack version parses.
    let expires = last.params.get("expires").expect("expires");
    assert!(
        expires.ends_with("+0000") && expires.len() == 24,
        "{expires}"
    );
    assert_ne!(last.params.get("signature"), None);
}

#[tokio::test]
async fn instance_metadata_as_upstream_with_its_fixes() {
    let c = cloud().await;
    let m = c
        .driver
        .instance_metadata(&common::node("k8s-node-2"), &scope())
        .await
        .into_result()
        .expect("metadata");
    assert_eq!(
        m.provider_id,
        format!("external-cloudstack://{}", vm_id(&c.sim, "k8s-node-2"))
    );
    assert_eq!(m.instance_type, "MediumInstance");
    assert_eq!((m.zone.as_str(), m.region.as_str()), ("zone1", "zone1"));
    let addresses: Vec<(AddressType, &str)> = m
        .addresses
        .iter()
        .map(|a| (a.kind, a.address.as_str()))
        .collect();
    // The VM's name, not the hypervisor (kvm-host-02); the NIC's IPv6 too.
    assert_eq!(
        addresses,
        [
            (AddressType::InternalIp, "10.1.1.12"),
            (AddressType::InternalIp, "fd00:10:1:1::12"),
            (AddressType::Hostname, "k8s-node-2"),
        ]
    );
    // An FQDN node name finds the same VM, as the load balancers do.
    let fqdn = c
        .driver
        .instance_metadata(&common::node("k8s-node-2.cluster.example"), &scope())
        .await
        .into_result()
        .expect("metadata by FQDN");
    assert_eq!(fqdn.provider_id, m.provider_id);
    // And a node with the provider ID is looked up by it.
    let mut by_id = common::node("renamed");
    by_id.provider_id = m.provider_id.clone();
    let again = c
        .driver
        .instance_metadata(&by_id, &scope())
        .await
        .into_result()
        .expect("metadata by provider ID");
    assert_eq!(again.provider_id, m.provider_id);
    // A region from the file wins over the zone.
    let regional = load(
        &c.sim,
        ini(&c.sim, &c.sim.secret_key(), "region = eu-west\n"),
        &[],
    )
    .await
    .expect("loads");
    let r = regional
        .instance_metadata(&common::node("k8s-node-1"), &scope())
        .await
        .into_result()
        .expect("metadata");
    assert_eq!((r.zone.as_str(), r.region.as_str()), ("zone1", "eu-west"));
}

#[tokio::test]
async fn a_missing_vm_does_not_exist_and_a_stopped_one_is_shut_down() {
    let c = cloud().await;
    let node = common::node("k8s-node-3");
    let exists = |n: Node| {
        let d = &c.driver;
        async move { d.instance_exists(&n, &scope()).await.into_result() }
    };
    assert!(exists(node.clone()).await.expect("exists"));
    let shut = c
        .driver
        .instance_shutdown(&node, &scope())
        .await
        .into_result()
        .expect("shutdown");
    assert!(!shut);
    c.sim.set_vm_state(&vm_id(&c.sim, "k8s-node-3"), "Stopped");
    let shut = c
        .driver
        .instance_shutdown(&node, &scope())
        .await
        .into_result()
        .expect("shutdown");
    assert!(shut, "upstream answered not-implemented here");
    assert!(exists(node.clone()).await.expect("a stopped VM exists"));
    c.sim.remove_vm(&vm_id(&c.sim, "k8s-node-3"));
    // Upstream returned "not found" as an error, so the Node was never deleted.
    assert!(!exists(node).await.expect("exists"));
    let mut gone = common::node("whatever");
    gone.provider_id = "external-cloudstack://9a7c1f2e-0b1d-4c3e-8f50-000000000000".into();
    assert!(!exists(gone).await.expect("exists by ID"));
    let mut foreign = common::node("k8s-node-1");
    foreign.provider_id = "aws:///eu-west-1a/i-1".into();
    assert!(matches!(
        provider_error(exists(foreign).await.expect_err("another provider's node")),
        ProviderError::InvalidConfig(_)
    ));
}

#[tokio::test]
async fn a_mistyped_project_is_a_configuration_error_never_a_missing_vm() {
    let c = cloud().await;
    let typo = load(
        &c.sim,
        ini(
            &c.sim,
            &c.sim.secret_key(),
            "project-id = 6a3d7c2e-0000-4000-8000-00000000dead\n",
        ),
        &[],
    )
    .await
    .expect("loads");
    // "false" here would make the lifecycle controller delete every node.
    for mut node in [common::node("k8s-node-1"), common::node("x")] {
        if node.name == "x" {
            node.provider_id = format!("external-cloudstack://{}", vm_id(&c.sim, "k8s-node-1"));
        }
        let e = typo
            .instance_exists(&node, &scope())
            .await
            .into_result()
            .expect_err("refused");
        assert!(
            matches!(provider_error(e), ProviderError::InvalidConfig(ref m) if m.contains("project-id")),
            "{}",
            node.name
        );
    }
}

#[tokio::test]
async fn a_vm_without_nics_gives_an_error_and_is_skipped_as_a_backend() {
    let c = cloud().await;
    c.sim.add_vm(SeedVm::new("k8s-node-bare", "zone1"));
    let e = c
        .driver
        .instance_metadata(&common::node("k8s-node-bare"), &scope())
        .await
        .into_result()
        .expect_err("no NIC");
    assert!(matches!(provider_error(e), ProviderError::Permanent(m) if m.contains("no NIC")));
    // Upstream indexed nic[0] and crashed; here the node is only left out.
    let svc = web('1', vec![port(Protocol::Tcp, 80, 30080)]);
    ensure(&c, &svc, &["k8s-node-1", "k8s-node-bare"])
        .await
        .expect("ensure");
    let all = rules(&c.sim);
    assert_eq!(
        members(rule(&all, &format!("{}-tcp-80", lbname(&svc)))),
        ids(&c.sim, &["k8s-node-1"])
    );
}

#[tokio::test]
async fn isolated_network_tcp_and_udp_from_creation_to_deletion() {
    let c = cloud().await;
    let svc = web(
        '2',
        vec![
            port(Protocol::Tcp, 53, 30053),
            port(Protocol::Udp, 54, 30054),
            port(Protocol::Tcp, 80, 30080),
        ],
    );
    let name = lbname(&svc);
    let r = ensure(&c, &svc, &NODES).await.expect("ensure");
    let ip = ip_of(&r);
    assert!(r.set_annotations.is_empty(), "{:?}", r.set_annotations);
    let all = rules(&c.sim);
    assert_eq!(all.len(), 3, "{all:#?}");
    for (suffix, protocol, public, private) in [
        ("tcp-53", "tcp", "53", "30053"),
        ("udp-54", "udp", "54", "30054"),
        ("tcp-80", "tcp", "80", "30080"),
    ] {
        let r = rule(&all, &format!("{name}-{suffix}"));
        assert_eq!(r["protocol"], protocol);
        assert_eq!(r["publicip"], ip.as_str());
        assert_eq!(
            (r["publicport"].as_str(), r["privateport"].as_str()),
            (Some(public), Some(private))
        );
        assert_eq!(r["algorithm"], "roundrobin");
        // Open to all: no `cidrlist` sent, none stored (rendered "").
        assert_eq!(r["cidrlist"], "");
        assert_eq!(members(r), ids(&c.sim, &NODES));
    }
    // The isolated network's firewall is opened per protocol and port.
    let mut opened: Vec<(String, i64)> = c
        .sim
        .firewall_rules()
        .iter()
        .map(|f| {
            (
                f["protocol"].as_str().unwrap_or("").to_string(),
                f["startport"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    opened.sort();
    assert_eq!(
        opened,
        [
            ("tcp".to_string(), 53),
            ("tcp".to_string(), 80),
            ("udp".to_string(), 54)
        ]
    );
    assert_eq!(allocated(&c.sim), std::slice::from_ref(&ip));

    // Converged: a second ensure and get change nothing and agree.
    c.sim.clear_requests();
    let svc = common::apply(svc, &r);
    let again = ensure(&c, &svc, &NODES).await.expect("ensure again");
    assert_eq!(again.ingress, r.ingress);
    assert!(changes(&c.sim).is_empty(), "{:?}", changes(&c.sim));
    let got = c
        .driver
        .load_balancer_get(&svc, &scope())
        .await
        .into_result()
        .expect("get");
    assert_eq!(got, Some(r.ingress.clone()));

    // A port removed: its rule and its firewall rule go, the others stay.
    let mut fewer = svc.clone();
    fewer.ports.retain(|p| p.port != 80);
    ensure(&c, &fewer, &NODES).await.expect("ensure without 80");
    assert_eq!(rules(&c.sim).len(), 2);
    assert!(c.sim.firewall_rules().iter().all(|f| f["startport"] != 80));

    // Delete: rules, firewall rules and the IP we took.
    delete(&c, &svc).await.expect("delete");
    assert!(rules(&c.sim).is_empty());
    assert!(c.sim.firewall_rules().is_empty());
    assert!(allocated(&c.sim).is_empty(), "{:?}", allocated(&c.sim));
    c.sim.clear_requests();
    delete(&c, &svc).await.expect("delete again");
    assert!(changes(&c.sim).is_empty());
    let got = c
        .driver
        .load_balancer_get(&svc, &scope())
        .await
        .into_result()
        .expect("get");
    assert_eq!(got, None);
}

#[tokio::test]
async fn vpc_tier_uses_acl_entries_and_proxy_protocol() {
    let c = cloud().await;
    let svc = annotate(
        web(
            '3',
            vec![
                port(Protocol::Tcp, 443, 30443),
                port(Protocol::Udp, 444, 30444),
            ],
        ),
        &[(PROXY, "true")],
    );
    let name = lbname(&svc);
    let r = ensure(&c, &svc, &["k8s-vpc-node-1"]).await.expect("ensure");
    let ip = ip_of(&r);
    let all = rules(&c.sim);
    assert_eq!(
        rule(&all, &format!("{name}-tcp-proxy-443"))["protocol"],
        "tcp-proxy"
    );
    assert_eq!(rule(&all, &format!("{name}-udp-444"))["protocol"], "udp");
    // The IP was associated with the VPC (and then with the tier by the first rule).
    let public = c
        .sim
        .public_ips()
        .into_iter()
        .find(|p| p["ipaddress"] == ip.as_str())
        .expect("the IP");
    assert_eq!(public["vpcid"], "9a7c1f2e-0b1d-4c3e-8f50-6a1b2c3d4e21");
    // ACL entries, not firewall rules; TCP for the proxy port (upstream sent tcp-proxy).
    assert!(c.sim.firewall_rules().is_empty());
    let mut acl: Vec<(String, String)> = c
        .sim
        .network_acls()
        .iter()
        .map(|a| {
            (
                a["protocol"].as_str().unwrap_or("").to_string(),
                a["startport"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    acl.sort();
    assert_eq!(
        acl,
        [
            ("tcp".to_string(), "443".to_string()),
            ("udp".to_string(), "444".to_string())
        ]
    );
    c.sim.clear_requests();
    ensure(&c, &common::apply(svc.clone(), &r), &["k8s-vpc-node-1"])
        .await
        .expect("ensure again");
    assert!(changes(&c.sim).is_empty(), "{:?}", changes(&c.sim));

    // A second Service on the tier with the same UDP port: deleting the first keeps the shared
    // entry (ACL lists are shared; upstream deleted the first match).
    let other = web('4', vec![port(Protocol::Udp, 444, 30445)]);
    ensure(&c, &other, &["k8s-vpc-node-1"])
        .await
        .expect("ensure other");
    delete(&c, &common::apply(svc, &r)).await.expect("delete");
    let left: Vec<String> = c
        .sim
        .network_acls()
        .iter()
        .map(|a| {
            format!(
                "{}/{}",
                a["protocol"].as_str().unwrap_or(""),
                a["startport"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(left, ["udp/444"]);
    assert!(!allocated(&c.sim).contains(&ip));
}

#[tokio::test]
async fn switching_a_port_to_proxy_protocol_replaces_its_rule() {
    let c = cloud().await;
    let svc = web('0', vec![port(Protocol::Tcp, 443, 30443)]);
    let name = lbname(&svc);
    let r = ensure(&c, &svc, &NODES).await.expect("ensure");
    let svc = annotate(common::apply(svc, &r), &[(PROXY, "true")]);
    let again = ensure(&c, &svc, &NODES)
        .await
        .expect("ensure with proxy protocol");
    assert_eq!(again.ingress, r.ingress, "same IP");
    let all = rules(&c.sim);
    assert_eq!(all.len(), 1, "{all:#?}");
    let proxied = rule(&all, &format!("{name}-tcp-proxy-443"));
    assert_eq!(proxied["protocol"], "tcp-proxy");
    assert_eq!(members(proxied), ids(&c.sim, &NODES));
    // The TCP/443 firewall rule serves the new rule as well: kept, not recreated.
    assert_eq!(c.sim.firewall_rules().len(), 1);
    assert!(!commands(&c.sim).contains(&"deleteFirewallRule".to_string()));
}

#[tokio::test]
async fn hostname_affinity_and_source_cidrs() {
    let c = cloud_with(
        CloudstackOptions {
            cidr_separator: CidrSeparator::Space,
            ..Default::default()
        },
        &[],
    )
    .await;
    let mut svc = annotate(
        web('5', vec![port(Protocol::Tcp, 80, 30080)]),
        &[
            (HOSTNAME, "lb.example.com"),
            (SOURCE_CIDRS, "10.0.0.0/8, 192.168.0.0/16"),
        ],
    );
    svc.session_affinity = SessionAffinity::ClientIp;
    let rule_name = format!("{}-tcp-80", lbname(&svc));
    let r = ensure(&c, &svc, &NODES).await.expect("ensure");
    assert_eq!(
        r.ingress,
        vec![Ingress {
            ip: None,
            hostname: Some("lb.example.com".into()),
            ip_mode: None
        }]
    );
    let all = rules(&c.sim);
    let created = rule(&all, &rule_name);
    assert_eq!(created["algorithm"], "source");
    // Rendered space-separated by this CloudStack; still the same set, so no churn.
    assert_eq!(created["cidrlist"], "10.0.0.0/8 192.168.0.0/16");
    // Without loadBalancerSourceRanges the firewall follows the annotation (upstream: open).
    assert_eq!(
        c.sim.firewall_rules()[0]["cidrlist"],
        "10.0.0.0/8,192.168.0.0/16"
    );
    c.sim.clear_requests();
    let svc = common::apply(svc, &r);
    ensure(&c, &svc, &NODES).await.expect("ensure again");
    assert!(changes(&c.sim).is_empty(), "{:?}", changes(&c.sim));
    let got = c
        .driver
        .load_balancer_get(&svc, &scope())
        .await
        .into_result()
        .expect("get");
    assert_eq!(got, Some(r.ingress.clone()), "get agrees with ensure");

    // A new CIDR list is updated in place on 4.22 (the simulator's version).
    let id = created["id"].clone();
    let svc = annotate(svc, &[(SOURCE_CIDRS, "10.0.0.0/8")]);
    c.sim.clear_requests();
    ensure(&c, &svc, &NODES)
        .await
        .expect("ensure with new CIDRs");
    let all = rules(&c.sim);
    assert_eq!(rule(&all, &rule_name)["id"], id);
    assert_eq!(rule(&all, &rule_name)["cidrlist"], "10.0.0.0/8");
    assert!(commands(&c.sim).contains(&"updateLoadBalancerRule".to_string()));
    // On an older CloudStack the rule is recreated instead.
    c.sim.set_version("4.19.1.0");
    let old = load(&c.sim, ini(&c.sim, &c.sim.secret_key(), ""), &[])
        .await
        .expect("loads");
    let svc = annotate(svc, &[(SOURCE_CIDRS, "172.16.0.0/12")]);
    let ensure_old = old
        .load_balancer_ensure(&svc, &nodes(&NODES), &scope())
        .await
        .into_result();
    ensure_old.expect("ensure on 4.19");
    let all = rules(&c.sim);
    assert_ne!(rule(&all, &rule_name)["id"], id);
    assert_eq!(rule(&all, &rule_name)["cidrlist"], "172.16.0.0/12");
    assert_eq!(members(rule(&all, &rule_name)), ids(&c.sim, &NODES));
    // Bad input changes nothing.
    c.sim.clear_requests();
    let bad = annotate(svc, &[(SOURCE_CIDRS, "10.0.0.0/33")]);
    let e = ensure(&c, &bad, &NODES).await.expect_err("refused");
    assert!(
        matches!(provider_error(e), ProviderError::InvalidConfig(m) if m.contains("10.0.0.0/33"))
    );
    assert!(c.sim.requests().is_empty());
}

#[tokio::test]
async fn a_requested_ip_we_associated_is_released_and_a_users_ip_is_kept() {
    let c = cloud().await;
    // Free in the pool: associated by the driver, marked, released on delete.
    let mut ours = web('6', vec![port(Protocol::Tcp, 80, 30080)]);
    ours.load_balancer_ip = Some("203.0.113.44".into());
    let r = ensure(&c, &ours, &NODES).await.expect("ensure");
    assert_eq!(ip_of(&r), "203.0.113.44");
    assert_eq!(
        r.set_annotations,
        vec![(IP_ASSOCIATED.to_string(), "true".to_string())]
    );
    let ours = common::apply(ours, &r);
    let again = ensure(&c, &ours, &NODES).await.expect("ensure again");
    assert!(again.set_annotations.is_empty());
    delete(&c, &ours).await.expect("delete");
    assert!(!allocated(&c.sim).contains(&"203.0.113.44".to_string()));

    // Allocated by the user beforehand: used, not marked, kept on delete.
    c.sim.add_public_ip(SeedPublicIp {
        ip: "203.0.113.50".into(),
        zone: "zone1".into(),
        network: Some("k8s-net".into()),
        ..Default::default()
    });
    let mut users = web('7', vec![port(Protocol::Tcp, 80, 30080)]);
    users.load_balancer_ip = Some("203.0.113.50".into());
    let r = ensure(&c, &users, &NODES).await.expect("ensure");
    assert_eq!(ip_of(&r), "203.0.113.50");
    assert!(r.set_annotations.is_empty());
    delete(&c, &common::apply(users, &r)).await.expect("delete");
    assert!(rules(&c.sim).is_empty());
    assert!(allocated(&c.sim).contains(&"203.0.113.50".to_string()));

    // An address that is not the account's is refused before anything is created.
    let mut wrong = web('8', vec![port(Protocol::Tcp, 80, 30080)]);
    wrong.load_balancer_ip = Some("198.51.100.1".into());
    let e = ensure(&c, &wrong, &NODES).await.expect_err("refused");
    assert!(
        matches!(provider_error(e), ProviderError::InvalidConfig(m) if m.contains("198.51.100.1"))
    );
    assert!(rules(&c.sim).is_empty());
}

#[tokio::test]
async fn a_node_set_change_updates_members_only() {
    let c = cloud().await;
    let svc = web(
        '9',
        vec![
            port(Protocol::Tcp, 80, 30080),
            port(Protocol::Udp, 81, 30081),
        ],
    );
    ensure(&c, &svc, &NODES).await.expect("ensure");
    c.sim.clear_requests();
    c.driver
        .load_balancer_update(&svc, &nodes(&["k8s-node-1", "k8s-node-3"]), &scope())
        .await
        .into_result()
        .expect("update");
    assert_eq!(
        commands(&c.sim),
        ["removeFromLoadBalancerRule", "removeFromLoadBalancerRule"]
    );
    for r in rules(&c.sim) {
        assert_eq!(members(&r), ids(&c.sim, &["k8s-node-1", "k8s-node-3"]));
    }
    c.sim.clear_requests();
    c.driver
        .load_balancer_update(&svc, &nodes(&NODES), &scope())
        .await
        .into_result()
        .expect("update back");
    assert_eq!(
        commands(&c.sim),
        ["assignToLoadBalancerRule", "assignToLoadBalancerRule"]
    );
    // No nodes at all: the rules keep existing with no members (upstream could not do this).
    c.driver
        .load_balancer_update(&svc, &[], &scope())
        .await
        .into_result()
        .expect("update to none");
    assert!(rules(&c.sim).iter().all(|r| members(r).is_empty()));
}

#[tokio::test]
async fn a_job_that_outlives_the_budget_is_picked_up_without_duplicates() {
    let c = cloud_with(
        CloudstackOptions {
            job_polls: 1_000,
            ..Default::default()
        },
        &[("CLOUDSTACK_JOB_BUDGET", "0s")],
    )
    .await;
    let svc = web('a', vec![port(Protocol::Tcp, 80, 30080)]);
    let mut outcomes = Vec::new();
    // Each call gets as far as one job; the jobs finish between calls.
    for _ in 0..20 {
        match ensure(&c, &svc, &NODES).await {
            Ok(r) => {
                outcomes.push("ok".to_string());
                assert_eq!(allocated(&c.sim), [ip_of(&r)]);
                break;
            }
            Err(e) => {
                let ProviderError::RetryAfter(retry) = provider_error(e) else {
                    panic!("expected retry-after");
                };
                assert_eq!(retry.seconds, 5);
                assert!(retry.reason.contains("still running"), "{}", retry.reason);
                outcomes.push("retry".into());
                c.sim.settle();
            }
        }
    }
    assert_eq!(
        outcomes.last().map(String::as_str),
        Some("ok"),
        "{outcomes:?}"
    );
    assert!(outcomes.len() >= 3, "{outcomes:?}");
    let associations = c
        .sim
        .mutations()
        .iter()
        .filter(|r| r.command == "associateIpAddress")
        .count();
    let creations = commands(&c.sim)
        .iter()
        .filter(|c| *c == "createLoadBalancerRule")
        .count();
    assert_eq!((associations, creations, rules(&c.sim).len()), (1, 1, 1));
    assert_eq!(
        members(&rules(&c.sim)[0]),
        ids(&c.sim, &NODES),
        "members assigned once"
    );
}

#[tokio::test]
async fn a_failed_job_gives_the_new_ip_back() {
    let c = cloud().await;
    c.sim.fail_next_jobs("createLoadBalancerRule", 1);
    let svc = web('b', vec![port(Protocol::Tcp, 80, 30080)]);
    let e = ensure(&c, &svc, &NODES).await.expect_err("the job fails");
    assert!(
        matches!(provider_error(e), ProviderError::Transient(m) if m.contains("createLoadBalancerRule"))
    );
    assert!(rules(&c.sim).is_empty());
    assert!(allocated(&c.sim).is_empty(), "{:?}", allocated(&c.sim));
    ensure(&c, &svc, &NODES).await.expect("ensure again");
    assert_eq!(rules(&c.sim).len(), 1);
}

#[tokio::test]
async fn a_partial_delete_does_not_leak_the_ip() {
    let c = cloud().await;
    let svc = web('c', vec![port(Protocol::Tcp, 80, 30080)]);
    let r = ensure(&c, &svc, &NODES).await.expect("ensure");
    let svc = common::apply(svc, &r);
    c.sim.fail_next_jobs("disassociateIpAddress", 1);
    delete(&c, &svc).await.expect_err("the release fails");
    assert!(rules(&c.sim).is_empty(), "the rules went first");
    assert_eq!(allocated(&c.sim), [ip_of(&r)]);
    // A fresh instance finds the IP through the Service's status (upstream leaked it).
    let fresh = load(&c.sim, ini(&c.sim, &c.sim.secret_key(), ""), &[])
        .await
        .expect("loads");
    fresh
        .load_balancer_delete(&svc, &scope())
        .await
        .into_result()
        .expect("delete again");
    assert!(allocated(&c.sim).is_empty());
}

#[tokio::test]
async fn only_rules_named_exactly_are_ours() {
    let c = cloud().await;
    let svc = web('d', vec![port(Protocol::Tcp, 80, 30080)]);
    let name = lbname(&svc);
    // Another Service's (or an operator's) rule whose name contains ours.
    c.sim.add_public_ip(SeedPublicIp {
        ip: "203.0.113.59".into(),
        zone: "zone1".into(),
        network: Some("k8s-net".into()),
        ..Default::default()
    });
    let decoy = c.sim.add_load_balancer_rule(SeedLbRule {
        name: format!("{name}-tcp-80-manual"),
        ip: "203.0.113.59".into(),
        network: "k8s-net".into(),
        protocol: "tcp".into(),
        public_port: 8080,
        private_port: 31000,
    });
    let r = ensure(&c, &svc, &NODES).await.expect("ensure");
    delete(&c, &common::apply(svc, &r)).await.expect("delete");
    let left = rules(&c.sim);
    assert_eq!(left.len(), 1, "{left:#?}");
    assert_eq!(left[0]["id"], decoy.as_str());
    assert!(allocated(&c.sim).contains(&"203.0.113.59".to_string()));
}

#[tokio::test]
async fn six_hundred_vms_are_all_found() {
    let c = cloud().await;
    for i in 0..600 {
        c.sim.add_vm(SeedVm {
            nics: vec![SeedNic {
                network: "k8s-net".into(),
                ip: format!("10.1.{}.{}", 100 + i / 250, 1 + i % 250),
                ip6: None,
            }],
            ..SeedVm::new(&format!("bulk-{i:03}"), "zone1")
        });
    }
    let svc = web('e', vec![port(Protocol::Tcp, 80, 30080)]);
    // The last VMs listed are beyond CloudStack's first page of 500.
    let names = ["bulk-000", "bulk-599", "k8s-node-3"];
    ensure(&c, &svc, &names).await.expect("ensure");
    assert_eq!(members(&rules(&c.sim)[0]), ids(&c.sim, &names));
    // The first page as upstream asks it (no page, no pagesize), then page 2 with the first
    // page's length as pagesize (CloudStack refuses page without pagesize).
    let pages: Vec<(Option<String>, Option<String>)> = c
        .sim
        .requests()
        .iter()
        .filter(|r| r.command == "listVirtualMachines")
        .map(|r| {
            (
                r.params.get("page").cloned(),
                r.params.get("pagesize").cloned(),
            )
        })
        .collect();
    assert_eq!(
        pages,
        [
            (None, None),
            (Some("2".to_string()), Some("500".to_string()))
        ]
    );
}

#[tokio::test]
async fn a_project_scopes_every_request() {
    let c = cloud().await;
    let project = c.sim.add_project("k8s");
    let network = c.sim.add_network(
        wasm_ccm_sim::cloudstack::SeedNetwork::isolated("proj-net", "zone1").in_project("k8s"),
    );
    c.sim.add_vm(
        SeedVm::new("proj-node-1", "zone1")
            .in_project("k8s")
            .nic(&network, "10.9.0.11"),
    );
    let driver = load(
        &c.sim,
        ini(&c.sim, &c.sim.secret_key(), "project-id = k8s\n"),
        &[],
    )
    .await
    .expect("loads");
    let m = driver
        .instance_metadata(&common::node("proj-node-1"), &scope())
        .await
        .into_result()
        .expect("metadata in the project");
    assert_eq!(m.addresses[0].address, "10.9.0.11");
    let svc = web('f', vec![port(Protocol::Tcp, 80, 30080)]);
    let r = driver
        .load_balancer_ensure(&svc, &nodes(&["proj-node-1"]), &scope())
        .await
        .into_result()
        .expect("ensure in the project");
    driver
        .load_balancer_delete(&common::apply(svc, &r), &scope())
        .await
        .into_result()
        .expect("delete in the project");
    assert!(rules(&c.sim).is_empty());
    assert!(allocated(&c.sim).is_empty());
    // Every read after the project lookup named the project.
    for r in c.sim.requests().iter().filter(|r| {
        r.command.starts_with("list")
            && ![
                "listProjects",
                "listLoadBalancerRuleInstances",
                "listNetworkACLLists",
                "listNetworkACLs",
                "listCapabilities",
            ]
            .contains(&r.command.as_str())
    }) {
        assert_eq!(r.params.get("projectid"), Some(&project), "{}", r.line());
    }
    // CreateLoadBalancerRuleCmd has no projectid (the rule follows its IP's owner).
    let creates: Vec<_> = c
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.command == "createLoadBalancerRule")
        .collect();
    assert!(!creates.is_empty());
    for r in creates {
        assert_eq!(r.params.get("projectid"), None, "{}", r.line());
    }
}

#[tokio::test]
async fn tcp_and_udp_on_one_port_is_refused_before_any_request() {
    // CloudStack refuses a second LB rule on an IP and port whatever its protocol (537), so the
    // Service is invalid-config, and nothing is associated (and billed) for it.
    let c = cloud().await;
    let svc = web(
        '6',
        vec![
            port(Protocol::Tcp, 53, 30053),
            port(Protocol::Udp, 53, 30054),
        ],
    );
    c.sim.clear_requests();
    let e = ensure(&c, &svc, &NODES).await.expect_err("refused");
    assert!(
        matches!(provider_error(e), ProviderError::InvalidConfig(ref m) if m.contains("port 53 is used by both TCP and UDP")),
    );
    assert!(c.sim.requests().is_empty(), "{:?}", c.sim.requests());
    assert!(rules(&c.sim).is_empty());
    assert!(allocated(&c.sim).is_empty());
}

#[tokio::test]
async fn before_4_18_no_cidrlist_and_no_churn() {
    let c = cloud().await;
    c.sim.set_version("4.17.2.0");
    let svc = annotate(
        web('7', vec![port(Protocol::Tcp, 80, 30080)]),
        &[(SOURCE_CIDRS, "10.0.0.0/8")],
    );
    let r = ensure(&c, &svc, &NODES).await.expect("ensure on 4.17");
    let creates: Vec<_> = c
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.command == "createLoadBalancerRule")
        .collect();
    assert_eq!(creates.len(), 1);
    assert_eq!(creates[0].params.get("cidrlist"), None);
    let all = rules(&c.sim);
    assert_eq!(all[0]["cidrlist"], "");
    // The annotation still restricts the firewall.
    assert_eq!(c.sim.firewall_rules()[0]["cidrlist"], "10.0.0.0/8");
    // Converged: the empty list is "open to all", which is what this server can hold.
    c.sim.clear_requests();
    ensure(&c, &common::apply(svc.clone(), &r), &NODES)
        .await
        .expect("ensure again");
    assert!(changes(&c.sim).is_empty(), "{:?}", changes(&c.sim));
    // With spec.loadBalancerSourceRanges the firewall follows those, so the annotation has no
    // effect at all on this version: a Warning event says so.
    let mut ranged = annotate(
        web('a', vec![port(Protocol::Tcp, 8080, 30880)]),
        &[(SOURCE_CIDRS, "10.0.0.0/8")],
    );
    ranged.load_balancer_source_ranges = vec!["198.51.100.0/24".into()];
    let o = c
        .driver
        .load_balancer_ensure(&ranged, &nodes(&NODES), &scope())
        .await;
    assert!(
        o.events
            .iter()
            .any(|e| e.kind == EventKind::Warning && e.reason == "SourceCidrsIgnored"),
        "{:?}",
        o.events
    );
    o.into_result().expect("ensure with ranges on 4.17");
    delete(&c, &ranged).await.expect("delete ranged");
    // On 4.18 the same driver instance keeps its cached version; a new one sends the list.
    c.sim.set_version("4.18.0.0");
    let newer = load(&c.sim, ini(&c.sim, &c.sim.secret_key(), ""), &[])
        .await
        .expect("loads");
    newer
        .load_balancer_ensure(&common::apply(svc, &r), &nodes(&NODES), &scope())
        .await
        .into_result()
        .expect("ensure on 4.18");
    assert_eq!(rules(&c.sim)[0]["cidrlist"], "10.0.0.0/8");
}

/// Every request of `log` keeps CloudStack's paging rule (`page` and `pagesize` together, the
/// size the server's own), every answer was 200, and each of `lists` was read past its first
/// page.
fn paged_within_the_rule(
    log: &[wasm_ccm_sim::cloudstack::LoggedRequest],
    size: &str,
    lists: &[&str],
) {
    assert!(!log.is_empty());
    for r in log {
        assert_eq!(r.status, 200, "{}", r.line());
        assert_eq!(
            r.params.contains_key("page"),
            r.params.contains_key("pagesize"),
            "{}",
            r.line()
        );
        if let Some(n) = r.params.get("pagesize") {
            assert_eq!(n, size, "{}", r.line());
        }
    }
    for list in lists {
        assert!(
            log.iter().any(
                |r| r.command == *list && r.params.get("page").map(String::as_str) == Some("2")
            ),
            "{list} never read its second page: {:?}",
            log.iter().map(|r| r.line()).collect::<Vec<_>>()
        );
    }
}

#[tokio::test]
async fn lists_follow_a_small_default_page_size() {
    let c = cloud().await;
    // default.page.size = 1: every list is one item a page.
    c.sim.set_page_size_limit(1);
    let svc = web(
        '8',
        vec![
            port(Protocol::Tcp, 80, 30080),
            port(Protocol::Udp, 81, 30081),
        ],
    );
    let r = ensure(&c, &svc, &NODES).await.expect("ensure");
    let all = rules(&c.sim);
    assert_eq!(all.len(), 2);
    for rule in &all {
        assert_eq!(members(rule), ids(&c.sim, &NODES));
    }
    let mut log = c.sim.requests();
    c.sim.clear_requests();
    ensure(&c, &common::apply(svc.clone(), &r), &NODES)
        .await
        .expect("ensure again");
    assert!(changes(&c.sim).is_empty(), "{:?}", changes(&c.sim));
    delete(&c, &common::apply(svc, &r)).await.expect("delete");
    assert!(rules(&c.sim).is_empty());
    assert!(allocated(&c.sim).is_empty());
    log.extend(c.sim.requests());
    // Backend resolution (listVirtualMachines), the rules by keyword, their members and the
    // firewall rules of the IP: each past one page (the IP look-ups by tag:
    // the_tag_lookup_pages_and_a_second_match_is_still_seen).
    paged_within_the_rule(
        &log,
        "1",
        &[
            "listVirtualMachines",
            "listLoadBalancerRules",
            "listLoadBalancerRuleInstances",
            "listFirewallRules",
        ],
    );
}

/// The instance look-ups by name and by ID page within the rule too, and a second VM of the
/// node's name on a later page still makes the match ambiguous.
#[tokio::test]
async fn instance_lookups_page_within_the_rule() {
    let c = cloud().await;
    c.sim.set_page_size_limit(1);
    // `name` is a substring filter: k8s-node-1 matches k8s-node-1 and k8s-node-10.
    c.sim.add_vm(SeedVm {
        nics: vec![SeedNic {
            network: "k8s-net".into(),
            ip: "10.1.1.210".into(),
            ip6: None,
        }],
        ..SeedVm::new("k8s-node-10", "zone1")
    });
    let m = c
        .driver
        .instance_metadata(&common::node("k8s-node-1"), &scope())
        .await
        .into_result()
        .expect("metadata");
    assert_eq!(
        m.provider_id,
        format!("external-cloudstack://{}", vm_id(&c.sim, "k8s-node-1"))
    );
    let mut by_id = common::node("x");
    by_id.provider_id = m.provider_id.clone();
    assert!(
        c.driver
            .instance_exists(&by_id, &scope())
            .await
            .into_result()
            .expect("exists")
    );
    paged_within_the_rule(&c.sim.requests(), "1", &["listVirtualMachines"]);
    // A second VM of the same name but for case (CloudStack keeps host names unique per
    // network only exactly), listed after the first: ambiguous, nothing bound.
    c.sim.add_vm(SeedVm {
        nics: vec![SeedNic {
            network: "k8s-net".into(),
            ip: "10.1.1.211".into(),
            ip6: None,
        }],
        ..SeedVm::new("K8S-NODE-10", "zone1")
    });
    let e = c
        .driver
        .instance_metadata(&common::node("k8s-node-10"), &scope())
        .await
        .into_result()
        .expect_err("two VMs of that name");
    assert!(
        matches!(provider_error(e), ProviderError::Permanent(ref m) if m.contains("2 CloudStack VMs are named")),
    );
}

/// The look-up of the IPs tagged for a Service pages too: with one item a page, the second
/// tagged IP is only on page 2, and it still makes the answer ambiguous (nothing touched).
#[tokio::test]
async fn the_tag_lookup_pages_and_a_second_match_is_still_seen() {
    let c = cloud().await;
    c.sim.set_page_size_limit(1);
    let svc = web('p', vec![port(Protocol::Tcp, 80, 30080)]);
    let lb = lbname(&svc);
    for address in ["203.0.113.71", "203.0.113.72"] {
        let id = c.sim.add_public_ip(SeedPublicIp {
            ip: address.into(),
            zone: "zone1".into(),
            network: Some("k8s-net".into()),
            ..Default::default()
        });
        c.sim.add_tag("PublicIpAddress", &id, TAG_LB, &lb);
    }
    let e = ensure(&c, &svc, &NODES).await.expect_err("ambiguous");
    assert!(
        matches!(provider_error(e), ProviderError::Permanent(m) if m.contains("203.0.113.71") && m.contains("203.0.113.72"))
    );
    assert!(commands(&c.sim).is_empty(), "{:?}", commands(&c.sim));
    let log = c.sim.requests();
    paged_within_the_rule(&log, "1", &["listPublicIpAddresses"]);
    assert!(log.iter().any(|r| r.command == "listPublicIpAddresses"
        && r.params.get("page").map(String::as_str) == Some("2")
        && r.params.contains_key("tags[0].key")));
}

/// On a VPC tier the ACL entries are read past one page as well.
#[tokio::test]
async fn acl_entries_page_within_the_rule() {
    let c = cloud().await;
    c.sim.set_page_size_limit(1);
    let svc = web(
        'q',
        vec![
            port(Protocol::Tcp, 443, 30443),
            port(Protocol::Udp, 444, 30444),
        ],
    );
    let r = ensure(&c, &svc, &["k8s-vpc-node-1"]).await.expect("ensure");
    c.sim.clear_requests();
    ensure(&c, &common::apply(svc.clone(), &r), &["k8s-vpc-node-1"])
        .await
        .expect("ensure again");
    assert!(changes(&c.sim).is_empty(), "{:?}", changes(&c.sim));
    delete(&c, &common::apply(svc, &r)).await.expect("delete");
    assert!(allocated(&c.sim).is_empty());
    paged_within_the_rule(
        &c.sim.requests(),
        "1",
        &["listNetworkACLs", "listLoadBalancerRules"],
    );
}

/// A driver instance that knows nothing of earlier ones (a new leader, a restarted pod).
async fn fresh(sim: &CloudstackSim) -> Driver {
    load(sim, ini(sim, &sim.secret_key(), ""), &[])
        .await
        .expect("loads")
}

/// Whether a public IP (as the simulator renders it) carries the Service's ownership tag.
fn tagged_for(ip: &Value, lbname: &str) -> bool {
    ip["tags"].as_array().is_some_and(|tags| {
        tags.iter()
            .any(|t| t["key"] == TAG_LB && t["value"] == lbname)
    })
}

/// The allocated public IPs (not source NAT) as rendered.
fn allocated_ips(sim: &CloudstackSim) -> Vec<Value> {
    sim.public_ips()
        .into_iter()
        .filter(|ip| ip["state"] != "Free" && ip["issourcenat"] != true)
        .collect()
}

fn count(sim: &CloudstackSim, command: &str) -> usize {
    sim.mutations()
        .iter()
        .filter(|r| r.command == command)
        .count()
}

/// Kills the controller right after `command` was served once, in the middle of an ensure:
/// every later request fails, so nothing after that call reaches the cloud. Then the cloud
/// finishes the jobs it accepted (`settle`), or only those of `settle_only`.
async fn crash_after(c: &Cloud, svc: &Service, command: &str, settle_only: Option<&str>) {
    crash_after_on(c, svc, &NODES, command, settle_only).await;
}

/// [`crash_after`] for a Service on `names`' network.
async fn crash_after_on(
    c: &Cloud,
    svc: &Service,
    names: &[&str],
    command: &str,
    settle_only: Option<&str>,
) {
    c.sim.faults().kill_after(Match::command(command), 1, 503);
    let e = ensure(c, svc, names)
        .await
        .expect_err("the ensure is cut short");
    assert!(c.sim.faults().killed(), "{command} was never sent: {e:?}");
    c.sim.faults().clear();
    match settle_only {
        Some(only) => c.sim.settle_jobs(only),
        None => c.sim.settle(),
    }
}

/// Issue 22, item 3: a controller killed between any two cloud calls of an ensure leaves no
/// public IP behind and never makes a second one. The next ensure of a fresh instance adopts
/// what was made; a delete of a fresh instance releases it, even though the Service's status
/// never named the IP.
#[tokio::test]
async fn a_crash_between_two_calls_neither_leaks_nor_duplicates() {
    let points = [
        "createTags",
        "createLoadBalancerRule",
        "assignToLoadBalancerRule",
        "createFirewallRule",
    ];
    for point in points {
        let c = cloud().await;
        let svc = web('e', vec![port(Protocol::Tcp, 80, 30080)]);
        let lb = lbname(&svc);
        crash_after(&c, &svc, point, None).await;
        let left = allocated_ips(&c.sim);
        assert_eq!(left.len(), 1, "{point}: {left:#?}");
        assert!(tagged_for(&left[0], &lb), "{point}: {left:#?}");

        // The next ensure, by a fresh instance: the same IP, no second association.
        let r = fresh(&c.sim)
            .await
            .load_balancer_ensure(&svc, &nodes(&NODES), &scope())
            .await
            .into_result()
            .unwrap_or_else(|e| panic!("{point}: ensure after the crash: {e:?}"));
        assert_eq!(ip_of(&r), left[0]["ipaddress"], "{point}: adopted");
        assert_eq!(allocated(&c.sim), [ip_of(&r)], "{point}");
        assert_eq!(count(&c.sim, "associateIpAddress"), 1, "{point}");
        let now = rules(&c.sim);
        assert_eq!(now.len(), 1, "{point}: {now:#?}");
        assert_eq!(members(&now[0]), ids(&c.sim, &NODES), "{point}");
        assert_eq!(c.sim.firewall_rules().len(), 1, "{point}");
        let done = common::apply(svc, &r);
        fresh(&c.sim)
            .await
            .load_balancer_delete(&done, &scope())
            .await
            .into_result()
            .unwrap_or_else(|e| panic!("{point}: delete: {e:?}"));
        assert!(allocated(&c.sim).is_empty(), "{point}");
        assert!(rules(&c.sim).is_empty(), "{point}");
        assert!(c.sim.firewall_rules().is_empty(), "{point}");
        assert!(c.sim.tags().is_empty(), "{point}: {:?}", c.sim.tags());

        // The Service is deleted right after the crash: a fresh instance's delete, with no IP
        // in the Service's status, releases everything.
        let svc = web('f', vec![port(Protocol::Tcp, 80, 30080)]);
        crash_after(&c, &svc, point, None).await;
        assert_eq!(allocated(&c.sim).len(), 1, "{point}");
        fresh(&c.sim)
            .await
            .load_balancer_delete(&svc, &scope())
            .await
            .into_result()
            .unwrap_or_else(|e| panic!("{point}: delete after the crash: {e:?}"));
        assert!(
            allocated(&c.sim).is_empty(),
            "{point}: {:#?}",
            allocated_ips(&c.sim)
        );
        assert!(rules(&c.sim).is_empty(), "{point}");
        assert!(c.sim.firewall_rules().is_empty(), "{point}");
        assert_eq!(c.sim.pending_jobs(), 0, "{point}");
    }
}

/// The association of a killed controller still runs when the next one looks: its IP is
/// tagged but `Allocating`. Ensure and delete wait for it (`retry-after`, nothing created or
/// released), then the ensure adopts it.
#[tokio::test]
async fn an_association_still_running_is_waited_for_then_adopted() {
    let c = cloud().await;
    let svc = web('g', vec![port(Protocol::Tcp, 80, 30080)]);
    crash_after(&c, &svc, "createTags", Some("createTags")).await;
    let left = allocated_ips(&c.sim);
    assert_eq!(left.len(), 1, "{left:#?}");
    assert_eq!(left[0]["state"], "Allocating");
    c.sim.clear_requests();
    let driver = fresh(&c.sim).await;
    let e = driver
        .load_balancer_ensure(&svc, &nodes(&NODES), &scope())
        .await
        .into_result()
        .expect_err("waits");
    let ProviderError::RetryAfter(retry) = provider_error(e) else {
        panic!("expected retry-after");
    };
    assert!(
        retry.reason.contains("still associating"),
        "{}",
        retry.reason
    );
    let e = driver
        .load_balancer_delete(&svc, &scope())
        .await
        .into_result()
        .expect_err("waits too");
    assert!(matches!(provider_error(e), ProviderError::RetryAfter(_)));
    assert!(commands(&c.sim).is_empty(), "{:?}", commands(&c.sim));
    c.sim.settle();
    let r = driver
        .load_balancer_ensure(&svc, &nodes(&NODES), &scope())
        .await
        .into_result()
        .expect("adopts");
    assert_eq!(ip_of(&r), left[0]["ipaddress"]);
    assert_eq!(allocated(&c.sim), [ip_of(&r)]);
}

/// The window that stays open: from sending `associateIpAddress` until `createTags` is
/// accepted, only the killed instance knew the IP. CloudStack takes no name or tag with the
/// association, so the next instance cannot find it: it associates another one and the first
/// stays allocated, untagged (the README's "Known limits").
#[tokio::test]
async fn the_window_left_is_between_the_association_and_its_tag() {
    let c = cloud().await;
    let svc = web('h', vec![port(Protocol::Tcp, 80, 30080)]);
    let lb = lbname(&svc);
    crash_after(&c, &svc, "associateIpAddress", None).await;
    let stray = allocated_ips(&c.sim);
    assert_eq!(stray.len(), 1);
    assert!(!tagged_for(&stray[0], &lb));
    let r = fresh(&c.sim)
        .await
        .load_balancer_ensure(&svc, &nodes(&NODES), &scope())
        .await
        .into_result()
        .expect("ensure");
    assert_ne!(ip_of(&r), stray[0]["ipaddress"]);
    let now = allocated_ips(&c.sim);
    assert_eq!(now.len(), 2, "{now:#?}");
    assert_eq!(now.iter().filter(|ip| tagged_for(ip, &lb)).count(), 1);
    fresh(&c.sim)
        .await
        .load_balancer_delete(&common::apply(svc, &r), &scope())
        .await
        .into_result()
        .expect("delete");
    assert_eq!(
        allocated(&c.sim),
        [stray[0]["ipaddress"].as_str().unwrap_or_default()]
    );
}

/// Two IPs tagged for one Service (e.g. an operator copied a tag): which one is the load
/// balancer's cannot be told, so ensure and delete refuse and change nothing.
#[tokio::test]
async fn two_ips_tagged_for_one_service_are_refused_and_nothing_is_touched() {
    let c = cloud().await;
    let svc = web('i', vec![port(Protocol::Tcp, 80, 30080)]);
    let lb = lbname(&svc);
    for address in ["203.0.113.61", "203.0.113.62"] {
        let id = c.sim.add_public_ip(SeedPublicIp {
            ip: address.into(),
            zone: "zone1".into(),
            network: Some("k8s-net".into()),
            ..Default::default()
        });
        c.sim.add_tag("PublicIpAddress", &id, TAG_LB, &lb);
    }
    let e = ensure(&c, &svc, &NODES).await.expect_err("ambiguous");
    assert!(
        matches!(provider_error(e), ProviderError::Permanent(m) if m.contains("203.0.113.61") && m.contains("203.0.113.62"))
    );
    let e = delete(&c, &svc).await.expect_err("ambiguous");
    assert!(matches!(provider_error(e), ProviderError::Permanent(m) if m.contains("ambiguous")));
    assert!(commands(&c.sim).is_empty(), "{:?}", commands(&c.sim));
    assert_eq!(allocated(&c.sim).len(), 2);

    // One of them carrying the rules and the other the tag is just as ambiguous for delete.
    let c = cloud().await;
    let r = ensure(&c, &svc, &NODES).await.expect("ensure");
    let id = c.sim.add_public_ip(SeedPublicIp {
        ip: "203.0.113.63".into(),
        zone: "zone1".into(),
        network: Some("k8s-net".into()),
        ..Default::default()
    });
    c.sim.add_tag("PublicIpAddress", &id, TAG_LB, &lb);
    c.sim.clear_requests();
    let e = delete(&c, &common::apply(svc, &r))
        .await
        .expect_err("ambiguous");
    assert!(matches!(provider_error(e), ProviderError::Permanent(m) if m.contains("203.0.113.63")));
    assert!(commands(&c.sim).is_empty(), "{:?}", commands(&c.sim));
    assert_eq!(rules(&c.sim).len(), 1);
}

/// A requested `spec.loadBalancerIP` the driver associated, killed before the ensure could
/// write the "associated by controller" annotation: the tag proves it is ours, so a delete
/// releases it (without the tag it would be taken for the user's own address and kept).
#[tokio::test]
async fn a_requested_ip_tagged_before_a_crash_is_released() {
    let c = cloud().await;
    let mut svc = web('j', vec![port(Protocol::Tcp, 80, 30080)]);
    svc.load_balancer_ip = Some("203.0.113.44".into());
    crash_after(&c, &svc, "createLoadBalancerRule", None).await;
    assert_eq!(allocated(&c.sim), ["203.0.113.44"]);
    fresh(&c.sim)
        .await
        .load_balancer_delete(&svc, &scope())
        .await
        .into_result()
        .expect("delete");
    assert!(allocated(&c.sim).is_empty());
    assert!(rules(&c.sim).is_empty());
}

/// A kill in the middle of a delete: the next delete, by a fresh instance, finds the IP by its
/// tag even when the Service's status names no IP (hostname ingress) and no rule is left.
#[tokio::test]
async fn a_crash_in_the_middle_of_a_delete_is_finished_by_the_next_one() {
    for point in ["deleteFirewallRule", "deleteLoadBalancerRule"] {
        let c = cloud().await;
        let svc = annotate(
            web('k', vec![port(Protocol::Tcp, 80, 30080)]),
            &[(HOSTNAME, "web.example.com")],
        );
        let r = ensure(&c, &svc, &NODES).await.expect("ensure");
        let svc = common::apply(svc, &r);
        assert!(svc.ingress[0].ip.is_none());
        c.sim.faults().kill_after(Match::command(point), 1, 503);
        delete(&c, &svc).await.expect_err("cut short");
        assert!(c.sim.faults().killed(), "{point}");
        c.sim.faults().clear();
        c.sim.settle();
        assert_eq!(allocated(&c.sim).len(), 1, "{point}");
        fresh(&c.sim)
            .await
            .load_balancer_delete(&svc, &scope())
            .await
            .into_result()
            .unwrap_or_else(|e| panic!("{point}: {e:?}"));
        assert!(allocated(&c.sim).is_empty(), "{point}");
        assert!(rules(&c.sim).is_empty(), "{point}");
        assert!(c.sim.firewall_rules().is_empty(), "{point}");
    }
}

/// A failed association: the address goes back to the pool and our tags are removed from it,
/// so that whoever gets it next is not taken for this Service.
#[tokio::test]
async fn a_failed_association_leaves_no_tag() {
    let c = cloud().await;
    c.sim.fail_next_jobs("associateIpAddress", 1);
    let svc = web('l', vec![port(Protocol::Tcp, 80, 30080)]);
    let e = ensure(&c, &svc, &NODES).await.expect_err("the job fails");
    assert!(
        matches!(provider_error(e), ProviderError::Transient(m) if m.contains("associateIpAddress"))
    );
    assert!(allocated(&c.sim).is_empty());
    assert!(c.sim.tags().is_empty(), "{:?}", c.sim.tags());
    assert_eq!(
        commands(&c.sim),
        ["associateIpAddress", "createTags", "deleteTags"]
    );
    ensure(&c, &svc, &NODES).await.expect("ensure again");
    assert_eq!(allocated(&c.sim).len(), 1);
}

/// The same on a VPC tier, where the ports are opened by ACL entries: a kill after each call
/// leaves nothing behind and nothing twice.
#[tokio::test]
async fn a_crash_on_a_vpc_tier_neither_leaks_nor_duplicates() {
    const VPC_NODES: [&str; 1] = ["k8s-vpc-node-1"];
    for point in ["createTags", "createLoadBalancerRule", "createNetworkACL"] {
        let c = cloud().await;
        let acl_before = c.sim.network_acls().len();
        let svc = web('m', vec![port(Protocol::Tcp, 443, 30443)]);
        crash_after_on(&c, &svc, &VPC_NODES, point, None).await;
        let r = fresh(&c.sim)
            .await
            .load_balancer_ensure(&svc, &nodes(&VPC_NODES), &scope())
            .await
            .into_result()
            .unwrap_or_else(|e| panic!("{point}: {e:?}"));
        assert_eq!(allocated(&c.sim), [ip_of(&r)], "{point}");
        assert_eq!(count(&c.sim, "associateIpAddress"), 1, "{point}");
        assert_eq!(rules(&c.sim).len(), 1, "{point}");
        assert_eq!(c.sim.network_acls().len(), acl_before + 1, "{point}");
        fresh(&c.sim)
            .await
            .load_balancer_delete(&svc, &scope())
            .await
            .into_result()
            .unwrap_or_else(|e| panic!("{point}: delete: {e:?}"));
        assert!(allocated(&c.sim).is_empty(), "{point}");
        assert!(rules(&c.sim).is_empty(), "{point}");
        assert_eq!(c.sim.network_acls().len(), acl_before, "{point}");
    }
}

/// A fresh instance with its own job budget (see [`fresh`]).
async fn fresh_with(sim: &CloudstackSim, env: &[(&str, &str)]) -> Driver {
    load(sim, ini(sim, &sim.secret_key(), ""), env)
        .await
        .expect("loads")
}

async fn get_on(driver: &Driver, svc: &Service) -> Result<Option<Vec<Ingress>>, CallError> {
    driver.load_balancer_get(svc, &scope()).await.result
}

fn retry_reason(e: CallError) -> String {
    match provider_error(e) {
        ProviderError::RetryAfter(retry) => retry.reason,
        other => panic!("expected retry-after, got {other:?}"),
    }
}

/// BENCHMARKS.md, RELIABILITY, finding 3 (soak seed 42): an IP the driver associated and tagged
/// without rules yet (the ensure was killed) is a load balancer `get` reports, so the host,
/// which asks `get` before it deletes, calls delete when the Service stops wanting a load
/// balancer, and the IP is released. `get` answers the IP (or the hostname) as the ingress. A
/// user's own `spec.loadBalancerIP` without rules is never tagged and not reported.
#[tokio::test]
async fn a_tagged_ip_without_rules_is_seen_by_get_and_released_by_delete() {
    let c = cloud().await;
    let svc = web('n', vec![port(Protocol::Tcp, 80, 30080)]);
    crash_after(&c, &svc, "createTags", None).await;
    let left = allocated_ips(&c.sim);
    assert_eq!(left.len(), 1, "{left:#?}");
    assert!(tagged_for(&left[0], &lbname(&svc)));
    assert!(rules(&c.sim).is_empty());

    let driver = fresh(&c.sim).await;
    let got = get_on(&driver, &svc).await.expect("get");
    assert_eq!(
        got,
        Some(vec![Ingress {
            ip: left[0]["ipaddress"].as_str().map(str::to_string),
            hostname: None,
            ip_mode: None,
        }])
    );
    let named = annotate(svc.clone(), &[(HOSTNAME, "web.example.com")]);
    let got = get_on(&driver, &named).await.expect("get");
    assert_eq!(
        got.expect("exists")[0].hostname.as_deref(),
        Some("web.example.com")
    );

    driver
        .load_balancer_delete(&svc, &scope())
        .await
        .into_result()
        .expect("delete");
    assert!(allocated(&c.sim).is_empty(), "{:#?}", allocated_ips(&c.sim));
    assert!(c.sim.tags().is_empty(), "{:?}", c.sim.tags());
    assert_eq!(get_on(&driver, &svc).await.expect("get"), None);

    // A user's own address, allocated beforehand and never tagged: not a load balancer of ours
    // while it has no rules.
    c.sim.add_public_ip(SeedPublicIp {
        ip: "203.0.113.71".into(),
        zone: "zone1".into(),
        network: Some("k8s-net".into()),
        ..Default::default()
    });
    let mut own = web('o', vec![port(Protocol::Tcp, 80, 30080)]);
    own.load_balancer_ip = Some("203.0.113.71".into());
    assert_eq!(get_on(&driver, &own).await.expect("get"), None);
    assert_eq!(allocated(&c.sim), ["203.0.113.71"]);
}

/// BENCHMARKS.md, RELIABILITY, finding 4 (soak seed 2026), in one instance: the ensure answered
/// `retry-after` while the association (and its tag) still ran, then the Service stopped
/// wanting a load balancer. `get` reports the claimed IP, delete answers `retry-after` while it
/// is `Allocating` (it used to release nothing and succeed, and the host forgot the Service),
/// then releases it; the Service's next ensure makes exactly one IP.
#[tokio::test]
async fn an_ip_still_associating_is_found_by_get_and_waited_for_by_delete() {
    let c = cloud_with(
        CloudstackOptions {
            job_polls: 1_000,
            ..Default::default()
        },
        &[("CLOUDSTACK_JOB_BUDGET", "0s")],
    )
    .await;
    let svc = web('p', vec![port(Protocol::Tcp, 80, 30080)]);
    let e = ensure(&c, &svc, &NODES).await.expect_err("jobs still run");
    assert!(retry_reason(e).contains("still running"));
    let left = allocated_ips(&c.sim);
    assert_eq!(left.len(), 1, "{left:#?}");
    assert_eq!(left[0]["state"], "Allocating");

    let got = get_on(&c.driver, &svc).await.expect("get");
    assert_eq!(
        got.expect("the claimed IP is a load balancer")[0]
            .ip
            .as_deref(),
        left[0]["ipaddress"].as_str()
    );
    c.sim.clear_requests();
    let e = delete(&c, &svc)
        .await
        .expect_err("waits for the association");
    retry_reason(e);
    assert!(commands(&c.sim).is_empty(), "{:?}", commands(&c.sim));
    assert_eq!(allocated(&c.sim).len(), 1);

    // The association ends (the tag's job too); the next delete releases the IP.
    c.sim.settle();
    let mut deleted = false;
    for _ in 0..5 {
        match delete(&c, &svc).await {
            Ok(()) => {
                deleted = true;
                break;
            }
            Err(e) => {
                retry_reason(e);
                c.sim.settle();
            }
        }
    }
    assert!(deleted);
    assert!(allocated(&c.sim).is_empty(), "{:#?}", allocated_ips(&c.sim));
    assert_eq!(get_on(&c.driver, &svc).await.expect("get"), None);

    // The Service wants a load balancer again: one IP at a time.
    for _ in 0..20 {
        match ensure(&c, &svc, &NODES).await {
            Ok(r) => {
                assert_eq!(allocated(&c.sim), [ip_of(&r)]);
                break;
            }
            Err(e) => {
                retry_reason(e);
                assert!(allocated(&c.sim).len() <= 1, "{:#?}", allocated_ips(&c.sim));
                c.sim.settle();
            }
        }
    }
    assert_eq!(allocated(&c.sim).len(), 1);
    assert_eq!(count(&c.sim, "associateIpAddress"), 1);
}

/// Finding 4 with the instance replaced while both the association and its `createTags` job
/// still run: the IP is `Allocating` and its tag not visible yet. A fresh instance can tell
/// neither whose it is nor that it is nobody's: `get`, ensure and delete wait (`retry-after`),
/// nothing is associated or released; once the tag shows the IP is found by it and adopted (or
/// released).
#[tokio::test]
async fn an_untagged_ip_still_associating_is_waited_for_never_duplicated() {
    let budget = [("CLOUDSTACK_JOB_BUDGET", "0s")];
    for adopt in [true, false] {
        let c = cloud_with(
            CloudstackOptions {
                job_polls: 1_000,
                ..Default::default()
            },
            &budget,
        )
        .await;
        let svc = web('q', vec![port(Protocol::Tcp, 80, 30080)]);
        ensure(&c, &svc, &NODES).await.expect_err("jobs still run");
        let left = allocated_ips(&c.sim);
        assert_eq!(left.len(), 1, "{left:#?}");
        assert!(c.sim.tags().is_empty(), "the tag's job still runs");
        c.sim.clear_requests();

        let driver = fresh_with(&c.sim, &budget).await;
        let e = get_on(&driver, &svc).await.expect_err("get waits");
        assert!(retry_reason(e).contains("no wasm-ccm/load-balancer tag yet"));
        let e = driver
            .load_balancer_ensure(&svc, &nodes(&NODES), &scope())
            .await
            .into_result()
            .expect_err("ensure waits");
        assert!(retry_reason(e).contains("no wasm-ccm/load-balancer tag yet"));
        let e = driver
            .load_balancer_delete(&svc, &scope())
            .await
            .into_result()
            .expect_err("delete waits");
        retry_reason(e);
        assert!(commands(&c.sim).is_empty(), "{:?}", commands(&c.sim));

        // The tag shows while the association still runs: found by it, still waited for.
        c.sim.settle_jobs("createTags");
        assert!(get_on(&driver, &svc).await.expect("get").is_some());
        let e = driver
            .load_balancer_delete(&svc, &scope())
            .await
            .into_result()
            .expect_err("delete waits for the association");
        assert!(retry_reason(e).contains("still associating"));
        assert!(commands(&c.sim).is_empty(), "{:?}", commands(&c.sim));

        c.sim.settle();
        c.sim.set_job_polls(0);
        let driver = fresh(&c.sim).await;
        if adopt {
            let r = driver
                .load_balancer_ensure(&svc, &nodes(&NODES), &scope())
                .await
                .into_result()
                .expect("adopts");
            assert_eq!(ip_of(&r), left[0]["ipaddress"]);
            assert_eq!(allocated(&c.sim), [ip_of(&r)]);
        } else {
            driver
                .load_balancer_delete(&svc, &scope())
                .await
                .into_result()
                .expect("releases");
            assert!(allocated(&c.sim).is_empty());
        }
        assert_eq!(
            count(&c.sim, "associateIpAddress"),
            0,
            "adopt {adopt}: no second association"
        );
    }
}

/// A poll of the association's job that fails (a 5xx) says nothing about the job: the driver
/// keeps its claim and the job, and does not take the association for failed (it used to drop
/// the claim, and the next ensure associated a second IP while the first, untagged, stayed).
#[tokio::test]
async fn a_failed_poll_is_not_a_failed_association() {
    let c = cloud().await;
    let svc = web('r', vec![port(Protocol::Tcp, 80, 30080)]);
    c.sim
        .faults()
        .fail_next(Match::command("queryAsyncJobResult"), 503, 2);
    ensure(&c, &svc, &NODES).await.expect_err("the polls fail");
    c.sim.faults().clear();
    assert_eq!(allocated(&c.sim).len(), 1);
    assert!(!commands(&c.sim).contains(&"deleteTags".to_string()));
    let r = ensure(&c, &svc, &NODES).await.expect("ensure again");
    assert_eq!(allocated(&c.sim), [ip_of(&r)]);
    assert_eq!(count(&c.sim, "associateIpAddress"), 1);
    assert!(tagged_for(&allocated_ips(&c.sim)[0], &lbname(&svc)));
}

/// Found by the 5-minute soak (seed 2026) once findings 3 and 4 were fixed: an association
/// that fails while no one watches it (its polls failed, or the instance was replaced) leaves
/// our tags on the address CloudStack gives back (a rollback keeps tags). The next Service to
/// get that address had its `createTags` refused ("tag … already on …") and the address stayed
/// tagged for the first Service: a leak, and an ensure that never succeeded. Now a call that
/// learns of the failure removes the tags, and tagging an address we associated replaces stale
/// tags of ours.
#[tokio::test]
async fn a_failed_association_seen_late_leaves_no_tag_and_stale_tags_are_replaced() {
    // The failure is learned by the next call (the polls of the first one failed).
    let c = cloud().await;
    let svc = web('s', vec![port(Protocol::Tcp, 80, 30080)]);
    c.sim.fail_next_jobs("associateIpAddress", 1);
    c.sim
        .faults()
        .fail_next(Match::command("queryAsyncJobResult"), 503, 2);
    ensure(&c, &svc, &NODES).await.expect_err("the polls fail");
    c.sim.faults().clear();
    delete(&c, &svc).await.expect("delete");
    assert!(allocated(&c.sim).is_empty(), "{:#?}", allocated_ips(&c.sim));
    assert!(c.sim.tags().is_empty(), "{:?}", c.sim.tags());

    // No one learns of it (the instance is gone): the next owner of the address replaces the
    // stale tags.
    let c = cloud().await;
    let gone = web('t', vec![port(Protocol::Tcp, 80, 30080)]);
    c.sim.fail_next_jobs("associateIpAddress", 1);
    crash_after(&c, &gone, "createTags", Some("createTags")).await;
    c.sim.settle();
    assert!(allocated(&c.sim).is_empty());
    assert!(!c.sim.tags().is_empty(), "the rollback keeps the tags");
    let next = web('u', vec![port(Protocol::Tcp, 80, 30080)]);
    let r = fresh(&c.sim)
        .await
        .load_balancer_ensure(&next, &nodes(&NODES), &scope())
        .await
        .into_result()
        .expect("ensure");
    let ips = allocated_ips(&c.sim);
    assert_eq!(allocated(&c.sim), [ip_of(&r)]);
    assert!(tagged_for(&ips[0], &lbname(&next)), "{ips:#?}");
    assert!(!tagged_for(&ips[0], &lbname(&gone)), "{ips:#?}");
    assert!(
        c.sim
            .tags()
            .iter()
            .all(|t| t["value"] != lbname(&gone).as_str()),
        "{:?}",
        c.sim.tags()
    );
}

/// The Warning events of reason `reason` in `events`.
fn warnings(events: &[wasm_ccm_runtime::DriverEvent], reason: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.kind == EventKind::Warning && e.reason == reason)
        .map(|e| e.message.clone())
        .collect()
}

/// Issue 28: a node whose VM CloudStack refuses as a member (`Destroyed`, `Expunging`; an
/// `Error` VM never serves) is left out before the assignment, named in a Warning event, and
/// the other nodes are the members (CloudStack would refuse the whole assignment for it).
#[tokio::test]
async fn a_vm_cloudstack_refuses_is_left_out_and_the_others_get_traffic() {
    for (i, state) in ["Destroyed", "Expunging", "Error"].into_iter().enumerate() {
        let c = cloud().await;
        let node2 = vm_id(&c.sim, "k8s-node-2");
        assert!(c.sim.set_vm_state(&node2, state));
        let svc = web(
            char::from(b'r' + i as u8),
            vec![port(Protocol::Tcp, 80, 30080)],
        );
        let o = c
            .driver
            .load_balancer_ensure(&svc, &nodes(&NODES), &scope())
            .await;
        let left = warnings(&o.events, "BackendsLeftOut");
        o.into_result().expect(state);
        assert_eq!(
            members(&rules(&c.sim)[0]),
            ids(&c.sim, &["k8s-node-1", "k8s-node-3"]),
            "{state}"
        );
        assert_eq!(left.len(), 1, "{state}: {left:?}");
        assert!(
            left[0].contains("k8s-node-2") && left[0].contains(state),
            "{state}: {left:?}"
        );
        // One assignment, never refused.
        assert_eq!(count(&c.sim, "assignToLoadBalancerRule"), 1, "{state}");
        // The same for an update of the members.
        let node3 = vm_id(&c.sim, "k8s-node-3");
        assert!(c.sim.set_vm_state(&node3, state));
        assert!(c.sim.set_vm_state(&node2, "Running"));
        let o = c
            .driver
            .load_balancer_update(&svc, &nodes(&NODES), &scope())
            .await;
        let left = warnings(&o.events, "BackendsLeftOut");
        o.into_result().expect("update");
        assert_eq!(
            members(&rules(&c.sim)[0]),
            ids(&c.sim, &["k8s-node-1", "k8s-node-2"]),
            "{state}"
        );
        assert!(left.iter().any(|m| m.contains("k8s-node-3")), "{left:?}");
    }
}

/// A node whose VM is on another network than the load balancer's is left out with a Warning:
/// the majority's network for a new load balancer, the rules' network for an existing one. A
/// tie between networks is ambiguous: refused before anything is created.
#[tokio::test]
async fn a_vm_on_another_network_is_left_out_and_a_tie_is_refused() {
    let c = cloud().await;
    let svc = web('u', vec![port(Protocol::Tcp, 80, 30080)]);
    let with_vpc = ["k8s-node-1", "k8s-node-2", "k8s-vpc-node-1"];
    let o = c
        .driver
        .load_balancer_ensure(&svc, &nodes(&with_vpc), &scope())
        .await;
    let left = warnings(&o.events, "BackendsLeftOut");
    let r = o.into_result().expect("ensure");
    assert_eq!(
        members(&rules(&c.sim)[0]),
        ids(&c.sim, &["k8s-node-1", "k8s-node-2"])
    );
    assert!(
        left.len() == 1 && left[0].contains("k8s-vpc-node-1"),
        "{left:?}"
    );
    // The rules fix the network: one node left on k8s-net still keeps it.
    let o = c
        .driver
        .load_balancer_update(
            &common::apply(svc.clone(), &r),
            &nodes(&["k8s-node-3", "k8s-vpc-node-1"]),
            &scope(),
        )
        .await;
    let left = warnings(&o.events, "BackendsLeftOut");
    o.into_result().expect("update");
    assert_eq!(members(&rules(&c.sim)[0]), ids(&c.sim, &["k8s-node-3"]));
    assert!(
        left.iter().any(|m| m.contains("k8s-vpc-node-1")),
        "{left:?}"
    );

    // One node on each network: which one is meant cannot be told.
    let c = cloud().await;
    let e = ensure(&c, &svc, &["k8s-node-1", "k8s-vpc-node-1"])
        .await
        .expect_err("a tie");
    assert!(
        matches!(provider_error(e), ProviderError::Permanent(ref m) if m.contains("different networks")),
    );
    assert!(commands(&c.sim).is_empty(), "{:?}", commands(&c.sim));
}

/// Two VMs with the node's name: the node is ambiguous and left out (named in a Warning), the
/// others are members; when every node is ambiguous or refused, nothing is created (no public
/// IP is associated for a load balancer that could have no member).
#[tokio::test]
async fn an_ambiguous_or_refused_node_binds_nothing_and_nothing_is_billed_for_none() {
    let c = cloud().await;
    c.sim.add_vm(SeedVm {
        nics: vec![SeedNic {
            network: "k8s-net".into(),
            ip: "10.1.1.220".into(),
            ip6: None,
        }],
        ..SeedVm::new("K8S-NODE-1", "zone1")
    });
    let svc = web('v', vec![port(Protocol::Tcp, 80, 30080)]);
    let o = c
        .driver
        .load_balancer_ensure(&svc, &nodes(&NODES), &scope())
        .await;
    let left = warnings(&o.events, "BackendsLeftOut");
    o.into_result().expect("ensure");
    assert_eq!(
        members(&rules(&c.sim)[0]),
        ids(&c.sim, &["k8s-node-2", "k8s-node-3"])
    );
    assert!(
        left.len() == 1 && left[0].contains("k8s-node-1") && left[0].contains("2 CloudStack VMs"),
        "{left:?}"
    );

    let c = cloud().await;
    for name in ["k8s-node-2", "k8s-node-3"] {
        assert!(c.sim.set_vm_state(&vm_id(&c.sim, name), "Destroyed"));
    }
    c.sim.add_vm(SeedVm {
        nics: vec![SeedNic {
            network: "k8s-net".into(),
            ip: "10.1.1.220".into(),
            ip6: None,
        }],
        ..SeedVm::new("K8S-NODE-1", "zone1")
    });
    let e = ensure(&c, &svc, &NODES).await.expect_err("no member");
    assert!(matches!(provider_error(e), ProviderError::Transient(_)));
    assert!(commands(&c.sim).is_empty(), "{:?}", commands(&c.sim));
    assert!(allocated(&c.sim).is_empty());
}

/// Review 2026-11-28 §3 (found on PhoenixNAP, the same class here): kubelet names its Node
/// after the hostname lower-cased (`component-helpers/node/util` `GetHostname`), and CloudStack
/// takes upper case in VM names and keeps them unique per network only exactly (the simulator
/// refuses a second `node-e` on a network, as CloudStack does, and takes `Node-E` beside it). A
/// lone VM `Node-F` is node `node-f`'s, for metadata and as a member; VMs `Node-E` and `node-e`
/// both are node `node-e`'s: ambiguous, so metadata binds neither and the load balancer leaves
/// the node out with a Warning.
#[tokio::test]
async fn nodes_match_vms_as_kubelet_names_them_and_two_matches_bind_nothing() {
    let c = cloud().await;
    let vm = |name: &str, ip: &str| SeedVm::new(name, "zone1").nic("k8s-net", ip);
    c.sim.add_vm(vm("Node-E", "10.1.1.31"));
    c.sim.add_vm(vm("node-e", "10.1.1.41"));
    c.sim.add_vm(vm("Node-F", "10.1.1.32"));
    // CloudStack's own rules, which the simulator follows: the same host name twice on one
    // network is refused, a host name that is no RFC 1123 label too.
    for (bad, why) in [("node-e", "already exists"), ("node_g", "`name` must be")] {
        let e = c
            .sim
            .try_add_vm(vm(bad, "10.1.1.51"))
            .expect_err("CloudStack refuses it");
        assert!(e.contains(why), "{bad}: {e}");
    }

    let m = c
        .driver
        .instance_metadata(&common::node("node-f"), &scope())
        .await
        .into_result()
        .expect("Node-F is node node-f's VM");
    assert_eq!(
        m.provider_id,
        format!("external-cloudstack://{}", vm_id(&c.sim, "Node-F"))
    );
    let e = c
        .driver
        .instance_metadata(&common::node("node-e"), &scope())
        .await
        .into_result()
        .expect_err("two VMs kubelet would name node-e");
    assert!(
        matches!(provider_error(e), ProviderError::Permanent(ref m) if m.contains("2 CloudStack VMs are named \"node-e\"")),
    );

    let svc = web('k', vec![port(Protocol::Tcp, 80, 30080)]);
    let o = c
        .driver
        .load_balancer_ensure(&svc, &nodes(&["k8s-node-1", "node-e", "node-f"]), &scope())
        .await;
    let left = warnings(&o.events, "BackendsLeftOut");
    o.into_result().expect("ensure");
    assert_eq!(
        members(&rules(&c.sim)[0]),
        ids(&c.sim, &["k8s-node-1", "Node-F"])
    );
    assert!(
        left.len() == 1 && left[0].contains("node-e") && left[0].contains("2 CloudStack VMs"),
        "{left:?}"
    );

    // Positive control: with one of them gone, node-e is bound to the other, whatever its case.
    assert!(c.sim.remove_vm(&vm_id(&c.sim, "node-e")));
    let m = c
        .driver
        .instance_metadata(&common::node("node-e"), &scope())
        .await
        .into_result()
        .expect("one VM left");
    assert_eq!(
        m.provider_id,
        format!("external-cloudstack://{}", vm_id(&c.sim, "Node-E"))
    );
}

/// Polls `sim`'s request log (bounded) until `command` was served; panics after the bound.
async fn served(sim: &CloudstackSim, command: &str) {
    for _ in 0..1000 {
        if sim.requests().iter().any(|r| r.command == command) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("{command} was never served");
}

/// A VM that goes bad between the driver's read and the assignment job (CloudStack fails the
/// whole job with "Invalid instance id specified", naming no VM): the driver reads the VMs
/// again, leaves out the one CloudStack refuses, names it, and assigns the others.
#[tokio::test]
async fn a_vm_destroyed_during_the_assignment_is_dropped_and_the_rest_assigned() {
    let c = cloud().await;
    // Each job takes three polls, so the test can act while the assignment's job runs.
    c.sim.set_job_polls(3);
    let node3 = vm_id(&c.sim, "k8s-node-3");
    let svc = web('w', vec![port(Protocol::Tcp, 80, 30080)]);
    let (all, call) = (nodes(&NODES), scope());
    let (o, ()) = tokio::join!(c.driver.load_balancer_ensure(&svc, &all, &call), async {
        served(&c.sim, "assignToLoadBalancerRule").await;
        assert!(c.sim.set_vm_state(&node3, "Destroyed"));
    });
    let left = warnings(&o.events, "BackendsLeftOut");
    o.into_result().expect("ensure");
    assert_eq!(
        members(&rules(&c.sim)[0]),
        ids(&c.sim, &["k8s-node-1", "k8s-node-2"])
    );
    assert_eq!(count(&c.sim, "assignToLoadBalancerRule"), 2);
    assert!(
        left.len() == 1 && left[0].contains("k8s-node-3") && left[0].contains("Destroyed"),
        "{left:?}"
    );
}

/// A VM expunged after the driver read it: its UUID no longer resolves, so CloudStack refuses
/// the assignment at once (431 for `virtualmachineids`); the driver finds it gone and assigns
/// the others.
#[tokio::test]
async fn a_vm_expunged_before_the_assignment_is_dropped_and_the_rest_assigned() {
    let c = cloud().await;
    c.sim.set_job_polls(3);
    let node3 = vm_id(&c.sim, "k8s-node-3");
    let svc = web('x', vec![port(Protocol::Tcp, 80, 30080)]);
    let (all, call) = (nodes(&NODES), scope());
    let (o, ()) = tokio::join!(c.driver.load_balancer_ensure(&svc, &all, &call), async {
        served(&c.sim, "createLoadBalancerRule").await;
        assert!(c.sim.remove_vm(&node3));
    });
    let left = warnings(&o.events, "BackendsLeftOut");
    o.into_result().expect("ensure");
    assert_eq!(
        members(&rules(&c.sim)[0]),
        ids(&c.sim, &["k8s-node-1", "k8s-node-2"])
    );
    let refused: Vec<u16> = c
        .sim
        .requests()
        .iter()
        .filter(|r| r.command == "assignToLoadBalancerRule")
        .map(|r| r.status)
        .collect();
    assert_eq!(refused, [431, 200]);
    assert!(
        left.len() == 1 && left[0].contains("no longer exists"),
        "{left:?}"
    );
}

/// A node without a providerID whose name comes to match a second VM is ambiguous: it is left
/// out (a Warning), but its VM, already a member, is never taken off the rules for it (an
/// ambiguous answer never deletes), and the other VM of that name is not added; by ensure and
/// by update alike.
#[tokio::test]
async fn a_second_vm_of_a_members_name_neither_removes_nor_adds() {
    let c = cloud().await;
    let svc = web('y', vec![port(Protocol::Tcp, 80, 30080)]);
    let r = ensure(&c, &svc, &NODES).await.expect("ensure");
    let all = ids(&c.sim, &NODES);
    assert_eq!(members(&rules(&c.sim)[0]), all);
    // The second VM is `K8S-NODE-1`: `ids` names the first by its exact name.
    let without_3 = ids(&c.sim, &["k8s-node-1", "k8s-node-2"]);
    c.sim.add_vm(SeedVm {
        nics: vec![SeedNic {
            network: "k8s-net".into(),
            ip: "10.1.1.221".into(),
            ip6: None,
        }],
        ..SeedVm::new("K8S-NODE-1", "zone1")
    });
    c.sim.clear_requests();
    let svc = common::apply(svc, &r);
    let o = c
        .driver
        .load_balancer_ensure(&svc, &nodes(&NODES), &scope())
        .await;
    let left = warnings(&o.events, "BackendsLeftOut");
    o.into_result().expect("ensure again");
    assert_eq!(members(&rules(&c.sim)[0]), all);
    assert!(
        left.len() == 1 && left[0].contains("k8s-node-1") && left[0].contains("2 CloudStack VMs"),
        "{left:?}"
    );
    let o = c
        .driver
        .load_balancer_update(&svc, &nodes(&NODES), &scope())
        .await;
    let left = warnings(&o.events, "BackendsLeftOut");
    o.into_result().expect("update");
    assert_eq!(members(&rules(&c.sim)[0]), all);
    assert!(
        left.len() == 1 && left[0].contains("k8s-node-1"),
        "{left:?}"
    );
    assert!(commands(&c.sim).is_empty(), "{:?}", commands(&c.sim));
    // Another node going away is still removed; the ambiguous one's member stays.
    c.driver
        .load_balancer_update(&svc, &nodes(&["k8s-node-1", "k8s-node-2"]), &scope())
        .await
        .into_result()
        .expect("update without node 3");
    assert_eq!(members(&rules(&c.sim)[0]), without_3);
}

/// A public IP already associated for the Service (claimed by this instance, or tagged by one
/// that was killed before the rules) fixes the network, as existing rules do: the rules are
/// created on the IP's network, not on the one most nodes are on (CloudStack would refuse
/// rules on another network than their IP's), and nodes off it are left out.
#[tokio::test]
async fn an_associated_ip_fixes_the_network_of_new_rules() {
    for restarted in [false, true] {
        let c = cloud().await;
        let svc = web('z', vec![port(Protocol::Tcp, 80, 30080)]);
        crash_after(&c, &svc, "createTags", None).await;
        let left = allocated_ips(&c.sim);
        assert_eq!(left.len(), 1, "{left:#?}");
        let ip_network = left[0]["associatednetworkid"]
            .as_str()
            .expect("an isolated network's IP")
            .to_string();
        // Most nodes are now on the VPC tier.
        for (name, ip) in [
            ("k8s-vpc-node-2", "10.1.2.12"),
            ("k8s-vpc-node-3", "10.1.2.13"),
        ] {
            c.sim.add_vm(SeedVm::new(name, "zone1").nic("k8s-tier", ip));
        }
        let names = [
            "k8s-node-1",
            "k8s-vpc-node-1",
            "k8s-vpc-node-2",
            "k8s-vpc-node-3",
        ];
        let driver = if restarted {
            fresh(&c.sim).await
        } else {
            c.driver
        };
        let o = driver
            .load_balancer_ensure(&svc, &nodes(&names), &scope())
            .await;
        let left_out = warnings(&o.events, "BackendsLeftOut");
        o.into_result().expect("ensure");
        let r = rules(&c.sim);
        assert_eq!(r.len(), 1, "{r:#?}");
        assert_eq!(r[0]["networkid"].as_str(), Some(ip_network.as_str()));
        assert_eq!(members(&r[0]), ids(&c.sim, &["k8s-node-1"]));
        // The IP was adopted, never a second one associated.
        assert_eq!(allocated_ips(&c.sim).len(), 1);
        assert!(
            left_out.len() == 1 && left_out[0].contains("k8s-vpc-node-3"),
            "{left_out:?}"
        );
    }
}

/// Issue 31: new credentials from a changed cloud config reach a running driver without a new
/// `init` (`Driver::rotate_secrets`), and a config whose layout changed is refused whole.
#[tokio::test]
async fn rotated_keys_take_effect_without_init_and_a_changed_layout_is_refused() {
    const K1: &str = "K1-api-key-0001";
    const S1: &str = "S1-secret-key-0001";
    const K2: &str = "K2-api-key-0002";
    const S2: &str = "S2-secret-key-0002";
    let sim = CloudstackSim::start_with(CloudstackOptions {
        api_key: K1.into(),
        secret_key: S1.into(),
        ..CloudstackOptions::default()
    })
    .await
    .expect("simulator");
    sim.seed(Seed::example()).expect("seed");
    let config = |key: &str, secret: &str, extra: &str| {
        format!(
            "[Global]\napi-url = {}\napi-key = {key}\nsecret-key = {secret}\n{extra}",
            sim.url()
        )
    };
    let driver = load(&sim, config(K1, S1, ""), &[]).await.expect("loads");
    let node = common::node("k8s-node-1");
    let metadata = || async {
        driver
            .instance_metadata(&node, &scope())
            .await
            .into_result()
    };
    metadata().await.expect("metadata with K1/S1");
    let instances = driver.stats().instances_created.load(Ordering::Relaxed);
    assert!(instances >= 1);

    // Two api-key lines: a layout the driver did not start with. Refused, nothing taken.
    let two_keys = config(K2, S2, &format!("api-key = {K2}-b\n"));
    let refused = driver
        .rotate_secrets(two_keys.as_bytes())
        .expect_err("a changed layout is refused");
    assert!(refused.contains("restart"), "{refused}");
    assert!(
        !refused.contains(K2) && !refused.contains(S2),
        "no value quoted: {refused}"
    );
    metadata().await.expect("the old values are kept");

    // The cloud rotates the account's keys: the old ones are refused from now on.
    sim.rotate_keys(K2, S2);
    sim.clear_requests();
    let e = metadata().await.expect_err("K1/S1 are refused now");
    assert!(
        matches!(provider_error(e), ProviderError::Unauthorized(_)),
        "the old keys answer 401"
    );
    assert!(
        sim.requests().iter().all(|r| r.status == 401),
        "{:?}",
        sim.requests()
    );

    // The operator updates the Secret; the host takes the new values.
    let changed = driver
        .rotate_secrets(config(K2, S2, "").as_bytes())
        .expect("rotates");
    assert_eq!(changed, 2, "api-key and secret-key changed");
    sim.clear_requests();
    metadata().await.expect("metadata with K2/S2");
    metadata().await.expect("and again");
    let log = sim.requests();
    assert!(!log.is_empty());
    assert!(log.iter().all(|r| r.status == 200), "{log:?}");
    // No new instance, so no new `init`: the running instance signs with the new pair (its
    // placeholders did not change, only what the host puts in their place).
    assert_eq!(
        driver.stats().instances_created.load(Ordering::Relaxed),
        instances,
        "no instance was created (no init) for the rotation"
    );
    // Rotating to the same values again changes nothing.
    assert_eq!(driver.rotate_secrets(config(K2, S2, "").as_bytes()), Ok(0));
}
