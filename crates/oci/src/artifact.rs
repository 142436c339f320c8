//! The shapes of a Wasm artifact: what we publish (the CNCF TAG-Runtime layout) and what we
//! accept on pull (the layouts other tools publish).

use std::collections::BTreeMap;
use std::io::Read;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// OCI image manifest.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// Docker schema 2 manifest (some tools still push it).
pub(crate) const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// OCI image index.
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// Docker manifest list.
pub(crate) const DOCKER_MANIFEST_LIST: &str =
    "application/vnd.docker.distribution.manifest.list.v2+json";
/// The CNCF layout's config.
pub(crate) const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
/// The CNCF layout's layer: the component itself.
pub(crate) const WASM_LAYER: &str = "application/wasm";

/// Layers that are the `.wasm` itself.
pub(crate) const RAW_WASM_LAYERS: &[&str] = &[
    WASM_LAYER,
    // oci-client's constant: Kubewarden, Spin, wasm-to-oci.
    "application/vnd.wasm.content.layer.v1+wasm",
    // solo.io / Istio / Envoy.
    "application/vnd.module.wasm.content.layer.v1+wasm",
    // runwasi's older builder.
    "application/vnd.bytecodealliance.wasm.component.layer.v0+wasm",
];

/// Layers that are a tar+gzip holding `plugin.wasm` (Istio's "compat" image).
pub(crate) const TAR_GZIP_LAYERS: &[&str] = &[
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
];

/// The largest manifest we read.
pub(crate) const MAX_MANIFEST_BYTES: usize = 4 << 20;

/// `sha256:<hex>` of `bytes`.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// A content descriptor.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// What the content is, e.g. `application/wasm`.
    pub media_type: String,
    /// `sha256:<hex>` of the content; every fetch is checked against it.
    pub digest: String,
    /// The content's length in bytes; a fetch reads no more.
    pub size: u64,
    /// Free-form metadata, e.g. `org.opencontainers.image.title`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// In an index: the platform of the manifest it points to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
}

/// An index entry's platform.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Platform {
    /// E.g. `wasm` or `amd64`.
    #[serde(default)]
    pub architecture: String,
    /// E.g. `wasip2` or `linux`.
    #[serde(default)]
    pub os: String,
}

/// An image manifest or an index (the fields we use of either).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Always 2 (a manifest with another version is refused).
    pub schema_version: u32,
    /// The manifest's own media type (OCI or Docker, image manifest or index), when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// An image manifest's config blob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Descriptor>,
    /// An image manifest's layers; a driver is one `.wasm` layer (or a tar+gzip holding one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<Descriptor>,
    /// An index's entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifests: Vec<Descriptor>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Manifest {
    /// Whether this is an index (or Docker manifest list) rather than an image manifest.
    pub(crate) fn is_index(&self) -> bool {
        matches!(
            self.media_type.as_deref(),
            Some(OCI_INDEX | DOCKER_MANIFEST_LIST)
        ) || (self.config.is_none() && !self.manifests.is_empty())
    }

    /// The index entry for a Wasm artifact: the one whose platform says `wasm` (or `wasip1`/
    /// `wasip2`), or the only entry.
    pub(crate) fn wasm_entry(&self) -> Result<&Descriptor, String> {
        let wasm = |d: &&Descriptor| {
            d.platform.as_ref().is_some_and(|p| {
                p.architecture == "wasm" || p.os == "wasip1" || p.os == "wasip2" || p.os == "wasi"
            })
        };
        if let Some(entry) = self.manifests.iter().find(wasm) {
            return Ok(entry);
        }
        match self.manifests.as_slice() {
            [only] => Ok(only),
            entries => Err(format!(
                "the reference is an index of {} manifests and none is for the platform wasm; name the Wasm artifact's own digest",
                entries.len()
            )),
        }
    }

    /// The layer holding the component, and how it is packed. The CNCF and other raw-Wasm
    /// layers win over tar+gzip ones; of several tar+gzip layers the last is taken (Istio).
    pub(crate) fn wasm_layer(&self) -> Result<(&Descriptor, Packing), String> {
        if let Some(layer) = self
            .layers
            .iter()
            .find(|l| RAW_WASM_LAYERS.contains(&l.media_type.as_str()))
        {
            return Ok((layer, Packing::Raw));
        }
        if let Some(layer) = self
            .layers
            .iter()
            .rev()
            .find(|l| TAR_GZIP_LAYERS.contains(&l.media_type.as_str()))
        {
            return Ok((layer, Packing::TarGzip));
        }
        let found: Vec<&str> = self.layers.iter().map(|l| l.media_type.as_str()).collect();
        Err(format!(
            "the artifact has no Wasm layer (its layers are {found:?}); accepted layer media types: {}, or a tar+gzip layer ({}) holding plugin.wasm",
            RAW_WASM_LAYERS.join(", "),
            TAR_GZIP_LAYERS.join(", ")
        ))
    }
}

