//! Credentials never enter the guest (issue 31): each shipped cloud driver runs every call it
//! exports against its simulator with canary credentials, and after each call every live linear
//! memory of the driver's instances is scanned for every canary in every form it could take
//! (raw, Base64 at each alignment, percent-encoded, JSON-escaped, XORed into an HMAC pad; see
//! `wasm_ccm_test_tools::guest_memory`).
//!
//! The engine allocates guest memories through the test's recording memory creator
//! (`EngineOptions::memory_creator`), so the scan sees exactly what the guests hold.
//!
//! On a host that hands drivers their credentials in clear (environment variables, the
//! cloud-config), these tests fail, naming the first call after which each canary was in
//! memory; they pass once the host gives drivers placeholders and puts the real values in only
//! in its own HTTP client.

mod common;

use std::sync::Arc;

use wasm_ccm_drivers::{CLOUDSCALE_DRIVER, CLOUDSTACK_DRIVER, PHOENIXNAP_DRIVER};
use wasm_ccm_runtime::types::{AddressType, NodeAddress, Route};
use wasm_ccm_runtime::{
    CacheOutcome, CallScope, Compiler, Driver, DriverOptions, EngineOptions, Outcome, Runtime,
    RuntimeOptions,
};
use wasm_ccm_sim::kit::{self, SimCloud, SimNode, StartOptions};
use wasm_ccm_sim::phoenixnap::PhoenixnapSim;
use wasm_ccm_test_tools::guest_memory::{Canary, Finding, Needles, RecordingMemories};

/// A cloud, its driver and the canary credentials the simulator is started with.
struct Subject {
    /// The simulated cloud's name in `kit::CLOUDS`.
    cloud: &'static str,
    /// The driver's `.wasm`.
    driver: &'static str,
    /// The credential the simulator checks (token, client secret, secret key), by name.
    secret: (&'static str, &'static str),
    /// The account it belongs to (client ID, API key), for clouds that have one.
    account: Option<(&'static str, &'static str)>,
}

impl Subject {
    fn canaries(&self) -> Vec<Canary> {
        std::iter::once(self.secret)
            .chain(self.account)
            .map(|(name, value)| Canary::new(name, value))
            .collect()
    }
}

/// Looks for the canaries after each call and keeps what it found.
struct Scan {
    cloud: &'static str,
    memories: Arc<RecordingMemories>,
    canaries: Vec<Canary>,
    /// The simulator, to read the OAuth tokens it issued (PhoenixNAP's).
    sim: Box<dyn SimCloud>,
    /// What each scan found, in call order.
    findings: Vec<(&'static str, Finding)>,
    /// The calls scanned, in order.
    calls: Vec<&'static str>,
}

impl Scan {
    /// Scans every live memory after `call`.
    fn after(&mut self, call: &'static str) {
        let mut canaries = self.canaries.clone();
        if let Some(pnap) = self.sim.as_any().downcast_ref::<PhoenixnapSim>() {
            // A bearer token is a credential too: whoever holds it acts as the client until it
            // expires.
            for (i, token) in pnap.issued_tokens().into_iter().enumerate() {
                canaries.push(Canary::new(format!("OAuth access token #{i}"), token));
            }
        }
        assert!(
            self.memories.live() > 0,
            "{}: no live guest memory after {call}: the engine does not allocate through the \
             recording creator",
            self.cloud
        );
        // SAFETY: `call` has returned and nothing else runs this driver's instances: the
        // runtime is this test's own, Cranelift only (no background tier-up swaps code or makes
        // instances), and the pool makes instances only inside calls.
        let found = unsafe { self.memories.scan(&Needles::new(&canaries)) };
        self.findings.extend(found.into_iter().map(|f| (call, f)));
        self.calls.push(call);
    }

