//! Keyless (certificate-based) cosign signatures, checked offline against a [`TrustRoot`].
//!
//! cosign's keyless signature layer carries, beside the signature, the signer's short-lived
//! certificate (`dev.sigstore.cosign/certificate`, PEM), the issuing chain
//! (`dev.sigstore.cosign/chain`, PEM) and the Rekor bundle (`dev.sigstore.cosign/bundle`: the
//! log's signed entry timestamp over `{body, integratedTime, logIndex, logID}`). A signature
//! verifies when:
//!
//! 1. the certificate's ECDSA P-256 key verifies the signature over the payload;
//! 2. with transparency logs in the trust root: the bundle is there, names a log of the trust
//!    root whose key signed it (the SET over the canonical JSON of the entry), and its body is
//!    a `hashedrekord` naming this signature, the payload's sha256 and this certificate; the
//!    entry's `integratedTime` is the moment the certificate must have been valid at. Without
//!    tlogs, the certificate must be valid now (short-lived certificates then expire within
//!    minutes: this suits a private CA with longer-lived certificates);
//! 3. the certificate chains (rustls-webpki) to the last certificate of a `certificateAuthorities`
//!    entry valid at that moment, with the codeSigning extended key usage;
//! 4. its identity, the subject alternative names (email or URI) and the Fulcio issuer
//!    extension, is then matched by the policy ([`Policy`](crate::Policy)).
//!
//! Nothing here makes a request.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use rustls_pki_types::{CertificateDer, UnixTime};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};
use webpki::{EndEntityCert, KeyUsage};

use crate::keys::PublicKey;
use crate::trust_root::TrustRoot;

/// The layer annotation holding the signer's certificate (PEM).
pub const CERTIFICATE_ANNOTATION: &str = "dev.sigstore.cosign/certificate";
/// The layer annotation holding the certificate's issuing chain (PEM, intermediates then root).
pub const CHAIN_ANNOTATION: &str = "dev.sigstore.cosign/chain";
/// The layer annotation holding the Rekor bundle (JSON).
pub const BUNDLE_ANNOTATION: &str = "dev.sigstore.cosign/bundle";
/// Fulcio's issuer extension (DER UTF8String), and its legacy raw-string form.
pub(crate) const OID_ISSUER_V2: &str = "1.3.6.1.4.1.57264.1.8";
/// See [`OID_ISSUER_V2`].
pub(crate) const OID_ISSUER_V1: &str = "1.3.6.1.4.1.57264.1.1";

/// The largest certificate annotation read (Fulcio's are about 3 KiB).
pub(crate) const MAX_CERTIFICATE_BYTES: usize = 16 * 1024;
/// The largest chain annotation read.
pub(crate) const MAX_CHAIN_BYTES: usize = 64 * 1024;
/// At most this many certificates in a chain.
pub(crate) const MAX_CHAIN_CERTIFICATES: usize = 8;
/// The largest bundle annotation read (a few KiB: the body carries the certificate).
pub(crate) const MAX_BUNDLE_BYTES: usize = 64 * 1024;

/// id-kp-codeSigning (1.3.6.1.5.5.7.3.3), the OID's value bytes.
const CODE_SIGNING: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x03];

/// The certificate material of one signature layer, as found in its annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Material {
    /// `dev.sigstore.cosign/certificate`.
    pub certificate: Option<String>,
    /// `dev.sigstore.cosign/chain`.
    pub chain: Option<String>,
    /// `dev.sigstore.cosign/bundle`.
    pub bundle: Option<String>,
}

impl Material {
    /// Whether the layer is a keyless (certificate) signature.
    pub(crate) fn is_keyless(&self) -> bool {
        self.certificate.is_some()
    }
}

/// Who signed, as the verified certificate says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Signer {
    /// The subject alternative names: emails and URIs.
    pub(crate) subjects: Vec<String>,
    /// The OIDC issuer (Fulcio's extension), if the certificate has one.
    pub(crate) issuer: Option<String>,
    /// The Rekor entry's integrated time and log index, when a log was checked.
    pub(crate) log_entry: Option<(i64, i64)>,
}

#[derive(Deserialize)]
struct Bundle {
    #[serde(rename = "SignedEntryTimestamp")]
    signed_entry_timestamp: String,
    #[serde(rename = "Payload")]
    payload: BundlePayload,
}

#[derive(Deserialize)]
struct BundlePayload {
    body: String,
    #[serde(rename = "integratedTime")]
    integrated_time: i64,
    #[serde(rename = "logIndex")]
    log_index: i64,
    #[serde(rename = "logID")]
    log_id: String,
}

