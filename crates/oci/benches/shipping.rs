//! Benchmarks of shipping a driver through a registry (a bench binary, not a timed test): push,
//! a cold pull (manifest and layer over loopback HTTP into an empty cache), a pull by digest
//! from the cache, and the same through a tag (one manifest request, layer from the cache).
//! The registry is Debian's `docker-registry` on loopback, as in the tests.
//!
//! Run: `cargo bench -p wasm-ccm-oci --bench shipping`. Prints a Markdown table of medians.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use wasm_ccm_oci::{BlobCache, Client, ClientOptions, ComponentInfo, Reference};
use wasm_ccm_test_tools::registry::Registry;

const RUNS: usize = 21;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let registry = Registry::start().expect("registry");
    let client = Client::new(ClientOptions::default()).expect("client");
    println!(
        "| driver | size | push | cold pull | cached pull (digest) | pull by tag, layer cached |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, path) in [
        ("static", wasm_ccm_drivers::STATIC_DRIVER),
        ("cloudscale", wasm_ccm_drivers::CLOUDSCALE_DRIVER),
        ("cloudstack", wasm_ccm_drivers::CLOUDSTACK_DRIVER),
    ] {
        let wasm = std::fs::read(path).expect("driver");
        let mut push = Vec::new();
        let mut cold = Vec::new();
        let mut cached = Vec::new();
        let mut by_tag = Vec::new();
        for run in 0..RUNS {
            // A new repository per run, so every push uploads both blobs.
            let tagged =
                Reference::parse(&format!("oci://{}/bench/{name}-{run}:1", registry.host()))
                    .expect("reference");
            let started = Instant::now();
            let pushed = client
                .push(&tagged, &wasm, ComponentInfo::default(), BTreeMap::new())
                .await
                .expect("push");
            push.push(started.elapsed());

            let dir = tempfile::tempdir().expect("tempdir");
            let cache = BlobCache::new(dir.path());
            let started = Instant::now();
            let pulled = client
                .pull(&pushed.pinned, Some(&cache))
                .await
                .expect("pull");
            cold.push(started.elapsed());
            assert!(!pulled.from_cache);

            let started = Instant::now();
            let pulled = client
                .pull(&pushed.pinned, Some(&cache))
                .await
                .expect("pull");
            cached.push(started.elapsed());
            assert!(pulled.from_cache);

            let started = Instant::now();
            client.pull(&tagged, Some(&cache)).await.expect("pull");
            by_tag.push(started.elapsed());
        }
        println!(
            "| {name} | {} KiB | {} | {} | {} | {} |",
            wasm.len() / 1024,
            ms(median(push)),
            ms(median(cold)),
            ms(median(cached)),
            ms(median(by_tag))
        );
    }
}
