//! `wasm-ccm-dev scale`: the controllers at a cluster's size, measured as an operator would see
//! them. The Kubernetes API simulator runs in its own process (this binary's `sim kube`), seeded
//! with NODES tainted nodes and SERVICES LoadBalancer Services; the product binary runs against
//! it with the static driver and an inventory of NODES instances. The command polls until every
//! node is initialised and every Service has its ingress, then reports the time to converge, the
//! `run` process's peak RSS (at convergence and after a quiet period), the driver calls and the
//! bytes lowered into guests (from `run`'s `/metrics`), the Kubernetes requests (from the
//! simulator's counts) and the writes made in the quiet period (0 in a steady state).
//!
//! A benchmark, not a test: its figures go in BENCHMARKS.md. Everything stays on loopback.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};
use wasm_ccm::units::{parse_duration, parse_size};

use crate::children::Watched;

mod command;
mod hybrid;

pub(crate) use command::run;

/// The options of `wasm-ccm-dev scale`.
#[derive(clap::Args, Debug)]
pub(crate) struct ScaleArgs {
    /// Nodes in the cluster (and instances in the static driver's inventory).
    #[arg(long, default_value_t = 1000)]
    nodes: usize,
    /// LoadBalancer Services.
    #[arg(long, default_value_t = 200)]
    services: usize,
    /// Whether the Services get node ports (`--node-ports=false`: created with
    /// `spec.allocateLoadBalancerNodePorts: false`, so more Services than the NodePort range
    /// has ports can be tried, as on a cluster whose load balancers reach pods directly).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    node_ports: bool,
    /// The simulator's NodePort range (`sim kube --service-node-port-range`, as
    /// kube-apiserver's flag): `BASE-END` inclusive, `BASE+OFFSET` or one port. Default
    /// 30000-32767, 2,768 ports: each LoadBalancer Service with node ports takes one.
    #[arg(long, value_name = "RANGE")]
    service_node_port_range: Option<wasm_ccm_sim::kube::PortRange>,
    /// `run`'s --kube-api-qps (burst twice that): high, so the figure is our cost and not the
    /// client's rate limit (upstream's 20 would make any CCM spend minutes on 20,000 writes).
    #[arg(long, default_value_t = 1000.0)]
    qps: f32,
    /// How long to watch after convergence: peak RSS again, and writes (none expected).
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    quiet: Duration,
    /// Give up when not converged after this long.
    #[arg(long, default_value = "600s", value_parser = parse_duration)]
    timeout: Duration,
    /// After the quiet period, stop the run and start `run --shadow` (grace 0) over the
    /// converged cluster: its would-be writes are false differences (none expected), and it
    /// must write nothing.
    #[arg(long)]
    shadow: bool,
    /// Two drivers instead of the static one alone: half the nodes (labelled
    /// `example.com/site: static`) and the Services of class `example.com/static` go to the
    /// static driver, the others to cloudscale (an in-process simulator). `one`: one process
    /// with both drivers (`run --drivers-config`); `two`: one process per driver.
    #[arg(long, value_enum)]
    hybrid: Option<Layout>,
    /// Print one JSON line instead of the table.
    #[arg(long)]
    json: bool,
    /// Keep the work directory (seed, cloud config, both processes' logs).
    #[arg(long)]
    keep: bool,
    /// Memory limit of one driver instance, passed to `run --memory-limit` (e.g. 256Mi); without
    /// it `run`'s default, 64Mi, which holds the static driver's inventory of 15,000 nodes and
    /// more. With --hybrid it is the default of both drivers.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    memory_limit: Option<usize>,
    /// The product binary (default: `wasm-ccm` beside this executable, else on PATH).
    #[arg(long, env = "WASM_CCM_BIN", value_name = "PATH")]
    ccm_binary: Option<PathBuf>,
}

/// How the two drivers are run.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// One process hosting both drivers.
    One,
    /// One process per driver.
    Two,
}

