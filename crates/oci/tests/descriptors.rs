//! Every object read by descriptor is checked against the descriptor's size as well as its
//! digest (OCI image-spec, descriptor.md: "Content whose size does not match SHOULD NOT be
//! trusted"), from the registry and from the cache, and every refusal names the object that
//! failed. A registry listing thousands of signatures gets one bounded refusal line that says
//! how many were checked and how many were not.
//!
//! The registry is Debian's `docker-registry` (distribution 2.8) on loopback, which stores
//! manifests whose descriptors lie about sizes (it checks only that the blobs exist), so each
//! lie is served as a real registry would serve it. A recording proxy in front of it answers
//! the referrers API, which distribution 2.8 lacks, and counts what the client fetched.

#[path = "support/registry_proxy.rs"]
mod registry_proxy;

use std::collections::BTreeMap;

use base64::Engine as _;
use registry_proxy::RegistryProxy;
use wasm_ccm_oci::signature::{
    COSIGN_SIGNATURE_ARTIFACT_TYPE, SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE, signature_tag,
    simple_signing_payload,
};
use wasm_ccm_oci::{
    BlobCache, Client, ClientOptions, ComponentInfo, Descriptor, Manifest, OCI_INDEX, OCI_MANIFEST,
    Platform, Policy, Reference, SigningKey, digest_of, pack,
};
use wasm_ccm_test_tools::registry::Registry;

fn client() -> Client {
    Client::new(ClientOptions::default()).unwrap()
}

fn key() -> SigningKey {
    SigningKey::from_pkcs8_der(&SigningKey::generate_pkcs8().unwrap()).unwrap()
}

fn info() -> ComponentInfo {
    ComponentInfo {
        exports: vec!["wasm-ccm:provider/provider@0.2.0".into()],
        imports: vec![],
    }
}

fn reference(host: &str, path: &str) -> Reference {
    Reference::parse(&format!("oci://{host}/{path}")).unwrap()
}

/// `reference` read through `proxy` instead of the registry itself.
fn via(proxy: &RegistryProxy, reference: &Reference) -> Reference {
    Reference {
        registry: proxy.host(),
        ..reference.clone()
    }
}

fn refusal<T>(result: anyhow::Result<T>) -> String {
    match result {
        Ok(_) => panic!("accepted, but it should have been refused"),
        Err(e) => format!("{e:#}"),
    }
}

/// Pushes `wasm` in the CNCF layout under `path` (`repo:tag`), its layer descriptor saying
/// `layer_size` bytes. Returns the reference pinned to the manifest's digest.
async fn push_with_layer_size(
    registry: &Registry,
    path: &str,
    wasm: &[u8],
    layer_size: u64,
) -> Reference {
    let packed = pack(wasm, info(), None, BTreeMap::new());
    let mut manifest: Manifest = serde_json::from_slice(&packed.manifest).unwrap();
    manifest.layers[0].size = layer_size;
    let bytes = serde_json::to_vec(&manifest).unwrap();
    let target = reference(&registry.host(), path);
    let digest = client()
        .push_manifest(&target, OCI_MANIFEST, &bytes, &[&packed.config, wasm])
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    target.pinned(&digest)
}

#[tokio::test]
async fn a_wasm_layer_whose_size_is_not_its_descriptors_is_refused_from_the_registry_and_the_cache()
{
    let registry = Registry::start().unwrap();
    let wasm = b"\0asm\x0d\0\x01\0 a stand-in component: pull never compiles it".to_vec();
    let layer = digest_of(&wasm);
    let len = wasm.len() as u64;

    // Control: the honest descriptor pulls, from the registry and again from the cache (which
    // now holds the layer the lying manifests below point at).
    let honest = push_with_layer_size(&registry, "drivers/sized:honest", &wasm, len).await;
    let dir = tempfile::tempdir().unwrap();
    let cache = BlobCache::new(dir.path());
    assert_eq!(client().pull(&honest, None).await.unwrap().wasm, wasm);
    assert_eq!(
        client().pull(&honest, Some(&cache)).await.unwrap().wasm,
        wasm
    );
    assert!(
        client()
            .pull(&honest, Some(&cache))
            .await
            .unwrap()
            .from_cache
    );

    for (tag, size) in [("short", len - 1), ("long", len + 1), ("zero", 0)] {
        let lying =
            push_with_layer_size(&registry, &format!("drivers/sized:{tag}"), &wasm, size).await;
        for cache in [None, Some(&cache)] {
            let text = refusal(client().pull(&lying, cache).await);
            assert!(
                text.contains(&format!(
                    "the Wasm layer {layer} does not have the {size} bytes its descriptor in the manifest says (it has {len})"
                )),
                "{tag}, cache {}: {text}",
                cache.is_some()
            );
        }
    }

    // The same under signature verification: the signed manifest lies about its layer.
    let signer = key();
    let lying = push_with_layer_size(&registry, "drivers/sized:signed", &wasm, len + 1).await;
    client()
        .sign(&lying, &signer, &BTreeMap::new())
        .await
        .unwrap();
    let policy = Policy::from_keys(vec![signer.public_key()]);
    client().verify(&lying, None, &policy).await.unwrap();
    let text = refusal(client().pull_verified(&lying, None, &policy).await);
    assert!(
        text.contains(&format!(
            "the Wasm layer {layer} does not have the {}",
            len + 1
        )),
        "{text}"
    );
}

