//! The signatures a registry has for a manifest digest, read up to a bound: the candidates a
//! [`Policy`](crate::Policy) is checked against.
//!
//! A registry chooses how many signatures it lists, so how many are read is bounded here:
//! at most [`MAX_SIGNATURE_MANIFESTS`] signature manifests (the `sha256-….sig` tag first, then
//! those the referrers API lists) and at most [`MAX_CANDIDATES`] signature layers in all. What
//! was listed and not read is counted ([`Unchecked`]) so a refusal can say so. Every referrer
//! and payload is read by descriptor (`Client::fetch`): size and digest checked.
//!
//! The signature manifests and payloads go to the [`BlobCache`] with an index per signed
//! digest, so a restart re-verifies them from disk (the signatures are checked again, not a
//! stored verdict) and contacts nothing; the cached candidates are picked under the same
//! bound.

use std::collections::BTreeMap;

use anyhow::anyhow;
use reqwest::StatusCode;
use reqwest::header::ACCEPT;
use serde::{Deserialize, Serialize};

use crate::artifact::{
    Descriptor, MAX_MANIFEST_BYTES, Manifest, OCI_INDEX, OCI_MANIFEST, digest_of,
};
use crate::cache::BlobCache;
use crate::client::{Client, read_limited, registry_error};
use crate::keyless;
use crate::limits::{MAX_CANDIDATES, MAX_SIGNATURE_MANIFESTS, Unchecked};
use crate::object::{Object, check_content};
use crate::reference::{Reference, parse_digest};
use crate::signature::{
    COSIGN_SIGNATURE_ARTIFACT_TYPE, SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE,
    SignatureLayer, Signed, decode_signature, parse_signature_manifest, signature_tag,
};

/// The prefix of Sigstore bundle artifact types (cosign 3's default format).
const SIGSTORE_BUNDLE_ARTIFACT_TYPE: &str = "application/vnd.dev.sigstore.bundle";

/// A signature manifest read from the registry or the cache.
struct SignatureManifest {
    /// `tag sha256-….sig` or `referrer sha256:…`.
    origin: String,
    digest: String,
    bytes: Vec<u8>,
    manifest: Manifest,
}

/// The simple-signing layers of `manifests` to check, in order: at most `budget`, and how many
/// more there were. Each comes with its origin (`tag sha256-….sig layer 3`).
fn select(manifests: &[SignatureManifest], budget: usize) -> (Vec<(String, &Descriptor)>, usize) {
    let mut chosen = Vec::new();
    let mut left = 0;
    for found in manifests {
        for (i, layer) in found.manifest.layers.iter().enumerate() {
            if layer.media_type != SIMPLE_SIGNING_MEDIA_TYPE {
                continue;
            }
            if chosen.len() < budget {
                chosen.push((format!("{} layer {i}", found.origin), layer));
            } else {
                left += 1;
            }
        }
    }
    (chosen, left)
}

/// How many signature layers `manifest` holds.
fn signing_layers(manifest: &Manifest) -> usize {
    manifest
        .layers
        .iter()
        .filter(|l| l.media_type == SIMPLE_SIGNING_MEDIA_TYPE)
        .count()
}

/// The candidate of the signature `layer` whose payload (already checked against the layer's
/// descriptor) is `payload`.
fn candidate(layer: &Descriptor, origin: String, payload: Vec<u8>) -> SignatureLayer {
    let signature = match layer.annotations.get(SIGNATURE_ANNOTATION) {
        Some(sig) => decode_signature(sig),
        None => Err(format!(
            "the layer has no {SIGNATURE_ANNOTATION} annotation"
        )),
    };
    let annotation = |key: &str| layer.annotations.get(key).cloned();
    SignatureLayer {
        signed: Signed::Payload,
        payload,
        signature,
        origin,
        keyless: keyless::Material {
            certificate: annotation(keyless::CERTIFICATE_ANNOTATION),
            chain: annotation(keyless::CHAIN_ANNOTATION),
            bundle: annotation(keyless::BUNDLE_ANNOTATION),
        },
    }
}

/// The cache's index of the signature manifests of one digest.
#[derive(Serialize, Deserialize)]
struct SignatureIndex {
    /// (origin, signature manifest digest).
    manifests: Vec<(String, String)>,
}

fn index_path(cache: &BlobCache, digest: &str) -> Option<std::path::PathBuf> {
    let digest = parse_digest(digest).ok()?;
    Some(
        cache
            .dir()
            .join("signatures")
            .join(format!("{}.json", digest.replacen(':', "-", 1))),
    )
}