#[derive(Deserialize)]
struct Entry {
    kind: String,
    spec: EntrySpec,
}

#[derive(Deserialize)]
struct EntrySpec {
    data: EntryData,
    signature: EntrySignature,
}

#[derive(Deserialize)]
struct EntryData {
    hash: EntryHash,
}

#[derive(Deserialize)]
struct EntryHash {
    algorithm: String,
    value: String,
}

#[derive(Deserialize)]
struct EntrySignature {
    content: String,
    #[serde(rename = "publicKey")]
    public_key: EntryKey,
}

#[derive(Deserialize)]
struct EntryKey {
    content: String,
}

fn bounded<'a>(text: &'a str, max: usize, what: &str) -> Result<&'a str, String> {
    if text.len() > max {
        Err(format!(
            "its {what} annotation is {} bytes, more than the {max} accepted",
            text.len()
        ))
    } else {
        Ok(text)
    }
}

fn certificates(text: &str, what: &str) -> Result<Vec<Vec<u8>>, String> {
    let blocks =
        pem::parse_many(text.trim()).map_err(|e| format!("its {what} is not PEM ({e})"))?;
    if blocks.len() > MAX_CHAIN_CERTIFICATES {
        return Err(format!(
            "its {what} has {} certificates, more than the {MAX_CHAIN_CERTIFICATES} accepted",
            blocks.len()
        ));
    }
    blocks
        .into_iter()
        .map(|b| {
            if b.tag() == "CERTIFICATE" {
                Ok(b.into_contents())
            } else {
                Err(format!(
                    "its {what} holds a PEM {:?} block, not a CERTIFICATE",
                    b.tag()
                ))
            }
        })
        .collect()
}

/// The canonical JSON a Rekor SET signs: sorted keys, no spaces.
fn canonical_entry(p: &BundlePayload) -> Vec<u8> {
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_default();
    format!(
        "{{\"body\":{},\"integratedTime\":{},\"logID\":{},\"logIndex\":{}}}",
        quote(&p.body),
        p.integrated_time,
        quote(&p.log_id),
        p.log_index
    )
    .into_bytes()
}

/// Checks the Rekor bundle against the trust root's logs and this signature; returns the
/// integrated time and log index.
fn check_bundle(
    root: &TrustRoot,
    text: &str,
    payload: &[u8],
    signature: &[u8],
    leaf_der: &[u8],
) -> Result<(i64, i64), String> {
    let bundle: Bundle = serde_json::from_str(bounded(text, MAX_BUNDLE_BYTES, BUNDLE_ANNOTATION)?)
        .map_err(|e| {
            format!("its Rekor bundle ({BUNDLE_ANNOTATION}) is not cosign's bundle JSON ({e})")
        })?;
    let entry = &bundle.payload;
    let Some(log) = root.logs.iter().find(|l| l.is(&entry.log_id)) else {
        return Err(format!(
            "its Rekor entry is from the log {}, which is not in the trust root's tlogs: add that log's key to the trust root, or re-sign with a log it names",
            entry.log_id
        ));
    };
    if !log.valid_at(entry.integrated_time) {
        return Err(format!(
            "its Rekor entry's integratedTime {} is outside the validFor of {}",
            entry.integrated_time, log.name
        ));
    }
    let set = B64
        .decode(bundle.signed_entry_timestamp.trim())
        .map_err(|e| format!("its Rekor SignedEntryTimestamp is not base64 ({e})"))?;
    if !log.key.verify(&canonical_entry(entry), &set) {
        return Err(format!(
            "its Rekor signed entry timestamp does not verify with the key of {} (the entry was altered, or another key signed it)",
            log.name
        ));
    }
    // The log vouches for the body: it must be about this signature.
    let body = B64
        .decode(entry.body.trim())
        .map_err(|e| format!("its Rekor entry body is not base64 ({e})"))?;
    let body: Entry = serde_json::from_slice(&body)
        .map_err(|e| format!("its Rekor entry body is not a hashedrekord entry ({e})"))?;
    if body.kind != "hashedrekord" {
        return Err(format!(
            "its Rekor entry is of kind {:?}, not hashedrekord",
            body.kind
        ));
    }
    let hash = &body.spec.data.hash;
    let want = hex::encode(Sha256::digest(payload));
    if hash.algorithm != "sha256" || !hash.value.eq_ignore_ascii_case(&want) {
        return Err(format!(
            "its Rekor entry is for other bytes ({} {}, the payload's sha256 is {want})",
            hash.algorithm, hash.value
        ));
    }
    if B64
        .decode(body.spec.signature.content.trim())
        .ok()
        .as_deref()
        != Some(signature)
    {
        return Err(
            "its Rekor entry names another signature (an entry copied from another signing)"
                .to_string(),
        );
    }
    let logged = B64
        .decode(body.spec.signature.public_key.content.trim())
        .ok()
        .and_then(|pem_text| pem::parse(pem_text).ok());
    if logged.as_ref().map(|b| b.contents()) != Some(leaf_der) {
        return Err("its Rekor entry names another certificate than the layer's".to_string());
    }
    Ok((entry.integrated_time, entry.log_index))
}

