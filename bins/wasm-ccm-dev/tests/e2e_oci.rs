//! End to end with a real registry (Debian's `docker-registry` on loopback): `wasm-ccm push`,
//! `wasm-ccm pull`, and `wasm-ccm run --driver oci://…`, including a restart from the cache
//! with the registry gone.

use std::process::{Command, Output};

mod common;

use common::*;
use sha2::{Digest, Sha256};
use wasm_ccm_sim::kube::KubeSim;
use wasm_ccm_test_tools::registry::{self, Registry};

fn wasm_ccm(args: &[&str]) -> Output {
    Command::new(wasm_ccm_test_tools::product::product_binary())
        .args(args)
        .env("WASM_CCM_LOG", "info")
        .output()
        .expect("run wasm-ccm")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushed_driver_runs_from_the_registry_and_restarts_from_the_cache_without_it() {
    let registry = Registry::start().expect("registry");
    let work = tempfile::tempdir().expect("tempdir");
    let cache = work.path().join("cache");
    let cache = cache.to_str().expect("utf-8 path");
    let tagged = format!("oci://{}/drivers/static:0.1.0", registry.host());

    let pushed = wasm_ccm(&[
        "--cache-dir",
        cache,
        "push",
        wasm_ccm_drivers::STATIC_DRIVER,
        &tagged,
    ]);
    assert!(pushed.status.success(), "{}", stderr(&pushed));
    let pinned = stdout(&pushed);
    assert!(pinned.starts_with(&format!("{tagged}@sha256:")), "{pinned}");
    assert!(
        stderr(&pushed).contains("pushed driver static 0.1.0"),
        "{}",
        stderr(&pushed)
    );

    // Pull by the pinned reference: the same bytes, written to the file.
    let file = work.path().join("pulled.wasm");
    let pulled = wasm_ccm(&[
        "--cache-dir",
        cache,
        "pull",
        &pinned,
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(pulled.status.success(), "{}", stderr(&pulled));
    let original = std::fs::read(wasm_ccm_drivers::STATIC_DRIVER).unwrap();
    assert_eq!(std::fs::read(&file).unwrap(), original);
    assert_eq!(stdout(&pulled), pinned);

    // Run from the tag: resolved to the digest, logged, and the node is initialised.
    let sim = KubeSim::start(localhost()).await.expect("sim");
    let (cloud, config) =
        static_cloud(vec![instance("a", "10.0.0.1"), instance("b", "10.0.0.2")]).await;
    // The controller has a cache of its own, so what it finds after the restart is what the
    // first run stored, not what `pull` stored.
    let run_cache = work.path().join("run-cache");
    let run_cache = run_cache.to_str().expect("utf-8 path");
    let cloud_url = cloud.url();
    let extra = [
        "--allow-egress",
        &cloud_url,
        "--configure-cloud-routes=false",
        "--leader-elect=false",
        "--cache-dir",
        run_cache,
    ];
    sim.create(node("a", None, true)).expect("node");
    let ccm = Ccm::start(&sim, &tagged, "static", &config, &extra);
    eventually("a initialised from the registry", || initialised(&sim, "a")).await;
    let log = ccm.log();
    assert!(
        log.contains("resolved") && log.contains(&pinned[pinned.len() - 71..]),
        "{log}"
    );
    drop(ccm);

    // The registry goes away; a restart with the pinned digest loads from the cache.
    drop(registry);
    sim.create(node("b", None, true)).expect("node");
    let ccm = Ccm::start(&sim, &pinned, "static", &config, &extra);
    eventually("b initialised with the registry gone", || {
        initialised(&sim, "b")
    })
    .await;
    assert!(ccm.log().contains("from_cache=true"), "{}", ccm.log());
    let layer = hex::encode(Sha256::digest(&original));
    assert!(
        std::path::Path::new(cache)
            .join("oci/blobs/sha256")
            .join(layer)
            .is_file()
    );
}

#[tokio::test]
async fn push_and_pull_refuse_bad_input_with_clear_errors() {
    let registry = Registry::start_with_auth().expect("registry");
    let work = tempfile::tempdir().expect("tempdir");
    let target = format!("oci://{}/drivers/static:1", registry.host());

    // Not a driver: refused before anything is sent.
    let text = work.path().join("driver.wasm");
    std::fs::write(&text, "not wasm").unwrap();
    let out = wasm_ccm(&["--no-cache", "push", text.to_str().unwrap(), &target]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("magic bytes"), "{}", stderr(&out));

    // No tag.
    let out = wasm_ccm(&[
        "--no-cache",
        "push",
        wasm_ccm_drivers::STATIC_DRIVER,
        &format!("oci://{}/drivers/static", registry.host()),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("neither a tag nor a digest"),
        "{}",
        stderr(&out)
    );

    // Credentials: none, then from a dockerconfigjson file.
    let out = wasm_ccm(&[
        "--no-cache",
        "push",
        wasm_ccm_drivers::STATIC_DRIVER,
        &target,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--registry-config"),
        "{}",
        stderr(&out)
    );
    let config = work.path().join("config.json");
    let auth = format!("{}:{}", registry::USER, registry::PASSWORD);
    std::fs::write(
        &config,
        serde_json::json!({"auths": {registry.host(): {"auth": base64_encode(auth.as_bytes())}}})
            .to_string(),
    )
    .unwrap();
    let creds = ["--registry-config", config.to_str().unwrap()];
    let out = wasm_ccm(
        &[
            &[
                "--no-cache",
                "push",
                wasm_ccm_drivers::STATIC_DRIVER,
                &target,
            ][..],
            &creds,
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", stderr(&out));

    // A pull into a directory that does not exist is refused before the registry is asked,
    // leaves nothing behind and says why.
    let missing_dir = work.path().join("no/such/dir/driver.wasm");
    let out = wasm_ccm(
        &[
            &[
                "--no-cache",
                "pull",
                &target,
                "-o",
                missing_dir.to_str().unwrap(),
            ][..],
            &creds,
        ]
        .concat(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--output") && stderr(&out).contains("cannot use the directory"),
        "{}",
        stderr(&out)
    );
    assert!(!work.path().join("no").exists(), "nothing is left behind");

    // A path is not a reference.
    let out = wasm_ccm(&["--no-cache", "pull", "/tmp/driver.wasm", "-o", "/dev/null"]);
    assert!(
        stderr(&out).contains("not an oci:// reference"),
        "{}",
        stderr(&out)
    );
}

fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
