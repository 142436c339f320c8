//! End to end: several drivers in one `wasm-ccm run --drivers-config`, against the Kubernetes
//! simulator and two cloud simulators (cloudscale and PhoenixNAP). Nodes are initialised by
//! their owner (the default driver, or the one whose selector matches), Services get their load
//! balancer from the driver of their class, a class change hands the load balancer over without
//! two clouds serving at once, a node no driver owns is left alone, a hung driver stalls only
//! its own nodes, and one driver's bad reload is refused while the other reloads.

mod common;

use common::*;
use serde_json::{Value, json};
use wasm_ccm_sim::cloudscale::CloudscaleSim;
use wasm_ccm_sim::kit::{SimCloud, SimNode};
use wasm_ccm_sim::kube::KubeSim;
use wasm_ccm_sim::phoenixnap::PhoenixnapSim;
use wasm_ccm_test_tools::configmap::{ConfigMapVolume, with_custom_section};

const METAL_CLASS: &str = "phoenixnap.com/public-ip";
const CLOUD_FINALIZER: &str = "wasm-ccm.io/lb-cleanup.cloud";
const METAL_FINALIZER: &str = "wasm-ccm.io/lb-cleanup.metal";

fn sim_node(name: &str, index: usize) -> SimNode {
    SimNode {
        name: name.into(),
        ..SimNode::numbered(index)
    }
}

/// A Node labelled `labels`, registered with the uninitialized taint.
fn labelled_node(name: &str, labels: Value) -> Value {
    let mut n = node(name, None, true);
    n["metadata"]["labels"] = labels;
    n
}

fn lb_service(name: &str, class: Option<&str>) -> Value {
    let mut spec = json!({
        "type": "LoadBalancer",
        "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
    });
    if let Some(class) = class {
        spec["loadBalancerClass"] = json!(class);
    }
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    })
}

