//! Benchmarks of the cloudscale driver against the cloudscale simulator on loopback (a bench
//! binary, not a timed test): size, compile, and per-Service ensure cost in time, driver calls
//! and cloud requests, first and in steady state.
//!
//! Run: `cargo bench -p wasm-ccm-runtime --bench cloudscale`. Prints a Markdown table of
//! medians to paste into BENCHMARKS.md. `BENCH_SERVICES` sets the number of Services (40).

mod common;

use common::{node, on_cranelift};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasm_ccm_drivers::CLOUDSCALE_DRIVER;
use wasm_ccm_runtime::http::HttpExchange;
use wasm_ccm_runtime::log::NullSink;
use wasm_ccm_runtime::types::{
    Node, Protocol, Service, ServicePort, SessionAffinity, TrafficPolicy,
};
use wasm_ccm_runtime::{CacheOutcome, CallScope, DriverOptions, Runtime, RuntimeOptions, Tier};
use wasm_ccm_runtime::{InitInput, http, log};
use wasm_ccm_sim::cloudscale::{CloudscaleOptions, CloudscaleSim, SeedServer};
use wasm_ccm_sim::kit::SimCloud as _;

const SUBNET: &str = "0c5e2f4a-6b7d-4e8f-9a0b-1c2d3e4f5a6b";

fn median<T: Ord + Copy>(samples: &mut [T]) -> T {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn service(i: usize) -> Service {
    Service {
        namespace: "default".into(),
        name: format!("svc-{i}"),
        uid: format!("00000000-0000-4000-8000-{i:012}"),
        labels: vec![],
        annotations: vec![],
        ports: vec![ServicePort {
            name: "http".into(),
            protocol: Protocol::Tcp,
            port: 80,
            node_port: 30000 + i as u16,
        }],
        external_traffic_policy: TrafficPolicy::Cluster,
        health_check_node_port: 0,
        load_balancer_ip: None,
        load_balancer_source_ranges: vec![],
        session_affinity: SessionAffinity::None,
        session_affinity_timeout: None,
        ip_families: vec![],
        load_balancer_class: None,
        ingress: vec![],
    }
}

fn counts(http: &[HttpExchange]) -> (usize, usize) {
    let writes = http.iter().filter(|x| x.mutating).count();
    (http.len() - writes, writes)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let services: usize = std::env::var("BENCH_SERVICES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let nodes = 3;
    let bytes = std::fs::read(CLOUDSCALE_DRIVER).expect("driver built");
    let rt = Runtime::new(RuntimeOptions::default()).expect("runtime");
    let mut compile = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let c = rt
            .compile(CLOUDSCALE_DRIVER, bytes.clone())
            .await
            .expect("compile");
        compile.push(t.elapsed());
        assert_eq!((c.tier, c.cache), (Tier::Winch, CacheOutcome::Disabled));
    }
    let compiled = rt
        .compile(CLOUDSCALE_DRIVER, bytes.clone())
        .await
        .expect("compile");

    let sim = CloudscaleSim::start(
        "127.0.0.1:0".parse().expect("addr"),
        CloudscaleOptions::default(),
    )
    .await
    .expect("simulator");
    for i in 0..nodes {
        sim.add_server(
            SeedServer::new(&format!("node-{i}"))
                .public(&[&format!("5.102.148.{}", i + 1)])
                .private(SUBNET, "10.0.0.0/16", &[&format!("10.0.0.{}", i + 1)]),
        );
    }
    let driver = on_cranelift(
        rt.load(
            &compiled,
            DriverOptions {
                init: InitInput {
                    // The simulator's own wiring (the kit's driver setup).
                    env: sim.driver_setup().env,
                    ..Default::default()
                },
                http: http::Config {
                    egress: Some(
                        wasm_ccm_runtime::EgressPolicy::parse(&sim.driver_setup().egress)
                            .expect("egress grants"),
                    ),
                    ..Default::default()
                },
                log: log::Config {
                    sink: Arc::new(NullSink),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("load"),
    )
    .await;
    let backends: Vec<Node> = (0..nodes).map(|i| node(&format!("node-{i}"))).collect();
    let scope = CallScope::object("default/bench");

    let (mut first_t, mut first_calls, mut first_reads, mut first_writes) =
        (vec![], vec![], vec![], vec![]);
    let mut ensured = Vec::new();
    for i in 0..services {
        let mut svc = service(i);
        let t = Instant::now();
        let (mut calls, mut reads, mut writes) = (0, 0, 0);
        let result = loop {
            calls += 1;
            let o = driver.load_balancer_ensure(&svc, &backends, &scope).await;
            let (r, w) = counts(&o.http);
            reads += r;
            writes += w;
            match o.result {
                Ok(r) => break r,
                Err(e) if calls < 5 => eprintln!("ensure {i}: {e}; calling again"),
                Err(e) => panic!("ensure {i} did not converge: {e}"),
            }
        };
        first_t.push(t.elapsed());
        first_calls.push(calls);
        first_reads.push(reads);
        first_writes.push(writes);
        svc.annotations = result.set_annotations;
        svc.ingress = result.ingress;
        ensured.push(svc);
    }

    let (mut steady_t, mut steady_reads, mut steady_writes) = (vec![], vec![], vec![]);
    let (mut update_reads, mut update_writes) = (vec![], vec![]);
    for svc in &ensured {
        let t = Instant::now();
        let o = driver.load_balancer_ensure(svc, &backends, &scope).await;
        steady_t.push(t.elapsed());
        o.result.expect("steady ensure");
        let (r, w) = counts(&o.http);
        steady_reads.push(r);
        steady_writes.push(w);
        let o = driver.load_balancer_update(svc, &backends, &scope).await;
        o.result.expect("update");
        let (r, w) = counts(&o.http);
        update_reads.push(r);
        update_writes.push(w);
    }
    let (mut delete_t, mut delete_reqs) = (vec![], vec![]);
    for svc in &ensured {
        let t = Instant::now();
        let o = driver.load_balancer_delete(svc, &scope).await;
        delete_t.push(t.elapsed());
        o.result.expect("delete");
        delete_reqs.push(o.http.len());
    }

    println!(
        "cloudscale driver: {} KiB, {nodes} nodes, {services} Services with one port (medians)\n",
        bytes.len() / 1024
    );
    println!("| figure | value |");
    println!("| --- | --- |");
    println!(
        "| cold compile (Winch, the tiered default; calls below on the Cranelift build) | {} |",
        ms(median(&mut compile))
    );
    println!("| first ensure: wall time | {} |", ms(median(&mut first_t)));
    println!(
        "| first ensure: driver calls | {} |",
        median(&mut first_calls)
    );
    println!(
        "| first ensure: cloud requests (reads + writes) | {} + {} |",
        median(&mut first_reads),
        median(&mut first_writes)
    );
    println!(
        "| steady ensure: wall time | {} |",
        ms(median(&mut steady_t))
    );
    println!(
        "| steady ensure: cloud requests (reads + writes) | {} + {} |",
        median(&mut steady_reads),
        median(&mut steady_writes)
    );
    println!(
        "| update with unchanged nodes: cloud requests (reads + writes) | {} + {} |",
        median(&mut update_reads),
        median(&mut update_writes)
    );
    println!(
        "| delete: wall time, cloud requests | {}, {} |",
        ms(median(&mut delete_t)),
        median(&mut delete_reqs)
    );
    sim.shutdown().await;
}
