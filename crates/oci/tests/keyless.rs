//! Keyless (certificate) cosign signatures against a real registry on loopback, checked
//! against a fake Sigstore's trust root: the good signature passes (and again from the cache
//! with the registry gone); every bad one is refused naming what failed; policies mixing keys
//! and identities behave as they say.

#[path = "support/fake_sigstore.rs"]
mod fake_sigstore;

use std::collections::BTreeMap;

use fake_sigstore::{FakeSigstore, Leaf, LeafSpec};
use time::{Duration, OffsetDateTime};
use wasm_ccm_oci::keyless::{BUNDLE_ANNOTATION, CERTIFICATE_ANNOTATION, CHAIN_ANNOTATION};
use wasm_ccm_oci::signature::simple_signing_payload;
use wasm_ccm_oci::{
    BlobCache, Client, ClientOptions, ComponentInfo, Policy, Reference, SigningKey, TrustRoot,
};
use wasm_ccm_test_tools::registry::Registry;

const ISSUER: &str = "https://accounts.example.com";
const GITHUB: &str = "https://token.actions.githubusercontent.com";
const WORKFLOW: &str = "https://github.com/acme/drivers/.github/workflows/release.yml@refs/tags/v1";

fn client() -> Client {
    Client::new(ClientOptions::default()).unwrap()
}

async fn pushed(registry: &Registry, path: &str) -> Reference {
    let tagged = Reference::parse(&format!("oci://{}/{path}", registry.host())).unwrap();
    client()
        .push(
            &tagged,
            format!("\0asm {path}").as_bytes(),
            ComponentInfo {
                exports: vec![],
                imports: vec![],
            },
            BTreeMap::new(),
        )
        .await
        .unwrap()
        .pinned
}

fn payload_of(pinned: &Reference) -> Vec<u8> {
    simple_signing_payload(
        &format!("{}/{}", pinned.registry, pinned.repository),
        pinned.digest.as_deref().unwrap(),
        &BTreeMap::new(),
    )
}

/// What a keyless signer stores: the layer's payload, signature and annotations.
struct Layer {
    payload: Vec<u8>,
    signature: Vec<u8>,
    annotations: BTreeMap<String, String>,
}

