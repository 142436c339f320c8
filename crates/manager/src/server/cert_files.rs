//! The serving certificate's files: reading a PEM chain and key, and [`TlsError`], the error of
//! setting up the serving certificate. `tls.rs` (choosing the pair) and `cert_reload.rs`
//! (reading it again when it changes) both read the files and report these errors, and neither
//! names the other for it.

use std::io;
use std::path::{Path, PathBuf};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

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

pub(super) fn parse_chain(
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

pub(super) fn parse_key(
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