/// The public key of a PEM certificate (for `sign --certificate` to check it matches the key).
pub fn certificate_key(pem_text: &str) -> Result<PublicKey, String> {
    let der = certificates(
        bounded(pem_text, MAX_CERTIFICATE_BYTES, "certificate")?,
        "certificate",
    )?;
    let [der] = der.as_slice() else {
        return Err(format!("{} certificates, not one", der.len()));
    };
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| format!("not a valid X.509 certificate ({e})"))?;
    PublicKey::from_spki_der(cert.public_key().raw).map_err(|e| format!("its key is {e}"))
}

/// The DER UTF8String `value` (Fulcio's v2 extensions), or `None`.
fn der_utf8(value: &[u8]) -> Option<String> {
    let (&tag, rest) = value.split_first()?;
    if tag != 0x0c {
        return None;
    }
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = match first {
        n if n < 0x80 => (usize::from(n), rest),
        0x81 => (usize::from(*rest.first()?), rest.get(1..)?),
        0x82 => (
            usize::from(*rest.first()?) << 8 | usize::from(*rest.get(1)?),
            rest.get(2..)?,
        ),
        _ => return None,
    };
    if rest.len() != len {
        return None;
    }
    String::from_utf8(rest.to_vec()).ok()
}

fn webpki_reason(e: &webpki::Error, at: i64, with_log: bool) -> String {
    let when = if with_log {
        format!("at the Rekor integratedTime {at}")
    } else {
        format!("now ({at}; the trust root has no tlogs)")
    };
    match e {
        webpki::Error::CertExpired { .. } => {
            format!("a certificate of the path had expired {when}")
        }
        webpki::Error::CertNotValidYet { .. } => {
            format!("a certificate of the path was not yet valid {when}")
        }
        webpki::Error::UnknownIssuer => {
            "the certificate does not chain to this CA (issued by another CA)".to_string()
        }
        webpki::Error::InvalidSignatureForPublicKey => {
            "the certificate does not chain to this CA (a certificate of the path is signed by another key of the same name)".to_string()
        }
        webpki::Error::RequiredEkuNotFoundContext(_) => {
            "the certificate lacks the codeSigning extended key usage".to_string()
        }
        other => format!("the certificate path does not verify ({other:?})"),
    }
}

