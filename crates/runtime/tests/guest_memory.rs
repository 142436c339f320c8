//! Credentials never enter the guest (issue 31): each shipped cloud driver runs every call it
//! exports against its simulator with canary credentials, and after each call every live linear
//! memory of the driver's instances is scanned for every canary in every form it could take
//! (raw, Base64 at each alignment, percent-encoded, JSON-escaped, XORed into an HMAC pad; see
//! `wasm_ccm_test_tools::guest_memory`).
//!
//! The engine allocates guest memories through the test's recording memory creator
//! (`EngineOptions::memory_creator`), so the scan sees exactly what the guests hold. Each scan
//! has a positive control: it must also find what the guest is known to hold, the simulator's
//! URL (from its configuration) and every placeholder the guest sent or got (recorded by an HTTP
//! interceptor), or the test fails saying the scan is blind. The driver's exports are asserted,
//! so no call kind is skipped unnoticed.
//!
//! On a host that hands drivers their credentials in clear (environment variables, the
//! cloud-config), these tests fail, naming the first call after which each canary was in
//! memory; they pass once the host gives drivers placeholders and puts the real values in only
//! in its own HTTP client.

mod common;

use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use wasm_ccm_drivers::{CLOUDSCALE_DRIVER, CLOUDSTACK_DRIVER, PHOENIXNAP_DRIVER};
use wasm_ccm_runtime::http::{Forward, HttpInterceptor, Intercepted};
use wasm_ccm_runtime::secrets::{PLACEHOLDER_LEN, PLACEHOLDER_PREFIX};
use wasm_ccm_runtime::types::{AddressType, NodeAddress, Route};
use wasm_ccm_runtime::{
    CacheOutcome, CallScope, Compiler, Driver, DriverOptions, EngineOptions, Outcome, Runtime,
    RuntimeOptions,
};
use wasm_ccm_runtime::{InitInput, http};
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
    /// The interfaces the driver exports (`Exports::names`): the calls of each are run and
    /// scanned, so a driver that exports less (or more) fails the test instead of leaving calls
    /// unscanned.
    exports: &'static [&'static str],
}

impl Subject {
    fn canaries(&self) -> Vec<Canary> {
        std::iter::once(self.secret)
            .chain(self.account)
            .map(|(name, value)| Canary::new(name, value))
            .collect()
    }
}

/// The placeholders the guest sent or was given (in URLs, headers and bodies both ways), in the
/// order first seen: what the guest is known to hold, for the scan's positive control.
#[derive(Default)]
struct Placeholders {
    seen: Mutex<Vec<String>>,
    /// How many requests the guest made.
    requests: Mutex<usize>,
}

