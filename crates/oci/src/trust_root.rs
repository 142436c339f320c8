//! The Sigstore trust root an operator provides: `trusted_root.json` in the format of
//! sigstore/protobuf-specs (`dev.sigstore.trustroot.v1.TrustedRoot`, as `cosign
//! --trusted-root`, sigstore-python and sigstore-rs read it), from a file, never from the
//! network.
//!
//! ```json
//! {
//!   "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
//!   "tlogs": [{"publicKey": {"rawBytes": "<base64 DER SPKI>", "validFor": {"start": "…"}},
//!              "logId": {"keyId": "<base64 sha256 of the SPKI>"}}],
//!   "certificateAuthorities": [{"certChain": {"certificates": [{"rawBytes": "<base64 DER>"}]},
//!                               "validFor": {"start": "…", "end": "…"}}]
//! }
//! ```
//!
//! Read here: the certificate authorities (Fulcio: each chain is leaf-most first, its last
//! certificate is the root the path must end at) and the transparency logs (Rekor: P-256 keys
//! checking signed entry timestamps). `ctlogs` and `timestampAuthorities` are accepted and not
//! used: certificate transparency and RFC 3161 timestamps are not checked by this build.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use crate::keys::PublicKey;

/// The largest trust root file read (the public-good one is about 7 KiB).
pub(crate) const MAX_TRUST_ROOT_BYTES: usize = 1 << 20;

/// A parsed trust root.
#[derive(Debug, Clone)]
pub struct TrustRoot {
    /// Certificate authorities (Fulcio instances).
    pub(crate) authorities: Vec<Authority>,
    /// Transparency logs (Rekor instances) whose keys are usable (ECDSA P-256).
    pub(crate) logs: Vec<Log>,
    /// sha256 of the file, part of what a cached verification depends on.
    pub sha256: String,
}

/// One certificate authority: its chain and when it issued.
#[derive(Debug, Clone)]
pub(crate) struct Authority {
    /// `certificateAuthorities[i]` and its URI, for messages.
    pub(crate) name: String,
    /// DER certificates, leaf-most first; the last is the trust anchor.
    pub(crate) chain: Vec<Vec<u8>>,
    /// Unix seconds: the CA issued certificates from `start` to `end` (open when `None`).
    pub(crate) valid_from: Option<i64>,
    /// See `valid_from`.
    pub(crate) valid_until: Option<i64>,
}

/// One transparency log.
#[derive(Debug, Clone)]
pub(crate) struct Log {
    /// `tlogs[i]` and its base URL, for messages.
    pub(crate) name: String,
    /// The log's key.
    pub(crate) key: PublicKey,
    /// The key's id: sha256 of its DER SPKI (what a Rekor entry's `logID` names, in hex).
    pub(crate) key_id: Vec<u8>,
    /// Unix seconds the key signed from and until.
    pub(crate) valid_from: Option<i64>,
    /// See `valid_from`.
    pub(crate) valid_until: Option<i64>,
}

impl Log {
    /// Whether `log_id` (a Rekor entry's hex `logID`) names this log.
    pub(crate) fn is(&self, log_id: &str) -> bool {
        hex::decode(log_id).ok().as_deref() == Some(self.key_id.as_slice())
    }
}

fn within(t: i64, from: Option<i64>, until: Option<i64>) -> bool {
    from.is_none_or(|f| t >= f) && until.is_none_or(|u| t <= u)
}

impl Authority {
    /// Whether the CA was valid at `t` (unix seconds).
    pub(crate) fn valid_at(&self, t: i64) -> bool {
        within(t, self.valid_from, self.valid_until)
    }
}