/// How the component sits in its layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Packing {
    /// The layer is the `.wasm`.
    Raw,
    /// The layer is a tar+gzip with `plugin.wasm` (or a single `.wasm` file) in it.
    TarGzip,
}

/// The component from a tar+gzip layer: `plugin.wasm` anywhere in it, else the only `.wasm`.
/// Memory stays bounded whatever the archive holds: at most two candidates of at most `limit`
/// bytes are kept, and the whole archive may decompress to at most four times `limit` (plus
/// 1 MiB for tar's headers and padding).
pub fn wasm_from_tar_gzip(layer: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    let budget = 4 * limit as u64 + (1 << 20);
    let mut decoder = flate2::read::GzDecoder::new(layer).take(budget + 1);
    let mut archive = tar::Archive::new(&mut decoder);
    let mut named: Option<Vec<u8>> = None;
    let mut first_other: Option<Vec<u8>> = None;
    let mut others: Vec<String> = Vec::new();
    let entries = archive
        .entries()
        .map_err(|e| format!("the tar+gzip layer cannot be read: {e}"))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| {
            format!(
                "the tar+gzip layer is corrupt or decompresses to more than {budget} bytes: {e}"
            )
        })?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = entry
            .path()
            .map_err(|e| format!("the tar+gzip layer has a bad path: {e}"))?
            .to_string_lossy()
            .into_owned();
        if !path.ends_with(".wasm") {
            continue;
        }
        let is_plugin = path == "plugin.wasm" || path.ends_with("/plugin.wasm");
        if !is_plugin && (named.is_some() || first_other.is_some()) {
            others.push(path);
            continue;
        }
        let mut bytes = Vec::new();
        (&mut entry)
            .take(limit as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read {path} from the layer: {e}"))?;
        if bytes.len() > limit {
            return Err(format!("{path} in the layer is larger than {limit} bytes"));
        }
        if is_plugin {
            named = Some(bytes);
            break;
        }
        others.push(path);
        first_other = Some(bytes);
    }
    if decoder.limit() == 0 {
        return Err(format!(
            "the tar+gzip layer decompresses to more than {budget} bytes: refused"
        ));
    }
    match (named, first_other, others.len()) {
        (Some(bytes), _, _) => Ok(bytes),
        (None, Some(bytes), 1) => Ok(bytes),
        (None, None, _) => {
            Err("the tar+gzip layer holds no .wasm file (expected plugin.wasm)".into())
        }
        (None, Some(_), _) => Err(format!(
            "the tar+gzip layer holds several .wasm files ({}) and none is plugin.wasm",
            others.join(", ")
        )),
    }
}

/// What the CNCF config says about a component.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ComponentInfo {
    /// Exported interfaces, e.g. `wasm-ccm:provider/instances@0.2.0`.
    pub exports: Vec<String>,
    /// Imported interfaces.
    pub imports: Vec<String>,
}

/// The CNCF Wasm config (`application/vnd.wasm.config.v0+json`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WasmConfig {
    /// Left out unless `SOURCE_DATE_EPOCH` is set, so pushing the same file twice gives the
    /// same digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) created: Option<String>,
    /// `wasm`.
    pub(crate) architecture: String,
    /// `wasip2`.
    pub(crate) os: String,
    /// The digests of the layers, in order (the one `.wasm` layer).
    pub(crate) layer_digests: Vec<String>,
    /// The component's exports and imports.
    pub(crate) component: ComponentInfo,
}

/// The manifest and config blobs of a component, ready to push.
pub struct Packed {
    /// The image manifest, serialised; its digest is the artifact's.
    pub manifest: Vec<u8>,
    /// The CNCF Wasm config blob, serialised.
    pub config: Vec<u8>,
    /// `sha256:<hex>` of the `.wasm` layer.
    pub layer_digest: String,
}