impl Placeholders {
    fn note(&self, text: &[u8]) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let prefix = PLACEHOLDER_PREFIX.as_bytes();
        for at in 0..text.len().saturating_sub(PLACEHOLDER_LEN - 1) {
            let candidate = &text[at..at + PLACEHOLDER_LEN];
            if candidate.starts_with(prefix)
                && candidate[prefix.len()..]
                    .iter()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
            {
                let p = String::from_utf8_lossy(candidate).into_owned();
                if !seen.contains(&p) {
                    seen.push(p);
                }
            }
        }
    }

    fn seen(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn requests(&self) -> usize {
        *self.requests.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl HttpInterceptor for Placeholders {
    fn intercept<'a>(&'a self, forward: Forward<'a>) -> Intercepted<'a> {
        Box::pin(async move {
            // The request as the guest made it (placeholders, never credentials).
            let request = forward.request().clone();
            *self.requests.lock().unwrap_or_else(PoisonError::into_inner) += 1;
            self.note(request.url.as_bytes());
            for (_, value) in &request.headers {
                self.note(value.as_bytes());
                // HTTP Basic credentials travel Base64-encoded.
                if let Some(encoded) = value.strip_prefix("Basic ")
                    && let Ok(pair) = STANDARD.decode(encoded.trim())
                {
                    self.note(&pair);
                }
            }
            self.note(&request.body);
            let response = forward.send().await;
            if let Ok(r) = &response {
                // What the guest gets back (a sealed OAuth token is a placeholder).
                for (_, value) in &r.headers {
                    self.note(value.as_bytes());
                }
                self.note(&r.body);
            }
            response
        })
    }
}

/// Looks for the canaries after each call and keeps what it found.
struct Scan {
    cloud: &'static str,
    memories: Arc<RecordingMemories>,
    canaries: Vec<Canary>,
    /// The simulator, to read the OAuth tokens it issued (PhoenixNAP's).
    sim: Box<dyn SimCloud>,
    /// What the guest sent and got: the placeholders it holds.
    placeholders: Arc<Placeholders>,
    /// Placeholders already shown to be found by a scan.
    controlled: Vec<String>,
    /// What each scan found, in call order.
    findings: Vec<(&'static str, Finding)>,
    /// The calls scanned, in order.
    calls: Vec<&'static str>,
    /// The most OAuth tokens one scan looked for (PhoenixNAP's).
    tokens_scanned: usize,
}

/// The name under which a positive control's needle is looked for.
const CONTROL: &str = "control: ";

impl Scan {
    /// Scans every live memory after `call`: for the canaries, and, as a positive control, for
    /// what the guest is known to hold (the simulator's URL, from its configuration; each
    /// placeholder it sent or got during the calls since the last scan). A scan that does not
    /// find those would not find a credential either.
    fn after(&mut self, call: &'static str) {
        let mut canaries = self.canaries.clone();
        if let Some(pnap) = self.sim.as_any().downcast_ref::<PhoenixnapSim>() {
            // A bearer token is a credential too: whoever holds it acts as the client until it
            // expires.
            let tokens = pnap.issued_tokens();
            assert!(
                self.placeholders.requests() == 0 || !tokens.is_empty(),
                "{}: the driver made {} requests by {call} but the simulator issued no OAuth \
                 token, so the token canaries would be empty",
                self.cloud,
                self.placeholders.requests()
            );
            self.tokens_scanned = self.tokens_scanned.max(tokens.len());
            for (i, token) in tokens.into_iter().enumerate() {
                canaries.push(Canary::new(format!("OAuth access token #{i}"), token));
            }
        }
        let url = self.sim.url();
        let new: Vec<String> = self
            .placeholders
            .seen()
            .into_iter()
            .filter(|p| !self.controlled.contains(p))
            .collect();
        let mut controls = vec![format!("{CONTROL}the simulator URL")];
        canaries.push(Canary::new(controls[0].clone(), url.clone()));
        for (i, p) in new.iter().enumerate() {
            let name = format!("{CONTROL}placeholder #{}", self.controlled.len() + i);
            canaries.push(Canary::new(name.clone(), p.clone()));
            controls.push(name);
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
        let (control, found): (Vec<Finding>, Vec<Finding>) = found
            .into_iter()
            .partition(|f| f.canary.starts_with(CONTROL));
        let missing: Vec<&String> = controls
            .iter()
            .filter(|name| {
                !control
                    .iter()
                    .any(|f| f.canary == **name && f.encoding == "raw")
            })
            .collect();
        assert!(
            missing.is_empty(),
            "{}: after {call} the scan of the guest memories does not find what the guest is \
             known to hold ({missing:?}; the URL is {url}), so it would not find a credential \
             either: the recorded memories are not the driver's",
            self.cloud
        );
        self.controlled.extend(new);
        self.findings.extend(found.into_iter().map(|f| (call, f)));
        self.calls.push(call);
    }

    /// Fails if any canary was found, with one line per canary and encoding: the first call
    /// after which it was in memory (where, how often), then the later calls it stayed for.
    /// Fails too if a collection the scans relied on stayed empty: no placeholder ever seen (the
    /// control covered the URL only), or, on PhoenixNAP, no OAuth token ever looked for.
    fn assert_clean(&self) {
        assert!(
            !self.controlled.is_empty(),
            "{}: the guest sent and got no placeholder in any call (calls scanned: {}), so no \
             scan was shown to find one",
            self.cloud,
            self.calls.join(", ")
        );
        if self.sim.as_any().is::<PhoenixnapSim>() {
            assert!(
                self.tokens_scanned > 0,
                "{}: the simulator issued no OAuth token in any call, so no scan looked for one",
                self.cloud
            );
        }
        println!(
            "{}: {} scans, each found the simulator URL; {} placeholders found after the call \
             that used them; at most {} OAuth tokens looked for",
            self.cloud,
            self.calls.len(),
            self.controlled.len(),
            self.tokens_scanned
        );
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
    let placeholders = Arc::new(Placeholders::default());
    let mut opts = DriverOptions {
        init: InitInput {
            config: setup.config.unwrap_or_default().into_bytes(),
            env: setup.env,
            ..Default::default()
        },
        http: http::Config {
            egress: Some(
                wasm_ccm_runtime::EgressPolicy::parse(&setup.egress).expect("egress grants"),
            ),
            interceptor: Some(placeholders.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    // PhoenixNAP tags IP blocks with it; the others ignore it.
    opts.init.context.cluster_id = "5e7a1c9d-2b4f-4e8a-9c3d-1f6b8a2e4d70".into();
    let compiled = runtime
        .compile_file(std::path::Path::new(subject.driver))
        .await
        .expect("the driver compiles");
    let mut scan = Scan {
        cloud,
        memories,
        canaries: subject.canaries(),
        sim,
        placeholders,
        controlled: Vec::new(),
        findings: Vec::new(),
        calls: Vec::new(),
        tokens_scanned: 0,
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

    // The calls below run per exported interface: a driver that stopped exporting one (or
    // started exporting another) must fail here, not leave calls unscanned.
    let exports = driver.compiled().surface.exports;
    assert_eq!(
        exports.names(),
        subject.exports,
        "{cloud}: the driver's exports differ from the ones this test runs calls of; update \
         `Subject::exports` and the calls if the driver changed on purpose"
    );
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
        exports: &["provider", "instances", "load-balancer"],
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
        exports: &["provider", "instances", "load-balancer"],
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
        exports: &["provider", "instances", "load-balancer"],
    })
    .await;
}
