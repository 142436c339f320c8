//! Helpers shared by the end-to-end tests: the real `wasm-ccm` binary as a child process,
//! bounded polling and readers for the objects in the Kubernetes API simulator.
#![allow(dead_code)]

pub mod rbac;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wasm_ccm_sim::kube::KubeSim;
use wasm_ccm_sim::static_cloud::StaticCloud;

pub const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
pub const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";
pub const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
pub const WAIT: Duration = Duration::from_secs(30);

pub fn localhost() -> std::net::SocketAddr {
    ([127, 0, 0, 1], 0).into()
}

/// A running `wasm-ccm run`; killed on drop. Its stderr goes to a file shown on failure.
pub struct Ccm {
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Ccm {
    pub fn start(
        sim: &KubeSim,
        plugin: &str,
        provider: &str,
        cloud_config: &Value,
        extra: &[&str],
    ) -> Ccm {
        Self::start_with_env(sim, plugin, provider, cloud_config, extra, &[])
    }

    /// Like [`Ccm::start`] (a `null` `cloud_config` passes no `--cloud-config`), with extra environment variables for the process (a driver's
    /// configuration, e.g. `CLOUDSCALE_ACCESS_TOKEN`).
    pub fn start_with_env(
        sim: &KubeSim,
        plugin: &str,
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
        let log = dir.path().join("ccm.log");
        let stderr = std::fs::File::create(&log).expect("log file");
        let mut args: Vec<String> = Vec::new();
        if !extra.contains(&"--cache-dir") {
            args.extend([
                "--cache-dir".to_string(),
                dir.path().join("cache").display().to_string(),
            ]);
        }
        args.extend(
            [
                "run",
                "--cloud-provider",
                provider,
                "--plugin",
                plugin,
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
        // `null`: no --cloud-config at all (drivers configured by environment variables).
        if !cloud_config.is_null() {
            args.extend(["--cloud-config".to_string(), config.display().to_string()]);
        }
        if !extra.contains(&"--secure-port") {
            args.extend(["--secure-port".to_string(), "0".to_string()]);
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Command::new(env!("CARGO_BIN_EXE_wasm-ccm"))
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

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn signal(&self, sig: &str) {
        let _ = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status();
    }

    /// Waits for the process to exit and returns its code.
    pub fn wait_exit(&mut self) -> Option<i32> {
        let started = Instant::now();
        while started.elapsed() < WAIT {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
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

/// A port free a moment ago, for `--secure-port`.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A client for the CCM's serving port: HTTPS with the self-signed certificate it generates in
/// memory when a test passes no --cert-dir or --tls-cert-file (nothing to verify it against).
pub fn https_client() -> reqwest::Client {
    reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .expect("HTTPS client")
}

/// The text of `/metrics` on `127.0.0.1:port` over HTTPS, or empty while it does not answer
/// (or answers an error). The test CCMs talk to a simulator without RBAC, whose
/// SubjectAccessReviews allow everyone, so the anonymous scrape is authorised.
pub async fn scrape(port: u16) -> String {
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
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Polls `/metrics` until `series` reaches `value`.
pub async fn metric_becomes(port: u16, series: &str, value: f64) {
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

/// Polls `cond` until it holds; panics with `what` after the bound.
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(started.elapsed() < WAIT, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn node(name: &str, provided_ip: Option<&str>, ready: bool) -> Value {
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
pub fn initialised(sim: &KubeSim, name: &str) -> bool {
    sim.get("nodes", None, name)
        .is_some_and(|n| !has_taint(&n, UNINITIALIZED))
}

/// Waits until the node's `status.addresses` are `expected`: the controller writes them with a
/// status update of their own, which may land after the taint is gone.
pub async fn addresses_become(sim: &KubeSim, name: &str, expected: &Value) {
    eventually(&format!("addresses of {name}"), || {
        sim.get("nodes", None, name)
            .is_some_and(|n| &n["status"]["addresses"] == expected)
    })
    .await;
}

pub fn has_taint(n: &Value, key: &str) -> bool {
    n["spec"]["taints"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["key"] == key))
}

pub fn events(sim: &KubeSim, object: &str, reason: &str) -> Vec<Value> {
    sim.list("events.events.k8s.io")
        .into_iter()
        .filter(|e| e["regarding"]["name"] == object && e["reason"] == reason)
        .collect()
}

pub fn set_ready(sim: &KubeSim, name: &str, ready: bool) {
    sim.modify("nodes", None, name, |n| {
        n["status"]["conditions"] =
            json!([{"type": "Ready", "status": if ready { "True" } else { "Unknown" }}]);
    })
    .expect("set readiness");
}

pub fn service(sim: &KubeSim, name: &str) -> Option<Value> {
    sim.get("services", Some("default"), name)
}

pub fn ingress_ip(svc: &Value) -> Option<String> {
    svc["status"]["loadBalancer"]["ingress"][0]["ip"]
        .as_str()
        .map(str::to_string)
}

pub fn has_finalizer(svc: &Value) -> bool {
    svc["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == FINALIZER))
}

/// An instance of the static driver's inventory.
pub fn instance(name: &str, ip: &str) -> Value {
    json!({
        "name": name, "id": format!("id-{name}"), "type": "s1.small", "zone": "z1", "region": "r1",
        "addresses": [{"type": "InternalIP", "address": ip}, {"type": "ExternalIP", "address": "203.0.113.1"}],
        "labels": {"example.com/rack": "r7", "node.kubernetes.io/sneaky": "no"},
    })
}

/// The static driver's inventory service with `instances`, and a cloud config pointing at it.
pub async fn static_cloud(instances: Vec<Value>) -> (StaticCloud, Value) {
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
