//! cosign signatures of drivers: what is signed and how a signature is stored.
//!
//! The layout is cosign's "simple signing" one: for the manifest `sha256:H`, the tag
//! `sha256-H.sig` in the same repository holds an image manifest whose layers are JSON
//! payloads naming the signed manifest's digest; each layer's annotation
//! `dev.cosignproject.cosign/signature` is the base64 ECDSA signature of that payload. The same
//! manifests are also found through the OCI referrers API (`GET /v2/REPO/referrers/sha256:H`)
//! when the registry has it.
//!
//! This module is the format only (payloads, signature layers, blob signatures, the `.sig`
//! tag), a leaf that the reading of candidates (`candidates.rs`), the policy (`policy.rs`) and
//! the client's signing (`sign.rs`) share. A driver is verified before its Wasm layer is fetched
//! ([`Client::pull_verified`](crate::Client::pull_verified), `verify.rs`): resolve the
//! reference to a manifest digest, find the signatures (`candidates.rs`, read up to a bound and
//! cached), check the [`Policy`](crate::Policy), then pull the layer from that (signed) manifest, checked
//! against its descriptor's size and digest.

use std::collections::BTreeMap;

use anyhow::{Context as _, anyhow};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};

use crate::artifact::Manifest;
use crate::keyless;
use crate::keys::SigningKey;
use crate::reference::{Reference, parse_digest};

/// The media type of a simple-signing payload layer.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// `critical.type` of a container image signature payload.
pub(crate) const SIMPLE_SIGNING_TYPE: &str = "cosign container image signature";
/// The `artifactType` of a simple-signing manifest attached as a referrer.
pub const COSIGN_SIGNATURE_ARTIFACT_TYPE: &str = "application/vnd.dev.cosign.artifact.sig.v1+json";

/// `sha256-<hex>.sig`: the tag cosign stores the signatures of `digest` under.
pub fn signature_tag(digest: &str) -> String {
    format!("{}.sig", digest.replacen(':', "-", 1))
}

/// A simple-signing payload (the fields verified).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SimpleSigning {
    /// What the signature is about.
    pub(crate) critical: Critical,
    /// Signer-chosen annotations (`cosign sign -a key=value`); `null` when none.
    pub(crate) optional: Option<BTreeMap<String, serde_json::Value>>,
}

/// The payload's `critical` part.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Critical {
    /// The repository the signer named.
    pub(crate) identity: Identity,
    /// The signed manifest.
    pub(crate) image: Image,
    /// Always [`SIMPLE_SIGNING_TYPE`].
    #[serde(rename = "type")]
    pub(crate) kind: String,
}

/// `critical.identity`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Identity {
    /// `registry/repository`. Not checked on verification, like cosign by default: a mirrored
    /// artifact keeps its signatures.
    #[serde(rename = "docker-reference")]
    pub(crate) docker_reference: String,
}

/// `critical.image`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Image {
    /// `sha256:<hex>` of the signed manifest.
    #[serde(rename = "docker-manifest-digest")]
    pub(crate) docker_manifest_digest: String,
}

impl SimpleSigning {
    /// The annotation `key` as text (strings as they are, other JSON values as JSON).
    pub(crate) fn annotation(&self, key: &str) -> Option<String> {
        let value = self.optional.as_ref()?.get(key)?;
        Some(match value {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    }
}

/// The payload cosign signs for `digest` in `docker_reference` (`registry/repository`), in
/// cosign's field order.
pub fn simple_signing_payload(
    docker_reference: &str,
    digest: &str,
    annotations: &BTreeMap<String, String>,
) -> Vec<u8> {
    let payload = SimpleSigning {
        critical: Critical {
            identity: Identity {
                docker_reference: docker_reference.to_string(),
            },
            image: Image {
                docker_manifest_digest: digest.to_string(),
            },
            kind: SIMPLE_SIGNING_TYPE.to_string(),
        },
        optional: (!annotations.is_empty()).then(|| {
            annotations
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect()
        }),
    };
    serde_json::to_vec(&payload).expect("a payload serialises")
}

/// What a signature covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signed {
    /// A simple-signing payload naming a manifest digest (OCI drivers).
    Payload,
    /// The bytes themselves (a `.wasm` file, `cosign sign-blob`).
    Blob,
}

/// One signature found: the signed bytes, the signature, and where it was found.
#[derive(Debug, Clone)]
pub struct SignatureLayer {
    /// What the signature covers ([`Signed::Payload`]: these bytes are the JSON payload).
    pub signed: Signed,
    /// The signed bytes.
    pub payload: Vec<u8>,
    /// The DER signature, or why there is none usable (not base64, a Sigstore bundle, …).
    pub signature: Result<Vec<u8>, String>,
    /// `tag sha256-….sig layer 0`, `referrer sha256:… layer 0` or a file path.
    pub origin: String,
    /// The certificate, chain and Rekor bundle of a keyless signature (empty for a key's).
    pub keyless: keyless::Material,
}

/// The cosign v2 `sign-blob --bundle` file (`base64Signature`) and the Sigstore bundle's
/// `messageSignature`, the two JSON shapes a blob signature comes in.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlobSignatureFile {
    base64_signature: Option<String>,
    message_signature: Option<MessageSignature>,
}

