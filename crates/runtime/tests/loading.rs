//! Loading drivers: the compile cache, version checks, refusal of things that are not drivers.

mod common;

use common::{compile, runtime};
use wasm_ccm_drivers::{FUTURE_MAJOR_DRIVER, HOSTILE_DRIVER, STATIC_DRIVER};
use wasm_ccm_runtime::{CacheOutcome, Compiler, EngineOptions, HostError, Runtime, RuntimeOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_load_hits_the_cache_and_a_corrupt_entry_is_recompiled() {
    // Each compiler's entries are verified alike (a tiered host writes both kinds).
    for compiler in [Compiler::Cranelift, Compiler::Winch] {
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
        assert_eq!(second.cache, CacheOutcome::Hit);
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
            assert!(supported.contains("0.1.x"), "{supported}");
        }
        other => panic!("expected UnsupportedWitVersion, got {other:?}"),
    }
    assert!(err.to_string().contains("wasm-ccm:provider@9.0.0"), "{err}");
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
    assert_eq!(s.wit_version, "0.1.0");
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
