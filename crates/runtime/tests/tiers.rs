//! Compiler tiers: Winch code keeps the sandbox (deadlines, memory, traps), a tiered host serves
//! a cold driver on Winch and swaps to its Cranelift build between calls, and the compile cache
//! keeps the tiers apart. Nothing here measures time: the figures are in the `tiers` bench.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::{node, runtime_with};
use wasm_ccm_drivers::HOSTILE_DRIVER;
use wasm_ccm_runtime::PoolOptions;
use wasm_ccm_runtime::{
    CacheOutcome, CallError, CallScope, Compiler, Driver, DriverOptions, EngineOptions, HostError,
    Runtime, RuntimeOptions, Tier,
};

/// A bound on waiting for the background Cranelift compile of the 84 KiB hostile driver: a hang
/// detector far above what it takes on a loaded 2-core machine, not a timing claim.
const SWAP_BOUND: Duration = Duration::from_secs(120);

fn scope() -> CallScope {
    CallScope::object("test")
}

fn tiered(cache: &std::path::Path) -> Runtime {
    Runtime::new(RuntimeOptions {
        engine: EngineOptions {
            compiler: Compiler::Tiered,
            ..Default::default()
        },
        cache_dir: Some(cache.to_path_buf()),
    })
    .expect("runtime")
}

async fn instance_type(driver: &Driver, name: &str) -> Result<String, CallError> {
    driver
        .instance_metadata(&node(name), &scope())
        .await
        .result
        .map(|m| m.instance_type)
}

/// Waits, without sleeping, until `driver` serves Cranelift code.
async fn swapped(driver: &Driver) {
    let mut tier = driver.watch_tier();
    tokio::time::timeout(SWAP_BOUND, tier.wait_for(|t| *t == Tier::Cranelift))
        .await
        .unwrap_or_else(|_| panic!("no swap to Cranelift within {SWAP_BOUND:?}"))
        .expect("the driver is alive");
}

