//! The cloudscale driver through the host runtime against the stateful cloudscale simulator:
//! instances, every row of the upstream README's "Impact of Service Changes", adoption of a load
//! balancer built by the Go CCM, faults, and the deviations from upstream.

mod common;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::OnceCell;
use wasm_ccm_drivers::CLOUDSCALE_DRIVER;
use wasm_ccm_runtime::types::{
    EnsureResult, Ingress, IpMode, Node, Protocol, ProviderError, Service, ServicePort,
    TrafficPolicy,
};
use wasm_ccm_runtime::{
    CallError, CallScope, Compiled, Driver, DriverOptions, EventKind, Outcome, StaticCluster,
};
use wasm_ccm_runtime::{InitInput, http};
use wasm_ccm_sim::cloudscale::{CloudscaleOptions, CloudscaleSim, Match, SeedServer};
use wasm_ccm_sim::kit::SimCloud as _;

const PRIVATE_SUBNET: &str = "8a9c1a52-70c4-4b5e-8f3e-3a0f5c1d2e01";
const OTHER_SUBNET: &str = "8a9c1a52-70c4-4b5e-8f3e-3a0f5c1d2e02";
const UID: &str = "4a0ed5b2-8a3c-4f1e-9d2b-6c7e8f9a0b1c";
const P: &str = "k8s.cloudscale.ch/";

async fn compiled() -> &'static Compiled {
    static COMPILED: OnceCell<Compiled> = OnceCell::const_new();
    COMPILED
        .get_or_init(|| common::compile(CLOUDSCALE_DRIVER))
        .await
}

/// A simulator with two workers (public + private interfaces) and the driver pointed at it.
struct Cloud {
    sim: CloudscaleSim,
    driver: Driver,
    workers: Vec<String>,
}

async fn cloud() -> Cloud {
    cloud_with(CloudscaleOptions::default(), "v1.31.2").await
}

async fn cloud_with(options: CloudscaleOptions, kubernetes_version: &str) -> Cloud {
    let sim = CloudscaleSim::start("127.0.0.1:0".parse().expect("addr"), options)
        .await
        .expect("simulator starts");
    let workers = vec![
        sim.add_server(
            SeedServer::new("worker-1")
                .public(&["5.102.148.11", "2a06:c01:1000:1165::11"])
                .private(PRIVATE_SUBNET, "10.1.1.0/24", &["10.1.1.11"]),
        ),
        sim.add_server(
            SeedServer::new("worker-2")
                .public(&["5.102.148.12"])
                .private(PRIVATE_SUBNET, "10.1.1.0/24", &["10.1.1.12"])
                .private(OTHER_SUBNET, "10.2.2.0/24", &["10.2.2.12"]),
        ),
    ];
    let driver = load(&sim, kubernetes_version, &sim.token()).await;
    Cloud {
        sim,
        driver,
        workers,
    }
}

async fn load(sim: &CloudscaleSim, kubernetes_version: &str, token: &str) -> Driver {
    // The simulator's own wiring (the kit's driver setup), with the token under test.
    let setup = sim.driver_setup();
    let mut env = setup.env;
    env.retain(|(name, _)| name != "CLOUDSCALE_ACCESS_TOKEN");
    env.push(("CLOUDSCALE_ACCESS_TOKEN".into(), token.into()));
    let mut opts = DriverOptions {
        init: InitInput {
            env,
            ..Default::default()
        },
        http: http::Config {
            egress: Some(
                wasm_ccm_runtime::EgressPolicy::parse(&setup.egress).expect("egress grants"),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    opts.init.context.kubernetes_version = kubernetes_version.into();
    common::runtime()
        .load(compiled().await, opts)
        .await
        .expect("driver loads")
}

fn node(name: &str) -> Node {
    common::node(name)
}

fn nodes() -> Vec<Node> {
    vec![node("worker-1"), node("worker-2")]
}

fn port(name: &str, protocol: Protocol, port: u16, node_port: u16) -> ServicePort {
    ServicePort {
        name: name.into(),
        protocol,
        port,
        node_port,
    }
}

fn service(annotations: &[(&str, &str)]) -> Service {
    let mut s = common::lb_service("web", UID);
    s.annotations = annotations
        .iter()
        .map(|(k, v)| (format!("{P}{k}"), v.to_string()))
        .collect();
    s.ports = vec![port("", Protocol::Tcp, 80, 30080)];
    s
}

/// Sets (or replaces) annotation `k8s.cloudscale.ch/<key>`.
fn annotate(mut svc: Service, key: &str, value: &str) -> Service {
    let key = format!("{P}{key}");
    svc.annotations.retain(|(k, _)| *k != key);
    svc.annotations.push((key, value.into()));
    svc
}

fn annotation(svc: &Service, key: &str) -> Option<String> {
    let key = format!("{P}{key}");
    svc.annotations
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.clone())
}

fn proxy(ip: impl Into<String>) -> Ingress {
    Ingress {
        ip: Some(ip.into()),
        hostname: None,
        ip_mode: Some(IpMode::Proxy),
    }
}

fn hostname(name: &str) -> Ingress {
    Ingress {
        ip: None,
        hostname: Some(name.into()),
        ip_mode: None,
    }
}

fn scope() -> CallScope {
    CallScope::object("default/web")
}

fn provider_error<T: std::fmt::Debug>(o: &Outcome<T>) -> &ProviderError {
    match &o.result {
        Err(CallError::Provider(e)) => e,
        other => panic!("expected a provider error, got {other:?}"),
    }
}

fn mutations(o: &Outcome<impl Sized>) -> Vec<String> {
    o.http
        .iter()
        .filter(|x| x.mutating)
        .map(|x| {
            let path = x.url.split_once("/v1/").map_or("", |(_, p)| p);
            format!("{} {}", x.method, path)
        })
        .collect()
}

/// Replaces UUIDs in paths by `*` so sequences of requests can be compared.
fn shape(lines: Vec<String>) -> Vec<String> {
    lines
        .into_iter()
        .map(|l| {
            l.split('/')
                .map(|seg| {
                    if seg.len() == 36 && seg.matches('-').count() == 4 {
                        "*"
                    } else {
                        seg
                    }
                })
                .collect::<Vec<_>>()
                .join("/")
        })
        .collect()
}

impl Cloud {
    async fn ensure(&self, svc: &Service, nodes: &[Node]) -> Outcome<EnsureResult> {
        self.driver.load_balancer_ensure(svc, nodes, &scope()).await
    }

    /// Ensures and applies the result like the host; panics on failure.
    async fn converge(&self, svc: Service) -> (Service, Outcome<EnsureResult>) {
        let o = self.ensure(&svc, &nodes()).await;
        let r = o.result.clone().expect("ensure succeeds");
        (common::apply(svc, &r), o)
    }

    fn pool_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.sim.pools().iter().map(|p| s(&p["name"])).collect();
        v.sort();
        v
    }

    fn listener_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.sim.listeners().iter().map(|p| s(&p["name"])).collect();
        v.sort();
        v
    }

    fn member_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.sim.members().iter().map(|p| s(&p["name"])).collect();
        v.sort();
        v
    }
}

/// The messages of the Warning events with `reason` that a call emitted.
fn warnings<T>(o: &Outcome<T>, reason: &str) -> Vec<String> {
    o.events
        .iter()
        .filter(|e| e.kind == EventKind::Warning && e.reason == reason)
        .map(|e| e.message.clone())
        .collect()
}

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

// ---------------------------------------------------------------------------------------------
// Instances