/// The signatures of `reference`'s `digest` recorded in the cache (picked under the same
/// bound as from the registry), if every blob is still there and matches its descriptor.
pub(crate) fn cached_signatures(
    cache: &BlobCache,
    reference: &Reference,
    digest: &str,
) -> Option<Vec<SignatureLayer>> {
    let bytes = std::fs::read(index_path(cache, digest)?).ok()?;
    let index: SignatureIndex = serde_json::from_slice(&bytes).ok()?;
    let mut manifests = Vec::new();
    for (origin, manifest_digest) in index.manifests.into_iter().take(MAX_SIGNATURE_MANIFESTS) {
        let bytes = cache.get(&manifest_digest)?;
        let manifest = serde_json::from_slice(&bytes).ok()?;
        manifests.push(SignatureManifest {
            origin,
            digest: manifest_digest,
            bytes,
            manifest,
        });
    }
    let (chosen, _) = select(&manifests, MAX_CANDIDATES);
    let mut out = Vec::new();
    for (origin, layer) in chosen {
        let payload = cache.get(&layer.digest)?;
        check_content(
            reference,
            Object::SignaturePayload,
            &layer.digest,
            Some(layer.size),
            &payload,
        )
        .ok()?;
        out.push(candidate(layer, origin, payload));
    }
    Some(out)
}