    /// Fails if any canary was found, with one line per canary and encoding: the first call
    /// after which it was in memory (where, how often), then the later calls it stayed for.
    fn assert_clean(&self) {
        let mut lines: Vec<(String, Vec<&str>)> = Vec::new();
        let mut keys: Vec<(&str, &str)> = Vec::new();
        for (call, f) in &self.findings {
            let key = (f.canary.as_str(), f.encoding.as_str());
            match keys.iter().position(|k| *k == key) {
                Some(i) => lines[i].1.push(call),
                None => {
                    keys.push(key);
                    lines.push((format!("{f}, first after {call}"), Vec::new()));
                }
            }
        }
        let report: Vec<String> = lines
            .into_iter()
            .map(|(first, later)| match later.is_empty() {
                true => first,
                false => format!("{first}; still after {}", later.join(", ")),
            })
            .collect();
        assert!(
            report.is_empty(),
            "{}: credentials in guest memory (calls scanned: {}):\n  {}",
            self.cloud,
            self.calls.join(", "),
            report.join("\n  ")
        );
    }
}

/// A runtime of the test's own whose engine allocates guest memories through `memories`.
fn runtime(memories: &Arc<RecordingMemories>) -> Runtime {
    runtime_caching(memories, None)
}

fn runtime_caching(
    memories: &Arc<RecordingMemories>,
    cache_dir: Option<std::path::PathBuf>,
) -> Runtime {
    Runtime::new(RuntimeOptions {
        engine: EngineOptions {
            compiler: Compiler::Cranelift,
            memory_creator: Some(memories.clone()),
            ..Default::default()
        },
        cache_dir,
    })
    .expect("a runtime with a recording memory creator")
}

/// A recording engine's compile cache works: what it stored, it loads again and runs (its
/// artifacts are its own: the settings a memory creator needs change the engine's key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_engine_loads_what_it_cached() {
    let dir = tempfile::tempdir().expect("a cache directory");
    let memories = RecordingMemories::new();
    let path = std::path::Path::new(wasm_ccm_drivers::STATIC_DRIVER);
    let first = runtime_caching(&memories, Some(dir.path().to_path_buf()))
        .compile_file(path)
        .await
        .expect("compiles");
    assert_eq!(first.cache, CacheOutcome::Miss);
    let runtime = runtime_caching(&memories, Some(dir.path().to_path_buf()));
    let second = runtime
        .compile_file(path)
        .await
        .expect("loads from the cache");
    assert_eq!(second.cache, CacheOutcome::Hit);
    let driver = runtime
        .load(&second, DriverOptions::default())
        .await
        .expect("the cached build loads");
    ok(
        "static",
        "provider.info",
        driver.info_call(&CallScope::default()).await,
    );
    assert!(
        memories.live() > 0,
        "its memories are the recording creator's"
    );
}

/// The value of a call that must succeed for the scan after it to mean anything.
fn ok<T>(cloud: &str, call: &str, outcome: Outcome<T>) -> T {
    match outcome.result {
        Ok(v) => v,
        Err(e) => panic!("{cloud}: {call} failed: {e}"),
    }
}

/// The Node a kubelet on `seeded` registers: its name and InternalIP, no provider ID yet.
fn kubelet_node(seeded: &SimNode) -> wasm_ccm_runtime::types::Node {
    let mut node = common::node(&seeded.name);
    node.addresses = vec![NodeAddress {
        kind: AddressType::InternalIp,
        address: seeded.internal_ip.clone(),
    }];
    node
}