/// `items` is not empty and every one passes `f`: an `.all()` alone passes on nothing.
fn every<T>(items: &[T], f: impl Fn(&T) -> bool) -> bool {
    !items.is_empty() && items.iter().all(f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_metadata_by_name_and_by_provider_id() {
    let c = cloud().await;
    let m = c
        .driver
        .instance_metadata(&node("worker-1"), &scope())
        .await
        .result
        .expect("metadata");
    assert_eq!(m.provider_id, format!("cloudscale://{}", c.workers[0]));
    assert_eq!(m.instance_type, "flex-4-2");
    assert_eq!((m.zone.as_str(), m.region.as_str()), ("rma1", "rma"));
    let addrs: Vec<_> = m
        .addresses
        .iter()
        .map(|a| format!("{:?}={}", a.kind, a.address).replace("AddressType::", ""))
        .collect();
    assert_eq!(
        addrs,
        [
            "Hostname=worker-1",
            "ExternalIp=5.102.148.11",
            "ExternalIp=2a06:c01:1000:1165::11",
            "InternalIp=10.1.1.11"
        ]
    );

    let mut by_id = node("renamed");
    by_id.provider_id = format!("cloudscale://{}", c.workers[1].to_uppercase());
    let m = c
        .driver
        .instance_metadata(&by_id, &scope())
        .await
        .result
        .expect("metadata by provider ID");
    assert_eq!(m.provider_id, format!("cloudscale://{}", c.workers[1]));
    assert_eq!(
        c.sim.requests().last().map(|r| r.path.clone()),
        Some(format!("/v1/servers/{}", c.workers[1]))
    );

    let missing = c.driver.instance_metadata(&node("nope"), &scope()).await;
    assert!(matches!(
        provider_error(&missing),
        ProviderError::NotFound(_)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exists_and_shutdown_follow_upstream() {
    let c = cloud().await;
    let mut n = node("worker-1");
    n.provider_id = format!("cloudscale://{}", c.workers[0]);
    assert_eq!(
        c.driver.instance_exists(&n, &scope()).await.result.ok(),
        Some(true)
    );
    assert_eq!(
        c.driver.instance_shutdown(&n, &scope()).await.result.ok(),
        Some(false)
    );
    c.sim.set_server_status(&c.workers[0], "stopped");
    assert_eq!(
        c.driver.instance_shutdown(&n, &scope()).await.result.ok(),
        Some(true)
    );
    c.sim.remove_server(&c.workers[0]);
    assert_eq!(
        c.driver.instance_exists(&n, &scope()).await.result.ok(),
        Some(false)
    );
    assert!(matches!(
        provider_error(&c.driver.instance_shutdown(&n, &scope()).await),
        ProviderError::NotFound(_)
    ));

    // No provider ID, or a foreign one: an error, never "does not exist".
    let bare = node("worker-2");
    assert!(matches!(
        provider_error(&c.driver.instance_exists(&bare, &scope()).await),
        ProviderError::Permanent(m) if m.contains("no provider ID")
    ));
    let mut foreign = node("worker-2");
    foreign.provider_id = "aws:///eu-west-1a/i-0123".into();
    assert!(matches!(
        provider_error(&c.driver.instance_exists(&foreign, &scope()).await),
        ProviderError::Permanent(m) if m.contains("cloudscale://<server-uuid>")
    ));
}

/// A node without a provider ID (not initialised yet), as upstream (`instances.go`
/// `InstanceExists`/`InstanceShutdown` since commit 253641c, `server_mapper.go` `findByNode` and
/// `mapNodes`): existence and shutdown are never decided by name, whether a server of that name
/// exists, is gone or is ambiguous; metadata and load balancer members are looked up by exact
/// name, and a name matching no server or several fails the whole reconcile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_provider_id_is_decided_as_upstream() {
    let c = cloud().await;
    let undecided = |o: &Outcome<bool>| matches!(provider_error(o), ProviderError::Permanent(m) if m.contains("no provider ID"));

    // Its server exists: metadata by name, a member by name, but existence is not decided.
    let bare = node("worker-2");
    assert!(undecided(&c.driver.instance_exists(&bare, &scope()).await));
    assert!(undecided(
        &c.driver.instance_shutdown(&bare, &scope()).await
    ));
    let m = c
        .driver
        .instance_metadata(&bare, &scope())
        .await
        .result
        .expect("metadata by name");
    assert_eq!(m.provider_id, format!("cloudscale://{}", c.workers[1]));
    let (svc, _) = c.converge(service(&[])).await;
    let members = c.member_names();
    assert!(
        members.contains(&"10.1.1.12:30080".to_string()),
        "{members:?}"
    );

    // Its server is gone: still an error (never "does not exist", so the Node stays). A load
    // balancer it is a backend of leaves it out with a Warning event naming it, and keeps
    // serving the good nodes (review 2026-11-26, §3; upstream failed the whole reconcile).
    let late = c.sim.add_server(SeedServer::new("worker-3").private(
        PRIVATE_SUBNET,
        "10.1.1.0/24",
        &["10.1.1.13"],
    ));
    c.sim.remove_server(&late);
    let gone = node("worker-3");
    assert!(undecided(&c.driver.instance_exists(&gone, &scope()).await));
    assert!(matches!(
        provider_error(&c.driver.instance_metadata(&gone, &scope()).await),
        ProviderError::NotFound(_)
    ));
    let mut with_gone = nodes();
    with_gone.push(gone.clone());
    c.sim.clear_requests();
    let o = c
        .driver
        .load_balancer_update(&svc, &with_gone, &scope())
        .await;
    o.result.as_ref().expect("the good nodes are reconciled");
    let left_out = warnings(&o, "BackendsLeftOut");
    assert_eq!(left_out.len(), 1, "{:?}", o.events);
    assert!(
        left_out[0].contains("node worker-3") && left_out[0].contains("delete the Node"),
        "{left_out:?}"
    );
    let o = c.ensure(&svc, &with_gone).await;
    o.result.as_ref().expect("ensure with a stale node");
    assert_eq!(warnings(&o, "BackendsLeftOut").len(), 1, "{:?}", o.events);
    assert!(c.sim.mutations().is_empty(), "{:?}", c.sim.mutations());
    assert_eq!(
        c.member_names(),
        ["10.1.1.11:30080", "10.1.1.12:30080", "10.2.2.12:30080"]
    );
    // If no node at all maps, nothing is changed (an answer that maps no node may be a wrong
    // account), and the error names the node.
    let o = c
        .driver
        .load_balancer_update(&svc, std::slice::from_ref(&gone), &scope())
        .await;
    assert!(matches!(provider_error(&o),
        ProviderError::Permanent(m) if m.contains("worker-3") && m.contains("nothing was changed")));
    assert!(c.sim.mutations().is_empty(), "{:?}", c.sim.mutations());

    // Its name matches two servers: an error everywhere, never "gone"; behind a load balancer
    // it is left out, and its existing member is neither removed nor duplicated (an ambiguous
    // answer never deletes anything).
    c.sim.add_server(SeedServer::new("worker-2").private(
        PRIVATE_SUBNET,
        "10.1.1.0/24",
        &["10.1.1.22"],
    ));
    assert!(undecided(&c.driver.instance_exists(&bare, &scope()).await));
    assert!(matches!(
        provider_error(&c.driver.instance_metadata(&bare, &scope()).await),
        ProviderError::Permanent(m) if m.contains("found 2 cloudscale servers")
    ));
    c.sim.clear_requests();
    let o = c
        .driver
        .load_balancer_update(&svc, &nodes(), &scope())
        .await;
    o.result.as_ref().expect("worker-1 is still reconciled");
    let left_out = warnings(&o, "BackendsLeftOut");
    assert_eq!(left_out.len(), 1, "{:?}", o.events);
    assert!(
        left_out[0].contains("node worker-2") && left_out[0].contains("2 cloudscale servers"),
        "{left_out:?}"
    );
    assert!(c.sim.mutations().is_empty(), "{:?}", c.sim.mutations());
    assert_eq!(
        c.member_names(),
        ["10.1.1.11:30080", "10.1.1.12:30080", "10.2.2.12:30080"]
    );
    // With its provider ID the node is decided again.
    let mut initialised = node("worker-2");
    initialised.provider_id = format!("cloudscale://{}", c.workers[1]);
    assert_eq!(
        c.driver
            .instance_exists(&initialised, &scope())
            .await
            .result
            .ok(),
        Some(true)
    );
}

/// Review 2026-11-28 §3 (found on PhoenixNAP, the same class here): kubelet names its Node
/// after the hostname lower-cased (`component-helpers/node/util` `GetHostname`), while cloudscale
/// server names may hold upper case. A lone server `Node-F` is node `node-f`'s, for metadata and
/// as a load balancer member; servers `Node-E` and `node-e` both are node `node-e`'s: ambiguous,
/// so metadata binds neither and the load balancer leaves the node out (a Warning naming both)
/// and adds neither server's address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_match_servers_as_kubelet_names_them_and_two_matches_bind_nothing() {
    let c = cloud().await;
    let upper = c.sim.add_server(SeedServer::new("Node-E").private(
        PRIVATE_SUBNET,
        "10.1.1.0/24",
        &["10.1.1.31"],
    ));
    let lower = c.sim.add_server(SeedServer::new("node-e").private(
        PRIVATE_SUBNET,
        "10.1.1.0/24",
        &["10.1.1.41"],
    ));
    let lone = c.sim.add_server(SeedServer::new("Node-F").private(
        PRIVATE_SUBNET,
        "10.1.1.0/24",
        &["10.1.1.32"],
    ));

    let m = c
        .driver
        .instance_metadata(&node("node-f"), &scope())
        .await
        .result
        .expect("Node-F is node node-f's server");
    assert_eq!(m.provider_id, format!("cloudscale://{lone}"));

    let o = c.driver.instance_metadata(&node("node-e"), &scope()).await;
    assert!(
        matches!(provider_error(&o), ProviderError::Permanent(m)
            if m.contains("found 2 cloudscale servers") && m.contains(&upper) && m.contains(&lower)),
        "{:?}",
        o.result
    );

    let backends = vec![node("worker-1"), node("node-e"), node("node-f")];
    let o = c.ensure(&service(&[]), &backends).await;
    o.result
        .as_ref()
        .expect("the unambiguous nodes are reconciled");
    let left_out = warnings(&o, "BackendsLeftOut");
    assert_eq!(left_out.len(), 1, "{:?}", o.events);
    assert!(
        left_out[0].contains("node node-e")
            && left_out[0].contains("2 cloudscale servers")
            && left_out[0].contains(&upper)
            && left_out[0].contains(&lower),
        "{left_out:?}"
    );
    assert_eq!(c.member_names(), ["10.1.1.11:30080", "10.1.1.32:30080"]);

    // Positive control: with one of them gone, node-e is bound to the other, whatever its case.
    assert!(c.sim.remove_server(&lower));
    let m = c
        .driver
        .instance_metadata(&node("node-e"), &scope())
        .await
        .result
        .expect("one server left");
    assert_eq!(m.provider_id, format!("cloudscale://{upper}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_unauthorized_and_429_is_rate_limited() {
    let c = cloud().await;
    let bad = load(&c.sim, "v1.31.2", "wrong-token").await;
    let o = bad.instance_metadata(&node("worker-1"), &scope()).await;
    assert!(
        matches!(provider_error(&o), ProviderError::Unauthorized(m) if m.contains("Invalid token"))
    );

    c.sim
        .faults()
        .throttle_next(Match::path("/v1/servers"), 7, 1);
    let o = c
        .driver
        .instance_metadata(&node("worker-1"), &scope())
        .await;
    assert_eq!(provider_error(&o), &ProviderError::RateLimited(Some(7)));
}

// ---------------------------------------------------------------------------------------------
// Load balancers: create, steady state, delete

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_builds_the_load_balancer_like_upstream_and_then_only_reads() {
    let c = cloud().await;
    let svc = service(&[]);
    let (svc, first) = c.converge(svc).await;
    let r = first.result.as_ref().expect("ensure");

    let lbs = c.sim.load_balancers();
    assert_eq!(lbs.len(), 1);
    let lb = &lbs[0];
    assert_eq!(s(&lb["name"]), format!("k8s-service-{UID}"));
    assert_eq!(s(&lb["flavor"]["slug"]), "lb-standard");
    assert_eq!(s(&lb["zone"]["slug"]), "rma1");
    let vips: Vec<String> = lb["vip_addresses"]
        .as_array()
        .expect("vips")
        .iter()
        .map(|v| s(&v["address"]))
        .collect();
    assert_eq!(vips.len(), 2, "public IPv4 + IPv6");
    assert_eq!(
        r.ingress,
        vips.iter().map(|ip| proxy(ip.clone())).collect::<Vec<_>>()
    );
    let mut set = r.set_annotations.clone();
    set.sort();
    assert_eq!(
        set,
        vec![
            (format!("{P}loadbalancer-config-version"), "1".to_string()),
            (format!("{P}loadbalancer-uuid"), s(&lb["uuid"])),
            (format!("{P}loadbalancer-zone"), "rma1".to_string()),
        ]
    );
    assert_eq!(c.pool_names(), ["tcp"]);
    assert_eq!(c.listener_names(), ["tcp/80"]);
    assert_eq!(
        c.member_names(),
        ["10.1.1.11:30080", "10.1.1.12:30080", "10.2.2.12:30080"]
    );
    let pool = &c.sim.pools()[0];
    assert_eq!(
        (s(&pool["algorithm"]), s(&pool["protocol"])),
        ("round_robin".into(), "tcp".into())
    );
    let monitors = c.sim.health_monitors();
    assert_eq!(monitors.len(), 1);
    assert_eq!(s(&monitors[0]["type"]), "tcp");
    assert_eq!(monitors[0]["delay_s"], 2);
    let listener = &c.sim.listeners()[0];
    assert_eq!(listener["timeout_client_data_ms"], 50_000);
    assert_eq!(listener["allowed_cidrs"], json!([]));
    assert_eq!(
        shape(mutations(&first)),
        [
            "POST load-balancers",
            "POST load-balancers/pools",
            "POST load-balancers/pools/*/members",
            "POST load-balancers/pools/*/members",
            "POST load-balancers/pools/*/members",
            "POST load-balancers/listeners",
            "POST load-balancers/health-monitors",
        ]
    );

    // Steady state: ensure and update with unchanged inputs only read.
    c.sim.clear_requests();
    let again = c.ensure(&svc, &nodes()).await;
    let r2 = again.result.as_ref().expect("second ensure");
    assert_eq!(r2.ingress, r.ingress);
    assert!(r2.set_annotations.is_empty(), "{:?}", r2.set_annotations);
    let update = c
        .driver
        .load_balancer_update(&svc, &nodes(), &scope())
        .await;
    update.result.expect("update");
    assert!(c.sim.mutations().is_empty(), "{:?}", c.sim.mutations());
    let reads: Vec<String> = c.sim.requests().iter().map(|r| r.line()).collect();
    assert!(every(&reads, |l| l.starts_with("GET ")), "{reads:?}");

    // get sees it; delete removes it (the API cascades) and is idempotent.
    let got = c
        .driver
        .load_balancer_get(&svc, &scope())
        .await
        .result
        .expect("get");
    assert_eq!(got, Some(r.ingress.clone()));
    c.driver
        .load_balancer_delete(&svc, &scope())
        .await
        .result
        .expect("delete");
    assert!(c.sim.load_balancers().is_empty());
    assert!(c.sim.pools().is_empty() && c.sim.listeners().is_empty());
    assert!(c.sim.members().is_empty() && c.sim.health_monitors().is_empty());
    c.driver
        .load_balancer_delete(&svc, &scope())
        .await
        .result
        .expect("delete again");
    let never = service(&[("loadbalancer-name", "never-created")]);
    c.driver
        .load_balancer_delete(&never, &scope())
        .await
        .result
        .expect("delete of nothing");
    assert_eq!(
        c.driver
            .load_balancer_get(&svc, &scope())
            .await
            .result
            .expect("get"),
        None
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provisioning_load_balancer_means_retry_after_not_a_second_one() {
    let c = cloud_with(
        CloudscaleOptions {
            lb_ready_after: Duration::from_secs(3600),
            ..Default::default()
        },
        "v1.29.4",
    )
    .await;
    let svc = service(&[]);
    for _ in 0..2 {
        let o = c.ensure(&svc, &nodes()).await;
        assert!(
            matches!(provider_error(&o), ProviderError::RetryAfter(r) if r.seconds == 5 && r.reason.contains("changing")),
            "{:?}",
            o.result
        );
    }
    assert_eq!(
        c.sim.load_balancers().len(),
        1,
        "found again by name, not re-created"
    );
    assert!(
        c.sim.pools().is_empty(),
        "nothing is added while it provisions"
    );
    c.sim.settle();
    let (_, o) = c.converge(svc).await;
    assert_eq!(c.sim.load_balancers().len(), 1);
    // Kubernetes 1.29 has no ipMode.
    assert!(every(&o.result.expect("ensure").ingress, |i| i
        .ip_mode
        .is_none()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_during_lookup_is_an_error_and_creates_nothing() {
    let c = cloud().await;
    let (svc, _) = c.converge(service(&[])).await;
    // The UUID lookup succeeds, the name lookup fails: upstream dropped the error and could
    // create a duplicate; here the call fails and nothing is written.
    c.sim.clear_requests();
    c.sim
        .faults()
        .fail_next(Match::path("/v1/load-balancers").with_method("GET"), 503, 2);
    let fresh = service(&[]); // no UUID annotation yet: only the name lookup
    let o = c.ensure(&fresh, &nodes()).await;
    assert!(matches!(provider_error(&o), ProviderError::Transient(m) if m.contains("503")));
    let o = c.ensure(&svc, &nodes()).await;
    assert!(matches!(provider_error(&o), ProviderError::Transient(_)));
    assert!(c.sim.mutations().is_empty(), "{:?}", c.sim.mutations());
    assert_eq!(c.sim.load_balancers().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_uuid_and_a_name_that_disagree_are_refused() {
    let c = cloud().await;
    let (web, _) = c.converge(service(&[])).await;
    let mut other = service(&[("loadbalancer-name", "other")]);
    other.uid = "99999999-8a3c-4f1e-9d2b-6c7e8f9a0b1c".into();
    let (other, _) = c.converge(other).await;
    let other_uuid = annotation(&other, "loadbalancer-uuid").expect("uuid");
    let confused = annotate(web, "loadbalancer-uuid", &other_uuid);
    c.sim.clear_requests();
    let o = c.ensure(&confused, &nodes()).await;
    assert!(
        matches!(provider_error(&o), ProviderError::Permanent(m) if m.contains("more than one"))
    );
    assert!(c.sim.mutations().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_balancer_built_by_the_go_ccm_is_adopted_unchanged() {
    let c = cloud().await;
    // Build what the upstream CCM builds, with its names, straight through the API.
    let http = reqwest::Client::new();
    let api = |path: &str| format!("{}/v1/{path}", c.sim.url());
    let post = |path: String, body: Value| {
        let http = http.clone();
        let token = c.sim.token();
        async move {
            let r = http
                .post(path)
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .expect("request");
            assert_eq!(r.status(), 201);
            r.json::<Value>().await.expect("json")
        }
    };
    let lb = post(
        api("load-balancers"),
        json!({"name": format!("k8s-service-{UID}"), "flavor": "lb-standard", "vip_addresses": [], "zone": "rma1"}),
    )
    .await;
    let pool = post(
        api("load-balancers/pools"),
        json!({"name": "tcp", "load_balancer": lb["uuid"], "algorithm": "round_robin", "protocol": "tcp"}),
    )
    .await;
    for (addr, subnet) in [
        ("10.1.1.11", PRIVATE_SUBNET),
        ("10.1.1.12", PRIVATE_SUBNET),
        ("10.2.2.12", OTHER_SUBNET),
    ] {
        post(
            api(&format!("load-balancers/pools/{}/members", s(&pool["uuid"]))),
            json!({"name": format!("{addr}:30080"), "protocol_port": 30080, "monitor_port": 30080, "address": addr, "subnet": subnet}),
        )
        .await;
    }
    post(
        api("load-balancers/listeners"),
        json!({"pool": pool["uuid"], "name": "tcp/80", "protocol": "tcp", "protocol_port": 80, "allowed_cidrs": [],
               "timeout_client_data_ms": 50000, "timeout_member_connect_ms": 5000, "timeout_member_data_ms": 50000}),
    )
    .await;
    post(
        api("load-balancers/health-monitors"),
        json!({"pool": pool["uuid"], "delay_s": 2, "timeout_s": 1, "up_threshold": 2, "down_threshold": 3, "type": "tcp", "http": {}}),
    )
    .await;

    c.sim.clear_requests();
    let (svc, o) = c.converge(service(&[])).await;
    assert!(mutations(&o).is_empty(), "{:?}", mutations(&o));
    assert_eq!(annotation(&svc, "loadbalancer-uuid"), Some(s(&lb["uuid"])));
    assert_eq!(c.sim.load_balancers().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// "Impact of Service Changes" (upstream README), row by row

/// Applies `change` to a converged Service and returns the mutating requests it caused.
async fn change(
    c: &Cloud,
    svc: &Service,
    change: impl FnOnce(Service) -> Service,
) -> (Service, Vec<String>) {
    let changed = change(svc.clone());
    let o = c.ensure(&changed, &nodes()).await;
    let r = o
        .result
        .clone()
        .unwrap_or_else(|e| panic!("ensure after change: {e}"));
    (common::apply(changed, &r), shape(mutations(&o)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_and_minimal_impact_changes_patch_in_place() {
    let c = cloud().await;
    let (svc, _) = c.converge(service(&[])).await;
    let pool_before = s(&c.sim.pools()[0]["uuid"]);

    let (svc, m) = change(&c, &svc, |s| {
        annotate(s, "loadbalancer-timeout-client-data-ms", "60000")
    })
    .await;
    assert_eq!(m, ["PATCH load-balancers/listeners/*"]);
    let (svc, m) = change(&c, &svc, |s| {
        let s = annotate(s, "loadbalancer-timeout-member-connect-ms", "4000");
        annotate(s, "loadbalancer-timeout-member-data-ms", "40000")
    })
    .await;
    assert_eq!(
        m,
        [
            "PATCH load-balancers/listeners/*",
            "PATCH load-balancers/listeners/*"
        ]
    );
    let l = &c.sim.listeners()[0];
    assert_eq!(
        (
            &l["timeout_client_data_ms"],
            &l["timeout_member_connect_ms"],
            &l["timeout_member_data_ms"]
        ),
        (&json!(60000), &json!(4000), &json!(40000))
    );

    let (svc, m) = change(&c, &svc, |s| annotate(s, "loadbalancer-name", "renamed")).await;
    assert_eq!(m, ["PATCH load-balancers/*"]);
    assert_eq!(s(&c.sim.load_balancers()[0]["name"]), "renamed");

    let (svc, m) = change(&c, &svc, |s| {
        annotate(
            s,
            "loadbalancer-listener-allowed-cidrs",
            r#"["1.2.3.0/24"]"#,
        )
    })
    .await;
    assert_eq!(m, ["PATCH load-balancers/listeners/*"]);
    // Resetting to [] is sent explicitly (upstream issue #19).
    let (svc, m) = change(&c, &svc, |s| {
        annotate(s, "loadbalancer-listener-allowed-cidrs", "[]")
    })
    .await;
    assert_eq!(m, ["PATCH load-balancers/listeners/*"]);
    assert_eq!(c.sim.listeners()[0]["allowed_cidrs"], json!([]));

    let (svc, m) = change(&c, &svc, |s| {
        let s = annotate(s, "loadbalancer-health-monitor-delay-s", "5");
        let s = annotate(s, "loadbalancer-health-monitor-timeout-s", "3");
        let s = annotate(s, "loadbalancer-health-monitor-up-threshold", "4");
        annotate(s, "loadbalancer-health-monitor-down-threshold", "6")
    })
    .await;
    assert_eq!(m, ["PATCH load-balancers/health-monitors/*"; 4]);
    let hm = &c.sim.health_monitors()[0];
    assert_eq!(
        (
            &hm["delay_s"],
            &hm["timeout_s"],
            &hm["up_threshold"],
            &hm["down_threshold"]
        ),
        (&json!(5), &json!(3), &json!(4), &json!(6))
    );

    // Monitor type: recreated; then HTTP fields patch, the HTTP version recreates.
    let (svc, m) = change(&c, &svc, |s| {
        annotate(s, "loadbalancer-health-monitor-type", "http")
    })
    .await;
    assert_eq!(
        m,
        [
            "DELETE load-balancers/health-monitors/*",
            "POST load-balancers/health-monitors"
        ]
    );
    let (svc, m) = change(&c, &svc, |s| {
        annotate(
            s,
            "loadbalancer-health-monitor-http",
            r#"{"url_path": "/healthz", "host": "web.example.com"}"#,
        )
    })
    .await;
    assert_eq!(m, ["PATCH load-balancers/health-monitors/*"; 2]);
    let http = &c.sim.health_monitors()[0]["http"];
    assert_eq!(
        (s(&http["url_path"]), s(&http["host"]), s(&http["version"])),
        ("/healthz".into(), "web.example.com".into(), "1.1".into())
    );
    let (svc, m) = change(&c, &svc, |s| {
        annotate(
            s,
            "loadbalancer-health-monitor-http",
            r#"{"url_path": "/healthz", "host": "web.example.com", "version": "1.0"}"#,
        )
    })
    .await;
    assert_eq!(
        m,
        [
            "DELETE load-balancers/health-monitors/*",
            "POST load-balancers/health-monitors"
        ]
    );

    assert_eq!(
        s(&c.sim.pools()[0]["uuid"]),
        pool_before,
        "no change above touched the pool"
    );
    let again = c.ensure(&svc, &nodes()).await;
    assert!(mutations(&again).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listener_port_changes_keep_the_pool_unless_the_port_name_changes() {
    let c = cloud().await;
    let (svc, _) = c.converge(service(&[])).await;
    let pool = s(&c.sim.pools()[0]["uuid"]);

    // 80 → 8080, implicit name "" unchanged: only the listener.
    let (svc, m) = change(&c, &svc, |mut s| {
        s.ports = vec![port("", Protocol::Tcp, 8080, 30080)];
        s
    })
    .await;
    assert_eq!(
        m,
        [
            "DELETE load-balancers/listeners/*",
            "POST load-balancers/listeners"
        ]
    );
    assert_eq!(s(&c.sim.pools()[0]["uuid"]), pool);
    assert_eq!(c.listener_names(), ["tcp/8080"]);

    // "" → "http" on the same port: the pool is recreated (the most surprising row).
    let (svc, m) = change(&c, &svc, |mut s| {
        s.ports = vec![port("http", Protocol::Tcp, 8080, 30080)];
        s
    })
    .await;
    assert_eq!(
        m[..2],
        [
            "DELETE load-balancers/pools/*/members/*".to_string(),
            "DELETE load-balancers/pools/*/members/*".to_string()
        ]
    );
    assert!(
        m.contains(&"DELETE load-balancers/pools/*".to_string())
            && m.contains(&"POST load-balancers/pools".to_string()),
        "{m:?}"
    );
    assert_eq!(c.pool_names(), ["tcp/http"]);
    let named_pool = s(&c.sim.pools()[0]["uuid"]);
    assert_ne!(named_pool, pool);

    // Named port 8080 → 9090 keeps the pool.
    let (svc, m) = change(&c, &svc, |mut s| {
        s.ports = vec![port("http", Protocol::Tcp, 9090, 30080)];
        s
    })
    .await;
    assert_eq!(
        m,
        [
            "DELETE load-balancers/listeners/*",
            "POST load-balancers/listeners"
        ]
    );
    assert_eq!(s(&c.sim.pools()[0]["uuid"]), named_pool);

    // http:9090 → https:443 recreates it.
    let (_, m) = change(&c, &svc, |mut s| {
        s.ports = vec![port("https", Protocol::Tcp, 443, 30080)];
        s
    })
    .await;
    assert!(
        m.contains(&"POST load-balancers/pools".to_string()),
        "{m:?}"
    );
    assert_eq!(c.pool_names(), ["tcp/https"]);
    assert_eq!(c.listener_names(), ["tcp/443"]);
    assert_eq!(c.sim.health_monitors().len(), 1);
    assert_eq!(c.member_names().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn considerable_impact_changes_recreate_pools_or_members() {
    let c = cloud().await;
    let (mut svc, _) = c.converge(service(&[])).await;
    for (key, value) in [
        ("loadbalancer-pool-algorithm", "least_connections"),
        ("loadbalancer-pool-protocol", "proxyv2"),
    ] {
        let pool = s(&c.sim.pools()[0]["uuid"]);
        let (changed, m) = change(&c, &svc, |s| annotate(s, key, value)).await;
        assert!(
            m.contains(&"DELETE load-balancers/pools/*".to_string()),
            "{key}: {m:?}"
        );
        assert_ne!(s(&c.sim.pools()[0]["uuid"]), pool, "{key}");
        assert_eq!(
            c.member_names().len(),
            3,
            "{key}: members rebuilt in the new pool"
        );
        svc = changed;
    }
    let pool = &c.sim.pools()[0];
    assert_eq!(
        (s(&pool["algorithm"]), s(&pool["protocol"])),
        ("least_connections".into(), "proxyv2".into())
    );

    // Allowed subnets: only members change.
    let (_, m) = change(&c, &svc, |s| {
        annotate(
            s,
            "loadbalancer-listener-allowed-subnets",
            &format!(r#"["{OTHER_SUBNET}"]"#),
        )
    })
    .await;
    assert_eq!(m, ["DELETE load-balancers/pools/*/members/*"; 2]);
    assert_eq!(c.member_names(), ["10.2.2.12:30080"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn major_impact_changes_are_refused_and_change_nothing() {
    let c = cloud().await;
    let (svc, _) = c.converge(service(&[])).await;
    for (key, value, says) in [
        ("loadbalancer-flavor", "lb-large", "flavor"),
        ("loadbalancer-zone", "lpg1", "zone"),
        (
            "loadbalancer-vip-addresses",
            &format!(r#"[{{"subnet": "{PRIVATE_SUBNET}"}}]"#) as &str,
            "vip-addresses",
        ),
    ] {
        c.sim.clear_requests();
        let o = c.ensure(&annotate(svc.clone(), key, value), &nodes()).await;
        assert!(
            matches!(provider_error(&o), ProviderError::InvalidConfig(m) if m.contains(says) && m.contains("re-create the Service")),
            "{key}: {:?}",
            o.result
        );
        assert!(
            c.sim.mutations().is_empty(),
            "{key}: {:?}",
            c.sim.mutations()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_vip_is_honoured() {
    let c = cloud().await;
    let svc = service(&[(
        "loadbalancer-vip-addresses",
        &format!(r#"[{{"subnet": "{PRIVATE_SUBNET}", "address": "10.1.1.200"}}]"#),
    )]);
    let (svc, o) = c.converge(svc).await;
    assert_eq!(o.result.expect("ensure").ingress, vec![proxy("10.1.1.200")]);
    assert!(mutations(&c.ensure(&svc, &nodes()).await).is_empty());
}

// ---------------------------------------------------------------------------------------------
// Features

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_traffic_policy_local_checks_kube_proxy_and_switching_recreates_members() {
    let c = cloud().await;
    let (svc, _) = c.converge(service(&[])).await;
    let (svc, m) = change(&c, &svc, |mut s| {
        s.external_traffic_policy = TrafficPolicy::Local;
        s.health_check_node_port = 32001;
        s
    })
    .await;
    assert_eq!(
        m.iter()
            .filter(|l| l.starts_with("DELETE load-balancers/pools/*/members"))
            .count(),
        3,
        "{m:?}"
    );
    assert_eq!(
        m.iter()
            .filter(|l| *l == "POST load-balancers/pools/*/members")
            .count(),
        3,
        "{m:?}"
    );
    assert!(m.contains(&"POST load-balancers/health-monitors".to_string()));
    assert!(every(&c.sim.members(), |x| x["monitor_port"] == 32001
        && x["protocol_port"] == 30080));
    let hm = &c.sim.health_monitors()[0];
    assert_eq!(s(&hm["type"]), "http");
    assert_eq!(
        (
            s(&hm["http"]["url_path"]),
            s(&hm["http"]["version"]),
            s(&hm["http"]["method"])
        ),
        ("/livez".into(), "1.0".into(), "GET".into())
    );
    assert!(mutations(&c.ensure(&svc, &nodes()).await).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_and_udp_on_the_same_port() {
    let c = cloud().await;
    let mut svc = service(&[("loadbalancer-health-monitor-type", "udp-connect")]);
    svc.ports = vec![
        port("dns-tcp", Protocol::Tcp, 53, 30053),
        port("dns-udp", Protocol::Udp, 53, 30054),
    ];
    let (svc, _) = c.converge(svc).await;
    assert_eq!(c.pool_names(), ["tcp/dns-tcp", "udp/dns-udp"]);
    assert_eq!(c.listener_names(), ["tcp/53", "udp/53"]);
    let udp = c
        .sim
        .pools()
        .into_iter()
        .find(|p| p["name"] == "udp/dns-udp")
        .expect("udp pool");
    assert_eq!(s(&udp["protocol"]), "udp");
    assert_eq!(c.sim.members().len(), 6);
    assert!(mutations(&c.ensure(&svc, &nodes()).await).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floating_ips_are_assigned_and_a_conflict_is_refused() {
    let c = cloud().await;
    c.sim.add_floating_ip("5.102.150.123/32").expect("fip");
    c.sim.add_floating_ip("2a06:c01::123/128").expect("fip");
    let fips = r#"["5.102.150.123/32", "2a06:c01::123/128"]"#;
    let (web, o) = c
        .converge(service(&[("loadbalancer-floating-ips", fips)]))
        .await;
    assert_eq!(
        shape(mutations(&o))
            .iter()
            .filter(|m| m.starts_with("PATCH floating-ips/"))
            .count(),
        2
    );
    let lb = s(&c.sim.load_balancers()[0]["uuid"]);
    assert!(every(&c.sim.floating_ips(), |f| f["load_balancer"]["uuid"]
        == lb.as_str()));
    assert!(mutations(&c.ensure(&web, &nodes()).await).is_empty());

    // Another Service claiming one of them is refused before any change, naming both.
    let mut api = service(&[("loadbalancer-floating-ips", r#"["5.102.150.123/32"]"#)]);
    api.name = "api".into();
    api.uid = "77777777-8a3c-4f1e-9d2b-6c7e8f9a0b1c".into();
    let cluster = CallScope {
        object: "default/api".into(),
        cluster: Arc::new(StaticCluster(vec![web.clone(), api.clone()])),
    };
    c.sim.clear_requests();
    let o = c
        .driver
        .load_balancer_ensure(&api, &nodes(), &cluster)
        .await;
    assert!(
        matches!(provider_error(&o), ProviderError::InvalidConfig(m) if m.contains("5.102.150.123/32->default/web"))
    );
    assert!(c.sim.requests().is_empty(), "refused before any request");
    // Deleting is not blocked by the conflict (an upstream bug).
    c.driver
        .load_balancer_delete(&api, &cluster)
        .await
        .result
        .expect("delete");
    // Removing a floating IP from the annotation does not unassign it (upstream).
    let (_, m) = change(&c, &web, |s| annotate(s, "loadbalancer-floating-ips", "[]")).await;
    assert!(m.is_empty());
    assert!(every(&c.sim.floating_ips(), |f| f["load_balancer"]["uuid"]
        == lb.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_selector_matching_nothing_warns_and_empties_the_pool() {
    let c = cloud().await;
    let (svc, _) = c.converge(service(&[])).await;
    let svc = annotate(svc, "loadbalancer-node-selector", "role=ingress");
    let o = c.ensure(&svc, &nodes()).await;
    o.result.as_ref().expect("ensure");
    assert!(
        o.events
            .iter()
            .any(|e| e.kind == EventKind::Warning && e.reason == "NoValidNodes"),
        "{:?}",
        o.events
    );
    assert!(c.sim.members().is_empty());

    let mut labelled = nodes();
    labelled[1].labels.push(("role".into(), "ingress".into()));
    let o = c.ensure(&svc, &labelled).await;
    o.result.expect("ensure");
    assert_eq!(c.member_names(), ["10.1.1.12:30080", "10.2.2.12:30080"]);

    let bad = annotate(svc, "loadbalancer-node-selector", "role in ingress");
    c.sim.clear_requests();
    let o = c.ensure(&bad, &nodes()).await;
    assert!(
        matches!(provider_error(&o), ProviderError::InvalidConfig(m) if m.contains("node-selector"))
    );
    assert!(c.sim.requests().is_empty());
    // get needs only the name, the UUID and the status annotations: it still finds it.
    let found = c
        .driver
        .load_balancer_get(&bad, &scope())
        .await
        .result
        .expect("get");
    assert_eq!(found.map(|i| i.len()), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_nodes_and_no_zone_is_not_a_dead_end() {
    let c = cloud().await;
    // Upstream created the LB without a zone, then refused every later pass ("" vs rma1).
    let svc = service(&[]);
    let o = c.ensure(&svc, &[]).await;
    // Upstream's loadbalancer.go emits NoValidNodes for an empty node list too (review
    // 2026-11-23, finding 7).
    assert!(
        o.events
            .iter()
            .any(|e| e.kind == EventKind::Warning && e.reason == "NoValidNodes"),
        "{:?}",
        o.events
    );
    let r = o.result.expect("ensure with no nodes");
    assert!(
        r.set_annotations
            .contains(&(format!("{P}loadbalancer-zone"), "rma1".to_string()))
    );
    let svc = common::apply(svc, &r);
    let o = c.ensure(&svc, &nodes()).await;
    o.result.expect("ensure once nodes exist");
    assert_eq!(c.member_names().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn public_only_nodes_and_node_set_updates() {
    let c = cloud().await;
    c.sim
        .add_server(SeedServer::new("edge-1").public(&["5.102.148.99"]));
    let (svc, _) = c.converge(service(&[])).await;
    let mut more = nodes();
    more.push(node("edge-1"));
    let o = c.driver.load_balancer_update(&svc, &more, &scope()).await;
    o.result.as_ref().expect("update with a public-only node");
    assert!(
        mutations(&o).is_empty(),
        "a public-only node adds no member"
    );
    // It gets no traffic, which upstream did not say; the event names its server.
    let without = warnings(&o, "BackendsLeftOut");
    assert_eq!(without.len(), 1, "{:?}", o.events);
    assert!(
        without[0].contains("edge-1") && without[0].contains("private network"),
        "{without:?}"
    );

    c.sim.add_server(SeedServer::new("worker-3").private(
        PRIVATE_SUBNET,
        "10.1.1.0/24",
        &["10.1.1.13"],
    ));
    more.push(node("worker-3"));
    let o = c.driver.load_balancer_update(&svc, &more, &scope()).await;
    assert_eq!(
        shape(mutations(&o)),
        ["POST load-balancers/pools/*/members"]
    );
    let o = c
        .driver
        .load_balancer_update(&svc, &nodes(), &scope())
        .await;
    assert_eq!(
        shape(mutations(&o)),
        ["DELETE load-balancers/pools/*/members/*"]
    );

    // A node that is not a cloudscale server (by name, or by another cloud's provider ID) is
    // left out, named in a Warning event; the good nodes keep their members.
    let mut foreign = nodes();
    foreign.push(node("on-prem-1"));
    let mut alien = node("aws-1");
    alien.provider_id = "aws:///eu-west-1a/i-0123456789".into();
    foreign.push(alien);
    c.sim.clear_requests();
    let o = c
        .driver
        .load_balancer_update(&svc, &foreign, &scope())
        .await;
    o.result.as_ref().expect("the good nodes are reconciled");
    let left_out = warnings(&o, "BackendsLeftOut");
    assert_eq!(left_out.len(), 1, "{:?}", o.events);
    assert!(
        left_out[0].contains("2 of 4 nodes")
            && left_out[0].contains("node on-prem-1")
            && left_out[0].contains("node aws-1"),
        "{left_out:?}"
    );
    assert!(c.sim.mutations().is_empty(), "{:?}", c.sim.mutations());
    assert_eq!(
        c.member_names(),
        ["10.1.1.11:30080", "10.1.1.12:30080", "10.2.2.12:30080"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_hostname_ip_mode_and_other_classes() {
    let c = cloud().await;
    let (svc, o) = c
        .converge(service(&[(
            "loadbalancer-force-hostname",
            "lb.example.com",
        )]))
        .await;
    assert_eq!(
        o.result.expect("ensure").ingress,
        vec![hostname("lb.example.com")]
    );
    let vip = annotate(svc, "loadbalancer-force-hostname", "");
    let vip = annotate(vip, "loadbalancer-ip-mode", "VIP");
    let o = c.ensure(&vip, &nodes()).await;
    assert!(every(&o.result.expect("ensure").ingress, |i| i.ip_mode
        == Some(IpMode::Vip)));

    let mut other = service(&[]);
    other.load_balancer_class = Some("example.com/other".into());
    c.sim.clear_requests();
    assert!(matches!(
        provider_error(&c.ensure(&other, &nodes()).await),
        ProviderError::ImplementedElsewhere
    ));
    assert_eq!(
        c.driver
            .load_balancer_get(&other, &scope())
            .await
            .result
            .expect("get"),
        None
    );
    assert!(c.sim.requests().is_empty());

    // An unknown algorithm is passed through and the API's 400 comes back as invalid-config.
    let bad = annotate(service(&[]), "loadbalancer-pool-algorithm", "fastest");
    let mut bad = bad;
    bad.uid = "55555555-8a3c-4f1e-9d2b-6c7e8f9a0b1c".into();
    let o = c.ensure(&bad, &nodes()).await;
    assert!(
        matches!(provider_error(&o), ProviderError::InvalidConfig(m) if m.contains("algorithm")),
        "{:?}",
        o.result
    );
}

/// Values the upstream CCM accepts must not stop a Service from reconciling after a switch
/// (review 2026-11-23, findings 1-5): a bare floating IP, JSON keys in another letter case and
/// unknown keys (both as Go's decoder reads them, with a Warning event), any ip-mode next to a
/// forced hostname, and `null` lists. The HTTP monitor is created without `host`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_upstream_accepts_is_accepted_with_warnings() {
    let c = cloud().await;
    c.sim.add_floating_ip("5.102.150.123/32").expect("fip");
    let svc = service(&[
        ("loadbalancer-floating-ips", r#"["5.102.150.123"]"#),
        ("loadbalancer-health-monitor-type", "http"),
        (
            "loadbalancer-health-monitor-http",
            r#"{"URL_PATH": "/ready", "path": "/typo", "Method": "HEAD"}"#,
        ),
        ("loadbalancer-force-hostname", "lb.example.org"),
        ("loadbalancer-ip-mode", "proxy"),
        ("loadbalancer-listener-allowed-cidrs", "null"),
    ]);
    let o = c.ensure(&svc, &nodes()).await;
    let r = o.result.clone().expect("ensure");
    assert_eq!(r.ingress, vec![hostname("lb.example.org")]);
    let ignored: Vec<&str> = o
        .events
        .iter()
        .filter(|e| e.kind == EventKind::Warning && e.reason == "AnnotationValueIgnored")
        .map(|e| e.message.as_str())
        .collect();
    assert_eq!(ignored.len(), 2, "{:?}", o.events);
    assert!(
        ignored.iter().any(|m| m.contains("\"path\"")),
        "{ignored:?}"
    );
    assert!(
        ignored.iter().any(|m| m.contains("5.102.150.123/32")),
        "{ignored:?}"
    );
    let lb = s(&c.sim.load_balancers()[0]["uuid"]);
    assert_eq!(
        c.sim.floating_ips()[0]["load_balancer"]["uuid"],
        lb.as_str()
    );
    let monitor = &c.sim.health_monitors()[0];
    assert_eq!(monitor["http"]["url_path"], "/ready");
    assert_eq!(monitor["http"]["method"], "HEAD");
    let posted: Vec<Value> = c
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/health-monitors"))
        .filter_map(|r| r.body)
        .collect();
    assert_eq!(posted.len(), 1);
    assert!(
        posted[0]["http"].get("host").is_none(),
        "host omitted like the SDK's omitempty: {}",
        posted[0]
    );

    // Steady: the bare address matches the API's `/32` network, so nothing is re-sent.
    let svc = common::apply(svc, &r);
    let o = c.ensure(&svc, &nodes()).await;
    o.result.as_ref().expect("second ensure");
    assert!(mutations(&o).is_empty(), "{:?}", mutations(&o));
    let got = c
        .driver
        .load_balancer_get(&svc, &scope())
        .await
        .result
        .expect("get");
    assert_eq!(got, Some(vec![hostname("lb.example.org")]));

    // Not an IP at all is still refused, before any request.
    let bad = annotate(svc, "loadbalancer-floating-ips", r#"["lb.example.org"]"#);
    c.sim.clear_requests();
    let o = c.ensure(&bad, &nodes()).await;
    assert!(
        matches!(provider_error(&o), ProviderError::InvalidConfig(m) if m.contains("floating-ips"))
    );
    assert!(c.sim.requests().is_empty());
}

/// How the API refuses a change to a busy load balancer is not documented (README,
/// "Assumptions about the real API"). A refusal while the load balancer is `running` keeps its
/// meaning: a 409 is `transient` (the driver re-read the load balancer first), not `permanent`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_is_read_again_and_converges_in_the_same_call() {
    let c = cloud().await;
    c.sim.faults().fail_next(
        Match::path("/v1/load-balancers/pools").with_method("POST"),
        409,
        1,
    );
    let svc = service(&[]);
    let o = c.ensure(&svc, &nodes()).await;
    o.result
        .as_ref()
        .expect("a 409 is a race: read again, then converge");
    let statuses: Vec<u16> = c
        .sim
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path == "/v1/load-balancers/pools")
        .map(|r| r.status)
        .collect();
    assert_eq!(
        statuses,
        [409, 201],
        "the refused POST and the one after the re-read"
    );
    let lines: Vec<String> = c.sim.requests().iter().map(|r| r.line()).collect();
    let refused = lines
        .iter()
        .position(|l| l.starts_with("POST /v1/load-balancers/pools"))
        .expect("the refused POST");
    assert!(
        lines[refused + 1..]
            .iter()
            .any(|l| l.starts_with("GET /v1/load-balancers/") && !l.contains("pools")),
        "the load balancer is re-read after the refusal: {lines:?}"
    );
    c.converge(svc).await;
    assert_eq!(c.pool_names(), ["tcp"]);
}

/// The simulator's refusal of a change to a busy load balancer (400 "currently changing") ends
/// the call with `retry-after`, not `invalid-config` (review 2026-11-23, finding 6); the next
/// call completes the change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_refusal_is_retry_after_not_invalid_config() {
    let c = cloud().await;
    let (svc, _) = c.converge(service(&[])).await;
    c.sim.add_server(SeedServer::new("worker-3").private(
        PRIVATE_SUBNET,
        "10.1.1.0/24",
        &["10.1.1.13"],
    ));
    let mut more = nodes();
    more.push(node("worker-3"));
    c.sim.faults().refuse_next_as_busy(1);
    let o = c.driver.load_balancer_update(&svc, &more, &scope()).await;
    assert!(
        matches!(provider_error(&o), ProviderError::RetryAfter(r) if r.seconds == 5 && r.reason.contains("changing")),
        "{:?}",
        o.result
    );
    let o = c.driver.load_balancer_update(&svc, &more, &scope()).await;
    o.result.as_ref().expect("the retry succeeds");
    assert_eq!(
        shape(mutations(&o)),
        ["POST load-balancers/pools/*/members"]
    );
}

/// Issue 22, item 3: a controller killed between two cloud calls leaves no load balancer without
/// its Service and never makes a second one. The load balancer is created with its name, its
/// children with deterministic names, so a fresh driver instance finds and finishes everything;
/// its delete, with no UUID annotation written, removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_two_calls_neither_leaks_nor_duplicates() {
    let points = [
        ("load balancer created", "/v1/load-balancers"),
        ("pool created", "/v1/load-balancers/pools"),
        ("listener created", "/v1/load-balancers/listeners"),
    ];
    // What an ensure without a crash builds.
    let clean = cloud().await;
    clean.converge(service(&[])).await;
    let expected = |sim: &CloudscaleSim| {
        [
            sim.load_balancers().len(),
            sim.pools().len(),
            sim.listeners().len(),
            sim.members().len(),
            sim.health_monitors().len(),
        ]
    };
    let want = expected(&clean.sim);
    assert_eq!(want[0], 1);
    for (point, path) in points {
        let c = cloud().await;
        let svc = service(&[]);
        c.sim.settle();
        c.sim
            .faults()
            .kill_after(Match::path(path).with_method("POST"), 1, 503);
        // The first driver retries its passes within the call until the kill cuts it off.
        for _ in 0..10 {
            if c.sim.faults().killed() {
                break;
            }
            let _ = c.ensure(&svc, &nodes()).await;
            c.sim.settle();
        }
        assert!(c.sim.faults().killed(), "{point}: never reached");
        c.sim.faults().clear();
        c.sim.settle();
        let fresh = load(&c.sim, "v1.31.2", &c.sim.token()).await;
        let mut done: Option<EnsureResult> = None;
        for _ in 0..10 {
            let o = fresh.load_balancer_ensure(&svc, &nodes(), &scope()).await;
            match o.result {
                Ok(r) => {
                    done = Some(r);
                    break;
                }
                Err(CallError::Provider(ProviderError::RetryAfter(_))) => c.sim.settle(),
                Err(e) => panic!("{point}: {e:?}"),
            }
        }
        assert!(done.is_some(), "{point}: never converged");
        assert_eq!(
            expected(&c.sim),
            want,
            "{point}: the same objects, each once"
        );
        // A delete by another fresh instance, with the Service as it was before any status:
        // found by name.
        let gone = load(&c.sim, "v1.31.2", &c.sim.token())
            .await
            .load_balancer_delete(&svc, &scope())
            .await;
        gone.result
            .unwrap_or_else(|e| panic!("{point}: delete: {e:?}"));
        assert!(c.sim.load_balancers().is_empty(), "{point}");
    }
}

/// One member the API refuses (400) is left out with a Warning event naming it; the others are
/// added in the same call, and the next reconcile tries the refused one again (review
/// 2026-11-26, §3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_member_is_left_out_and_the_others_are_added() {
    let c = cloud().await;
    // Member creation only: `/v1/load-balancers/pools/<uuid>/members` (the pool POST has no
    // trailing slash).
    c.sim.faults().fail_next(
        Match::path("/v1/load-balancers/pools/").with_method("POST"),
        400,
        1,
    );
    let svc = service(&[]);
    let o = c.ensure(&svc, &nodes()).await;
    let r = o
        .result
        .as_ref()
        .expect("the load balancer is built without it");
    assert_eq!(r.ingress.len(), 2, "the public IPv4 + IPv6 pair: {r:?}");
    let refused = warnings(&o, "MembersRefused");
    assert_eq!(refused.len(), 1, "{:?}", o.events);
    assert!(
        refused[0].contains("10.1.1.11:30080 in pool tcp")
            && refused[0].contains("Simulated failure"),
        "{refused:?}"
    );
    assert_eq!(c.member_names(), ["10.1.1.12:30080", "10.2.2.12:30080"]);
    assert_eq!(c.listener_names(), ["tcp/80"]);
    assert_eq!(c.sim.health_monitors().len(), 1);
    // Tried once in that call, not again and again.
    let member_posts = c
        .sim
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/members"))
        .count();
    assert_eq!(member_posts, 3);

    // The next reconcile tries it again.
    let o = c.ensure(&svc, &nodes()).await;
    o.result.as_ref().expect("second ensure");
    assert!(warnings(&o, "MembersRefused").is_empty(), "{:?}", o.events);
    assert_eq!(
        shape(mutations(&o)),
        ["POST load-balancers/pools/*/members"]
    );
    assert_eq!(
        c.member_names(),
        ["10.1.1.11:30080", "10.1.1.12:30080", "10.2.2.12:30080"]
    );
}

/// A floating IP the account does not have is found before the billed load balancer is created,
/// not after (review 2026-11-26, §4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absent_floating_ip_creates_no_load_balancer() {
    let c = cloud().await;
    c.sim.add_floating_ip("5.102.150.123/32").expect("fip");
    let svc = service(&[(
        "loadbalancer-floating-ips",
        r#"["5.102.150.123/32", "5.102.150.200"]"#,
    )]);
    let o = c.ensure(&svc, &nodes()).await;
    assert!(
        matches!(provider_error(&o), ProviderError::InvalidConfig(m)
            if m.contains("5.102.150.200") && !m.contains("5.102.150.123") && m.contains("no load balancer was created")),
        "{:?}",
        o.result
    );
    assert!(mutations(&o).is_empty(), "{:?}", mutations(&o));
    assert!(c.sim.load_balancers().is_empty());

    // Once it exists, the load balancer is built and both are assigned.
    c.sim.add_floating_ip("5.102.150.200/32").expect("fip");
    c.converge(svc).await;
    let lb = s(&c.sim.load_balancers()[0]["uuid"]);
    let assigned: Vec<String> = c
        .sim
        .floating_ips()
        .iter()
        .filter(|f| f["load_balancer"]["uuid"] == lb.as_str())
        .map(|f| s(&f["network"]))
        .collect();
    assert_eq!(assigned, ["5.102.150.123/32", "5.102.150.200/32"]);
}

/// A pool whose every wanted member the API refuses (400) would end the call with no backend
/// (its old members were deleted first): the call fails with `invalid-config` naming the pool
/// and the API's answer, never a success with an empty pool; the next call adds them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_whose_every_member_is_refused_fails_the_call() {
    let c = cloud().await;
    let svc = service(&[]);
    c.ensure(&svc, &[node("worker-2")])
        .await
        .result
        .expect("ensure on worker-2");
    assert_eq!(c.member_names(), ["10.1.1.12:30080", "10.2.2.12:30080"]);
    // Member creation only, every attempt of the call.
    c.sim.faults().fail_next(
        Match::path("/v1/load-balancers/pools/").with_method("POST"),
        400,
        10,
    );
    let o = c.ensure(&svc, &[node("worker-1")]).await;
    assert!(
        matches!(provider_error(&o), ProviderError::InvalidConfig(m)
            if m.contains("pool tcp") && m.contains("10.1.1.11:30080") && m.contains("Simulated failure")),
        "{:?}",
        o.result
    );
    assert!(c.member_names().is_empty(), "{:?}", c.member_names());
    assert_eq!(warnings(&o, "MembersRefused").len(), 1, "{:?}", o.events);
    c.sim.faults().clear();

    let o = c.ensure(&svc, &[node("worker-1")]).await;
    o.result.as_ref().expect("the next ensure adds it");
    assert_eq!(c.member_names(), ["10.1.1.11:30080"]);
}
