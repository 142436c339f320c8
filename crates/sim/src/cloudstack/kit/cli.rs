//! `sim cloudstack`: the CloudStack simulator standalone ([`crate::cli`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::FromArgMatches as _;

use crate::cloudstack::{self, CidrSeparator, CloudstackOptions, CloudstackSim};
use crate::kit::{BoxFuture, SimCli, parse_duration};

/// The subcommand in the kit's list ([`crate::kit::Cloud::cli`]).
pub(super) const CLI: SimCli = SimCli {
    about: "The Apache CloudStack API: one endpoint `/client/api`, signed requests, JSON, async \
            jobs",
    args: <CloudstackArgs as clap::Args>::augment_args,
    run,
};

/// The options of `sim cloudstack`.
#[derive(Debug, clap::Args)]
struct CloudstackArgs {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8482")]
    listen: SocketAddr,
    /// Zones, projects, VPCs, ACL lists, networks, public IPs and VMs to start with (YAML or
    /// JSON; see the README). Default: the example account of `seeds/cloudstack.yaml`.
    #[arg(long, value_name = "FILE")]
    seed: Option<PathBuf>,
    /// Start without any state instead of the example account.
    #[arg(long, conflicts_with = "seed")]
    empty: bool,
    /// The API key requests must carry.
    #[arg(long, value_name = "KEY", default_value = "sim-api-key")]
    api_key: String,
    /// The secret key requests are signed with.
    #[arg(long, value_name = "KEY", default_value = "sim-secret-key")]
    secret_key: String,
    /// Make the account a root admin (`listManagementServersMetrics`, VM `hostname`).
    #[arg(long)]
    admin: bool,
    /// `queryAsyncJobResult` polls until a job completes (0: before the command answers).
    #[arg(long, value_name = "N", default_value_t = 1)]
    job_polls: u32,
    /// Jobs complete after this long instead (`2s`, `500ms`, `1m` or plain seconds).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    job_duration: Option<Duration>,
    /// How load-balancer rules render `cidrlist`: `comma` or `space`.
    #[arg(long, value_name = "SEP", default_value = "comma", value_parser = parse_separator)]
    cidr_separator: CidrSeparator,
    /// CloudStack's API throttling: at most MAX requests per WINDOW (`api.throttling.max` per
    /// `api.throttling.interval`, e.g. `25/1s`), answered 429 as CloudStack does; root admins
    /// (--admin) are exempt, as in CloudStack. Default: no limit.
    #[arg(long, value_name = "MAX/WINDOW", value_parser = crate::RateLimit::parse)]
    rate_limit: Option<crate::RateLimit>,
}

/// `comma` or `space`.
fn parse_separator(text: &str) -> Result<CidrSeparator, String> {
    match text {
        "comma" => Ok(CidrSeparator::Comma),
        "space" => Ok(CidrSeparator::Space),
        _ => Err(format!("{text:?}: the separator is comma or space")),
    }
}

fn run(matches: clap::ArgMatches) -> BoxFuture<'static, anyhow::Result<()>> {
    Box::pin(async move { serve(CloudstackArgs::from_arg_matches(&matches)?).await })
}

async fn serve(args: CloudstackArgs) -> anyhow::Result<()> {
    // Read and check the seed before binding so a bad file fails fast with nothing started.
    let seed = match (&args.seed, args.empty) {
        (Some(path), _) => cloudstack::Seed::load_file(path)?,
        (None, true) => cloudstack::Seed::default(),
        (None, false) => cloudstack::Seed::example(),
    };
    let counts = [
        (seed.zones.len(), "zones"),
        (seed.projects.len(), "projects"),
        (seed.vpcs.len(), "VPCs"),
        (seed.networks.len(), "networks"),
        (seed.vms.len(), "VMs"),
        (seed.public_ips.len(), "allocated public IPs"),
    ];
    let options = CloudstackOptions {
        api_key: args.api_key,
        secret_key: args.secret_key,
        admin: args.admin,
        job_polls: args.job_polls,
        job_duration: args.job_duration,
        cidr_separator: args.cidr_separator,
        rate_limit: args.rate_limit,
        ..CloudstackOptions::default()
    };
    let sim = CloudstackSim::start_on(args.listen, options).await?;
    sim.seed(seed).map_err(|e| anyhow::anyhow!("seed: {e}"))?;
    println!("cloudstack simulator listening on {}", sim.url());
    let seeded: Vec<String> = counts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    if !seeded.is_empty() {
        println!("seeded {}", seeded.join(", "));
    }
    let free = sim
        .public_ips()
        .iter()
        .filter(|ip| ip["state"] == "Free")
        .count();
    println!(
        "{free} free public IPs; control API under {}/sim",
        sim.base_url()
    );
    println!("cloud-config:");
    println!("[Global]");
    println!("api-url = {}", sim.url());
    println!("api-key = {}", sim.api_key());
    println!("secret-key = {}", sim.secret_key());
    tokio::signal::ctrl_c()
        .await
        .context("cannot wait for Ctrl-C")?;
    sim.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators() {
        assert_eq!(parse_separator("space"), Ok(CidrSeparator::Space));
        assert!(parse_separator("tab").is_err());
    }
}
