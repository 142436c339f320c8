//! Fetching a driver from where `--driver` says (a file, a mounted ConfigMap, or an OCI
//! artifact: [`DriverSource`], in `driver_source.rs`); and the `push`
//! and `pull` commands that move drivers in and out of registries.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::Args;
use sha2::{Digest, Sha256};
use wasm_ccm_oci::{BlobCache, ComponentInfo, Reference};

use crate::GlobalArgs;
pub use crate::driver_source::{DriverSource, RegistryArgs};
use crate::signing::VerifyArgs;

/// A driver's bytes and where they came from.
pub struct Fetched {
    /// A path or a digest-pinned `oci://` reference, for messages.
    pub origin: String,
    /// The component's bytes, checked against `--driver-sha256`.
    pub bytes: Vec<u8>,
}

/// Reads or pulls the driver and checks it against `--driver-sha256`.
pub async fn fetch(
    global: &GlobalArgs,
    source: &DriverSource,
    registry: &RegistryArgs,
    pinned_sha256: Option<&str>,
) -> anyhow::Result<Fetched> {
    fetch_verified(
        global,
        source,
        registry,
        pinned_sha256,
        &VerifyArgs::default(),
    )
    .await
}

/// [`fetch`], with the signature policy of `verify` (when it names one) checked first: an OCI
/// driver's Wasm layer is not fetched, and a file driver's bytes are not returned, unless the
/// policy holds.
pub async fn fetch_verified(
    global: &GlobalArgs,
    source: &DriverSource,
    registry: &RegistryArgs,
    pinned_sha256: Option<&str>,
    verify: &VerifyArgs,
) -> anyhow::Result<Fetched> {
    let policy = verify.policy()?;
    let fetched = match source {
        DriverSource::File(path) => {
            let bytes = std::fs::read(path)
                .with_context(|| format!("cannot read --driver {}", path.display()))?;
            if let Some(policy) = &policy {
                let started = std::time::Instant::now();
                let verdict =
                    crate::signing::verify_file(policy, path, &bytes, &verify.signature_path(path))
                        .map_err(anyhow::Error::msg)?;
                tracing::info!(
                    driver = %path.display(),
                    matched = %verdict.matched.join("; "),
                    micros = started.elapsed().as_micros() as u64,
                    "driver signature verified"
                );
            }
            Fetched {
                origin: path.display().to_string(),
                bytes,
            }
        }
        DriverSource::Oci(reference) => {
            let client = registry.client()?;
            let cache = global
                .cache_root()
                .map(|dir| BlobCache::new(dir.join("oci")));
            let pulled = match &policy {
                Some(policy) => {
                    let started = std::time::Instant::now();
                    let (pulled, verified) = client
                        .pull_verified(reference, cache.as_ref(), policy)
                        .await?;
                    tracing::info!(
                        reference = %pulled.pinned,
                        matched = %verified.verdict.matched.join("; "),
                        cached_signatures = verified.from_cache,
                        millis = started.elapsed().as_millis() as u64,
                        "driver signature verified"
                    );
                    pulled
                }
                None => client.pull(reference, cache.as_ref()).await?,
            };
            if reference.digest.is_none() {
                tracing::warn!(
                    reference = %reference,
                    resolved = %pulled.pinned,
                    "the driver's tag resolved to a digest; pin it with @sha256: so a moved tag cannot change what runs"
                );
            }
            tracing::info!(
                reference = %pulled.pinned,
                layer = %pulled.layer_media_type,
                from_cache = pulled.from_cache,
                "driver pulled"
            );
            Fetched {
                origin: pulled.pinned.to_string(),
                bytes: pulled.wasm,
            }
        }
    };
    if let Some(pinned) = pinned_sha256 {
        let actual = hex::encode(Sha256::digest(&fetched.bytes));
        if actual != pinned {
            bail!(
                "the driver {} has sha256 {actual}, but --driver-sha256 pins {pinned}: refusing to run it (update --driver-sha256 if this version is intended)",
                fetched.origin
            );
        }
    }
    Ok(fetched)
}

/// Checks `--driver-sha256`'s form.
pub fn parse_sha256(value: &str) -> Result<String, String> {
    let hex = value.strip_prefix("sha256:").unwrap_or(value);
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(hex.to_ascii_lowercase())
    } else {
        Err(format!(
            "{value:?} is not a sha256: give 64 hex digits (what `sha256sum driver.wasm` prints)"
        ))
    }
}

