//! The host stays within what the operator set whatever a hostile driver answers: `info` is
//! checked at load, results and transfers are capped, `log.redact` and log records are bounded,
//! and a crash says what happened. Memory *figures* under these attacks are in BENCHMARKS.md;
//! here the typed outcomes are asserted.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{node, node_with, runtime};
use wasm_ccm_drivers::HOSTILE_DRIVER;
use wasm_ccm_runtime::log::{MAX_DRIVER_SECRETS, MemorySink, Source};
use wasm_ccm_runtime::{
    Allocation, CallError, CallScope, Compiled, DriverOptions, EngineOptions, HostError, Runtime,
    RuntimeOptions,
};
use wasm_ccm_runtime::{InitInput, PoolOptions, log};

fn scope() -> CallScope {
    CallScope::object("test")
}

/// The hostile driver with its `info` switched to `mode` (see `INFO_MODE` in its source).
async fn hostile_with_info(mode: &str) -> Compiled {
    runtime()
        .compile(
            &format!("hostile-{mode}.wasm"),
            wasm_ccm_drivers::hostile_with_info(mode),
        )
        .await
        .expect("compiles")
}

async fn load_error(mode: &str) -> HostError {
    let compiled = hostile_with_info(mode).await;
    match runtime().load(&compiled, DriverOptions::default()).await {
        Ok(_) => panic!("a driver with info mode {mode} was loaded"),
        Err(e) => e,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_prefixes_that_reach_foreign_variables_are_refused_at_load() {
    for mode in ["env-letters", "env-kube"] {
        let e = load_error(mode).await;
        let HostError::InvalidInfo { detail, .. } = &e else {
            panic!("{mode}: expected InvalidInfo, got {e:?}");
        };
        assert!(detail.starts_with("env-prefixes"), "{mode}: {detail}");
        assert!(e.to_string().contains("was not loaded"), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_version_is_refused_without_echoing_it() {
    let e = load_error("huge-version").await;
    let HostError::InvalidInfo { detail, .. } = &e else {
        panic!("expected InvalidInfo, got {e:?}");
    };
    assert!(detail.starts_with("version"), "{detail}");
    assert!(e.to_string().len() < 1024, "the message stays short");
    assert!(detail.contains("2097152 bytes"), "{detail}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declaring_kubectl_annotations_is_refused() {
    let e = load_error("kubectl-annotations").await;
    assert!(
        matches!(&e, HostError::InvalidInfo { detail, .. } if detail.contains("kubectl.kubernetes.io")),
        "{e:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_steered_outside_its_declaration_is_refused() {
    for (mode, says) in [
        ("secret-host", "belongs to the host's HTTP client"),
        ("secret-env", "env-prefixes"),
    ] {
        let e = load_error(mode).await;
        let HostError::InvalidInfo { detail, .. } = &e else {
            panic!("{mode}: expected InvalidInfo, got {e:?}");
        };
        assert!(
            detail.starts_with("secrets \"token\"") && detail.contains(says),
            "{mode}: {detail}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unpatched_driver_still_loads() {
    let compiled = hostile_with_info("normal").await;
    runtime()
        .load(&compiled, DriverOptions::default())
        .await
        .expect("the normal info is valid");
}

/// The hostile driver with its log records kept in memory.
async fn load_logging() -> (wasm_ccm_runtime::Driver, Arc<MemorySink>) {
    let sink = Arc::new(MemorySink::default());
    let driver = common::load(
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
    (driver, sink)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_redact_keeps_a_bounded_number_of_bounded_secrets() {
    let (driver, sink) = load_logging().await;
    // 500 distinct 1 KiB secrets: the host keeps the newest MAX_DRIVER_SECRETS.
    driver
        .instance_metadata(
            &node_with("redact-flood", &[("n", "500"), ("kb", "1")]),
            &scope(),
        )
        .await
        .result
        .expect("redact-flood returns");
    assert_eq!(driver.redaction_secrets(), MAX_DRIVER_SECRETS);
    // 3 secrets of 64 KiB: refused with a warning each, none kept.
    driver
        .instance_metadata(
            &node_with("redact-flood", &[("n", "3"), ("kb", "64")]),
            &scope(),
        )
        .await
        .result
        .expect("redact-flood returns");
    assert_eq!(driver.redaction_secrets(), MAX_DRIVER_SECRETS);
    let warnings = sink
        .records()
        .iter()
        .filter(|r| r.source == Source::Host && r.message.contains("not redacted"))
        .count();
    assert_eq!(warnings, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_record_is_bounded_as_a_whole() {
    let (driver, sink) = load_logging().await;
    // A 64 KiB message and 1,000 fields of 8 KiB: about 8 MB offered in one record.
    driver
        .instance_metadata(
            &node_with("log-big", &[("fields", "1000"), ("kb", "8")]),
            &scope(),
        )
        .await
        .result
        .expect("log-big returns");
    let records = sink.records();
    let record = records
        .iter()
        .find(|r| r.source == Source::Driver)
        .expect("the record was logged");
    let size = record.message.len()
        + record
            .fields
            .iter()
            .map(|(k, v)| k.len() + v.len())
            .sum::<usize>();
    // 8 KiB of content, plus the markers that say what was cut.
    assert!(size <= 8 * 1024 + 256, "record of {size} bytes");
    assert!(record.fields.len() <= 33, "{} fields", record.fields.len());
    let marker = record.fields.last().expect("a marker field");
    assert_eq!(marker.0, "wasm_ccm_truncated");
    assert!(marker.1.contains("fields dropped"), "{}", marker.1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_over_a_cap_is_a_typed_error_and_the_driver_keeps_serving() {
    let driver = common::load(HOSTILE_DRIVER, DriverOptions::default()).await;
    let outcome = driver
        .instance_metadata(&node_with("many-addresses", &[("n", "1000")]), &scope())
        .await;
    match &outcome.result {
        Err(CallError::Host(HostError::ResultOverCap {
            detail, function, ..
        })) => {
            assert_eq!(function, "instances.instance-metadata");
            assert!(
                detail.starts_with("addresses: 1000 entries, at most 64"),
                "{detail}"
            );
        }
        other => panic!("expected ResultOverCap, got {other:?}"),
    }
    let ok = driver
        .instance_metadata(&node_with("many-addresses", &[("n", "3")]), &scope())
        .await;
    assert_eq!(ok.result.expect("3 addresses pass").addresses.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_amplified_result_is_stopped_by_hostcall_fuel_before_the_host_copies_it() {
    let driver = common::load(HOSTILE_DRIVER, DriverOptions::default()).await;
    // 120 addresses aliasing one 1 MiB buffer: 120 MiB to copy from a 1 MiB guest.
    let outcome = driver
        .instance_metadata(
            &node_with("amplify", &[("n", "120"), ("kb", "1024")]),
            &scope(),
        )
        .await;
    match &outcome.result {
        Err(CallError::Host(HostError::Trap { detail, .. })) => {
            assert!(detail.contains("more than the host accepts"), "{detail}")
        }
        other => panic!("expected the transfer to be refused, got {other:?}"),
    }
    assert_eq!(
        driver
            .instance_metadata(&node("ok"), &scope())
            .await
            .result
            .expect("serves")
            .instance_type,
        "t1"
    );
}

async fn trap_detail(name: &str) -> String {
    let driver = common::load(HOSTILE_DRIVER, DriverOptions::default()).await;
    match driver.instance_metadata(&node(name), &scope()).await.result {
        Err(CallError::Host(HostError::Trap { detail, .. })) => detail,
        other => panic!("{name}: expected a trap, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_names_its_cause() {
    let panic = trap_detail("trap").await;
    assert!(
        panic.starts_with("panicked: hostile driver: trap requested (at ")
            && panic.contains("hostile/src/lib.rs:"),
        "{panic}"
    );
    // WASI 0.2's `exit` carries only success or failure: the guest's exit(3) arrives as 1.
    assert_eq!(trap_detail("exit").await, "the driver called exit(1)");
    let stack = trap_detail("stack").await;
    assert!(stack.starts_with("stack overflow"), "{stack}");
    for detail in [&panic, &stack] {
        assert!(!detail.contains("wasm backtrace"), "{detail}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_init_is_stopped_at_the_init_timeout_naming_its_flag() {
    let compiled = common::compile(HOSTILE_DRIVER).await;
    let opts = DriverOptions {
        init: InitInput {
            config: b"spin-init".to_vec(),
            ..Default::default()
        },
        pool: PoolOptions {
            init_timeout: Duration::from_millis(300),
            call_timeout: Duration::from_secs(30),
            ..Default::default()
        },
        ..Default::default()
    };
    let e = match runtime().load(&compiled, opts).await {
        Ok(_) => panic!("a spinning init loaded"),
        Err(e) => e,
    };
    assert!(
        matches!(&e, HostError::Deadline { function, deadline, .. }
            if function == "provider.init" && *deadline == Duration::from_millis(300)),
        "{e:?}"
    );
    assert!(e.to_string().contains("--init-timeout"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_cannot_grant_itself_special_addresses_by_default() {
    // `http://0.0.0.0/0:*` and `http://*:*`: the review's driver reached loopback with these.
    let e = load_error("broad-egress").await;
    let HostError::InvalidInfo { detail, .. } = &e else {
        panic!("expected InvalidInfo, got {e:?}");
    };
    assert!(detail.starts_with("default-egress"), "{detail}");
    assert!(detail.contains("0.0.0.0/0"), "names the pattern: {detail}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_memories_are_held_to_one_limit_together() {
    // A hand-written component with eight memories; `instance-exists` grows seven of them by
    // 63 MiB each. The pooling allocator (the default) refuses a module with more than one
    // memory outright; the on-demand allocator (its fallback) runs it, and then the limit on the
    // sum stops the second memory, whichever it is.
    let pooled = runtime()
        .compile_file(std::path::Path::new(wasm_ccm_drivers::MULTI_MEMORY_DRIVER))
        .await;
    match pooled {
        Err(e) => assert!(e.to_string().contains("memories"), "{e}"),
        Ok(_) => panic!("the pooling allocator took a module with eight memories"),
    }
    let on_demand = Runtime::new(RuntimeOptions {
        engine: EngineOptions {
            allocation: Allocation::OnDemand,
            ..Default::default()
        },
        ..Default::default()
    })
    .expect("runtime");
    let compiled = on_demand
        .compile_file(std::path::Path::new(wasm_ccm_drivers::MULTI_MEMORY_DRIVER))
        .await
        .expect("compiles on demand");
    let driver = on_demand
        .load(&compiled, DriverOptions::default())
        .await
        .expect("loads");
    assert_eq!(driver.name(), "mm-bomb");
    let outcome = driver.instance_exists(&node("n1"), &scope()).await;
    match &outcome.result {
        Err(CallError::Host(HostError::OutOfMemory { limit_mib, .. })) => {
            assert_eq!(*limit_mib, 64)
        }
        other => panic!("expected out-of-memory, got {other:?}"),
    }
    assert!(
        outcome.peak_memory <= 64 << 20,
        "peak {} over the limit",
        outcome.peak_memory
    );
    assert!(
        outcome.peak_memory > 63 << 20,
        "the first memory grew: peak {}",
        outcome.peak_memory
    );
}
