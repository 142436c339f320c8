//! cosign key-based signatures against a real registry (Debian's `docker-registry` on
//! loopback, which has no referrers API, so the `sha256-….sig` tag scheme is what is found):
//! the right key passes; every bad artifact is refused with a message naming what failed, and
//! the registry's request log (a recording proxy in front of it) shows the Wasm layer was never
//! asked for; a restart verifies from the cache with the registry gone.

#[path = "support/registry_proxy.rs"]
mod registry_proxy;

use std::collections::BTreeMap;

use registry_proxy::RegistryProxy;

use base64::Engine as _;
use wasm_ccm_oci::signature::{
    SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE, signature_tag, simple_signing_payload,
};
use wasm_ccm_oci::{
    BlobCache, Client, ClientOptions, ComponentInfo, Descriptor, Manifest, OCI_MANIFEST, Policy,
    Reference, SigningKey, digest_of,
};
use wasm_ccm_test_tools::registry::Registry;

fn static_driver() -> Vec<u8> {
    std::fs::read(wasm_ccm_drivers::STATIC_DRIVER)
        .expect("the build script built the static driver")
}

fn info() -> ComponentInfo {
    ComponentInfo {
        exports: vec!["wasm-ccm:provider/provider@0.2.0".into()],
        imports: vec![],
    }
}

fn client() -> Client {
    Client::new(ClientOptions::default()).unwrap()
}

fn key() -> SigningKey {
    SigningKey::from_pkcs8_der(&SigningKey::generate_pkcs8().unwrap()).unwrap()
}

fn policy_of(key: &SigningKey) -> Policy {
    Policy::from_keys(vec![key.public_key()])
}

async fn pushed(registry: &Registry, path: &str, wasm: &[u8]) -> Reference {
    let tagged = Reference::parse(&format!("oci://{}/{path}", registry.host())).unwrap();
    client()
        .push(&tagged, wasm, info(), BTreeMap::new())
        .await
        .unwrap()
        .pinned
}

#[tokio::test]
async fn signed_drivers_verify_and_pull_then_restart_from_the_cache_with_the_registry_gone() {
    let registry = Registry::start().unwrap();
    let wasm = static_driver();
    let pinned = pushed(&registry, "drivers/static:0.1.0", &wasm).await;
    let signer = key();
    let signed = client()
        .sign(&pinned, &signer, &BTreeMap::new())
        .await
        .unwrap();
    assert_eq!(
        signed.signature_reference.tag.as_deref(),
        Some(signature_tag(pinned.digest.as_deref().unwrap()).as_str())
    );
    // A second signer adds a layer; the first signature stays.
    let second = key();
    client()
        .sign(&pinned, &second, &BTreeMap::new())
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let cache = BlobCache::new(dir.path());
    let both = Policy::from_keys(vec![signer.public_key(), second.public_key()]);
    let started = std::time::Instant::now();
    let (pulled, verified) = client()
        .pull_verified(&pinned, Some(&cache), &both)
        .await
        .unwrap();
    eprintln!("cold verification and pull: {:?}", started.elapsed());
    assert_eq!(pulled.wasm, wasm);
    assert!(!verified.from_cache);
    assert_eq!(verified.verdict.matched.len(), 2, "{:?}", verified.verdict);

    // By tag too: the tag is resolved, the digest it names is what is verified.
    let by_tag =
        Reference::parse(&format!("oci://{}/drivers/static:0.1.0", registry.host())).unwrap();
    let (pulled, _) = client()
        .pull_verified(&by_tag, None, &policy_of(&signer))
        .await
        .unwrap();
    assert_eq!(pulled.pinned.digest, pinned.digest);

    // Restart: the registry is gone, the cache has everything, the signatures verify again.
    drop(registry);
    let started = std::time::Instant::now();
    let (pulled, verified) = client()
        .pull_verified(&pinned, Some(&cache), &both)
        .await
        .unwrap();
    eprintln!("cached verification and pull: {:?}", started.elapsed());
    assert!(verified.from_cache && pulled.from_cache);
    assert_eq!(pulled.wasm, wasm);
}

/// `reference` read through `proxy` instead of the registry itself.
fn via(proxy: &RegistryProxy, reference: &Reference) -> Reference {
    Reference {
        registry: proxy.host(),
        ..reference.clone()
    }
}

/// The GETs of the blob `digest` among `requests`.
fn blob_gets(requests: &[String], digest: &str) -> usize {
    let tail = format!("/blobs/{digest}");
    requests
        .iter()
        .filter(|r| r.starts_with("GET ") && r.ends_with(&tail))
        .count()
}