#[derive(Deserialize)]
struct MessageSignature {
    signature: String,
    #[serde(rename = "messageDigest")]
    message_digest: Option<MessageDigest>,
}

#[derive(Deserialize)]
struct MessageDigest {
    algorithm: String,
    digest: String,
}

/// Reads a blob signature beside a file driver: base64 text (`cosign sign-blob
/// --output-signature`), cosign's `--bundle` JSON, or a Sigstore bundle's message signature.
/// `origin` names the file in messages.
pub fn blob_signature(bytes: &[u8], signature_file: &[u8], origin: &str) -> SignatureLayer {
    let text = String::from_utf8_lossy(signature_file);
    let text = text.trim();
    let signature = if text.starts_with('{') {
        match serde_json::from_str::<BlobSignatureFile>(text) {
            Ok(BlobSignatureFile {
                base64_signature: Some(sig),
                ..
            }) => decode_signature(&sig),
            Ok(BlobSignatureFile {
                message_signature: Some(message),
                ..
            }) => match message.message_digest {
                Some(d) if d.algorithm != "SHA2_256" => Err(format!(
                    "the bundle's digest algorithm is {}, not SHA2_256",
                    d.algorithm
                )),
                Some(d)
                    if B64.decode(&d.digest).ok().as_deref()
                        != Some(sha256(bytes).as_slice()) =>
                {
                    Err("the bundle is for other bytes (its messageDigest differs from the file's sha256)".to_string())
                }
                _ => decode_signature(&message.signature),
            },
            Ok(_) => Err("the JSON has neither base64Signature nor messageSignature".to_string()),
            Err(e) => Err(format!("the signature file is JSON but not a cosign bundle: {e}")),
        }
    } else {
        decode_signature(text)
    };
    SignatureLayer {
        signed: Signed::Blob,
        payload: bytes.to_vec(),
        signature,
        origin: origin.to_string(),
        keyless: keyless::Material::default(),
    }
}

/// `cosign sign-blob --output-signature`'s text for `bytes`: the base64 signature.
pub fn sign_blob(key: &SigningKey, bytes: &[u8]) -> Result<String, String> {
    key.sign(bytes).map(|sig| B64.encode(sig))
}

fn sha256(bytes: &[u8]) -> Vec<u8> {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).to_vec()
}

pub(crate) fn decode_signature(text: &str) -> Result<Vec<u8>, String> {
    B64.decode(text.trim())
        .map_err(|e| format!("its signature is not base64 ({e})"))
}

pub(crate) fn parse_signature_manifest(
    bytes: &[u8],
    reference: &Reference,
) -> anyhow::Result<Manifest> {
    let manifest: Manifest = serde_json::from_slice(bytes).with_context(|| {
        format!("{reference}: a signature manifest is not valid JSON of an OCI manifest")
    })?;
    for layer in &manifest.layers {
        parse_digest(&layer.digest)
            .map_err(|e| anyhow!("{reference}: a signature manifest is refused: {e}"))?;
    }
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_is_cosigns_shape() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let payload = simple_signing_payload("r.example/x", &digest, &BTreeMap::new());
        assert_eq!(
            String::from_utf8(payload).unwrap(),
            format!(
                "{{\"critical\":{{\"identity\":{{\"docker-reference\":\"r.example/x\"}},\"image\":{{\"docker-manifest-digest\":\"{digest}\"}},\"type\":\"cosign container image signature\"}},\"optional\":null}}"
            )
        );
        assert_eq!(
            signature_tag(&digest),
            format!("sha256-{}.sig", "a".repeat(64))
        );
    }

    #[test]
    fn blob_signature_files_in_three_shapes() {
        let key = SigningKey::from_pkcs8_der(&SigningKey::generate_pkcs8().unwrap()).unwrap();
        let sig = sign_blob(&key, b"wasm").unwrap();
        let plain = blob_signature(b"wasm", sig.as_bytes(), "f");
        assert!(
            key.public_key()
                .verify(b"wasm", plain.signature.as_ref().unwrap())
        );
        let bundle = format!("{{\"base64Signature\":\"{sig}\",\"cert\":\"\"}}");
        assert!(
            blob_signature(b"wasm", bundle.as_bytes(), "f")
                .signature
                .is_ok()
        );
        let digest = B64.encode(sha256(b"wasm"));
        let v3 = format!(
            "{{\"messageSignature\":{{\"messageDigest\":{{\"algorithm\":\"SHA2_256\",\"digest\":\"{digest}\"}},\"signature\":\"{sig}\"}}}}"
        );
        assert!(
            blob_signature(b"wasm", v3.as_bytes(), "f")
                .signature
                .is_ok()
        );
        let other = blob_signature(b"other", v3.as_bytes(), "f");
        assert!(other.signature.unwrap_err().contains("other bytes"));
        assert!(
            blob_signature(b"wasm", b"%%%", "f")
                .signature
                .unwrap_err()
                .contains("base64")
        );
    }
}
