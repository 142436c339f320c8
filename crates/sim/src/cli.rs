//! Running a simulator standalone, for people and scripts: the `wasm-ccm-sim` binary and
//! `wasm-ccm-dev sim`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::cloudscale::{CloudscaleOptions, CloudscaleSim, Seed};
use crate::cloudstack::{self, CidrSeparator, CloudstackOptions, CloudstackSim};
use crate::kube::{KubeSim, KubeSimOptions, load_seed_file};
use crate::phoenixnap::{self, PhoenixnapOptions, PhoenixnapSim};
use anyhow::Context as _;
use clap::Subcommand;

/// Which simulator to run, with its options.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The Kubernetes API server (plain HTTP, JSON, any credentials accepted).
    Kube(KubeArgs),
    /// The cloudscale.ch REST API (bearer token, JSON, `/v1/...`).
    Cloudscale(CloudscaleArgs),
    /// The PhoenixNAP APIs: OAuth2 token endpoint, `/bmc/v1`, `/ips/v1`, `/networks/v1`,
    /// `/tag-manager/v1` (bearer tokens, JSON).
    Phoenixnap(PhoenixnapArgs),
    /// The Apache CloudStack API: one endpoint `/client/api`, signed requests, JSON, async
    /// jobs.
    Cloudstack(CloudstackArgs),
}

/// The options of `sim cloudstack`.
#[derive(Debug, clap::Args)]
pub struct CloudstackArgs {
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
}

/// `comma` or `space`.
fn parse_separator(text: &str) -> Result<CidrSeparator, String> {
    match text {
        "comma" => Ok(CidrSeparator::Comma),
        "space" => Ok(CidrSeparator::Space),
        _ => Err(format!("{text:?}: the separator is comma or space")),
    }
}

/// The options of `sim phoenixnap`.
#[derive(Debug, clap::Args)]
pub struct PhoenixnapArgs {
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
}

/// The options of `sim cloudscale`.
#[derive(Debug, clap::Args)]
pub struct CloudscaleArgs {
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
}

/// `500ms`, `2s`, `1m`, or a plain number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 2s or 500ms"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n.saturating_mul(60))),
        _ => Err(format!("{text:?}: the unit must be ms, s or m")),
    }
}

/// The options of `sim kube`.
#[derive(Debug, clap::Args)]
pub struct KubeArgs {
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
    /// Serve HTTPS with a CA made at start; the kubeconfig written by --write-kubeconfig
    /// carries it (client-go sends bearer tokens only over TLS).
    #[arg(long)]
    tls: bool,
    /// The Kubernetes release `/version` reports (`gitVersion`; `major` and `minor` follow),
    /// e.g. `v1.35.2`, to see how clients and `wasm-ccm run` treat a server of that version.
    #[arg(
        long,
        value_name = "GITVERSION",
        default_value = crate::kube::DEFAULT_SERVER_VERSION,
        value_parser = parse_server_version
    )]
    server_version: String,
}

/// A `--server-version` the simulator can serve (refused by clap, naming the flag, otherwise).
fn parse_server_version(text: &str) -> Result<String, String> {
    crate::kube::check_server_version(text).map(|_| text.to_string())
}

/// Runs the simulator `command` names until the process is stopped.
pub async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Kube(args) => kube(args).await,
        Command::Cloudscale(args) => cloudscale(args).await,
        Command::Phoenixnap(args) => phoenixnap(args).await,
        Command::Cloudstack(args) => cloudstack(args).await,
    }
}

async fn cloudstack(args: CloudstackArgs) -> anyhow::Result<()> {
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

async fn phoenixnap(args: PhoenixnapArgs) -> anyhow::Result<()> {
    // Read and check the seed before binding so a bad file fails fast with nothing started.
    let seed = match &args.seed {
        Some(path) => phoenixnap::Seed::load_file(path)?,
        None => phoenixnap::Seed::default(),
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

async fn cloudscale(args: CloudscaleArgs) -> anyhow::Result<()> {
    // Read and check the seed before binding so a bad file fails fast with nothing started.
    let seed = match &args.seed {
        Some(path) => Seed::load_file(path)?,
        None => Seed::default(),
    };
    let (servers, fips) = (seed.servers.len(), seed.floating_ips.len());
    let options = CloudscaleOptions {
        token: args.token,
        lb_ready_after: args.lb_ready_after,
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

async fn kube(args: KubeArgs) -> anyhow::Result<()> {
    // Read the seed before binding so a bad file fails fast with nothing started.
    let objects = match &args.seed {
        Some(path) => load_seed_file(path)?,
        None => Vec::new(),
    };
    let options = KubeSimOptions {
        server_version: args.server_version,
        ..KubeSimOptions::default()
    };
    let sim = if args.tls {
        KubeSim::start_tls_with(args.listen, options).await?
    } else {
        KubeSim::start_with(args.listen, options).await?
    };
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
        // Without a kubeconfig the CA has nowhere to go; say how to get one.
        None if args.tls => {
            println!("kubeconfig: pass --write-kubeconfig FILE for one that carries the CA")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators() {
        assert_eq!(parse_separator("space"), Ok(CidrSeparator::Space));
        assert!(parse_separator("tab").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_duration("2h").is_err());
        assert!(parse_duration("s").is_err());
    }
}