/// Starts the subject's simulator with its canaries and two instances, loads the driver with
/// the simulator's own wiring (`SimCloud::driver_setup`), runs every call kind the driver
/// exports and scans after each, then asserts that no scan found anything.
async fn every_call_keeps_credentials_out(subject: Subject) {
    let cloud = subject.cloud;
    let memories = RecordingMemories::new();
    let runtime = runtime(&memories);
    let seeded: Vec<SimNode> = (0..2).map(SimNode::numbered).collect();
    let (sim, _ids) = kit::start_with_nodes(
        cloud,
        StartOptions {
            secret: Some(subject.secret.1.into()),
            account: subject.account.map(|(_, v)| v.to_string()),
            ..Default::default()
        },
        &seeded,
    )
    .await
    .expect("the simulator starts");
    let setup = sim.driver_setup();
    let mut opts = DriverOptions {
        config: setup.config.unwrap_or_default().into_bytes(),
        env: setup.env,
        egress: Some(setup.egress),
        ..Default::default()
    };
    // PhoenixNAP tags IP blocks with it; the others ignore it.
    opts.context.cluster_id = "5e7a1c9d-2b4f-4e8a-9c3d-1f6b8a2e4d70".into();
    let compiled = runtime
        .compile_file(std::path::Path::new(subject.driver))
        .await
        .expect("the driver compiles");
    let mut scan = Scan {
        cloud,
        memories,
        canaries: subject.canaries(),
        sim,
        findings: Vec::new(),
        calls: Vec::new(),
    };

    // `load` runs `provider.info` and `provider.init` (the canaries are in init's environment
    // or configuration).
    let driver: Driver = runtime
        .load(&compiled, opts)
        .await
        .unwrap_or_else(|e| panic!("{cloud}: the driver does not load: {e}"));
    scan.after("provider.init");
    let scope = CallScope::object("default/web");

    ok(cloud, "provider.info", driver.info_call(&scope).await);
    scan.after("provider.info");
    ok(
        cloud,
        "provider.housekeeping",
        driver.housekeeping(&scope).await,
    );
    scan.after("provider.housekeeping");

    let exports = driver.compiled().surface.exports;
    let mut nodes: Vec<_> = seeded.iter().map(kubelet_node).collect();
    if exports.instances {
        let meta = ok(
            cloud,
            "instances.instance-metadata",
            driver.instance_metadata(&nodes[0], &scope).await,
        );
        scan.after("instances.instance-metadata");
        nodes[0].provider_id = meta.provider_id;
        let exists = ok(
            cloud,
            "instances.instance-exists",
            driver.instance_exists(&nodes[0], &scope).await,
        );
        assert!(exists, "{cloud}: the seeded instance does not exist");
        scan.after("instances.instance-exists");
        ok(
            cloud,
            "instances.instance-shutdown",
            driver.instance_shutdown(&nodes[0], &scope).await,
        );
        scan.after("instances.instance-shutdown");
    }

    if exports.load_balancer {
        let service = {
            let mut s = common::lb_service("web", "4a0ed5b2-8a3c-4f1e-9d2b-6c7e8f9a0b1c");
            s.ports = vec![wasm_ccm_runtime::types::ServicePort {
                name: "http".into(),
                protocol: wasm_ccm_runtime::types::Protocol::Tcp,
                port: 80,
                node_port: 30080,
            }];
            s
        };
        ok(
            cloud,
            "load-balancer.name",
            driver.load_balancer_name(&service, &scope).await,
        );
        scan.after("load-balancer.name");
        ok(
            cloud,
            "load-balancer.get",
            driver.load_balancer_get(&service, &scope).await,
        );
        scan.after("load-balancer.get");
        let ensured = ok(
            cloud,
            "load-balancer.ensure",
            driver.load_balancer_ensure(&service, &nodes, &scope).await,
        );
        scan.after("load-balancer.ensure");
        let service = common::apply(service, &ensured);
        ok(
            cloud,
            "load-balancer.update",
            driver.load_balancer_update(&service, &nodes, &scope).await,
        );
        scan.after("load-balancer.update");
        ok(
            cloud,
            "load-balancer.delete",
            driver.load_balancer_delete(&service, &scope).await,
        );
        scan.after("load-balancer.delete");
    }

    if exports.routes {
        let route = Route {
            name: String::new(),
            target_node: nodes[0].name.clone(),
            target_node_addresses: nodes[0].addresses.clone(),
            destination_cidr: "10.244.0.0/24".into(),
            blackhole: false,
        };
        ok(cloud, "routes.list", driver.routes_list(&scope).await);
        scan.after("routes.list");
        ok(
            cloud,
            "routes.create",
            driver.routes_create("guest-memory", &route, &scope).await,
        );
        scan.after("routes.create");
        ok(
            cloud,
            "routes.delete",
            driver.routes_delete(&route, &scope).await,
        );
        scan.after("routes.delete");
    }

    scan.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloudscale_keeps_no_credential_in_guest_memory() {
    every_call_keeps_credentials_out(Subject {
        cloud: "cloudscale",
        driver: CLOUDSCALE_DRIVER,
        secret: (
            "cloudscale access token",
            "canary-token-Zq8Vw3kP9rTm2XbN7cLd",
        ),
        account: None,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloudstack_keeps_no_credential_in_guest_memory() {
    every_call_keeps_credentials_out(Subject {
        cloud: "cloudstack",
        driver: CLOUDSTACK_DRIVER,
        secret: (
            "CloudStack secret-key",
            "canary-secretkey-Bv5Nm8Qw2Er4Ty6Ui9Op1As3Df7Gh0Jk_lZxCv",
        ),
        account: Some((
            "CloudStack api-key",
            "canary-apikey-Hq4Ts8Wn2Ry6Ue1Io5Pa3Sd7Fg9Jk0Lz_mXcVb",
        )),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phoenixnap_keeps_no_credential_in_guest_memory() {
    every_call_keeps_credentials_out(Subject {
        cloud: "phoenixnap",
        driver: PHOENIXNAP_DRIVER,
        secret: (
            "PhoenixNAP client secret",
            "canary-client-secret-Wq3Er5Ty7Ui9Op2As4Df6Gh8",
        ),
        account: Some((
            "PhoenixNAP client ID",
            "canary-client-6f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b",
        )),
    })
    .await;
}
