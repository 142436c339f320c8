//! The sandbox holds against hostile drivers: loops, memory bombs, traps, forbidden egress, huge
//! responses, log floods and leaked secrets — and the host keeps serving afterwards.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Reply, load, node, node_with, serve};
use wasm_ccm_drivers::HOSTILE_DRIVER;
use wasm_ccm_runtime::http::HttpLimits;
use wasm_ccm_runtime::log::{MemorySink, Source};
use wasm_ccm_runtime::types::ProviderError;
use wasm_ccm_runtime::{CallError, CallScope, DriverOptions, HostError, InstanceMode};
use wasm_ccm_runtime::{InitInput, PoolOptions, http, log};

fn scope() -> CallScope {
    CallScope::object("test")
}

async fn instance_type(driver: &wasm_ccm_runtime::Driver, name: &str) -> String {
    driver
        .instance_metadata(&node(name), &scope())
        .await
        .result
        .expect("metadata")
        .instance_type
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_hold_after_the_runtime_that_loaded_the_driver_is_dropped() {
    // A regression: the epoch ticker belonged to the Runtime only, so a driver outliving it
    // (as in `wasm-ccm run`) never had a runaway call interrupted.
    let driver = {
        let runtime = wasm_ccm_runtime::Runtime::new(Default::default()).expect("runtime");
        let compiled = runtime
            .compile_file(std::path::Path::new(HOSTILE_DRIVER))
            .await
            .expect("compiles");
        let opts = DriverOptions {
            pool: PoolOptions {
                call_timeout: Duration::from_millis(200),
                ..Default::default()
            },
            ..Default::default()
        };
        runtime.load(&compiled, opts).await.expect("loads")
    };
    let outcome = driver.instance_metadata(&node("loop"), &scope()).await;
    assert!(
        matches!(
            outcome.result,
            Err(CallError::Host(HostError::Deadline { .. }))
        ),
        "{:?}",
        outcome.result
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runaway_loop_is_stopped_at_the_deadline_and_the_driver_keeps_serving() {
    let deadline = Duration::from_millis(300);
    let driver = load(
        HOSTILE_DRIVER,
        DriverOptions {
            pool: PoolOptions {
                call_timeout: deadline,
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await;
    let started = Instant::now();
    let outcome = driver.instance_metadata(&node("loop"), &scope()).await;
    let took = started.elapsed();
    match outcome.result {
        Err(CallError::Host(HostError::Deadline { function, .. })) => {
            assert_eq!(function, "instances.instance-metadata")
        }
        other => panic!("expected a deadline error, got {other:?}"),
    }
    // Only the lower bound: how soon after the deadline the loop stops is a benchmark's
    // question (BENCHMARKS.md), and a loaded machine would fail an upper bound here.
    assert!(took >= deadline, "stopped early: {took:?}");
    assert_eq!(
        instance_type(&driver, "ok").await,
        "t1",
        "the next call succeeds on a fresh instance"
    );
    assert_eq!(
        driver
            .stats()
            .deadlines
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_http_request_is_cancelled_at_the_call_deadline() {
    let port = serve(Reply::Hang).await;
    let deadline = Duration::from_millis(400);
    let opts = DriverOptions {
        pool: PoolOptions {
            call_timeout: deadline,
            ..Default::default()
        },
        http: http::Config {
            egress: Some(
                wasm_ccm_runtime::EgressPolicy::parse(&[format!("http://127.0.0.1:{port}")])
                    .expect("egress grants"),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    let driver = load(HOSTILE_DRIVER, opts).await;
    let n = node_with(
        "fetch",
        &[("url", &format!("http://127.0.0.1:{port}/slow"))],
    );
    // The server never answers: only the deadline can end this call. The guard is a hang
    // detector two orders of magnitude above the deadline, not a timing claim.
    let result = tokio::time::timeout(
        Duration::from_secs(60),
        driver.instance_metadata(&n, &scope()),
    )
    .await
    .unwrap_or_else(|_| {
        panic!("a call with a {deadline:?} deadline still hung after 60 s: the deadline does not cancel a hanging request")
    })
    .result;
    // The HTTP layer gives up before the deadline and tells the guest; either way the call ends.
    match result {
        Err(CallError::Provider(ProviderError::Permanent(m))) => {
            assert!(m.contains("http-error timeout"), "{m}")
        }
        Err(CallError::Host(HostError::Deadline { .. })) => {}
        other => panic!("expected a timeout, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_growth_ends_in_a_typed_error_not_a_host_crash() {
    let opts = DriverOptions {
        pool: PoolOptions {
            memory_limit: 32 << 20,
            ..Default::default()
        },
        ..Default::default()
    };
    let driver = load(HOSTILE_DRIVER, opts).await;
    let outcome = driver.instance_metadata(&node("grow"), &scope()).await;
    match outcome.result {
        Err(CallError::Host(HostError::OutOfMemory { limit_mib, .. })) => assert_eq!(limit_mib, 32),
        other => panic!("expected out-of-memory, got {other:?}"),
    }
    assert!(
        outcome.peak_memory <= 32 << 20,
        "peak {} over the limit",
        outcome.peak_memory
    );
    assert!(
        outcome.peak_memory > 16 << 20,
        "the bomb never grew: peak {}",
        outcome.peak_memory
    );
    assert_eq!(instance_type(&driver, "ok").await, "t1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trap_replaces_the_instance() {
    let driver = load(
        HOSTILE_DRIVER,
        DriverOptions {
            pool: PoolOptions {
                max_concurrency: 1,
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await;
    assert_eq!(instance_type(&driver, "count").await, "calls=1");
    assert_eq!(
        instance_type(&driver, "count").await,
        "calls=2",
        "warm instances keep their state"
    );
    match driver
        .instance_metadata(&node("trap"), &scope())
        .await
        .result
    {
        Err(CallError::Host(HostError::Trap { detail, .. })) => assert!(!detail.is_empty()),
        other => panic!("expected a trap, got {other:?}"),
    }
    assert_eq!(
        instance_type(&driver, "count").await,
        "calls=1",
        "the trapped instance was thrown away"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fresh_mode_keeps_no_state_between_calls() {
    let driver = load(
        HOSTILE_DRIVER,
        DriverOptions {
            pool: PoolOptions {
                mode: InstanceMode::Fresh,
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await;
    assert_eq!(instance_type(&driver, "count").await, "calls=1");
    assert_eq!(instance_type(&driver, "count").await, "calls=1");
}

async fn fetch_error(opts: DriverOptions, url: &str) -> String {
    let driver = load(HOSTILE_DRIVER, opts).await;
    match driver
        .instance_metadata(&node_with("fetch", &[("url", url)]), &scope())
        .await
        .result
    {
        Err(CallError::Provider(ProviderError::Permanent(m))) => m,
        other => panic!("expected the guest to report the http error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn egress_outside_the_grants_is_denied_naming_the_grant_to_add() {
    let port = serve(Reply::Body(10)).await;
    let m = fetch_error(
        DriverOptions::default(),
        &format!("http://127.0.0.1:{port}/"),
    )
    .await;
    assert!(m.contains("http-error denied"), "{m}");
    assert!(
        m.contains(&format!("--allow-egress http://127.0.0.1:{port}")),
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_name_resolving_to_loopback_is_refused() {
    let port = serve(Reply::Body(10)).await;
    // `*` grants every DNS name, yet `localhost` resolves to a loopback address that was not granted.
    let opts = DriverOptions {
        http: http::Config {
            egress: Some(
                wasm_ccm_runtime::EgressPolicy::parse(&[format!("http://*:{port}")])
                    .expect("egress grants"),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    let m = fetch_error(opts, &format!("http://localhost:{port}/")).await;
    assert!(m.contains("http-error denied"), "{m}");
    assert!(m.contains("loopback"), "{m}");
    assert!(m.contains("--allow-egress http://"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_a_destination_not_granted_is_refused() {
    let target = serve(Reply::Body(10)).await;
    let redirector = serve(Reply::RedirectTo(target)).await;
    let opts = DriverOptions {
        http: http::Config {
            egress: Some(
                wasm_ccm_runtime::EgressPolicy::parse(&[format!("http://127.0.0.1:{redirector}")])
                    .expect("egress grants"),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    let m = fetch_error(opts, &format!("http://127.0.0.1:{redirector}/")).await;
    assert!(
        m.contains("http-error denied") && m.contains("redirect refused"),
        "{m}"
    );
    assert!(
        m.contains(&format!("--allow-egress http://127.0.0.1:{target}")),
        "{m}"
    );
    // Granting the target too makes the same redirect work.
    let both = vec![
        format!("http://127.0.0.1:{redirector}"),
        format!("http://127.0.0.1:{target}"),
    ];
    let driver = load(
        HOSTILE_DRIVER,
        DriverOptions {
            http: http::Config {
                egress: Some(wasm_ccm_runtime::EgressPolicy::parse(&both).expect("egress grants")),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await;
    let n = node_with(
        "fetch",
        &[("url", &format!("http://127.0.0.1:{redirector}/"))],
    );
    assert_eq!(
        driver
            .instance_metadata(&n, &scope())
            .await
            .result
            .expect("followed")
            .instance_type,
        "status=200 bytes=10"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granted_egress_works_and_body_and_header_caps_are_enforced() {
    let port = serve(Reply::Body(300 * 1024)).await;
    let grant = format!("http://127.0.0.1:{port}");
    let url = format!("http://127.0.0.1:{port}/big");
    let opts = DriverOptions {
        http: http::Config {
            egress: Some(
                wasm_ccm_runtime::EgressPolicy::parse(std::slice::from_ref(&grant))
                    .expect("egress grants"),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    let driver = load(HOSTILE_DRIVER, opts).await;
    let outcome = driver
        .instance_metadata(&node_with("fetch", &[("url", &url)]), &scope())
        .await;
    assert_eq!(
        outcome.result.expect("allowed").instance_type,
        format!("status=200 bytes={}", 300 * 1024)
    );
    assert_eq!(outcome.http.len(), 1);
    assert_eq!(outcome.http[0].status, Some(200));
    assert!(!outcome.http[0].mutating);

    let limits = HttpLimits {
        max_response_body: 100 * 1024,
        ..Default::default()
    };
    let m = fetch_error(
        DriverOptions {
            http: http::Config {
                egress: Some(
                    wasm_ccm_runtime::EgressPolicy::parse(&[grant]).expect("egress grants"),
                ),
                limits,
                ..Default::default()
            },
            ..Default::default()
        },
        &url,
    )
    .await;
    assert!(m.contains("http-error too-large"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_flood_is_rate_limited_and_the_drops_are_counted() {
    let sink = Arc::new(MemorySink::default());
    let opts = DriverOptions {
        log: log::Config {
            sink: sink.clone(),
            ..Default::default()
        },
        ..Default::default()
    };
    let driver = load(HOSTILE_DRIVER, opts).await;
    let started = Instant::now();
    let lines = 5000u64;
    let n = node_with("flood", &[("lines", &lines.to_string())]);
    driver
        .instance_metadata(&n, &scope())
        .await
        .result
        .expect("flood returns");
    let elapsed = started.elapsed().as_secs_f64();
    let passed = sink
        .records()
        .iter()
        .filter(|r| r.source == Source::Driver)
        .count() as u64;
    let dropped = driver.dropped_log_lines();
    assert_eq!(
        passed + dropped,
        lines,
        "every line is either logged or counted as dropped"
    );
    let allowed = 1000 + (elapsed * 100.0).ceil() as u64 + 1;
    assert!(
        passed <= allowed,
        "{passed} lines passed, at most {allowed} allowed"
    );
    assert!(dropped >= lines - allowed, "dropped {dropped}");
    // The next line that passes is preceded by a host line saying how many were dropped.
    // Poll with a bound: once a token has refilled, the next line carries the report.
    let reported = |sink: &MemorySink| {
        sink.records()
            .iter()
            .any(|r| r.source == Source::Host && r.message.contains("dropped"))
    };
    for _ in 0..2000 {
        if reported(&sink) {
            break;
        }
        driver
            .instance_metadata(&node_with("flood", &[("lines", "1")]), &scope())
            .await
            .result
            .expect("ok");
    }
    assert!(reported(&sink), "no line reported the drops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_reach_a_log_line() {
    let sink = Arc::new(MemorySink::default());
    let config_secret = "s3cr3t-from-the-config";
    let env_secret = "tok-from-the-environment";
    let opts = DriverOptions {
        init: InitInput {
            config: format!("secret={config_secret}").into_bytes(),
            env: vec![
                ("HOSTILE_TOKEN".into(), env_secret.into()),
                ("OTHER_TOKEN".into(), "not-for-the-driver".into()),
            ],
            ..Default::default()
        },
        log: log::Config {
            sink: sink.clone(),
            ..Default::default()
        },
        ..Default::default()
    };
    let driver = load(HOSTILE_DRIVER, opts).await;
    driver
        .instance_metadata(&node("leak"), &scope())
        .await
        .result
        .expect("leak returns");
    let records = sink.records();
    assert!(
        records.len() >= 3,
        "the driver logged through log, stdout and stderr: {records:?}"
    );
    for r in &records {
        let text = format!("{} {:?}", r.message, r.fields);
        assert!(
            !text.contains(config_secret) && !text.contains(env_secret),
            "secret leaked: {r:?}"
        );
    }
    assert!(records.iter().any(|r| r.message.contains("[redacted]")));
    assert!(records.iter().any(|r| r.source == Source::Stdout));
    assert!(records.iter().any(|r| r.source == Source::Stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_lines_become_log_records_tagged_with_the_call() {
    let sink = Arc::new(MemorySink::default());
    let driver = load(
        HOSTILE_DRIVER,
        DriverOptions {
            log: log::Config {
                sink: sink.clone(),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await;
    driver
        .instance_metadata(&node("stdout"), &CallScope::object("node/stdout"))
        .await
        .result
        .expect("ok");
    let out: Vec<_> = sink
        .records()
        .into_iter()
        .filter(|r| r.source == Source::Stdout)
        .collect();
    assert_eq!(out.len(), 3, "{out:?}");
    assert!(
        out.iter()
            .all(|r| r.function == "instances.instance-metadata"
                && r.object == "node/stdout"
                && r.driver == "hostile")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calling_an_interface_the_driver_does_not_export_is_a_clear_error() {
    let driver = load(HOSTILE_DRIVER, DriverOptions::default()).await;
    let svc = wasm_ccm_runtime::types::Service {
        namespace: "default".into(),
        name: "web".into(),
        uid: "u".into(),
        labels: vec![],
        annotations: vec![],
        ports: vec![],
        external_traffic_policy: wasm_ccm_runtime::types::TrafficPolicy::Cluster,
        health_check_node_port: 0,
        load_balancer_ip: None,
        load_balancer_source_ranges: vec![],
        session_affinity: wasm_ccm_runtime::types::SessionAffinity::None,
        session_affinity_timeout: None,
        ip_families: vec![],
        load_balancer_class: None,
        ingress: vec![],
    };
    match driver
        .load_balancer_ensure(&svc, &[], &scope())
        .await
        .result
    {
        Err(CallError::Host(e @ HostError::NotExported { .. })) => {
            assert!(
                e.to_string().contains("wasm-ccm:provider/load-balancer"),
                "{e}"
            )
        }
        other => panic!("expected NotExported, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_past_its_memory_watermark_is_recycled_before_it_fails() {
    let probe = load(HOSTILE_DRIVER, DriverOptions::default()).await;
    let baseline = probe
        .instance_metadata(&node("count"), &scope())
        .await
        .peak_memory;
    assert!(baseline > 0, "the limiter saw the instance's memory");
    assert_eq!(
        instance_type(&probe, "count").await,
        "calls=2",
        "well under its cap, an instance is reused"
    );

    // A cap the instance already fills past 75% of, while its calls still fit.
    let opts = DriverOptions {
        pool: PoolOptions {
            memory_limit: baseline + baseline / 5,
            max_concurrency: 1,
            ..Default::default()
        },
        ..Default::default()
    };
    let tight = load(HOSTILE_DRIVER, opts).await;
    assert_eq!(instance_type(&tight, "count").await, "calls=1");
    assert_eq!(
        instance_type(&tight, "count").await,
        "calls=1",
        "the instance was retired after its call"
    );
    let recycled = tight
        .stats()
        .instances_recycled
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(recycled >= 2, "recycled {recycled}");
    assert_eq!(
        tight
            .stats()
            .out_of_memory
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}
