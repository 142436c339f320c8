//! What must hold for a driver to run: Kubewarden's verification config (`apiVersion: v1`),
//! accepted as is, so a file `kwctl verify --verification-config-path` takes works here.
//!
//! ```yaml
//! apiVersion: v1
//! allOf:                      # every entry must be satisfied by some signature
//!   - kind: pubKey
//!     owner: platform-team    # optional, shown in messages
//!     key: |
//!       -----BEGIN PUBLIC KEY-----
//!       ...
//!     annotations:            # optional: must be in the signed payload
//!       env: prod
//!   - kind: genericIssuer     # keyless: a certificate from a CA of the trust root
//!     issuer: https://token.actions.githubusercontent.com
//!     subject:
//!       urlPrefix: https://github.com/acme/   # or `equal: alice@example.com`
//!   - kind: githubAction      # keyless, GitHub Actions' issuer
//!     owner: acme
//!     repo: drivers           # optional
//! anyOf:                      # at least minimumMatches entries (default 1)
//!   minimumMatches: 1
//!   signatures: [ ... ]
//! ```
//!
//! `pubKey` entries are checked with the key they give. Keyless entries (`genericIssuer`,
//! `githubAction`) are checked against the Sigstore trust root the operator provides
//! ([`Policy::with_trust_root`], `--trust-root`; see [`crate::keyless`]): the certificate must
//! chain to one of its CAs, its Rekor entry must be signed by one of its logs, and its
//! identity must match. A policy with keyless entries and no trust root is refused
//! ([`Policy::needs_trust_root`]), never silently reduced to its key entries. A `urlPrefix`
//! is forced to end in `/`, as Kubewarden does, so `https://github.com/acme` cannot match
//! `https://github.com/acme-evil/…`; `githubAction` means the issuer
//! `https://token.actions.githubusercontent.com` and a subject under
//! `https://github.com/OWNER/` (or `…/OWNER/REPO/`).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;

use crate::keyless;
use crate::keys::PublicKey;
use crate::limits::{MAX_CANDIDATES, Unchecked};
use crate::refusal::{MAX_FAILURES_CHARS, clip, counts, join_bounded, unsatisfied};
use crate::signature::{SIMPLE_SIGNING_TYPE, SignatureLayer, Signed, SimpleSigning};
use crate::trust_root::TrustRoot;

/// GitHub Actions' OIDC issuer, what `githubAction` entries require.
pub(crate) const GITHUB_ACTIONS_ISSUER: &str = "https://token.actions.githubusercontent.com";

/// A parsed policy.
#[derive(Debug, Clone)]
pub struct Policy {
    all_of: Vec<Constraint>,
    any_of: Vec<Constraint>,
    minimum_matches: usize,
    trust_root: Option<Arc<TrustRoot>>,
}

/// Who must have signed.
#[derive(Debug, Clone)]
pub(crate) enum Signer {
    /// `kind: pubKey`: this key.
    Key(PublicKey),
    /// `kind: genericIssuer`: a certificate from this issuer whose subject matches.
    Issuer {
        /// The OIDC issuer (Fulcio's issuer extension), compared exactly.
        issuer: String,
        /// The subject alternative name.
        subject: Subject,
    },
    /// `kind: githubAction`: GitHub Actions of this owner (and repository).
    GithubAction {
        /// The organisation or user.
        owner: String,
        /// The repository, if the entry names one.
        repo: Option<String>,
    },
}

/// How a keyless entry's subject is matched.
#[derive(Debug, Clone)]
pub(crate) enum Subject {
    /// The email or URI, exactly.
    Equal(String),
    /// A URI starting with this prefix (which ends in `/`).
    UrlPrefix(String),
}

/// One signature a policy asks for.
#[derive(Debug, Clone)]
pub(crate) struct Constraint {
    /// Who must have signed.
    pub(crate) signer: Signer,
    /// Who the key belongs to, for messages.
    pub(crate) owner: Option<String>,
    /// Annotations the signed payload must carry (`cosign sign -a key=value`).
    pub(crate) annotations: BTreeMap<String, String>,
}

