//! Helpers shared by the end-to-end tests: the real product binary `wasm-ccm` as a child process,
//! bounded polling and readers for the objects in the Kubernetes API simulator.
#![allow(dead_code)]

pub(crate) mod conformance;
pub(crate) mod rbac;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wasm_ccm_sim::kit::DriverSetup;
use wasm_ccm_sim::kube::KubeSim;
use wasm_ccm_sim::static_cloud::StaticCloud;

pub(crate) const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
pub(crate) const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";
pub(crate) const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
pub(crate) const WAIT: Duration = Duration::from_secs(30);

pub(crate) fn localhost() -> std::net::SocketAddr {
    ([127, 0, 0, 1], 0).into()
}

/// A running `wasm-ccm run`; killed on drop. Its stderr goes to a file shown on failure.
pub(crate) struct Ccm {
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Ccm {
    pub(crate) fn start(
        sim: &KubeSim,
        wasm: &str,
        provider: &str,
        cloud_config: &Value,
        extra: &[&str],
    ) -> Ccm {
        Self::start_with_env(sim, wasm, provider, cloud_config, extra, &[])
    }

    /// Runs the driver a simulated cloud describes (the kit's [`DriverSetup`]: provider, driver,
    /// cloud-config, environment, egress, flags), so how a driver is wired to its simulator is
    /// written once, beside the simulator.
    pub(crate) fn start_setup(sim: &KubeSim, setup: &DriverSetup, extra: &[&str]) -> Ccm {
        let driver = wasm_ccm_drivers::all()
            .iter()
            .find(|(name, _)| *name == setup.driver)
            .map(|(_, path)| *path)
            .unwrap_or_else(|| panic!("no built driver named {}", setup.driver));
        let config = setup.config.clone().map_or(Value::Null, Value::String);
        let mut args: Vec<&str> = Vec::new();
        for egress in &setup.egress {
            args.extend(["--allow-egress", egress]);
        }
        args.extend(setup.extra_args.iter().map(String::as_str));
        args.extend(extra);
        let env: Vec<(&str, &str)> = setup
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        Self::start_with_env(sim, driver, setup.provider, &config, &args, &env)
    }

    /// Like [`Ccm::start`] (a `null` `cloud_config` passes no `--cloud-config`), with extra environment variables for the process (a driver's
    /// configuration, e.g. `CLOUDSCALE_ACCESS_TOKEN`).
    pub(crate) fn start_with_env(
        sim: &KubeSim,
        wasm: &str,
        provider: &str,
        cloud_config: &Value,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Ccm {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("cloud.json");
        // A JSON string is the file's text as is (e.g. CloudStack's INI); anything else is JSON.
        let text = match cloud_config {
            Value::String(raw) => raw.clone(),
            other => other.to_string(),
        };
        std::fs::write(&config, text).expect("config");
        let mut args: Vec<String> = Vec::new();
        if !extra.contains(&"--cache-dir") {
            args.extend([
                "--cache-dir".to_string(),
                dir.path().join("cache").display().to_string(),
            ]);
        }
        args.extend(
            ["run", "--cloud-provider", provider, "--driver", wasm]
                .iter()
                .map(|s| s.to_string()),
        );
        // `null`: no --cloud-config at all (drivers configured by environment variables).
        if !cloud_config.is_null() {
            args.extend(["--cloud-config".to_string(), config.display().to_string()]);
        }
        Self::launch(sim, dir, args, extra, env)
    }

    /// `wasm-ccm run --drivers-config` with `drivers` (a DriverSet document) as the file.
    pub(crate) fn start_set(
        sim: &KubeSim,
        drivers: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Ccm {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("drivers.yaml");
        std::fs::write(&file, drivers).expect("drivers config");
        let args = vec![
            "--cache-dir".to_string(),
            dir.path().join("cache").display().to_string(),
            "run".to_string(),
            "--drivers-config".to_string(),
            file.display().to_string(),
        ];
        Self::launch(sim, dir, args, extra, env)
    }

    /// Starts the product binary with `args` (up to the driver flags), the test timings and
    /// `extra`; its log goes to a file in `dir`.
    fn launch(
        sim: &KubeSim,
        dir: tempfile::TempDir,
        mut args: Vec<String>,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Ccm {
        let log = dir.path().join("ccm.log");
        let stderr = std::fs::File::create(&log).expect("log file");
        args.extend(
            [
                "--master",
                &sim.url(),
                "--node-monitor-period",
                "200ms",
                "--route-reconciliation-period",
                "300ms",
                "--kube-api-qps",
                "500",
                "--kube-api-burst",
                "1000",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        if !extra.contains(&"--secure-port") {
            args.extend(["--secure-port".to_string(), "0".to_string()]);
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Command::new(wasm_ccm_test_tools::product::product_binary())
            .args(&args)
            .env("WASM_CCM_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start wasm-ccm");
        Ccm {
            child,
            log,
            _dir: dir,
        }
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub(crate) fn signal(&self, sig: &str) {
        let _ = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status();
    }

    /// Waits for the process to exit and returns its code (`None` for a death by signal);
    /// panics when it is still running after the wait, so a hung process is never taken for
    /// one that exited.
    pub(crate) fn wait_exit(&mut self) -> Option<i32> {
        self.wait_status().code()
    }

    /// Waits for the process to exit and returns its status; panics when it is still running
    /// after the wait.
    pub(crate) fn wait_status(&mut self) -> std::process::ExitStatus {
        let started = Instant::now();
        while started.elapsed() < WAIT {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the process did not exit within {WAIT:?}");
    }
}

impl Drop for Ccm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("---- wasm-ccm log ----\n{}", self.log());
        }
    }
}

/// A port for `--secure-port` that no other socket of the machine is given meanwhile
/// ([`wasm_ccm_test_tools::ports`]).
pub(crate) fn free_port() -> u16 {
    wasm_ccm_test_tools::ports::reserve().unwrap_or_else(|e| panic!("{e}"))
}

/// A client for the CCM's serving port: HTTPS with the self-signed certificate it generates in
/// memory when a test passes no --cert-dir or --tls-cert-file (nothing to verify it against).
pub(crate) fn https_client() -> reqwest::Client {
    reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .expect("HTTPS client")
}

/// The text of `/metrics` on `127.0.0.1:port` over HTTPS, or empty while it does not answer
/// (or answers an error). The test CCMs talk to a simulator without RBAC, whose
/// SubjectAccessReviews allow everyone, so the anonymous scrape is authorised.
pub(crate) async fn scrape(port: u16) -> String {
    match https_client()
        .get(format!("https://127.0.0.1:{port}/metrics"))
        .send()
        .await
    {
        Ok(r) if r.status().is_success() => r.text().await.unwrap_or_default(),
        _ => String::new(),
    }
}

/// The value of the series that starts with `series` (name and labels as rendered), if any.
pub(crate) fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Polls `/metrics` until `series` reaches `value`.
pub(crate) async fn metric_becomes(port: u16, series: &str, value: f64) {
    let started = Instant::now();
    loop {
        let text = scrape(port).await;
        if metric(&text, series) == Some(value) {
            return;
        }
        assert!(
            started.elapsed() < WAIT,
            "timed out waiting for {series} = {value}; /metrics:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `/metrics` until `series` is at least `value` (a counter that must have moved).
pub(crate) async fn metric_at_least(port: u16, series: &str, value: f64) {
    let started = Instant::now();
    loop {
        let text = scrape(port).await;
        if metric(&text, series).is_some_and(|v| v >= value) {
            return;
        }
        assert!(
            started.elapsed() < WAIT,
            "timed out waiting for {series} >= {value}; /metrics:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `cond` until it holds; panics with `what` after the bound.
pub(crate) async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(started.elapsed() < WAIT, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) fn node(name: &str, provided_ip: Option<&str>, ready: bool) -> Value {
    let mut n = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"taints": [{"key": UNINITIALIZED, "value": "true", "effect": "NoSchedule"}]},
        "status": {
            "addresses": [{"type": "Hostname", "address": format!("{name}.kubelet")}],
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
        },
    });
    if let Some(ip) = provided_ip {
        n["metadata"]["annotations"] = json!({"alpha.kubernetes.io/provided-node-ip": ip});
    }
    n
}

/// Whether the node exists and no longer carries the uninitialized taint.
pub(crate) fn initialised(sim: &KubeSim, name: &str) -> bool {
    sim.get("nodes", None, name)
        .is_some_and(|n| !has_taint(&n, UNINITIALIZED))
}

/// Waits until the node's `status.addresses` are `expected`: the controller writes them with a
/// status update of their own, which may land after the taint is gone.
pub(crate) async fn addresses_become(sim: &KubeSim, name: &str, expected: &Value) {
    eventually(&format!("addresses of {name}"), || {
        sim.get("nodes", None, name)
            .is_some_and(|n| &n["status"]["addresses"] == expected)
    })
    .await;
}

pub(crate) fn has_taint(n: &Value, key: &str) -> bool {
    n["spec"]["taints"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["key"] == key))
}

pub(crate) fn events(sim: &KubeSim, object: &str, reason: &str) -> Vec<Value> {
    sim.list("events.events.k8s.io")
        .into_iter()
        .filter(|e| e["regarding"]["name"] == object && e["reason"] == reason)
        .collect()
}

pub(crate) fn set_ready(sim: &KubeSim, name: &str, ready: bool) {
    sim.modify("nodes", None, name, |n| {
        n["status"]["conditions"] =
            json!([{"type": "Ready", "status": if ready { "True" } else { "Unknown" }}]);
    })
    .expect("set readiness");
}

pub(crate) fn service(sim: &KubeSim, name: &str) -> Option<Value> {
    sim.get("services", Some("default"), name)
}

pub(crate) fn ingress_ip(svc: &Value) -> Option<String> {
    svc["status"]["loadBalancer"]["ingress"][0]["ip"]
        .as_str()
        .map(str::to_string)
}

pub(crate) fn has_finalizer(svc: &Value) -> bool {
    svc["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == FINALIZER))
}

/// An instance of the static driver's inventory.
pub(crate) fn instance(name: &str, ip: &str) -> Value {
    json!({
        "name": name, "id": format!("id-{name}"), "type": "s1.small", "zone": "z1", "region": "r1",
        "addresses": [{"type": "InternalIP", "address": ip}, {"type": "ExternalIP", "address": "203.0.113.1"}],
        "labels": {"example.com/rack": "r7", "node.kubernetes.io/sneaky": "no"},
    })
}

/// The static driver's inventory service with `instances`, and a cloud config pointing at it.
pub(crate) async fn static_cloud(instances: Vec<Value>) -> (StaticCloud, Value) {
    let cloud = StaticCloud::start(localhost(), instances, Some("t0ken".into()))
        .await
        .expect("static cloud");
    let config = json!({
        "region": "r0", "zone": "z0",
        "loadBalancer": {"addresses": ["192.0.2.16/29"]},
        "inventoryUrl": cloud.url(),
        "inventoryToken": "t0ken",
    });
    (cloud, config)
}

/// The shadow's report, from its `/shadow` endpoint (empty until it answers).
pub(crate) async fn shadow_report(port: u16) -> Value {
    match https_client()
        .get(format!("https://127.0.0.1:{port}/shadow"))
        .send()
        .await
    {
        Ok(r) if r.status().is_success() => r.json().await.unwrap_or(Value::Null),
        _ => Value::Null,
    }
}

/// Polls the report until `cond` holds.
pub(crate) async fn report_until(port: u16, what: &str, cond: impl Fn(&Value) -> bool) -> Value {
    let started = std::time::Instant::now();
    loop {
        let report = shadow_report(port).await;
        if cond(&report) {
            return report;
        }
        assert!(
            started.elapsed() < WAIT,
            "timed out waiting for: {what}; last report: {report:#}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// [`report_until`] with a longer bound, for a wait that includes another process starting
/// and the shadow's next recheck (up to a tenth of its grace later).
pub(crate) async fn report_until_long(
    port: u16,
    what: &str,
    cond: impl Fn(&Value) -> bool,
) -> Value {
    let started = std::time::Instant::now();
    loop {
        let report = shadow_report(port).await;
        if cond(&report) {
            return report;
        }
        assert!(
            started.elapsed() < 4 * WAIT,
            "timed out waiting for: {what}; last report: {report:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `wasm-ccm shadow report` against the shadow's endpoint: (exit code, stdout).
pub(crate) fn shadow_report_cli(port: u16, format: &str) -> (Option<i32>, String) {
    let out = std::process::Command::new(wasm_ccm_test_tools::product::product_binary())
        .args([
            "shadow",
            "report",
            "--from",
            &format!("https://127.0.0.1:{port}/shadow"),
            "--insecure-skip-tls-verify",
            "--format",
            format,
        ])
        .output()
        .expect("run wasm-ccm shadow report");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Driver calls of `function` so far, from `/metrics`.
pub(crate) async fn calls(port: u16, function: &str) -> f64 {
    let text = scrape(port).await;
    text.lines()
        .filter(|l| {
            l.starts_with("wasm_ccm_driver_calls_total{")
                && l.contains(&format!("function=\"{function}\""))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Kubernetes writes (anything but GET) the simulator received after request `since`. The
/// serving port's token and access reviews are questions, not writes: they persist nothing.
pub(crate) fn kube_writes_since(sim: &KubeSim, since: u64) -> Vec<String> {
    sim.requests()
        .into_iter()
        .filter(|r| r.seq > since && r.method != "GET")
        .filter(|r| {
            !r.path.ends_with("/tokenreviews") && !r.path.ends_with("/subjectaccessreviews")
        })
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

pub(crate) fn last_seq(sim: &KubeSim) -> u64 {
    sim.requests().iter().map(|r| r.seq).max().unwrap_or(0)
}

/// Non-GET requests after `since` whose User-Agent marks a shadow run (`…; shadow)`), the
/// serving port's token and access reviews aside.
pub(crate) fn shadow_writes_since(sim: &KubeSim, since: u64) -> Vec<String> {
    sim.requests()
        .into_iter()
        .filter(|r| r.seq > since && r.method != "GET")
        .filter(|r| {
            r.user_agent
                .as_deref()
                .is_some_and(|a| a.contains("; shadow)"))
        })
        .filter(|r| !r.path.ends_with("reviews"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

/// Nodes answered from the driver's instance listing (contract 0.2.2) instead of a call each.
async fn listed_lookups(port: u16) -> f64 {
    let text = scrape(port).await;
    text.lines()
        .filter(|l| {
            l.starts_with("wasm_ccm_instance_listing_lookups_total{")
                && l.contains("answer=\"listed\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Waits until a shadow on `port` has ensured `services` Services and read `nodes` nodes'
/// metadata at least once (its first passes), by a call each or from the instance listing.
pub(crate) async fn shadow_first_passes(port: u16, services: f64, nodes: f64) {
    let started = Instant::now();
    while calls(port, "load-balancer.ensure").await < services
        || calls(port, "instances.instance-metadata").await + listed_lookups(port).await < nodes
    {
        assert!(
            started.elapsed() < WAIT,
            "the shadow's first passes did not run"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
