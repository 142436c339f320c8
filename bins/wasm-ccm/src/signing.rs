//! Signed drivers: the verification flags of `run` and `pull`, and the `sign` and `verify`
//! commands. cosign's key-based and keyless (certificate) formats; keyless signatures are
//! checked against the trust root file the operator gives (`--trust-root`): nothing but the
//! driver's registry is contacted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::Args;
use sha2::{Digest, Sha256};
use wasm_ccm_oci::keyless::{BUNDLE_ANNOTATION, CERTIFICATE_ANNOTATION, CHAIN_ANNOTATION};
use wasm_ccm_oci::signature::{blob_signature, sign_blob};
use wasm_ccm_oci::{BlobCache, Policy, PublicKey, Reference, SigningKey, TrustRoot, Verdict};

use crate::GlobalArgs;
use crate::driver_source::{DriverSource, RegistryArgs};
use crate::preflight::{PathFlag, readable_files};

/// What a driver must be signed by. With neither flag nothing is checked (and nothing is
/// claimed): with either, an unsigned or wrongly signed driver never runs.
#[derive(Args, Debug, Clone, Default)]
pub struct VerifyArgs {
    /// A verification config (Kubewarden's `apiVersion: v1` format: allOf/anyOf of
    /// `kind: pubKey`, `genericIssuer` and `githubAction` entries, minimumMatches). A driver
    /// that does not satisfy it is refused.
    #[arg(long, value_name = "FILE")]
    pub verify_config: Option<PathBuf>,
    /// The Sigstore trust root keyless entries are checked against: a `trusted_root.json`
    /// (protobuf-specs format, as `cosign --trusted-root` reads; export the public-good one
    /// with `cosign trusted-root create` or from sigstore's TUF repository, or write your
    /// private CA's). Read from the file only: no TUF or Rekor request is made.
    #[arg(long, value_name = "FILE")]
    pub trust_root: Option<PathBuf>,
    /// A public key (PEM, cosign.pub) that must have signed the driver. Repeatable: every key
    /// must have signed; combined with --verify-config, both must hold.
    #[arg(long, value_name = "FILE")]
    pub verify_key: Vec<PathBuf>,
    /// For a file driver: its signature (`cosign sign-blob --output-signature`, cosign's
    /// `--bundle` JSON, or `wasm-ccm sign FILE`). Default: the driver's path with `.sig` added.
    #[arg(long, value_name = "FILE")]
    pub driver_signature: Option<PathBuf>,
}

impl VerifyArgs {
    /// Whether a policy is configured.
    pub fn enabled(&self) -> bool {
        self.verify_config.is_some() || !self.verify_key.is_empty()
    }

    /// Checks the files exist and are readable (the signature only for file drivers).
    pub fn preflight(&self, source: &DriverSource) -> anyhow::Result<()> {
        let mut flags = vec![
            PathFlag {
                flag: "--verify-config",
                path: self.verify_config.as_deref(),
                what: "a verification config",
                hint: "give the mounted verification config (YAML), or leave the flag out",
            },
            PathFlag {
                flag: "--trust-root",
                path: self.trust_root.as_deref(),
                what: "a Sigstore trusted_root.json",
                hint: "mount the trust root (a ConfigMap key), or leave the flag out when the policy has no keyless entries",
            },
        ];
        for key in &self.verify_key {
            flags.push(PathFlag {
                flag: "--verify-key",
                path: Some(key),
                what: "a PEM public key",
                hint: "give the signer's public key (cosign.pub)",
            });
        }
        readable_files(&flags)?;
        if let (DriverSource::File(path), true) = (source, self.enabled()) {
            let signature = self.signature_path(path);
            readable_files(&[PathFlag {
                flag: "--driver-signature",
                path: Some(&signature),
                what: "the driver's signature",
                hint: "mount the signature beside the driver (`wasm-ccm sign --key KEY driver.wasm` writes driver.wasm.sig), or name it with --driver-signature",
            }])?;
        }
        Ok(())
    }

