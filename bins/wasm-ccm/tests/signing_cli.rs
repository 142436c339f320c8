//! `wasm-ccm sign` and `wasm-ccm verify` as an operator runs them: file drivers (a ConfigMap's
//! `.wasm` and its `.sig`) and OCI drivers in a real registry on loopback; refusals exit 1 and
//! say what failed; a restart with `--cache-dir` verifies with the registry gone.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use wasm_ccm_oci::{
    Client, ClientOptions, ComponentInfo, Reference, SigningKey, encrypt_cosign_key, pkcs8_pem,
};
use wasm_ccm_test_tools::registry::Registry;

fn wasm_ccm(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasm-ccm"))
        .args(args)
        .env_remove("WASM_CCM_LOG")
        .env_remove("COSIGN_PASSWORD")
        .envs(env.iter().copied())
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

/// A key pair in `dir`: `NAME.key` (PKCS#8 PEM) and `NAME.pub`. Returns the paths.
fn key_pair(dir: &Path, name: &str) -> (String, String) {
    let der = SigningKey::generate_pkcs8().unwrap();
    let key = SigningKey::from_pkcs8_der(&der).unwrap();
    let private = dir.join(format!("{name}.key"));
    let public = dir.join(format!("{name}.pub"));
    std::fs::write(&private, pkcs8_pem(&der)).unwrap();
    std::fs::write(&public, key.public_key().to_pem()).unwrap();
    (private.display().to_string(), public.display().to_string())
}

#[test]
fn file_drivers_sign_and_verify_and_every_bad_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let driver = dir.path().join("driver.wasm");
    std::fs::write(
        &driver,
        b"\0asm stand-in bytes: verification never compiles",
    )
    .unwrap();
    let driver = driver.display().to_string();
    let (key, public) = key_pair(dir.path(), "ci");
    let (_, other_public) = key_pair(dir.path(), "other");

    let out = wasm_ccm(&["sign", "--key", &key, &driver], &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(Path::new(&format!("{driver}.sig")).exists());

    let out = wasm_ccm(&["verify", &driver, "--verify-key", &public], &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("verified"),
        "{}",
        text(&out)
    );

    // Wrong key.
    let out = wasm_ccm(&["verify", &driver, "--verify-key", &other_public], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("does not verify with this key"),
        "{}",
        text(&out)
    );

    // Missing signature: refused before anything is read, naming the flag.
    let unsigned = dir.path().join("unsigned.wasm");
    std::fs::write(&unsigned, b"x").unwrap();
    let out = wasm_ccm(
        &[
            "verify",
            &unsigned.display().to_string(),
            "--verify-key",
            &public,
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--driver-signature"), "{}", text(&out));

    // Tampered file.
    std::fs::write(&driver, b"\0asm other bytes").unwrap();
    let out = wasm_ccm(&["verify", &driver, "--verify-key", &public], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("the file was altered"),
        "{}",
        text(&out)
    );

    // A keyless policy without a trust root is refused at start, never silently skipped.
    let config = dir.path().join("verification.yaml");
    std::fs::write(
        &config,
        "apiVersion: v1\nallOf:\n  - kind: githubAction\n    owner: acme\n",
    )
    .unwrap();
    let out = wasm_ccm(
        &[
            "verify",
            &driver,
            "--verify-config",
            &config.display().to_string(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("--trust-root") && text(&out).contains("githubAction acme"),
        "{}",
        text(&out)
    );
}

#[test]
fn cosign_encrypted_keys_take_the_password_from_cosign_password() {
    let dir = tempfile::tempdir().unwrap();
    let driver = dir.path().join("driver.wasm");
    std::fs::write(&driver, b"bytes").unwrap();
    let der = SigningKey::generate_pkcs8().unwrap();
    let public = SigningKey::from_pkcs8_der(&der).unwrap().public_key();
    let key = dir.path().join("cosign.key");
    std::fs::write(&key, encrypt_cosign_key(&der, b"s3cret", 12).unwrap()).unwrap();
    let pub_path = dir.path().join("cosign.pub");
    std::fs::write(&pub_path, public.to_pem()).unwrap();
    let (driver, key, pub_path) = (
        driver.display().to_string(),
        key.display().to_string(),
        pub_path.display().to_string(),
    );

    let out = wasm_ccm(&["sign", "--key", &key, &driver], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("COSIGN_PASSWORD"), "{}", text(&out));
    let out = wasm_ccm(
        &["sign", "--key", &key, &driver],
        &[("COSIGN_PASSWORD", "wrong")],
    );
    assert!(text(&out).contains("wrong password"), "{}", text(&out));
    let out = wasm_ccm(
        &["sign", "--key", &key, &driver],
        &[("COSIGN_PASSWORD", "s3cret")],
    );
    assert!(out.status.success(), "{}", text(&out));
    let out = wasm_ccm(&["verify", &driver, "--verify-key", &pub_path], &[]);
    assert!(out.status.success(), "{}", text(&out));
}

#[tokio::test]
async fn oci_drivers_sign_and_verify_then_verify_from_the_cache_with_the_registry_gone() {
    let registry = Registry::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = key_pair(dir.path(), "ci");
    let (_, other_public) = key_pair(dir.path(), "other");
    let tagged = Reference::parse(&format!("oci://{}/drivers/x:1", registry.host())).unwrap();
    let pushed = Client::new(ClientOptions::default())
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
        .unwrap();
    let pinned = pushed.pinned.to_string();
    let cache = dir.path().join("cache").display().to_string();

    let unsigned = wasm_ccm(&["verify", &pinned, "--verify-key", &public], &[]);
    assert_eq!(unsigned.status.code(), Some(1), "{}", text(&unsigned));
    assert!(
        text(&unsigned).contains("no signature was found"),
        "{}",
        text(&unsigned)
    );

    let out = wasm_ccm(&["sign", "--key", &key, &pinned], &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(".sig"), "{}", text(&out));

    let out = wasm_ccm(
        &[
            "--cache-dir",
            &cache,
            "verify",
            &pinned,
            "--verify-key",
            &public,
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    let out = wasm_ccm(&["verify", &pinned, "--verify-key", &other_public], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("does not verify with this key"),
        "{}",
        text(&out)
    );

    drop(registry);
    let out = wasm_ccm(
        &[
            "--cache-dir",
            &cache,
            "verify",
            &pinned,
            "--verify-key",
            &public,
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("cached signatures"), "{}", text(&out));
}

/// Runs `wasm-ccm` with standard output a pipe whose reader is already gone (what `| head -1`
/// leaves once `head` has its line): the command must end quietly, not panic.
fn wasm_ccm_with_closed_stdout(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    Command::new(env!("CARGO_BIN_EXE_wasm-ccm"))
        .args(args)
        .env_remove("WASM_CCM_LOG")
        .env_remove("COSIGN_PASSWORD")
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("run wasm-ccm")
}

#[test]
fn a_closed_stdout_ends_sign_and_verify_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let driver = dir.path().join("driver.wasm");
    std::fs::write(&driver, b"\0asm stand-in").unwrap();
    let driver = driver.display().to_string();
    let (key, public) = key_pair(dir.path(), "ci");
    for args in [
        &["sign", "--key", &key, &driver][..],
        &["verify", &driver, "--verify-key", &public][..],
    ] {
        let out = wasm_ccm_with_closed_stdout(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "{args:?}: {}",
            text(&out)
        );
    }
    // The signature was written although its path could not be printed.
    let out = wasm_ccm(&["verify", &driver, "--verify-key", &public], &[]);
    assert!(out.status.success(), "{}", text(&out));
    // A refusal still says so and exits 1: only the report on stdout was unwanted.
    std::fs::write(&driver, b"\0asm other").unwrap();
    let out = wasm_ccm_with_closed_stdout(&["verify", &driver, "--verify-key", &public]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("refused"), "{}", text(&out));
}

/// OpenSSL, the independent implementation the interop tests check against: from PATH, else
/// Debian's `openssl` package fetched into target/tools. A machine with neither fails the test
/// with how to provide it: an interop test that skips itself would pass having checked nothing.
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

/// Runs `openssl ARGS` in `dir`; panics with its output unless it succeeds.
fn run_openssl(openssl: &Path, dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(openssl)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", text(&out));
    out
}

/// `openssl dgst -sha256 -verify PUB -signature SIG FILE`: whether OpenSSL accepts it.
fn openssl_verifies(openssl: &Path, dir: &Path, public: &str, signature: &str, file: &str) -> bool {
    let out = Command::new(openssl)
        .args([
            "dgst",
            "-sha256",
            "-verify",
            public,
            "-signature",
            signature,
            file,
        ])
        .current_dir(dir)
        .output()
        .expect("run openssl");
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.success(),
        said.contains("Verified OK"),
        "{}",
        text(&out)
    );
    out.status.success()
}

/// A key pair made by OpenSSL the way the README says: `ecparam -genkey` (SEC1), `pkcs8 -topk8
/// -nocrypt` (what wasm-ccm and cosign read) and `ec -pubout`. Returns (SEC1, PKCS#8, public)
/// file names in `dir`.
fn openssl_key_pair(openssl: &Path, dir: &Path, name: &str) -> (String, String, String) {
    let (sec1, pkcs8, public) = (
        format!("{name}.ec.pem"),
        format!("{name}.key"),
        format!("{name}.pub"),
    );
    run_openssl(
        openssl,
        dir,
        &[
            "ecparam",
            "-genkey",
            "-name",
            "prime256v1",
            "-noout",
            "-out",
            &sec1,
        ],
    );
    run_openssl(
        openssl,
        dir,
        &["pkcs8", "-topk8", "-nocrypt", "-in", &sec1, "-out", &pkcs8],
    );
    run_openssl(
        openssl,
        dir,
        &["ec", "-in", &sec1, "-pubout", "-out", &public],
    );
    (sec1, pkcs8, public)
}

#[test]
fn openssl_interop_for_file_drivers_both_ways() {
    let openssl = openssl();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let path = |name: &str| d.join(name).display().to_string();
    let (sec1, key, public) = openssl_key_pair(&openssl, d, "ossl");
    std::fs::write(
        d.join("driver.wasm"),
        b"\0asm\x0d\0\x01\0 a driver's bytes, signed by OpenSSL",
    )
    .unwrap();

    // OpenSSL signs (DER ECDSA over SHA-256), base64 as cosign's --output-signature writes it;
    // wasm-ccm verifies with the OpenSSL public key.
    run_openssl(
        &openssl,
        d,
        &[
            "dgst",
            "-sha256",
            "-sign",
            &key,
            "-out",
            "driver.der",
            "driver.wasm",
        ],
    );
    run_openssl(
        &openssl,
        d,
        &[
            "base64",
            "-A",
            "-in",
            "driver.der",
            "-out",
            "driver.wasm.sig",
        ],
    );
    let out = wasm_ccm(
        &[
            "verify",
            &path("driver.wasm"),
            "--verify-key",
            &path(&public),
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("verified"), "{}", text(&out));

    // One byte of the file changes: refused.
    let mut bytes = std::fs::read(d.join("driver.wasm")).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(d.join("driver.wasm"), &bytes).unwrap();
    let out = wasm_ccm(
        &[
            "verify",
            &path("driver.wasm"),
            "--verify-key",
            &path(&public),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("the file was altered"),
        "{}",
        text(&out)
    );
    assert!(
        !openssl_verifies(&openssl, d, &public, "driver.der", "driver.wasm"),
        "OpenSSL agrees the changed file is not what was signed"
    );

    // The other way: wasm-ccm signs with the OpenSSL-made PKCS#8 key; OpenSSL verifies the
    // decoded signature with its public key.
    let out = wasm_ccm(&["sign", "--key", &path(&key), &path("driver.wasm")], &[]);
    assert!(out.status.success(), "{}", text(&out));
    run_openssl(
        &openssl,
        d,
        &[
            "base64",
            "-d",
            "-A",
            "-in",
            "driver.wasm.sig",
            "-out",
            "ours.der",
        ],
    );
    assert!(
        openssl_verifies(&openssl, d, &public, "ours.der", "driver.wasm"),
        "OpenSSL verifies wasm-ccm's signature"
    );
    bytes[0] ^= 0x01;
    std::fs::write(d.join("driver.wasm"), &bytes).unwrap();
    assert!(!openssl_verifies(
        &openssl,
        d,
        &public,
        "ours.der",
        "driver.wasm"
    ));

    // The SEC1 file `ecparam` writes is refused with the conversion to run.
    let out = wasm_ccm(&["sign", "--key", &path(&sec1), &path("driver.wasm")], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("openssl pkcs8 -topk8 -nocrypt"),
        "{}",
        text(&out)
    );

    // The README's one-step key (`genpkey`, PKCS#8 already) and `pkey -pubout` work as well.
    run_openssl(
        &openssl,
        d,
        &[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            "genpkey.key",
        ],
    );
    run_openssl(
        &openssl,
        d,
        &[
            "pkey",
            "-in",
            "genpkey.key",
            "-pubout",
            "-out",
            "genpkey.pub",
        ],
    );
    let out = wasm_ccm(
        &[
            "sign",
            "--key",
            &path("genpkey.key"),
            "--output-signature",
            &path("genpkey.sig"),
            &path("driver.wasm"),
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    run_openssl(
        &openssl,
        d,
        &[
            "base64",
            "-d",
            "-A",
            "-in",
            "genpkey.sig",
            "-out",
            "genpkey.der",
        ],
    );
    assert!(openssl_verifies(
        &openssl,
        d,
        "genpkey.pub",
        "genpkey.der",
        "driver.wasm"
    ));
    let out = wasm_ccm(
        &[
            "verify",
            &path("driver.wasm"),
            "--verify-key",
            &path("genpkey.pub"),
            "--driver-signature",
            &path("genpkey.sig"),
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
}

fn sha256_digest(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

#[tokio::test]
async fn openssl_interop_for_oci_drivers_both_ways() {
    let openssl = openssl();
    let registry = Registry::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (_, key, public) = openssl_key_pair(&openssl, d, "ossl");
    let public_path = d.join(&public).display().to_string();
    let push = |repository: &'static str, wasm: &'static [u8]| {
        let host = registry.host();
        async move {
            let tagged = Reference::parse(&format!("oci://{host}/{repository}:1")).unwrap();
            Client::new(ClientOptions::default())
                .unwrap()
                .push(
                    &tagged,
                    wasm,
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
    };

    // OpenSSL signs cosign's simple-signing payload, written here byte for byte as cosign
    // writes it (not by our code); the signature manifest is pushed under cosign's tag.
    let pinned = push("drivers/by-openssl", b"\0asm signed by openssl").await;
    let digest = pinned.digest.clone().unwrap();
    let payload = format!(
        "{{\"critical\":{{\"identity\":{{\"docker-reference\":\"{}/{}\"}},\"image\":{{\"docker-manifest-digest\":\"{digest}\"}},\"type\":\"cosign container image signature\"}},\"optional\":null}}",
        registry.host(),
        pinned.repository
    );
    std::fs::write(d.join("payload.json"), &payload).unwrap();
    run_openssl(
        &openssl,
        d,
        &[
            "dgst",
            "-sha256",
            "-sign",
            &key,
            "-out",
            "payload.der",
            "payload.json",
        ],
    );
    let signature = run_openssl(&openssl, d, &["base64", "-A", "-in", "payload.der"]);
    let signature = String::from_utf8(signature.stdout)
        .unwrap()
        .trim()
        .to_string();
    let config = b"{}".to_vec();
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "size": config.len(),
            "digest": sha256_digest(&config),
        },
        "layers": [{
            "mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
            "size": payload.len(),
            "digest": sha256_digest(payload.as_bytes()),
            "annotations": {"dev.cosignproject.cosign/signature": signature},
        }],
    });
    let tag = format!("sha256-{}.sig", &digest["sha256:".len()..]);
    let signature_ref = Reference {
        tag: Some(tag),
        digest: None,
        ..pinned.clone()
    };
    Client::new(ClientOptions::default())
        .unwrap()
        .push_manifest(
            &signature_ref,
            "application/vnd.oci.image.manifest.v1+json",
            &serde_json::to_vec(&manifest).unwrap(),
            &[payload.as_bytes(), config.as_slice()],
        )
        .await
        .unwrap();
    let pinned_text = pinned.to_string();
    let out = wasm_ccm(&["verify", &pinned_text, "--verify-key", &public_path], &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("verified"), "{}", text(&out));
    // Another artifact in the same repository is not covered by that signature, even when
    // the signature is copied under its own signature tag: the payload names the first digest.
    let other = push("drivers/by-openssl", b"\0asm another version").await;
    let other_digest = other.digest.clone().unwrap();
    let copied = Reference {
        tag: Some(format!("sha256-{}.sig", &other_digest["sha256:".len()..])),
        digest: None,
        ..other.clone()
    };
    Client::new(ClientOptions::default())
        .unwrap()
        .push_manifest(
            &copied,
            "application/vnd.oci.image.manifest.v1+json",
            &serde_json::to_vec(&manifest).unwrap(),
            &[payload.as_bytes(), config.as_slice()],
        )
        .await
        .unwrap();
    let out = wasm_ccm(
        &["verify", &other.to_string(), "--verify-key", &public_path],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "it signs the manifest {digest}, not {other_digest} (a signature copied from another artifact)"
        )),
        "{}",
        text(&out)
    );

    // The other way: wasm-ccm signs with the OpenSSL key; the payload and signature are read
    // from the registry's storage and OpenSSL verifies them.
    let pinned = push("drivers/by-wasm-ccm", b"\0asm signed by wasm-ccm").await;
    let digest = pinned.digest.clone().unwrap();
    let key_path = d.join(&key).display().to_string();
    let out = wasm_ccm(&["sign", "--key", &key_path, &pinned.to_string()], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let tag = format!("sha256-{}.sig", &digest["sha256:".len()..]);
    let manifest: serde_json::Value = serde_json::from_slice(
        &registry.stored_blob(&registry.stored_tag(&pinned.repository, &tag)),
    )
    .unwrap();
    let layer = &manifest["layers"][0];
    assert_eq!(
        layer["mediaType"], "application/vnd.dev.cosign.simplesigning.v1+json",
        "{manifest}"
    );
    let payload = registry.stored_blob(layer["digest"].as_str().unwrap());
    let doc: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    assert_eq!(doc["critical"]["image"]["docker-manifest-digest"], digest);
    assert_eq!(doc["critical"]["type"], "cosign container image signature");
    std::fs::write(d.join("theirs.json"), &payload).unwrap();
    std::fs::write(
        d.join("theirs.b64"),
        layer["annotations"]["dev.cosignproject.cosign/signature"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    run_openssl(
        &openssl,
        d,
        &[
            "base64",
            "-d",
            "-A",
            "-in",
            "theirs.b64",
            "-out",
            "theirs.der",
        ],
    );
    assert!(
        openssl_verifies(&openssl, d, &public, "theirs.der", "theirs.json"),
        "OpenSSL verifies wasm-ccm's signature of the payload"
    );
}