/// Polls until every node is initialised and every Service has its ingress; the time since
/// `started`. Fails at once when one of `processes` exits first (saying why), or after
/// `args.timeout`.
async fn wait_converged(
    http: &reqwest::Client,
    api: &str,
    args: &ScaleArgs,
    started: Instant,
    processes: &mut [&mut Watched],
) -> anyhow::Result<Duration> {
    let deadline = started + args.timeout;
    loop {
        for child in processes.iter_mut() {
            child.check_running("before the cluster converged")?;
        }
        let (nodes, services) = progress(http, api).await?;
        if nodes == args.nodes && services == args.services {
            return Ok(started.elapsed());
        }
        if Instant::now() > deadline {
            bail!(
                "not converged after {:?}: {nodes} of {} nodes initialised, {services} of {} Services served",
                args.timeout,
                args.nodes,
                args.services
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The seed of the simulator: NODES tainted, Ready nodes and SERVICES LoadBalancer Services
/// (with `allocateLoadBalancerNodePorts: false` unless `node_ports`).
fn seed(nodes: usize, services: usize, node_ports: bool) -> Value {
    let mut items: Vec<Value> = (0..nodes)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node_name(i)},
                "spec": {"taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized",
                    "value": "true", "effect": "NoSchedule"}]},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
        })
        .collect();
    items.extend((0..services).map(|j| {
        let mut service = json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": format!("svc-{j:05}"), "namespace": "default"},
            "spec": {"type": "LoadBalancer", "selector": {"app": format!("a{j}")},
                "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]}});
        if !node_ports {
            service["spec"]["allocateLoadBalancerNodePorts"] = json!(false);
        }
        service
    }));
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

fn node_name(i: usize) -> String {
    format!("node-{i:05}")
}

/// The static driver's configuration: one instance per node, a pool for the load balancers.
fn cloud_config(nodes: usize) -> Value {
    let instances: Vec<Value> = (0..nodes)
        .map(|i| {
            json!({"name": node_name(i), "id": format!("i{i:05}"), "type": "s1.medium",
                "addresses": [
                    {"type": "InternalIP",
                     "address": format!("10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256)},
                    {"type": "Hostname", "address": node_name(i)}]})
        })
        .collect();
    json!({"region": "eu-1", "zone": "eu-1a", "instances": instances,
        "loadBalancer": {"addresses": ["10.200.0.0/16"]}})
}

/// A kilobyte figure of `/proc/PID/status` (`VmHWM`, `VmRSS`) in MiB.
fn proc_mib(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kib| kib / 1024)
}

/// A free loopback port (bound and released; the process that takes it binds it next).
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("cannot bind loopback")?;
    Ok(listener.local_addr()?.port())
}

/// The simulator's URL from the kubeconfig it writes, once the file is complete.
fn server_in(kubeconfig: &Path) -> Option<String> {
    let text = std::fs::read_to_string(kubeconfig).ok()?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix("server:"))
        .map(|s| s.trim().trim_matches('"').to_string())
        .filter(|s| s.starts_with("http://127.0.0.1:"))
}

/// The sum of every series of `name` in a Prometheus text exposition.
fn metric_sum(text: &str, name: &str) -> f64 {
    metric_sum_with(text, name, "")
}

/// [`metric_sum`] over the series whose labels contain `label` (e.g. `function="x"`).
fn metric_sum_with(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
                && l.contains(label)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn get_json(http: &reqwest::Client, url: &str) -> anyhow::Result<Value> {
    let response = http
        .get(url)
        .send()
        .await
        .with_context(|| format!("GET {url}"))?;
    let status = response.status();
    anyhow::ensure!(status.is_success(), "GET {url}: {status}");
    response
        .json()
        .await
        .with_context(|| format!("GET {url}: not JSON"))
}

/// Nodes initialised (provider ID set, no `uninitialized` taint) and Services with an ingress.
async fn progress(http: &reqwest::Client, api: &str) -> anyhow::Result<(usize, usize)> {
    let nodes = get_json(http, &format!("{api}/api/v1/nodes")).await?;
    let initialised = nodes["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|n| {
                    n["spec"]["providerID"]
                        .as_str()
                        .is_some_and(|p| !p.is_empty())
                        && !n["spec"]["taints"].as_array().is_some_and(|t| {
                            t.iter().any(|t| {
                                t["key"] == "node.cloudprovider.kubernetes.io/uninitialized"
                            })
                        })
                })
                .count()
        })
        .unwrap_or(0);
    let services = get_json(http, &format!("{api}/api/v1/namespaces/default/services")).await?;
    let served = services["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|s| {
                    s["status"]["loadBalancer"]["ingress"]
                        .as_array()
                        .is_some_and(|i| !i.is_empty())
                })
                .count()
        })
        .unwrap_or(0);
    Ok((initialised, served))
}

/// The simulator's request totals (`/sim/counts`).
async fn kube_counts(http: &reqwest::Client, api: &str) -> anyhow::Result<Value> {
    Ok(get_json(http, &format!("{api}/sim/counts")).await?["total"].clone())
}

fn mutations(counts: &Value) -> u64 {
    ["create", "update", "patch", "delete"]
        .iter()
        .map(|k| counts[k].as_u64().unwrap_or(0))
        .sum()
}

