//! `wasm-ccm-sim`: run a simulator standalone, for people and scripts.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use wasm_ccm_sim::kube::{KubeSim, load_seed_file};

/// Stateful simulators of the APIs wasm-ccm talks to.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The Kubernetes API server (plain HTTP, JSON, any credentials accepted).
    Kube(KubeArgs),
}

#[derive(Debug, clap::Args)]
struct KubeArgs {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Objects to start with: YAML or JSON, one object, a `kind: List`, or `---`-separated
    /// documents.
    #[arg(long, value_name = "FILE")]
    seed: Option<PathBuf>,
    /// Also write a kubeconfig for the simulator to this file.
    #[arg(long, value_name = "FILE")]
    write_kubeconfig: Option<PathBuf>,
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
    match Cli::parse().command {
        Command::Kube(args) => kube(args).await,
    }
}

async fn kube(args: KubeArgs) -> anyhow::Result<()> {
    // Read the seed before binding so a bad file fails fast with nothing started.
    let objects = match &args.seed {
        Some(path) => load_seed_file(path)?,
        None => Vec::new(),
    };
    let sim = KubeSim::start(args.listen).await?;
    let count = objects.len();
    sim.seed(objects)?;
    println!("kube simulator listening on {}", sim.url());
    if count > 0 {
        println!("seeded {count} objects");
    }
    match &args.write_kubeconfig {
        Some(path) => {
            std::fs::write(path, sim.kubeconfig())
                .with_context(|| format!("cannot write {}", path.display()))?;
            println!(
                "kubeconfig: kubectl --kubeconfig {} --validate=false get nodes",
                path.display()
            );
        }
        None => println!(
            "kubeconfig: kubectl --server {} --validate=false get nodes",
            sim.url()
        ),
    }
    tokio::signal::ctrl_c()
        .await
        .context("cannot wait for Ctrl-C")?;
    sim.shutdown().await;
    Ok(())
}
