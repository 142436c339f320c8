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
//! anyOf:                      # at least minimumMatches entries (default 1)
//!   minimumMatches: 1
//!   signatures: [ ... ]
//! ```
//!
//! This build verifies `pubKey` entries. Keyless entries (`genericIssuer`, `githubAction`)
//! parse, and the policy is then refused with an error naming them: a policy that asks for
//! something that cannot be checked never silently passes or drops the entry.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::keys::PublicKey;
use crate::signature::{SIMPLE_SIGNING_TYPE, SignatureLayer, Signed, SimpleSigning};

/// A parsed policy.
#[derive(Debug, Clone)]
pub struct Policy {
    all_of: Vec<Constraint>,
    any_of: Vec<Constraint>,
    minimum_matches: usize,
}

/// One signature a policy asks for.
#[derive(Debug, Clone)]
pub struct Constraint {
    /// The key that must have signed.
    pub key: PublicKey,
    /// Who the key belongs to, for messages.
    pub owner: Option<String>,
    /// Annotations the signed payload must carry (`cosign sign -a key=value`).
    pub annotations: BTreeMap<String, String>,
}

impl Constraint {
    /// `pubKey SHA256:… (owner X)`, naming the entry in messages.
    pub fn describe(&self) -> String {
        let mut text = format!("pubKey {}", self.key.fingerprint());
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
    // Keyless kinds: parsed so the error can name them; their fields are not read.
    GenericIssuer {
        #[serde(default)]
        issuer: Option<String>,
    },
    GithubAction {
        #[serde(default)]
        owner: Option<String>,
    },
}

fn constraint(raw: RawSignature, place: &str) -> Result<Constraint, String> {
    match raw {
        RawSignature::PubKey {
            key,
            owner,
            annotations,
        } => Ok(Constraint {
            key: PublicKey::from_pem(&key).map_err(|e| format!("{place}: the key is {e}"))?,
            owner,
            annotations,
        }),
        RawSignature::GenericIssuer { issuer } => Err(format!(
            "{place}: kind genericIssuer (issuer {}) is a keyless signature, which is not supported in this build: use kind pubKey with the signer's public key",
            issuer.unwrap_or_default()
        )),
        RawSignature::GithubAction { owner } => Err(format!(
            "{place}: kind githubAction (owner {}) is a keyless signature, which is not supported in this build: use kind pubKey with the signer's public key",
            owner.unwrap_or_default()
        )),
    }
}

/// Why one signature does not satisfy one constraint, or which layer does.
fn check(
    constraint: &Constraint,
    digest: &str,
    layers: &[SignatureLayer],
) -> Result<usize, Vec<String>> {
    let mut reasons = Vec::new();
    for (i, layer) in layers.iter().enumerate() {
        let why = match layer_satisfies(constraint, digest, layer) {
            Ok(()) => return Ok(i),
            Err(why) => why,
        };
        reasons.push(format!("{}: {why}", layer.origin));
    }
    Err(reasons)
}

fn layer_satisfies(
    constraint: &Constraint,
    digest: &str,
    layer: &SignatureLayer,
) -> Result<(), String> {
    let signature = layer.signature.as_ref().map_err(Clone::clone)?;
    // Nothing in the payload is read before its signature verifies.
    if !constraint.key.verify(&layer.payload, signature) {
        return Err(match layer.signed {
            Signed::Payload => "its signature does not verify with this key (signed by another key, or the payload was altered)",
            Signed::Blob => "its signature does not verify with this key (signed by another key, or the file was altered)",
        }
        .to_string());
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
        })
    }

    /// The policy of `--verify-key`: every key must have signed (`allOf`).
    pub fn from_keys(keys: Vec<PublicKey>) -> Policy {
        Policy {
            all_of: keys
                .into_iter()
                .map(|key| Constraint {
                    key,
                    owner: None,
                    annotations: BTreeMap::new(),
                })
                .collect(),
            any_of: Vec::new(),
            minimum_matches: 0,
        }
    }

    /// This policy and `other`: both must hold (`--verify-config` with `--verify-key`).
    pub fn and(mut self, other: Policy) -> Policy {
        self.all_of.extend(other.all_of);
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

    /// Checks `layers` (the signatures found for the manifest `digest`) against the policy.
    /// The error lists each unsatisfied entry and why every signature failed it.
    pub fn evaluate(&self, digest: &str, layers: &[SignatureLayer]) -> Result<Verdict, String> {
        let mut matched = Vec::new();
        let mut failures = Vec::new();
        for (i, c) in self.all_of.iter().enumerate() {
            match check(c, digest, layers) {
                Ok(layer) => matched.push(format!(
                    "allOf[{i}] {} <- {}",
                    c.describe(),
                    layers[layer].origin
                )),
                Err(reasons) => {
                    failures.push(failure(&format!("allOf[{i}] {}", c.describe()), &reasons))
                }
            }
        }
        if !self.any_of.is_empty() {
            let mut any_matched = Vec::new();
            let mut any_failures = Vec::new();
            for (i, c) in self.any_of.iter().enumerate() {
                match check(c, digest, layers) {
                    Ok(layer) => any_matched.push(format!(
                        "anyOf[{i}] {} <- {}",
                        c.describe(),
                        layers[layer].origin
                    )),
                    Err(reasons) => any_failures
                        .push(failure(&format!("anyOf[{i}] {}", c.describe()), &reasons)),
                }
            }
            if any_matched.len() < self.minimum_matches {
                failures.push(format!(
                    "anyOf needs {} of {} entries and {} matched ({})",
                    self.minimum_matches,
                    self.any_of.len(),
                    any_matched.len(),
                    any_failures.join("; ")
                ));
            }
            matched.extend(any_matched);
        }
        if failures.is_empty() {
            Ok(Verdict { matched })
        } else if layers.is_empty() {
            Err(format!(
                "no signature was found for {digest}, and the policy requires {}",
                self.requirements()
            ))
        } else {
            Err(failures.join("; "))
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

fn failure(what: &str, reasons: &[String]) -> String {
    if reasons.is_empty() {
        format!("{what}: no signature found")
    } else {
        format!("{what} is not satisfied: {}", reasons.join(", "))
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
    fn bad_policies_are_refused_with_the_entry_named() {
        let e = Policy::parse("apiVersion: v1\nanyOf:\n  signatures:\n    - kind: genericIssuer\n      issuer: https://token.actions.githubusercontent.com\n      subject:\n        urlPrefix: https://github.com/acme\n").unwrap_err();
        assert!(
            e.contains("anyOf.signatures[0]") && e.contains("not supported in this build"),
            "{e}"
        );
        let e = Policy::parse("apiVersion: v1\nallOf:\n  - kind: githubAction\n    owner: acme\n")
            .unwrap_err();
        assert!(e.contains("githubAction"), "{e}");
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