fn requests(counts: &Value) -> u64 {
    [
        "get", "list", "watch", "create", "update", "patch", "delete", "other",
    ]
    .iter()
    .map(|k| counts[k].as_u64().unwrap_or(0))
    .sum()
}

pub(super) async fn measure(args: &ScaleArgs, ccm: &Path, dir: &Path) -> anyhow::Result<Value> {
    let seed_path = dir.join("seed.json");
    let cloud_path = dir.join("cloud.json");
    let driver_path = dir.join("static_driver.wasm");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &seed_path,
        seed(args.nodes, args.services, args.node_ports).to_string(),
    )?;
    std::fs::write(&cloud_path, cloud_config(args.nodes).to_string())?;
    let driver =
        wasm_ccm_drivers::shipped("static").context("this build embeds no static driver")?;
    std::fs::write(&driver_path, driver)?;

    let (sim, http, api) = start_sim(args, dir, &seed_path, &kubeconfig).await?;

    let metrics_port = free_port()?;
    let started = Instant::now();
    let run = RunFiles {
        driver: &driver_path,
        cloud: &cloud_path,
        kubeconfig: &kubeconfig,
    };
    let mut ccm_child = spawn_run(ccm, args, &run, metrics_port, &[], &dir.join("run.log"))?;
    let pid = ccm_child.id();
    let converged_after = wait_converged(&http, &api, args, started, &mut [&mut ccm_child]).await?;
    let peak_at_converge = proc_mib(pid, "VmHWM");
    let counts_at_converge = kube_counts(&http, &api).await?;
    let metrics_url = format!("https://127.0.0.1:{metrics_port}/metrics");
    let metrics_at_converge = http.get(&metrics_url).send().await?.text().await?;
    // The last writes of convergence (events after the last status) settle first: the quiet
    // period starts once a second passes without a write (at most 30 s).
    let settled = settle(&http, &api, Duration::from_secs(30)).await?;
    tokio::time::sleep(args.quiet).await;
    let counts_after = kube_counts(&http, &api).await?;
    let lowered = metric_sum(&metrics_at_converge, "wasm_ccm_driver_lowered_bytes_total");
    let report = json!({
        "nodes": args.nodes,
        "services": args.services,
        "converge_s": (converged_after.as_secs_f64() * 100.0).round() / 100.0,
        "run_peak_rss_mib_at_converge": peak_at_converge,
        "run_peak_rss_mib_after_quiet": proc_mib(pid, "VmHWM"),
        "run_rss_mib_now": proc_mib(pid, "VmRSS"),
        "sim_peak_rss_mib": proc_mib(sim.id(), "VmHWM"),
        "driver_calls": metric_sum(&metrics_at_converge, "wasm_ccm_driver_calls_total"),
        "lowered_bytes": lowered as u64,
        "lowered_mib": mib(lowered),
        "kube_requests": requests(&counts_at_converge),
        "kube_writes": mutations(&counts_at_converge),
        "writes_settling": mutations(&settled).saturating_sub(mutations(&counts_at_converge)),
        "writes_in_quiet": mutations(&counts_after).saturating_sub(mutations(&settled)),
        "quiet_s": args.quiet.as_secs_f64(),
    });
    drop(ccm_child);
    let mut report = report;
    if args.shadow {
        let shadow = measure_shadow(args, ccm, &run, dir, &http, &api).await?;
        if let (Some(all), Some(more)) = (report.as_object_mut(), shadow.as_object()) {
            all.extend(more.clone());
        }
    }
    drop(sim);
    Ok(report)
}

/// How long the simulator may take to answer after it started: a hang detector. A seed the
/// simulator refuses ends the wait at once (it exits, and the error quotes why).
const SIM_READY_BOUND: Duration = Duration::from_secs(120);

/// Starts the Kubernetes API simulator (this binary's `sim kube`, with the NodePort range of
/// `args`) seeded from `seed_path`; the process, an HTTP client for loopback and the
/// simulator's URL once it answers.
async fn start_sim(
    args: &ScaleArgs,
    dir: &Path,
    seed_path: &Path,
    kubeconfig: &Path,
) -> anyhow::Result<(Watched, reqwest::Client, String)> {
    let exe = std::env::current_exe().context("cannot find this executable")?;
    let mut command = Command::new(&exe);
    command
        .args(["sim", "kube", "--listen", "127.0.0.1:0", "--seed"])
        .arg(seed_path)
        .arg("--write-kubeconfig")
        .arg(kubeconfig);
    if let Some(range) = &args.service_node_port_range {
        command.arg(format!("--service-node-port-range={range}"));
    }
    let mut sim = Watched::spawn(
        command,
        "the Kubernetes API simulator (`wasm-ccm-dev sim kube`)",
        &dir.join("sim.err"),
    )?;
    let http = reqwest::Client::builder()
        // Loopback only: `run` serves /metrics with a self-signed certificate.
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(60))
        .build()?;
    let api = sim
        .wait_ready(SIM_READY_BOUND, Duration::from_millis(100), || async {
            let url = server_in(kubeconfig)?;
            get_json(&http, &format!("{url}/api/v1/nodes?limit=1"))
                .await
                .ok()
                .map(|_| url)
        })
        .await
        .map_err(|e| node_port_hint(args, e))?;
    Ok((sim, http, api))
}

