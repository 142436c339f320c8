//! A fake Sigstore for keyless tests, made with rcgen and ring: a "Fulcio" root and
//! intermediate, short-lived leaf certificates with an email or URI subject alternative name,
//! the Fulcio issuer extension and codeSigning, and a "Rekor" P-256 key producing signed entry
//! timestamps over hashedrekord entries. Shared by `crates/oci/tests/keyless.rs` and
//! `bins/wasm-ccm/tests/keyless_cli.rs` (`#[path]`).

#![allow(dead_code, unreachable_pub)]

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use rcgen::{
    BasicConstraints, CertificateParams, CustomExtension, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use sha2::{Digest as _, Sha256};
use time::{Duration, OffsetDateTime};
use wasm_ccm_oci::SigningKey;

/// Fulcio's issuer extension (v2, DER UTF8String) and the legacy one (raw string).
const ISSUER_V2: [u64; 9] = [1, 3, 6, 1, 4, 1, 57264, 1, 8];
const ISSUER_V1: [u64; 9] = [1, 3, 6, 1, 4, 1, 57264, 1, 1];

/// A certificate authority: its certificate and the issuer that signs with it.
pub struct Ca {
    pub der: Vec<u8>,
    pub pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str, parent: Option<&Ca>) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params
            .distinguished_name
            .push(DnType::OrganizationName, "sigstore.test");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let now = OffsetDateTime::now_utc();
        params.not_before = now - Duration::days(1);
        params.not_after = now + Duration::days(365);
        let cert = match parent {
            Some(p) => params.signed_by(&key, &p.issuer).unwrap(),
            None => params.self_signed(&key).unwrap(),
        };
        Ca {
            der: cert.der().to_vec(),
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }
}

/// What a leaf certificate says.
#[derive(Clone)]
pub struct LeafSpec {
    pub email: Option<String>,
    pub uri: Option<String>,
    /// The issuer in the v2 extension (DER UTF8String).
    pub issuer: Option<String>,
    /// The issuer in the legacy v1 extension (raw bytes).
    pub legacy_issuer: Option<String>,
    pub code_signing: bool,
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
}

impl LeafSpec {
    /// Fulcio's shape: valid from now for 10 minutes, codeSigning, this email and issuer.
    pub fn email(email: &str, issuer: &str) -> LeafSpec {
        let now = OffsetDateTime::now_utc() - Duration::seconds(30);
        LeafSpec {
            email: Some(email.to_string()),
            uri: None,
            issuer: Some(issuer.to_string()),
            legacy_issuer: None,
            code_signing: true,
            not_before: now,
            not_after: now + Duration::minutes(10),
        }
    }

    /// As [`LeafSpec::email`] with a URI subject (GitHub Actions' workflow identity).
    pub fn uri(uri: &str, issuer: &str) -> LeafSpec {
        LeafSpec {
            email: None,
            uri: Some(uri.to_string()),
            ..LeafSpec::email("x@example.com", issuer)
        }
    }
}

/// A leaf certificate and its private key.
pub struct Leaf {
    pub key: SigningKey,
    pub pkcs8: Vec<u8>,
    pub pem: String,
}

/// A DER UTF8String.
pub fn der_utf8(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = vec![0x0c];
    match bytes.len() {
        n if n < 0x80 => out.push(n as u8),
        n if n < 0x100 => out.extend([0x81, n as u8]),
        n => out.extend([0x82, (n >> 8) as u8, n as u8]),
    }
    out.extend_from_slice(bytes);
    out
}

/// The fake Sigstore: a root, an intermediate under it, a Rekor key.
pub struct FakeSigstore {
    pub root: Ca,
    pub intermediate: Ca,
    pub rekor: SigningKey,
}

impl Default for FakeSigstore {
    fn default() -> Self {
        FakeSigstore::new()
    }
}

impl FakeSigstore {
    pub fn new() -> FakeSigstore {
        let root = Ca::new("fake fulcio root", None);
        let intermediate = Ca::new("fake fulcio intermediate", Some(&root));
        FakeSigstore {
            root,
            intermediate,
            rekor: SigningKey::from_pkcs8_der(&SigningKey::generate_pkcs8().unwrap()).unwrap(),
        }
    }

    /// The chain annotation: intermediate then root.
    pub fn chain_pem(&self) -> String {
        format!("{}{}", self.intermediate.pem, self.root.pem)
    }