fn write_index(cache: &BlobCache, digest: &str, manifests: &[SignatureManifest]) {
    let Some(path) = index_path(cache, digest) else {
        return;
    };
    let index = SignatureIndex {
        manifests: manifests
            .iter()
            .map(|m| (m.origin.clone(), m.digest.clone()))
            .collect(),
    };
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let result = (|| {
        std::fs::create_dir_all(path.parent().expect("index paths have a parent"))?;
        std::fs::write(&tmp, serde_json::to_vec(&index).expect("serialises"))?;
        std::fs::rename(&tmp, &path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        tracing::warn!(path = %path.display(), "cannot write the signature cache: {e}");
    }
}

/// The referrers API's answer: an OCI index. Entries are read one by one, so an entry of
/// another kind that does not parse does not hide the signatures beside it.
#[derive(Deserialize)]
struct Referrers {
    #[serde(default)]
    manifests: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReferrerKind {
    #[serde(default)]
    artifact_type: Option<String>,
}

/// The signature manifests found, the Sigstore bundles that cannot be checked, and what was
/// left unread.
struct Listed {
    manifests: Vec<SignatureManifest>,
    unsupported: Vec<SignatureLayer>,
    unchecked: Unchecked,
}

impl Listed {
    /// Candidates so far: the signature layers of the manifests read, and the bundles.
    fn candidates(&self) -> usize {
        self.manifests
            .iter()
            .map(|m| signing_layers(&m.manifest))
            .sum::<usize>()
            + self.unsupported.len()
    }

    /// Whether another signature manifest may be read.
    fn room(&self) -> bool {
        self.manifests.len() < MAX_SIGNATURE_MANIFESTS && self.candidates() < MAX_CANDIDATES
    }
}

impl Client {
    /// GET of a manifest that may be absent (a tag, the referrers list): `None` on 404.
    pub(crate) async fn optional_manifest(
        &self,
        reference: &Reference,
        what: &str,
        accept: &str,
    ) -> anyhow::Result<Option<Vec<u8>>> {
        let url = self.endpoint(reference, what)?;
        let scope = format!("repository:{}:pull", reference.repository);
        let response = self
            .send(reference, &scope, &url, |http| {
                http.get(url.clone()).header(ACCEPT, accept)
            })
            .await?;
        match response.status() {
            StatusCode::NOT_FOUND => Ok(None),
            s if s.is_success() => Ok(Some(
                read_limited(response, MAX_MANIFEST_BYTES, what)
                    .await
                    .map_err(|e| anyhow!("{reference}: {e}"))?,
            )),
            _ => Err(registry_error(response, &format!("reading {what} of {reference}")).await),
        }
    }

    /// The signature manifests of `digest`: the `sha256-….sig` tag's (what cosign 2 and
    /// `wasm-ccm sign` write), then referrers whose artifact type is cosign's, within the
    /// bounds.
    async fn signature_manifests(
        &self,
        reference: &Reference,
        digest: &str,
        cache: Option<&BlobCache>,
    ) -> anyhow::Result<Listed> {
        let mut listed = Listed {
            manifests: Vec::new(),
            unsupported: Vec::new(),
            unchecked: Unchecked::default(),
        };
        let tag = signature_tag(digest);
        let tagged = Reference {
            tag: Some(tag.clone()),
            digest: None,
            ..reference.clone()
        };
        if let Some(bytes) = self
            .optional_manifest(&tagged, &format!("manifests/{tag}"), OCI_MANIFEST)
            .await?
        {
            let manifest = parse_signature_manifest(&bytes, reference)?;
            listed.manifests.push(SignatureManifest {
                origin: format!("tag {tag}"),
                digest: digest_of(&bytes),
                bytes,
                manifest,
            });
        }
        // The referrers API: a registry without it answers 404 (distribution 2.8) or another
        // client error; either way the tag above still finds cosign 2's signatures.
        let referrers = self
            .optional_manifest(reference, &format!("referrers/{digest}"), OCI_INDEX)
            .await
            .unwrap_or_else(|e| {
                tracing::debug!(error = %e, "no referrers API; using the signature tag");
                None
            });
        let entries = referrers
            .and_then(|bytes| serde_json::from_slice::<Referrers>(&bytes).ok())
            .map(|list| list.manifests)
            .unwrap_or_default();
        for entry in entries {
            let kind = serde_json::from_value::<ReferrerKind>(entry.clone())
                .ok()
                .and_then(|k| k.artifact_type)
                .unwrap_or_default();
            if kind.starts_with(SIGSTORE_BUNDLE_ARTIFACT_TYPE) {
                if listed.candidates() >= MAX_CANDIDATES {
                    listed.unchecked.candidates += 1;
                    continue;
                }
                let origin = match entry.get("digest").and_then(|d| d.as_str()) {
                    Some(d) if parse_digest(d).is_ok() => format!("referrer {d}"),
                    _ => "a referrer".to_string(),
                };
                listed.unsupported.push(SignatureLayer {
                    signed: Signed::Payload,
                    payload: Vec::new(),
                    signature: Err("a Sigstore bundle (cosign 3's default format), which this build does not verify: sign with `wasm-ccm sign`, or `cosign sign --new-bundle-format=false`".to_string()),
                    origin,
                    keyless: keyless::Material::default(),
                });
                continue;
            }
            if kind != COSIGN_SIGNATURE_ARTIFACT_TYPE {
                continue;
            }
            // OCI image-spec: a descriptor has a media type, a digest and a size.
            let descriptor: Descriptor = serde_json::from_value(entry).map_err(|e| {
                anyhow!(
                    "{reference}: the referrers index lists a signature manifest whose descriptor is invalid ({e}): refusing it (a descriptor needs mediaType, digest and size)"
                )
            })?;
            if listed
                .manifests
                .iter()
                .any(|m| m.digest == descriptor.digest)
            {
                continue;
            }
            if !listed.room() {
                listed.unchecked.manifests += 1;
                continue;
            }
            let fetched = self
                .fetch(reference, Object::SignatureManifest, &descriptor, cache)
                .await?;
            let manifest = parse_signature_manifest(&fetched.bytes, reference)?;
            listed.manifests.push(SignatureManifest {
                origin: format!("referrer {}", descriptor.digest),
                digest: descriptor.digest,
                bytes: fetched.bytes,
                manifest,
            });
        }
        Ok(listed)
    }

    /// The signatures of `digest` from the registry, at most [`MAX_CANDIDATES`], and what was
    /// listed and not read. Stored in `cache` with an index.
    pub(crate) async fn signatures(
        &self,
        reference: &Reference,
        digest: &str,
        cache: Option<&BlobCache>,
    ) -> anyhow::Result<(Vec<SignatureLayer>, Unchecked)> {
        let Listed {
            manifests,
            mut unsupported,
            mut unchecked,
        } = self.signature_manifests(reference, digest, cache).await?;
        let budget = MAX_CANDIDATES.saturating_sub(unsupported.len());
        let (chosen, left) = select(&manifests, budget);
        unchecked.candidates += left;
        let mut payloads: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
        let mut layers = Vec::new();
        for (origin, layer) in chosen {
            let payload = match payloads.get(layer.digest.as_str()) {
                // The same payload under another descriptor is checked against that one too.
                Some(bytes) => {
                    check_content(
                        reference,
                        Object::SignaturePayload,
                        &layer.digest,
                        Some(layer.size),
                        bytes,
                    )?;
                    bytes.clone()
                }
                None => {
                    let fetched = self
                        .fetch(reference, Object::SignaturePayload, layer, cache)
                        .await?;
                    payloads.insert(&layer.digest, fetched.bytes.clone());
                    fetched.bytes
                }
            };
            layers.push(candidate(layer, origin, payload));
        }
        if let Some(c) = cache {
            for m in &manifests {
                c.put(&m.digest, &m.bytes);
            }
            write_index(c, digest, &manifests);
        }
        layers.append(&mut unsupported);
        Ok((layers, unchecked))
    }
}
