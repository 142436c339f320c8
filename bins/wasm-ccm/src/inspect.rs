//! `wasm-ccm inspect`.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;

use crate::GlobalArgs;

/// Arguments of `wasm-ccm inspect`.
#[derive(clap::Args, Debug)]
pub struct InspectArgs {
    /// The driver's `.wasm` file.
    driver: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// `wasm-ccm inspect`: compiles the driver and prints what it is.
pub async fn run(global: &GlobalArgs, args: InspectArgs) -> anyhow::Result<ExitCode> {
    let runtime = global.one_shot_runtime()?;
    let compiled = runtime.compile_file(&args.driver).await?;
    let mut info = runtime.info(&compiled).await?;
    // Checked before anything is printed: a hostile `info` may hold megabytes.
    let verdict = wasm_ccm_runtime::info_rules::validate(&info);
    for field in [
        &mut info.name,
        &mut info.version,
        &mut info.provider_id_scheme,
    ] {
        *field = shown(field);
    }
    for list in [
        &mut info.default_egress,
        &mut info.env_prefixes,
        &mut info.annotation_prefixes,
    ] {
        list.truncate(32);
        list.iter_mut().for_each(|item| *item = shown(item));
    }
    let s = &compiled.surface;
    if args.json {
        let doc = json!({
            "file": compiled.origin,
            "sha256": compiled.sha256,
            "size": compiled.size,
            "wit-version": s.wit_version,
            "exports": s.exports.names(),
            "imports": s.imports,
            "load-time-ms": compiled.load_time.as_secs_f64() * 1000.0,
            "cache": compiled.cache,
            "info": {
                "name": info.name,
                "version": info.version,
                "provider-id-scheme": info.provider_id_scheme,
                "default-egress": info.default_egress,
                "env-prefixes": info.env_prefixes,
                "annotation-prefixes": info.annotation_prefixes,
            },
            "info-problem": verdict.as_ref().err(),
            "egress-warnings": wasm_ccm_runtime::egress::broad_grant_warnings(&info.default_egress),
        });
        crate::outln!("{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        crate::outln!("file:                {}", compiled.origin)?;
        crate::outln!("sha256:              {}", compiled.sha256)?;
        crate::outln!(
            "size:                {} bytes ({:.1} KiB)",
            compiled.size,
            compiled.size as f64 / 1024.0
        )?;
        crate::outln!("wit:                 wasm-ccm:provider@{}", s.wit_version)?;
        crate::outln!("exports:             {}", s.exports.names().join(", "))?;
        crate::outln!("imports:             {}", s.imports.join(", "))?;
        crate::outln!(
            "load:                {:.1} ms ({})",
            compiled.load_time.as_secs_f64() * 1000.0,
            format!("cache {:?}", compiled.cache).to_lowercase()
        )?;
        crate::outln!("name:                {}", info.name)?;
        crate::outln!("version:             {}", info.version)?;
        crate::outln!("provider-id scheme:  {}://", info.provider_id_scheme)?;
        crate::outln!(
            "default egress:      {}",
            if info.default_egress.is_empty() {
                "(none)".to_string()
            } else {
                info.default_egress.join(", ")
            }
        )?;
        crate::outln!(
            "env prefixes:        {}",
            if info.env_prefixes.is_empty() {
                "(none)".to_string()
            } else {
                info.env_prefixes.join(", ")
            }
        )?;
        crate::outln!(
            "annotation prefixes: {}",
            if info.annotation_prefixes.is_empty() {
                "(none)".to_string()
            } else {
                info.annotation_prefixes.join(", ")
            }
        )?;
        for warning in wasm_ccm_runtime::egress::broad_grant_warnings(&info.default_egress) {
            crate::outln!("warning:             default egress: {warning}")?;
        }
        match &verdict {
            Ok(()) => crate::outln!("info:                valid")?,
            Err(e) => {
                crate::outln!("info:                INVALID, the host will not load it: {e}")?
            }
        }
    }
    // A driver the host refuses to load is not fit to ship: fail scripts that inspect it.
    Ok(if verdict.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// At most 128 characters of a driver-supplied string, escaped when it has control characters.
fn shown(value: &str) -> String {
    let head: String = value.chars().take(128).collect();
    let head = if head.chars().any(char::is_control) {
        format!("{head:?}")
    } else {
        head
    };
    if head.len() < value.len() {
        format!("{head}… ({} bytes)", value.len())
    } else {
        head
    }
}