/// The refusal for `reference` (read through `proxy`) under `policy`, which must name
/// `expect`; the registry's request log shows the signatures were looked up and the Wasm
/// layer never asked for.
async fn refused(proxy: &RegistryProxy, reference: &Reference, policy: &Policy, expect: &str) {
    let dir = tempfile::tempdir().unwrap();
    let cache = BlobCache::new(dir.path());
    let before = proxy.requests().len();
    let e = client()
        .pull_verified(&via(proxy, reference), Some(&cache), policy)
        .await
        .map(|_| ())
        .unwrap_err();
    let text = format!("{e:#}");
    assert!(text.contains(expect), "expected {expect:?} in: {text}");
    assert!(text.contains("signature verification failed"), "{text}");
    assert!(
        text.contains("wasm-ccm sign --key"),
        "the message says what to do: {text}"
    );
    let requests = &proxy.requests()[before..];
    let tag = signature_tag(reference.digest.as_deref().unwrap());
    assert!(
        requests
            .iter()
            .any(|r| r.ends_with(&format!("/manifests/{tag}"))),
        "the signatures were not looked up through the proxy: {requests:?}"
    );
    assert_eq!(
        blob_gets(requests, &digest_of(&static_driver())),
        0,
        "the Wasm layer was fetched before verification: {requests:?}"
    );
}

#[tokio::test]
async fn every_bad_artifact_is_refused_naming_what_failed() {
    let registry = Registry::start().unwrap();
    let proxy = RegistryProxy::start(registry.addr());
    let wasm = static_driver();
    let signer = key();
    let policy = policy_of(&signer);

    // Control: a signed driver pulled through the proxy shows up in its log, the Wasm layer
    // fetched once, after the signature lookup.
    let good = pushed(&registry, "drivers/good:1", &wasm).await;
    client()
        .sign(&good, &signer, &BTreeMap::new())
        .await
        .unwrap();
    let (pulled, _) = client()
        .pull_verified(&via(&proxy, &good), None, &policy)
        .await
        .unwrap();
    assert_eq!(pulled.wasm, wasm);
    let requests = proxy.requests();
    let tag = signature_tag(good.digest.as_deref().unwrap());
    let looked_up = requests
        .iter()
        .position(|r| r.ends_with(&format!("/manifests/{tag}")));
    let fetched = requests
        .iter()
        .position(|r| r.ends_with(&format!("/blobs/{}", digest_of(&wasm))));
    assert!(
        matches!((looked_up, fetched), (Some(l), Some(f)) if l < f),
        "{requests:?}"
    );
    assert_eq!(blob_gets(&requests, &digest_of(&wasm)), 1, "{requests:?}");

    // 1. Unsigned.
    let unsigned = pushed(&registry, "drivers/unsigned:1", &wasm).await;
    refused(&proxy, &unsigned, &policy, "no signature was found").await;

    // 2. Signed by another key.
    let wrong = pushed(&registry, "drivers/wrong-key:1", &wasm).await;
    client()
        .sign(&wrong, &key(), &BTreeMap::new())
        .await
        .unwrap();
    refused(&proxy, &wrong, &policy, "does not verify with this key").await;

    // 3. A valid signature of another artifact copied under this one's tag.
    let mut other_wasm = wasm.clone();
    other_wasm.extend_from_slice(b"\0");
    let victim = pushed(&registry, "drivers/copied:1", &wasm).await;
    let other = pushed(&registry, "drivers/copied:2", &other_wasm).await;
    client()
        .sign(&other, &signer, &BTreeMap::new())
        .await
        .unwrap();
    copy_signature(&registry, &other, &victim).await;
    refused(&proxy, &victim, &policy, "it signs the manifest").await;

    // 4. A tampered payload (the signature no longer matches it).
    let tampered = pushed(&registry, "drivers/tampered:1", &wasm).await;
    push_signature(&registry, &tampered, |payload| {
        let sig = signer.sign(&payload).unwrap();
        let mut text = String::from_utf8(payload).unwrap();
        text = text.replace("\"optional\":null", "\"optional\":{\"env\":\"prod\"}");
        (
            text.into_bytes(),
            base64::engine::general_purpose::STANDARD.encode(sig),
        )
    })
    .await;
    refused(&proxy, &tampered, &policy, "payload was altered").await;

    // 5. A signature annotation that is not base64.
    let garbage = pushed(&registry, "drivers/garbage:1", &wasm).await;
    push_signature(&registry, &garbage, |payload| {
        (payload, "%%% not base64".into())
    })
    .await;
    refused(&proxy, &garbage, &policy, "not base64").await;

    // 6. Wrong annotations for a policy that wants them.
    let annotated = pushed(&registry, "drivers/annotated:1", &wasm).await;
    let annotations = BTreeMap::from([("env".to_string(), "dev".to_string())]);
    client()
        .sign(&annotated, &signer, &annotations)
        .await
        .unwrap();
    let pem: String = signer
        .public_key()
        .to_pem()
        .lines()
        .map(|l| format!("      {l}\n"))
        .collect();
    let wants_prod = Policy::parse(&format!(
        "apiVersion: v1\nallOf:\n  - kind: pubKey\n    owner: ci\n    key: |\n{pem}    annotations:\n      env: prod\n"
    ))
    .unwrap();
    refused(&proxy, &annotated, &wants_prod, "annotation env is \"dev\"").await;

    // 7. anyOf with too few matches.
    let other_pem: String = key()
        .public_key()
        .to_pem()
        .lines()
        .map(|l| format!("        {l}\n"))
        .collect();
    let two_of = Policy::parse(&format!(
        "apiVersion: v1\nanyOf:\n  minimumMatches: 2\n  signatures:\n    - kind: pubKey\n      key: |\n{}    - kind: pubKey\n      key: |\n{other_pem}",
        pem.lines().map(|l| format!("  {l}\n")).collect::<String>()
    ))
    .unwrap();
    refused(
        &proxy,
        &annotated,
        &two_of,
        "anyOf needs 2 of 2 entries and 1 matched",
    )
    .await;

    // 8. A tampered layer behind a valid signature: the manifest is signed, the registry
    //    serves other bytes for the layer. The digest check anchored in the signed manifest
    //    refuses it.
    let swapped = pushed(&registry, "drivers/swapped:1", &wasm).await;
    client()
        .sign(&swapped, &signer, &BTreeMap::new())
        .await
        .unwrap();
    // Control: before the layer is tampered with, the signed artifact pulls.
    client()
        .pull_verified(&swapped, None, &policy)
        .await
        .unwrap();
    let blob = registry
        .storage()
        .join("docker/registry/v2/blobs/sha256")
        .join(&digest_of(&wasm)["sha256:".len()..][..2])
        .join(&digest_of(&wasm)["sha256:".len()..])
        .join("data");
    let mut bytes = std::fs::read(&blob).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&blob, &bytes).unwrap();
    let e = client()
        .pull_verified(&swapped, None, &policy)
        .await
        .map(|_| ())
        .unwrap_err();
    // The layer's digest check refused it, not the manifest's (which is untouched).
    let text = format!("{e:#}");
    assert!(
        text.contains(&format!(
            "the Wasm layer {} hashes to {}: refusing it",
            digest_of(&wasm),
            digest_of(&bytes)
        )),
        "{text}"
    );
}

