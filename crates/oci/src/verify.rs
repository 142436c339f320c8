//! Verifying a driver before it is pulled: [`Client::verify`] resolves the reference to a
//! manifest digest, reads its signatures (from the cache when they satisfy the policy, else
//! from the registry, [`crate::candidates`]) and checks the [`Policy`];
//! [`Client::pull_verified`] then pulls the Wasm layer of that signed manifest only.

use anyhow::anyhow;

use crate::cache::BlobCache;
use crate::candidates::cached_signatures;
use crate::client::{Client, Pulled};
use crate::policy::{Policy, Verdict};
use crate::reference::Reference;

/// A verified driver's verdict and whether the registry was asked.
#[derive(Debug, Clone)]
pub struct Verified {
    /// The manifest digest the signatures are for.
    pub manifest_digest: String,
    /// The policy entries satisfied.
    pub verdict: Verdict,
    /// Whether the signatures came from the cache (no request).
    pub from_cache: bool,
}

impl Client {
    /// The manifest digest `reference` names (asking the registry only for a tag), and the
    /// manifest's bytes when they were fetched.
    pub(crate) async fn resolve(
        &self,
        reference: &Reference,
        cache: Option<&BlobCache>,
    ) -> anyhow::Result<(String, Option<Vec<u8>>)> {
        if let Some(digest) = &reference.digest {
            return Ok((digest.clone(), None));
        }
        let (bytes, digest, _) = self.fetch_reference(reference, cache).await?;
        Ok((digest, Some(bytes)))
    }

    /// Verifies `reference` against `policy`: from the cached signatures when they satisfy it
    /// (no request for a digest reference), else from the registry. The error says what failed
    /// and what to do.
    pub async fn verify(
        &self,
        reference: &Reference,
        cache: Option<&BlobCache>,
        policy: &Policy,
    ) -> anyhow::Result<(Verified, Option<Vec<u8>>)> {
        let (digest, manifest) = self.resolve(reference, cache).await?;
        if let Some(c) = cache
            && let Some(layers) = cached_signatures(c, reference, &digest)
            && let Ok(verdict) = policy.evaluate(&digest, &layers)
        {
            return Ok((
                Verified {
                    manifest_digest: digest,
                    verdict,
                    from_cache: true,
                },
                manifest,
            ));
        }
        let (layers, unchecked) = self.signatures(reference, &digest, cache).await?;
        let verdict = policy
            .evaluate_bounded(&digest, &layers, unchecked)
            .map_err(|why| {
            anyhow!(
                "{}: signature verification failed: {why}. Sign the driver as the policy asks (a pubKey entry: `wasm-ccm sign --key KEY {}`; a keyless entry: cosign keyless signing, or `wasm-ccm sign --certificate` with your CA), or pin a digest that is signed",
                reference.pinned(&digest),
                reference.pinned(&digest)
            )
        })?;
        Ok((
            Verified {
                manifest_digest: digest,
                verdict,
                from_cache: false,
            },
            manifest,
        ))
    }

    /// [`Client::verify`], then [`Client::pull`] of the signed manifest: the Wasm layer is
    /// fetched only after the signatures verified, and is checked against the signed digest.
    pub async fn pull_verified(
        &self,
        reference: &Reference,
        cache: Option<&BlobCache>,
        policy: &Policy,
    ) -> anyhow::Result<(Pulled, Verified)> {
        let (verified, manifest) = self.verify(reference, cache, policy).await?;
        let pinned = reference.pinned(&verified.manifest_digest);
        let pulled = self.pull_with_manifest(&pinned, cache, manifest).await?;
        Ok((pulled, verified))
    }
}