/// `wasm-ccm push`.
#[derive(Args, Debug)]
pub struct PushArgs {
    /// The driver component (`.wasm`).
    driver: PathBuf,
    /// Where to push: `oci://REGISTRY/REPO:TAG`.
    reference: String,
    /// Sign the pushed manifest with this key (as `wasm-ccm sign --key` does): cosign.key
    /// (password in COSIGN_PASSWORD) or an unencrypted PKCS#8 PEM ECDSA P-256 key.
    #[arg(long, value_name = "FILE")]
    sign_key: Option<PathBuf>,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Checks that the file is a driver (compiles it, runs `info`), then pushes it in the CNCF Wasm
/// layout and prints the digest-pinned reference to deploy.
pub async fn push(global: &GlobalArgs, args: PushArgs) -> anyhow::Result<ExitCode> {
    let reference = Reference::parse(&args.reference).map_err(anyhow::Error::msg)?;
    // The key is read first: a wrong path or password fails before anything is pushed.
    let key = match &args.sign_key {
        Some(path) => Some(crate::signing::signing_key(path)?),
        None => None,
    };
    let bytes = std::fs::read(&args.driver)
        .with_context(|| format!("cannot read {}", args.driver.display()))?;
    let runtime = global.runtime()?;
    let compiled = runtime
        .compile(&args.driver.display().to_string(), bytes.clone())
        .await?;
    let info = runtime.info(&compiled).await?;
    let surface = &compiled.surface;
    let component = ComponentInfo {
        exports: surface
            .exports
            .names()
            .iter()
            .map(|name| {
                format!(
                    "{}/{name}@{}",
                    wasm_ccm_runtime::PACKAGE,
                    surface.wit_version
                )
            })
            .collect(),
        imports: surface.imports.clone(),
    };
    let annotations = [
        ("org.opencontainers.image.title", info.name.clone()),
        ("org.opencontainers.image.version", info.version.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let pushed = args
        .registry
        .client()?
        .push(&reference, &bytes, component, annotations)
        .await?;
    eprintln!(
        "pushed driver {} {} ({} bytes, sha256 {}) as {}",
        info.name,
        info.version,
        bytes.len(),
        compiled.sha256,
        pushed.manifest_digest
    );
    if let Some(key) = &key {
        crate::signing::sign_oci(
            &args.registry,
            &pushed.pinned,
            key,
            &Default::default(),
            &Default::default(),
        )
        .await?;
    }
    crate::outln!("{}", pushed.pinned)?;
    Ok(ExitCode::SUCCESS)
}

/// `wasm-ccm pull`.
#[derive(Args, Debug)]
pub struct PullArgs {
    /// What to pull: `oci://REGISTRY/REPO@sha256:…` or `…:TAG`.
    reference: String,
    /// Where to write the component.
    #[arg(long, short = 'o', value_name = "FILE")]
    output: PathBuf,
    #[command(flatten)]
    registry: RegistryArgs,
    #[command(flatten)]
    verify: VerifyArgs,
}

/// Pulls a driver (through the cache), checks it is a component, writes it, and prints the
/// digest-pinned reference.
pub async fn pull(global: &GlobalArgs, args: PullArgs) -> anyhow::Result<ExitCode> {
    let source = DriverSource::parse(&args.reference)?;
    if !matches!(source, DriverSource::Oci(_)) {
        bail!(
            "{:?} is not an oci:// reference (expected oci://REGISTRY/REPO:TAG or @sha256:DIGEST)",
            args.reference
        );
    }
    // The output's directory is checked before the registry is contacted.
    crate::preflight::output_dir("--output", &args.output)?;
    args.verify.preflight(&source)?;
    let fetched = fetch_verified(global, &source, &args.registry, None, &args.verify).await?;
    wasm_ccm_runtime::check_bytes(&fetched.origin, &fetched.bytes)?;
    // Write then rename, so a failed pull never leaves half a driver where one is expected.
    let tmp = args.output.with_extension("wasm.partial");
    std::fs::write(&tmp, &fetched.bytes)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &args.output)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    eprintln!(
        "wrote {} ({} bytes, sha256 {})",
        args.output.display(),
        fetched.bytes.len(),
        hex::encode(Sha256::digest(&fetched.bytes))
    );
    crate::outln!("{}", fetched.origin)?;
    Ok(ExitCode::SUCCESS)
}