/// Copies `from`'s signature manifest to `to`'s signature tag.
async fn copy_signature(registry: &Registry, from: &Reference, to: &Reference) {
    let tag = signature_tag(from.digest.as_deref().unwrap());
    let url = format!(
        "http://{}/v2/{}/manifests/{tag}",
        registry.host(),
        from.repository
    );
    let manifest = reqwest::Client::new()
        .get(&url)
        .header("accept", OCI_MANIFEST)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let manifest: Manifest = serde_json::from_slice(&manifest).unwrap();
    // The blobs are in another repository: push them again with the manifest.
    let mut blobs = Vec::new();
    for d in manifest.config.iter().chain(&manifest.layers) {
        let url = format!(
            "http://{}/v2/{}/blobs/{}",
            registry.host(),
            from.repository,
            d.digest
        );
        blobs.push(
            reqwest::get(&url)
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap()
                .to_vec(),
        );
    }
    let target = Reference {
        tag: Some(signature_tag(to.digest.as_deref().unwrap())),
        digest: None,
        ..to.clone()
    };
    let refs: Vec<&[u8]> = blobs.iter().map(Vec::as_slice).collect();
    client()
        .push_manifest(
            &target,
            OCI_MANIFEST,
            &serde_json::to_vec(&manifest).unwrap(),
            &refs,
        )
        .await
        .unwrap();
}

/// Pushes a signature manifest for `reference` whose one layer `make` builds from the honest
/// payload: (payload bytes, signature annotation).
async fn push_signature(
    registry: &Registry,
    reference: &Reference,
    make: impl FnOnce(Vec<u8>) -> (Vec<u8>, String),
) {
    let digest = reference.digest.as_deref().unwrap();
    let honest = simple_signing_payload(
        &format!("{}/{}", registry.host(), reference.repository),
        digest,
        &BTreeMap::new(),
    );
    let (payload, signature) = make(honest);
    let config = b"{}".to_vec();
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(OCI_MANIFEST.into()),
        config: Some(Descriptor {
            media_type: "application/vnd.oci.image.config.v1+json".into(),
            digest: digest_of(&config),
            size: config.len() as u64,
            annotations: BTreeMap::new(),
            platform: None,
        }),
        layers: vec![Descriptor {
            media_type: SIMPLE_SIGNING_MEDIA_TYPE.into(),
            digest: digest_of(&payload),
            size: payload.len() as u64,
            annotations: BTreeMap::from([(SIGNATURE_ANNOTATION.to_string(), signature)]),
            platform: None,
        }],
        manifests: vec![],
        annotations: BTreeMap::new(),
    };
    let target = Reference {
        tag: Some(signature_tag(digest)),
        digest: None,
        ..reference.clone()
    };
    client()
        .push_manifest(
            &target,
            OCI_MANIFEST,
            &serde_json::to_vec(&manifest).unwrap(),
            &[payload.as_slice(), config.as_slice()],
        )
        .await
        .unwrap();
}