/// The simulator's refusal of a seed whose Services outnumber the NodePort range, with what to
/// pass instead; any other error as it is.
fn node_port_hint(args: &ScaleArgs, error: anyhow::Error) -> anyhow::Error {
    if !format!("{error:#}").contains("failed to allocate a nodePort: range is full") {
        return error;
    }
    let range = args.service_node_port_range.unwrap_or_default();
    error.context(format!(
        "{} LoadBalancer Services with node ports need as many ports and the NodePort range {range} has {}: pass --node-ports=false (the Services then ask for none) or a wider --service-node-port-range",
        args.services,
        range.size()
    ))
}

/// The files a `run` reads.
struct RunFiles<'a> {
    driver: &'a Path,
    cloud: &'a Path,
    kubeconfig: &'a Path,
}

/// The `wasm-ccm run` command over the static driver with the scale flags and `extra`.
fn run_command(
    ccm: &Path,
    args: &ScaleArgs,
    files: &RunFiles<'_>,
    metrics_port: u16,
    extra: &[&str],
) -> Command {
    let mut command = Command::new(ccm);
    command
        .arg("run")
        .arg("--cloud-provider=static")
        .arg(format!("--driver={}", files.driver.display()))
        .arg(format!("--cloud-config={}", files.cloud.display()))
        .arg(format!("--kubeconfig={}", files.kubeconfig.display()))
        .args([
            "--leader-elect=false",
            "--cluster-cidr=10.128.0.0/9",
            "--bind-address=127.0.0.1",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/shadow",
        ])
        .args(common_run_flags(args))
        .arg(format!("--secure-port={metrics_port}"))
        .args(extra)
        .env("WASM_CCM_LOG", "warn");
    command
}

/// The `run` flags every layout passes: the client's rate limit and, when given, the driver's
/// memory limit.
fn common_run_flags(args: &ScaleArgs) -> Vec<String> {
    let burst = (args.qps * 2.0) as u32;
    let mut flags = vec![
        format!("--kube-api-qps={}", args.qps),
        format!("--kube-api-burst={burst}"),
    ];
    if let Some(bytes) = args.memory_limit {
        flags.push(format!("--memory-limit={bytes}"));
    }
    flags
}

/// Starts `wasm-ccm run` ([`run_command`]) with its stderr in `log`.
fn spawn_run(
    ccm: &Path,
    args: &ScaleArgs,
    files: &RunFiles<'_>,
    metrics_port: u16,
    extra: &[&str],
    log: &Path,
) -> anyhow::Result<Watched> {
    Watched::spawn(
        run_command(ccm, args, files, metrics_port, extra),
        &format!("`{} run`", ccm.display()),
        log,
    )
}

