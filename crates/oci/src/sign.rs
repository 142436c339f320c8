//! Signing a driver in the registry as cosign does: [`Client::sign`] signs a manifest with a
//! key, [`Client::attach_signature`] stores a signature made elsewhere; both add a layer to the
//! `sha256-….sig` manifest (the format is [`crate::signature`]'s).

use std::collections::BTreeMap;

use anyhow::{Context as _, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;

use crate::artifact::{Descriptor, Manifest, OCI_MANIFEST, digest_of};
use crate::client::Client;
use crate::keys::SigningKey;
use crate::reference::Reference;
use crate::signature::{
    SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE, parse_signature_manifest, signature_tag,
    simple_signing_payload,
};

/// The config media type cosign gives signature manifests.
const IMAGE_CONFIG: &str = "application/vnd.oci.image.config.v1+json";

/// What [`Client::sign`] pushed.
#[derive(Debug, Clone)]
pub struct SignedArtifact {
    /// The signed manifest's digest.
    pub manifest_digest: String,
    /// Where the signature lives (`…:sha256-….sig`).
    pub signature_reference: Reference,
    /// The signature manifest's digest.
    pub signature_manifest_digest: String,
    /// The signing key's fingerprint (empty for an attached signature).
    pub key: String,
}

impl Client {
    /// Signs the manifest `reference` names with `key` and stores the signature as cosign
    /// does: a layer added to the `sha256-….sig` manifest (kept signatures stay).
    pub async fn sign(
        &self,
        reference: &Reference,
        key: &SigningKey,
        annotations: &BTreeMap<String, String>,
    ) -> anyhow::Result<SignedArtifact> {
        self.sign_with(reference, key, annotations, &BTreeMap::new())
            .await
    }

    /// [`Client::sign`], with `layer_annotations` on the signature layer: a certificate and
    /// its chain (`dev.sigstore.cosign/certificate`, `…/chain`) make it a keyless-style
    /// signature, checked against a trust root instead of a key.
    pub async fn sign_with(
        &self,
        reference: &Reference,
        key: &SigningKey,
        annotations: &BTreeMap<String, String>,
        layer_annotations: &BTreeMap<String, String>,
    ) -> anyhow::Result<SignedArtifact> {
        // The manifest is fetched even for a digest: signing a digest that is not in the
        // repository (a typo) would publish a signature for nothing.
        let (_, digest, _) = self.fetch_reference(reference, None).await?;
        let payload = simple_signing_payload(
            &format!("{}/{}", reference.registry, reference.repository),
            &digest,
            annotations,
        );
        let signature = key.sign(&payload).map_err(anyhow::Error::msg)?;
        let mut signed = self
            .attach_signature(
                &reference.pinned(&digest),
                &payload,
                &signature,
                layer_annotations,
            )
            .await?;
        signed.key = key.public_key().fingerprint();
        Ok(signed)
    }

    /// Stores a signature made elsewhere as cosign does (`cosign attach signature`): `payload`
    /// and the DER `signature` as a layer of the `sha256-….sig` manifest of the digest
    /// `reference` pins, with `layer_annotations` (a certificate, chain, Rekor bundle) beside
    /// the signature annotation. Nothing is checked: verification is the reader's job.
    pub async fn attach_signature(
        &self,
        reference: &Reference,
        payload: &[u8],
        signature: &[u8],
        layer_annotations: &BTreeMap<String, String>,
    ) -> anyhow::Result<SignedArtifact> {
        let Some(digest) = reference.digest.clone() else {
            bail!("{reference}: a signature is attached to a digest, not a tag");
        };
        let signature = B64.encode(signature);
        let payload = payload.to_vec();
        let tag = signature_tag(&digest);
        let tagged = Reference {
            tag: Some(tag.clone()),
            digest: None,
            ..reference.clone()
        };
        let mut layers = match self
            .optional_manifest(&tagged, &format!("manifests/{tag}"), OCI_MANIFEST)
            .await?
        {
            Some(existing) => {
                parse_signature_manifest(&existing, reference)
                    .with_context(|| format!("the existing {tag} cannot be extended"))?
                    .layers
            }
            None => Vec::new(),
        };
        let layer = Descriptor {
            media_type: SIMPLE_SIGNING_MEDIA_TYPE.to_string(),
            digest: digest_of(&payload),
            size: payload.len() as u64,
            annotations: layer_annotations
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .chain([(SIGNATURE_ANNOTATION.to_string(), signature)])
                .collect(),
            platform: None,
        };
        // ECDSA signatures are randomised: the same key signing twice adds a second layer,
        // as cosign does; a verifier needs only one.
        layers.push(layer);
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": "",
            "config": {},
            "created": "0001-01-01T00:00:00Z",
            "history": [{"created": "0001-01-01T00:00:00Z"}],
            "os": "",
            "rootfs": {"type": "layers", "diff_ids": layers.iter().map(|l| l.digest.clone()).collect::<Vec<_>>()},
        }))
        .expect("serialises");
        let manifest = Manifest {
            schema_version: 2,
            media_type: Some(OCI_MANIFEST.to_string()),
            config: Some(Descriptor {
                media_type: IMAGE_CONFIG.to_string(),
                digest: digest_of(&config),
                size: config.len() as u64,
                annotations: BTreeMap::new(),
                platform: None,
            }),
            layers,
            manifests: Vec::new(),
            annotations: BTreeMap::new(),
        };
        let manifest_bytes = serde_json::to_vec(&manifest).expect("serialises");
        let signature_manifest_digest = self
            .push_manifest(
                &tagged,
                OCI_MANIFEST,
                &manifest_bytes,
                &[payload.as_slice(), config.as_slice()],
            )
            .await?;
        Ok(SignedArtifact {
            manifest_digest: digest,
            signature_reference: tagged,
            signature_manifest_digest,
            key: String::new(),
        })
    }
}
