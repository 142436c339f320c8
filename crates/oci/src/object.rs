//! What is read by digest ([`Object`]) and the one check every such read passes
//! ([`check_content`]): the content has its descriptor's size and digest.
//!
//! A leaf, so the client (which names the objects it pulls), the fetch (`crate::fetch`, which
//! implements reading on the client) and the cached signature candidates share it without
//! importing each other.

use anyhow::{anyhow, bail};

use crate::artifact::{MAX_MANIFEST_BYTES, digest_of};
use crate::reference::Reference;

/// The largest signature payload read (cosign's are a few hundred bytes).
pub(crate) const MAX_PAYLOAD_BYTES: usize = 1 << 20;

/// What is fetched. It picks the endpoint (`manifests/` or `blobs/`) and the size limit, and
/// names the object in every refusal, so no message can name another one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Object {
    /// The manifest (or index) a reference names by digest.
    Manifest,
    /// The image manifest an index entry points to.
    PlatformManifest,
    /// The layer holding the component.
    WasmLayer,
    /// A cosign signature manifest the referrers API lists.
    SignatureManifest,
    /// A simple-signing payload, a layer of a signature manifest.
    SignaturePayload,
}

impl Object {
    /// `the Wasm layer`, as refusals name it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Object::Manifest => "the manifest",
            Object::PlatformManifest => "the platform manifest",
            Object::WasmLayer => "the Wasm layer",
            Object::SignatureManifest => "the signature manifest",
            Object::SignaturePayload => "the signature payload",
        }
    }

    /// What lists the object's descriptor.
    pub(crate) fn listed_in(self) -> &'static str {
        match self {
            Object::Manifest => "the reference",
            Object::PlatformManifest => "the index",
            Object::WasmLayer => "the manifest",
            Object::SignatureManifest => "the referrers index",
            Object::SignaturePayload => "the signature manifest",
        }
    }

    /// Whether it is read from `manifests/` (else `blobs/`).
    pub(crate) fn is_manifest(self) -> bool {
        matches!(
            self,
            Object::Manifest | Object::PlatformManifest | Object::SignatureManifest
        )
    }

    /// The most bytes read of it.
    pub(crate) fn limit(self, max_wasm_bytes: usize) -> usize {
        match self {
            Object::WasmLayer => max_wasm_bytes,
            Object::SignaturePayload => MAX_PAYLOAD_BYTES,
            Object::Manifest | Object::PlatformManifest | Object::SignatureManifest => {
                MAX_MANIFEST_BYTES
            }
        }
    }
}

/// Checks `bytes` against the `digest` and `size` an `object`'s descriptor gave: the one check
/// every read by digest passes, from the registry or the cache.
pub(crate) fn check_content(
    reference: &Reference,
    object: Object,
    digest: &str,
    size: Option<u64>,
    bytes: &[u8],
) -> anyhow::Result<()> {
    if let Some(size) = size
        && bytes.len() as u64 != size
    {
        return Err(size_mismatch(
            reference,
            object,
            digest,
            size,
            &bytes.len().to_string(),
        ));
    }
    let got = digest_of(bytes);
    if got != digest {
        bail!(
            "{reference}: {} {digest} hashes to {got}: refusing it (a corrupt transfer or a tampering registry; pull again, and if it persists push the artifact again)",
            object.name()
        );
    }
    Ok(())
}

/// The refusal of content whose size is not its descriptor's (`got` says what it had).
pub(crate) fn size_mismatch(
    reference: &Reference,
    object: Object,
    digest: &str,
    size: u64,
    got: &str,
) -> anyhow::Error {
    anyhow!(
        "{reference}: {} {digest} does not have the {size} bytes its descriptor in {} says (it has {got}): refusing it (OCI image-spec: content whose size does not match its descriptor is not trusted; the artifact is corrupt or tampered with: push it again)",
        object.name(),
        object.listed_in()
    )
}
