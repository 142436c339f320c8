//! The same driver in three languages (a bench binary, not a timed test): the Rust static
//! driver and its Python (componentize-py) and JavaScript (jco / componentize-js) ports, built
//! by the test tools with pinned toolchains. Size, cold compile, cached load, a fresh instance
//! (instantiate + `init` + a call), a warm call, and the instance's peak linear memory, all with
//! the host's default settings: tiered, so the compile and the cached load are Winch's (each
//! asserted), and the calls wait for the swap to the Cranelift build.
//!
//! Run: `cargo bench -p wasm-ccm-runtime --bench languages`. Prints a Markdown table of medians.

mod common;

use common::{node, on_cranelift};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasm_ccm_runtime::log::NullSink;
use wasm_ccm_runtime::{
    CacheOutcome, CallScope, DriverOptions, InstanceMode, Runtime, RuntimeOptions, Tier,
};
use wasm_ccm_runtime::{InitInput, PoolOptions, log};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        format!("{:.1} µs", d.as_secs_f64() * 1e6)
    } else if d < Duration::from_millis(10) {
        format!("{:.2} ms", d.as_secs_f64() * 1e3)
    } else {
        format!("{:.0} ms", d.as_secs_f64() * 1e3)
    }
}

fn options(mode: InstanceMode) -> DriverOptions {
    let config = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../drivers/static/examples/cloud-config.yaml");
    DriverOptions {
        init: InitInput {
            config: std::fs::read(config).expect("example config"),
            ..Default::default()
        },
        pool: PoolOptions {
            mode,
            ..Default::default()
        },
        log: log::Config {
            sink: Arc::new(NullSink),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let drivers: Vec<(&str, PathBuf)> = vec![
        ("Rust", PathBuf::from(wasm_ccm_drivers::STATIC_DRIVER)),
        (
            "Python",
            wasm_ccm_test_tools::polyglot::python_static().expect("python driver"),
        ),
        (
            "JavaScript",
            wasm_ccm_test_tools::polyglot::js_static().expect("js driver"),
        ),
    ];
    println!(
        "| static driver in | size | cold compile (Winch, the tiered default) | cached load (its Winch build) | fresh instance + init + call (Cranelift code) | warm call (instance-metadata, Cranelift code) | peak linear memory |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let scope = CallScope::default();
    for (language, path) in drivers {
        let bytes = std::fs::read(&path).expect("built");
        let origin = path.display().to_string();

        let nocache = Runtime::new(RuntimeOptions::default()).expect("runtime");
        let mut cold = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            let c = nocache
                .compile(&origin, bytes.clone())
                .await
                .expect("compile");
            cold.push(t.elapsed());
            assert_eq!((c.tier, c.cache), (Tier::Winch, CacheOutcome::Disabled));
        }

        let dir = tempfile::tempdir().expect("tempdir");
        let cached = Runtime::new(RuntimeOptions {
            cache_dir: Some(dir.path().to_path_buf()),
            ..Default::default()
        })
        .expect("runtime");
        cached.compile(&origin, bytes.clone()).await.expect("fill");
        let mut warm_load = Vec::new();
        let mut compiled = None;
        for _ in 0..7 {
            let t = Instant::now();
            let c = cached
                .compile(&origin, bytes.clone())
                .await
                .expect("cached");
            warm_load.push(t.elapsed());
            assert_eq!(
                (c.tier, c.cache),
                (Tier::Winch, CacheOutcome::Hit),
                "not the cached load this column names"
            );
            compiled = Some(c);
        }
        let compiled = compiled.expect("compiled");

        let fresh = on_cranelift(
            cached
                .load(&compiled, options(InstanceMode::Fresh))
                .await
                .expect("load"),
        )
        .await;
        let mut fresh_calls = Vec::new();
        for _ in 0..21 {
            let t = Instant::now();
            fresh
                .instance_metadata(&node("node-a"), &scope)
                .await
                .result
                .expect("metadata");
            fresh_calls.push(t.elapsed());
        }

        // The Cranelift build is ready: this driver starts on it.
        let warm = on_cranelift(
            cached
                .load(&compiled, options(InstanceMode::Warm))
                .await
                .expect("load"),
        )
        .await;
        let mut calls = Vec::new();
        let mut peak = 0;
        for _ in 0..501 {
            let t = Instant::now();
            let outcome = warm.instance_metadata(&node("node-a"), &scope).await;
            calls.push(t.elapsed());
            outcome.result.expect("metadata");
            peak = peak.max(outcome.peak_memory);
        }
        println!(
            "| {language} | {:.1} MiB | {} | {} | {} | {} | {:.1} MiB |",
            bytes.len() as f64 / (1 << 20) as f64,
            ms(median(cold)),
            ms(median(warm_load)),
            ms(median(fresh_calls)),
            ms(median(calls)),
            peak as f64 / (1 << 20) as f64
        );
    }
}
