//! `wasm-ccm shadow report`: renders what a shadow run (`wasm-ccm run --shadow`) would have
//! written, from its `/shadow` endpoint or a saved copy. The exit code is the verdict, so a
//! pipeline can gate the switch from the upstream CCM on it: 0 when nothing diverged, 1 when
//! something did (2 for an error, as every command).

use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use wasm_ccm_controllers::ShadowReport;

/// `wasm-ccm shadow`.
#[derive(Args, Debug)]
pub struct ShadowArgs {
    #[command(subcommand)]
    command: ShadowCommand,
}

#[derive(Subcommand, Debug)]
enum ShadowCommand {
    /// Show a shadow run's report: every would-be write, diverged first. Exits 0 when nothing
    /// diverged, 1 when something did.
    Report(ReportArgs),
}

/// `wasm-ccm shadow report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Where the report is: a file saved from `/shadow`, `-` for standard input, or the
    /// `https://…/shadow` URL of a shadow's serving port.
    #[arg(long)]
    from: String,
    /// `text` (a plan for people) or `json` (the endpoint's own format).
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    format: String,
    /// A file holding the bearer token sent to the URL (a ServiceAccount token allowed `get` on
    /// the non-resource URL `/shadow`).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// The CA that signed the shadow's serving certificate (PEM).
    #[arg(long)]
    ca_file: Option<PathBuf>,
    /// Accept any serving certificate (a port-forward to a self-signed pod certificate).
    #[arg(long)]
    insecure_skip_tls_verify: bool,
}

/// The largest report read (a report of 20,000 objects is a few MiB).
const MAX_REPORT_BYTES: usize = 64 << 20;

/// Runs `wasm-ccm shadow …`.
pub async fn run(args: ShadowArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ShadowCommand::Report(args) => report(args).await,
    }
}

async fn report(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let bytes = if args.from.starts_with("https://") || args.from.starts_with("http://") {
        fetch(&args).await?
    } else {
        if args.token_file.is_some() || args.ca_file.is_some() || args.insecure_skip_tls_verify {
            bail!(
                "--token-file, --ca-file and --insecure-skip-tls-verify apply to a URL, but --from {:?} is a file; drop them or give the https:// URL of /shadow",
                args.from
            );
        }
        read_local(&args.from)?
    };
    let report: ShadowReport = serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "{} is not a shadow report (the JSON of a shadow's /shadow endpoint); is it the right URL or file?",
            args.from
        )
    })?;
    let rendered = match args.format.as_str() {
        "json" => serde_json::to_string_pretty(&report)?,
        _ => report.to_text(),
    };
    crate::outln!("{}", rendered.trim_end())?;
    Ok(if report.agrees() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn read_local(from: &str) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let read = if from == "-" {
        std::io::stdin()
            .take(MAX_REPORT_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .context("cannot read the report from standard input")?
    } else {
        std::fs::File::open(from)
            .with_context(|| format!("cannot open the report file {from}"))?
            .take(MAX_REPORT_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .with_context(|| format!("cannot read the report file {from}"))?
    };
    if read > MAX_REPORT_BYTES {
        bail!("{from} is larger than {MAX_REPORT_BYTES} bytes: not a shadow report");
    }
    Ok(bytes)
}

async fn fetch(args: &ReportArgs) -> anyhow::Result<Vec<u8>> {
    let mut client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none());
    if let Some(ca) = &args.ca_file {
        let pem =
            std::fs::read(ca).with_context(|| format!("cannot read --ca-file {}", ca.display()))?;
        let cert = reqwest::Certificate::from_pem(&pem)
            .with_context(|| format!("--ca-file {} is not a PEM certificate", ca.display()))?;
        client = client.add_root_certificate(cert);
    }
    if args.insecure_skip_tls_verify {
        client = client.danger_accept_invalid_certs(true);
    }
    let client = client
        .build()
        .context("cannot set up the HTTPS client for --from")?;
    let mut request = client.get(&args.from);
    if let Some(file) = &args.token_file {
        let token = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read --token-file {}", file.display()))?;
        request = request.bearer_auth(token.trim());
    }
    let response = request.send().await.with_context(|| {
        format!(
            "cannot reach {}: is the shadow running with --secure-port, and is the port forwarded?",
            args.from
        )
    })?;
    let status = response.status();
    let mut body = Vec::new();
    let mut response = response;
    while let Some(chunk) = response
        .chunk()
        .await
        .with_context(|| format!("the answer of {} broke off", args.from))?
    {
        if body.len() + chunk.len() > MAX_REPORT_BYTES {
            bail!(
                "the answer of {} is larger than {MAX_REPORT_BYTES} bytes: not a shadow report",
                args.from
            );
        }
        body.extend_from_slice(&chunk);
    }
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body);
        let excerpt: String = text.chars().take(300).collect();
        let hint = match status.as_u16() {
            401 => " (pass --token-file with a token the apiserver accepts)",
            403 => " (the token's identity needs `get` on the non-resource URL /shadow)",
            404 => " (the process does not run with --shadow)",
            _ => "",
        };
        bail!("{} answered {status}{hint}: {}", args.from, excerpt.trim());
    }
    Ok(body)
}
