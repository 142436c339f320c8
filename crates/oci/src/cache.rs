//! A content-addressed store of blobs (manifests and layers) on disk, so a restart does not
//! pull again: `DIR/blobs/sha256/<hex>`, the layout of an OCI image layout's blobs.
//!
//! Every read is re-hashed: a truncated or tampered file is dropped and pulled again, never
//! trusted.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::artifact::digest_of;
use crate::reference::parse_digest;

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
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the blob `digest` lives; `None` unless it is `sha256:` and 64 lowercase hex
    /// digits. Digests come from manifests a registry serves: anything else (`../`, an
    /// absolute path) must never become a path.
    pub fn path(&self, digest: &str) -> Option<PathBuf> {
        let digest = parse_digest(digest).ok()?;
        let hex = &digest["sha256:".len()..];
        Some(self.dir.join("blobs").join("sha256").join(hex))
    }

    /// The blob, if it is stored and its bytes still hash to `digest`.
    pub fn get(&self, digest: &str) -> Option<Vec<u8>> {
        let path = self.path(digest)?;
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
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let Some(path) = self.path(digest) else {
            return;
        };
        // Write then rename: a crash or a concurrent reader never sees half a blob.
        let tmp = path.with_extension(format!(
            "tmp{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let result = (|| {
            let parent = path.parent().expect("blob paths have a parent");
            std::fs::create_dir_all(parent)?;
            std::fs::write(&tmp, bytes)?;
            std::fs::rename(&tmp, &path)
        })();
        if let Err(e) = result {
            let _ = std::fs::remove_file(&tmp);
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
        let path = cache.path(&digest).unwrap();
        std::fs::write(&path, b"hellO").unwrap();
        assert_eq!(cache.get(&digest), None, "a tampered blob is not served");
        assert!(!path.exists(), "and it is removed");
    }

    #[test]
    fn digests_that_are_not_sha256_hex_never_become_paths() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep me").unwrap();
        let cache = BlobCache::new(dir.path().join("cache"));
        for hostile in [
            format!("sha256:{}", victim.display()),
            "sha256:../../victim".to_string(),
            "sha256:../victim".to_string(),
            format!("sha256:{}", "A".repeat(64)),
        ] {
            assert_eq!(cache.path(&hostile), None, "{hostile}");
            assert_eq!(cache.get(&hostile), None);
            cache.put(&hostile, b"x");
        }
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
    }
}
