//! `wasm-ccm-dev`: the developer kit beside the product binary `wasm-ccm`. Everything a driver
//! author and a contributor use: the playground, conformance, `call`, the cloud simulators,
//! the chaos soak and `new` (a driver project to start from). The shipped drivers are embedded (bytes, not paths), so the playground works
//! from an installed binary in any directory.

mod call;
mod cassette;
mod children;
mod clouds;
mod conformance;
mod new;
mod playground;
mod scale;
mod soak;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use wasm_ccm::{GlobalArgs, block_on_command, init_logging};

/// wasm-ccm's developer kit: try, check and stress cloud drivers against simulated clouds.
#[derive(Parser, Debug)]
#[command(name = "wasm-ccm-dev", version, about, propagate_version = true)]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Start a simulated cluster and cloud in process, run the real controllers with a real
    /// driver against them, and show what happens.
    Playground(playground::PlaygroundArgs),
    /// Check that a driver keeps the contract: static checks, behaviour against a cloud
    /// (simulator, URL or cassette) from a scenario file, robustness under injected faults.
    Conformance(conformance::ConformanceArgs),
    /// Call one driver function with JSON arguments (after init) and print the JSON result.
    Call(call::CallArgs),
    /// Run one simulator standalone (the Kubernetes API or a cloud's API) until stopped.
    #[command(subcommand)]
    Sim(wasm_ccm_sim::cli::Command),
    /// A chaos soak with invariants: simulators, two `wasm-ccm run` processes with leader
    /// election, a seeded schedule of workload operations and faults; exits 1 on a violation.
    Soak(soak::SoakArgs),
    /// Measure the controllers at a cluster's size: the Kubernetes API simulator in its own
    /// process, `wasm-ccm run` with the static driver; time to converge, peak RSS, driver calls,
    /// bytes lowered into guests, Kubernetes requests, writes in a quiet period.
    Scale(scale::ScaleArgs),
    /// Generate a driver project (Rust, Python or JavaScript) that builds with one command and
    /// passes conformance as generated, with its scenario and a CI workflow.
    New(new::NewArgs),
}

fn main() -> ExitCode {
    // `--version` names the driver contract too, as the product's does.
    let cli: Cli = wasm_ccm::version::parse();
    init_logging(&cli.global);
    block_on_command("wasm-ccm-dev", async {
        match cli.command {
            Command::Playground(args) => playground::run(&cli.global, args).await,
            Command::Conformance(args) => conformance::run(&cli.global, args).await,
            Command::Call(args) => call::run(&cli.global, args).await,
            Command::Sim(command) => {
                wasm_ccm_sim::cli::run(command).await?;
                Ok(ExitCode::SUCCESS)
            }
            Command::Soak(args) => soak::run(&cli.global, args).await,
            Command::Scale(args) => scale::run(&cli.global, args).await,
            Command::New(args) => new::run(args),
        }
    })
}
