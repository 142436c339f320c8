//! `wasm-ccm-dev playground`: a simulated cluster and cloud in one process, the real controllers and
//! a real driver `.wasm`, and a running commentary of what happens.

use std::collections::HashSet;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use wasm_ccm_controllers::Metrics;
use wasm_ccm_controllers::{
    ControllerConfig, DriverSlot, EnabledControllers, start_controllers, start_driver_set,
};

/// Driver functions the controllers call on a timer whatever the state (all read-only): counted
/// apart in the steady-state window.
const PERIODIC_CALLS: [&str; 4] = [
    "routes.list",
    "instances.instance-exists",
    "instances.instance-shutdown",
    "provider.housekeeping",
];
use wasm_ccm_sim::kit::{self, SimNode, StartOptions};
use wasm_ccm_sim::kube::{KubeSim, KubeSimOptions};

use wasm_ccm::GlobalArgs;
use wasm_ccm::run::{DriverSpec, cluster_facts, load_driver_bytes};
use wasm_ccm::units::parse_duration;

#[derive(Args, Debug)]
pub(crate) struct PlaygroundArgs {
    /// Which driver to run, with its cloud's simulator (the kit's list of clouds): `static`,
    /// `cloudscale`, `phoenixnap` or `cloudstack`.
    #[arg(long, default_value = "static", value_parser = crate::clouds::parse_cloud_name)]
    driver: String,
    /// Nodes to register (as kubelets with --cloud-provider=external would).
    #[arg(long, default_value_t = 5)]
    nodes: usize,
    /// LoadBalancer Services to create.
    #[arg(long, default_value_t = 3)]
    services: usize,
    /// Print one JSON summary instead of the commentary.
    #[arg(long)]
    json: bool,
    /// How long each step may take to converge.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    timeout: Duration,
    /// Quiet time after convergence in which nothing should change (steady-state check).
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    steady: Duration,
    /// Nodes initialised concurrently.
    #[arg(long, default_value_t = 8)]
    concurrent_node_syncs: usize,
    /// Services synced concurrently (1, upstream's default: the static driver allocates
    /// addresses from what the other Services hold, which needs one ensure at a time).
    #[arg(long, default_value_t = 1)]
    concurrent_service_syncs: usize,
    /// Client-side Kubernetes API rate (the simulator is local; upstream's default is 20).
    #[arg(long, default_value_t = 2000.0)]
    kube_api_qps: f32,
    #[arg(long, default_value_t = 4000)]
    kube_api_burst: u32,
    /// Skip the second story (two clouds' drivers in one process, see [`hybrid_story`]).
    #[arg(long)]
    no_hybrid: bool,
}

const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";
const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
/// Per-object commentary stops beyond this many objects (a summary line per second instead).
const CHATTY_LIMIT: usize = 20;

/// A Node as a kubelet started with `--cloud-provider=external` registers it.
fn node_name(i: usize) -> String {
    SimNode::numbered(i).name
}

/// A Node as a kubelet started with `--cloud-provider=external` registers it.
fn kubelet_node(i: usize) -> Value {
    kubelet_node_for(&SimNode::numbered(i), i)
}

/// The Node a kubelet on `node` registers (`i` picks its pod CIDR).
fn kubelet_node_for(node: &SimNode, i: usize) -> Value {
    let third = i % 256;
    let second = 240 + i / 256;
    let cidr = format!("10.{second}.{third}.0/24");
    let (name, ip) = (&node.name, &node.internal_ip);
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
            "annotations": {"alpha.kubernetes.io/provided-node-ip": ip},
        },
        "spec": {
            "podCIDR": cidr,
            "podCIDRs": [cidr],
            "taints": [{"key": UNINITIALIZED, "value": "true", "effect": "NoSchedule"}],
        },
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
            ],
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}],
        },
    })
}

fn lb_service(j: usize) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": format!("svc-{j:04}"), "namespace": "default"},
        "spec": {
            "type": "LoadBalancer",
            "selector": {"app": format!("app-{j}")},
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}],
        },
    })
}

fn has_taint(node: &Value, key: &str) -> bool {
    node["spec"]["taints"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["key"] == key))
}

fn is_initialized(node: &Value) -> bool {
    !has_taint(node, UNINITIALIZED) && node["spec"]["providerID"].is_string()
}

