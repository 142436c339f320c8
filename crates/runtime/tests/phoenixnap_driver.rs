//! The PhoenixNAP driver through the host runtime against the PhoenixNAP simulator: the token
//! flow, instances, IP-block load balancers from creation to housekeeping, clusters sharing an
//! account, and the deviations from upstream.

mod common;

use serde_json::Value;
use tokio::sync::OnceCell;
use wasm_ccm_drivers::PHOENIXNAP_DRIVER;
use wasm_ccm_runtime::types::{EnsureResult, Ingress, IpMode, Node, ProviderError, Service};
use wasm_ccm_runtime::{CallError, CallScope, Compiled, Driver, DriverOptions, EventKind};
use wasm_ccm_runtime::{InitInput, http};
use wasm_ccm_sim::phoenixnap::{
    Match, PhoenixnapOptions, PhoenixnapSim, Race, SeedIpBlock, SeedPublicNetwork, SeedServer,
    SeedTag,
};

const NETWORK: &str = "60473c2509268bc77fd06d29";
const CLUSTER: &str = "0f5c4a1e-7c2b-4a8e-9d3f-1b2c3d4e5f60";
const KUBE_VIP: &str = "kube-vip.io/loadbalancerIPs";

async fn compiled() -> &'static Compiled {
    static COMPILED: OnceCell<Compiled> = OnceCell::const_new();
    COMPILED
        .get_or_init(|| common::compile(PHOENIXNAP_DRIVER))
        .await
}

struct Cloud {
    sim: PhoenixnapSim,
    driver: Driver,
    workers: Vec<String>,
}

async fn cloud() -> Cloud {
    let sim = PhoenixnapSim::start(
        "127.0.0.1:0".parse().expect("addr"),
        PhoenixnapOptions::default(),
    )
    .await
    .expect("simulator starts");
    sim.add_public_network(SeedPublicNetwork::new("k8s-vips").with_id(NETWORK));
    let workers = vec![
        sim.add_server(
            SeedServer::new("worker-1")
                .public(&["198.51.100.201"])
                .private(&["10.0.0.11"]),
        ),
        // Private only: upstream could not initialise it.
        sim.add_server(SeedServer::new("worker-2").private(&["10.0.0.12"])),
    ];
    let driver = load(&sim, CLUSTER, &sim.client_secret(), "")
        .await
        .expect("loads");
    Cloud {
        sim,
        driver,
        workers,
    }
}

async fn load(
    sim: &PhoenixnapSim,
    cluster: &str,
    secret: &str,
    file: &str,
) -> Result<Driver, wasm_ccm_runtime::HostError> {
    load_env(sim, cluster, secret, file, &[]).await
}

