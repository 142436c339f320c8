//! The one way content is read by digest, from the registry or the cache: `Client::fetch`
//! (a descriptor: digest and size) and `Client::fetch_pinned` (a reference's own digest,
//! which carries no size). Both check what came against the size and the digest together,
//! and every refusal names the [`Object`] that failed (its checks are in [`crate::object`]).
//!
//! The OCI image-spec (descriptor.md, "size"): "This property SHOULD be used by consumers to
//! verify the size of the content"; "Content whose size does not match SHOULD NOT be trusted".
//! So a manifest listing a layer as 10 bytes, served 11, is refused even when the digest would
//! match: the manifest lies about its content. Reading stops one byte past the descriptor's
//! size, so a registry cannot make a client read more than the manifest announced.

use anyhow::{anyhow, bail};
use reqwest::header::ACCEPT;
use reqwest::{Method, Response};

use crate::artifact::{DOCKER_MANIFEST, DOCKER_MANIFEST_LIST, Descriptor, OCI_INDEX, OCI_MANIFEST};
use crate::cache::BlobCache;
use crate::client::{Client, registry_error};
use crate::object::{Object, check_content, size_mismatch};
use crate::reference::{Reference, parse_digest};

/// What a fetch returned.
#[derive(Debug, Clone)]
pub(crate) struct Fetched {
    /// The content: its digest and (when a descriptor gave one) its size checked.
    pub(crate) bytes: Vec<u8>,
    /// Whether it came from the cache.
    pub(crate) from_cache: bool,
}

impl Client {
    /// The `object` `descriptor` names: from `cache` when it holds it, else from the registry
    /// (then stored in `cache`). Refused, naming the object, unless the bytes have the
    /// descriptor's size and digest.
    pub(crate) async fn fetch(
        &self,
        reference: &Reference,
        object: Object,
        descriptor: &Descriptor,
        cache: Option<&BlobCache>,
    ) -> anyhow::Result<Fetched> {
        self.fetch_checked(
            reference,
            object,
            &descriptor.digest,
            Some(descriptor.size),
            cache,
        )
        .await
    }

    /// The manifest `digest` that `reference` is pinned to. A reference carries no size, so
    /// only the digest (and the manifest limit) can be checked.
    pub(crate) async fn fetch_pinned(
        &self,
        reference: &Reference,
        digest: &str,
        cache: Option<&BlobCache>,
    ) -> anyhow::Result<Fetched> {
        self.fetch_checked(reference, Object::Manifest, digest, None, cache)
            .await
    }

    async fn fetch_checked(
        &self,
        reference: &Reference,
        object: Object,
        digest: &str,
        size: Option<u64>,
        cache: Option<&BlobCache>,
    ) -> anyhow::Result<Fetched> {
        // The digest goes into a URL and a cache path: only `sha256:` and hex.
        parse_digest(digest)
            .map_err(|e| anyhow!("{reference}: {} is refused: {e}", object.name()))?;
        let limit = object.limit(self.max_wasm_bytes());
        if let Some(size) = size
            && size > limit as u64
        {
            bail!(
                "{reference}: {} {digest} is {size} bytes, over the limit of {limit}: refusing it",
                object.name()
            );
        }
        if let Some(bytes) = cache.and_then(|c| c.get(digest)) {
            // The cache re-hashed it; the size is the descriptor's claim, checked here too.
            check_content(reference, object, digest, size, &bytes)?;
            return Ok(Fetched {
                bytes,
                from_cache: true,
            });
        }
        let response = self.get_object(reference, object, digest).await?;
        let bytes = read_object(response, reference, object, digest, size, limit).await?;
        check_content(reference, object, digest, size, &bytes)?;
        if let Some(c) = cache {
            c.put(digest, &bytes);
        }
        Ok(Fetched {
            bytes,
            from_cache: false,
        })
    }

    async fn get_object(
        &self,
        reference: &Reference,
        object: Object,
        digest: &str,
    ) -> anyhow::Result<Response> {
        let endpoint = if object.is_manifest() {
            "manifests"
        } else {
            "blobs"
        };
        let url = self.endpoint(reference, &format!("{endpoint}/{digest}"))?;
        let scope = format!("repository:{}:pull", reference.repository);
        let accept = [
            OCI_MANIFEST,
            DOCKER_MANIFEST,
            OCI_INDEX,
            DOCKER_MANIFEST_LIST,
        ]
        .join(", ");
        let response = self
            .send(reference, &scope, &url, |http| {
                let request = http.request(Method::GET, url.clone());
                if object.is_manifest() {
                    request.header(ACCEPT, accept.clone())
                } else {
                    request
                }
            })
            .await?;
        if !response.status().is_success() {
            return Err(registry_error(
                response,
                &format!("reading {} {digest} of {reference}", object.name()),
            )
            .await);
        }
        Ok(response)
    }
}

/// Reads the body: at most the descriptor's size plus one byte (enough to tell it is longer),
/// and never more than `limit`.
async fn read_object(
    mut response: Response,
    reference: &Reference,
    object: Object,
    digest: &str,
    size: Option<u64>,
    limit: usize,
) -> anyhow::Result<Vec<u8>> {
    let over_limit = |got: Option<u64>| {
        let got = got.map_or_else(|| format!("more than {limit}"), |n| n.to_string());
        anyhow!(
            "{reference}: {} {digest} is {got} bytes, over the limit of {limit}: refusing it",
            object.name()
        )
    };
    if let Some(len) = response.content_length() {
        if let Some(size) = size
            && len != size
        {
            return Err(size_mismatch(
                reference,
                object,
                digest,
                size,
                &len.to_string(),
            ));
        }
        if len > limit as u64 {
            return Err(over_limit(Some(len)));
        }
    }
    let cap = size.map_or(limit, |s| s as usize);
    let mut out = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| {
        anyhow!(
            "{reference}: reading {} {digest} was cut off: {e}",
            object.name()
        )
    })? {
        if out.len() + chunk.len() > cap {
            return Err(match size {
                Some(size) => size_mismatch(reference, object, digest, size, "more"),
                None => over_limit(None),
            });
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}