impl Log {
    /// Whether the log's key was valid at `t` (unix seconds).
    pub(crate) fn valid_at(&self, t: i64) -> bool {
        within(t, self.valid_from, self.valid_until)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    tlogs: Vec<RawLog>,
    #[serde(default)]
    certificate_authorities: Vec<RawAuthority>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawLog {
    #[serde(default)]
    base_url: Option<String>,
    public_key: RawPublicKey,
    #[serde(default)]
    log_id: Option<RawLogId>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawPublicKey {
    #[serde(default)]
    raw_bytes: Option<String>,
    #[serde(default)]
    key_details: Option<String>,
    #[serde(default)]
    valid_for: Option<RawValidFor>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawLogId {
    key_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawAuthority {
    #[serde(default)]
    uri: Option<String>,
    cert_chain: RawChain,
    #[serde(default)]
    valid_for: Option<RawValidFor>,
}

#[derive(Deserialize)]
struct RawChain {
    certificates: Vec<RawCertificate>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawCertificate {
    raw_bytes: String,
}

#[derive(Deserialize)]
struct RawValidFor {
    #[serde(default)]
    start: Option<String>,
    #[serde(default)]
    end: Option<String>,
}

fn seconds(text: &Option<String>, place: &str) -> Result<Option<i64>, String> {
    text.as_deref()
        .map(|t| {
            t.parse::<jiff::Timestamp>()
                .map(|ts| ts.as_second())
                .map_err(|e| format!("{place}: {t:?} is not an RFC 3339 time ({e})"))
        })
        .transpose()
}

fn range(valid: &Option<RawValidFor>, place: &str) -> Result<(Option<i64>, Option<i64>), String> {
    match valid {
        None => Ok((None, None)),
        Some(v) => Ok((
            seconds(&v.start, &format!("{place}.validFor.start"))?,
            seconds(&v.end, &format!("{place}.validFor.end"))?,
        )),
    }
}

impl TrustRoot {
    /// Parses `trusted_root.json`. Errors name the entry and what is wrong with it.
    pub fn parse(bytes: &[u8]) -> Result<TrustRoot, String> {
        if bytes.len() > MAX_TRUST_ROOT_BYTES {
            return Err(format!(
                "{} bytes, more than the {MAX_TRUST_ROOT_BYTES} a trust root may have",
                bytes.len()
            ));
        }
        let raw: Raw = serde_json::from_slice(bytes).map_err(|e| {
            format!("not a Sigstore trusted_root.json (protobuf-specs TrustedRoot JSON): {e}")
        })?;
        if let Some(media) = &raw.media_type
            && !media.starts_with("application/vnd.dev.sigstore.trustedroot")
        {
            return Err(format!(
                "mediaType {media:?} is not a Sigstore trusted root (application/vnd.dev.sigstore.trustedroot…)"
            ));
        }
        let mut authorities = Vec::new();
        for (i, ca) in raw.certificate_authorities.iter().enumerate() {
            let place = format!("certificateAuthorities[{i}]");
            if ca.cert_chain.certificates.is_empty() {
                return Err(format!("{place}.certChain has no certificates"));
            }
            let chain = ca
                .cert_chain
                .certificates
                .iter()
                .enumerate()
                .map(|(j, c)| {
                    B64.decode(c.raw_bytes.trim()).map_err(|e| {
                        format!("{place}.certChain.certificates[{j}].rawBytes is not base64 ({e})")
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let (valid_from, valid_until) = range(&ca.valid_for, &place)?;
            authorities.push(Authority {
                name: match &ca.uri {
                    Some(uri) => format!("{place} ({uri})"),
                    None => place,
                },
                chain,
                valid_from,
                valid_until,
            });
        }
        let mut logs = Vec::new();
        let mut unusable = Vec::new();
        for (i, log) in raw.tlogs.iter().enumerate() {
            let place = format!("tlogs[{i}]");
            let Some(raw_key) = &log.public_key.raw_bytes else {
                return Err(format!("{place}.publicKey has no rawBytes"));
            };
            let der = B64
                .decode(raw_key.trim())
                .map_err(|e| format!("{place}.publicKey.rawBytes is not base64 ({e})"))?;
            let key = match PublicKey::from_spki_der(&der) {
                Ok(key) => key,
                Err(e) => {
                    // Rekor v2 logs sign with Ed25519: their entries are refused, the file is not.
                    unusable.push(format!(
                        "{place} ({}): {e}",
                        log.public_key
                            .key_details
                            .as_deref()
                            .unwrap_or("no keyDetails")
                    ));
                    continue;
                }
            };
            let key_id = Sha256::digest(&der).to_vec();
            if let Some(id) = &log.log_id {
                let given = B64
                    .decode(id.key_id.trim())
                    .map_err(|e| format!("{place}.logId.keyId is not base64 ({e})"))?;
                // The id is the raw digest; some test roots carry its hex text instead.
                if given != key_id && given != hex::encode(&key_id).as_bytes() {
                    return Err(format!(
                        "{place}.logId.keyId ({}) is not the sha256 of its publicKey ({}): the file is damaged or its entries were mixed",
                        hex::encode(&given),
                        hex::encode(&key_id)
                    ));
                }
            }
            let (valid_from, valid_until) = range(&log.public_key.valid_for, &place)?;
            logs.push(Log {
                name: match &log.base_url {
                    Some(url) => format!("{place} ({url})"),
                    None => place,
                },
                key,
                key_id,
                valid_from,
                valid_until,
            });
        }
        if authorities.is_empty() {
            return Err(
                "the trust root has no certificateAuthorities: keyless signatures cannot be checked without the CA that issued their certificates".to_string(),
            );
        }
        if !unusable.is_empty() {
            tracing::warn!(logs = ?unusable, "transparency logs whose keys are not ECDSA P-256 are ignored: their entries will not verify");
        }
        if logs.is_empty() && !unusable.is_empty() {
            return Err(format!(
                "no transparency log in the trust root has an ECDSA P-256 key ({}): entries of such logs cannot be checked by this build; give a trust root with the Rekor P-256 key, or none (no tlogs) to check certificates at the current time",
                unusable.join("; ")
            ));
        }
        Ok(TrustRoot {
            authorities,
            logs,
            sha256: hex::encode(Sha256::digest(bytes)),
        })
    }
}