    /// The signature file of the file driver `driver`.
    pub fn signature_path(&self, driver: &Path) -> PathBuf {
        self.driver_signature.clone().unwrap_or_else(|| {
            let mut name = driver.as_os_str().to_owned();
            name.push(".sig");
            PathBuf::from(name)
        })
    }

    /// The policy the flags describe, if any.
    pub fn policy(&self) -> anyhow::Result<Option<Policy>> {
        let config = match &self.verify_config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read --verify-config {}", path.display()))?;
                Some(
                    Policy::parse(&text)
                        .map_err(|e| anyhow::anyhow!("--verify-config {}: {e}", path.display()))?,
                )
            }
            None => None,
        };
        let mut keys = Vec::new();
        for path in &self.verify_key {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --verify-key {}", path.display()))?;
            keys.push(
                PublicKey::from_pem(&text)
                    .map_err(|e| anyhow::anyhow!("--verify-key {}: {e}", path.display()))?,
            );
        }
        let from_keys = (!keys.is_empty()).then(|| Policy::from_keys(keys));
        let policy = match (config, from_keys) {
            (Some(c), Some(k)) => Some(c.and(k)),
            (c, k) => c.or(k),
        };
        let root = match &self.trust_root {
            Some(path) => Some(read_trust_root(path)?),
            None => None,
        };
        let Some(mut policy) = policy else {
            if self.trust_root.is_some() {
                bail!(
                    "--trust-root is given but no policy: add --verify-config with genericIssuer or githubAction entries"
                );
            }
            return Ok(None);
        };
        if let Some(root) = root {
            policy = policy.with_trust_root(root);
        }
        if let Some(entries) = policy.needs_trust_root() {
            bail!(
                "--verify-config has keyless entries ({}) and no trust root to check them against: give --trust-root trusted_root.json (the Sigstore trust root of the CA and transparency log that sign your drivers)",
                entries.join(", ")
            );
        }
        Ok(Some(policy))
    }
}

/// Reads `--trust-root`.
pub fn read_trust_root(path: &Path) -> anyhow::Result<TrustRoot> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read --trust-root {}", path.display()))?;
    TrustRoot::parse(&bytes).map_err(|e| anyhow::anyhow!("--trust-root {}: {e}", path.display()))
}

/// Verifies a file driver's bytes against `policy` with the signature file beside it.
pub fn verify_file(
    policy: &Policy,
    driver: &Path,
    bytes: &[u8],
    signature: &Path,
) -> Result<Verdict, String> {
    let sig = std::fs::read(signature).map_err(|e| {
        format!(
            "cannot read the driver's signature {}: {e}; mount it beside the driver or name it with --driver-signature",
            signature.display()
        )
    })?;
    let digest = format!("sha256:{}", hex::encode(Sha256::digest(bytes)));
    let layer = blob_signature(bytes, &sig, &signature.display().to_string());
    policy.evaluate(&digest, &[layer]).map_err(|why| {
        format!(
            "the driver {} failed signature verification: {why}. Sign this version (`wasm-ccm sign --key KEY {}`) and mount the new signature",
            driver.display(),
            driver.display()
        )
    })
}

/// The cache for OCI blobs and signatures (`--cache-dir`'s `oci`).
pub fn oci_cache(global: &GlobalArgs) -> Option<BlobCache> {
    global
        .cache_root()
        .map(|dir| BlobCache::new(dir.join("oci")))
}

/// Reads a signing key; cosign's encrypted keys take their password from `COSIGN_PASSWORD`.
pub fn signing_key(path: &Path) -> anyhow::Result<SigningKey> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read --key {}", path.display()))?;
    let password = std::env::var("COSIGN_PASSWORD").ok();
    SigningKey::from_pem(&text, password.as_deref().map(str::as_bytes))
        .map_err(|e| anyhow::anyhow!("--key {}: {e}", path.display()))
}

