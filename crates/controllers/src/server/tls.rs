//! The serving certificate of `--secure-port`, chosen like upstream's
//! `k8s.io/apiserver/pkg/server/options/serving.go` (`SecureServingOptions.MaybeDefaultWithSelfSignedCerts`):
//!
//! - `--tls-cert-file` and `--tls-private-key-file` given: that pair is served.
//! - else, `--cert-dir` given: `<cert-dir>/<pair>.crt` and `.key` (upstream's `PairName`, which
//!   the cloud-controller-manager sets to `cloud-controller-manager`) are served when both are
//!   readable; when neither exists a self-signed pair is generated and written there, so a
//!   restart reuses it; when only one exists it is an error, as `certutil.CanReadCertAndKey`
//!   says ("certificate and key must be supplied as a pair").
//! - else a self-signed pair is generated in memory: the cloud-controller-manager's options
//!   (`k8s.io/cloud-provider/options/options.go` `NewCloudControllerManagerOptions`) leave
//!   `CertDirectory` empty "to generate in-memory by default".
//!
//! The generated pair follows `k8s.io/client-go/util/cert.GenerateSelfSignedCertKeyWithFixtures`:
//! a CA (`<host>-ca@<unix time>`) signs a serving certificate (`<host>@<unix time>`) for
//! `localhost`, `127.0.0.1` and the bind address (or `localhost` when it is unspecified), valid
//! from an hour ago for a year; the certificate file holds the serving certificate followed by
//! the CA. Upstream's keys are RSA-2048; these are ECDSA P-256 (what rcgen makes on ring).

use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::ResolvesServerCert;

use super::cert_reload::ReloadingCert;

/// Upstream's `PairName` for the cloud-controller-manager
/// (`cmd/cloud-controller-manager/app/options/options.go`).
pub(crate) const PAIR_NAME: &str = "cloud-controller-manager";

/// Where the serving certificate comes from (the `--cert-dir`, `--tls-*` flags).
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// `--tls-cert-file`: PEM certificates, the serving one first, then intermediates.
    pub cert_file: Option<PathBuf>,
    /// `--tls-private-key-file`: the PEM private key of the first certificate.
    pub key_file: Option<PathBuf>,
    /// `--cert-dir`: where a generated pair is written and reused; ignored with the files above.
    pub cert_dir: Option<PathBuf>,
    /// `--bind-address`: added to the generated certificate unless unspecified.
    pub bind_address: Option<IpAddr>,
}

/// Why no serving certificate could be set up; each names the file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error(
        "--tls-cert-file and --tls-private-key-file must be given together (only {given} is set)"
    )]
    /// Only one of `--tls-cert-file` and `--tls-private-key-file` was given.
    HalfPair {
        /// The flag that was given.
        given: &'static str,
    },
    #[error("cannot read {what} {}: {source}", path.display())]
    /// A certificate or key file could not be read.
    Read {
        /// The flag or role naming the file in the message.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    #[error("{what} {} holds no usable PEM {expected}: {detail}", path.display())]
    /// A file was read but holds no certificate chain or private key in PEM.
    Pem {
        /// The flag or role naming the file in the message.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The kind of PEM block that was looked for.
        expected: &'static str,
        /// What the PEM parser said.
        detail: String,
    },
    #[error(
        "error reading {}, certificate and key must be supplied as a pair: remove the other file of the pair or supply this one",
        path.display()
    )]
    /// In `--cert-dir`, one file of the generated pair is readable and the other is not
    /// (upstream's `CanReadCertAndKey` refuses that too, rather than overwrite half a pair).
    PairIncomplete {
        /// The file that is missing or unreadable.
        path: PathBuf,
    },
    #[error("cannot write the generated {what} {}: {source}", path.display())]
    /// The generated pair could not be written to `--cert-dir`.
    Write {
        /// The directory, key or certificate, named in the message.
        what: &'static str,
        /// The path written.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    #[error("cannot generate a self-signed serving certificate: {0}")]
    /// rcgen could not generate the self-signed pair.
    Generate(#[from] rcgen::Error),
    #[error(
        "the certificate {} and the key {} do not form a usable TLS pair: {source}",
        cert.display(),
        key.display()
    )]
    /// rustls refused the given certificate and key (e.g. the key does not match).
    Config {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// What rustls said.
        source: rustls::Error,
    },
    #[error("the generated serving certificate is unusable: {0}")]
    /// rustls refused the pair generated in memory.
    GeneratedConfig(rustls::Error),
}