/// The same component with a custom section appended: other bytes (another sha256, so a cache
/// miss), the same behaviour — a new version as a hot reload sees it.
fn new_version(wasm: &[u8], tag: &str) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let name = b"wasm-ccm-test-version";
    let mut payload = Vec::new();
    leb(name.len(), &mut payload);
    payload.extend_from_slice(name);
    payload.extend_from_slice(tag.as_bytes());
    let mut out = wasm.to_vec();
    out.push(0); // custom section
    leb(payload.len(), &mut out);
    out.extend_from_slice(&payload);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runaway_loop_on_winch_code_is_stopped_at_the_call_deadline() {
    let rt = runtime_with(Compiler::Winch);
    let compiled = rt
        .compile_file(std::path::Path::new(HOSTILE_DRIVER))
        .await
        .expect("compiles");
    assert_eq!(compiled.tier, Tier::Winch);
    let driver = rt
        .load(
            &compiled,
            DriverOptions {
                pool: PoolOptions {
                    call_timeout: Duration::from_millis(300),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("loads");
    assert_eq!(driver.tier(), Tier::Winch, "a Winch-only host never swaps");
    // The guard is a hang detector: without the epoch ticking the Winch engine, the loop would
    // run forever (tokio's timeout cannot stop a guest that never yields).
    let result = tokio::time::timeout(Duration::from_secs(60), instance_type(&driver, "loop"))
        .await
        .expect("the loop on Winch code was never interrupted");
    match result {
        Err(CallError::Host(HostError::Deadline { function, .. })) => {
            assert_eq!(function, "instances.instance-metadata")
        }
        other => panic!("expected a deadline error, got {other:?}"),
    }
    assert_eq!(driver.stats().deadlines.load(Ordering::Relaxed), 1);
    assert_eq!(instance_type(&driver, "ok").await.expect("serves"), "t1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn winch_code_keeps_the_memory_cap_and_replaces_trapped_instances() {
    let rt = runtime_with(Compiler::Winch);
    let compiled = rt
        .compile_file(std::path::Path::new(HOSTILE_DRIVER))
        .await
        .expect("compiles");
    let opts = DriverOptions {
        pool: PoolOptions {
            memory_limit: 32 << 20,
            max_concurrency: 1,
            ..Default::default()
        },
        ..Default::default()
    };
    let driver = rt.load(&compiled, opts).await.expect("loads");
    match instance_type(&driver, "grow").await {
        Err(CallError::Host(HostError::OutOfMemory { limit_mib, .. })) => assert_eq!(limit_mib, 32),
        other => panic!("expected out-of-memory, got {other:?}"),
    }
    assert_eq!(
        instance_type(&driver, "count").await.expect("ok"),
        "calls=1"
    );
    assert_eq!(
        instance_type(&driver, "count").await.expect("ok"),
        "calls=2"
    );
    match instance_type(&driver, "trap").await {
        Err(CallError::Host(HostError::Trap { detail, .. })) => {
            assert!(detail.contains("trap requested"), "{detail}")
        }
        other => panic!("expected a trap, got {other:?}"),
    }
    match instance_type(&driver, "stack").await {
        Err(CallError::Host(HostError::Trap { detail, .. })) => {
            assert!(detail.starts_with("stack overflow"), "{detail}")
        }
        other => panic!("expected a stack overflow, got {other:?}"),
    }
    assert_eq!(
        instance_type(&driver, "count").await.expect("ok"),
        "calls=1",
        "the trapped instances were thrown away"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_driver_serves_on_winch_and_swaps_to_cranelift_between_calls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = tiered(dir.path());
    let wasm = std::fs::read(HOSTILE_DRIVER).expect("driver built");
    let compiled = rt
        .compile("hostile.wasm", wasm.clone())
        .await
        .expect("compiles");
    assert_eq!(
        (compiled.tier, compiled.cache),
        (Tier::Winch, CacheOutcome::Miss)
    );
    let opts = DriverOptions {
        pool: PoolOptions {
            max_concurrency: 3,
            ..Default::default()
        },
        ..Default::default()
    };
    let driver = rt.load(&compiled, opts.clone()).await.expect("loads");

    // Calls run all along, across the swap; none may fail.
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(AtomicU64::new(0));
    let mut callers = Vec::new();
    for _ in 0..3 {
        let (driver, stop, failures) = (driver.clone(), stop.clone(), failures.clone());
        callers.push(tokio::spawn(async move {
            let mut calls = 0u64;
            // At least a few calls after the swap, whenever it comes.
            let mut after = 0;
            while after < 5 {
                if stop.load(Ordering::Relaxed) {
                    after += 1;
                }
                if instance_type(&driver, "ok").await.as_deref() != Ok("t1") {
                    failures.fetch_add(1, Ordering::Relaxed);
                }
                calls += 1;
                // Leave the workers to the test's own task now and then.
                tokio::task::yield_now().await;
            }
            calls
        }));
    }
    swapped(&driver).await;
    stop.store(true, Ordering::Relaxed);
    let mut calls = 0;
    for caller in callers {
        calls += caller.await.expect("caller");
    }
    assert_eq!(failures.load(Ordering::Relaxed), 0, "of {calls} calls");
    assert_eq!(driver.tier(), Tier::Cranelift);
    // The Winch instance `load` initialised was retired, not pooled on.
    assert!(driver.stats().instances_recycled.load(Ordering::Relaxed) >= 1);
    assert_eq!(driver.stats().traps.load(Ordering::Relaxed), 0);

    // The cache now holds the Cranelift build, and the Winch build is gone.
    let cache = rt.cache().expect("cache");
    let entry = |tier| {
        cache.entry_path(
            &compiled.sha256,
            tier,
            &rt.engine().compatibility_key_for(tier),
        )
    };
    assert!(entry(Tier::Cranelift).exists());
    assert!(!entry(Tier::Winch).exists());

    // Another driver from the same compile starts on the Cranelift build.
    let second = rt.load(&compiled, opts.clone()).await.expect("loads");
    assert_eq!(second.tier(), Tier::Cranelift);

    // A restart loads the Cranelift build from the cache: no Winch, no swap.
    let restarted = tiered(dir.path());
    let cached = restarted
        .compile("hostile.wasm", wasm.clone())
        .await
        .expect("loads");
    assert_eq!(
        (cached.tier, cached.cache),
        (Tier::Cranelift, CacheOutcome::Hit)
    );
    let driver = restarted.load(&cached, opts.clone()).await.expect("loads");
    assert_eq!(driver.tier(), Tier::Cranelift);
    assert_eq!(instance_type(&driver, "ok").await.expect("serves"), "t1");

    // A new version (a hot reload) is served by Winch code at once, and swaps in turn.
    let reloaded = restarted
        .compile("hostile.wasm", new_version(&wasm, "v2"))
        .await
        .expect("compiles");
    assert_eq!(
        (reloaded.tier, reloaded.cache),
        (Tier::Winch, CacheOutcome::Miss)
    );
    let driver = restarted.load(&reloaded, opts).await.expect("loads");
    assert_eq!(instance_type(&driver, "ok").await.expect("serves"), "t1");
    swapped(&driver).await;
    assert_eq!(instance_type(&driver, "ok").await.expect("serves"), "t1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiered_host_without_a_cache_swaps_too_and_a_hung_winch_call_still_ends() {
    let rt = runtime_with(Compiler::Tiered);
    let compiled = rt
        .compile_file(std::path::Path::new(HOSTILE_DRIVER))
        .await
        .expect("compiles");
    assert_eq!(
        (compiled.tier, compiled.cache),
        (Tier::Winch, CacheOutcome::Disabled)
    );
    let driver = rt
        .load(
            &compiled,
            DriverOptions {
                pool: PoolOptions {
                    call_timeout: Duration::from_millis(300),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("loads");
    // Whichever tier this call lands on, the deadline stops it.
    let result = tokio::time::timeout(Duration::from_secs(60), instance_type(&driver, "loop"))
        .await
        .expect("the loop was never interrupted");
    assert!(
        matches!(result, Err(CallError::Host(HostError::Deadline { .. }))),
        "{result:?}"
    );
    swapped(&driver).await;
    assert_eq!(instance_type(&driver, "ok").await.expect("serves"), "t1");
    let result = tokio::time::timeout(Duration::from_secs(60), instance_type(&driver, "loop"))
        .await
        .expect("the loop was never interrupted");
    assert!(
        matches!(result, Err(CallError::Host(HostError::Deadline { .. }))),
        "{result:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cranelift_host_compiles_with_cranelift_only() {
    let rt = runtime_with(Compiler::Cranelift);
    assert!(rt.engine().engine_for(Tier::Winch).is_none());
    let compiled = rt
        .compile_file(std::path::Path::new(HOSTILE_DRIVER))
        .await
        .expect("compiles");
    assert_eq!(compiled.tier, Tier::Cranelift);
    let driver = rt
        .load(&compiled, DriverOptions::default())
        .await
        .expect("loads");
    assert_eq!(driver.tier(), Tier::Cranelift);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_pool_refuses_is_refused_on_every_tier() {
    // Eight memories: more than a pool slot holds. Were one engine to allocate on demand, the
    // fallback from Winch to Cranelift (or the other way) would run what the pool refuses.
    for compiler in [Compiler::Tiered, Compiler::Winch, Compiler::Cranelift] {
        let rt = runtime_with(compiler);
        if !rt.engine().pooling() {
            // A host without the address space for a pool has nothing to refuse with.
            return;
        }
        match rt
            .compile_file(std::path::Path::new(wasm_ccm_drivers::MULTI_MEMORY_DRIVER))
            .await
        {
            Err(e) => assert!(e.to_string().contains("memories"), "{compiler:?}: {e}"),
            Ok(c) => panic!("{compiler:?}: the {} tier took eight memories", c.tier),
        }
    }
}
