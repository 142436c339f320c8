//! The one list of simulated clouds, and what a developer tool needs from each: start it, seed
//! it with instances, point a driver at it, and break its instances; for the soak, its fault
//! model ([`soak`]); for `wasm-ccm-sim`/`wasm-ccm-dev sim`, its subcommand ([`SimCli`]).
//!
//! `wasm-ccm-dev playground`, `wasm-ccm-dev conformance --cloud sim:<name>`, `wasm-ccm-dev soak
//! --driver <name>` and `wasm-ccm-dev sim <name>` obtain their cloud through [`CLOUDS`] (the soak
//! through [`soak::start`], the subcommand through [`Cloud::cli`]); the end-to-end tests, the
//! runtime tests and the benches that start a simulator with their own options still take the
//! driver's wiring (environment, cloud-config, egress) from [`SimCloud::driver_setup`], so it is
//! written once, beside the simulator. The static inventory is one file, so its impl lives here
//! in `kit/static_cloud.rs`.
//!
//! Adding a cloud: its driver crate (and a line in the root `Cargo.toml`'s members and in
//! `.ci/run`'s guest clippy loop); one line in the guest table, `GUESTS` in
//! `drivers/build/build.rs` (which builds and embeds it: a build script cannot read this list);
//! its simulator module (`crates/sim/src/<cloud>/`, a `mod` line in `lib.rs`) with a `kit.rs`
//! implementing [`SimCloud`], and optionally `kit/soak.rs` implementing [`soak::SoakCloud`] and
//! `kit/cli.rs` with its [`SimCli`]; one entry in [`CLOUDS`], naming those. Nothing else in the
//! kit names a cloud.
//!
//! The types are leaves (`cloud.rs`, `entry.rs`, `sim_cli.rs`, `soak/model.rs`), re-exported
//! here: the clouds build their entries from them without naming this list, so the list and the
//! clouds form no import circle.

mod cloud;
mod entry;
mod rng;
mod sim_cli;
pub mod soak;
mod static_cloud;

pub use cloud::{BoxFuture, DriverSetup, SimCloud, SimNode, StartFn, StartOptions};
pub(crate) use cloud::{boxed, count_requests};
pub use entry::Cloud;
pub use sim_cli::SimCli;
pub(crate) use sim_cli::parse_duration;

/// Every simulated cloud. The only list: tools and tests read it.
pub const CLOUDS: &[Cloud] = &[
    static_cloud::CLOUD,
    crate::cloudscale::kit::CLOUD,
    crate::phoenixnap::kit::CLOUD,
    crate::cloudstack::kit::CLOUD,
];

/// The cloud named `name`.
pub fn cloud(name: &str) -> Option<&'static Cloud> {
    CLOUDS.iter().find(|c| c.name == name)
}

/// The names of every cloud, comma-separated (for error messages and help).
pub fn names() -> String {
    CLOUDS.iter().map(|c| c.name).collect::<Vec<_>>().join(", ")
}

/// Starts the simulator of the cloud named `name`, or says which names exist.
pub async fn start(name: &str, options: StartOptions) -> anyhow::Result<Box<dyn SimCloud>> {
    let cloud = cloud(name).ok_or_else(|| {
        anyhow::anyhow!(
            "there is no `{name}` simulated cloud; choose one of {}",
            names()
        )
    })?;
    (cloud.start)(options).await
}

/// Starts the cloud named `name` with one instance per node; the cloud and each node's
/// instance ID (in `nodes`' order).
pub async fn start_with_nodes(
    name: &str,
    options: StartOptions,
    nodes: &[SimNode],
) -> anyhow::Result<(Box<dyn SimCloud>, Vec<String>)> {
    let cloud = start(name, options).await?;
    let mut ids = Vec::with_capacity(nodes.len());
    for (index, node) in nodes.iter().enumerate() {
        let id = cloud
            .add_instance(index, node)
            .map_err(|e| anyhow::anyhow!("seeding the {name} instance {}: {e}", node.name))?;
        ids.push(id);
    }
    Ok((cloud, ids))
}

#[cfg(test)]
mod tests;