/// The certificate chain and key that are served, and where they came from (for the log).
pub struct ServingCert {
    /// Serving certificate first.
    pub chain: Vec<CertificateDer<'static>>,
    /// The private key of the serving certificate.
    pub key: PrivateKeyDer<'static>,
    /// The files, or `None` for an in-memory pair.
    pub files: Option<(PathBuf, PathBuf)>,
    /// Whether the pair was generated by this process.
    pub generated: bool,
}

impl TlsOptions {
    /// Loads or generates the serving certificate as upstream does (see the module docs).
    pub fn serving_cert(&self) -> Result<ServingCert, TlsError> {
        match (&self.cert_file, &self.key_file) {
            (Some(cert), Some(key)) => {
                return Ok(ServingCert {
                    chain: read_chain("--tls-cert-file", cert)?,
                    key: read_key("--tls-private-key-file", key)?,
                    files: Some((cert.clone(), key.clone())),
                    generated: false,
                });
            }
            (Some(_), None) => {
                return Err(TlsError::HalfPair {
                    given: "--tls-cert-file",
                });
            }
            (None, Some(_)) => {
                return Err(TlsError::HalfPair {
                    given: "--tls-private-key-file",
                });
            }
            (None, None) => {}
        }
        let Some(dir) = self.cert_dir.as_ref().filter(|d| !d.as_os_str().is_empty()) else {
            let (chain_pem, key_pem) = self.generate()?;
            return Ok(ServingCert {
                chain: parse_chain("generated certificate", Path::new(""), &chain_pem)?,
                key: parse_key("generated key", Path::new(""), &key_pem)?,
                files: None,
                generated: true,
            });
        };
        let cert = dir.join(format!("{PAIR_NAME}.crt"));
        let key = dir.join(format!("{PAIR_NAME}.key"));
        if can_read_pair(&cert, &key)? {
            return Ok(ServingCert {
                chain: read_chain("--cert-dir certificate", &cert)?,
                key: read_key("--cert-dir key", &key)?,
                files: Some((cert, key)),
                generated: false,
            });
        }
        let (chain_pem, key_pem) = self.generate()?;
        write_pair(dir, &cert, chain_pem.as_bytes(), &key, key_pem.as_bytes())?;
        Ok(ServingCert {
            chain: parse_chain("generated certificate", &cert, &chain_pem)?,
            key: parse_key("generated key", &key, &key_pem)?,
            files: Some((cert, key)),
            generated: true,
        })
    }

    /// The self-signed pair as PEM: (serving certificate + CA, key).
    fn generate(&self) -> Result<(String, String), TlsError> {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
            KeyPair, KeyUsagePurpose,
        };
        // `MaybeDefaultWithSelfSignedCerts("localhost", nil, [127.0.0.1])` in the
        // cloud-controller-manager's options; the bind address, or `localhost` when it is
        // unspecified, is added to the alternates.
        let host = "localhost";
        let mut names = vec![host.to_string(), "127.0.0.1".to_string()];
        match self.bind_address {
            Some(ip) if !ip.is_unspecified() => names.push(ip.to_string()),
            _ => names.push("localhost".to_string()),
        }
        names.dedup();
        let now = time::OffsetDateTime::now_utc();
        let unix = now.unix_timestamp();
        // Valid an hour earlier against clock skew, for one year (as upstream).
        let not_before = now - time::Duration::hours(1);
        let not_after = not_before + time::Duration::days(365);

        let ca_key = KeyPair::generate()?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.distinguished_name
            .push(DnType::CommonName, format!("{host}-ca@{unix}"));
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyCertSign,
        ];
        ca.not_before = not_before;
        ca.not_after = not_after;
        let ca_cert = ca.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca, ca_key);

        let key = KeyPair::generate()?;
        let mut serving = CertificateParams::new(names)?;
        serving
            .distinguished_name
            .push(DnType::CommonName, format!("{host}@{unix}"));
        serving.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        serving.not_before = not_before;
        serving.not_after = not_after;
        let cert = serving.signed_by(&key, &issuer)?;
        Ok((
            format!("{}{}", cert.pem(), ca_cert.pem()),
            key.serialize_pem(),
        ))
    }
}

/// `--tls-min-version`: the oldest TLS version served. rustls speaks only 1.2 and 1.3, so of
/// upstream's `VersionTLS10`..`VersionTLS13` the first two are refused ([`MinTlsVersion::parse`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MinTlsVersion {
    /// `VersionTLS12`: TLS 1.2 and 1.3 (upstream's default is 1.2 as well).
    #[default]
    Tls12,
    /// `VersionTLS13`: TLS 1.3 only.
    Tls13,
}

