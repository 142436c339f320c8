//! `sim phoenixnap`: the PhoenixNAP simulator standalone ([`crate::cli`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::FromArgMatches as _;

use crate::kit::{BoxFuture, SimCli, parse_duration};
use crate::phoenixnap::{PhoenixnapOptions, PhoenixnapSim, Seed};

/// The subcommand in the kit's list ([`crate::kit::Cloud::cli`]).
pub(super) const CLI: SimCli = SimCli {
    about: "The PhoenixNAP APIs: OAuth2 token endpoint, `/bmc/v1`, `/ips/v1`, `/networks/v1`, \
            `/tag-manager/v1` (bearer tokens, JSON)",
    args: <PhoenixnapArgs as clap::Args>::augment_args,
    run,
};

/// The options of `sim phoenixnap`.
#[derive(Debug, clap::Args)]
struct PhoenixnapArgs {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8481")]
    listen: SocketAddr,
    /// Tags, servers, public networks and IP blocks to start with (YAML or JSON; see the
    /// README).
    #[arg(long, value_name = "FILE")]
    seed: Option<PathBuf>,
    /// The OAuth2 client ID the token endpoint accepts.
    #[arg(long, value_name = "ID", default_value = "sim-client")]
    client_id: String,
    /// The OAuth2 client secret the token endpoint accepts.
    #[arg(long, value_name = "SECRET", default_value = "sim-secret")]
    client_secret: String,
    /// How long issued tokens are valid: `2s`, `500ms`, `1m` or plain seconds.
    #[arg(long, default_value = "3600", value_parser = parse_duration)]
    token_ttl: Duration,
    /// How long IP block assignment and unassignment take: `2s`, `500ms`, `1m` or plain
    /// seconds.
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_duration)]
    assign_after: Duration,
    /// At most MAX requests per WINDOW (e.g. `5/1s`), the token endpoint's too; over it, 429
    /// with `Retry-After` (phoenixNAP documents no limit: our choice). Default: no limit.
    #[arg(long, value_name = "MAX/WINDOW", value_parser = crate::RateLimit::parse)]
    rate_limit: Option<crate::RateLimit>,
}

fn run(matches: clap::ArgMatches) -> BoxFuture<'static, anyhow::Result<()>> {
    Box::pin(async move { serve(PhoenixnapArgs::from_arg_matches(&matches)?).await })
}

async fn serve(args: PhoenixnapArgs) -> anyhow::Result<()> {
    // Read and check the seed before binding so a bad file fails fast with nothing started.
    let seed = match &args.seed {
        Some(path) => Seed::load_file(path)?,
        None => Seed::default(),
    };
    let counts = [
        (seed.tags.len(), "tags"),
        (seed.servers.len(), "servers"),
        (seed.public_networks.len(), "public networks"),
        (seed.ip_blocks.len(), "IP blocks"),
    ];
    let options = PhoenixnapOptions {
        client_id: args.client_id,
        client_secret: args.client_secret,
        token_ttl: args.token_ttl,
        assign_after: args.assign_after,
        rate_limit: args.rate_limit,
    };
    let sim = PhoenixnapSim::start(args.listen, options).await?;
    sim.seed(seed).map_err(|e| anyhow::anyhow!("seed: {e}"))?;
    println!("phoenixnap simulator listening on {}", sim.url());
    println!("token URL: {}", sim.token_url());
    let seeded: Vec<String> = counts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    if !seeded.is_empty() {
        println!("seeded {}", seeded.join(", "));
    }
    for network in sim.public_networks() {
        println!(
            "public network {} ({}, VLAN {}): loadbalancer kube-vip://{}",
            network["name"].as_str().unwrap_or(""),
            network["location"].as_str().unwrap_or(""),
            network["vlanId"],
            network["id"].as_str().unwrap_or(""),
        );
    }
    println!(
        "PNAP_CLIENT_ID={} PNAP_CLIENT_SECRET={}",
        sim.client_id(),
        sim.client_secret()
    );
    tokio::signal::ctrl_c()
        .await
        .context("cannot wait for Ctrl-C")?;
    sim.shutdown().await;
    Ok(())
}