/// [`load`] with variables changed: a pair replaces the variable, an empty value removes it.
async fn load_env(
    sim: &PhoenixnapSim,
    cluster: &str,
    secret: &str,
    file: &str,
    changes: &[(&str, &str)],
) -> Result<Driver, wasm_ccm_runtime::HostError> {
    let mut env: Vec<(String, String)> = vec![
        ("PNAP_CLIENT_ID".into(), sim.client_id()),
        ("PNAP_CLIENT_SECRET".into(), secret.into()),
        ("PNAP_BASE_URL".into(), sim.url()),
        ("PNAP_AUTH_URL".into(), sim.url()),
        ("PNAP_LOCATION".into(), "PHX".into()),
        ("PNAP_LOAD_BALANCER".into(), format!("kube-vip://{NETWORK}")),
    ];
    for (k, v) in changes {
        env.retain(|(name, _)| name != k);
        if !v.is_empty() {
            env.push((k.to_string(), v.to_string()));
        }
    }
    let mut opts = DriverOptions {
        init: InitInput {
            config: file.as_bytes().to_vec(),
            env,
            ..Default::default()
        },
        http: http::Config {
            egress: Some(
                wasm_ccm_runtime::EgressPolicy::parse(&[sim.url()]).expect("egress grants"),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    opts.init.context.cluster_id = cluster.into();
    common::runtime().load(compiled().await, opts).await
}

fn node(name: &str, id: &str) -> Node {
    let mut n = common::node(name);
    n.provider_id = format!("phoenixnap://{id}");
    n
}

fn service(name: &str) -> Service {
    common::lb_service(name, &format!("uid-{name}"))
}

fn scope() -> CallScope {
    CallScope::object("default/web")
}

async fn ensure(c: &Cloud, svc: &Service) -> Result<EnsureResult, CallError> {
    c.driver
        .load_balancer_ensure(svc, &[], &scope())
        .await
        .into_result()
}

/// Mutating requests other than token requests (which change nothing in the cloud).
fn cloud_changes(sim: &PhoenixnapSim) -> Vec<String> {
    sim.mutations()
        .iter()
        .filter(|r| !r.path.ends_with("/openid-connect/token"))
        .map(|r| r.line())
        .collect()
}

fn blocks_tagged(sim: &PhoenixnapSim, name: &str, value: &str) -> Vec<Value> {
    sim.ip_blocks()
        .into_iter()
        .filter(|b| {
            b["tags"].as_array().is_some_and(|tags| {
                tags.iter()
                    .any(|t| t["name"] == name && t["value"] == value)
            })
        })
        .collect()
}

#[tokio::test]
async fn the_first_ensure_publishes_the_address_in_status_and_annotation() {
    let c = cloud().await;
    let r = ensure(&c, &service("web")).await.expect("ensure");
    let block = &blocks_tagged(&c.sim, "serviceName", "web")[0];
    let cidr = block["cidr"].as_str().expect("cidr");
    let base: std::net::Ipv4Addr = cidr.split('/').next().expect("ip").parse().expect("v4");
    let ip = std::net::Ipv4Addr::from(u32::from(base) + 2).to_string();
    assert_eq!(
        r.ingress,
        vec![Ingress {
            ip: Some(ip.clone()),
            hostname: None,
            ip_mode: Some(IpMode::Vip)
        }]
    );
    assert_eq!(r.set_annotations, vec![(KUBE_VIP.to_string(), ip.clone())]);
    // Tagged as upstream tags, and assigned to the configured public network.
    for (name, value) in [
        ("usage", "cloud-provider-phoenixnap-auto"),
        ("cluster", CLUSTER),
        ("serviceNamespace", "default"),
    ] {
        assert_eq!(blocks_tagged(&c.sim, name, value).len(), 1, "{name}");
    }
    c.sim.settle();
    let on_network = c.sim.public_network_blocks(NETWORK);
    assert!(
        on_network.iter().any(|b| b
            .to_string()
            .contains(cidr.split('/').next().unwrap_or("-"))),
        "{on_network:?}"
    );
    // Again, with the result applied: the same answer, nothing written.
    c.sim.clear_requests();
    let svc = common::apply(service("web"), &r);
    let again = ensure(&c, &svc).await.expect("ensure again");
    assert_eq!(again.ingress, r.ingress);
    assert!(again.set_annotations.is_empty());
    assert!(
        cloud_changes(&c.sim).is_empty(),
        "{:?}",
        cloud_changes(&c.sim)
    );
    let got = c
        .driver
        .load_balancer_get(&service("web"), &scope())
        .await
        .into_result()
        .expect("get");
    assert_eq!(got, Some(r.ingress));
}

#[tokio::test]
async fn delete_marks_the_block_and_housekeeping_releases_it() {
    let c = cloud().await;
    let svc = service("web");
    ensure(&c, &svc).await.expect("ensure");
    c.sim.settle();
    c.driver
        .load_balancer_delete(&svc, &scope())
        .await
        .into_result()
        .expect("delete");
    let marked = blocks_tagged(&c.sim, "delete", "true");
    assert_eq!(marked.len(), 1);
    assert!(
        !marked[0]["tags"].to_string().contains("serviceName"),
        "service tags are replaced: {}",
        marked[0]["tags"]
    );
    let get = c.driver.load_balancer_get(&svc, &scope()).await;
    assert_eq!(get.into_result().expect("get"), None);
    // First pass unassigns, the next (once unassigned) deletes.
    c.driver
        .housekeeping(&CallScope::default())
        .await
        .into_result()
        .expect("housekeeping");
    c.sim.settle();
    assert!(c.sim.public_network_blocks(NETWORK).is_empty());
    c.driver
        .housekeeping(&CallScope::default())
        .await
        .into_result()
        .expect("housekeeping");
    assert!(c.sim.ip_blocks().is_empty(), "{:?}", c.sim.ip_blocks());
}

#[tokio::test]
async fn housekeeping_acts_on_every_marked_block() {
    let c = cloud().await;
    for name in ["a", "b", "c"] {
        ensure(&c, &service(name)).await.expect("ensure");
    }
    c.sim.settle();
    for name in ["a", "b", "c"] {
        c.driver
            .load_balancer_delete(&service(name), &scope())
            .await
            .into_result()
            .expect("delete");
    }
    c.driver
        .housekeeping(&CallScope::default())
        .await
        .into_result()
        .expect("housekeeping");
    c.sim.settle();
    c.driver
        .housekeeping(&CallScope::default())
        .await
        .into_result()
        .expect("housekeeping");
    assert!(c.sim.ip_blocks().is_empty(), "{:?}", c.sim.ip_blocks());
}

#[tokio::test]
async fn two_clusters_in_one_account_do_not_collide() {
    let c = cloud().await;
    let other = load(
        &c.sim,
        "11111111-2222-4333-8444-555555555555",
        &c.sim.client_secret(),
        "",
    )
    .await
    .expect("second cluster loads");
    let mine = ensure(&c, &service("web")).await.expect("mine");
    let theirs = other
        .load_balancer_ensure(&service("web"), &[], &scope())
        .await
        .into_result()
        .expect("theirs");
    assert_ne!(mine.ingress, theirs.ingress);
    assert_eq!(c.sim.ip_blocks().len(), 2);
    // Deleting theirs leaves mine alone, housekeeping included.
    other
        .load_balancer_delete(&service("web"), &scope())
        .await
        .into_result()
        .expect("delete theirs");
    c.driver
        .housekeeping(&CallScope::default())
        .await
        .into_result()
        .expect("housekeeping");
    let still = c.driver.load_balancer_get(&service("web"), &scope()).await;
    assert_eq!(still.into_result().expect("get"), Some(mine.ingress));
}

#[tokio::test]
async fn an_expired_token_is_replaced_and_the_request_retried() {
    let c = cloud().await;
    let n = node("worker-1", &c.workers[0]);
    assert!(
        c.driver
            .instance_exists(&n, &scope())
            .await
            .into_result()
            .expect("exists")
    );
    c.sim.expire_tokens();
    c.sim.clear_requests();
    assert!(
        c.driver
            .instance_exists(&n, &scope())
            .await
            .into_result()
            .expect("exists after expiry")
    );
    let paths: Vec<String> = c.sim.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths.len(), 3, "401, token, retry: {paths:?}");
    assert!(paths[1].ends_with("/openid-connect/token"), "{paths:?}");
}

#[tokio::test]
async fn credentials_go_as_form_fields_when_basic_is_refused() {
    let c = cloud().await;
    c.sim.accept_basic_auth(false);
    let n = node("worker-1", &c.workers[0]);
    let fresh = load(&c.sim, CLUSTER, &c.sim.client_secret(), "")
        .await
        .expect("loads");
    c.sim.clear_requests();
    assert!(
        fresh
            .instance_exists(&n, &scope())
            .await
            .into_result()
            .expect("exists")
    );
    assert_eq!(token_requests(&c.sim), 2, "Basic refused, then form fields");
    // The style that worked is remembered: the next token request uses it first.
    c.sim.expire_tokens();
    c.sim.clear_requests();
    assert!(
        fresh
            .instance_exists(&n, &scope())
            .await
            .into_result()
            .expect("exists")
    );
    assert_eq!(token_requests(&c.sim), 1, "straight to form fields");
}

#[tokio::test]
async fn bad_credentials_are_unauthorized_naming_the_variables() {
    let c = cloud().await;
    let wrong = load(&c.sim, CLUSTER, "not-the-secret", "")
        .await
        .expect("loads");
    let n = node("worker-1", &c.workers[0]);
    match wrong.instance_metadata(&n, &scope()).await.into_result() {
        Err(CallError::Provider(ProviderError::Unauthorized(m))) => {
            assert!(m.contains("PNAP_CLIENT_SECRET"), "{m}");
            assert!(!m.contains("not-the-secret"), "{m}");
        }
        other => panic!("expected unauthorized, got {other:?}"),
    }
}

#[tokio::test]
async fn instances_follow_upstream_with_private_only_servers_fixed() {
    let c = cloud().await;
    let w1 = node("worker-1", &c.workers[0]);
    let m = c
        .driver
        .instance_metadata(&w1, &scope())
        .await
        .into_result()
        .expect("metadata");
    assert_eq!(m.provider_id, format!("phoenixnap://{}", c.workers[0]));
    assert_eq!((m.region.as_str(), m.zone.as_str()), ("PHX", ""));
    let addrs: Vec<&str> = m.addresses.iter().map(|a| a.address.as_str()).collect();
    assert_eq!(addrs, vec!["worker-1", "198.51.100.201", "10.0.0.11"]);
    // By hostname when there is no provider ID yet; a bare ID works too.
    let by_name = c
        .driver
        .instance_metadata(&common::node("worker-2"), &scope())
        .await
        .into_result()
        .expect("private-only server initialises");
    assert_eq!(by_name.addresses.len(), 2);
    let mut bare = common::node("worker-2");
    bare.provider_id = c.workers[1].clone();
    assert!(
        c.driver
            .instance_exists(&bare, &scope())
            .await
            .into_result()
            .expect("bare id")
    );
    c.sim.set_server_status(&c.workers[1], "powered-off");
    assert!(
        c.driver
            .instance_shutdown(&bare, &scope())
            .await
            .into_result()
            .expect("shutdown")
    );
    c.sim.remove_server(&c.workers[1]);
    assert!(
        !c.driver
            .instance_exists(&bare, &scope())
            .await
            .into_result()
            .expect("gone")
    );
    // Existence is never decided by name.
    let unnamed = c
        .driver
        .instance_exists(&common::node("worker-1"), &scope())
        .await;
    assert!(matches!(
        unnamed.into_result(),
        Err(CallError::Provider(ProviderError::Permanent(_)))
    ));
}

/// A node without a provider ID (not initialised yet), as upstream (`instances.go`:
/// `InstanceExists` and `InstanceShutdown` go through `serverFromProviderID`, which refuses an
/// empty provider ID; `InstanceMetadata` falls back to `serverByName`, the first server with that
/// hostname; `loadbalancers.go` `UpdateLoadBalancer` refuses a selected node without one): its
/// existence is never decided, whether a server of that hostname exists, is gone or is
/// ambiguous, so a Node whose server was deleted before it was initialised is left for the
/// operator. Unlike upstream, a backend update does not fail for it (one bad member must not
/// make the load balancer report failure for the good ones): a Warning event names it.
#[tokio::test]
async fn a_node_without_provider_id_is_left_undecided_as_upstream() {
    let c = cloud().await;
    let undecided = |r: Result<bool, CallError>| matches!(r, Err(CallError::Provider(ProviderError::Permanent(m))) if m.contains("no provider ID"));

    // Its server exists.
    let bare = common::node("worker-1");
    assert!(undecided(exists(&c.driver, &bare).await));
    assert!(undecided(
        c.driver
            .instance_shutdown(&bare, &scope())
            .await
            .into_result()
    ));
    let m = c
        .driver
        .instance_metadata(&bare, &scope())
        .await
        .into_result()
        .expect("metadata by hostname");
    assert_eq!(m.provider_id, format!("phoenixnap://{}", c.workers[0]));

    // Its server is gone: still undecided, never "does not exist".
    let late = c
        .sim
        .add_server(SeedServer::new("worker-3").private(&["10.0.0.13"]));
    assert!(c.sim.remove_server(&late));
    let gone = common::node("worker-3");
    assert!(undecided(exists(&c.driver, &gone).await));
    assert!(matches!(
        c.driver
            .instance_metadata(&gone, &scope())
            .await
            .into_result(),
        Err(CallError::Provider(ProviderError::NotFound(_)))
    ));

    // Its hostname matches two servers: undecided.
    c.sim
        .add_server(SeedServer::new("worker-1").private(&["10.0.0.21"]));
    assert!(undecided(exists(&c.driver, &bare).await));

    // While such a Node exists, a backend update succeeds with a Warning naming it and changes
    // nothing; ensure does not look at the nodes.
    let svc = service("web");
    ensure(&c, &svc).await.expect("ensure");
    let before = cloud_changes(&c.sim).len();
    let backends = vec![node("worker-1", &c.workers[0]), gone.clone()];
    let o = c
        .driver
        .load_balancer_update(&svc, &backends, &scope())
        .await;
    let warned: Vec<&str> = o
        .events
        .iter()
        .filter(|e| e.kind == EventKind::Warning && e.reason == "BackendsUninitialized")
        .map(|e| e.message.as_str())
        .collect();
    assert_eq!(warned.len(), 1, "{:?}", o.events);
    assert!(warned[0].contains("worker-3"), "{}", warned[0]);
    assert!(!warned[0].contains("worker-1"), "{}", warned[0]);
    o.result.expect("one bad member does not fail the update");
    assert_eq!(cloud_changes(&c.sim).len(), before);
    let o = c
        .driver
        .load_balancer_update(&svc, &backends[..1], &scope())
        .await;
    assert!(o.events.is_empty(), "{:?}", o.events);
    o.result.expect("update once the Node is deleted");
}

/// Review §4: two servers with the node's hostname (here in two locations) are ambiguous; a
/// node without a provider ID is bound to neither (upstream took the first silently).
#[tokio::test]
async fn two_servers_with_the_nodes_hostname_bind_nothing() {
    let c = cloud().await;
    let other = c.sim.add_server(
        SeedServer::new("worker-1")
            .with_location("ASH")
            .private(&["10.1.0.11"]),
    );
    let bare = common::node("worker-1");
    match c
        .driver
        .instance_metadata(&bare, &scope())
        .await
        .into_result()
    {
        Err(CallError::Provider(ProviderError::Permanent(m))) => {
            assert!(m.contains(&c.workers[0]) && m.contains(&other), "{m}");
            assert!(m.contains("PHX") && m.contains("ASH"), "{m}");
            assert!(m.contains("providerID"), "{m}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // With a provider ID there is nothing to choose.
    let m = c
        .driver
        .instance_metadata(&node("worker-1", &other), &scope())
        .await
        .into_result()
        .expect("metadata by provider ID");
    assert_eq!(m.region, "ASH");
    // One server of that name left: bound.
    assert!(c.sim.remove_server(&other));
    let m = c
        .driver
        .instance_metadata(&bare, &scope())
        .await
        .into_result()
        .expect("one match");
    assert_eq!(m.provider_id, format!("phoenixnap://{}", c.workers[0]));
}

/// Review 2026-11-28 §3: kubelet names its Node after the hostname lower-cased (also a
/// `--hostname-override`; `component-helpers/node/util` `GetHostname`), while PhoenixNAP hostnames
/// may hold upper case. A lone server `Node-F` is node `node-f`'s; servers `Node-E` and `node-e`
/// (in two locations) both are node `node-e`'s: ambiguous, so the node is bound to neither and
/// the error (a Warning event on the Node, from the host) names both.
#[tokio::test]
async fn nodes_match_servers_as_kubelet_names_them_and_two_matches_bind_nothing() {
    let c = cloud().await;
    let upper = c.sim.add_server(
        SeedServer::new("Node-E")
            .with_location("PHX")
            .private(&["10.0.0.31"]),
    );
    let lower = c.sim.add_server(
        SeedServer::new("node-e")
            .with_location("ASH")
            .private(&["10.1.0.31"]),
    );
    let lone = c.sim.add_server(
        SeedServer::new("Node-F")
            .with_location("PHX")
            .private(&["10.0.0.32"]),
    );

    // A lone server whose hostname has upper case is found.
    let m = c
        .driver
        .instance_metadata(&common::node("node-f"), &scope())
        .await
        .into_result()
        .expect("Node-F is node node-f's server");
    assert_eq!(m.provider_id, format!("phoenixnap://{lone}"));

    // Two servers kubelet would both name node-e: neither is bound.
    match c
        .driver
        .instance_metadata(&common::node("node-e"), &scope())
        .await
        .into_result()
    {
        Err(CallError::Provider(ProviderError::Permanent(m))) => {
            assert!(m.contains(&upper) && m.contains(&lower), "{m}");
            assert!(m.contains("\"Node-E\"") && m.contains("\"node-e\""), "{m}");
            assert!(m.contains("providerID"), "{m}");
        }
        other => panic!("expected a refusal naming both servers, got {other:?}"),
    }
    // Positive control: once one of them is gone, the other is bound, whichever case it has.
    assert!(c.sim.remove_server(&lower));
    let m = c
        .driver
        .instance_metadata(&common::node("node-e"), &scope())
        .await
        .into_result()
        .expect("one server left");
    assert_eq!(m.provider_id, format!("phoenixnap://{upper}"));
}

#[tokio::test]
async fn a_block_assigned_elsewhere_is_refused_with_its_owner() {
    let c = cloud().await;
    for tag in ["usage", "cluster", "serviceNamespace", "serviceName"] {
        c.sim.add_tag(SeedTag::new(tag));
    }
    c.sim.add_ip_block(
        SeedIpBlock::new()
            .with_id("b10c00000000000000000001")
            .with_status("assigned")
            .assigned_to("server", "5ff5cc9bc1acf144d9106299")
            .with_tag("usage", "cloud-provider-phoenixnap-auto")
            .with_tag("cluster", CLUSTER)
            .with_tag("serviceNamespace", "default")
            .with_tag("serviceName", "web"),
    );
    c.sim.clear_requests();
    match ensure(&c, &service("web")).await {
        Err(CallError::Provider(ProviderError::Permanent(m))) => {
            assert!(
                m.contains("b10c00000000000000000001") && m.contains("5ff5cc9bc1acf144d9106299"),
                "{m}"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(
        cloud_changes(&c.sim).is_empty(),
        "{:?}",
        cloud_changes(&c.sim)
    );
}

fn token_requests(sim: &PhoenixnapSim) -> usize {
    sim.requests()
        .iter()
        .filter(|r| r.path.ends_with("/openid-connect/token"))
        .count()
}

async fn ensure_with(driver: &Driver, svc: &Service) -> Result<EnsureResult, CallError> {
    driver
        .load_balancer_ensure(svc, &[], &scope())
        .await
        .into_result()
}

async fn exists(d: &Driver, n: &Node) -> Result<bool, CallError> {
    d.instance_exists(n, &scope()).await.into_result()
}

fn annotated(name: &str, location: &str) -> Service {
    let mut svc = service(name);
    svc.annotations
        .push(("phoenixnap.com/ip-location".into(), location.into()));
    svc
}

/// Review finding D1: a location other than the public network's is invalid-config before
/// anything is created (no billed block left unusable); upstream's precedence: the configured
/// location wins over the annotation, which applies only when none is configured.
#[tokio::test]
async fn a_location_other_than_the_networks_creates_nothing() {
    let c = cloud().await;
    // PNAP_LOCATION=ASH, the network is in PHX.
    let ash = load_env(
        &c.sim,
        CLUSTER,
        &c.sim.client_secret(),
        "",
        &[("PNAP_LOCATION", "ASH")],
    )
    .await
    .expect("loads");
    c.sim.clear_requests();
    match ensure_with(&ash, &service("web")).await {
        Err(CallError::Provider(ProviderError::InvalidConfig(m))) => {
            assert!(
                m.contains("ASH") && m.contains("PHX") && m.contains(NETWORK),
                "{m}"
            );
            assert!(m.contains("PNAP_LOCATION"), "{m}");
        }
        other => panic!("expected invalid-config, got {other:?}"),
    }
    assert!(
        cloud_changes(&c.sim).is_empty(),
        "{:?}",
        cloud_changes(&c.sim)
    );
    assert!(c.sim.ip_blocks().is_empty());
    // The configured location wins; the annotation is ignored (upstream's README).
    let r = ensure(&c, &annotated("web", "ASH")).await.expect("ensure");
    assert_eq!(r.ingress.len(), 1);
    assert_eq!(
        blocks_tagged(&c.sim, "serviceName", "web")[0]["location"],
        "PHX"
    );
    // No configured location: the annotation, checked against the network too.
    let unset = load_env(
        &c.sim,
        CLUSTER,
        &c.sim.client_secret(),
        "",
        &[("PNAP_LOCATION", "")],
    )
    .await
    .expect("loads without a location");
    c.sim.clear_requests();
    match ensure_with(&unset, &annotated("other", "ash")).await {
        Err(CallError::Provider(ProviderError::InvalidConfig(m))) => {
            assert!(
                m.contains("phoenixnap.com/ip-location") && m.contains("PHX"),
                "{m}"
            );
        }
        other => panic!("expected invalid-config, got {other:?}"),
    }
    assert!(
        cloud_changes(&c.sim).is_empty(),
        "{:?}",
        cloud_changes(&c.sim)
    );
    assert!(matches!(
        ensure_with(&unset, &annotated("other", "MARS")).await,
        Err(CallError::Provider(ProviderError::InvalidConfig(_)))
    ));
    // Neither: the network's location.
    ensure_with(&unset, &service("third"))
        .await
        .expect("ensure");
    assert_eq!(
        blocks_tagged(&c.sim, "serviceName", "third")[0]["location"],
        "PHX"
    );
    ensure_with(&unset, &annotated("fourth", "phx"))
        .await
        .expect("ensure");
    // An unknown network (403: networkapi.spec.yaml lists no 404) is invalid-config, and
    // nothing is created.
    let ghost = load_env(
        &c.sim,
        CLUSTER,
        &c.sim.client_secret(),
        "",
        &[("PNAP_LOAD_BALANCER", "kube-vip://ffffffffffffffffffffffff")],
    )
    .await
    .expect("loads");
    let before = c.sim.ip_blocks().len();
    match ensure_with(&ghost, &service("fifth")).await {
        Err(CallError::Provider(ProviderError::InvalidConfig(m))) => {
            assert!(m.contains("does not exist"), "{m}");
        }
        other => panic!("expected invalid-config, got {other:?}"),
    }
    assert_eq!(c.sim.ip_blocks().len(), before);
}

/// A Service's block in another location than asked for cannot move.
#[tokio::test]
async fn a_block_in_another_location_is_not_moved() {
    let c = cloud().await;
    for tag in ["usage", "cluster", "serviceNamespace", "serviceName"] {
        c.sim.add_tag(SeedTag::new(tag));
    }
    c.sim.add_ip_block(
        SeedIpBlock::new()
            .with_location("ASH")
            .with_tag("usage", "cloud-provider-phoenixnap-auto")
            .with_tag("cluster", CLUSTER)
            .with_tag("serviceNamespace", "default")
            .with_tag("serviceName", "web"),
    );
    match ensure(&c, &service("web")).await {
        Err(CallError::Provider(ProviderError::InvalidConfig(m))) => {
            assert!(m.contains("re-create the Service"), "{m}");
        }
        other => panic!("expected invalid-config, got {other:?}"),
    }
}

/// Review finding D2: a 403 or 404 is "gone" only when the server list confirms it; an
/// ambiguous answer never says "gone".
#[tokio::test]
async fn a_server_is_gone_only_when_the_list_confirms_it() {
    let c = cloud().await;
    let n = node("worker-1", &c.workers[0]);
    // 403 for a server that is listed: not gone (the credential cannot read it).
    let path = format!("/bmc/v1/servers/{}", c.workers[0]);
    c.sim
        .faults()
        .fail_next(Match::path(&path).with_method("GET"), 403, 1);
    match exists(&c.driver, &n).await {
        Err(CallError::Provider(ProviderError::Unauthorized(m))) => {
            assert!(m.contains("in the list"), "{m}");
        }
        other => panic!("expected unauthorized, got {other:?}"),
    }
    // 403 and the list refused too: not decided.
    c.sim
        .faults()
        .fail_next(Match::path("/bmc/v1/servers").with_method("GET"), 403, 2);
    match exists(&c.driver, &n).await {
        Err(CallError::Provider(ProviderError::Unauthorized(m))) => {
            assert!(m.contains("bmc.read"), "{m}");
        }
        other => panic!("expected unauthorized, got {other:?}"),
    }
    // The list failing otherwise: its error, never "gone".
    c.sim
        .faults()
        .fail_next(Match::path(&path).with_method("GET"), 403, 1);
    c.sim
        .faults()
        .fail_next(Match::path("/bmc/v1/servers").with_method("GET"), 500, 1);
    assert!(matches!(
        exists(&c.driver, &n).await,
        Err(CallError::Provider(ProviderError::Transient(m))) if m.contains("500")
    ));
    // Deleted: the simulator answers 403 as the real API does, and the list confirms.
    c.sim.remove_server(&c.workers[0]);
    c.sim.clear_requests();
    assert!(!exists(&c.driver, &n).await.expect("decided"));
    let paths: Vec<String> = c.sim.requests().iter().map(|r| r.line()).collect();
    assert_eq!(paths.len(), 2, "{paths:?}");
    assert!(paths[1].contains("GET /bmc/v1/servers"), "{paths:?}");
    // And with 404.
    c.sim.set_gone_server_status(404);
    assert!(!exists(&c.driver, &n).await.expect("decided"));
}

/// Review finding D2: a base URL with a path would turn every lookup into a 404.
#[tokio::test]
async fn a_base_url_with_a_path_is_refused() {
    let c = cloud().await;
    let url = format!("{}/bmc/v1", c.sim.url());
    let e = load_env(
        &c.sim,
        CLUSTER,
        &c.sim.client_secret(),
        "",
        &[("PNAP_BASE_URL", &url)],
    )
    .await
    .err()
    .expect("refused");
    let text = e.to_string();
    assert!(text.contains("has a path"), "{text}");
}

/// Review finding D3: credentials are form-encoded before base64 (RFC 6749 §2.3.1), so a
/// secret with `+`, `%` and `:` works on the first attempt.
#[tokio::test]
async fn basic_credentials_are_form_encoded() {
    let sim = PhoenixnapSim::start(
        "127.0.0.1:0".parse().expect("addr"),
        PhoenixnapOptions {
            client_secret: "a+b%2Fc: d".into(),
            ..PhoenixnapOptions::default()
        },
    )
    .await
    .expect("simulator starts");
    let id = sim.add_server(SeedServer::new("worker-1"));
    let driver = load(&sim, CLUSTER, &sim.client_secret(), "")
        .await
        .expect("loads");
    assert!(
        driver
            .instance_exists(&node("worker-1", &id), &scope())
            .await
            .into_result()
            .expect("exists")
    );
    assert_eq!(token_requests(&sim), 1, "one token request");
}

/// Review finding D4: a tag name created by someone else since the list (409) is fine.
#[tokio::test]
async fn a_409_on_tag_creation_is_success() {
    let c = cloud().await;
    // Only `delete` is missing, and its creation answers 409 (tagapi.spec.yaml: name taken).
    for tag in ["usage", "cluster", "serviceNamespace", "serviceName"] {
        c.sim.add_tag(SeedTag::new(tag));
    }
    c.sim.faults().fail_next(
        Match::path("/tag-manager/v1/tags").with_method("POST"),
        409,
        1,
    );
    c.sim.clear_requests();
    ensure(&c, &service("web")).await.expect("ensure");
    assert!(
        c.sim
            .requests()
            .iter()
            .any(|r| r.method == "POST" && r.path == "/tag-manager/v1/tags" && r.status == 409),
        "the 409 was answered"
    );
}

/// Review finding D5: housekeeping unassigns only blocks on a public network; a block in
/// `error assigning` is assigned again.
#[tokio::test]
async fn housekeeping_leaves_server_blocks_and_failed_assignments_are_retried() {
    let c = cloud().await;
    for tag in ["usage", "cluster", "delete"] {
        c.sim.add_tag(SeedTag::new(tag));
    }
    let on_server = c.sim.add_ip_block(
        SeedIpBlock::new()
            .with_status("assigned")
            .assigned_to("server", &c.workers[0])
            .with_tag("usage", "cloud-provider-phoenixnap-auto")
            .with_tag("cluster", CLUSTER)
            .with_tag("delete", "true"),
    );
    c.sim.clear_requests();
    c.driver
        .housekeeping(&CallScope::default())
        .await
        .into_result()
        .expect("housekeeping");
    assert!(
        cloud_changes(&c.sim).is_empty(),
        "{:?}",
        cloud_changes(&c.sim)
    );
    assert!(
        c.sim
            .ip_blocks()
            .iter()
            .any(|b| b["id"] == on_server.as_str())
    );
    // error assigning → the next ensure assigns again.
    ensure(&c, &service("web")).await.expect("ensure");
    let id = blocks_tagged(&c.sim, "serviceName", "web")[0]["id"]
        .as_str()
        .expect("id")
        .to_string();
    assert!(c.sim.set_block_status(&id, "error assigning"));
    c.sim.clear_requests();
    ensure(&c, &service("web")).await.expect("ensure again");
    let changes = cloud_changes(&c.sim);
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert!(
        changes[0].contains(&format!(
            "POST /networks/v1/public-networks/{NETWORK}/ip-blocks"
        )),
        "{changes:?}"
    );
    c.sim.settle();
    assert_eq!(c.sim.public_network_blocks(NETWORK).len(), 1);
}

#[tokio::test]
async fn a_malformed_config_is_invalid_config_not_a_panic() {
    let c = cloud().await;
    let e = load(
        &c.sim,
        CLUSTER,
        &c.sim.client_secret(),
        r#"{"clientID": "a",}"#,
    )
    .await
    .err()
    .expect("refused");
    let text = e.to_string();
    assert!(text.contains("trailing commas"), "{text}");
}

/// Issue 22, item 3: a controller killed between two cloud calls leaves no IP block without its
/// Service and never makes a second one. A block is created with its tags in the same request
/// (so it is findable from its first moment); the next ensure of a fresh driver instance finds
/// it by them and assigns it; a delete and housekeeping of fresh instances release it.
#[tokio::test]
async fn a_crash_between_two_calls_neither_leaks_nor_duplicates() {
    let assign = format!("/networks/v1/public-networks/{NETWORK}/ip-blocks");
    let points = [
        (
            "tag names",
            Match::path("/tag-manager/v1/tags").with_method("POST"),
        ),
        (
            "block created",
            Match::path("/ips/v1/ip-blocks").with_method("POST"),
        ),
        ("block assigned", Match::path(&assign).with_method("POST")),
    ];
    for (point, matcher) in points {
        let c = cloud().await;
        let svc = service("web");
        c.sim.faults().kill_after(matcher, 1, 503);
        // After the assignment (the last call) the ensure itself is complete; the kill then
        // hits only the next controller's first requests.
        let first = ensure(&c, &svc).await;
        assert_eq!(
            first.is_ok(),
            point == "block assigned",
            "{point}: {first:?}"
        );
        assert!(c.sim.faults().killed(), "{point}");
        c.sim.faults().clear();
        c.sim.settle();
        let fresh = load(&c.sim, CLUSTER, &c.sim.client_secret(), "")
            .await
            .expect("loads");
        let r = fresh
            .load_balancer_ensure(&svc, &[], &scope())
            .await
            .into_result()
            .unwrap_or_else(|e| panic!("{point}: {e:?}"));
        let blocks = c.sim.ip_blocks();
        assert_eq!(blocks.len(), 1, "{point}: {blocks:#?}");
        c.sim.settle();
        assert_eq!(c.sim.public_network_blocks(NETWORK).len(), 1, "{point}");
        // Delete, then the reaper, each by a fresh instance.
        let svc = common::apply(svc, &r);
        load(&c.sim, CLUSTER, &c.sim.client_secret(), "")
            .await
            .expect("loads")
            .load_balancer_delete(&svc, &scope())
            .await
            .into_result()
            .unwrap_or_else(|e| panic!("{point}: delete: {e:?}"));
        for _ in 0..2 {
            load(&c.sim, CLUSTER, &c.sim.client_secret(), "")
                .await
                .expect("loads")
                .housekeeping(&CallScope::default())
                .await
                .into_result()
                .unwrap_or_else(|e| panic!("{point}: housekeeping: {e:?}"));
            c.sim.settle();
        }
        assert!(
            c.sim.ip_blocks().is_empty(),
            "{point}: {:?}",
            c.sim.ip_blocks()
        );
    }
}

/// A kill in the middle of the release: marking is one request (the tags are replaced as a
/// whole), and every housekeeping pass starts from the blocks' state, so a fresh instance
/// finishes it.
#[tokio::test]
async fn a_crash_in_the_middle_of_a_release_is_finished_by_the_next_pass() {
    let c = cloud().await;
    let svc = service("web");
    ensure(&c, &svc).await.expect("ensure");
    c.sim.settle();
    c.driver
        .load_balancer_delete(&svc, &scope())
        .await
        .into_result()
        .expect("delete");
    // Killed right after the unassignment was accepted.
    c.sim.faults().kill_after(
        Match::path(&format!(
            "/networks/v1/public-networks/{NETWORK}/ip-blocks/"
        ))
        .with_method("DELETE"),
        1,
        503,
    );
    let _ = c.driver.housekeeping(&CallScope::default()).await;
    assert!(c.sim.faults().killed());
    c.sim.faults().clear();
    c.sim.settle();
    let fresh = load(&c.sim, CLUSTER, &c.sim.client_secret(), "")
        .await
        .expect("loads");
    fresh
        .housekeeping(&CallScope::default())
        .await
        .into_result()
        .expect("housekeeping");
    assert!(c.sim.ip_blocks().is_empty(), "{:?}", c.sim.ip_blocks());
}

const ASSIGN_METHOD: &str = "POST";

fn assign_path() -> String {
    format!("/networks/v1/public-networks/{NETWORK}/ip-blocks")
}

/// The tag names and one unassigned block tagged for Service `name` (as a crash after the
/// create leaves it); returns the block's ID.
fn seed_service_block(sim: &PhoenixnapSim, name: &str) -> String {
    for tag in [
        "usage",
        "cluster",
        "serviceNamespace",
        "serviceName",
        "delete",
    ] {
        let _ = sim.try_add_tag(SeedTag::new(tag));
    }
    sim.add_ip_block(
        SeedIpBlock::new()
            .with_tag("usage", "cloud-provider-phoenixnap-auto")
            .with_tag("cluster", CLUSTER)
            .with_tag("serviceNamespace", "default")
            .with_tag("serviceName", name),
    )
}

fn answered(sim: &PhoenixnapSim, method: &str, path: &str, status: u16) -> usize {
    sim.requests()
        .iter()
        .filter(|r| r.method == method && r.path == path && r.status == status)
        .count()
}

fn block(sim: &PhoenixnapSim, id: &str) -> Option<Value> {
    sim.ip_blocks().into_iter().find(|b| b["id"] == id)
}

/// Review §4: another client assigns the chosen block between the driver's read and its
/// assignment. The 409 is re-read: on our network it is convergence in the same call; on
/// something else a named refusal that deletes nothing; still unassigned a retry-after, and the
/// next ensure assigns.
#[tokio::test]
async fn an_assignment_conflict_is_re_read_and_converges() {
    let c = cloud().await;
    // (a) Assigned to our network by another client (e.g. the Go CCM during a migration).
    let id = seed_service_block(&c.sim, "web");
    c.sim.race_next_assignment(Race::Assign {
        block: id.clone(),
        resource_type: "public network".into(),
        resource_id: NETWORK.into(),
    });
    c.sim.clear_requests();
    let r = ensure(&c, &service("web"))
        .await
        .expect("converges in the same call");
    assert_eq!(r.ingress.len(), 1);
    assert_eq!(answered(&c.sim, ASSIGN_METHOD, &assign_path(), 409), 1);
    assert_eq!(
        block(&c.sim, &id).map(|b| b["assignedResourceId"].clone()),
        Some(Value::from(NETWORK))
    );
    assert_eq!(c.sim.ip_blocks().len(), 1, "no second block");

    // (b) Taken by a server: refused with the owner named; the block stays.
    let id = seed_service_block(&c.sim, "api");
    c.sim.race_next_assignment(Race::Assign {
        block: id.clone(),
        resource_type: "server".into(),
        resource_id: c.workers[0].clone(),
    });
    match ensure(&c, &service("api")).await {
        Err(CallError::Provider(ProviderError::Permanent(m))) => {
            assert!(m.contains(&id) && m.contains(&c.workers[0]), "{m}");
        }
        other => panic!("expected a named refusal, got {other:?}"),
    }
    assert!(
        block(&c.sim, &id).is_some(),
        "an ambiguous owner deletes nothing"
    );
    assert_eq!(c.sim.ip_blocks().len(), 2);

    // (c) A 409 whose re-read finds the block still unassigned: a transient error (backoff and
    // a Warning each time, so a lasting conflict is seen), then converge.
    let id = seed_service_block(&c.sim, "db");
    c.sim.faults().fail_next(
        Match::path(&assign_path()).with_method(ASSIGN_METHOD),
        409,
        1,
    );
    match ensure(&c, &service("db")).await {
        Err(CallError::Provider(ProviderError::Transient(m))) => {
            assert!(m.contains("409") && m.contains(&id), "{m}");
        }
        other => panic!("expected a transient error, got {other:?}"),
    }
    assert_eq!(c.sim.faults().pending(), 0, "the 409 was answered");
    ensure(&c, &service("db"))
        .await
        .expect("the next ensure assigns");
    c.sim.settle();
    assert_eq!(
        block(&c.sim, &id).map(|b| b["status"].clone()),
        Some(Value::from("assigned"))
    );
    assert_eq!(
        c.sim.ip_blocks().len(),
        3,
        "no second block for any Service"
    );
    assert!(
        !c.sim.mutations().iter().any(|r| r.method == "DELETE"),
        "{:?}",
        cloud_changes(&c.sim)
    );
}

/// Review §4: a public network that is not READY is looked at before anything billed is
/// created: BUSY is retry-after, ERROR and DELETING are refusals, and no request changes the
/// cloud (not even tag names).
#[tokio::test]
async fn a_network_that_is_not_ready_creates_nothing() {
    let c = cloud().await;
    for status in ["ERROR", "DELETING", "BUSY"] {
        assert!(c.sim.set_public_network_status(NETWORK, status));
        c.sim.clear_requests();
        let r = ensure(&c, &service("web")).await;
        match (status, r) {
            ("BUSY", Err(CallError::Provider(ProviderError::RetryAfter(r)))) => {
                assert!(
                    r.reason.contains("BUSY") && r.reason.contains(NETWORK),
                    "{r:?}"
                );
            }
            ("ERROR" | "DELETING", Err(CallError::Provider(ProviderError::Permanent(m)))) => {
                assert!(m.contains(status) && m.contains(NETWORK), "{m}");
                assert!(m.contains("no IP block was created"), "{m}");
            }
            (_, other) => panic!("{status}: unexpected {other:?}"),
        }
        assert!(
            cloud_changes(&c.sim).is_empty(),
            "{status}: {:?}",
            cloud_changes(&c.sim)
        );
        assert!(c.sim.ip_blocks().is_empty(), "{status}");
    }
    // READY again: created and assigned.
    assert!(c.sim.set_public_network_status(NETWORK, "READY"));
    ensure(&c, &service("web")).await.expect("ensure");
    c.sim.settle();
    assert_eq!(c.sim.public_network_blocks(NETWORK).len(), 1);
}

/// Review §4: when the assignment cannot succeed (the network is in ERROR), the Service's own
/// unassigned block is released (identified by its tags), and only that: another Service's
/// unassigned block stays. Also when the network breaks between the driver's check and its
/// assignment (the block was created in the same call).
#[tokio::test]
async fn a_broken_network_releases_only_this_services_unassigned_block() {
    let c = cloud().await;
    let mine = seed_service_block(&c.sim, "web");
    let theirs = seed_service_block(&c.sim, "other");
    assert!(c.sim.set_public_network_status(NETWORK, "ERROR"));
    c.sim.clear_requests();
    match ensure(&c, &service("web")).await {
        Err(CallError::Provider(ProviderError::Permanent(m))) => {
            assert!(
                m.contains("ERROR") && m.contains(&mine) && m.contains("released"),
                "{m}"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(
        block(&c.sim, &mine).is_none(),
        "this Service's block is released"
    );
    assert!(
        block(&c.sim, &theirs).is_some(),
        "another Service's block stays"
    );
    let deletes: Vec<String> = c
        .sim
        .mutations()
        .iter()
        .filter(|r| r.method == "DELETE")
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(deletes, vec![format!("/ips/v1/ip-blocks/{mine}")]);
    // The next ensure creates nothing while the network is broken.
    c.sim.clear_requests();
    assert!(ensure(&c, &service("web")).await.is_err());
    assert!(
        cloud_changes(&c.sim).is_empty(),
        "{:?}",
        cloud_changes(&c.sim)
    );

    // The network breaks between the check and the assignment: the block created in this
    // call is released, nothing billed stays.
    assert!(c.sim.set_public_network_status(NETWORK, "READY"));
    c.sim.race_next_assignment(Race::NetworkStatus {
        network: NETWORK.into(),
        status: "ERROR".into(),
    });
    c.sim.clear_requests();
    match ensure(&c, &service("api")).await {
        Err(CallError::Provider(ProviderError::Permanent(m))) => {
            assert!(m.contains("ERROR") && m.contains("released"), "{m}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(answered(&c.sim, "POST", "/ips/v1/ip-blocks", 201), 1);
    assert_eq!(answered(&c.sim, ASSIGN_METHOD, &assign_path(), 409), 1);
    assert!(blocks_tagged(&c.sim, "serviceName", "api").is_empty());
    assert_eq!(c.sim.ip_blocks().len(), 1, "only the other Service's block");
}

/// A requested spec.loadBalancerIP cannot be honoured by a new block (PhoenixNAP chooses its
/// address), so it is refused before anything is created.
#[tokio::test]
async fn a_requested_ip_without_a_block_creates_nothing() {
    let c = cloud().await;
    let mut svc = service("web");
    svc.load_balancer_ip = Some("198.51.100.10".into());
    c.sim.clear_requests();
    match ensure(&c, &svc).await {
        Err(CallError::Provider(ProviderError::InvalidConfig(m))) => {
            assert!(
                m.contains("spec.loadBalancerIP") && m.contains("198.51.100.10"),
                "{m}"
            );
        }
        other => panic!("expected invalid-config, got {other:?}"),
    }
    assert!(
        cloud_changes(&c.sim).is_empty(),
        "{:?}",
        cloud_changes(&c.sim)
    );
    assert!(c.sim.ip_blocks().is_empty());
}

/// A 404 on a delete is not taken for "deleted" (no delete the driver sends documents 404, so
/// it means a wrong URL): housekeeping reports it, and the next pass deletes the block.
#[tokio::test]
async fn a_404_on_a_delete_is_not_taken_for_gone() {
    let c = cloud().await;
    let svc = service("web");
    ensure(&c, &svc).await.expect("ensure");
    c.sim.settle();
    c.driver
        .load_balancer_delete(&svc, &scope())
        .await
        .into_result()
        .expect("delete");
    let hk = || async {
        c.driver
            .housekeeping(&CallScope::default())
            .await
            .into_result()
    };
    hk().await.expect("unassigns");
    c.sim.settle();
    c.sim.faults().fail_next(
        Match::path("/ips/v1/ip-blocks/").with_method("DELETE"),
        404,
        1,
    );
    assert!(matches!(
        hk().await,
        Err(CallError::Provider(ProviderError::NotFound(_)))
    ));
    assert_eq!(c.sim.ip_blocks().len(), 1, "still there");
    hk().await.expect("deletes");
    assert!(c.sim.ip_blocks().is_empty(), "{:?}", c.sim.ip_blocks());
}