#[tokio::test]
async fn a_layer_streamed_without_a_length_is_read_no_further_than_its_descriptor() {
    let registry = Registry::start().unwrap();
    let proxy = RegistryProxy::start(registry.addr());
    let wasm = b"\0asm\x0d\0\x01\0 streamed by a registry that sends no length".to_vec();
    let len = wasm.len() as u64;
    let layer = digest_of(&wasm);
    let pinned = push_with_layer_size(&registry, "drivers/streamed:1", &wasm, len).await;
    let path = format!("/v2/drivers/streamed/blobs/{layer}");
    let url = format!("http://{}{path}", proxy.host());

    // Control: streamed whole, with no Content-Length, it pulls.
    proxy.answer_streamed(&path, "application/octet-stream", wasm.clone());
    let response = reqwest::get(&url).await.unwrap();
    assert_eq!(response.content_length(), None, "{:?}", response.headers());
    let pulled = client().pull(&via(&proxy, &pinned), None).await.unwrap();
    assert_eq!(pulled.wasm, wasm);

    // A megabyte past the descriptor: reading stops at its size, and the layer is refused.
    let mut longer = wasm.clone();
    longer.resize(wasm.len() + (1 << 20), 0);
    proxy.answer_streamed(&path, "application/octet-stream", longer);
    let text = refusal(client().pull(&via(&proxy, &pinned), None).await);
    assert!(
        text.contains(&format!(
            "the Wasm layer {layer} does not have the {len} bytes its descriptor in the manifest says (it has more)"
        )),
        "{text}"
    );

    // One byte short.
    proxy.answer_streamed(
        &path,
        "application/octet-stream",
        wasm[..wasm.len() - 1].to_vec(),
    );
    let text = refusal(client().pull(&via(&proxy, &pinned), None).await);
    assert!(
        text.contains(&format!(
            "the Wasm layer {layer} does not have the {len} bytes its descriptor in the manifest says (it has {})",
            len - 1
        )),
        "{text}"
    );
}

