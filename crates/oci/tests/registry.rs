//! Push and pull against a real registry: Debian's `docker-registry` on loopback.

use std::collections::BTreeMap;

use wasm_ccm_oci::{
    BlobCache, Client, ClientOptions, ComponentInfo, Descriptor, DockerConfig, Manifest, OCI_INDEX,
    OCI_MANIFEST, Platform, Reference, digest_of,
};
use wasm_ccm_test_tools::registry::{self, Registry};

mod common;
use common::tar_gzip;

fn static_driver() -> Vec<u8> {
    std::fs::read(wasm_ccm_drivers::STATIC_DRIVER)
        .expect("the build script built the static driver")
}

fn info() -> ComponentInfo {
    ComponentInfo {
        exports: vec!["wasm-ccm:provider/provider@0.2.0".into()],
        imports: vec!["wasm-ccm:provider/http@0.2.0".into()],
    }
}

fn reference(registry: &Registry, path: &str) -> Reference {
    Reference::parse(&format!("oci://{}/{path}", registry.host())).unwrap()
}

fn anonymous() -> Client {
    Client::new(ClientOptions::default()).unwrap()
}

fn with_credentials(registry: &Registry, user: &str, password: &str) -> Client {
    let json =
        serde_json::json!({"auths": {registry.host(): {"username": user, "password": password}}});
    Client::new(ClientOptions {
        credentials: DockerConfig::parse(json.to_string().as_bytes()).unwrap(),
        ..Default::default()
    })
    .unwrap()
}

#[tokio::test]
async fn a_pushed_driver_pulls_back_by_tag_then_from_the_cache_by_digest_with_the_registry_gone() {
    let registry = Registry::start().unwrap();
    let wasm = static_driver();
    let tagged = reference(&registry, "drivers/static:0.1.0");
    let pushed = anonymous()
        .push(&tagged, &wasm, info(), BTreeMap::new())
        .await
        .unwrap();
    assert_eq!(pushed.layer_digest, digest_of(&wasm));
    assert_eq!(
        pushed.pinned.digest.as_deref(),
        Some(pushed.manifest_digest.as_str())
    );

    // Pushing the same file again gives the same digest: the layout is deterministic.
    let again = anonymous()
        .push(&tagged, &wasm, info(), BTreeMap::new())
        .await
        .unwrap();
    assert_eq!(again.manifest_digest, pushed.manifest_digest);

    let cache_dir = tempfile::tempdir().unwrap();
    let cache = BlobCache::new(cache_dir.path());
    let by_tag = anonymous().pull(&tagged, Some(&cache)).await.unwrap();
    assert_eq!(by_tag.wasm, wasm);
    assert_eq!(
        by_tag.manifest_digest, pushed.manifest_digest,
        "the tag resolves to the pushed digest"
    );
    assert_eq!(by_tag.layer_media_type, "application/wasm");
    assert!(!by_tag.from_cache);
    assert!(
        cache.path(&pushed.layer_digest).unwrap().is_file(),
        "the layer is cached by its digest"
    );

    // The manifest the registry stores is the CNCF layout.
    let manifest: serde_json::Value =
        serde_json::from_slice(&cache.get(&pushed.manifest_digest).unwrap()).unwrap();
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    let config = cache_config(&registry, &manifest).await;
    assert_eq!(config["os"], "wasip2");
    assert_eq!(
        config["component"]["exports"][0],
        "wasm-ccm:provider/provider@0.2.0"
    );

    drop(registry);
    let pinned = by_tag.pinned.clone();
    let offline = anonymous().pull(&pinned, Some(&cache)).await.unwrap();
    assert!(
        offline.from_cache,
        "a digest reference in the cache needs no registry"
    );
    assert_eq!(offline.wasm, wasm);
    let err = anonymous().pull(&tagged, Some(&cache)).await.unwrap_err();
    assert!(
        format!("{err:#}").contains("cannot reach registry"),
        "a tag always asks the registry: {err:#}"
    );
}