/// cosign's keyless layer for `pinned` by `leaf`: certificate, chain, bundle from `fake`.
fn keyless_layer(fake: &FakeSigstore, leaf: &Leaf, pinned: &Reference) -> Layer {
    let payload = payload_of(pinned);
    let signature = leaf.key.sign(&payload).unwrap();
    let annotations = [
        (CERTIFICATE_ANNOTATION, leaf.pem.clone()),
        (CHAIN_ANNOTATION, fake.chain_pem()),
        (
            BUNDLE_ANNOTATION,
            fake.bundle(&payload, &signature, &leaf.pem),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    Layer {
        payload,
        signature,
        annotations,
    }
}

async fn attach(pinned: &Reference, layer: &Layer) {
    client()
        .attach_signature(pinned, &layer.payload, &layer.signature, &layer.annotations)
        .await
        .unwrap();
}

fn policy(fake: &FakeSigstore, tlogs: bool, yaml: &str) -> Policy {
    Policy::parse(yaml)
        .unwrap()
        .with_trust_root(TrustRoot::parse(fake.trusted_root(tlogs).as_bytes()).unwrap())
}

fn email_policy(fake: &FakeSigstore, email: &str, issuer: &str) -> Policy {
    policy(
        fake,
        true,
        &format!(
            "apiVersion: v1\nallOf:\n  - kind: genericIssuer\n    issuer: {issuer}\n    subject:\n      equal: {email}\n"
        ),
    )
}

async fn refused(reference: &Reference, policy: &Policy, expect: &str) {
    let dir = tempfile::tempdir().unwrap();
    let cache = BlobCache::new(dir.path());
    let e = client()
        .pull_verified(reference, Some(&cache), policy)
        .await
        .map(|_| ())
        .unwrap_err();
    let text = format!("{e:#}");
    assert!(text.contains(expect), "expected {expect:?} in: {text}");
    assert!(text.contains("signature verification failed"), "{text}");
}

#[tokio::test]
async fn a_keyless_signature_verifies_then_again_from_the_cache_with_the_registry_gone() {
    let registry = Registry::start().unwrap();
    let fake = FakeSigstore::new();
    let pinned = pushed(&registry, "drivers/keyless:1").await;
    let leaf = fake.leaf(&LeafSpec::email("ci@example.com", ISSUER));
    attach(&pinned, &keyless_layer(&fake, &leaf, &pinned)).await;

    let dir = tempfile::tempdir().unwrap();
    let cache = BlobCache::new(dir.path());
    let good = email_policy(&fake, "ci@example.com", ISSUER);
    let (pulled, verified) = client()
        .pull_verified(&pinned, Some(&cache), &good)
        .await
        .unwrap();
    assert!(!verified.from_cache);
    assert!(
        verified.verdict.matched[0]
            .contains("genericIssuer https://accounts.example.com subject ci@example.com"),
        "{:?}",
        verified.verdict
    );
    assert_eq!(pulled.pinned.digest, pinned.digest);

    drop(registry);
    let (pulled, verified) = client()
        .pull_verified(&pinned, Some(&cache), &good)
        .await
        .unwrap();
    assert!(verified.from_cache && pulled.from_cache);
}

#[tokio::test]
async fn identities_match_as_the_policy_says() {
    let registry = Registry::start().unwrap();
    let fake = FakeSigstore::new();
    let pinned = pushed(&registry, "drivers/identity:1").await;
    let leaf = fake.leaf(&LeafSpec::uri(WORKFLOW, GITHUB));
    attach(&pinned, &keyless_layer(&fake, &leaf, &pinned)).await;
    let yaml = |entry: &str| format!("apiVersion: v1\nallOf:\n  - {entry}\n");
    for ok in [
        "kind: githubAction\n    owner: acme",
        "kind: githubAction\n    owner: acme\n    repo: drivers",
        "kind: genericIssuer\n    issuer: https://token.actions.githubusercontent.com\n    subject:\n      urlPrefix: https://github.com/acme",
        "kind: genericIssuer\n    issuer: https://token.actions.githubusercontent.com\n    subject:\n      equal: https://github.com/acme/drivers/.github/workflows/release.yml@refs/tags/v1",
    ] {
        client()
            .verify(&pinned, None, &policy(&fake, true, &yaml(ok)))
            .await
            .unwrap_or_else(|e| panic!("{ok}: {e:#}"));
    }
    for (bad, expect) in [
        (
            "kind: githubAction\n    owner: acme\n    repo: other",
            "the policy wants https://github.com/acme/other/",
        ),
        (
            "kind: githubAction\n    owner: ac",
            "the policy wants https://github.com/ac/",
        ),
        // The trailing-slash trap: `…/acm` must not match `…/acme/…`.
        (
            "kind: genericIssuer\n    issuer: https://token.actions.githubusercontent.com\n    subject:\n      urlPrefix: https://github.com/acm",
            "the policy wants https://github.com/acm/",
        ),
        (
            "kind: genericIssuer\n    issuer: https://accounts.example.com\n    subject:\n      urlPrefix: https://github.com/acme",
            "issuer is https://token.actions.githubusercontent.com, the policy wants https://accounts.example.com",
        ),
    ] {
        refused(&pinned, &policy(&fake, true, &yaml(bad)), expect).await;
    }
}

#[tokio::test]
async fn every_bad_keyless_signature_is_refused_naming_what_failed() {
    let registry = Registry::start().unwrap();
    let fake = FakeSigstore::new();
    let spec = LeafSpec::email("ci@example.com", ISSUER);
    let good = email_policy(&fake, "ci@example.com", ISSUER);

    // Wrong subject, wrong issuer.
    let pinned = pushed(&registry, "bad/identity:1").await;
    attach(&pinned, &keyless_layer(&fake, &fake.leaf(&spec), &pinned)).await;
    refused(
        &pinned,
        &email_policy(&fake, "mallory@example.com", ISSUER),
        "subject is ci@example.com, the policy wants mallory@example.com",
    )
    .await;
    refused(
        &pinned,
        &email_policy(&fake, "ci@example.com", "https://other.example.com"),
        "issuer is https://accounts.example.com, the policy wants https://other.example.com",
    )
    .await;

    // A CA the trust root does not name (its log entry is genuine).
    let pinned = pushed(&registry, "bad/untrusted:1").await;
    let stranger = FakeSigstore::new();
    let leaf = stranger.leaf(&spec);
    let mut layer = keyless_layer(&stranger, &leaf, &pinned);
    layer.annotations.insert(
        BUNDLE_ANNOTATION.into(),
        fake.bundle(&layer.payload, &layer.signature, &leaf.pem),
    );
    attach(&pinned, &layer).await;
    refused(&pinned, &good, "does not chain to this CA").await;

    // Expired at the integrated time.
    let pinned = pushed(&registry, "bad/expired:1").await;
    let now = OffsetDateTime::now_utc();
    let expired = LeafSpec {
        not_before: now - Duration::minutes(30),
        not_after: now - Duration::minutes(20),
        ..spec.clone()
    };
    attach(
        &pinned,
        &keyless_layer(&fake, &fake.leaf(&expired), &pinned),
    )
    .await;
    refused(&pinned, &good, "had expired at the Rekor integratedTime").await;

    // No codeSigning.
    let pinned = pushed(&registry, "bad/eku:1").await;
    let no_eku = LeafSpec {
        code_signing: false,
        ..spec.clone()
    };
    attach(&pinned, &keyless_layer(&fake, &fake.leaf(&no_eku), &pinned)).await;
    refused(&pinned, &good, "lacks the codeSigning extended key usage").await;

    // Tampered payload: the signature is over other bytes.
    let pinned = pushed(&registry, "bad/tampered:1").await;
    let mut layer = keyless_layer(&fake, &fake.leaf(&spec), &pinned);
    layer.payload = simple_signing_payload(
        &format!("{}/{}", pinned.registry, pinned.repository),
        pinned.digest.as_deref().unwrap(),
        &[("env".to_string(), "prod".to_string())]
            .into_iter()
            .collect(),
    );
    attach(&pinned, &layer).await;
    refused(&pinned, &good, "does not verify with its certificate's key").await;

    // A SET signed by another key for the trust root's log id.
    let pinned = pushed(&registry, "bad/set-key:1").await;
    let leaf = fake.leaf(&spec);
    let mut layer = keyless_layer(&fake, &leaf, &pinned);
    let forger = SigningKey::from_pkcs8_der(&SigningKey::generate_pkcs8().unwrap()).unwrap();
    layer.annotations.insert(
        BUNDLE_ANNOTATION.into(),
        FakeSigstore::bundle_by(
            &fake.rekor,
            &forger,
            &layer.payload,
            &layer.signature,
            &leaf.pem,
            now.unix_timestamp(),
        ),
    );
    attach(&pinned, &layer).await;
    refused(
        &pinned,
        &good,
        "signed entry timestamp does not verify with the key of tlogs[0]",
    )
    .await;
    // And one from a log the trust root does not name.
    let pinned = pushed(&registry, "bad/set-log:1").await;
    let mut layer = keyless_layer(&fake, &leaf, &pinned);
    layer.annotations.insert(
        BUNDLE_ANNOTATION.into(),
        FakeSigstore::bundle_by(
            &forger,
            &forger,
            &layer.payload,
            &layer.signature,
            &leaf.pem,
            now.unix_timestamp(),
        ),
    );
    attach(&pinned, &layer).await;
    refused(&pinned, &good, "which is not in the trust root's tlogs").await;

    // A genuine SET whose body names another signature of the same payload.
    let pinned = pushed(&registry, "bad/set-body:1").await;
    let mut layer = keyless_layer(&fake, &leaf, &pinned);
    let other_signature = leaf.key.sign(&layer.payload).unwrap();
    layer.annotations.insert(
        BUNDLE_ANNOTATION.into(),
        fake.bundle(&layer.payload, &other_signature, &leaf.pem),
    );
    attach(&pinned, &layer).await;
    refused(&pinned, &good, "names another signature").await;

    // No SET while the trust root has logs: refused; without logs: checked at now, passes.
    let pinned = pushed(&registry, "bad/no-set:1").await;
    let mut layer = keyless_layer(&fake, &leaf, &pinned);
    layer.annotations.remove(BUNDLE_ANNOTATION);
    attach(&pinned, &layer).await;
    refused(&pinned, &good, "it has no Rekor bundle").await;
    let no_logs = policy(
        &fake,
        false,
        "apiVersion: v1\nallOf:\n  - kind: genericIssuer\n    issuer: https://accounts.example.com\n    subject:\n      equal: ci@example.com\n",
    );
    client().verify(&pinned, None, &no_logs).await.unwrap();

    // A key-based signature does not satisfy a keyless entry.
    let pinned = pushed(&registry, "bad/key-only:1").await;
    client()
        .sign(&pinned, &leaf.key, &BTreeMap::new())
        .await
        .unwrap();
    refused(&pinned, &good, "a key-based signature, not a keyless one").await;

    // The legacy issuer extension (raw string) is read when the v2 one is absent…
    let pinned = pushed(&registry, "good/legacy-issuer:1").await;
    let legacy = LeafSpec {
        issuer: None,
        legacy_issuer: Some(ISSUER.to_string()),
        ..spec.clone()
    };
    attach(&pinned, &keyless_layer(&fake, &fake.leaf(&legacy), &pinned)).await;
    client().verify(&pinned, None, &good).await.unwrap();
    // …and held to the policy like the v2 one: another issuer there is refused, naming it.
    let pinned = pushed(&registry, "bad/legacy-issuer:1").await;
    let wrong_legacy = LeafSpec {
        issuer: None,
        legacy_issuer: Some("https://evil.example.com".to_string()),
        ..spec.clone()
    };
    attach(
        &pinned,
        &keyless_layer(&fake, &fake.leaf(&wrong_legacy), &pinned),
    )
    .await;
    refused(
        &pinned,
        &good,
        "issuer is https://evil.example.com, the policy wants https://accounts.example.com",
    )
    .await;
    // Neither extension: refused as having no issuer, never matched by its subject alone.
    let pinned = pushed(&registry, "bad/no-issuer:1").await;
    let no_issuer = LeafSpec {
        issuer: None,
        legacy_issuer: None,
        ..spec.clone()
    };
    attach(
        &pinned,
        &keyless_layer(&fake, &fake.leaf(&no_issuer), &pinned),
    )
    .await;
    refused(&pinned, &good, "its certificate has no issuer extension").await;
    // Both: the v2 extension is the one read (Fulcio writes it; the legacy one is deprecated),
    // so a good legacy value does not rescue a wrong v2 one, and a wrong legacy value does not
    // spoil a good v2 one.
    let pinned = pushed(&registry, "bad/v2-wins:1").await;
    let v2_wrong = LeafSpec {
        issuer: Some("https://evil.example.com".to_string()),
        legacy_issuer: Some(ISSUER.to_string()),
        ..spec.clone()
    };
    attach(
        &pinned,
        &keyless_layer(&fake, &fake.leaf(&v2_wrong), &pinned),
    )
    .await;
    refused(&pinned, &good, "issuer is https://evil.example.com").await;
    let pinned = pushed(&registry, "good/v2-wins:1").await;
    let legacy_wrong = LeafSpec {
        issuer: Some(ISSUER.to_string()),
        legacy_issuer: Some("https://evil.example.com".to_string()),
        ..spec.clone()
    };
    attach(
        &pinned,
        &keyless_layer(&fake, &fake.leaf(&legacy_wrong), &pinned),
    )
    .await;
    client().verify(&pinned, None, &good).await.unwrap();
}

#[tokio::test]
async fn policies_mixing_keys_and_identities_behave_as_they_say() {
    let registry = Registry::start().unwrap();
    let fake = FakeSigstore::new();
    let team = SigningKey::from_pkcs8_der(&SigningKey::generate_pkcs8().unwrap()).unwrap();
    let indent = |pem: &str| -> String { pem.lines().map(|l| format!("        {l}\n")).collect() };
    let key_entry = format!(
        "kind: pubKey\n      key: |\n{}",
        indent(&team.public_key().to_pem())
    );
    let id_entry = "kind: genericIssuer\n      issuer: https://accounts.example.com\n      subject:\n        equal: ci@example.com\n";
    let gh_entry = "kind: githubAction\n      owner: acme\n";
    let all_of = policy(
        &fake,
        true,
        &format!("apiVersion: v1\nallOf:\n    - {key_entry}    - {id_entry}"),
    );
    let two_of_three = policy(
        &fake,
        true,
        &format!(
            "apiVersion: v1\nanyOf:\n  minimumMatches: 2\n  signatures:\n    - {key_entry}    - {id_entry}    - {gh_entry}"
        ),
    );
    let one_of_two = policy(
        &fake,
        true,
        &format!("apiVersion: v1\nanyOf:\n  signatures:\n    - {key_entry}    - {gh_entry}"),
    );

    // Only the keyless signature.
    let keyless_only = pushed(&registry, "mixed/keyless:1").await;
    let leaf = fake.leaf(&LeafSpec::email("ci@example.com", ISSUER));
    attach(&keyless_only, &keyless_layer(&fake, &leaf, &keyless_only)).await;
    refused(&keyless_only, &all_of, "allOf[0] pubKey").await;
    refused(
        &keyless_only,
        &two_of_three,
        "anyOf needs 2 of 3 entries and 1 matched",
    )
    .await;
    refused(
        &keyless_only,
        &one_of_two,
        "anyOf needs 1 of 2 entries and 0 matched",
    )
    .await;

    // Both the key's and the keyless signature.
    let both = pushed(&registry, "mixed/both:1").await;
    attach(&both, &keyless_layer(&fake, &leaf, &both)).await;
    client().sign(&both, &team, &BTreeMap::new()).await.unwrap();
    let (verified, _) = client().verify(&both, None, &all_of).await.unwrap();
    assert_eq!(verified.verdict.matched.len(), 2, "{:?}", verified.verdict);
    let (verified, _) = client().verify(&both, None, &two_of_three).await.unwrap();
    assert_eq!(verified.verdict.matched.len(), 2, "{:?}", verified.verdict);
    client().verify(&both, None, &one_of_two).await.unwrap();
}
