//! A cloud's entry in the list ([`super::CLOUDS`]): its name, how to start its simulator and
//! the tools it joins. A leaf beside the list, so that the clouds can build their entries
//! without naming the list.

use super::cloud::StartFn;
use super::sim_cli::SimCli;
use super::soak::SoakStartFn;

/// A cloud in the list: its name, how to start its simulator, and the tools it joins.
pub struct Cloud {
    /// The name tools take (`--driver cloudscale`, `--cloud sim:cloudscale`, `sim cloudscale`).
    pub name: &'static str,
    /// One line about it, for help texts.
    pub about: &'static str,
    /// Starts the simulator, with no instances.
    pub start: StartFn,
    /// Starts the simulator with its fault model, for the chaos soak; None for a cloud the soak
    /// does not drive.
    pub soak: Option<SoakStartFn>,
    /// Its `sim <name>` subcommand; None for a cloud without one.
    pub cli: Option<SimCli>,
}
