//! End to end: signed drivers under `wasm-ccm run --verify-key`. An OCI driver from a real
//! registry on loopback (Debian's `docker-registry`) runs when signed by the key and is refused
//! at startup otherwise, before the API server is contacted or anything is compiled; a driver
//! mounted like a ConfigMap (`plugin.wasm` and `plugin.wasm.sig` in one volume) is hot-reloaded
//! only with a matching signature.

use std::path::Path;
use std::process::{Command, Output};

mod common;
#[path = "../../../crates/oci/tests/support/registry_proxy.rs"]
mod registry_proxy;

use common::*;
use registry_proxy::RegistryProxy;
use sha2::{Digest, Sha256};
use wasm_ccm_oci::signature::sign_blob;
use wasm_ccm_oci::{PublicKey, SigningKey, pkcs8_pem};
use wasm_ccm_sim::kube::KubeSim;
use wasm_ccm_test_tools::configmap::{ConfigMapVolume, with_custom_section};
use wasm_ccm_test_tools::registry::Registry;

fn wasm_ccm(args: &[&str]) -> Output {
    Command::new(wasm_ccm_test_tools::product::product_binary())
        .args(args)
        .env("WASM_CCM_LOG", "info")
        .env_remove("COSIGN_PASSWORD")
        .output()
        .expect("run wasm-ccm")
}

