//! Loading drivers: the compile cache, version checks, refusal of things that are not drivers.

mod common;

use common::{compile, runtime};
use wasm_ccm_drivers::{FUTURE_MAJOR_DRIVER, HOSTILE_DRIVER, STATIC_DRIVER};
use wasm_ccm_runtime::{
    CacheOutcome, Compiler, DriverOptions, EngineOptions, HostError, Runtime, RuntimeOptions, Tier,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_load_hits_the_cache_and_a_corrupt_entry_is_recompiled() {
    // Each compiler's entries are verified alike. The tiered host (the default) writes its Winch
    // build on another thread: its second compile must find that entry all the same.
    for compiler in [Compiler::Cranelift, Compiler::Winch, Compiler::Tiered] {
        let dir = tempfile::tempdir().expect("tempdir");
        let rt = Runtime::new(RuntimeOptions {
            engine: EngineOptions {
                compiler,
                ..Default::default()
            },
            cache_dir: Some(dir.path().to_path_buf()),
        })
        .expect("runtime");
        let path = std::path::Path::new(STATIC_DRIVER);
        let first = rt.compile_file(path).await.expect("compiles");
        assert_eq!(first.cache, CacheOutcome::Miss);
        let second = rt.compile_file(path).await.expect("loads");
        assert_eq!(second.cache, CacheOutcome::Hit, "{compiler:?}");
        assert_eq!(second.tier, first.tier);

        let entry = rt.cache().expect("cache").entry_path(
            &first.sha256,
            first.tier,
            &rt.engine().compatibility_key_for(first.tier),
        );
        let mut bytes = std::fs::read(&entry).expect("entry exists");
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
        std::fs::write(&entry, &bytes).expect("corrupt it");
        let third = rt.compile_file(path).await.expect("recompiles");
        assert_eq!(third.cache, CacheOutcome::Replaced, "{compiler:?}");
        // The replacement works and is trusted next time.
        assert_eq!(rt.info(&third).await.expect("info").name, "static");
        assert_eq!(
            rt.compile_file(path).await.expect("loads").cache,
            CacheOutcome::Hit
        );

        std::fs::write(&entry, b"short").expect("truncate it");
        assert_eq!(
            rt.compile_file(path).await.expect("recompiles").cache,
            CacheOutcome::Replaced
        );
    }
}

/// The product's path, `wasm-ccm run` and the kit alike: default engine options (tiered), a
/// cache directory, compile then load. Every later compile of the same bytes is a cache hit,
/// whether it comes at once in the same process (the Winch entry still being written), from
/// another runtime of the process, or after the driver swapped to its Cranelift build. A hit
/// means nothing was compiled: `CacheOutcome::Hit` is only ever the answer of a cache look-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_load_path_hits_the_cache_on_the_second_load() {
    let dir = tempfile::tempdir().expect("tempdir");
    let product = || {
        Runtime::new(RuntimeOptions {
            engine: EngineOptions::default(),
            cache_dir: Some(dir.path().to_path_buf()),
        })
        .expect("runtime")
    };
    let rt = product();
    assert_eq!(rt.engine().compiler(), Compiler::Tiered, "the default");
    let bytes = std::fs::read(STATIC_DRIVER).expect("driver built");

    // Compiling only (`wasm-ccm inspect`, `push`, the runtime bench): no driver is loaded, so no
    // background Cranelift build ever starts; the Winch build must still reach the cache.
    let first = rt.compile("static", bytes.clone()).await.expect("compiles");
    assert_eq!(
        (first.cache, first.tier),
        (CacheOutcome::Miss, Tier::Winch),
        "the positive control: the first compile really compiled"
    );
    let second = rt.compile("static", bytes.clone()).await.expect("loads");
    assert_eq!(
        (second.cache, second.tier),
        (CacheOutcome::Hit, Tier::Winch),
        "a compile right after the first"
    );
    let other = product()
        .compile("static", bytes.clone())
        .await
        .expect("loads");
    assert_eq!(other.cache, CacheOutcome::Hit, "another runtime, same dir");

    // Compile and load: the load starts the Cranelift build, which replaces the Winch entry. A
    // compile at any moment of that is a hit, of one tier or the other.
    let driver = rt
        .load(&second, DriverOptions::default())
        .await
        .expect("loads");
    let during = rt.compile("static", bytes.clone()).await.expect("loads");
    assert_eq!(
        during.cache,
        CacheOutcome::Hit,
        "during the background build"
    );
    let mut tier = driver.watch_tier();
    tokio::time::timeout(
        std::time::Duration::from_secs(120),
        tier.wait_for(|t| *t == Tier::Cranelift),
    )
    .await
    .expect("a hang detector: the swap to Cranelift never came")
    .expect("the driver is alive");
    let restarted = product().compile("static", bytes).await.expect("loads");
    assert_eq!(
        (restarted.cache, restarted.tier),
        (CacheOutcome::Hit, Tier::Cranelift),
        "a restart after the swap"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_wit_major_is_refused_naming_the_supported_versions() {
    let err = runtime()
        .compile_file(std::path::Path::new(FUTURE_MAJOR_DRIVER))
        .await
        .err()
        .expect("refused");
    match &err {
        HostError::UnsupportedWitVersion {
            found, supported, ..
        } => {
            assert_eq!(found, "9.0.0");
            assert!(supported.contains("0.2.x"), "{supported}");
        }
        other => panic!("expected UnsupportedWitVersion, got {other:?}"),
    }
    assert!(err.to_string().contains("wasm-ccm:provider@9.0.0"), "{err}");
}

/// A component exporting `wasm-ccm:provider/provider@<version>` with one function and nothing
/// else: enough for the host's version check, which reads only export names.
fn component_of_version(version: &str) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(component
  (core module $m (func (export "f")))
  (core instance $i (instantiate $m))
  (func $f (canon lift (core func $i "f")))
  (instance $p (export "info" (func $f)))
  (export "wasm-ccm:provider/provider@{version}" (instance $p)))"#
    ))
    .expect("valid component text")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_of_the_unreleased_development_contract_is_told_to_rebuild() {
    let err = runtime()
        .compile("old.wasm", component_of_version("0.1.0"))
        .await
        .err()
        .expect("refused");
    match &err {
        HostError::UnsupportedWitVersion { found, .. } => assert_eq!(found, "0.1.0"),
        other => panic!("expected UnsupportedWitVersion, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains("no release loads it") && message.contains("wasm-ccm:provider@0.2.0"),
        "{message}"
    );
    // The generic advice would point at a release that supports 0.1; none exists.
    assert!(!message.contains("release that supports 0.1"), "{message}");
}

/// `bytes` (a driver built against this host's contract, `0.2.<one digit>`) with every
/// `wasm-ccm:provider` interface name moved to `@0.2.<patch>`: the same length, so the
/// component stays valid; only its names change.
fn renamed_to_patch(bytes: &[u8], patch: u8) -> Vec<u8> {
    let current = format!("@{}", wasm_ccm_runtime::CONTRACT_VERSION);
    let from = current.as_bytes();
    assert_eq!(from.len(), 6, "a one-digit 0.2 patch");
    let mut out = bytes.to_vec();
    let mut renamed = 0;
    let mut i = 0;
    while i + from.len() <= out.len() {
        if &out[i..i + from.len()] == from && ends_with_interface_name(&out[..i]) {
            out[i + from.len() - 1] = b'0' + patch;
            renamed += 1;
        }
        i += 1;
    }
    assert!(renamed > 10, "renamed only {renamed} names");
    out
}

/// Whether `bytes` end in `wasm-ccm:provider/<interface>` (what precedes a version).
fn ends_with_interface_name(bytes: &[u8]) -> bool {
    let tail = &bytes[bytes.len().saturating_sub(40)..];
    let Some(at) = tail.windows(18).rposition(|w| w == b"wasm-ccm:provider/") else {
        return false;
    };
    tail[at + 18..]
        .iter()
        .all(|b| b.is_ascii_lowercase() || *b == b'-')
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_built_against_a_later_patch_of_0_2_loads_and_answers() {
    // The promise (wit/README.md, "Versioning"): a later 0.2.z only adds, so a driver built
    // against it loads in this host as long as it uses nothing the host lacks. The static
    // driver with every interface renamed to 0.2.9 is such a driver.
    let bytes = std::fs::read(STATIC_DRIVER).expect("static driver");
    let rt = runtime();
    let compiled = rt
        .compile("later.wasm", renamed_to_patch(&bytes, 9))
        .await
        .expect("a later 0.2 patch compiles");
    assert_eq!(compiled.surface.wit_version, "0.2.9");
    rt.link(&compiled).expect("links against the host's 0.2");
    let info = rt.info(&compiled).await.expect("info answers");
    assert_eq!(info.name, "static");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_patch_using_a_function_this_host_lacks_is_refused_at_load() {
    // `log.flush` does not exist in 0.2.0: such a driver is refused when it is linked, before
    // any of its code runs, naming what it needs.
    let bytes = wat::parse_str(
        r#"(component
  (import "wasm-ccm:provider/log@0.2.9" (instance $log (export "flush" (func))))
  (core module $m (func (export "f")))
  (core instance $i (instantiate $m))
  (func $f (canon lift (core func $i "f")))
  (instance $p (export "info" (func $f)))
  (export "wasm-ccm:provider/provider@0.2.9" (instance $p)))"#,
    )
    .expect("valid component text");
    let rt = runtime();
    let compiled = rt.compile("newer.wasm", bytes).await.expect("compiles");
    let err = rt.link(&compiled).expect_err("refused at link");
    let message = err.to_string();
    assert!(message.contains("flush"), "{message}");
    assert!(
        message.contains("0.2.9") && message.contains("upgrade wasm-ccm"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn things_that_are_not_components_are_refused_with_the_reason() {
    let core_module = b"\0asm\x01\0\0\0".to_vec();
    let err = runtime()
        .compile("core.wasm", core_module)
        .await
        .err()
        .expect("refused");
    assert!(matches!(err, HostError::NotAComponent { .. }), "{err:?}");
    assert!(err.to_string().contains("wasm32-wasip2"), "{err}");
    let html = b"<html><body>502 Bad Gateway</body></html>".to_vec();
    let err = runtime()
        .compile("page.wasm", html)
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("magic bytes"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_are_detected_from_the_component_type() {
    let s = compile(STATIC_DRIVER).await.surface;
    assert_eq!(s.wit_version, wasm_ccm_runtime::CONTRACT_VERSION);
    // Built against 0.2.1, it exports `environment` (the SDK's default answer).
    assert!(s.environment);
    assert_eq!(
        s.exports.names(),
        vec!["provider", "instances", "load-balancer", "routes"]
    );
    let h = compile(HOSTILE_DRIVER).await.surface;
    assert_eq!(h.exports.names(), vec!["provider", "instances"]);
    assert!(
        h.imports
            .iter()
            .any(|i| i.starts_with("wasm-ccm:provider/log@"))
    );
}