fn finalizers(svc: &Value) -> Vec<String> {
    svc["metadata"]["finalizers"]
        .as_array()
        .map(|f| {
            f.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn provider_id(sim: &KubeSim, name: &str) -> String {
    sim.get("nodes", None, name)
        .and_then(|n| n["spec"]["providerID"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The environment both clouds' drivers read (each driver receives only its own prefix).
fn env_of(clouds: &[&dyn SimCloud]) -> Vec<(String, String)> {
    clouds.iter().flat_map(|c| c.driver_setup().env).collect()
}

fn yaml_list(items: &[String]) -> String {
    format!(
        "[{}]",
        items
            .iter()
            .map(|i| format!("{i:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The Kubernetes simulator and the cloudscale and PhoenixNAP simulators, empty.
async fn two_clouds() -> (KubeSim, Box<dyn SimCloud>, Box<dyn SimCloud>) {
    let sim = KubeSim::start(localhost()).await.expect("kube sim");
    let cloudscale = wasm_ccm_sim::kit::start("cloudscale", Default::default())
        .await
        .expect("cloudscale sim");
    let phoenixnap = wasm_ccm_sim::kit::start("phoenixnap", Default::default())
        .await
        .expect("phoenixnap sim");
    (sim, cloudscale, phoenixnap)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_by_owner_and_load_balancers_by_class_in_one_process() {
    let (sim, cloudscale, phoenixnap) = two_clouds().await;
    for (i, name) in ["cs-0", "cs-1"].into_iter().enumerate() {
        cloudscale
            .add_instance(i, &sim_node(name, i))
            .expect("server");
        sim.create(node(name, None, true)).expect("node");
    }
    phoenixnap
        .add_instance(2, &sim_node("pn-0", 2))
        .expect("server");
    sim.create(labelled_node("pn-0", json!({"example.com/site": "metal"})))
        .expect("node");
    // Another party's node: a provider ID of a scheme no driver here has.
    let mut foreign = node("aws-0", None, true);
    foreign["spec"]["providerID"] = json!("aws:///eu-west-1a/i-0abc");
    sim.create(foreign).expect("node");

    let drivers = hybrid_set(cloudscale.as_ref(), phoenixnap.as_ref());
    let env = env_of(&[cloudscale.as_ref(), phoenixnap.as_ref()]);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let port = free_port();
    let port_text = port.to_string();
    let ccm = Ccm::start_set(
        &sim,
        &drivers,
        &[
            "--leader-elect=false",
            "--configure-cloud-routes=false",
            "--housekeeping-period",
            "1s",
            // One worker per queue (the defaults, named because the absence checks below rely
            // on them): a driver's queue is first in, first out, so once a key added later is
            // done, every key added before it has been handled.
            "--concurrent-node-syncs",
            "1",
            "--concurrent-service-syncs",
            "1",
            "--secure-port",
            &port_text,
            "--bind-address",
            "127.0.0.1",
        ],
        &env,
    );

    // Each node is initialised by its owner.
    eventually("nodes of both clouds initialised", || {
        ["cs-0", "cs-1", "pn-0"]
            .iter()
            .all(|n| initialised(&sim, n))
    })
    .await;
    for n in ["cs-0", "cs-1"] {
        assert!(provider_id(&sim, n).starts_with("cloudscale://"), "{n}");
    }
    assert!(provider_id(&sim, "pn-0").starts_with("phoenixnap://"));
    // The foreign node: one event, never touched.
    eventually("foreign node reported", || {
        !events(&sim, "aws-0", "ForeignProviderID").is_empty()
    })
    .await;
    // Then a later pass over it, which would report it again were the first report not
    // remembered: a change to it queues it for the reporting driver's node worker (the first
    // driver, `cloud`), and a node of `cloud`'s added after that change is initialised only
    // once the worker is past it. Two such nodes, one after the other: had the change come
    // while the worker was still in the first pass, the queue takes the node again only when
    // that pass ends, which may be after the first of them was queued, never after the second.
    sim.modify("nodes", None, "aws-0", |n| {
        n["metadata"]["labels"]["example.com/touched"] = json!("yes");
    })
    .expect("change the foreign node");
    for (index, name) in [(3, "cs-2"), (4, "cs-3")] {
        cloudscale
            .add_instance(index, &sim_node(name, index))
            .expect("server");
        sim.create(node(name, None, true)).expect("node");
        eventually("a node queued after the foreign one's change", || {
            initialised(&sim, name)
        })
        .await;
    }
    let reported = events(&sim, "aws-0", "ForeignProviderID");
    assert_eq!(reported.len(), 1, "{reported:?}");
    // A repeat of the same event would be folded into it as a series, not a second event.
    assert!(reported[0]["series"].is_null(), "{reported:?}");
    assert!(has_taint(
        &sim.get("nodes", None, "aws-0").expect("node"),
        UNINITIALIZED
    ));

    // Services by class: the class-less one in cloudscale, the metal one in PhoenixNAP; the one
    // of a class no driver serves is created first, so that once both others are served,
    // each driver's service worker has been past it.
    sim.create(lb_service("elsewhere", Some("example.com/other-lb")))
        .expect("service");
    sim.create(lb_service("web", None)).expect("service");
    sim.create(lb_service("bare", Some(METAL_CLASS)))
        .expect("service");
    eventually("both load balancers", || {
        ["web", "bare"]
            .iter()
            .all(|s| service(&sim, s).and_then(|s| ingress_ip(&s)).is_some())
    })
    .await;
    assert_eq!(cloudscale.load_balancers(), Some(1));
    assert_eq!(phoenixnap.load_balancers(), Some(1));
    let web = service(&sim, "web").expect("web");
    assert_eq!(
        finalizers(&web),
        [CLOUD_FINALIZER, FINALIZER],
        "the class-less Service keeps upstream's finalizer too"
    );
    let bare = service(&sim, "bare").expect("bare");
    assert_eq!(finalizers(&bare), [METAL_FINALIZER]);
    // Events say which driver acted.
    assert!(
        events(&sim, "bare", "EnsuredLoadBalancer")
            .iter()
            .all(|e| e["note"]
                .as_str()
                .is_some_and(|n| n.starts_with("driver metal: "))),
        "{:?}",
        events(&sim, "bare", "EnsuredLoadBalancer")
    );
    assert!(!events(&sim, "bare", "EnsuredLoadBalancer").is_empty());
    // A class no driver serves is ignored entirely. The positive control: the event this
    // looks for is the one the served Services got.
    for served in ["web", "bare"] {
        assert!(
            !events(&sim, served, "EnsuringLoadBalancer").is_empty(),
            "{served}"
        );
    }
    let elsewhere = service(&sim, "elsewhere").expect("service");
    assert!(finalizers(&elsewhere).is_empty(), "{elsewhere}");
    assert!(ingress_ip(&elsewhere).is_none());
    assert!(events(&sim, "elsewhere", "EnsuringLoadBalancer").is_empty());
    // Metrics per driver.
    metric_at_least(
        port,
        "wasm_ccm_driver_calls_total{driver=\"metal\",function=\"load-balancer.ensure\",result=\"ok\"}",
        1.0,
    )
    .await;
    metric_at_least(
        port,
        "wasm_ccm_driver_calls_total{driver=\"cloud\",function=\"load-balancer.ensure\",result=\"ok\"}",
        1.0,
    )
    .await;

    // The class changes through ClusterIP (the apiserver freezes it on a LoadBalancer): the
    // PhoenixNAP block is released, then cloudscale makes a load balancer.
    let mut bare = service(&sim, "bare").expect("bare");
    bare["spec"]["type"] = json!("ClusterIP");
    bare["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("loadBalancerClass");
    sim.update(bare).expect("to ClusterIP");
    eventually("metal's finalizer dropped", || {
        service(&sim, "bare").is_some_and(|s| finalizers(&s).is_empty())
    })
    .await;
    eventually("the block released", || {
        phoenixnap.load_balancers() == Some(0)
    })
    .await;
    let mut bare = service(&sim, "bare").expect("bare");
    bare["spec"]["type"] = json!("LoadBalancer");
    sim.update(bare).expect("to LoadBalancer without a class");
    eventually("cloudscale serves it now", || {
        service(&sim, "bare").is_some_and(|s| {
            finalizers(&s) == [CLOUD_FINALIZER, FINALIZER] && ingress_ip(&s).is_some()
        })
    })
    .await;
    assert_eq!(cloudscale.load_balancers(), Some(2));
    assert_eq!(phoenixnap.load_balancers(), Some(0));
    drop(ccm);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_driver_stalls_only_its_own_nodes_and_reloads_are_per_driver() {
    let sim = KubeSim::start(localhost()).await.expect("kube sim");
    let cloudscale = wasm_ccm_sim::kit::start("cloudscale", Default::default())
        .await
        .expect("cloudscale sim");
    // The hostile driver spins on the node named `loop` until its call deadline (60 s here):
    // with one shared worker, cloudscale's nodes would wait behind it for longer than the
    // test's bound.
    sim.create(labelled_node(
        "loop",
        json!({"example.com/site": "hostile"}),
    ))
    .expect("node");
    let mut cloud_volume =
        ConfigMapVolume::new(&std::fs::read(wasm_ccm_drivers::CLOUDSCALE_DRIVER).expect("driver"));
    let mut hostile_volume =
        ConfigMapVolume::new(&std::fs::read(wasm_ccm_drivers::HOSTILE_DRIVER).expect("driver"));
    let cs = cloudscale.driver_setup();
    let drivers = format!(
        r#"apiVersion: wasm-ccm.io/v1alpha1
kind: DriverSet
drivers:
  - name: cloud
    source: {cloud}
    providerIDScheme: cloudscale
    allowEgress: {egress}
    nodes: {{default: true}}
    loadBalancer: {{default: true}}
  - name: hung
    source: {hostile}
    providerIDScheme: hostile
    limits: {{callTimeout: 60s}}
    nodes:
      selector: {{matchLabels: {{example.com/site: hostile}}}}
"#,
        cloud = cloud_volume.plugin().display(),
        hostile = hostile_volume.plugin().display(),
        egress = yaml_list(&cs.egress),
    );
    let env: Vec<(&str, &str)> = cs
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .chain([("POD_NAME", "wasm-ccm-0"), ("POD_NAMESPACE", "kube-system")])
        .collect();
    let port = free_port();
    let port_text = port.to_string();
    let _ccm = Ccm::start_set(
        &sim,
        &drivers,
        &[
            "--leader-elect=false",
            "--configure-cloud-routes=false",
            "--concurrent-node-syncs",
            "1",
            "--driver-watch-interval",
            "50ms",
            // No housekeeping call during the test: the hung driver's only call is then the
            // one on `loop` (the lifecycle controller asks nothing about a node without a
            // provider ID when several drivers run, and `hung` serves no Services or routes).
            "--housekeeping-period",
            "1h",
            "--secure-port",
            &port_text,
            "--bind-address",
            "127.0.0.1",
        ],
        &env,
    );
    metric_becomes(
        port,
        "wasm_ccm_driver_loads_total{driver=\"hung\",trigger=\"startup\"}",
        1.0,
    )
    .await;
    // The fault fires: the call on `loop` is running in the hung driver, and does not end.
    const HUNG_IN_FLIGHT: &str = "wasm_ccm_driver_calls_in_flight{driver=\"hung\"}";
    const HUNG_ENDED: &str = "wasm_ccm_driver_calls_total{driver=\"hung\"";
    metric_becomes(port, HUNG_IN_FLIGHT, 1.0).await;
    assert_eq!(
        metric(&scrape(port).await, HUNG_ENDED),
        None,
        "no call of the hung driver has ended"
    );
    // The hung driver's one worker now spins on `loop`; cloudscale's nodes still initialise
    // (behind a shared worker they would wait 60 s).
    for i in 0..2 {
        cloudscale
            .add_instance(i, &sim_node(&format!("cs-{i}"), i))
            .expect("server");
        sim.create(node(&format!("cs-{i}"), None, true))
            .expect("node");
    }
    eventually(
        "cloudscale's nodes initialised beside a hung driver",
        || initialised(&sim, "cs-0") && initialised(&sim, "cs-1"),
    )
    .await;
    assert!(
        has_taint(
            &sim.get("nodes", None, "loop").expect("node"),
            UNINITIALIZED
        ),
        "the hung driver's node waits"
    );
    // And it waits because the call is still running, not because it failed or never started:
    // cloudscale's nodes were initialised while it ran.
    let text = scrape(port).await;
    assert_eq!(metric(&text, HUNG_IN_FLIGHT), Some(1.0), "{text}");
    assert_eq!(metric(&text, HUNG_ENDED), None, "{text}");

    // A bad version of one driver is refused while the other reloads.
    hostile_volume.update(b"not a component");
    metric_becomes(
        port,
        "wasm_ccm_driver_reload_refusals_total{driver=\"hung\",reason=\"not-a-component\"}",
        1.0,
    )
    .await;
    let cloud_bytes = std::fs::read(wasm_ccm_drivers::CLOUDSCALE_DRIVER).expect("driver");
    cloud_volume.update(&with_custom_section(
        &cloud_bytes,
        "wasm-ccm-test-version",
        b"2",
    ));
    metric_becomes(
        port,
        "wasm_ccm_driver_loads_total{driver=\"cloud\",trigger=\"reload\"}",
        1.0,
    )
    .await;
    let text = scrape(port).await;
    assert_eq!(
        metric(
            &text,
            "wasm_ccm_driver_loads_total{driver=\"hung\",trigger=\"reload\"}"
        ),
        None,
        "the refused driver keeps its first version"
    );
    // A new node of cloudscale's is initialised by the reloaded driver.
    cloudscale
        .add_instance(5, &sim_node("cs-5", 5))
        .expect("server");
    sim.create(node("cs-5", None, true)).expect("node");
    eventually("a node after the reload", || initialised(&sim, "cs-5")).await;
}

/// The DriverSet of cloudscale (default for nodes and class-less Services) and PhoenixNAP
/// (nodes labelled `example.com/site: metal`, class [`METAL_CLASS`]).
fn hybrid_set(cloudscale: &dyn SimCloud, phoenixnap: &dyn SimCloud) -> String {
    format!(
        r#"apiVersion: wasm-ccm.io/v1alpha1
kind: DriverSet
drivers:
  - name: cloud
    source: {cs_wasm}
    providerIDScheme: cloudscale
    allowEgress: {cs_egress}
    nodes: {{default: true}}
    loadBalancer: {{default: true}}
  - name: metal
    source: {pn_wasm}
    providerIDScheme: phoenixnap
    allowEgress: {pn_egress}
    nodes:
      selector: {{matchLabels: {{example.com/site: metal}}}}
    loadBalancer: {{classes: ["{METAL_CLASS}"]}}
"#,
        cs_wasm = wasm_ccm_drivers::CLOUDSCALE_DRIVER,
        pn_wasm = wasm_ccm_drivers::PHOENIXNAP_DRIVER,
        cs_egress = yaml_list(&cloudscale.driver_setup().egress),
        pn_egress = yaml_list(&phoenixnap.driver_setup().egress),
    )
}

/// An upgrade from one driver adopts its load balancers without making new ones, and a class
/// changed while the process was down is handed over: the old driver deletes its load balancer
/// before the new one makes its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_adopts_and_a_class_changed_while_down_is_handed_over() {
    let (sim, cloudscale, phoenixnap) = two_clouds().await;
    cloudscale
        .add_instance(0, &sim_node("cs-0", 0))
        .expect("server");
    sim.create(node("cs-0", None, true)).expect("node");
    phoenixnap
        .add_instance(1, &sim_node("pn-0", 1))
        .expect("server");
    sim.create(labelled_node("pn-0", json!({"example.com/site": "metal"})))
        .expect("node");
    sim.create(lb_service("web", None)).expect("service");

    // Today's single-driver run: upstream's finalizer only.
    let single = Ccm::start_setup(
        &sim,
        &cloudscale.driver_setup(),
        &["--leader-elect=false", "--configure-cloud-routes=false"],
    );
    eventually("the single driver's load balancer", || {
        service(&sim, "web").is_some_and(|s| ingress_ip(&s).is_some())
    })
    .await;
    let first = service(&sim, "web").expect("web");
    assert_eq!(finalizers(&first), [FINALIZER]);
    drop(single);

    let drivers = hybrid_set(cloudscale.as_ref(), phoenixnap.as_ref());
    let env = env_of(&[cloudscale.as_ref(), phoenixnap.as_ref()]);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let flags = [
        "--leader-elect=false",
        "--configure-cloud-routes=false",
        "--housekeeping-period",
        "1s",
    ];
    let set = Ccm::start_set(&sim, &drivers, &flags, &env);
    eventually("the default driver adopts it", || {
        service(&sim, "web").is_some_and(|s| finalizers(&s) == [FINALIZER, CLOUD_FINALIZER])
    })
    .await;
    eventually("pn-0 initialised by its owner", || {
        initialised(&sim, "pn-0")
    })
    .await;
    assert_eq!(
        cloudscale.load_balancers(),
        Some(1),
        "no second load balancer"
    );
    assert_eq!(
        ingress_ip(&service(&sim, "web").expect("web")),
        ingress_ip(&first),
        "the same address"
    );
    drop(set);

    // While the process is down, the Service moves to metal's class through ClusterIP.
    let mut web = service(&sim, "web").expect("web");
    web["spec"]["type"] = json!("ClusterIP");
    sim.update(web).expect("to ClusterIP");
    let mut web = service(&sim, "web").expect("web");
    web["spec"]["type"] = json!("LoadBalancer");
    web["spec"]["loadBalancerClass"] = json!(METAL_CLASS);
    sim.update(web).expect("to metal's class");
    let _set = Ccm::start_set(&sim, &drivers, &flags, &env);
    eventually("handed over to metal", || {
        service(&sim, "web")
            .is_some_and(|s| finalizers(&s) == [METAL_FINALIZER] && ingress_ip(&s).is_some())
    })
    .await;
    assert_eq!(cloudscale.load_balancers(), Some(0), "the old one deleted");
    assert_eq!(phoenixnap.load_balancers(), Some(1));
    // In that order: the request log of each cloud, on the clock both simulators share, has
    // every delete of cloudscale's answered before PhoenixNAP received the first request
    // that makes a block. Two clouds serving at once would put a create before a delete.
    let cs = cloudscale
        .as_any()
        .downcast_ref::<CloudscaleSim>()
        .expect("the cloudscale simulator");
    let pn = phoenixnap
        .as_any()
        .downcast_ref::<PhoenixnapSim>()
        .expect("the PhoenixNAP simulator");
    let deletes: Vec<_> = cs
        .requests_sequenced()
        .into_iter()
        .filter(|r| r.request.method == "DELETE" && r.request.status < 300)
        .collect();
    let load_balancer_deleted = deletes.iter().any(|r| {
        r.request
            .path
            .strip_prefix("/v1/load-balancers/")
            .is_some_and(|id| !id.contains('/'))
    });
    assert!(
        load_balancer_deleted,
        "cloudscale's load balancer was deleted through its API: {:?}",
        cs.requests().iter().map(|r| r.line()).collect::<Vec<_>>()
    );
    let first_create = pn
        .requests_sequenced()
        .into_iter()
        .find(|r| r.request.method == "POST" && r.request.path == "/ips/v1/ip-blocks")
        .expect("PhoenixNAP was asked for a block");
    let last_delete = deletes.iter().map(|r| r.answered).max().unwrap_or(0);
    assert!(
        last_delete < first_create.arrived,
        "PhoenixNAP's create arrived at tick {} before cloudscale's last delete was answered at tick {last_delete}",
        first_create.arrived
    );
}

/// A shadow of a DriverSet (`--shadow` with `--drivers-config`, refused before issue 48):
/// every driver's would-be writes are recorded in the one report instead of made. Nodes of
/// both clouds stay uninitialised, neither cloud gets a load balancer, no Kubernetes write
/// leaves the process; the report names both drivers, and lists what each would have written
/// (the node patches and each cloud's refused load-balancer requests), which is the control
/// that the drivers ran and tried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_of_a_driver_set_records_every_drivers_writes() {
    let (sim, cloudscale, phoenixnap) = two_clouds().await;
    cloudscale
        .add_instance(0, &sim_node("cs-0", 0))
        .expect("server");
    sim.create(node("cs-0", None, true)).expect("node");
    phoenixnap
        .add_instance(1, &sim_node("pn-0", 1))
        .expect("server");
    sim.create(labelled_node("pn-0", json!({"example.com/site": "metal"})))
        .expect("node");
    sim.create(lb_service("web", None)).expect("service");
    sim.create(lb_service("bare", Some(METAL_CLASS)))
        .expect("service");

    let drivers = hybrid_set(cloudscale.as_ref(), phoenixnap.as_ref());
    let env = env_of(&[cloudscale.as_ref(), phoenixnap.as_ref()]);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let port = free_port();
    let port_text = port.to_string();
    let shadow = Ccm::start_set(
        &sim,
        &drivers,
        &[
            "--shadow",
            "--leader-elect=false",
            "--configure-cloud-routes=false",
            "--secure-port",
            &port_text,
            "--bind-address",
            "127.0.0.1",
        ],
        &env,
    );
    let has = |report: &Value, kind: &str, object: &str, target: &str| {
        report["differences"].as_array().is_some_and(|ds| {
            ds.iter()
                .any(|d| d["kind"] == kind && d["object"] == object && d["target"] == target)
        })
    };
    let report = report_until(port, "both drivers' would-be writes", |r| {
        has(r, "Node", "cs-0", "kube")
            && has(r, "Node", "pn-0", "kube")
            && has(r, "Service", "default/web", "cloud")
            && has(r, "Service", "default/bare", "cloud")
    })
    .await;
    assert_eq!(report["driver"], "cloud, metal", "{report:#}");
    // Each cloud write is the driver's own: the metal driver's for the metal Service.
    for (svc, driver) in [("web", "cloud"), ("bare", "metal")] {
        let series = format!(
            "wasm_ccm_driver_calls_total{{driver=\"{driver}\",function=\"load-balancer.ensure\","
        );
        let text = scrape(port).await;
        assert!(
            text.lines().any(|l| l.starts_with(&series)),
            "{svc}: {driver} was asked: {text}"
        );
    }
    // Nothing was made: no write reached Kubernetes or either cloud.
    assert_eq!(shadow_writes_since(&sim, 0), Vec::<String>::new());
    assert_eq!(cloudscale.request_counts().1, 0, "no cloudscale write");
    assert_eq!(phoenixnap.request_counts().1, 0, "no PhoenixNAP write");
    assert_eq!(cloudscale.load_balancers(), Some(0));
    assert_eq!(phoenixnap.load_balancers(), Some(0));
    for n in ["cs-0", "pn-0"] {
        assert!(!initialised(&sim, n), "{n} left alone");
    }
    for s in ["web", "bare"] {
        let svc = service(&sim, s).expect("service");
        assert!(finalizers(&svc).is_empty(), "{svc}");
    }
    // Control: the shadow's requests reached the simulator with the marker the filter above
    // looks for, so "no write" is not the filter matching nothing.
    assert!(
        sim.requests().iter().any(|r| r.method == "GET"
            && r.user_agent
                .as_deref()
                .is_some_and(|a| a.contains("; shadow)"))),
        "the shadow's reads carry `; shadow)`"
    );
    drop(shadow);
}
