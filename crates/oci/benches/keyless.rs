//! CPU cost of checking one signature against a policy (a bench binary, not a timed test):
//! key-based (one ECDSA P-256 verification) and keyless (the signature with the certificate's
//! key, the Rekor SET, the hashedrekord body, the certificate path to the trust root with
//! rustls-webpki, the identity), over signature layers already in memory: what a start adds
//! per driver beside the registry round trips, and what a restart from the cache costs.
//!
//! Run: `cargo bench -p wasm-ccm-oci --bench keyless`. Prints a Markdown table of medians.

#[path = "../tests/support/fake_sigstore.rs"]
mod fake_sigstore;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fake_sigstore::{FakeSigstore, LeafSpec};
use wasm_ccm_oci::keyless::{
    BUNDLE_ANNOTATION, CERTIFICATE_ANNOTATION, CHAIN_ANNOTATION, Material,
};
use wasm_ccm_oci::signature::{SignatureLayer, Signed, simple_signing_payload};
use wasm_ccm_oci::{Policy, SigningKey, TrustRoot};

const RUNS: usize = 2_000;

fn per_run(policy: &Policy, digest: &str, layers: &[SignatureLayer]) -> Duration {
    // Warm up, then the median of batches of 100.
    for _ in 0..100 {
        policy.evaluate(digest, layers).expect("verifies");
    }
    let mut batches = Vec::new();
    for _ in 0..RUNS / 100 {
        let started = Instant::now();
        for _ in 0..100 {
            policy.evaluate(digest, layers).expect("verifies");
        }
        batches.push(started.elapsed() / 100);
    }
    batches.sort();
    batches[batches.len() / 2]
}

fn main() {
    let digest = format!("sha256:{}", "ab".repeat(32));
    let payload = simple_signing_payload("registry.example/drivers/x", &digest, &BTreeMap::new());

    let key = SigningKey::from_pkcs8_der(&SigningKey::generate_pkcs8().unwrap()).unwrap();
    let key_layer = SignatureLayer {
        signed: Signed::Payload,
        signature: Ok(key.sign(&payload).unwrap()),
        payload: payload.clone(),
        origin: "bench".into(),
        keyless: Material::default(),
    };
    let key_policy = Policy::from_keys(vec![key.public_key()]);

    let fake = FakeSigstore::new();
    let leaf = fake.leaf(&LeafSpec::email(
        "ci@example.com",
        "https://accounts.example.com",
    ));
    let signature = leaf.key.sign(&payload).unwrap();
    let annotations: BTreeMap<&str, String> = [
        (CERTIFICATE_ANNOTATION, leaf.pem.clone()),
        (CHAIN_ANNOTATION, fake.chain_pem()),
        (
            BUNDLE_ANNOTATION,
            fake.bundle(&payload, &signature, &leaf.pem),
        ),
    ]
    .into_iter()
    .collect();
    let keyless_layer = SignatureLayer {
        signed: Signed::Payload,
        signature: Ok(signature),
        payload,
        origin: "bench".into(),
        keyless: Material {
            certificate: annotations.get(CERTIFICATE_ANNOTATION).cloned(),
            chain: annotations.get(CHAIN_ANNOTATION).cloned(),
            bundle: annotations.get(BUNDLE_ANNOTATION).cloned(),
        },
    };
    let yaml = "apiVersion: v1\nallOf:\n  - kind: genericIssuer\n    issuer: https://accounts.example.com\n    subject:\n      equal: ci@example.com\n";
    let started = Instant::now();
    let root = TrustRoot::parse(fake.trusted_root(true).as_bytes()).unwrap();
    let parse_root = started.elapsed();
    let keyless_policy = Policy::parse(yaml).unwrap().with_trust_root(root);
    let no_logs_policy = Policy::parse(yaml)
        .unwrap()
        .with_trust_root(TrustRoot::parse(fake.trusted_root(false).as_bytes()).unwrap());

    println!("| check (one signature layer, in memory) | median |");
    println!("|---|---|");
    let us = |d: Duration| format!("{:.1} µs", d.as_secs_f64() * 1e6);
    println!(
        "| key-based (`pubKey`) | {} |",
        us(per_run(
            &key_policy,
            &digest,
            std::slice::from_ref(&key_layer)
        ))
    );
    println!(
        "| keyless, trust root with a Rekor log (SET + body + path at integratedTime) | {} |",
        us(per_run(
            &keyless_policy,
            &digest,
            std::slice::from_ref(&keyless_layer)
        ))
    );
    println!(
        "| keyless, trust root without logs (path at now) | {} |",
        us(per_run(
            &no_logs_policy,
            &digest,
            std::slice::from_ref(&keyless_layer)
        ))
    );
    println!(
        "| parsing trusted_root.json (once per start) | {} |",
        us(parse_root)
    );
}