/// Verifies a keyless signature layer: the signature over `payload`, the Rekor bundle when
/// the trust root has logs, the certificate path. The policy then matches the [`Signer`].
pub(crate) fn verify(
    root: &TrustRoot,
    material: &Material,
    payload: &[u8],
    signature: &[u8],
) -> Result<Signer, String> {
    let Some(cert_text) = &material.certificate else {
        return Err(format!(
            "it carries no certificate ({CERTIFICATE_ANNOTATION}): a key-based signature, not a keyless one"
        ));
    };
    let leaf = certificates(
        bounded(cert_text, MAX_CERTIFICATE_BYTES, CERTIFICATE_ANNOTATION)?,
        "certificate",
    )?;
    let [leaf_der] = leaf.as_slice() else {
        return Err(format!(
            "its certificate annotation holds {} certificates, not one",
            leaf.len()
        ));
    };
    let chain = match &material.chain {
        Some(text) => certificates(bounded(text, MAX_CHAIN_BYTES, CHAIN_ANNOTATION)?, "chain")?,
        None => Vec::new(),
    };
    let (_, cert) = x509_parser::parse_x509_certificate(leaf_der)
        .map_err(|e| format!("its certificate is not a valid X.509 certificate ({e})"))?;
    let key = PublicKey::from_spki_der(cert.public_key().raw)
        .map_err(|e| format!("its certificate's key is {e}"))?;
    if !key.verify(payload, signature) {
        return Err(
            "its signature does not verify with its certificate's key (the payload was altered, or the certificate is another signer's)"
                .to_string(),
        );
    }
    let (at, log_entry) = if root.logs.is_empty() {
        let now = jiff::Timestamp::now().as_second();
        (now, None)
    } else {
        let Some(bundle) = &material.bundle else {
            return Err(format!(
                "it has no Rekor bundle ({BUNDLE_ANNOTATION}) and the trust root names transparency logs: sign with a transparency log upload (cosign's default), or use a trust root without tlogs"
            ));
        };
        let (time, index) = check_bundle(root, bundle, payload, signature, leaf_der)?;
        (time, Some((time, index)))
    };
    // webpki's `required` would demand the EKU of every CA certificate too: the leaf's
    // codeSigning is checked here, the CAs' (when they have one) by webpki.
    match cert.extended_key_usage() {
        Ok(Some(eku)) if eku.value.code_signing => {}
        _ => {
            return Err(
                "its certificate lacks the codeSigning extended key usage (it was not issued for signing)"
                    .to_string(),
            );
        }
    }
    let seconds = u64::try_from(at).map_err(|_| format!("the time {at} is before 1970"))?;
    let time = UnixTime::since_unix_epoch(Duration::from_secs(seconds));
    let end_entity = CertificateDer::from(leaf_der.as_slice());
    let ee = EndEntityCert::try_from(&end_entity)
        .map_err(|e| format!("its certificate is not usable as a signer's ({e:?})"))?;
    let mut reasons = Vec::new();
    let mut trusted = false;
    for ca in &root.authorities {
        if !ca.valid_at(at) {
            reasons.push(format!("{}: not valid at {at}", ca.name));
            continue;
        }
        let Some((anchor_der, ca_intermediates)) = ca.chain.split_last() else {
            continue;
        };
        let anchor_der = CertificateDer::from(anchor_der.as_slice());
        let anchor = match webpki::anchor_from_trusted_cert(&anchor_der) {
            Ok(a) => a,
            Err(e) => {
                reasons.push(format!("{}: its root is not usable ({e:?})", ca.name));
                continue;
            }
        };
        let intermediates: Vec<CertificateDer<'_>> = ca_intermediates
            .iter()
            .chain(chain.iter())
            .map(|c| CertificateDer::from(c.as_slice()))
            .collect();
        match ee.verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            std::slice::from_ref(&anchor),
            &intermediates,
            time,
            // CA certificates often carry no EKU; the leaf's is checked above.
            KeyUsage::required_if_present(CODE_SIGNING),
            None,
            None,
        ) {
            Ok(_) => {
                trusted = true;
                break;
            }
            Err(e) => reasons.push(format!(
                "{}: {}",
                ca.name,
                webpki_reason(&e, at, log_entry.is_some())
            )),
        }
    }
    if !trusted {
        return Err(format!(
            "its certificate is not trusted: {}. Give the trust root of the CA that issued it (--trust-root)",
            reasons.join("; ")
        ));
    }
    let mut subjects = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                x509_parser::extensions::GeneralName::RFC822Name(s)
                | x509_parser::extensions::GeneralName::URI(s) => subjects.push(s.to_string()),
                _ => {}
            }
        }
    }
    let mut issuer_v2 = None;
    let mut issuer_v1 = None;
    for ext in cert.extensions() {
        match ext.oid.to_id_string().as_str() {
            OID_ISSUER_V2 => issuer_v2 = der_utf8(ext.value),
            OID_ISSUER_V1 => issuer_v1 = String::from_utf8(ext.value.to_vec()).ok(),
            _ => {}
        }
    }
    Ok(Signer {
        subjects,
        issuer: issuer_v2.or(issuer_v1),
        log_entry,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn der_utf8_strings() {
        assert_eq!(der_utf8(b"\x0c\x03abc").as_deref(), Some("abc"));
        assert_eq!(der_utf8(b"\x0c\x04abc"), None);
        assert_eq!(der_utf8(b"\x13\x03abc"), None);
        assert_eq!(der_utf8(b""), None);
        let long = "x".repeat(200);
        let mut der = vec![0x0c, 0x81, 200];
        der.extend_from_slice(long.as_bytes());
        assert_eq!(der_utf8(&der).as_deref(), Some(long.as_str()));
    }

    #[test]
    fn canonical_entry_sorts_keys() {
        let p = BundlePayload {
            body: "Ym9keQ==".into(),
            integrated_time: 5,
            log_index: 7,
            log_id: "ab".into(),
        };
        assert_eq!(
            String::from_utf8(canonical_entry(&p)).unwrap(),
            r#"{"body":"Ym9keQ==","integratedTime":5,"logID":"ab","logIndex":7}"#
        );
    }
}