    /// A leaf issued by the intermediate.
    pub fn leaf(&self, spec: &LeafSpec) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.subject_alt_names = spec
            .email
            .iter()
            .map(|e| SanType::Rfc822Name(e.as_str().try_into().unwrap()))
            .chain(
                spec.uri
                    .iter()
                    .map(|u| SanType::URI(u.as_str().try_into().unwrap())),
            )
            .collect();
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        if spec.code_signing {
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::CodeSigning];
        } else {
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        }
        if let Some(issuer) = &spec.issuer {
            params
                .custom_extensions
                .push(CustomExtension::from_oid_content(
                    &ISSUER_V2,
                    der_utf8(issuer),
                ));
        }
        if let Some(issuer) = &spec.legacy_issuer {
            params
                .custom_extensions
                .push(CustomExtension::from_oid_content(
                    &ISSUER_V1,
                    issuer.as_bytes().to_vec(),
                ));
        }
        params.not_before = spec.not_before;
        params.not_after = spec.not_after;
        let cert = params.signed_by(&key, &self.intermediate.issuer).unwrap();
        let pkcs8 = key.serialize_der();
        Leaf {
            key: SigningKey::from_pkcs8_der(&pkcs8).unwrap(),
            pkcs8,
            pem: cert.pem(),
        }
    }

    /// `trusted_root.json` naming the root (chain: intermediate, root) and, with `tlogs`, the
    /// Rekor key.
    pub fn trusted_root(&self, tlogs: bool) -> String {
        let spki = self.rekor.public_key().spki_der();
        let logs = if tlogs {
            serde_json::json!([{
                "baseUrl": "https://rekor.invalid",
                "hashAlgorithm": "SHA2_256",
                "publicKey": {
                    "rawBytes": B64.encode(&spki),
                    "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                    "validFor": {"start": "2020-01-01T00:00:00Z"}
                },
                "logId": {"keyId": B64.encode(Sha256::digest(&spki))}
            }])
        } else {
            serde_json::json!([])
        };
        serde_json::json!({
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": logs,
            "certificateAuthorities": [{
                "subject": {"organization": "sigstore.test", "commonName": "fake fulcio"},
                "uri": "https://fulcio.invalid",
                "certChain": {"certificates": [
                    {"rawBytes": B64.encode(&self.intermediate.der)},
                    {"rawBytes": B64.encode(&self.root.der)}
                ]},
                "validFor": {"start": "2020-01-01T00:00:00Z"}
            }],
            "ctlogs": [],
            "timestampAuthorities": []
        })
        .to_string()
    }

    /// cosign's bundle annotation for a hashedrekord entry of (`payload`, `signature`,
    /// `cert_pem`) integrated at `time` in the log of `log`'s key, its SET signed by `rekor`
    /// (the same key, unless a test forges one).
    pub fn bundle_by(
        log: &SigningKey,
        rekor: &SigningKey,
        payload: &[u8],
        signature: &[u8],
        cert_pem: &str,
        time: i64,
    ) -> String {
        let body = serde_json::json!({
            "apiVersion": "0.0.1",
            "kind": "hashedrekord",
            "spec": {
                "data": {"hash": {"algorithm": "sha256", "value": hex::encode(Sha256::digest(payload))}},
                "signature": {
                    "content": B64.encode(signature),
                    "publicKey": {"content": B64.encode(cert_pem)}
                }
            }
        });
        let body = B64.encode(body.to_string());
        let log_id = hex::encode(Sha256::digest(log.public_key().spki_der()));
        let canonical = format!(
            "{{\"body\":\"{body}\",\"integratedTime\":{time},\"logID\":\"{log_id}\",\"logIndex\":42}}"
        );
        let set = rekor.sign(canonical.as_bytes()).unwrap();
        serde_json::json!({
            "SignedEntryTimestamp": B64.encode(set),
            "Payload": {"body": body, "integratedTime": time, "logIndex": 42, "logID": log_id}
        })
        .to_string()
    }

    /// [`FakeSigstore::bundle_by`] with this Rekor key, integrated now.
    pub fn bundle(&self, payload: &[u8], signature: &[u8], cert_pem: &str) -> String {
        FakeSigstore::bundle_by(
            &self.rekor,
            &self.rekor,
            payload,
            signature,
            cert_pem,
            OffsetDateTime::now_utc().unix_timestamp(),
        )
    }
}