fn ingress_of(svc: &Value) -> Option<String> {
    let g = svc["status"]["loadBalancer"]["ingress"]
        .as_array()?
        .first()?;
    g["ip"]
        .as_str()
        .or(g["hostname"].as_str())
        .map(str::to_string)
}

fn has_finalizer(svc: &Value) -> bool {
    svc["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == FINALIZER))
}

/// The peak resident set of this process (Linux), in bytes.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

struct Show {
    quiet: bool,
    chatty: bool,
    started: Instant,
}

impl Show {
    fn line(&self, text: &str) {
        if !self.quiet {
            println!("[{:>7.2}s] {text}", self.started.elapsed().as_secs_f64());
        }
    }

    fn step(&self, text: &str) {
        if !self.quiet {
            println!("== {text}");
        }
    }
}

/// Polls the simulator until `done` holds, printing what changed; `Err` after the timeout.
struct Watcher<'a> {
    sim: &'a KubeSim,
    show: &'a Show,
    seen_nodes: HashSet<String>,
    seen_services: HashSet<String>,
    seen_events: HashSet<String>,
}

impl Watcher<'_> {
    fn report(&mut self) {
        // Per-object commentary only: at scale the summary lines in `until` say enough, and
        // listing every object each poll would compete with the controllers being measured.
        if self.show.quiet || !self.show.chatty {
            return;
        }
        for node in self.sim.list("nodes") {
            let name = node["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if is_initialized(&node) && self.seen_nodes.insert(name.clone()) {
                let labels = &node["metadata"]["labels"];
                let addresses: Vec<String> = node["status"]["addresses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| {
                        format!(
                            "{} {}",
                            a["type"].as_str().unwrap_or(""),
                            a["address"].as_str().unwrap_or("")
                        )
                    })
                    .collect();
                self.show.line(&format!(
                    "node {name} initialised: {} type={} zone={} region={}, addresses [{}]",
                    node["spec"]["providerID"].as_str().unwrap_or(""),
                    labels["node.kubernetes.io/instance-type"]
                        .as_str()
                        .unwrap_or("-"),
                    labels["topology.kubernetes.io/zone"]
                        .as_str()
                        .unwrap_or("-"),
                    labels["topology.kubernetes.io/region"]
                        .as_str()
                        .unwrap_or("-"),
                    addresses.join(", ")
                ));
            }
        }
        for svc in self.sim.list("services") {
            let name = format!(
                "{}/{}",
                svc["metadata"]["namespace"].as_str().unwrap_or(""),
                svc["metadata"]["name"].as_str().unwrap_or("")
            );
            if let Some(ip) = ingress_of(&svc)
                && self.seen_services.insert(name.clone())
            {
                self.show
                    .line(&format!("service {name}: load balancer ready at {ip}"));
            }
        }
        for ev in self.sim.list("events.events.k8s.io") {
            let id = ev["metadata"]["name"].as_str().unwrap_or("").to_string();
            if self.seen_events.insert(id) {
                self.show.line(&format!(
                    "event {} {} on {} {}: {}",
                    ev["type"].as_str().unwrap_or(""),
                    ev["reason"].as_str().unwrap_or(""),
                    ev["regarding"]["kind"]
                        .as_str()
                        .unwrap_or("")
                        .to_lowercase(),
                    ev["regarding"]["name"].as_str().unwrap_or(""),
                    ev["note"].as_str().unwrap_or("")
                ));
            }
        }
    }

    async fn until(
        &mut self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&KubeSim) -> bool,
    ) -> Result<Duration, String> {
        let started = Instant::now();
        let mut last_progress = Instant::now();
        loop {
            self.report();
            if done(self.sim) {
                return Ok(started.elapsed());
            }
            if started.elapsed() > timeout {
                return Err(format!("{what}: not converged after {timeout:?}"));
            }
            if !self.show.chatty && last_progress.elapsed() > Duration::from_secs(1) {
                last_progress = Instant::now();
                let nodes = self.sim.list("nodes");
                let init = nodes.iter().filter(|n| is_initialized(n)).count();
                let lbs = self
                    .sim
                    .list("services")
                    .iter()
                    .filter(|s| ingress_of(s).is_some())
                    .count();
                self.show.line(&format!(
                    "{what}: {init}/{} nodes initialised, {lbs} load balancers",
                    nodes.len()
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Runs the playground.
pub(crate) async fn run(global: &GlobalArgs, args: PlaygroundArgs) -> anyhow::Result<ExitCode> {
    let show = Show {
        quiet: args.json,
        chatty: args.nodes + args.services <= CHATTY_LIMIT,
        started: Instant::now(),
    };
    let localhost = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    // A short watch history: the simulator shares this process, and its memory is not the CCM's.
    let sim = KubeSim::start_with(
        localhost,
        KubeSimOptions {
            history_limit: 1000,
            request_log: false,
            ..Default::default()
        },
    )
    .await
    .context("starting the Kubernetes API simulator")?;
    let nodes: Vec<SimNode> = (0..args.nodes).map(SimNode::numbered).collect();
    let (cloud, instance_ids) = kit::start_with_nodes(
        &args.driver,
        StartOptions {
            addr: localhost,
            ..Default::default()
        },
        &nodes,
    )
    .await?;
    let instance_of = |i: usize| instance_ids.get(i).cloned().unwrap_or_default();
    let setup = cloud.driver_setup();
    let driver_bytes = crate::clouds::driver_bytes(setup.driver)?;
    let client = kube::Client::try_from(kube::Config::new(
        sim.url().parse().context("simulator URL")?,
    ))
    .context("Kubernetes client for the simulator")?;
    let facts = cluster_facts(&client).await?;
    let config = ControllerConfig {
        cluster_name: "playground".into(),
        concurrent_node_syncs: args.concurrent_node_syncs.max(1),
        concurrent_service_syncs: args.concurrent_service_syncs.max(1),
        node_monitor_period: Duration::from_secs(1),
        node_status_update_frequency: Duration::from_secs(10),
        route_reconciliation_period: Duration::from_secs(2),
        cluster_cidr: "10.240.0.0/12".into(),
        kube_api_qps: args.kube_api_qps,
        kube_api_burst: args.kube_api_burst,
        ..Default::default()
    };
    // The second story runs the same loops with several drivers.
    let hybrid_config = config.clone();
    let driver = load_driver_bytes(
        global,
        &format!("the embedded {} driver", setup.driver),
        driver_bytes.to_vec(),
        DriverSpec {
            config: setup.config.unwrap_or_default().into_bytes(),
            egress: wasm_ccm_runtime::parse_grants(&setup.egress)
                .map_err(|e| anyhow::anyhow!("the {} simulator's egress: {e}", setup.driver))?,
            call_timeout: Duration::from_secs(10),
            init_timeout: Duration::from_secs(60),
            memory_limit: 64 << 20,
            cluster_name: &config.cluster_name,
            max_concurrency: config.concurrent_node_syncs + config.concurrent_service_syncs,
            facts,
            extra_env: setup.env,
            trace_propagation: None,
            secrets: Default::default(),
        },
    )
    .await?;
    show.step(&format!(
        "playground: {} driver {} ({} KiB), {} nodes, {} LoadBalancer services",
        driver.name(),
        driver.info().version,
        driver.compiled().size / 1024,
        args.nodes,
        args.services
    ));
    show.step(&format!(
        "Kubernetes API simulator at {} (kubectl -s {} works while this runs)",
        sim.url(),
        sim.url()
    ));
    show.step(&cloud.describe());

    for i in 0..args.nodes {
        sim.create(kubelet_node(i))
            .map_err(|e| anyhow::anyhow!("registering node {i}: {e:?}"))?;
    }
    for j in 0..args.services {
        sim.create(lb_service(j))
            .map_err(|e| anyhow::anyhow!("creating service {j}: {e:?}"))?;
    }
    show.step(&format!(
        "registered {} tainted nodes and {} services; starting the controllers",
        args.nodes, args.services
    ));

    let metrics = Arc::new(Metrics::default());
    let cancel = CancellationToken::new();
    let started = Instant::now();
    let running = start_controllers(
        client,
        Arc::new(DriverSlot::new(Arc::clone(&driver))),
        config,
        Arc::clone(&metrics),
        "playground",
        cancel.clone(),
    );
    let mut watcher = Watcher {
        sim: &sim,
        show: &show,
        seen_nodes: HashSet::new(),
        seen_services: HashSet::new(),
        seen_events: HashSet::new(),
    };
    let (n, m) = (args.nodes, args.services);
    let mut failures = Vec::new();
    let converge = watcher
        .until("converging", args.timeout, |sim| {
            sim.list("nodes")
                .iter()
                .filter(|x| is_initialized(x))
                .count()
                == n
                && sim
                    .list("services")
                    .iter()
                    .filter(|s| ingress_of(s).is_some() && has_finalizer(s))
                    .count()
                    == m
        })
        .await;
    // Wait for the queues to drain too, so the steady-state window starts quiet.
    // (Idle over several polls: the watch delivers the last writes a moment later.)
    let idle_polls = std::cell::Cell::new(0);
    let _ = watcher
        .until("settling", args.timeout, |_| {
            idle_polls.set(if running.pending() == 0 {
                idle_polls.get() + 1
            } else {
                0
            });
            idle_polls.get() >= 5
        })
        .await;
    let converge_time = started.elapsed();
    let converge_requests = sim.request_counts();
    let converge_calls = metrics.total("wasm_ccm_driver_calls_total");
    let converge_rss = peak_rss();
    match &converge {
        Ok(_) => show.step(&format!(
            "converged in {:.2}s: {n} nodes initialised, {m} load balancers, {} routes; {} API requests ({} mutating), {:.0} driver calls",
            converge_time.as_secs_f64(),
            cloud.routes(),
            converge_requests.total(),
            converge_requests.mutations(),
            converge_calls
        )),
        Err(e) => failures.push(e.clone()),
    }

    // Steady state: nothing changes, so nothing should be written.
    sim.reset_counts();
    sim.set_request_log(true);
    sim.clear_requests();
    // Calls a timer makes (the route reconciliation's `routes.list`, the node monitor's checks of
    // a not-ready node, housekeeping) are read-only and due whatever the state, so they fall in
    // the window or not by the clock: they are counted apart from the calls the state caused.
    let periodic = |labels: &str| {
        PERIODIC_CALLS
            .iter()
            .any(|f| labels.contains(&format!("function=\"{f}\"")))
    };
    let calls = || metrics.total_matching("wasm_ccm_driver_calls_total", |l| !periodic(l));
    let periodic_calls = || metrics.total_matching("wasm_ccm_driver_calls_total", periodic);
    let (calls_before, periodic_before) = (calls(), periodic_calls());
    tokio::time::sleep(args.steady).await;
    let steady_requests = sim.request_counts();
    let steady_calls = calls() - calls_before;
    let steady_periodic_calls = periodic_calls() - periodic_before;
    let steady_writes: Vec<String> = sim
        .requests()
        .into_iter()
        .filter(|r| !matches!(r.method.as_str(), "GET" | "HEAD"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    sim.set_request_log(false);
    show.step(&format!(
        "steady state for {:.0?}: {} mutating API requests, {} reads, {:.0} driver calls (+ {:.0} periodic reads)",
        args.steady,
        steady_requests.mutations(),
        steady_requests.reads(),
        steady_calls,
        steady_periodic_calls
    ));

    let mut scenario = Vec::new();
    if n >= 3 {
        let set_ready = |name: &str, ready: bool| {
            sim.modify("nodes", None, name, |node| {
                if let Some(conds) = node["status"]["conditions"].as_array_mut() {
                    for c in conds.iter_mut().filter(|c| c["type"] == "Ready") {
                        c["status"] = json!(if ready { "True" } else { "Unknown" });
                        c["reason"] = json!(if ready {
                            "KubeletReady"
                        } else {
                            "NodeStatusUnknown"
                        });
                    }
                }
            })
        };
        let gone = node_name(1);
        cloud.remove_instance(&instance_of(1));
        let _ = set_ready(&gone, false);
        show.step(&format!(
            "deleted the instance of {gone} in the cloud; its kubelet stopped reporting"
        ));
        match watcher
            .until("node deletion", args.timeout, |sim| {
                sim.get("nodes", None, &gone).is_none()
            })
            .await
        {
            Ok(t) => {
                show.step(&format!(
                    "node {gone} removed after {:.2}s",
                    t.as_secs_f64()
                ));
                scenario.push(
                    json!({"step": "instance deleted", "node": gone, "seconds": t.as_secs_f64()}),
                );
            }
            Err(e) => failures.push(e),
        }
        let off = node_name(2);
        cloud.set_running(&instance_of(2), false);
        let _ = set_ready(&off, false);
        show.step(&format!(
            "shut down the instance of {off}; its kubelet stopped reporting"
        ));
        match watcher
            .until("shutdown taint", args.timeout, |sim| {
                sim.get("nodes", None, &off)
                    .is_some_and(|n| has_taint(&n, SHUTDOWN))
            })
            .await
        {
            Ok(t) => {
                show.step(&format!(
                    "node {off} tainted {SHUTDOWN} after {:.2}s",
                    t.as_secs_f64()
                ));
                scenario.push(
                    json!({"step": "instance shut down", "node": off, "seconds": t.as_secs_f64()}),
                );
            }
            Err(e) => failures.push(e),
        }
    }
    if m >= 1 {
        let svc = "svc-0000";
        let _ = sim.remove("services", Some("default"), svc);
        show.step(&format!("deleted service default/{svc}"));
        match watcher
            .until("service deletion", args.timeout, |sim| {
                sim.get("services", Some("default"), svc).is_none()
            })
            .await
        {
            Ok(t) => {
                show.step(&format!(
                    "load balancer released and finalizer removed; default/{svc} gone after {:.2}s",
                    t.as_secs_f64()
                ));
                scenario.push(
                    json!({"step": "service deleted", "service": svc, "seconds": t.as_secs_f64()}),
                );
            }
            Err(e) => failures.push(e),
        }
    }
    watcher.report();
    cancel.cancel();
    running.join().await;

    let hybrid = if args.no_hybrid {
        Value::Null
    } else {
        let story = hybrid_story(global, &show, hybrid_config, args.timeout).await?;
        failures.extend(story.failures.into_iter().map(|f| format!("hybrid: {f}")));
        story.summary
    };

    let stats = driver.stats();
    let (cloud_reads, cloud_writes) = cloud.request_counts();
    let summary = json!({
        "driver": driver.name(),
        "nodes": n,
        "services": m,
        "converged": converge.is_ok(),
        "converge_seconds": converge_time.as_secs_f64(),
        "converge_api_requests": converge_requests,
        "converge_driver_calls": converge_calls,
        "peak_rss_bytes": converge_rss,
        "steady_seconds": args.steady.as_secs_f64(),
        "steady_api_requests": steady_requests,
        "steady_driver_calls": steady_calls,
        "steady_periodic_driver_calls": steady_periodic_calls,
        "steady_writes": steady_writes,
        "scenario": scenario,
        "driver_instances": stats.instances_created.load(std::sync::atomic::Ordering::Relaxed),
        "cloud_requests": {"reads": cloud_reads, "writes": cloud_writes},
        "cloud_load_balancers": cloud.load_balancers(),
        "hybrid": hybrid,
        "failures": failures,
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        show.step("summary");
        println!(
            "   converged: {} in {:.2}s · API requests {} ({} mutating) · driver calls {:.0} · peak RSS {} MiB",
            converge.is_ok(),
            converge_time.as_secs_f64(),
            converge_requests.total(),
            converge_requests.mutations(),
            converge_calls,
            converge_rss.map_or("?".into(), |b| (b >> 20).to_string())
        );
        println!(
            "   steady state: {} mutating requests, {:.0} driver calls in {:.0?}",
            steady_requests.mutations(),
            steady_calls,
            args.steady
        );
        for w in &steady_writes {
            println!("   steady-state write: {w}");
        }
        if let Some(seconds) = hybrid["seconds"].as_f64() {
            println!(
                "   hybrid: converged {} in {seconds:.2}s · {} drivers in one process",
                hybrid["converged"],
                hybrid["drivers"].as_array().map_or(0, Vec::len)
            );
        }
        for f in &failures {
            println!("   NOT CONVERGED: {f}");
        }
    }
    sim.shutdown().await;
    Ok(if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The DriverSet of the overlay `deploy/overlays/hybrid-configmap`, embedded: the hybrid story
/// routes by the very file an operator installs, read by `run`'s own parser, so the worked
/// example of deploy/README.md cannot drift from what the product accepts.
const HYBRID_DRIVER_SET: &str =
    include_str!("../../../deploy/overlays/hybrid-configmap/drivers.yaml");

/// The limits the hybrid story's drivers take where the file gives none (the main story's).
const HYBRID_LIMITS: wasm_ccm::driver_set::LimitDefaults = wasm_ccm::driver_set::LimitDefaults {
    call_timeout: Duration::from_secs(10),
    init_timeout: Duration::from_secs(60),
    memory_limit: 64 << 20,
    cloud_requests: None,
};

/// Nodes each driver of the hybrid story claims.
const HYBRID_NODES_PER_DRIVER: usize = 2;

/// What the hybrid story found: its part of the JSON summary (`converged`, `seconds`, per
/// driver its nodes, Service and load balancers) and what did not converge.
struct HybridOutcome {
    summary: Value,
    failures: Vec<String>,
}

/// One driver of the hybrid story: its roles, its cloud, and what it should end up serving.
struct HybridDriver {
    roles: wasm_ccm_controllers::DriverRoles,
    cloud: Box<dyn kit::SimCloud>,
    provider: String,
    nodes: Vec<String>,
    /// The Service it should serve (`<name>-lb`) and that Service's class.
    service: Option<(String, Option<String>)>,
}

impl HybridDriver {
    /// The finalizers its Service should carry (see [`service_finalizers`]).
    fn finalizers(&self) -> Vec<String> {
        service_finalizers(&self.roles.name, matches!(self.service, Some((_, None))))
    }
}

/// The finalizers a Service served by `driver` carries with several drivers: the driver's own,
/// and upstream's shared one on a class-less Service (so a single-driver rollback or a Go CCM
/// still finds its own).
fn service_finalizers(driver: &str, class_less: bool) -> Vec<String> {
    let mut out = vec![format!("wasm-ccm.io/lb-cleanup.{driver}")];
    if class_less {
        out.push(FINALIZER.to_string());
    }
    out
}

/// A LoadBalancer Service of `class` (none: class-less).
fn class_service(name: &str, class: Option<&str>) -> Value {
    let mut svc = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "type": "LoadBalancer",
            "selector": {"app": name},
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}],
        },
    });
    if let Some(class) = class {
        svc["spec"]["loadBalancerClass"] = json!(class);
    }
    svc
}

fn finalizers_of(svc: &Value) -> Vec<String> {
    svc["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect()
}

/// The second story: several drivers in one process, as `run --drivers-config` runs them. The
/// hybrid overlay's DriverSet routes between the cloudscale and PhoenixNAP drivers, each
/// against its own simulator in a cluster of its own: the default driver's nodes and its
/// class-less Service, beside the nodes its selector labels and a Service of its class for
/// the other. Each driver must initialise exactly its nodes (their provider IDs name its
/// scheme) and build exactly its Service's load balancer, under its own finalizer.
async fn hybrid_story(
    global: &GlobalArgs,
    show: &Show,
    config: ControllerConfig,
    timeout: Duration,
) -> anyhow::Result<HybridOutcome> {
    let set = wasm_ccm::driver_set::parse(HYBRID_DRIVER_SET, HYBRID_LIMITS)
        .context("deploy/overlays/hybrid-configmap/drivers.yaml")?;
    let localhost = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let sim = KubeSim::start_with(
        localhost,
        KubeSimOptions {
            history_limit: 1000,
            request_log: false,
            ..Default::default()
        },
    )
    .await
    .context("starting the Kubernetes API simulator of the hybrid story")?;
    let client = kube::Client::try_from(kube::Config::new(
        sim.url().parse().context("simulator URL")?,
    ))
    .context("Kubernetes client for the simulator")?;
    let facts = cluster_facts(&client).await?;
    show.step(
        "hybrid: several drivers in one process, routed by deploy/overlays/hybrid-configmap/drivers.yaml",
    );

    let mut drivers: Vec<HybridDriver> = Vec::new();
    let mut slots = Vec::new();
    let mut loaded: Vec<(String, Arc<wasm_ccm_runtime::Driver>)> = Vec::new();
    // Numbers the nodes across clouds, so no two share an address.
    let mut index = 0;
    for roles in set.routing.drivers() {
        // The kit's cloud of the driver's scheme: the file names real drivers' schemes.
        let cloud = kit::start(
            &roles.provider_id_scheme,
            StartOptions {
                addr: localhost,
                ..Default::default()
            },
        )
        .await
        .with_context(|| format!("the simulated cloud of driver {:?}", roles.name))?;
        let labels = roles
            .nodes
            .selector
            .as_ref()
            .and_then(|s| s.match_labels.clone())
            .unwrap_or_default();
        let mut nodes = Vec::new();
        if roles.nodes.default || !labels.is_empty() {
            for k in 0..HYBRID_NODES_PER_DRIVER {
                let node = SimNode {
                    name: format!("{}-{k}", roles.name),
                    ..SimNode::numbered(index)
                };
                cloud
                    .add_instance(index, &node)
                    .map_err(|e| anyhow::anyhow!("seeding instance {}: {e}", node.name))?;
                // The labels its selector matches (none for the default driver's nodes).
                let mut kubelet = kubelet_node_for(&node, index);
                for (key, value) in &labels {
                    kubelet["metadata"]["labels"][key] = json!(value);
                }
                sim.create(kubelet)
                    .map_err(|e| anyhow::anyhow!("registering node {}: {e:?}", node.name))?;
                nodes.push(node.name);
                index += 1;
            }
        }
        let lb = &roles.load_balancer;
        let class = if lb.default {
            Some(None)
        } else {
            lb.classes.first().map(|c| Some(c.clone()))
        };
        let service = class.map(|class| (format!("{}-lb", roles.name), class));
        if let Some((name, class)) = &service {
            sim.create(class_service(name, class.as_deref()))
                .map_err(|e| anyhow::anyhow!("creating service {name}: {e:?}"))?;
        }
        let setup = cloud.driver_setup();
        let driver = load_driver_bytes(
            global,
            &format!("the embedded {} driver", setup.driver),
            crate::clouds::driver_bytes(setup.driver)?.to_vec(),
            DriverSpec {
                config: setup.config.unwrap_or_default().into_bytes(),
                egress: wasm_ccm_runtime::parse_grants(&setup.egress)
                    .map_err(|e| anyhow::anyhow!("the {} simulator's egress: {e}", setup.driver))?,
                call_timeout: Duration::from_secs(10),
                init_timeout: Duration::from_secs(60),
                memory_limit: 64 << 20,
                cluster_name: &config.cluster_name,
                max_concurrency: config.concurrent_node_syncs + config.concurrent_service_syncs,
                facts: facts.clone(),
                extra_env: setup.env,
                trace_propagation: None,
                secrets: Default::default(),
            },
        )
        .await
        .with_context(|| format!("driver {:?}", roles.name))?;
        // `run`'s own check: the scheme the file names, the exports its roles call.
        wasm_ccm::driver_set::check_loaded(roles, &driver, &loaded)?;
        show.step(&format!(
            "driver {}: {} {} — nodes [{}]{}; Service {}",
            roles.name,
            driver.name(),
            driver.info().version,
            nodes.join(", "),
            labels
                .iter()
                .map(|(k, v)| format!(" labelled {k}={v}"))
                .collect::<String>(),
            match &service {
                Some((name, Some(class))) => format!("default/{name} of class {class}"),
                Some((name, None)) => format!("default/{name} without a class"),
                None => "none".into(),
            }
        ));
        slots.push(Arc::new(DriverSlot::new(Arc::clone(&driver))));
        loaded.push((roles.name.clone(), Arc::clone(&driver)));
        drivers.push(HybridDriver {
            roles: roles.clone(),
            cloud,
            provider: driver.name().to_string(),
            nodes,
            service,
        });
    }

    let metrics = Arc::new(Metrics::default());
    let cancel = CancellationToken::new();
    let running = start_driver_set(
        client,
        slots,
        Arc::clone(&set.routing),
        config,
        EnabledControllers::ALL,
        metrics,
        "playground-hybrid",
        cancel.clone(),
    );
    let mut watcher = Watcher {
        sim: &sim,
        show,
        seen_nodes: HashSet::new(),
        seen_services: HashSet::new(),
        seen_events: HashSet::new(),
    };
    let converge = watcher
        .until("hybrid", timeout, |sim| {
            drivers.iter().all(|d| {
                d.nodes.iter().all(|n| {
                    sim.get("nodes", None, n)
                        .is_some_and(|node| is_initialized(&node))
                }) && d.service.as_ref().is_none_or(|(name, _)| {
                    sim.get("services", Some("default"), name).is_some_and(|s| {
                        ingress_of(&s).is_some() && finalizers_of(&s) == d.finalizers()
                    })
                })
            })
        })
        .await;
    watcher.report();

    let mut failures = Vec::new();
    if let Err(e) = &converge {
        failures.push(e.clone());
    }
    let mut summaries = Vec::new();
    for d in &drivers {
        // Every node carries the provider ID of its driver's scheme: no driver initialised
        // another's node.
        let scheme = format!("{}://", d.roles.provider_id_scheme);
        let mut nodes = serde_json::Map::new();
        for n in &d.nodes {
            let id = sim
                .get("nodes", None, n)
                .and_then(|node| node["spec"]["providerID"].as_str().map(str::to_string))
                .unwrap_or_default();
            if !id.starts_with(&scheme) {
                failures.push(format!(
                    "node {n} has provider ID {id:?}, not one of driver {}",
                    d.roles.name
                ));
            }
            nodes.insert(n.clone(), json!(id));
        }
        let lbs = d.cloud.load_balancers();
        let wanted_lbs = usize::from(d.service.is_some());
        if lbs.is_some_and(|n| n != wanted_lbs) {
            failures.push(format!(
                "the cloud of driver {} holds {lbs:?} load balancers, want {wanted_lbs}",
                d.roles.name
            ));
        }
        let service = d.service.as_ref().map(|(name, class)| {
            let svc = sim
                .get("services", Some("default"), name)
                .unwrap_or(Value::Null);
            let ingress = ingress_of(&svc);
            show.step(&format!(
                "default/{name} → driver {} ({}): load balancer at {}, finalizers [{}]",
                d.roles.name,
                d.provider,
                ingress.as_deref().unwrap_or("-"),
                finalizers_of(&svc).join(", ")
            ));
            json!({"name": name, "class": class, "ingress": ingress, "finalizers": finalizers_of(&svc)})
        });
        summaries.push(json!({
            "name": d.roles.name,
            "provider": d.provider,
            "nodes": nodes,
            "service": service,
            "cloud_load_balancers": lbs,
        }));
    }
    let seconds = converge.as_ref().map_or(timeout, |t| *t).as_secs_f64();
    if failures.is_empty() {
        show.step(&format!(
            "hybrid converged in {seconds:.2}s: each node initialised by its owner, each Service's load balancer in the cloud of its class"
        ));
    }
    cancel.cancel();
    running.join().await;
    for d in drivers {
        d.cloud.shutdown().await;
    }
    sim.shutdown().await;
    Ok(HybridOutcome {
        summary: json!({
            "converged": converge.is_ok(),
            "seconds": seconds,
            "drivers": summaries,
        }),
        failures,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hybrid story runs the overlay's file as `run` reads it, so a change there that `run`
    /// refuses, or that names a driver the kit cannot simulate, fails here rather than in the
    /// playground; and every driver has nodes and a Service to show.
    #[test]
    fn the_hybrid_overlay_reads_and_each_driver_has_a_simulated_cloud() {
        let set = wasm_ccm::driver_set::parse(HYBRID_DRIVER_SET, HYBRID_LIMITS)
            .unwrap_or_else(|e| panic!("{e:#}"));
        let roles = set.routing.drivers();
        assert!(roles.len() >= 2, "a hybrid of one driver: {roles:?}");
        for r in roles {
            assert!(
                kit::cloud(&r.provider_id_scheme).is_some(),
                "driver {}: no simulated cloud {:?} (one of {})",
                r.name,
                r.provider_id_scheme,
                kit::names()
            );
            assert!(
                r.nodes.default || r.nodes.selector.is_some(),
                "driver {} claims no nodes",
                r.name
            );
            assert!(
                r.load_balancer.default || !r.load_balancer.classes.is_empty(),
                "driver {} serves no Service",
                r.name
            );
        }
    }

    #[test]
    fn a_class_less_service_keeps_the_shared_finalizer_and_a_classed_one_does_not() {
        assert_eq!(
            service_finalizers("cloud", true),
            ["wasm-ccm.io/lb-cleanup.cloud", FINALIZER]
        );
        assert_eq!(
            service_finalizers("metal", false),
            ["wasm-ccm.io/lb-cleanup.metal"]
        );
        assert_eq!(
            class_service("x", Some("phoenixnap.com/public-ip"))["spec"]["loadBalancerClass"],
            "phoenixnap.com/public-ip"
        );
        assert!(
            class_service("x", None)["spec"]
                .get("loadBalancerClass")
                .is_none()
        );
    }
}
