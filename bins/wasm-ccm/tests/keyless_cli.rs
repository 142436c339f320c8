//! Keyless (certificate) signatures from the command line: `wasm-ccm sign --certificate
//! --certificate-chain` with a private CA, `wasm-ccm verify --trust-root`, refusals exit 1 (or
//! 2 for a policy that cannot be checked), a restart verifies from the cache with the registry
//! gone; and OpenSSL interop both ways: wasm-ccm's test chain passes `openssl verify` and its
//! signature verifies in OpenSSL with the leaf's key; an OpenSSL-made CA, leaf (SAN URI, Fulcio
//! issuer extension) and signature verify in wasm-ccm.

#[path = "../../../crates/oci/tests/support/fake_sigstore.rs"]
mod fake_sigstore;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use fake_sigstore::{FakeSigstore, LeafSpec};
use wasm_ccm_oci::keyless::{CERTIFICATE_ANNOTATION, CHAIN_ANNOTATION};
use wasm_ccm_oci::signature::{signature_tag, simple_signing_payload};
use wasm_ccm_oci::{Client, ClientOptions, ComponentInfo, Reference, pkcs8_pem};
use wasm_ccm_test_tools::registry::Registry;

fn wasm_ccm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasm-ccm"))
        .args(args)
        .env_remove("WASM_CCM_LOG")
        .env_remove("COSIGN_PASSWORD")
        .output()
        .expect("run wasm-ccm")
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn write(dir: &Path, name: &str, content: impl AsRef<[u8]>) -> String {
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path.display().to_string()
}

