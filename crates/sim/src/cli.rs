//! Running a simulator standalone, for people and scripts: the `wasm-ccm-sim` binary and
//! `wasm-ccm-dev sim`.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::kit::{self, CLOUDS};
use crate::kube::{KubeSim, KubeSimOptions, PortRange, load_seed_file};
use anyhow::Context as _;
use clap::error::ErrorKind;
use clap::{ArgMatches, Args as _, FromArgMatches};

/// The subcommand of the Kubernetes simulator (the clouds' are their names in the kit's list).
const KUBE: &str = "kube";

/// Which simulator to run, with its options: `kube`, or a cloud of the kit's list whose entry
/// has a [`kit::SimCli`] (its subcommand is the cloud's name; its options are its own).
#[derive(Debug)]
pub enum Command {
    /// The Kubernetes API server (plain HTTP, JSON, any credentials accepted).
    Kube(KubeArgs),
    /// A cloud's API, as the cloud's [`kit::SimCli`] parsed it.
    Cloud {
        /// The cloud's name in [`CLOUDS`].
        name: &'static str,
        /// Its subcommand's arguments, read by the cloud's [`kit::SimCli::run`].
        matches: ArgMatches,
    },
}

/// The clouds with a `sim` subcommand, in the list's order.
fn cli_clouds() -> impl Iterator<Item = (&'static kit::Cloud, &'static kit::SimCli)> {
    CLOUDS
        .iter()
        .filter_map(|c| c.cli.as_ref().map(|cli| (c, cli)))
}

impl FromArgMatches for Command {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        match matches.subcommand() {
            Some((KUBE, sub)) => Ok(Command::Kube(KubeArgs::from_arg_matches(sub)?)),
            Some((name, sub)) => match cli_clouds().find(|(c, _)| c.name == name) {
                Some((cloud, _)) => Ok(Command::Cloud {
                    name: cloud.name,
                    matches: sub.clone(),
                }),
                None => Err(clap::Error::raw(
                    ErrorKind::InvalidSubcommand,
                    format!(
                        "there is no `{name}` simulator; choose kube or a cloud of the kit's list\n"
                    ),
                )),
            },
            None => Err(clap::Error::raw(
                ErrorKind::MissingSubcommand,
                "name the simulator to run: kube or a cloud of the kit's list\n",
            )),
        }
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Command::from_arg_matches(matches)?;
        Ok(())
    }
}

impl clap::Subcommand for Command {
    fn augment_subcommands(command: clap::Command) -> clap::Command {
        let kube = KubeArgs::augment_args(clap::Command::new(KUBE))
            .about("The Kubernetes API server (plain HTTP, JSON, any credentials accepted)");
        cli_clouds().fold(command.subcommand(kube), |command, (cloud, cli)| {
            command.subcommand((cli.args)(clap::Command::new(cloud.name)).about(cli.about))
        })
    }

    fn augment_subcommands_for_update(command: clap::Command) -> clap::Command {
        Command::augment_subcommands(command)
    }

    fn has_subcommand(name: &str) -> bool {
        name == KUBE || cli_clouds().any(|(c, _)| c.name == name)
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
    /// The range Services' node ports come from, as kube-apiserver's flag of that name:
    /// `BASE-END` (inclusive), `BASE+OFFSET` or one port. More LoadBalancer Services than the
    /// range has ports need a wider range or `spec.allocateLoadBalancerNodePorts: false`.
    #[arg(long, value_name = "RANGE", default_value_t = PortRange::DEFAULT)]
    service_node_port_range: PortRange,
}

/// A `--server-version` the simulator can serve (refused by clap, naming the flag, otherwise).
fn parse_server_version(text: &str) -> Result<String, String> {
    crate::kube::check_server_version(text).map(|_| text.to_string())
}

/// Runs the simulator `command` names until the process is stopped.
pub async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Kube(args) => kube(args).await,
        Command::Cloud { name, matches } => match cli_clouds().find(|(c, _)| c.name == name) {
            Some((_, cli)) => (cli.run)(matches).await,
            None => anyhow::bail!("there is no `{name}` simulator in the kit's list"),
        },
    }
}

async fn kube(args: KubeArgs) -> anyhow::Result<()> {
    // Read the seed before binding so a bad file fails fast with nothing started.
    let objects = match &args.seed {
        Some(path) => load_seed_file(path)?,
        None => Vec::new(),
    };
    let options = KubeSimOptions {
        server_version: args.server_version,
        service_node_port_range: args.service_node_port_range,
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

    /// The binaries' shape: `<bin> <simulator> [options]`.
    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(subcommand)]
        command: Command,
    }

    fn parse(args: &[&str]) -> Result<Command, clap::Error> {
        use clap::Parser as _;
        Cli::try_parse_from(std::iter::once("wasm-ccm-sim").chain(args.iter().copied()))
            .map(|cli| cli.command)
    }

    #[test]
    fn each_cloud_with_a_subcommand_parses_its_own_options() {
        // Written here, not taken from the list under test; a new cloud may join them.
        let with_cli: Vec<&str> = cli_clouds().map(|(c, _)| c.name).collect();
        assert_eq!(
            with_cli.get(..3),
            Some(&["cloudscale", "phoenixnap", "cloudstack"][..])
        );
        for (args, cloud, option, value) in [
            (
                &["cloudscale", "--token", "t"][..],
                "cloudscale",
                "token",
                "t",
            ),
            (
                &["phoenixnap", "--client-id", "c"][..],
                "phoenixnap",
                "client_id",
                "c",
            ),
            (
                &["cloudstack", "--api-key", "k"][..],
                "cloudstack",
                "api_key",
                "k",
            ),
        ] {
            match parse(args) {
                Ok(Command::Cloud { name, matches }) => {
                    assert_eq!(name, cloud);
                    assert_eq!(
                        matches.get_one::<String>(option).map(String::as_str),
                        Some(value),
                        "{args:?}"
                    );
                }
                other => panic!("{args:?}: {other:?}"),
            }
        }
        // One cloud's option is not another's.
        let err = parse(&["cloudscale", "--api-key", "k"]).expect_err("not a cloudscale option");
        assert_eq!(err.kind(), ErrorKind::UnknownArgument, "{err}");
        assert!(matches!(
            parse(&["kube", "--tls"]),
            Ok(Command::Kube(KubeArgs { tls: true, .. }))
        ));
    }

    #[test]
    fn a_cloud_without_a_subcommand_and_an_unknown_name_are_refused() {
        // The static inventory is in the list but has no `sim` subcommand.
        assert!(crate::kit::cloud("static").is_some_and(|c| c.cli.is_none()));
        for name in ["static", "aws"] {
            let err = parse(&[name]).expect_err(name);
            assert_eq!(err.kind(), ErrorKind::InvalidSubcommand, "{name}: {err}");
        }
        // The control: a listed cloud with a subcommand is accepted.
        assert!(parse(&["cloudstack"]).is_ok());
    }
}