#[tokio::test]
async fn an_index_entry_whose_size_is_not_its_manifests_is_refused() {
    let registry = Registry::start().unwrap();
    let wasm = b"\0asm\x0d\0\x01\0 behind an index".to_vec();
    let artifact = client()
        .push(
            &reference(&registry.host(), "multi/x:wasm"),
            &wasm,
            info(),
            BTreeMap::new(),
        )
        .await
        .unwrap();
    let manifest_len = registry.stored_blob(&artifact.manifest_digest).len() as u64;
    let index = |size: u64| {
        serde_json::to_vec(&Manifest {
            schema_version: 2,
            media_type: Some(OCI_INDEX.into()),
            config: None,
            layers: Vec::new(),
            manifests: vec![Descriptor {
                media_type: OCI_MANIFEST.into(),
                digest: artifact.manifest_digest.clone(),
                size,
                annotations: BTreeMap::new(),
                platform: Some(Platform {
                    architecture: "wasm".into(),
                    os: "wasip2".into(),
                }),
            }],
            annotations: BTreeMap::new(),
        })
        .unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let cache = BlobCache::new(dir.path());

    // Control: the honest entry pulls (and fills the cache with the manifest it names).
    let honest = reference(&registry.host(), "multi/x:honest");
    client()
        .push_manifest(&honest, OCI_INDEX, &index(manifest_len), &[])
        .await
        .unwrap();
    assert_eq!(
        client().pull(&honest, Some(&cache)).await.unwrap().wasm,
        wasm
    );

    let lying = reference(&registry.host(), "multi/x:lying");
    client()
        .push_manifest(&lying, OCI_INDEX, &index(manifest_len + 7), &[])
        .await
        .unwrap();
    for cache in [None, Some(&cache)] {
        let text = refusal(client().pull(&lying, cache).await);
        assert!(
            text.contains(&format!(
                "the platform manifest {} does not have the {} bytes its descriptor in the index says (it has {manifest_len})",
                artifact.manifest_digest,
                manifest_len + 7
            )),
            "cache {}: {text}",
            cache.is_some()
        );
    }
}

/// A signature manifest: one layer per (payload, signature, size the descriptor says).
fn signature_manifest(layers: &[(&[u8], String, u64)]) -> (Vec<u8>, Vec<u8>) {
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
        layers: layers
            .iter()
            .map(|(payload, signature, size)| Descriptor {
                media_type: SIMPLE_SIGNING_MEDIA_TYPE.into(),
                digest: digest_of(payload),
                size: *size,
                annotations: BTreeMap::from([(
                    SIGNATURE_ANNOTATION.to_string(),
                    signature.clone(),
                )]),
                platform: None,
            })
            .collect(),
        manifests: Vec::new(),
        annotations: BTreeMap::new(),
    };
    (serde_json::to_vec(&manifest).unwrap(), config)
}

/// Pushes the signature manifest of `layers` under `tag` of `pinned`'s repository; its digest.
async fn push_signature_manifest(
    pinned: &Reference,
    tag: &str,
    layers: &[(&[u8], String, u64)],
) -> (String, u64) {
    let (manifest, config) = signature_manifest(layers);
    let mut blobs: Vec<&[u8]> = vec![&config];
    for (payload, _, _) in layers {
        if !blobs.contains(payload) {
            blobs.push(payload);
        }
    }
    let target = Reference {
        tag: Some(tag.to_string()),
        digest: None,
        ..pinned.clone()
    };
    let digest = client()
        .push_manifest(&target, OCI_MANIFEST, &manifest, &blobs)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    (digest, manifest.len() as u64)
}

fn payload_of(pinned: &Reference) -> Vec<u8> {
    simple_signing_payload(
        &format!("{}/{}", pinned.registry, pinned.repository),
        pinned.digest.as_deref().unwrap(),
        &BTreeMap::new(),
    )
}

fn b64_signature(key: &SigningKey, payload: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(key.sign(payload).unwrap())
}

#[tokio::test]
async fn a_signature_payload_is_checked_against_its_descriptor_and_named_when_refused() {
    let registry = Registry::start().unwrap();
    let signer = key();
    let policy = Policy::from_keys(vec![signer.public_key()]);
    let push = |name: &'static str| {
        let host = registry.host();
        async move {
            client()
                .push(
                    &reference(&host, &format!("drivers/{name}:1")),
                    format!("\0asm {name}").as_bytes(),
                    info(),
                    BTreeMap::new(),
                )
                .await
                .unwrap()
                .pinned
        }
    };

    // Control: the honest descriptor verifies.
    let honest = push("payload-honest").await;
    let payload = payload_of(&honest);
    let tag = signature_tag(honest.digest.as_deref().unwrap());
    let size = payload.len() as u64;
    push_signature_manifest(
        &honest,
        &tag,
        &[(&payload, b64_signature(&signer, &payload), size)],
    )
    .await;
    client().verify(&honest, None, &policy).await.unwrap();

    // The same payload and signature, its descriptor one byte off either way.
    for (name, shorter) in [("payload-short", true), ("payload-long", false)] {
        let pinned = push(name).await;
        let payload = payload_of(&pinned);
        let len = payload.len() as u64;
        let size = if shorter { len - 1 } else { len + 1 };
        let tag = signature_tag(pinned.digest.as_deref().unwrap());
        push_signature_manifest(
            &pinned,
            &tag,
            &[(&payload, b64_signature(&signer, &payload), size)],
        )
        .await;
        let text = refusal(client().verify(&pinned, None, &policy).await);
        assert!(
            text.contains(&format!(
                "the signature payload {} does not have the {size} bytes its descriptor in the signature manifest says",
                digest_of(&payload)
            )),
            "{name}: {text}"
        );
    }

    // A payload over the limit (1 MiB) is refused before it is read, as a signature payload.
    let pinned = push("payload-huge").await;
    let mut huge = payload_of(&pinned);
    huge.resize((1 << 20) + 1, b' ');
    let tag = signature_tag(pinned.digest.as_deref().unwrap());
    push_signature_manifest(
        &pinned,
        &tag,
        &[(&huge, b64_signature(&signer, &huge), huge.len() as u64)],
    )
    .await;
    let text = refusal(client().verify(&pinned, None, &policy).await);
    assert!(
        text.contains(&format!(
            "the signature payload {} is 1048577 bytes, over the limit of 1048576",
            digest_of(&huge)
        )),
        "{text}"
    );
    assert!(!text.contains("Wasm layer"), "names another object: {text}");
}

