//! Compiler tiers (a bench binary, not a timed test): cold load to the first call with Cranelift
//! alone and with the tiered host (Winch first, Cranelift swapped in behind), how long until the
//! swap, cached load, hot reload of a new version, and the warm-call cost on Winch code, on
//! Cranelift code and on a tiered driver after its swap. For the Rust static driver, the three
//! cloud drivers (each against its simulator on loopback) and the Python and JavaScript static
//! drivers.
//!
//! Run: `cargo bench -p wasm-ccm-runtime --bench tiers`. Prints two Markdown tables of medians.
//! `BENCH_DRIVERS=static,cloudscale,phoenixnap,cloudstack,python,js` picks drivers;
//! `BENCH_ROUNDS` sets the cold rounds (default 5 for Rust drivers, 3 for Python/JS).

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasm_ccm_runtime::log::NullSink;
use wasm_ccm_runtime::types::{AddressType, Node, NodeAddress};
use wasm_ccm_runtime::{
    CallScope, Compiled, Compiler, Driver, DriverOptions, EngineOptions, Runtime, RuntimeOptions,
    Tier,
};
use wasm_ccm_runtime::{InitInput, http, log};
use wasm_ccm_sim::kit::{CLOUDS, SimCloud, SimNode, StartOptions};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn fmt(d: Duration) -> String {
    if d < Duration::from_micros(100) {
        format!("{:.1} µs", d.as_secs_f64() * 1e6)
    } else if d < Duration::from_millis(10) {
        format!("{:.2} ms", d.as_secs_f64() * 1e3)
    } else {
        format!("{:.0} ms", d.as_secs_f64() * 1e3)
    }
}

/// One driver under test: its bytes, how to load it and which node its first call asks about.
struct Subject {
    name: &'static str,
    bytes: Vec<u8>,
    opts: DriverOptions,
    node: Node,
    rounds: usize,
    /// Keeps a cloud driver's simulator running.
    _sim: Option<Box<dyn SimCloud>>,
}

fn runtime(compiler: Compiler, cache: &Path) -> Runtime {
    Runtime::new(RuntimeOptions {
        engine: EngineOptions {
            compiler,
            ..Default::default()
        },
        cache_dir: Some(cache.to_path_buf()),
    })
    .expect("runtime")
}

/// The same component with a custom section appended: a new version to a hot reload (another
/// sha256, so nothing cached), the same code.
fn new_version(wasm: &[u8], round: usize) -> Vec<u8> {
    let mut payload = vec![13];
    payload.extend_from_slice(b"bench-version");
    payload.extend_from_slice(&round.to_le_bytes());
    let mut out = wasm.to_vec();
    out.push(0);
    out.push(u8::try_from(payload.len()).expect("short section"));
    out.extend_from_slice(&payload);
    out
}

fn static_subject(name: &'static str, path: PathBuf, rounds: usize) -> Subject {
    let config = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../drivers/static/examples/cloud-config.yaml");
    Subject {
        name,
        bytes: std::fs::read(&path).expect("driver built"),
        opts: DriverOptions {
            init: InitInput {
                config: std::fs::read(config).expect("example config"),
                ..Default::default()
            },
            log: log::Config {
                sink: Arc::new(NullSink),
                ..Default::default()
            },
            ..Default::default()
        },
        node: common::node("node-a"),
        rounds,
        _sim: None,
    }
}

async fn cloud_subject(name: &'static str, path: &str, rounds: usize) -> Subject {
    let cloud = CLOUDS
        .iter()
        .find(|c| c.name == name)
        .expect("a simulated cloud");
    let sim = (cloud.start)(StartOptions::default())
        .await
        .expect("simulator");
    let seeded = SimNode::numbered(0);
    sim.add_instance(0, &seeded).expect("instance");
    let setup = sim.driver_setup();
    let mut node = common::node(&seeded.name);
    node.addresses = vec![NodeAddress {
        kind: AddressType::InternalIp,
        address: seeded.internal_ip.clone(),
    }];
    Subject {
        name,
        bytes: std::fs::read(path).expect("driver built"),
        opts: DriverOptions {
            init: InitInput {
                config: setup.config.unwrap_or_default().into_bytes(),
                env: setup.env,
                ..Default::default()
            },
            http: http::Config {
                egress: Some(
                    wasm_ccm_runtime::EgressPolicy::parse(&setup.egress).expect("egress grants"),
                ),
                ..Default::default()
            },
            log: log::Config {
                sink: Arc::new(NullSink),
                ..Default::default()
            },
            ..Default::default()
        },
        node,
        rounds,
        _sim: Some(sim),
    }
}