async fn cache_config(registry: &Registry, manifest: &serde_json::Value) -> serde_json::Value {
    let url = format!(
        "http://{}/v2/drivers/static/blobs/{}",
        registry.host(),
        manifest["config"]["digest"].as_str().unwrap()
    );
    let body = reqwest::get(url).await.unwrap().bytes().await.unwrap();
    serde_json::from_slice(&body).unwrap()
}

#[tokio::test]
async fn a_registry_with_credentials_takes_them_from_a_dockerconfigjson_and_refuses_others() {
    let registry = Registry::start_with_auth().unwrap();
    let wasm = static_driver();
    let target = reference(&registry, "private/static:1");

    let err = anonymous()
        .push(&target, &wasm, info(), BTreeMap::new())
        .await
        .unwrap_err();
    let err = format!("{err:#}");
    assert!(
        err.contains("requires credentials") && err.contains("--registry-config"),
        "{err}"
    );

    let err = with_credentials(&registry, registry::USER, "wrong")
        .push(&target, &wasm, info(), BTreeMap::new())
        .await
        .unwrap_err();
    assert!(
        format!("{err:#}").contains("refused the credentials"),
        "{err:#}"
    );

    let client = with_credentials(&registry, registry::USER, registry::PASSWORD);
    let pushed = client
        .push(&target, &wasm, info(), BTreeMap::new())
        .await
        .unwrap();
    let pulled = client.pull(&pushed.pinned, None).await.unwrap();
    assert_eq!(pulled.wasm, wasm);
}

/// Pushes a manifest with one layer of `media_type` holding `layer`.
async fn push_layout(registry: &Registry, path: &str, media_type: &str, layer: &[u8]) -> Reference {
    let target = reference(registry, path);
    let config = br#"{}"#.to_vec();
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(OCI_MANIFEST.into()),
        config: Some(descriptor("application/vnd.wasm.config.v1+json", &config)),
        layers: vec![descriptor(media_type, layer)],
        manifests: Vec::new(),
        annotations: BTreeMap::new(),
    };
    let bytes = serde_json::to_vec(&manifest).unwrap();
    let digest = anonymous()
        .push_manifest(&target, OCI_MANIFEST, &bytes, &[&config, layer])
        .await
        .unwrap();
    target.pinned(&digest)
}

fn descriptor(media_type: &str, bytes: &[u8]) -> Descriptor {
    Descriptor {
        media_type: media_type.into(),
        digest: digest_of(bytes),
        size: bytes.len() as u64,
        annotations: BTreeMap::new(),
        platform: None,
    }
}

#[tokio::test]
async fn other_tools_layouts_are_accepted_and_foreign_ones_refused_with_the_accepted_list() {
    let registry = Registry::start().unwrap();
    let wasm = static_driver();

    // oci-client (Kubewarden, Spin) and Istio raw layers.
    for (path, media_type) in [
        ("kw/static:1", "application/vnd.wasm.content.layer.v1+wasm"),
        (
            "istio/static:1",
            "application/vnd.module.wasm.content.layer.v1+wasm",
        ),
    ] {
        let pinned = push_layout(&registry, path, media_type, &wasm).await;
        let pulled = anonymous().pull(&pinned, None).await.unwrap();
        assert_eq!(
            (pulled.wasm == wasm, pulled.layer_media_type.as_str()),
            (true, media_type)
        );
    }

    // Istio's "compat" image: plugin.wasm inside a tar+gzip layer.
    let layer = tar_gzip(&[("README", b"docs"), ("plugin.wasm", &wasm)]);
    let pinned = push_layout(
        &registry,
        "compat/static:1",
        "application/vnd.oci.image.layer.v1.tar+gzip",
        &layer,
    )
    .await;
    assert_eq!(anonymous().pull(&pinned, None).await.unwrap().wasm, wasm);

    // A container image layer is not a driver.
    let pinned = push_layout(
        &registry,
        "image/app:1",
        "application/vnd.oci.image.layer.v1.tar",
        b"tar",
    )
    .await;
    let err = format!("{:#}", anonymous().pull(&pinned, None).await.unwrap_err());
    assert!(
        err.contains("no Wasm layer") && err.contains("application/wasm"),
        "{err}"
    );
    assert!(
        err.contains("application/vnd.module.wasm.content.layer.v1+wasm"),
        "{err}"
    );

    // An index whose wasm entry points at the artifact.
    let artifact = push_layout(&registry, "multi/static:wasm", "application/wasm", &wasm).await;
    let mut entry = descriptor(OCI_MANIFEST, &[]);
    entry.digest = artifact.digest.clone().unwrap();
    // The entry's size is the manifest's: a wrong one is refused (tests/descriptors.rs).
    entry.size = registry.stored_blob(&entry.digest).len() as u64;
    entry.platform = Some(Platform {
        architecture: "wasm".into(),
        os: "wasip2".into(),
    });
    let index = Manifest {
        schema_version: 2,
        media_type: Some(OCI_INDEX.into()),
        config: None,
        layers: Vec::new(),
        manifests: vec![entry],
        annotations: BTreeMap::new(),
    };
    let index_bytes = serde_json::to_vec(&index).unwrap();
    let target = reference(&registry, "multi/static:1");
    anonymous()
        .push_manifest(&target, OCI_INDEX, &index_bytes, &[])
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(anonymous().pull(&target, None).await.unwrap().wasm, wasm);
}

