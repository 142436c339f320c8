//! Benchmark of a driver hot reload (a bench binary, not a timed test): the release `wasm-ccm
//! run` against the Kubernetes API simulator, its driver mounted like a ConfigMap volume. Each
//! round swaps the `..data` symlink to a new version and times until `/metrics` reports it in
//! service; the host's own `wasm_ccm_driver_load_duration_seconds` (read, compile, `info`,
//! `init`) is read as well. New bytes compile cold; a version seen before loads from the
//! compile cache.
//!
//! Run: `cargo bench -p wasm-ccm-dev --bench reload`. Prints a Markdown table of medians.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasm_ccm_sim::kube::KubeSim;
use wasm_ccm_test_tools::configmap::{ConfigMapVolume, with_custom_section};

const ROUNDS: usize = 11;

fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

async fn wait_in_service(http: &reqwest::Client, url: &str, sha: &str) -> f64 {
    let series =
        format!("wasm_ccm_driver_info{{driver=\"static\",version=\"0.1.0\",sha256=\"{sha}\"}}");
    let started = Instant::now();
    loop {
        if let Ok(r) = http.get(url).send().await
            && let Ok(text) = r.text().await
            && metric(&text, &series) == Some(1.0)
        {
            return metric(
                &text,
                "wasm_ccm_driver_load_duration_seconds{driver=\"static\"}",
            )
            .unwrap_or(f64::NAN);
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "reload did not happen"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let sim = KubeSim::start(([127, 0, 0, 1], 0).into())
        .await
        .expect("sim");
    let cache = tempfile::tempdir().expect("tempdir");
    let base = std::fs::read(wasm_ccm_drivers::STATIC_DRIVER).expect("driver");
    let mut volume = ConfigMapVolume::new(&base);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let config = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../drivers/static/examples/cloud-config.yaml");
    let mut child = Command::new(wasm_ccm_test_tools::product::product_binary())
        .arg("--cache-dir")
        .arg(cache.path())
        .args([
            "run",
            "--cloud-provider",
            "static",
            "--master",
            &sim.url(),
            "--leader-elect=false",
        ])
        .arg("--driver")
        .arg(volume.plugin())
        .arg("--cloud-config")
        .arg(&config)
        .args([
            "--driver-watch-interval",
            "10ms",
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
        ])
        .arg(port.to_string())
        .args(["--configure-cloud-routes=false"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("wasm-ccm");
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/metrics");
    wait_in_service(&http, &url, &hex::encode(Sha256::digest(&base))).await;

    // The same versions twice: compiled cold the first time, from the compile cache the second.
    let versions: Vec<Vec<u8>> = (1..=ROUNDS)
        .map(|n| with_custom_section(&base, "bench", n.to_string().as_bytes()))
        .collect();
    let mut results = Vec::new();
    for label in [
        "new version (cold compile)",
        "version seen before (compile cache)",
    ] {
        let mut seen = Vec::new();
        let mut loaded = Vec::new();
        for bytes in &versions {
            let sha = hex::encode(Sha256::digest(bytes));
            let started = Instant::now();
            volume.update(bytes);
            let load = wait_in_service(&http, &url, &sha).await;
            seen.push(started.elapsed().as_secs_f64());
            loaded.push(load);
        }
        results.push((label, median(seen), median(loaded)));
    }
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "| reload of the static driver ({} KiB) | swap → in service | load (read, compile, info, init) |",
        base.len() / 1024
    );
    println!("|---|---|---|");
    for (label, seen, loaded) in results {
        println!(
            "| {label} | {:.1} ms | {:.1} ms |",
            seen * 1e3,
            loaded * 1e3
        );
    }
}