#[tokio::test]
async fn signature_manifests_the_referrers_api_lists_are_checked_against_their_descriptors() {
    let registry = Registry::start().unwrap();
    let proxy = RegistryProxy::start(registry.addr());
    let signer = key();
    let policy = Policy::from_keys(vec![signer.public_key()]);
    let pinned = client()
        .push(
            &reference(&registry.host(), "drivers/referred:1"),
            b"\0asm found through the referrers API",
            info(),
            BTreeMap::new(),
        )
        .await
        .unwrap()
        .pinned;
    let digest = pinned.digest.clone().unwrap();
    // Stored under a tag of its own, not cosign's `.sig` tag: only the referrers API finds it.
    let payload = payload_of(&pinned);
    let (signature_digest, signature_len) = push_signature_manifest(
        &pinned,
        "signature-by-referrer",
        &[(
            &payload,
            b64_signature(&signer, &payload),
            payload.len() as u64,
        )],
    )
    .await;
    let referrers = |size: u64| {
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [{
                "mediaType": OCI_MANIFEST,
                "digest": signature_digest,
                "size": size,
                "artifactType": COSIGN_SIGNATURE_ARTIFACT_TYPE,
            }],
        }))
        .unwrap()
    };
    let path = format!("/v2/{}/referrers/{digest}", pinned.repository);

    // Control: with the honest size, the referrer is what satisfies the policy.
    proxy.answer(&path, OCI_INDEX, referrers(signature_len));
    let (verified, _) = client()
        .verify(&via(&proxy, &pinned), None, &policy)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert!(
        verified.verdict.matched[0].contains(&format!("referrer {signature_digest}")),
        "{:?}",
        verified.verdict
    );

    proxy.answer(&path, OCI_INDEX, referrers(signature_len + 1));
    let text = refusal(client().verify(&via(&proxy, &pinned), None, &policy).await);
    assert!(
        text.contains(&format!(
            "the signature manifest {signature_digest} does not have the {} bytes its descriptor in the referrers index says (it has {signature_len})",
            signature_len + 1
        )),
        "{text}"
    );
}

/// The bound a refusal line stays under, whatever the registry lists.
const LINE_BOUND: usize = 2048;

#[tokio::test]
async fn thousands_of_signatures_by_another_key_give_one_bounded_line_saying_what_was_not_checked()
{
    let registry = Registry::start().unwrap();
    let pinned = client()
        .push(
            &reference(&registry.host(), "drivers/crowded:1"),
            b"\0asm crowded",
            info(),
            BTreeMap::new(),
        )
        .await
        .unwrap()
        .pinned;
    let stranger = key();
    let payload = payload_of(&pinned);
    let layers: Vec<(&[u8], String, u64)> = (0..1000)
        .map(|_| {
            (
                payload.as_slice(),
                b64_signature(&stranger, &payload),
                payload.len() as u64,
            )
        })
        .collect();
    let tag = signature_tag(pinned.digest.as_deref().unwrap());
    push_signature_manifest(&pinned, &tag, &layers).await;

    let policy = Policy::from_keys(vec![key().public_key()]);
    let text = refusal(client().verify(&pinned, None, &policy).await);
    eprintln!("the refusal ({} characters): {text}", text.len());
    // The refusal fired from these signatures…
    assert!(text.contains("does not verify with this key"), "{text}");
    // …in one line of bounded length that says how many were and were not checked.
    assert!(!text.contains('\n'), "{text}");
    assert!(
        text.len() <= LINE_BOUND,
        "{} characters: {text}",
        text.len()
    );
    assert!(
        text.contains("64 signature candidates checked, 936 more not checked"),
        "{text}"
    );
}