impl MinTlsVersion {
    /// Reads upstream's spelling; an empty value is the default.
    pub fn parse(value: &str) -> Result<MinTlsVersion, String> {
        match value.trim() {
            "" | "VersionTLS12" => Ok(MinTlsVersion::Tls12),
            "VersionTLS13" => Ok(MinTlsVersion::Tls13),
            v @ ("VersionTLS10" | "VersionTLS11") => Err(format!(
                "--tls-min-version={v} is not supported: TLS 1.0 and 1.1 are not implemented here (rustls); use VersionTLS12 or VersionTLS13"
            )),
            v => Err(format!(
                "--tls-min-version={v:?} is not a TLS version; use VersionTLS12 or VersionTLS13"
            )),
        }
    }

    fn protocol_versions(self) -> &'static [&'static rustls::SupportedProtocolVersion] {
        static TLS13_ONLY: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS13];
        match self {
            MinTlsVersion::Tls12 => rustls::ALL_VERSIONS,
            MinTlsVersion::Tls13 => &TLS13_ONLY,
        }
    }
}

/// The rustls configuration serving `cert` over HTTP/1.1 with ring's cryptography, TLS
/// `min_version` and newer.
///
/// A pair read from files is read again when the files change (`cert_reload.rs`), checked every
/// [`CHECK_EVERY`](super::cert_reload::CHECK_EVERY) until the configuration is dropped.
pub fn server_config(
    cert: ServingCert,
    min_version: MinTlsVersion,
) -> Result<Arc<ServerConfig>, TlsError> {
    let (config, reloading) = server_config_parts(cert, min_version)?;
    if let Some(reloading) = reloading {
        reloading.watch(super::cert_reload::CHECK_EVERY);
    }
    Ok(config)
}

/// [`server_config`] without the watch: the configuration and, for a pair from files, what
/// reloads it (tests call its `check`).
pub(crate) fn server_config_parts(
    cert: ServingCert,
    min_version: MinTlsVersion,
) -> Result<(Arc<ServerConfig>, Option<Arc<ReloadingCert>>), TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let files = cert
        .files
        .clone()
        .filter(|(cert, _)| !cert.as_os_str().is_empty());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(min_version.protocol_versions());
    let (mut config, reloading) = match files {
        Some((cert_file, key_file)) => {
            let reloading = ReloadingCert::load(&cert_file, &key_file, provider)?;
            let config = builder
                .map_err(|source| TlsError::Config {
                    cert: cert_file,
                    key: key_file,
                    source,
                })?
                .with_no_client_auth()
                .with_cert_resolver(Arc::clone(&reloading) as Arc<dyn ResolvesServerCert>);
            (config, Some(reloading))
        }
        None => {
            let config = builder
                .and_then(|b| {
                    b.with_no_client_auth()
                        .with_single_cert(cert.chain, cert.key)
                })
                .map_err(TlsError::GeneratedConfig)?;
            (config, None)
        }
    };
    // The router speaks HTTP/1.1 only (axum's `http1` feature).
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((Arc::new(config), reloading))
}

/// `certutil.CanReadCertAndKey`: both readable → reuse, neither → generate, one → error.
fn can_read_pair(cert: &Path, key: &Path) -> Result<bool, TlsError> {
    let readable = |p: &Path| std::fs::File::open(p).is_ok();
    match (readable(cert), readable(key)) {
        (true, true) => Ok(true),
        (false, false) => Ok(false),
        (false, true) => Err(TlsError::PairIncomplete {
            path: cert.to_path_buf(),
        }),
        (true, false) => Err(TlsError::PairIncomplete {
            path: key.to_path_buf(),
        }),
    }
}

/// Writes the generated pair like `certutil.WriteCert` (0644, directories 0755) and
/// `keyutil.WriteKey` (0600), but each through a temporary file in `dir` renamed into place, the
/// key first: a crash mid-write leaves no truncated file, and never a certificate without its key
/// (which the next start would refuse as half a pair).
fn write_pair(
    dir: &Path,
    cert: &Path,
    cert_pem: &[u8],
    key: &Path,
    key_pem: &[u8],
) -> Result<(), TlsError> {
    std::fs::create_dir_all(dir).map_err(|source| TlsError::Write {
        what: "--cert-dir",
        path: dir.to_path_buf(),
        source,
    })?;
    write_atomically(dir, key, key_pem, 0o600).map_err(|source| TlsError::Write {
        what: "key",
        path: key.to_path_buf(),
        source,
    })?;
    write_atomically(dir, cert, cert_pem, 0o644).map_err(|source| TlsError::Write {
        what: "certificate",
        path: cert.to_path_buf(),
        source,
    })
}

