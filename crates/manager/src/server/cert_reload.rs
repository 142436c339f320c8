//! Serving certificate files read again when they change, as upstream's dynamic serving
//! (`k8s.io/apiserver/pkg/server/dynamiccertificates`, `DynamicCertKeyPairContent`): a renewed
//! certificate (cert-manager, a rotated Secret) is served to new connections without a
//! restart, and a new pair that does not load (half-written, key not matching) keeps the old
//! one serving and is tried again on the next check.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::cert_files::{TlsError, read_chain, read_key};

/// How often the files are checked (upstream: a file watch plus a resync every minute; a stat
/// of two files every 10 s is as cheap and needs no inotify).
pub(crate) const CHECK_EVERY: Duration = Duration::from_secs(10);

/// What identifies a version of a file: a Secret volume swaps a symlink, so the inode
/// changes even when size and time do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: i64,
    mtime_nsec: i64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        mtime: m.mtime(),
        mtime_nsec: m.mtime_nsec(),
    })
}

/// What one check did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Checked {
    /// The files are as last loaded.
    Unchanged,
    /// A new pair is served.
    Reloaded,
    /// The files changed but do not form a usable pair; the old one keeps serving.
    Refused(String),
}

/// The serving pair of two files, swapped when they change.
#[derive(Debug)]
pub(crate) struct ReloadingCert {
    cert_file: PathBuf,
    key_file: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
    /// The stamps of the pair in service, or of the last refused one (tried once per change).
    seen: Mutex<(Option<Stamp>, Option<Stamp>)>,
}

impl ReloadingCert {
    /// Loads the pair; an unusable one is the error `server_config` reports at start-up.
    pub(crate) fn load(
        cert_file: &Path,
        key_file: &Path,
        provider: Arc<CryptoProvider>,
    ) -> Result<Arc<ReloadingCert>, TlsError> {
        let seen = (stamp(cert_file), stamp(key_file));
        let key = certified(cert_file, key_file, &provider)?;
        Ok(Arc::new(ReloadingCert {
            cert_file: cert_file.to_path_buf(),
            key_file: key_file.to_path_buf(),
            provider,
            current: RwLock::new(Arc::new(key)),
            seen: Mutex::new(seen),
        }))
    }

    /// Reads the files again if they changed since the last check.
    pub(crate) fn check(&self) -> Checked {
        let now = (stamp(&self.cert_file), stamp(&self.key_file));
        {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            if *seen == now {
                return Checked::Unchanged;
            }
            *seen = now;
        }
        match certified(&self.cert_file, &self.key_file, &self.provider) {
            Ok(key) => {
                *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(key);
                tracing::info!(cert = %self.cert_file.display(), "serving certificate reloaded");
                Checked::Reloaded
            }
            Err(e) => {
                tracing::warn!(error = %e, "the changed serving certificate was not loaded; the previous one keeps serving (it is read again when the files change)");
                Checked::Refused(e.to_string())
            }
        }
    }

    /// Checks every `every` on a thread of its own until the configuration that serves this
    /// pair is dropped.
    pub(crate) fn watch(self: &Arc<Self>, every: Duration) {
        let weak: Weak<ReloadingCert> = Arc::downgrade(self);
        let spawned = std::thread::Builder::new()
            .name("serving-cert-reload".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(every);
                    let Some(cert) = weak.upgrade() else {
                        return;
                    };
                    cert.check();
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot watch the serving certificate files; a renewed certificate needs a restart");
        }
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(
            &self.current.read().unwrap_or_else(|p| p.into_inner()),
        ))
    }
}

/// The pair as rustls serves it, with the key checked against the certificate.
fn certified(
    cert_file: &Path,
    key_file: &Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let chain = read_chain("--tls-cert-file", cert_file)?;
    let key = read_key("--tls-private-key-file", key_file)?;
    let config = |source| TlsError::Config {
        cert: cert_file.to_path_buf(),
        key: key_file.to_path_buf(),
        source,
    };
    let certified = CertifiedKey::from_der(chain, key, provider).map_err(config)?;
    // `from_der` lets an unknown consistency pass; a key whose public half is known must match.
    match certified.keys_match() {
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {
            Ok(certified)
        }
        Err(e) => Err(config(e)),
    }
}

#[cfg(test)]
impl ReloadingCert {
    /// The pair served now.
    pub(crate) fn current(&self) -> Arc<CertifiedKey> {
        Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tls::{MinTlsVersion, PAIR_NAME, TlsOptions, server_config_parts};
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "wasm-ccm-cert-reload-{tag}-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&dir).expect("dir");
        dir
    }

    /// A generated pair written to a fresh directory: (cert file, key file).
    fn pair(tag: &str) -> (PathBuf, PathBuf) {
        let dir = temp_dir(tag);
        let opts = TlsOptions {
            cert_dir: Some(dir.clone()),
            ..Default::default()
        };
        let cert = opts.serving_cert().expect("generated into the directory");
        assert!(cert.generated);
        (
            dir.join(format!("{PAIR_NAME}.crt")),
            dir.join(format!("{PAIR_NAME}.key")),
        )
    }

    /// Replaces `path` as a Secret volume update does: a new file renamed into place.
    fn replace(path: &Path, bytes: &[u8]) {
        let tmp = path.with_extension("new");
        std::fs::write(&tmp, bytes).expect("write");
        std::fs::rename(&tmp, path).expect("rename");
    }

    fn first_cert(path: &Path) -> Vec<u8> {
        read_chain("test", path).expect("chain")[0].to_vec()
    }

    #[test]
    fn changed_files_are_served_and_a_bad_pair_keeps_the_old_one() {
        let (cert_a, key_a) = pair("a");
        let (cert_b, key_b) = pair("b");
        let serving = TlsOptions {
            cert_file: Some(cert_a.clone()),
            key_file: Some(key_a.clone()),
            ..Default::default()
        }
        .serving_cert()
        .expect("pair a");
        let (_config, reloading) =
            server_config_parts(serving, MinTlsVersion::Tls12).expect("usable");
        let reloading = reloading.expect("files are watched");
        let a = first_cert(&cert_a);
        assert_eq!(reloading.check(), Checked::Unchanged);
        assert_eq!(reloading.current().cert[0].to_vec(), a);

        // The key changes first (a rotation is two writes): it does not match, nothing changes.
        replace(&key_a, &std::fs::read(&key_b).expect("key b"));
        assert!(
            matches!(reloading.check(), Checked::Refused(e) if e.contains("do not form a usable TLS pair")),
        );
        assert_eq!(reloading.current().cert[0].to_vec(), a);
        // Refused once per change: the same files are not read again.
        assert_eq!(reloading.check(), Checked::Unchanged);

        // Then the certificate: the new pair is served.
        replace(&cert_a, &std::fs::read(&cert_b).expect("cert b"));
        assert_eq!(reloading.check(), Checked::Reloaded);
        let b = first_cert(&cert_b);
        assert_eq!(reloading.current().cert[0].to_vec(), b);
        assert_eq!(reloading.check(), Checked::Unchanged);

        // A broken certificate file keeps the pair in service.
        replace(&cert_a, b"not a certificate");
        assert!(matches!(reloading.check(), Checked::Refused(e) if e.contains("tls-cert-file")));
        assert_eq!(reloading.current().cert[0].to_vec(), b);
        // A missing file too.
        std::fs::remove_file(&key_a).expect("remove");
        assert!(matches!(reloading.check(), Checked::Refused(_)));
        assert_eq!(reloading.current().cert[0].to_vec(), b);

        for dir in [cert_a.parent(), cert_b.parent()].into_iter().flatten() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