async fn first_call(driver: &Driver, node: &Node) {
    driver
        .instance_metadata(node, &CallScope::default())
        .await
        .result
        .expect("instance-metadata");
}

async fn until_cranelift(driver: &Driver) {
    driver
        .watch_tier()
        .wait_for(|t| *t == Tier::Cranelift)
        .await
        .expect("driver alive");
}

/// Compile, load (`info`, `init`) and the first call, from bytes in hand.
async fn load_and_call(rt: &Runtime, s: &Subject, bytes: Vec<u8>) -> (Compiled, Driver, Duration) {
    let t = Instant::now();
    let compiled = rt.compile(s.name, bytes).await.expect("compile");
    let driver = rt.load(&compiled, s.opts.clone()).await.expect("load");
    first_call(&driver, &s.node).await;
    (compiled, driver, t.elapsed())
}

async fn warm_calls(driver: &Driver, node: &Node, n: usize) -> (Duration, Duration) {
    let scope = CallScope::default();
    let mut meta = Vec::new();
    let mut info = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        first_call(driver, node).await;
        meta.push(t.elapsed());
        let t = Instant::now();
        driver.info_call(&scope).await.result.expect("info");
        info.push(t.elapsed());
    }
    (median(meta), median(info))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let wanted = std::env::var("BENCH_DRIVERS")
        .unwrap_or_else(|_| "static,cloudscale,phoenixnap,cloudstack,python,js".into());
    let rounds = |default: usize| {
        std::env::var("BENCH_ROUNDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let mut subjects = Vec::new();
    for name in wanted.split(',') {
        subjects.push(match name {
            "static" => static_subject(
                "Rust static",
                PathBuf::from(wasm_ccm_drivers::STATIC_DRIVER),
                rounds(5),
            ),
            "cloudscale" => {
                cloud_subject("cloudscale", wasm_ccm_drivers::CLOUDSCALE_DRIVER, rounds(5)).await
            }
            "phoenixnap" => {
                cloud_subject("phoenixnap", wasm_ccm_drivers::PHOENIXNAP_DRIVER, rounds(5)).await
            }
            "cloudstack" => {
                cloud_subject("cloudstack", wasm_ccm_drivers::CLOUDSTACK_DRIVER, rounds(5)).await
            }
            "python" => static_subject(
                "Python static",
                wasm_ccm_test_tools::polyglot::python_static().expect("python driver"),
                rounds(3),
            ),
            "js" => static_subject(
                "JavaScript static",
                wasm_ccm_test_tools::polyglot::js_static().expect("js driver"),
                rounds(3),
            ),
            other => panic!("unknown driver {other}"),
        });
    }

    let mut host_start = Vec::new();
    for _ in 0..5 {
        let dir = tempfile::tempdir().expect("tempdir");
        let t = Instant::now();
        drop(runtime(Compiler::Tiered, dir.path()));
        host_start.push(t.elapsed());
    }
    println!(
        "Host start (`Runtime::new`, tiered: two engines, a pool each): {}\n",
        fmt(median(host_start))
    );

    println!(
        "| driver | size | cold load → first call, Cranelift only | cold load → first call, tiered (of which compile) | tiered: swap to Cranelift after | cached load (compile step) | cached load → first call | hot reload → first call (of which compile) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut warm_rows = Vec::new();
    for s in &subjects {
        // Today's cold load: Cranelift only, nothing cached.
        let mut cranelift_cold = Vec::new();
        for _ in 0..s.rounds {
            let dir = tempfile::tempdir().expect("tempdir");
            let rt = runtime(Compiler::Cranelift, dir.path());
            let (_, _, took) = load_and_call(&rt, s, s.bytes.clone()).await;
            cranelift_cold.push(took);
        }

        // Tiered cold load; then the swap, which each round waits for so that no background
        // compile overlaps the next round.
        let mut cold = Vec::new();
        let mut cold_compile = Vec::new();
        let mut swap = Vec::new();
        let mut cached = Vec::new();
        let mut cached_call = Vec::new();
        let mut reload = Vec::new();
        let mut reload_compile = Vec::new();
        let mut after_swap = None;
        for round in 0..s.rounds {
            let dir = tempfile::tempdir().expect("tempdir");
            let rt = runtime(Compiler::Tiered, dir.path());
            let t = Instant::now();
            let (compiled, driver, took) = load_and_call(&rt, s, s.bytes.clone()).await;
            assert_eq!(
                compiled.tier,
                Tier::Winch,
                "{}: cold load not on Winch",
                s.name
            );
            cold.push(took);
            cold_compile.push(compiled.load_time);
            until_cranelift(&driver).await;
            swap.push(t.elapsed());

            // The cache now holds the Cranelift build.
            for _ in 0..7 {
                let t = Instant::now();
                let c = rt.compile(s.name, s.bytes.clone()).await.expect("cached");
                rt.link(&c).expect("link");
                cached.push(t.elapsed());
                assert_eq!(c.tier, Tier::Cranelift);
            }
            let (_, _, took) = load_and_call(&rt, s, s.bytes.clone()).await;
            cached_call.push(took);

            // A new version while this one serves: compiled on Winch, in service at once.
            let (compiled, reloaded, took) =
                load_and_call(&rt, s, new_version(&s.bytes, round)).await;
            assert_eq!(compiled.tier, Tier::Winch);
            reload.push(took);
            reload_compile.push(compiled.load_time);
            until_cranelift(&reloaded).await;
            after_swap = Some((rt, driver));
        }
        println!(
            "| {} | {:.1} MiB | {} | {} ({}) | {} | {} | {} | {} ({}) |",
            s.name,
            s.bytes.len() as f64 / f64::from(1 << 20),
            fmt(median(cranelift_cold)),
            fmt(median(cold)),
            fmt(median(cold_compile)),
            fmt(median(swap)),
            fmt(median(cached)),
            fmt(median(cached_call)),
            fmt(median(reload)),
            fmt(median(reload_compile)),
        );

        // Warm calls: Winch code, Cranelift code, and the tiered driver after its swap.
        let n = if s.name.contains("static") { 501 } else { 201 };
        let mut per_tier = Vec::new();
        for compiler in [Compiler::Winch, Compiler::Cranelift] {
            let dir = tempfile::tempdir().expect("tempdir");
            let rt = runtime(compiler, dir.path());
            let (_, driver, _) = load_and_call(&rt, s, s.bytes.clone()).await;
            per_tier.push(warm_calls(&driver, &s.node, n).await);
        }
        let (_rt, swapped) = after_swap.expect("a round ran");
        assert_eq!(swapped.tier(), Tier::Cranelift);
        per_tier.push(warm_calls(&swapped, &s.node, n).await);
        warm_rows.push((s.name, n, per_tier));
    }

    println!();
    println!(
        "| driver | warm `instance-metadata`: Winch | Cranelift | tiered, after the swap | Winch ÷ Cranelift | warm `provider.info`: Winch | Cranelift | tiered, after the swap | calls |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (name, n, t) in warm_rows {
        println!(
            "| {name} | {} | {} | {} | {:.2}× | {} | {} | {} | {n} |",
            fmt(t[0].0),
            fmt(t[1].0),
            fmt(t[2].0),
            t[0].0.as_secs_f64() / t[1].0.as_secs_f64(),
            fmt(t[0].1),
            fmt(t[1].1),
            fmt(t[2].1),
        );
    }
}
