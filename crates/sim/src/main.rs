//! `wasm-ccm-sim`: run a simulator standalone, for people and scripts (also `wasm-ccm-dev sim`).

use clap::Parser;

/// Stateful simulators of the APIs wasm-ccm talks to.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: wasm_ccm_sim::cli::Command,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    wasm_ccm_sim::cli::run(Cli::parse().command).await
}
