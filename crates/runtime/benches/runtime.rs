//! Benchmarks of the host runtime (a bench binary, not a timed test): compile (each tier), cached
//! load (each tier's build), instantiation, call overheads and a JSON-decoding call over
//! loopback HTTP.
//!
//! Run: `cargo bench -p wasm-ccm-runtime --bench runtime`. Prints a Markdown table of medians
//! (and p99 where it matters) to paste into BENCHMARKS.md.

mod common;

use common::{node, on_cranelift};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wasm_ccm_drivers::{HOSTILE_DRIVER, STATIC_DRIVER};
use wasm_ccm_runtime::log;
use wasm_ccm_runtime::log::{LogLimits, NullSink};
use wasm_ccm_runtime::{
    Allocation, CacheOutcome, CallScope, Compiler, DriverOptions, EngineOptions, Runtime,
    RuntimeOptions, Tier,
};

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let idx = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[idx]
}

fn fmt(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns < 10_000 {
        format!("{ns} ns")
    } else if ns < 10_000_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else {
        format!("{:.1} ms", ns as f64 / 1e6)
    }
}

fn row(name: &str, samples: &mut [Duration], n: usize) {
    let p50 = percentile(samples, 0.5);
    let p99 = percentile(samples, 0.99);
    println!("| {name} | {} | {} | {n} |", fmt(p50), fmt(p99));
}

fn quiet() -> DriverOptions {
    DriverOptions {
        log: log::Config {
            sink: Arc::new(NullSink),
            limits: LogLimits {
                lines_per_second: u32::MAX,
                burst: u32::MAX,
                bytes_per_second: u32::MAX,
                burst_bytes: u32::MAX,
                ..LogLimits::default()
            },
        },
        ..Default::default()
    }
}

