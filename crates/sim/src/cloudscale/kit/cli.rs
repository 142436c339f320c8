//! `sim cloudscale`: the cloudscale simulator standalone ([`crate::cli`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::FromArgMatches as _;

use crate::cloudscale::{CloudscaleOptions, CloudscaleSim, Seed};
use crate::kit::{BoxFuture, SimCli, parse_duration};

/// The subcommand in the kit's list ([`crate::kit::Cloud::cli`]).
pub(super) const CLI: SimCli = SimCli {
    about: "The cloudscale.ch REST API (bearer token, JSON, `/v1/...`)",
    args: <CloudscaleArgs as clap::Args>::augment_args,
    run,
};

/// The options of `sim cloudscale`.
#[derive(Debug, clap::Args)]
struct CloudscaleArgs {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8480")]
    listen: SocketAddr,
    /// Servers and floating IPs to start with (YAML or JSON; see the README).
    #[arg(long, value_name = "FILE")]
    seed: Option<PathBuf>,
    /// The bearer token clients must send.
    #[arg(long, default_value = "sim-token")]
    token: String,
    /// How long new load balancers stay `changing`: `2s`, `500ms`, `1m` or plain seconds.
    #[arg(long, default_value = "0", value_parser = parse_duration)]
    lb_ready_after: Duration,
    /// At most MAX requests per WINDOW (e.g. `5/1s`); over it, 429 with `Retry-After` in
    /// Django REST framework's shape (cloudscale.ch documents no limit: our choice). Default:
    /// no limit.
    #[arg(long, value_name = "MAX/WINDOW", value_parser = crate::RateLimit::parse)]
    rate_limit: Option<crate::RateLimit>,
}

fn run(matches: clap::ArgMatches) -> BoxFuture<'static, anyhow::Result<()>> {
    Box::pin(async move { serve(CloudscaleArgs::from_arg_matches(&matches)?).await })
}

async fn serve(args: CloudscaleArgs) -> anyhow::Result<()> {
    // Read and check the seed before binding so a bad file fails fast with nothing started.
    let seed = match &args.seed {
        Some(path) => Seed::load_file(path)?,
        None => Seed::default(),
    };
    let (servers, fips) = (seed.servers.len(), seed.floating_ips.len());
    let options = CloudscaleOptions {
        token: args.token,
        lb_ready_after: args.lb_ready_after,
        rate_limit: args.rate_limit,
    };
    let sim = CloudscaleSim::start(args.listen, options).await?;
    sim.seed(seed).map_err(|e| anyhow::anyhow!("seed: {e}"))?;
    println!("cloudscale simulator listening on {}", sim.url());
    if servers + fips > 0 {
        println!("seeded {servers} servers and {fips} floating IPs");
    }
    println!(
        "CLOUDSCALE_API_URL={}/ CLOUDSCALE_ACCESS_TOKEN={}",
        sim.url(),
        sim.token()
    );
    tokio::signal::ctrl_c()
        .await
        .context("cannot wait for Ctrl-C")?;
    sim.shutdown().await;
    Ok(())
}