fn parse_annotation(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{text:?} is not KEY=VALUE")),
    }
}

/// `wasm-ccm sign`.
#[derive(Args, Debug)]
pub struct SignArgs {
    /// What to sign: `oci://REGISTRY/REPO@sha256:…` (or `:TAG`, resolved to its digest), or a
    /// driver file (for a ConfigMap-mounted driver).
    target: String,
    /// The private key: cosign.key (`ENCRYPTED SIGSTORE PRIVATE KEY`; password in
    /// COSIGN_PASSWORD) or an unencrypted PKCS#8 PEM ECDSA P-256 key.
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    /// An annotation in the signed payload (`cosign sign -a`); repeatable. OCI targets only.
    #[arg(long, short = 'a', value_name = "KEY=VALUE", value_parser = parse_annotation)]
    annotation: Vec<(String, String)>,
    /// For a file target: where to write the signature (default: the file's path + `.sig`).
    #[arg(long, value_name = "FILE")]
    output_signature: Option<PathBuf>,
    /// A certificate (PEM) for --key's public key, from your own CA: attached to the signature
    /// (`dev.sigstore.cosign/certificate`) so it verifies against a trust root naming that CA
    /// (keyless policy entries) instead of a key. OCI targets only.
    #[arg(long, value_name = "FILE")]
    certificate: Option<PathBuf>,
    /// The certificate's issuing chain (PEM, intermediates then root), attached as
    /// `dev.sigstore.cosign/chain`. Needs --certificate.
    #[arg(long, value_name = "FILE", requires = "certificate")]
    certificate_chain: Option<PathBuf>,
    /// A Rekor bundle (cosign's `{"SignedEntryTimestamp", "Payload"}` JSON) to attach as
    /// `dev.sigstore.cosign/bundle`. Its entry must name this very signature, so it only suits
    /// a signature made before (ECDSA signatures differ each time): mostly for tests and
    /// re-attaching. Needs --certificate.
    #[arg(long, value_name = "FILE", requires = "certificate")]
    rekor_bundle: Option<PathBuf>,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Signs an OCI driver (a signature in the registry, cosign's layout) or a file.
pub async fn sign(_global: &GlobalArgs, args: SignArgs) -> anyhow::Result<ExitCode> {
    let key = signing_key(&args.key)?;
    match DriverSource::parse(&args.target)? {
        DriverSource::Oci(reference) => {
            let annotations: BTreeMap<String, String> = args.annotation.into_iter().collect();
            let layer = certificate_annotations(
                &key,
                args.certificate.as_deref(),
                args.certificate_chain.as_deref(),
                args.rekor_bundle.as_deref(),
            )?;
            sign_oci(&args.registry, &reference, &key, &annotations, &layer).await?;
        }
        DriverSource::File(path) => {
            if args.certificate.is_some() {
                bail!(
                    "--certificate applies to oci:// targets: a file's signature is a bare signature (sign it with --key and verify it with a pubKey entry)"
                );
            }
            if !args.annotation.is_empty() {
                bail!(
                    "--annotation applies to oci:// targets: a file's signature covers its bytes only"
                );
            }
            let bytes =
                std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
            let signature = sign_blob(&key, &bytes).map_err(anyhow::Error::msg)?;
            let out = args
                .output_signature
                .unwrap_or_else(|| VerifyArgs::default().signature_path(&path));
            std::fs::write(&out, format!("{signature}\n"))
                .with_context(|| format!("cannot write {}", out.display()))?;
            eprintln!(
                "signed {} (sha256 {}) with key {}",
                path.display(),
                hex::encode(Sha256::digest(&bytes)),
                key.public_key().fingerprint()
            );
            crate::outln!("{}", out.display())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The layer annotations of `--certificate`, `--certificate-chain` and `--rekor-bundle`; the
/// certificate must be for `key` (a mismatch would publish a signature nothing verifies).
fn certificate_annotations(
    key: &SigningKey,
    certificate: Option<&Path>,
    chain: Option<&Path>,
    bundle: Option<&Path>,
) -> anyhow::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let Some(certificate) = certificate else {
        return Ok(out);
    };
    let read = |flag: &str, path: &Path| {
        std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {flag} {}", path.display()))
    };
    let text = read("--certificate", certificate)?;
    let cert_key = wasm_ccm_oci::keyless::certificate_key(&text)
        .map_err(|e| anyhow::anyhow!("--certificate {}: {e}", certificate.display()))?;
    if cert_key != key.public_key() {
        bail!(
            "--certificate {} is for the key {}, not for --key ({}): give the certificate your CA issued for this key",
            certificate.display(),
            cert_key.fingerprint(),
            key.public_key().fingerprint()
        );
    }
    out.insert(CERTIFICATE_ANNOTATION.to_string(), text);
    if let Some(chain) = chain {
        out.insert(
            CHAIN_ANNOTATION.to_string(),
            read("--certificate-chain", chain)?,
        );
    }
    if let Some(bundle) = bundle {
        out.insert(
            BUNDLE_ANNOTATION.to_string(),
            read("--rekor-bundle", bundle)?.trim().to_string(),
        );
    }
    Ok(out)
}

/// Signs `reference` and says where the signature went.
pub async fn sign_oci(
    registry: &RegistryArgs,
    reference: &Reference,
    key: &SigningKey,
    annotations: &BTreeMap<String, String>,
    layer_annotations: &BTreeMap<String, String>,
) -> anyhow::Result<()> {
    if reference.digest.is_none() {
        tracing::warn!(%reference, "signing a tag: the digest it names now is signed");
    }
    let signed = registry
        .client()?
        .sign_with(reference, key, annotations, layer_annotations)
        .await?;
    eprintln!(
        "signed {} with key {}; signature stored as {} ({})",
        reference.pinned(&signed.manifest_digest),
        signed.key,
        signed.signature_reference,
        signed.signature_manifest_digest
    );
    Ok(())
}

/// `wasm-ccm verify`.
#[derive(Args, Debug)]
pub struct VerifyCmdArgs {
    /// What to verify: an `oci://` reference or a driver file.
    target: String,
    #[command(flatten)]
    verify: VerifyArgs,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Verifies a driver as `run` would, prints the entries satisfied; exit 1 when refused.
pub async fn verify(global: &GlobalArgs, args: VerifyCmdArgs) -> anyhow::Result<ExitCode> {
    let source = DriverSource::parse(&args.target)?;
    args.verify.preflight(&source)?;
    let Some(policy) = args.verify.policy()? else {
        bail!("nothing to verify against: give --verify-config FILE or --verify-key FILE");
    };
    let started = std::time::Instant::now();
    let (what, result) = match &source {
        DriverSource::Oci(reference) => {
            let cache = oci_cache(global);
            let result = args
                .registry
                .client()?
                .verify(reference, cache.as_ref(), &policy)
                .await
                .map(|(v, _)| {
                    (
                        v.verdict,
                        format!(
                            "{}{}",
                            reference.pinned(&v.manifest_digest),
                            if v.from_cache {
                                " (cached signatures)"
                            } else {
                                ""
                            }
                        ),
                    )
                })
                .map_err(|e| format!("{e:#}"));
            (reference.to_string(), result)
        }
        DriverSource::File(path) => {
            let bytes =
                std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            let signature = args.verify.signature_path(path);
            let result = verify_file(&policy, path, &bytes, &signature)
                .map(|v| (v, path.display().to_string()));
            (path.display().to_string(), result)
        }
    };
    match result {
        Ok((verdict, pinned)) => {
            crate::outln!("verified {pinned} in {} ms", started.elapsed().as_millis())?;
            for line in verdict.matched {
                crate::outln!("  {line}")?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => {
            eprintln!("wasm-ccm: {what}: refused: {why}");
            Ok(ExitCode::from(1))
        }
    }
}