/// A loopback inventory for the static driver: `GET /instances` returns 20 instances as JSON.
async fn inventory() -> u16 {
    let mut instances = Vec::new();
    for i in 0..20 {
        instances.push(serde_json::json!({
            "name": format!("node-{i}"), "id": format!("id-{i}"), "type": "s1.medium", "zone": "z1", "region": "r1",
            "addresses": [{"type": "InternalIP", "address": format!("10.0.0.{}", i + 1)}, {"type": "Hostname", "address": format!("node-{i}")}],
            "labels": {"example.com/rack": "r1"}
        }));
    }
    let body =
        serde_json::to_vec(&serde_json::json!({ "instances": instances })).unwrap_or_default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let _ = sock.set_nodelay(true);
            let body = body.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16384];
                // Keep-alive: answer every request on the connection.
                loop {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                    // One write: a separate header write would meet Nagle and delayed ACK (40 ms).
                    let mut reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                        body.len()
                    )
                    .into_bytes();
                    reply.extend_from_slice(&body);
                    if sock.write_all(&reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let iterations: usize = std::env::var("BENCH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    println!("| figure | median | p99 | samples |");
    println!("| --- | --- | --- | --- |");

    // Compile and cached load of each driver. Every row asserts what it measures (the tier, a
    // cache hit), so that a label and its number cannot drift apart again.
    for (name, path) in [("static", STATIC_DRIVER), ("hostile", HOSTILE_DRIVER)] {
        let bytes = std::fs::read(path).expect("driver built");
        let kib = bytes.len() / 1024;
        for (compiler, tier, what) in [
            (
                Compiler::Tiered,
                Tier::Winch,
                "Winch (the default tiered host's first tier)",
            ),
            (
                Compiler::Cranelift,
                Tier::Cranelift,
                "Cranelift (the tiered host's background build)",
            ),
        ] {
            let nocache = Runtime::new(RuntimeOptions {
                engine: EngineOptions {
                    compiler,
                    ..Default::default()
                },
                cache_dir: None,
            })
            .expect("runtime");
            let mut cold = Vec::new();
            for _ in 0..7 {
                let t = Instant::now();
                let c = nocache.compile(path, bytes.clone()).await.expect("compile");
                cold.push(t.elapsed());
                assert_eq!((c.tier, c.cache), (tier, CacheOutcome::Disabled));
            }
            row(
                &format!("cold compile, {what}, {name} driver ({kib} KiB)"),
                &mut cold,
                7,
            );
        }

        // The product's runtime: tiered, with a cache. Compiled once and never loaded, the cache
        // holds the Winch build (what `inspect` leaves, or a restart before the swap finds);
        // loaded until it swaps, the Cranelift build (what a restart normally finds).
        let dir = std::env::temp_dir().join(format!("wasm-ccm-bench-{}", std::process::id()));
        let cached = Runtime::new(RuntimeOptions {
            cache_dir: Some(dir.clone()),
            ..Default::default()
        })
        .expect("runtime");
        let filled = cached
            .compile(path, bytes.clone())
            .await
            .expect("fill cache");
        assert_eq!(
            filled.cache,
            CacheOutcome::Miss,
            "the cache dir was not empty"
        );
        for (tier, what) in [
            (Tier::Winch, "its Winch build"),
            (Tier::Cranelift, "its Cranelift build"),
        ] {
            if tier == Tier::Cranelift {
                // The swap comes after the Cranelift build is stored.
                on_cranelift(cached.load(&filled, quiet()).await.expect("load")).await;
            }
            let mut warm = Vec::new();
            let mut with_info = Vec::new();
            for _ in 0..50 {
                let t = Instant::now();
                let c = cached.compile(path, bytes.clone()).await.expect("cached");
                cached.link(&c).expect("link");
                warm.push(t.elapsed());
                cached.info(&c).await.expect("info");
                with_info.push(t.elapsed());
                assert_eq!(
                    (c.cache, c.tier),
                    (CacheOutcome::Hit, tier),
                    "not the cached load this row names"
                );
            }
            row(
                &format!(
                    "cached load (read + verify + deserialize + inspect + link), {name} driver, {what}"
                ),
                &mut warm,
                50,
            );
            row(
                &format!("cached load + first instance + info(), {name} driver, {what}"),
                &mut with_info,
                50,
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    // Instantiation: pooling allocator vs on-demand.
    for (label, allocation) in [
        ("pooling", Allocation::Pooling),
        ("on-demand", Allocation::OnDemand),
    ] {
        let rt = Runtime::new(RuntimeOptions {
            engine: EngineOptions {
                allocation,
                ..Default::default()
            },
            cache_dir: None,
        })
        .expect("runtime");
        let c = rt
            .compile_file(std::path::Path::new(STATIC_DRIVER))
            .await
            .expect("compile");
        let d = on_cranelift(rt.load(&c, quiet()).await.expect("load")).await;
        let mut s = Vec::new();
        for _ in 0..iterations {
            s.push(d.measure_instantiation().await.expect("instantiate"));
        }
        row(
            &format!("instantiate static driver ({label})"),
            &mut s,
            iterations,
        );
    }

    let rt = Runtime::new(RuntimeOptions::default()).expect("runtime");
    let c = rt
        .compile_file(std::path::Path::new(STATIC_DRIVER))
        .await
        .expect("compile");
    let scope = CallScope::default();

    // Host→guest call that does no work: provider.info on a warm instance.
    let d = on_cranelift(rt.load(&c, quiet()).await.expect("load")).await;
    let mut s = Vec::new();
    for _ in 0..iterations {
        let t = Instant::now();
        d.info_call(&scope).await.result.expect("info");
        s.push(t.elapsed());
    }
    row(
        "host→guest call, provider.info (warm instance, deadline + pool included)",
        &mut s,
        iterations,
    );

    // A fresh instance (instantiate + init) per call.
    let fresh = on_cranelift(
        rt.load(&c, {
            let mut opts = quiet();
            opts.pool.mode = wasm_ccm_runtime::InstanceMode::Fresh;
            opts
        })
        .await
        .expect("load"),
    )
    .await;
    let mut s = Vec::new();
    for _ in 0..iterations.min(500) {
        let t = Instant::now();
        fresh.info_call(&scope).await.result.expect("info");
        s.push(t.elapsed());
    }
    row(
        "provider.info with a fresh instance + init per call",
        &mut s,
        iterations.min(500),
    );

    // Guest→host log call: a call logging N lines minus a call logging none, per line.
    let h = rt
        .compile_file(std::path::Path::new(HOSTILE_DRIVER))
        .await
        .expect("compile");
    let hd = on_cranelift(rt.load(&h, quiet()).await.expect("load")).await;
    let lines = 10_000u32;
    let mut per_line = Vec::new();
    for _ in 0..20 {
        let mut flood = node("flood");
        flood.annotations = vec![("lines".into(), lines.to_string())];
        let mut none = node("flood");
        none.annotations = vec![("lines".into(), "0".into())];
        let t = Instant::now();
        hd.instance_metadata(&flood, &scope)
            .await
            .result
            .expect("flood");
        let with = t.elapsed();
        let t = Instant::now();
        hd.instance_metadata(&none, &scope)
            .await
            .result
            .expect("flood 0");
        let without = t.elapsed();
        per_line.push(with.saturating_sub(without) / lines);
    }
    row(
        "guest→host log call (per line, null sink)",
        &mut per_line,
        20,
    );

    // How far past its deadline a runaway loop runs before the host stops it.
    let deadline = Duration::from_millis(100);
    let strict = on_cranelift(
        rt.load(&h, {
            let mut opts = quiet();
            opts.pool.call_timeout = deadline;
            opts
        })
        .await
        .expect("load"),
    )
    .await;
    let mut over = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let r = strict.instance_metadata(&node("loop"), &scope).await.result;
        assert!(r.is_err(), "the loop must be stopped");
        over.push(t.elapsed().saturating_sub(deadline));
    }
    row(
        "runaway loop: time past a 100 ms deadline until stopped",
        &mut over,
        20,
    );

    // instance-metadata that fetches and decodes a JSON inventory over loopback HTTP.
    let port = inventory().await;
    let config = format!("inventoryUrl: http://127.0.0.1:{port}\n");
    let opts = {
        let mut opts = quiet();
        opts.init.config = config.into_bytes();
        opts.http.egress = Some(
            wasm_ccm_runtime::EgressPolicy::parse(&[format!("http://127.0.0.1:{port}")])
                .expect("egress grants"),
        );
        opts
    };
    let inv = on_cranelift(rt.load(&c, opts).await.expect("load inventory driver")).await;
    let n = node("node-7");
    let mut s = Vec::new();
    for _ in 0..iterations.min(1000) {
        let t = Instant::now();
        let m = inv
            .instance_metadata(&n, &scope)
            .await
            .result
            .expect("metadata");
        assert_eq!(m.provider_id, "static://id-7");
        s.push(t.elapsed());
    }
    row(
        "instance-metadata via loopback HTTP + JSON decode (20 instances)",
        &mut s,
        iterations.min(1000),
    );
}