#[tokio::test]
async fn digests_are_checked_for_what_the_registry_serves_and_what_the_cache_holds() {
    let registry = Registry::start().unwrap();
    let wasm = static_driver();
    let pushed = anonymous()
        .push(
            &reference(&registry, "drivers/static:1"),
            &wasm,
            info(),
            BTreeMap::new(),
        )
        .await
        .unwrap();

    // A digest the registry does not have.
    let missing = pushed.pinned.pinned(&digest_of(b"something else"));
    let err = format!("{:#}", anonymous().pull(&missing, None).await.unwrap_err());
    assert!(
        err.contains("404") && err.contains("MANIFEST_UNKNOWN"),
        "{err}"
    );

    // A cache entry that rotted is fetched again.
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = BlobCache::new(cache_dir.path());
    anonymous()
        .pull(&pushed.pinned, Some(&cache))
        .await
        .unwrap();
    std::fs::write(cache.path(&pushed.layer_digest).unwrap(), b"rot").unwrap();
    let again = anonymous()
        .pull(&pushed.pinned, Some(&cache))
        .await
        .unwrap();
    assert!(!again.from_cache);
    assert_eq!(again.wasm, wasm);

    // A registry serving other bytes for the layer (its storage tampered with) is refused.
    let hex = pushed.layer_digest.trim_start_matches("sha256:");
    let data = registry
        .storage()
        .join("docker/registry/v2/blobs/sha256")
        .join(&hex[..2])
        .join(hex)
        .join("data");
    let mut tampered = wasm.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 0xff;
    std::fs::write(&data, &tampered).unwrap();
    let err = format!(
        "{:#}",
        anonymous().pull(&pushed.pinned, None).await.unwrap_err()
    );
    assert!(
        err.contains("hashes to") && err.contains("refusing"),
        "{err}"
    );
}

#[tokio::test]
async fn plain_http_to_a_remote_registry_needs_the_insecure_flag() {
    // A registry named by an address that is not loopback to the client (so it speaks https and
    // needs --insecure-registry for plain HTTP), yet one no packet can leave the machine for:
    // Linux and the BSDs connect 0.0.0.0 to this host over the loopback device. Behind it, a
    // listener that takes the connection and never answers, so the TLS handshake fails here.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let registry = format!("0.0.0.0:{port}");
    let target = Reference::parse(&format!("oci://{registry}/drivers/static:1")).unwrap();
    let client = Client::new(ClientOptions {
        timeout: std::time::Duration::from_millis(500),
        ..Default::default()
    })
    .unwrap();
    assert!(!client.plain_http(&registry));
    let err = format!("{:#}", client.pull(&target, None).await.unwrap_err());
    assert!(err.contains("--insecure-registry"), "{err}");
    // The connection arrived on loopback (the listener's backlog holds it): that is where the
    // client went, and the only place it could.
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_ok(),
        "the client never connected to the loopback listener: {err}"
    );
}