async fn pushed(registry: &Registry, path: &str) -> Reference {
    let tagged = Reference::parse(&format!("oci://{}/{path}", registry.host())).unwrap();
    Client::new(ClientOptions::default())
        .unwrap()
        .push(
            &tagged,
            b"\0asm stand-in",
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

const EMAIL_POLICY: &str = "apiVersion: v1\nallOf:\n  - kind: genericIssuer\n    issuer: https://accounts.example.com\n    subject:\n      equal: ci@example.com\n";

/// OpenSSL, the independent implementation the interop checks run against: from PATH, else
/// Debian's `openssl` package fetched into target/tools. A machine with neither fails the test
/// with how to provide it: an interop check that skips itself would pass having checked nothing.
fn openssl() -> std::path::PathBuf {
    let found = wasm_ccm_test_tools::debian_program("openssl", "openssl").and_then(|program| {
        match Command::new(&program).arg("version").output() {
            Ok(out) if out.status.success() => Ok(program),
            Ok(out) => Err(format!(
                "{} version failed: {}",
                program.display(),
                String::from_utf8_lossy(&out.stderr)
            )),
            Err(e) => Err(format!("cannot run {}: {e}", program.display())),
        }
    });
    found.unwrap_or_else(|e| {
        panic!(
            "OpenSSL interop needs `openssl` (put it on PATH, or let the test fetch Debian's openssl package into target/tools): {e}"
        )
    })
}

fn run_openssl(openssl: &Path, dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(openssl)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", text(&out));
    out
}

#[tokio::test]
async fn private_ca_signing_verifies_with_the_trust_root_and_in_openssl() {
    let registry = Registry::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fake = FakeSigstore::new();
    let leaf = fake.leaf(&LeafSpec::email(
        "ci@example.com",
        "https://accounts.example.com",
    ));
    let other = fake.leaf(&LeafSpec::email(
        "ci@example.com",
        "https://accounts.example.com",
    ));
    let key = write(d, "leaf.key", pkcs8_pem(&leaf.pkcs8));
    let cert = write(d, "leaf.pem", &leaf.pem);
    let other_cert = write(d, "other.pem", &other.pem);
    let chain = write(d, "chain.pem", fake.chain_pem());
    let no_logs = write(d, "root-no-logs.json", fake.trusted_root(false));
    let with_logs = write(d, "root-logs.json", fake.trusted_root(true));
    let config = write(d, "verification.yaml", EMAIL_POLICY);
    let pinned = pushed(&registry, "drivers/k:1").await;
    let target = pinned.to_string();
    let cache = d.join("cache").display().to_string();

    // A certificate for another key is refused before anything is pushed.
    let out = wasm_ccm(&["sign", "--key", &key, "--certificate", &other_cert, &target]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("not for --key"), "{}", text(&out));

    let out = wasm_ccm(&[
        "sign",
        "--key",
        &key,
        "--certificate",
        &cert,
        "--certificate-chain",
        &chain,
        &target,
    ]);
    assert!(out.status.success(), "{}", text(&out));

    // A keyless policy without a trust root cannot be checked: a usage error, naming the flag.
    let out = wasm_ccm(&["verify", &target, "--verify-config", &config]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--trust-root"), "{}", text(&out));

    let out = wasm_ccm(&[
        "--cache-dir",
        &cache,
        "verify",
        &target,
        "--verify-config",
        &config,
        "--trust-root",
        &no_logs,
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("genericIssuer https://accounts.example.com subject ci@example.com"),
        "{}",
        text(&out)
    );
    // With transparency logs in the trust root, a signature without a Rekor bundle is refused.
    let out = wasm_ccm(&[
        "verify",
        &target,
        "--verify-config",
        &config,
        "--trust-root",
        &with_logs,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("no Rekor bundle"), "{}", text(&out));

    // OpenSSL: the chain verifies, and the stored signature verifies with the leaf's key.
    {
        let openssl = openssl();
        write(d, "root.pem", &fake.root.pem);
        write(d, "intermediate.pem", &fake.intermediate.pem);
        let out = run_openssl(
            &openssl,
            d,
            &[
                "verify",
                "-CAfile",
                "root.pem",
                "-untrusted",
                "intermediate.pem",
                "leaf.pem",
            ],
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("leaf.pem: OK"));
        let digest = pinned.digest.as_deref().unwrap();
        let manifest =
            registry.stored_blob(&registry.stored_tag("drivers/k", &signature_tag(digest)));
        let manifest: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
        let layer = &manifest["layers"][0];
        assert_eq!(
            layer["annotations"][CERTIFICATE_ANNOTATION].as_str(),
            Some(leaf.pem.as_str())
        );
        assert!(layer["annotations"][CHAIN_ANNOTATION].is_string());
        write(
            d,
            "payload.json",
            registry.stored_blob(layer["digest"].as_str().unwrap()),
        );
        write(
            d,
            "payload.sig",
            B64.decode(
                layer["annotations"]["dev.cosignproject.cosign/signature"]
                    .as_str()
                    .unwrap(),
            )
            .unwrap(),
        );
        run_openssl(
            &openssl,
            d,
            &[
                "x509", "-in", "leaf.pem", "-pubkey", "-noout", "-out", "leaf.pub",
            ],
        );
        let out = run_openssl(
            &openssl,
            d,
            &[
                "dgst",
                "-sha256",
                "-verify",
                "leaf.pub",
                "-signature",
                "payload.sig",
                "payload.json",
            ],
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("Verified OK"));
    }

    // Restart: the registry is gone, the cached signatures verify again.
    drop(registry);
    let out = wasm_ccm(&[
        "--cache-dir",
        &cache,
        "verify",
        &target,
        "--verify-config",
        &config,
        "--trust-root",
        &no_logs,
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("cached signatures"), "{}", text(&out));
}

#[tokio::test]
async fn openssl_made_ca_leaf_and_signature_verify_in_wasm_ccm() {
    let openssl = openssl();
    let registry = Registry::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = |args: &[&str]| run_openssl(&openssl, d, args);
    o(&[
        "ecparam",
        "-genkey",
        "-name",
        "prime256v1",
        "-noout",
        "-out",
        "ca.key",
    ]);
    o(&[
        "req",
        "-x509",
        "-new",
        "-key",
        "ca.key",
        "-subj",
        "/O=openssl.test/CN=openssl ca",
        "-days",
        "2",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        "-out",
        "ca.pem",
    ]);
    o(&["x509", "-in", "ca.pem", "-outform", "DER", "-out", "ca.der"]);
    o(&[
        "ecparam",
        "-genkey",
        "-name",
        "prime256v1",
        "-noout",
        "-out",
        "leaf.key",
    ]);
    o(&[
        "req",
        "-new",
        "-key",
        "leaf.key",
        "-subj",
        "/CN=release workflow",
        "-out",
        "leaf.csr",
    ]);
    write(
        d,
        "leaf.ext",
        "subjectAltName=URI:https://github.com/acme/drivers/.github/workflows/release.yml@refs/heads/main\n\
         extendedKeyUsage=codeSigning\n\
         keyUsage=critical,digitalSignature\n\
         1.3.6.1.4.1.57264.1.8=ASN1:UTF8String:https://token.actions.githubusercontent.com\n",
    );
    o(&[
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "leaf.ext",
        "-out",
        "leaf.pem",
    ]);

    let pinned = pushed(&registry, "drivers/openssl:1").await;
    let payload = simple_signing_payload(
        &format!("{}/{}", pinned.registry, pinned.repository),
        pinned.digest.as_deref().unwrap(),
        &BTreeMap::new(),
    );
    write(d, "payload.json", &payload);
    o(&[
        "dgst",
        "-sha256",
        "-sign",
        "leaf.key",
        "-out",
        "payload.sig",
        "payload.json",
    ]);
    let signature = std::fs::read(d.join("payload.sig")).unwrap();
    let leaf_pem = std::fs::read_to_string(d.join("leaf.pem")).unwrap();
    let ca_pem = std::fs::read_to_string(d.join("ca.pem")).unwrap();
    let annotations = [
        (CERTIFICATE_ANNOTATION.to_string(), leaf_pem),
        (CHAIN_ANNOTATION.to_string(), ca_pem),
    ]
    .into_iter()
    .collect();
    Client::new(ClientOptions::default())
        .unwrap()
        .attach_signature(&pinned, &payload, &signature, &annotations)
        .await
        .unwrap();

    let root = serde_json::json!({
        "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
        "certificateAuthorities": [{
            "uri": "https://ca.openssl.test",
            "certChain": {"certificates": [
                {"rawBytes": B64.encode(std::fs::read(d.join("ca.der")).unwrap())}
            ]},
            "validFor": {"start": "2020-01-01T00:00:00Z"}
        }]
    });
    let root = write(d, "trusted_root.json", root.to_string());
    let target = pinned.to_string();
    for (entry, ok) in [
        (
            "kind: githubAction\n    owner: acme\n    repo: drivers",
            true,
        ),
        (
            "kind: githubAction\n    owner: acme\n    repo: other",
            false,
        ),
    ] {
        let config = write(
            d,
            "verification.yaml",
            format!("apiVersion: v1\nallOf:\n  - {entry}\n"),
        );
        let out = wasm_ccm(&[
            "verify",
            &target,
            "--verify-config",
            &config,
            "--trust-root",
            &root,
        ]);
        if ok {
            assert!(out.status.success(), "{entry}: {}", text(&out));
            assert!(
                String::from_utf8_lossy(&out.stdout).contains("githubAction acme/drivers"),
                "{}",
                text(&out)
            );
        } else {
            assert_eq!(out.status.code(), Some(1), "{entry}: {}", text(&out));
            assert!(
                text(&out).contains("the policy wants https://github.com/acme/other/"),
                "{}",
                text(&out)
            );
        }
    }
}
