//! A content-addressed store of blobs (manifests and layers) on disk, so a restart does not
//! pull again: `DIR/blobs/sha256/<hex>`, the layout of an OCI image layout's blobs.
//!
//! Every read is re-hashed: a truncated or tampered file is dropped and pulled again, never
//! trusted.

use std::path::{Path, PathBuf};

use crate::artifact::digest_of;

/// The blob store.
#[derive(Debug, Clone)]
pub struct BlobCache {
    dir: PathBuf,
}

impl BlobCache {
    /// A store under `dir` (created when first written).
    pub fn new(dir: impl Into<PathBuf>) -> BlobCache {
        BlobCache { dir: dir.into() }
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the blob `digest` (`sha256:<hex>`) lives.
    pub fn path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        self.dir.join("blobs").join("sha256").join(hex)
    }

    /// The blob, if it is stored and its bytes still hash to `digest`.
    pub fn get(&self, digest: &str) -> Option<Vec<u8>> {
        let path = self.path(digest);
        let bytes = std::fs::read(&path).ok()?;
        if digest_of(&bytes) == digest {
            Some(bytes)
        } else {
            tracing::warn!(path = %path.display(), "cached blob does not match its digest; pulling it again");
            let _ = std::fs::remove_file(&path);
            None
        }
    }

    /// Stores a blob whose digest the caller verified. A failure is logged, not fatal: the
    /// driver still runs, it is just pulled again next time.
    pub fn put(&self, digest: &str, bytes: &[u8]) {
        let path = self.path(digest);
        let result = (|| {
            let parent = path.parent().expect("blob paths have a parent");
            std::fs::create_dir_all(parent)?;
            // Write then rename: a crash or a concurrent reader never sees half a blob.
            let tmp = path.with_extension(format!("tmp{}", std::process::id()));
            std::fs::write(&tmp, bytes)?;
            std::fs::rename(&tmp, &path)
        })();
        if let Err(e) = result {
            tracing::warn!(path = %path.display(), "cannot write the OCI cache: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_round_trip_and_corruption_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BlobCache::new(dir.path());
        let digest = digest_of(b"hello");
        assert_eq!(cache.get(&digest), None);
        cache.put(&digest, b"hello");
        assert_eq!(cache.get(&digest).as_deref(), Some(&b"hello"[..]));
        std::fs::write(cache.path(&digest), b"hellO").unwrap();
        assert_eq!(cache.get(&digest), None, "a tampered blob is not served");
        assert!(!cache.path(&digest).exists(), "and it is removed");
    }
}