/// Packs `wasm` in the CNCF layout: config `application/vnd.wasm.config.v0+json` (`os:
/// wasip2`, the layer digests, the component's exports and imports) and one `application/wasm`
/// layer. Deterministic for the same input.
pub fn pack(
    wasm: &[u8],
    component: ComponentInfo,
    created: Option<String>,
    annotations: BTreeMap<String, String>,
) -> Packed {
    let layer_digest = digest_of(wasm);
    let config = WasmConfig {
        created,
        architecture: "wasm".into(),
        os: "wasip2".into(),
        layer_digests: vec![layer_digest.clone()],
        component,
    };
    let config = serde_json::to_vec(&config).expect("the config serialises");
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(OCI_MANIFEST.into()),
        config: Some(Descriptor {
            media_type: WASM_CONFIG.into(),
            digest: digest_of(&config),
            size: config.len() as u64,
            annotations: BTreeMap::new(),
            platform: None,
        }),
        layers: vec![Descriptor {
            media_type: WASM_LAYER.into(),
            digest: layer_digest.clone(),
            size: wasm.len() as u64,
            annotations: BTreeMap::from([(
                "org.opencontainers.image.title".to_string(),
                "plugin.wasm".to_string(),
            )]),
            platform: None,
        }],
        manifests: Vec::new(),
        annotations,
    };
    Packed {
        manifest: serde_json::to_vec(&manifest).expect("the manifest serialises"),
        config,
        layer_digest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(media_type: &str) -> Descriptor {
        Descriptor {
            media_type: media_type.into(),
            digest: digest_of(media_type.as_bytes()),
            size: 1,
            annotations: BTreeMap::new(),
            platform: None,
        }
    }

    fn manifest(layers: Vec<Descriptor>) -> Manifest {
        Manifest {
            schema_version: 2,
            media_type: Some(OCI_MANIFEST.into()),
            config: Some(layer("application/vnd.wasm.config.v1+json")),
            layers,
            manifests: Vec::new(),
            annotations: BTreeMap::new(),
        }
    }

    #[test]
    fn every_common_wasm_layer_is_found_and_others_are_refused_with_the_list() {
        for t in RAW_WASM_LAYERS {
            let m = manifest(vec![layer("application/octet-stream"), layer(t)]);
            assert_eq!(m.wasm_layer().unwrap().0.media_type, *t);
            assert_eq!(m.wasm_layer().unwrap().1, Packing::Raw);
        }
        let compat = manifest(vec![layer(TAR_GZIP_LAYERS[0]), layer(TAR_GZIP_LAYERS[1])]);
        let (l, packing) = compat.wasm_layer().unwrap();
        assert_eq!(
            (l.media_type.as_str(), packing),
            (TAR_GZIP_LAYERS[1], Packing::TarGzip)
        );
        let err = manifest(vec![layer("application/vnd.oci.image.layer.v1.tar")])
            .wasm_layer()
            .unwrap_err();
        assert!(
            err.contains("application/vnd.oci.image.layer.v1.tar\"]"),
            "{err}"
        );
        for t in RAW_WASM_LAYERS.iter().chain(TAR_GZIP_LAYERS) {
            assert!(err.contains(t), "the message lists {t}: {err}");
        }
    }

    #[test]
    fn packing_is_deterministic_and_in_the_cncf_layout() {
        let info = ComponentInfo {
            exports: vec!["wasm-ccm:provider/provider@0.2.0".into()],
            imports: vec!["wasm-ccm:provider/http@0.2.0".into()],
        };
        let a = pack(b"\0asm", info.clone(), None, BTreeMap::new());
        let b = pack(b"\0asm", info, None, BTreeMap::new());
        assert_eq!(a.manifest, b.manifest);
        let m: serde_json::Value = serde_json::from_slice(&a.manifest).unwrap();
        assert_eq!(m["mediaType"], OCI_MANIFEST);
        assert_eq!(m["config"]["mediaType"], WASM_CONFIG);
        assert_eq!(m["layers"][0]["mediaType"], WASM_LAYER);
        assert_eq!(m["layers"][0]["digest"], digest_of(b"\0asm"));
        let c: serde_json::Value = serde_json::from_slice(&a.config).unwrap();
        assert_eq!(c["os"], "wasip2");
        assert_eq!(c["architecture"], "wasm");
        assert_eq!(c["layerDigests"][0], digest_of(b"\0asm"));
        assert_eq!(
            c["component"]["exports"][0],
            "wasm-ccm:provider/provider@0.2.0"
        );
        assert!(c.get("created").is_none());
    }

    #[test]
    fn index_entries_for_wasm_are_picked() {
        let mut entry = layer(OCI_MANIFEST);
        entry.platform = Some(Platform {
            architecture: "wasm".into(),
            os: "wasip2".into(),
        });
        let mut other = layer(OCI_MANIFEST);
        other.platform = Some(Platform {
            architecture: "amd64".into(),
            os: "linux".into(),
        });
        let index = Manifest {
            schema_version: 2,
            media_type: Some(OCI_INDEX.into()),
            config: None,
            layers: Vec::new(),
            manifests: vec![other.clone(), entry.clone()],
            annotations: BTreeMap::new(),
        };
        assert!(index.is_index());
        assert_eq!(index.wasm_entry().unwrap(), &entry);
        let no_wasm = Manifest {
            manifests: vec![other.clone(), other],
            ..index
        };
        assert!(
            no_wasm
                .wasm_entry()
                .unwrap_err()
                .contains("none is for the platform wasm")
        );
    }
}