impl Constraint {
    /// `pubKey SHA256:… (owner X)`, naming the entry in messages.
    pub(crate) fn describe(&self) -> String {
        let mut text = match &self.signer {
            Signer::Key(key) => format!("pubKey {}", key.fingerprint()),
            Signer::Issuer {
                issuer,
                subject: Subject::Equal(s),
            } => format!("genericIssuer {issuer} subject {s}"),
            Signer::Issuer {
                issuer,
                subject: Subject::UrlPrefix(p),
            } => format!("genericIssuer {issuer} subject {p}*"),
            Signer::GithubAction { owner, repo } => match repo {
                Some(repo) => format!("githubAction {owner}/{repo}"),
                None => format!("githubAction {owner}"),
            },
        };
        if let Some(owner) = &self.owner {
            text.push_str(&format!(" (owner {owner})"));
        }
        if !self.annotations.is_empty() {
            let pairs: Vec<String> = self
                .annotations
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            text.push_str(&format!(" with annotations {}", pairs.join(",")));
        }
        text
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawPolicy {
    api_version: Option<String>,
    #[serde(default)]
    all_of: Option<Vec<RawSignature>>,
    #[serde(default)]
    any_of: Option<RawAnyOf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawAnyOf {
    #[serde(default)]
    minimum_matches: Option<usize>,
    signatures: Vec<RawSignature>,
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
enum RawSignature {
    PubKey {
        key: String,
        #[serde(default)]
        owner: Option<String>,
        #[serde(default)]
        annotations: BTreeMap<String, String>,
    },
    GenericIssuer {
        issuer: String,
        subject: RawSubject,
        #[serde(default)]
        annotations: BTreeMap<String, String>,
    },
    GithubAction {
        owner: String,
        #[serde(default)]
        repo: Option<String>,
        #[serde(default)]
        annotations: BTreeMap<String, String>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawSubject {
    #[serde(default)]
    equal: Option<String>,
    #[serde(default)]
    url_prefix: Option<String>,
}

fn constraint(raw: RawSignature, place: &str) -> Result<Constraint, String> {
    match raw {
        RawSignature::PubKey {
            key,
            owner,
            annotations,
        } => Ok(Constraint {
            signer: Signer::Key(
                PublicKey::from_pem(&key).map_err(|e| format!("{place}: the key is {e}"))?,
            ),
            owner,
            annotations,
        }),
        RawSignature::GenericIssuer {
            issuer,
            subject,
            annotations,
        } => {
            if issuer.is_empty() {
                return Err(format!("{place}: genericIssuer has an empty issuer"));
            }
            let subject = match (subject.equal, subject.url_prefix) {
                (Some(s), None) if !s.is_empty() => Subject::Equal(s),
                (None, Some(p)) if !p.is_empty() => {
                    Subject::UrlPrefix(if p.ends_with('/') { p } else { format!("{p}/") })
                }
                _ => {
                    return Err(format!(
                        "{place}: genericIssuer's subject needs exactly one of equal or urlPrefix, not empty"
                    ));
                }
            };
            Ok(Constraint {
                signer: Signer::Issuer { issuer, subject },
                owner: None,
                annotations,
            })
        }
        RawSignature::GithubAction {
            owner,
            repo,
            annotations,
        } => {
            let plain = |s: &str| {
                !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            };
            if !plain(&owner) || repo.as_deref().is_some_and(|r| !plain(r)) {
                return Err(format!(
                    "{place}: githubAction's owner and repo must be GitHub names (letters, digits, -, _, .), not {owner:?}/{repo:?}"
                ));
            }
            Ok(Constraint {
                signer: Signer::GithubAction { owner, repo },
                owner: None,
                annotations,
            })
        }
    }
}

/// Whether the certificate identity `found` is the one `signer` asks for.
fn identity_matches(signer: &Signer, found: &keyless::Signer) -> Result<(), String> {
    let (issuer, subject) = match signer {
        Signer::Key(_) => return Err("a key entry is not matched by a certificate".into()),
        Signer::Issuer { issuer, subject } => (issuer.as_str(), subject.clone()),
        Signer::GithubAction { owner, repo } => (
            GITHUB_ACTIONS_ISSUER,
            Subject::UrlPrefix(match repo {
                Some(repo) => format!("https://github.com/{owner}/{repo}/"),
                None => format!("https://github.com/{owner}/"),
            }),
        ),
    };
    match &found.issuer {
        Some(got) if got == issuer => {}
        Some(got) => {
            return Err(format!(
                "its certificate's issuer is {got}, the policy wants {issuer}"
            ));
        }
        None => {
            return Err(format!(
                "its certificate has no issuer extension (1.3.6.1.4.1.57264.1.8), the policy wants {issuer}"
            ));
        }
    }
    let ok = found.subjects.iter().any(|s| match &subject {
        Subject::Equal(want) => s == want,
        Subject::UrlPrefix(prefix) => s.starts_with(prefix.as_str()),
    });
    if ok {
        Ok(())
    } else {
        let want = match &subject {
            Subject::Equal(w) => w.clone(),
            Subject::UrlPrefix(p) => format!("{p}…"),
        };
        Err(format!(
            "its certificate's subject is {}, the policy wants {want}",
            if found.subjects.is_empty() {
                "empty (no email or URI)".to_string()
            } else {
                found.subjects.join(", ")
            }
        ))
    }
}

/// Which layer satisfies one constraint, or why each does not: (origin, reason).
fn check(
    constraint: &Constraint,
    trust_root: Option<&TrustRoot>,
    digest: &str,
    layers: &[SignatureLayer],
) -> Result<usize, Vec<(String, String)>> {
    let mut reasons = Vec::new();
    for (i, layer) in layers.iter().enumerate() {
        let why = match layer_satisfies(constraint, trust_root, digest, layer) {
            Ok(()) => return Ok(i),
            Err(why) => why,
        };
        reasons.push((layer.origin.clone(), why));
    }
    Err(reasons)
}

fn layer_satisfies(
    constraint: &Constraint,
    trust_root: Option<&TrustRoot>,
    digest: &str,
    layer: &SignatureLayer,
) -> Result<(), String> {
    let signature = layer.signature.as_ref().map_err(Clone::clone)?;
    // Nothing in the payload is read before its signature verifies.
    match &constraint.signer {
        Signer::Key(key) => {
            if !key.verify(&layer.payload, signature) {
                return Err(match layer.signed {
                    Signed::Payload => "its signature does not verify with this key (signed by another key, or the payload was altered)",
                    Signed::Blob => "its signature does not verify with this key (signed by another key, or the file was altered)",
                }
                .to_string());
            }
        }
        keyless_signer => {
            let Some(root) = trust_root else {
                return Err(
                    "a keyless entry needs a trust root: give --trust-root trusted_root.json"
                        .to_string(),
                );
            };
            if !layer.keyless.is_keyless() {
                return Err(format!(
                    "it carries no certificate ({}): a key-based signature, not a keyless one",
                    keyless::CERTIFICATE_ANNOTATION
                ));
            }
            let found = keyless::verify(root, &layer.keyless, &layer.payload, signature)?;
            identity_matches(keyless_signer, &found)?;
        }
    }
    if layer.signed == Signed::Blob {
        // A blob signature covers the bytes alone: there is no payload to carry annotations.
        return match constraint.annotations.keys().next() {
            None => Ok(()),
            Some(key) => Err(format!(
                "a file's signature carries no annotations, and the policy wants {key}: drop the annotations from this entry for file drivers"
            )),
        };
    }
    let payload: SimpleSigning = serde_json::from_slice(&layer.payload)
        .map_err(|e| format!("the signed payload is not cosign's simple-signing JSON ({e})"))?;
    if payload.critical.kind != SIMPLE_SIGNING_TYPE {
        return Err(format!(
            "the signed payload's type is {:?}, not {SIMPLE_SIGNING_TYPE:?}",
            payload.critical.kind
        ));
    }
    let signed = &payload.critical.image.docker_manifest_digest;
    if signed != digest {
        return Err(format!(
            "it signs the manifest {signed}, not {digest} (a signature copied from another artifact)"
        ));
    }
    for (key, want) in &constraint.annotations {
        match payload.annotation(key) {
            Some(got) if got == *want => {}
            Some(got) => {
                return Err(format!(
                    "its annotation {key} is {got:?}, the policy wants {want:?}"
                ));
            }
            None => {
                return Err(format!(
                    "it has no annotation {key} (the policy wants {want:?})"
                ));
            }
        }
    }
    Ok(())
}

/// What a successful verification found: the constraints satisfied and by which signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// `allOf[0] pubKey SHA256:… ← tag sha256-….sig layer 0`, one line per satisfied entry.
    pub matched: Vec<String>,
}

impl Policy {
    /// Parses a verification config (YAML or JSON). Errors name the entry and what to change.
    pub fn parse(text: &str) -> Result<Policy, String> {
        let raw: RawPolicy = serde_norway::from_str(text).map_err(|e| {
            format!("not a verification config (Kubewarden's apiVersion v1 format): {e}")
        })?;
        if let Some(version) = &raw.api_version
            && version != "v1"
        {
            return Err(format!(
                "apiVersion {version:?} is not supported: only v1 is"
            ));
        }
        let all_of = raw
            .all_of
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, s)| constraint(s, &format!("allOf[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        let (any_of, minimum_matches) = match raw.any_of {
            Some(any) => {
                let list = any
                    .signatures
                    .into_iter()
                    .enumerate()
                    .map(|(i, s)| constraint(s, &format!("anyOf.signatures[{i}]")))
                    .collect::<Result<Vec<_>, _>>()?;
                let min = any.minimum_matches.unwrap_or(1);
                if min == 0 || min > list.len() {
                    return Err(format!(
                        "anyOf.minimumMatches is {min} but anyOf lists {} signatures: give a number from 1 to {}",
                        list.len(),
                        list.len()
                    ));
                }
                (list, min)
            }
            None => (Vec::new(), 0),
        };
        if all_of.is_empty() && any_of.is_empty() {
            return Err(
                "the verification config requires nothing: give allOf or anyOf entries".to_string(),
            );
        }
        Ok(Policy {
            all_of,
            any_of,
            minimum_matches,
            trust_root: None,
        })
    }

    /// The policy of `--verify-key`: every key must have signed (`allOf`).
    pub fn from_keys(keys: Vec<PublicKey>) -> Policy {
        Policy {
            all_of: keys
                .into_iter()
                .map(|key| Constraint {
                    signer: Signer::Key(key),
                    owner: None,
                    annotations: BTreeMap::new(),
                })
                .collect(),
            any_of: Vec::new(),
            minimum_matches: 0,
            trust_root: None,
        }
    }

    /// This policy, checking keyless entries against `root`.
    pub fn with_trust_root(mut self, root: TrustRoot) -> Policy {
        self.trust_root = Some(Arc::new(root));
        self
    }

    /// The trust root keyless entries are checked against, if one was given.
    pub fn trust_root(&self) -> Option<&TrustRoot> {
        self.trust_root.as_deref()
    }

    /// The keyless entries (`allOf[0] githubAction acme`), when the policy has some and no
    /// trust root: such a policy cannot be satisfied, and is refused at start.
    pub fn needs_trust_root(&self) -> Option<Vec<String>> {
        if self.trust_root.is_some() {
            return None;
        }
        let keyless: Vec<String> = self
            .all_of
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("allOf[{i}]"), c))
            .chain(
                self.any_of
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (format!("anyOf.signatures[{i}]"), c)),
            )
            .filter(|(_, c)| !matches!(c.signer, Signer::Key(_)))
            .map(|(place, c)| format!("{place} {}", c.describe()))
            .collect();
        (!keyless.is_empty()).then_some(keyless)
    }

    /// This policy and `other`: both must hold (`--verify-config` with `--verify-key`).
    pub fn and(mut self, other: Policy) -> Policy {
        self.all_of.extend(other.all_of);
        if self.trust_root.is_none() {
            self.trust_root = other.trust_root;
        }
        if self.any_of.is_empty() {
            self.any_of = other.any_of;
            self.minimum_matches = other.minimum_matches;
        } else if !other.any_of.is_empty() {
            // Two anyOf groups cannot be merged into one without changing their meaning;
            // `from_keys` never makes one, so this is only reached by a caller's mistake.
            self.all_of.extend(other.any_of);
        }
        self
    }

    /// Checks `layers` (the signatures found for the manifest `digest`) against the policy:
    /// `Policy::evaluate_bounded` with nothing left unread.
    pub fn evaluate(&self, digest: &str, layers: &[SignatureLayer]) -> Result<Verdict, String> {
        self.evaluate_bounded(digest, layers, Unchecked::default())
    }

    /// Checks at most [`MAX_CANDIDATES`] of `layers` (the signatures found for the manifest
    /// `digest`; `unchecked` counts those the registry listed and were not read) against the
    /// policy. The refusal is one line of bounded length: each unsatisfied entry with a few of
    /// the reasons its candidates failed, then how many candidates were checked and how many
    /// were not.
    pub(crate) fn evaluate_bounded(
        &self,
        digest: &str,
        layers: &[SignatureLayer],
        mut unchecked: Unchecked,
    ) -> Result<Verdict, String> {
        let layers = match layers.split_at_checked(MAX_CANDIDATES) {
            Some((checked, rest)) => {
                unchecked.candidates += rest.len();
                checked
            }
            None => layers,
        };
        let mut matched = Vec::new();
        let mut failures = Vec::new();
        for (i, c) in self.all_of.iter().enumerate() {
            match check(c, self.trust_root.as_deref(), digest, layers) {
                Ok(layer) => matched.push(format!(
                    "allOf[{i}] {} <- {}",
                    c.describe(),
                    layers[layer].origin
                )),
                Err(reasons) => failures.push(unsatisfied(
                    &format!("allOf[{i}] {}", c.describe()),
                    &reasons,
                )),
            }
        }
        if !self.any_of.is_empty() {
            let mut any_matched = Vec::new();
            let mut any_failures = Vec::new();
            for (i, c) in self.any_of.iter().enumerate() {
                match check(c, self.trust_root.as_deref(), digest, layers) {
                    Ok(layer) => any_matched.push(format!(
                        "anyOf[{i}] {} <- {}",
                        c.describe(),
                        layers[layer].origin
                    )),
                    Err(reasons) => any_failures.push(unsatisfied(
                        &format!("anyOf[{i}] {}", c.describe()),
                        &reasons,
                    )),
                }
            }
            if any_matched.len() < self.minimum_matches {
                failures.push(format!(
                    "anyOf needs {} of {} entries and {} matched ({})",
                    self.minimum_matches,
                    self.any_of.len(),
                    any_matched.len(),
                    join_bounded(&any_failures, "; ", MAX_FAILURES_CHARS)
                ));
            }
            matched.extend(any_matched);
        }
        if failures.is_empty() {
            Ok(Verdict { matched })
        } else if layers.is_empty() && unchecked.is_none() {
            Err(format!(
                "no signature was found for {digest}, and the policy requires {}",
                clip(&self.requirements(), MAX_FAILURES_CHARS)
            ))
        } else {
            Err(format!(
                "{}; {}",
                join_bounded(&failures, "; ", MAX_FAILURES_CHARS),
                counts(layers.len(), unchecked)
            ))
        }
    }

    fn requirements(&self) -> String {
        let mut parts: Vec<String> = self.all_of.iter().map(Constraint::describe).collect();
        if !self.any_of.is_empty() {
            parts.push(format!(
                "{} of [{}]",
                self.minimum_matches,
                self.any_of
                    .iter()
                    .map(Constraint::describe)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        parts.join(" and ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::SigningKey;
    use crate::signature::simple_signing_payload;

    fn key() -> SigningKey {
        SigningKey::from_pkcs8_der(&SigningKey::generate_pkcs8().unwrap()).unwrap()
    }

    fn indent(pem: &str) -> String {
        pem.lines().map(|l| format!("      {l}\n")).collect()
    }

    const DIGEST: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000001";

    fn layer(key: &SigningKey, digest: &str, annotations: &[(&str, &str)]) -> SignatureLayer {
        let annotations = annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let payload = simple_signing_payload("r.example/drivers/x", digest, &annotations);
        SignatureLayer {
            signed: Signed::Payload,
            signature: Ok(key.sign(&payload).unwrap()),
            payload,
            origin: "test layer".into(),
            keyless: crate::keyless::Material::default(),
        }
    }

    #[test]
    fn kubewarden_shapes_parse_and_decide() {
        let (a, b, c) = (key(), key(), key());
        let yaml = format!(
            "apiVersion: v1\nallOf:\n  - kind: pubKey\n    owner: team\n    key: |\n{}    annotations:\n      env: prod\nanyOf:\n  minimumMatches: 1\n  signatures:\n    - kind: pubKey\n      key: |\n{}    - kind: pubKey\n      key: |\n{}",
            indent(&a.public_key().to_pem()),
            indent(&b.public_key().to_pem()).replace("      ", "        "),
            indent(&c.public_key().to_pem()).replace("      ", "        "),
        );
        let policy = Policy::parse(&yaml).unwrap();
        let ok = [
            layer(&a, DIGEST, &[("env", "prod")]),
            layer(&c, DIGEST, &[]),
        ];
        let verdict = policy.evaluate(DIGEST, &ok).unwrap();
        assert_eq!(verdict.matched.len(), 2, "{verdict:?}");

        let wrong_annotation = [layer(&a, DIGEST, &[("env", "dev")]), layer(&c, DIGEST, &[])];
        let e = policy.evaluate(DIGEST, &wrong_annotation).unwrap_err();
        assert!(e.contains("annotation env is \"dev\""), "{e}");

        let no_any = [layer(&a, DIGEST, &[("env", "prod")])];
        let e = policy.evaluate(DIGEST, &no_any).unwrap_err();
        assert!(
            e.contains("anyOf needs 1 of 2 entries and 0 matched"),
            "{e}"
        );

        let other_digest = DIGEST.replace('1', "2");
        let e = policy
            .evaluate(
                DIGEST,
                &[
                    layer(&a, &other_digest, &[("env", "prod")]),
                    layer(&c, DIGEST, &[]),
                ],
            )
            .unwrap_err();
        assert!(e.contains("not sha256:0000"), "{e}");

        let e = policy.evaluate(DIGEST, &[]).unwrap_err();
        assert!(e.contains("no signature was found"), "{e}");
    }

    #[test]
    fn tampered_payloads_and_bad_signatures_fail() {
        let a = key();
        let policy = Policy::from_keys(vec![a.public_key()]);
        let mut tampered = layer(&a, DIGEST, &[]);
        tampered.payload = String::from_utf8(tampered.payload)
            .unwrap()
            .replace("0001", "0002")
            .into_bytes();
        let e = policy.evaluate(DIGEST, &[tampered]).unwrap_err();
        assert!(e.contains("does not verify with this key"), "{e}");
        let mut garbage = layer(&a, DIGEST, &[]);
        garbage.signature = Err("its signature annotation is not base64".into());
        let e = policy.evaluate(DIGEST, &[garbage]).unwrap_err();
        assert!(e.contains("not base64"), "{e}");
    }

    #[test]
    fn a_crowd_of_failing_signatures_gives_one_bounded_line_with_the_counts() {
        let stranger = key();
        let mut layers: Vec<SignatureLayer> = (0..1000)
            .map(|i| SignatureLayer {
                origin: format!("tag sha256-….sig layer {i}"),
                ..layer(&stranger, DIGEST, &[])
            })
            .collect();
        // A registry-chosen reason with line breaks and no end stays on the line, cut short.
        layers[1].signature = Err(format!("not base64\n{}", "x".repeat(10_000)));
        let policy = Policy::from_keys(vec![key().public_key(), key().public_key()]);
        let e = policy.evaluate(DIGEST, &layers).unwrap_err();
        assert!(e.contains("does not verify with this key"), "{e}");
        assert!(e.contains("not base64"), "{e}");
        assert!(!e.contains('\n') && !e.contains('\r'), "{e}");
        assert!(e.len() <= 2048, "{} characters: {e}", e.len());
        assert!(
            e.contains("allOf[0]") && e.contains("allOf[1]"),
            "both entries named: {e}"
        );
        assert!(
            e.contains("64 signature candidates checked, 936 more not checked"),
            "{e}"
        );

        // One signature: nothing was left unchecked, and the line says so.
        let e = policy.evaluate(DIGEST, &layers[..1]).unwrap_err();
        assert!(
            e.contains("1 signature candidate checked, none left unchecked"),
            "{e}"
        );
    }

    #[test]
    fn bad_policies_are_refused_with_the_entry_named() {
        // Keyless entries parse; without a trust root the policy says they cannot be checked.
        let p = Policy::parse("apiVersion: v1\nanyOf:\n  signatures:\n    - kind: genericIssuer\n      issuer: https://token.actions.githubusercontent.com\n      subject:\n        urlPrefix: https://github.com/acme\n").unwrap();
        assert_eq!(
            p.needs_trust_root().unwrap(),
            vec![
                "anyOf.signatures[0] genericIssuer https://token.actions.githubusercontent.com subject https://github.com/acme/*"
            ]
        );
        let p = Policy::parse(
            "apiVersion: v1\nallOf:\n  - kind: githubAction\n    owner: acme\n    repo: drivers\n",
        )
        .unwrap();
        assert_eq!(
            p.needs_trust_root().unwrap(),
            vec!["allOf[0] githubAction acme/drivers"]
        );
        let e =
            Policy::parse("apiVersion: v1\nallOf:\n  - kind: githubAction\n    owner: acme/evil\n")
                .unwrap_err();
        assert!(e.contains("allOf[0]") && e.contains("GitHub names"), "{e}");
        let e = Policy::parse("apiVersion: v1\nallOf:\n  - kind: genericIssuer\n    issuer: https://i\n    subject: {equal: a, urlPrefix: b}\n")
            .unwrap_err();
        assert!(e.contains("exactly one of equal or urlPrefix"), "{e}");
        let e = Policy::parse("apiVersion: v1\n").unwrap_err();
        assert!(e.contains("requires nothing"), "{e}");
        let e = Policy::parse("apiVersion: v2\nallOf: []\n").unwrap_err();
        assert!(e.contains("v2"), "{e}");
        let e = Policy::parse("apiVersion: v1\nallof: []\n").unwrap_err();
        assert!(e.contains("allof"), "{e}");
        let e =
            Policy::parse("apiVersion: v1\nallOf:\n  - kind: pubKey\n    key: nope\n").unwrap_err();
        assert!(e.contains("allOf[0]"), "{e}");
        let pem = indent(&key().public_key().to_pem());
        let e = Policy::parse(&format!(
            "apiVersion: v1\nanyOf:\n  minimumMatches: 2\n  signatures:\n    - kind: pubKey\n      key: |\n{}",
            pem.replace("      ", "        ")
        ))
        .unwrap_err();
        assert!(e.contains("minimumMatches is 2"), "{e}");
    }
}