/// Writes `bytes` to a new temporary file in `dir` (created with `mode`, so a key is never
/// readable by others, not even briefly) and renames it to `path`.
fn write_atomically(dir: &Path, path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    use std::io::Write as _;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.tmp-{}-{:016x}",
        std::process::id(),
        rand::random::<u64>()
    ));
    let mut options = std::fs::OpenOptions::new();
    // `create_new`: never follow or reuse a file someone else put there.
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let written = options.open(&tmp).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    let renamed = written.and_then(|()| std::fs::rename(&tmp, path));
    if renamed.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    renamed?;
    // The rename itself survives a crash only once the directory is synced (best effort: not
    // every filesystem allows opening a directory).
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

pub(super) fn read_chain(
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(what, path)?;
    parse_chain(what, path, &bytes)
}

pub(super) fn read_key(
    what: &'static str,
    path: &Path,
) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read(what, path)?;
    parse_key(what, path, &bytes)
}

fn parse_chain(
    what: &'static str,
    path: &Path,
    pem: impl AsRef<[u8]>,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let invalid = |detail: String| TlsError::Pem {
        what,
        path: path.to_path_buf(),
        expected: "CERTIFICATE block",
        detail,
    };
    let chain = CertificateDer::pem_slice_iter(pem.as_ref())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(e.to_string()))?;
    if chain.is_empty() {
        return Err(invalid("no certificate found".into()));
    }
    Ok(chain)
}

fn parse_key(
    what: &'static str,
    path: &Path,
    pem: impl AsRef<[u8]>,
) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(pem.as_ref()).map_err(|e| TlsError::Pem {
        what,
        path: path.to_path_buf(),
        expected: "private key (PKCS#8, PKCS#1 or SEC1)",
        detail: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_in_memory_without_files() {
        let cert = TlsOptions::default().serving_cert().expect("generated");
        assert!(cert.generated);
        assert!(cert.files.is_none());
        assert_eq!(cert.chain.len(), 2, "serving certificate and its CA");
        server_config(cert, MinTlsVersion::Tls12).expect("usable");
    }

    #[test]
    fn min_tls_version_is_read_like_upstream() {
        assert_eq!(MinTlsVersion::parse(""), Ok(MinTlsVersion::Tls12));
        assert_eq!(
            MinTlsVersion::parse("VersionTLS12"),
            Ok(MinTlsVersion::Tls12)
        );
        assert_eq!(
            MinTlsVersion::parse("VersionTLS13"),
            Ok(MinTlsVersion::Tls13)
        );
        for old in ["VersionTLS10", "VersionTLS11"] {
            let err = MinTlsVersion::parse(old).expect_err("unsupported");
            assert!(err.contains("not supported") && err.contains(old), "{err}");
        }
        assert!(MinTlsVersion::parse("TLS1.2").is_err());
        let cert = TlsOptions::default().serving_cert().expect("generated");
        server_config(cert, MinTlsVersion::Tls13).expect("usable with TLS 1.3 only");
    }

    #[cfg(unix)]
    #[test]
    fn generated_pair_is_renamed_into_place_and_the_key_is_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!(
            "wasm-ccm-tls-atomic-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&dir).expect("dir");
        let crt = dir.join("cloud-controller-manager.crt");
        let key = dir.join("cloud-controller-manager.key");
        // Dangling links where the pair belongs: writing through a path (the old way) fails on
        // them, a rename replaces them; either way nothing is written outside `dir`.
        std::os::unix::fs::symlink(dir.join("gone/crt"), &crt).expect("link");
        std::os::unix::fs::symlink(dir.join("gone/key"), &key).expect("link");
        let opts = TlsOptions {
            cert_dir: Some(dir.clone()),
            ..Default::default()
        };
        let cert = opts.serving_cert().expect("generated");
        assert!(cert.generated);
        for path in [&crt, &key] {
            let meta = std::fs::symlink_metadata(path).expect("written");
            assert!(meta.file_type().is_file(), "{} is a file", path.display());
        }
        let mode = std::fs::metadata(&key).expect("key").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .expect("read dir")
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp-"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        assert!(!opts.serving_cert().expect("reused").generated);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn bad_files_are_named() {
        let dir = std::env::temp_dir().join(format!(
            "wasm-ccm-tls-bad-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&dir).expect("dir");
        let crt = dir.join("tls.crt");
        std::fs::write(&crt, "not a certificate").expect("write");
        let opts = TlsOptions {
            cert_file: Some(crt.clone()),
            key_file: Some(dir.join("missing.key")),
            ..Default::default()
        };
        let err = opts.serving_cert().err().expect("bad files");
        assert!(err.to_string().contains("tls.crt"), "{err}");
        let half = TlsOptions {
            cert_file: Some(crt),
            ..Default::default()
        };
        assert!(matches!(
            half.serving_cert(),
            Err(TlsError::HalfPair { .. })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