fn shown(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A new key: the signing half, and the paths of `NAME.key` (PKCS#8 PEM) and `NAME.pub` in `dir`.
fn key_pair(dir: &Path, name: &str) -> (SigningKey, String, String) {
    let der = SigningKey::generate_pkcs8().expect("key");
    let key = SigningKey::from_pkcs8_der(&der).expect("key");
    let private = dir.join(format!("{name}.key"));
    let public = dir.join(format!("{name}.pub"));
    std::fs::write(&private, pkcs8_pem(&der)).expect("write key");
    std::fs::write(&public, key.public_key().to_pem()).expect("write key");
    assert_eq!(
        PublicKey::from_pem(&std::fs::read_to_string(&public).unwrap()).unwrap(),
        key.public_key()
    );
    (
        key,
        private.display().to_string(),
        public.display().to_string(),
    )
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_starts_a_signed_oci_driver_and_refuses_an_unsigned_one_before_anything_runs() {
    let registry = Registry::start().expect("registry");
    let work = tempfile::tempdir().expect("tempdir");
    let (_, key, public) = key_pair(work.path(), "ci");
    let (_, _, other_public) = key_pair(work.path(), "other");
    let push_cache = work.path().join("push-cache");
    let push_cache = push_cache.to_str().unwrap();

    // The same driver in two repositories: pushed and signed in one step, and pushed only.
    let out = wasm_ccm(&[
        "--cache-dir",
        push_cache,
        "push",
        "--sign-key",
        &key,
        wasm_ccm_drivers::STATIC_DRIVER,
        &format!("oci://{}/drivers/signed:0.1.0", registry.host()),
    ]);
    assert!(out.status.success(), "{}", shown(&out));
    let signed = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let out = wasm_ccm(&[
        "--cache-dir",
        push_cache,
        "push",
        wasm_ccm_drivers::STATIC_DRIVER,
        &format!("oci://{}/drivers/unsigned:0.1.0", registry.host()),
    ]);
    assert!(out.status.success(), "{}", shown(&out));
    let unsigned = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let layer = sha256(&std::fs::read(wasm_ccm_drivers::STATIC_DRIVER).unwrap());
    // `run` reads the registry through a recording proxy: its log is what shows which blobs
    // were fetched.
    let proxy = RegistryProxy::start(registry.addr());
    let (signed, unsigned) = (
        signed.replace(&registry.host(), &proxy.host()),
        unsigned.replace(&registry.host(), &proxy.host()),
    );
    let layer_gets = |requests: &[String]| {
        requests
            .iter()
            .filter(|r| r.starts_with("GET ") && r.ends_with(&format!("/blobs/sha256:{layer}")))
            .count()
    };

    let (cloud, config) = static_cloud(vec![instance("a", "10.0.0.1")]).await;
    let cloud_url = cloud.url();
    let flags = |cache: &str, public: &str| -> Vec<String> {
        [
            "--allow-egress",
            &cloud_url,
            "--configure-cloud-routes=false",
            "--leader-elect=false",
            "--cache-dir",
            cache,
            "--verify-key",
            public,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };

    // Signed by the key: verified, pulled, and the controllers come up.
    let sim = KubeSim::start(localhost()).await.expect("sim");
    sim.create(node("a", None, true)).expect("node");
    let cache = work.path().join("run-cache");
    let extra = flags(cache.to_str().unwrap(), &public);
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let ccm = Ccm::start(&sim, &signed, "static", &config, &extra);
    eventually("a initialised by the signed driver", || {
        initialised(&sim, "a")
    })
    .await;
    let log = ccm.log();
    assert!(
        log.contains("driver signature verified") && log.contains("driver loaded"),
        "{log}"
    );
    drop(ccm);
    // Control: the proxy's log shows the signed driver's Wasm layer being fetched.
    assert_eq!(layer_gets(&proxy.requests()), 1, "{:?}", proxy.requests());

    // Unsigned, then signed by a key the policy does not name: refused at startup with the
    // reason, exit 2; the API server was never contacted, the Wasm layer never fetched, no
    // driver compiled or loaded.
    for (reference, public, reason) in [
        (&unsigned, &public, "no signature was found"),
        (&signed, &other_public, "does not verify with this key"),
    ] {
        let sim = KubeSim::start(localhost()).await.expect("sim");
        let cache = tempfile::tempdir().expect("tempdir");
        let extra = flags(cache.path().to_str().unwrap(), public);
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let before = proxy.requests().len();
        let mut ccm = Ccm::start(&sim, reference, "static", &config, &extra);
        assert_eq!(ccm.wait_exit(), Some(2), "{}", ccm.log());
        let log = ccm.log();
        assert!(
            log.contains("signature verification failed") && log.contains(reason),
            "{reason}: {log}"
        );
        assert!(
            log.contains(&reference[reference.len() - 71..]),
            "the message names the digest: {log}"
        );
        for never in ["driver pulled", "driver loaded", "compiled"] {
            assert!(!log.contains(never), "{never:?} before verification: {log}");
        }
        assert_eq!(
            sim.request_counts().total(),
            0,
            "the API server was contacted before the driver was verified"
        );
        let requests = &proxy.requests()[before..];
        assert!(
            requests.iter().any(|r| r.contains("/manifests/sha256-")),
            "the signatures were not looked up through the proxy: {requests:?}"
        );
        assert_eq!(
            layer_gets(requests),
            0,
            "the Wasm layer was fetched before verification: {requests:?}"
        );
    }
}

/// The static driver's `wasm-ccm run`, watching the volume every 50 ms with a signature policy.
fn start_watching(
    sim: &KubeSim,
    volume: &ConfigMapVolume,
    config: &serde_json::Value,
    cloud: &str,
    port: u16,
    public: &str,
) -> Ccm {
    let port = port.to_string();
    let driver = volume.plugin().display().to_string();
    let signature = volume.key("plugin.wasm.sig").display().to_string();
    Ccm::start_with_env(
        sim,
        &driver,
        "static",
        config,
        &[
            "--allow-egress",
            cloud,
            "--configure-cloud-routes=false",
            "--leader-elect=false",
            "--secure-port",
            &port,
            "--bind-address",
            "127.0.0.1",
            "--driver-watch-interval",
            "50ms",
            "--verify-key",
            public,
            "--driver-signature",
            &signature,
        ],
        &[("POD_NAME", "wasm-ccm-0"), ("POD_NAMESPACE", "kube-system")],
    )
}

fn info_series(wasm: &[u8]) -> String {
    format!(
        "wasm_ccm_driver_info{{driver=\"static\",version=\"0.1.0\",sha256=\"{}\"}}",
        sha256(wasm)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_without_a_matching_signature_is_refused_and_a_signed_one_is_swapped_in() {
    let sim = KubeSim::start(localhost()).await.expect("sim");
    let (cloud, config) = static_cloud(vec![
        instance("a", "10.0.0.1"),
        instance("b", "10.0.0.2"),
        instance("c", "10.0.0.3"),
    ])
    .await;
    let work = tempfile::tempdir().expect("tempdir");
    let (signer, _, public) = key_pair(work.path(), "ci");
    let (stranger, _, _) = key_pair(work.path(), "stranger");
    let signature = |key: &SigningKey, wasm: &[u8]| {
        format!("{}\n", sign_blob(key, wasm).expect("sign")).into_bytes()
    };

    let v1 = std::fs::read(wasm_ccm_drivers::STATIC_DRIVER).expect("static driver");
    let mut volume = ConfigMapVolume::with_keys(&[
        ("plugin.wasm", &v1),
        ("plugin.wasm.sig", &signature(&signer, &v1)),
    ]);
    let port = free_port();
    let _ccm = start_watching(&sim, &volume, &config, &cloud.url(), port, &public);
    sim.create(node("a", None, true)).expect("node");
    eventually("a initialised by v1", || initialised(&sim, "a")).await;
    metric_becomes(port, &info_series(&v1), 1.0).await;

    // New bytes under the old signature, then new bytes signed by a key the policy does not
    // name: each refused for its signature, with an event; v1 keeps serving.
    let v2 = with_custom_section(&v1, "wasm-ccm-test-version", b"2");
    let v2b = with_custom_section(&v1, "wasm-ccm-test-version", b"2b");
    let refusals = [
        (v2.clone(), signature(&signer, &v1), "the file was altered"),
        (
            v2b.clone(),
            signature(&stranger, &v2b),
            "does not verify with this key",
        ),
    ];
    for (count, (wasm, sig, _)) in refusals.iter().enumerate() {
        volume.update_keys(&[("plugin.wasm", wasm), ("plugin.wasm.sig", sig)]);
        metric_becomes(
            port,
            "wasm_ccm_driver_reload_refusals_total{driver=\"static\",reason=\"signature\"}",
            (count + 1) as f64,
        )
        .await;
    }
    eventually("a DriverReloadRefused event per refusal", || {
        events(&sim, "wasm-ccm-0", "DriverReloadRefused").len() == refusals.len()
    })
    .await;
    let refused = events(&sim, "wasm-ccm-0", "DriverReloadRefused");
    for (_, _, reason) in &refusals {
        assert!(
            refused.iter().any(|e| {
                let note = e["note"].as_str().unwrap_or_default();
                e["type"] == "Warning"
                    && note.contains("failed signature verification")
                    && note.contains(reason)
                    && note.contains("keeps running")
            }),
            "no refusal saying {reason:?}: {refused:?}"
        );
    }
    sim.create(node("b", None, true)).expect("node");
    eventually("b initialised by v1 after the refusals", || {
        initialised(&sim, "b")
    })
    .await;
    let text = scrape(port).await;
    assert_eq!(metric(&text, &info_series(&v1)), Some(1.0), "{text}");
    assert_eq!(
        metric(
            &text,
            "wasm_ccm_driver_loads_total{driver=\"static\",trigger=\"reload\"}"
        ),
        None,
        "{text}"
    );

    // A new version with its own signature by the key: swapped in.
    let v3 = with_custom_section(&v1, "wasm-ccm-test-version", b"3");
    volume.update_keys(&[
        ("plugin.wasm", &v3),
        ("plugin.wasm.sig", &signature(&signer, &v3)),
    ]);
    metric_becomes(port, &info_series(&v3), 1.0).await;
    metric_becomes(
        port,
        "wasm_ccm_driver_loads_total{driver=\"static\",trigger=\"reload\"}",
        1.0,
    )
    .await;
    sim.create(node("c", None, true)).expect("node");
    eventually("c initialised by v3", || initialised(&sim, "c")).await;
    eventually("a DriverReloaded event", || {
        !events(&sim, "wasm-ccm-0", "DriverReloaded").is_empty()
    })
    .await;
    let text = scrape(port).await;
    assert_eq!(metric(&text, &info_series(&v1)), None, "{text}");
    assert_eq!(
        metric(
            &text,
            "wasm_ccm_driver_reload_refusals_total{driver=\"static\",reason=\"signature\"}"
        ),
        Some(2.0),
        "{text}"
    );
}