/// A shadow over the converged cluster: how long its first passes take, what it would write
/// (false differences: none expected) and what it wrote (nothing, by the simulator's counts).
async fn measure_shadow(
    args: &ScaleArgs,
    ccm: &Path,
    files: &RunFiles<'_>,
    dir: &Path,
    http: &reqwest::Client,
    api: &str,
) -> anyhow::Result<Value> {
    let before = kube_counts(http, api).await?;
    let port = free_port()?;
    let log = dir.join("shadow.log");
    let started = Instant::now();
    let mut child = spawn_run(
        ccm,
        args,
        files,
        port,
        &["--shadow", "--shadow-grace=0s"],
        &log,
    )?;
    let metrics_url = format!("https://127.0.0.1:{port}/metrics");
    let deadline = started + args.timeout;
    // The first passes: every Service ensured and every node's metadata read once.
    let first_pass = loop {
        child.check_running("before its first passes were done")?;
        let text = match http.get(&metrics_url).send().await {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        let calls_of = |function: &str| {
            metric_sum_with(
                &text,
                "wasm_ccm_driver_calls_total",
                &format!("function=\"{function}\""),
            )
        };
        if calls_of("load-balancer.ensure") >= args.services as f64
            && calls_of("instances.instance-metadata") >= args.nodes as f64
        {
            break started.elapsed();
        }
        if Instant::now() > deadline {
            bail!(
                "the shadow's first passes did not finish in {:?}; see {}",
                args.timeout,
                log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let report = get_json(http, &format!("https://127.0.0.1:{port}/shadow")).await?;
    let peak = proc_mib(child.id(), "VmHWM");
    let after = kube_counts(http, api).await?;
    drop(child);
    Ok(json!({
        "shadow_first_pass_s": (first_pass.as_secs_f64() * 100.0).round() / 100.0,
        "shadow_peak_rss_mib": peak,
        "shadow_differences": report["differences"].as_array().map_or(0, Vec::len),
        "shadow_diverged": report["summary"]["diverged"],
        "shadow_kube_writes": mutations(&after).saturating_sub(mutations(&before)),
    }))
}

/// Bytes in MiB with one decimal.
fn mib(bytes: f64) -> f64 {
    (bytes / (1024.0 * 1024.0) * 10.0).round() / 10.0
}

/// Waits until a second passes without a Kubernetes write (at most `limit`); the counts then.
async fn settle(http: &reqwest::Client, api: &str, limit: Duration) -> anyhow::Result<Value> {
    let until = Instant::now() + limit;
    let mut last = kube_counts(http, api).await?;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = kube_counts(http, api).await?;
        if mutations(&now) == mutations(&last) || Instant::now() > until {
            return Ok(now);
        }
        last = now;
    }
}

pub(super) fn print_table(r: &Value) {
    println!(
        "{} nodes, {} LoadBalancer Services",
        r["nodes"], r["services"]
    );
    for (label, key) in [
        ("converged in (s)", "converge_s"),
        ("processes (--hybrid)", "processes"),
        (
            "run peak RSS, all processes (MiB)",
            "run_peak_rss_mib_total",
        ),
        (
            "run peak RSS at convergence (MiB)",
            "run_peak_rss_mib_at_converge",
        ),
        (
            "run peak RSS after the quiet period (MiB)",
            "run_peak_rss_mib_after_quiet",
        ),
        ("simulator peak RSS (MiB)", "sim_peak_rss_mib"),
        ("driver calls", "driver_calls"),
        ("bytes lowered into guests (MiB)", "lowered_mib"),
        ("Kubernetes requests", "kube_requests"),
        ("Kubernetes writes", "kube_writes"),
        ("writes after convergence, settling", "writes_settling"),
        ("writes in the quiet period", "writes_in_quiet"),
        ("shadow: first passes done in (s)", "shadow_first_pass_s"),
        ("shadow: peak RSS (MiB)", "shadow_peak_rss_mib"),
        (
            "shadow: would-be writes (false differences)",
            "shadow_differences",
        ),
        ("shadow: Kubernetes writes", "shadow_kube_writes"),
    ] {
        if !r[key].is_null() {
            println!("  {label:<44} {}", r[key]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_sums_add_every_series_of_one_name_only() {
        let text = "# HELP x\nwasm_ccm_driver_calls_total{driver=\"s\",function=\"a\"} 3\n\
                    wasm_ccm_driver_calls_total{driver=\"s\",function=\"b\"} 4\n\
                    wasm_ccm_driver_calls_totals 100\nwasm_ccm_driver_calls_total 1\n";
        assert_eq!(metric_sum(text, "wasm_ccm_driver_calls_total"), 8.0);
    }

    /// `--node-ports=false` asks for no node ports on every Service; by default the field is
    /// left to the simulator's default (true).
    #[test]
    fn without_node_ports_every_service_asks_for_none() {
        let without = seed(1, 3, false);
        let services = &without["items"].as_array().expect("items")[1..];
        assert_eq!(services.len(), 3);
        assert!(
            services
                .iter()
                .all(|s| s["spec"]["allocateLoadBalancerNodePorts"] == false)
        );
        let with = seed(1, 1, true);
        assert!(
            with["items"][1]["spec"]
                .get("allocateLoadBalancerNodePorts")
                .is_none()
        );
    }

    #[test]
    fn the_seed_and_the_inventory_agree_on_the_nodes() {
        let seed = seed(3, 2, true);
        let items = seed["items"].as_array().expect("items");
        assert_eq!(items.len(), 5);
        let config = cloud_config(3);
        let names: Vec<&str> = config["instances"]
            .as_array()
            .expect("instances")
            .iter()
            .map(|i| i["name"].as_str().expect("name"))
            .collect();
        assert_eq!(names, ["node-00000", "node-00001", "node-00002"]);
        assert_eq!(items[2]["metadata"]["name"], "node-00002");
    }
}