#[tokio::test]
async fn a_registry_listing_many_signature_manifests_is_read_only_up_to_the_bound() {
    let registry = Registry::start().unwrap();
    let proxy = RegistryProxy::start(registry.addr());
    let pinned = client()
        .push(
            &reference(&registry.host(), "drivers/listed:1"),
            b"\0asm listed",
            info(),
            BTreeMap::new(),
        )
        .await
        .unwrap()
        .pinned;
    let digest = pinned.digest.clone().unwrap();
    let stranger = key();
    let payload = payload_of(&pinned);
    const LISTED: usize = 40;
    const LAYERS: usize = 5;
    let mut entries = Vec::new();
    for i in 0..LISTED {
        let layers: Vec<(&[u8], String, u64)> = (0..LAYERS)
            .map(|_| {
                (
                    payload.as_slice(),
                    b64_signature(&stranger, &payload),
                    payload.len() as u64,
                )
            })
            .collect();
        let (d, size) = push_signature_manifest(&pinned, &format!("listed-{i}"), &layers).await;
        entries.push(serde_json::json!({
            "mediaType": OCI_MANIFEST,
            "digest": d,
            "size": size,
            "artifactType": COSIGN_SIGNATURE_ARTIFACT_TYPE,
        }));
    }
    proxy.answer(
        &format!("/v2/{}/referrers/{digest}", pinned.repository),
        OCI_INDEX,
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": entries,
        }))
        .unwrap(),
    );

    let policy = Policy::from_keys(vec![key().public_key()]);
    let text = refusal(client().verify(&via(&proxy, &pinned), None, &policy).await);
    eprintln!("the refusal ({} characters): {text}", text.len());
    let requests = proxy.requests();
    let read = requests
        .iter()
        .filter(|r| r.starts_with("GET ") && r.contains("/manifests/sha256:"))
        .count();
    let payload_gets = proxy.blob_gets(&digest_of(&payload));
    // Control: the referrers API was asked, and signature manifests were read through it.
    assert!(
        requests.iter().any(|r| r.contains("/referrers/")) && read > 0,
        "{requests:?}"
    );
    assert!(read <= 16, "{read} signature manifests read: {requests:?}");
    assert!(payload_gets <= 64, "{payload_gets} payloads fetched");
    assert!(text.contains("does not verify with this key"), "{text}");
    assert!(!text.contains('\n') && text.len() <= LINE_BOUND, "{text}");
    assert!(
        text.contains(&format!(
            "64 signature candidates checked, {} more not checked, and {} signature manifests not read",
            read * LAYERS - 64,
            LISTED - read
        )),
        "{read} read: {text}"
    );
}

#[tokio::test]
async fn a_registry_error_body_stays_on_one_bounded_line() {
    let registry = Registry::start().unwrap();
    let proxy = RegistryProxy::start(registry.addr());
    let pinned = reference(&proxy.host(), "drivers/gone:1").pinned(&digest_of(b"gone"));
    // distribution's error shape ({"errors": [{code, message}]}), with a thousand entries
    // whose messages break lines.
    let errors: Vec<serde_json::Value> = (0..1000)
        .map(|i| serde_json::json!({"code": "MANIFEST_UNKNOWN", "message": format!("line {i}\nnext")}))
        .collect();
    proxy.answer_status(
        &format!(
            "/v2/drivers/gone/manifests/{}",
            pinned.digest.as_deref().unwrap()
        ),
        404,
        "application/json",
        serde_json::to_vec(&serde_json::json!({ "errors": errors })).unwrap(),
    );
    let text = refusal(client().pull(&pinned, None).await);
    assert!(
        text.contains("404") && text.contains("MANIFEST_UNKNOWN: line 0 next"),
        "{text}"
    );
    assert!(!text.contains('\n'), "{text}");
    assert!(
        text.len() <= LINE_BOUND,
        "{} characters: {text}",
        text.len()
    );
}
