//! `wasm-ccm run`: the cloud-controller-manager, with upstream's flag names and defaults.
//!
//! One path, whatever the drivers: the flags become a DriverSet (`args.rs`, `checks.rs`: one
//! driver for `--driver`, or the `--drivers-config` file's), every flag and file is checked,
//! every driver is fetched, verified, compiled and checked against the set before the cluster
//! is contacted (`load.rs`), the cluster's facts are read (`facts.rs`), the drivers are
//! initialised, and the controllers start over them (`start.rs`). Shadow mode, signatures,
//! credentials, hot reload and traces are features of that path, so both forms have them.

mod args;
mod checks;
mod facts;
mod feature_gates;
mod load;
mod start;

use std::process::ExitCode;

use anyhow::bail;

use crate::GlobalArgs;

pub use args::RunArgs;
pub use facts::{ClusterFacts, announce_kubernetes_version, cluster_facts, cluster_facts_within};
pub use load::{DriverSpec, driver_options, load_driver_bytes, warn_about_credentials};

/// Runs the controller manager.
pub async fn run(global: &GlobalArgs, args: RunArgs) -> anyhow::Result<ExitCode> {
    if args.leader_elect_resource_lock != "leases" {
        bail!(
            "--leader-elect-resource-lock={:?} is not supported: only `leases` is",
            args.leader_elect_resource_lock
        );
    }
    let config = args.controller_config()?;
    let controllers = args.enabled_controllers()?;
    let lease_name = args.lease_name()?;
    let set = args.driver_set()?;
    args.preflight(global, &set)?;
    set.preflight(&args.verify)?;
    args.warn_about_ignored_flags();
    // The serving certificate next: a bad file is a startup error before anything else runs.
    let tls = args.serving_tls()?;
    if args.shadow {
        tracing::info!(
            grace = ?args.shadow_grace,
            validate = %args.shadow_validate,
            "shadow mode: nothing is written to Kubernetes or the cloud; the report is at /shadow"
        );
    }
    // Every driver is read or pulled, its signature verified, compiled and checked against the
    // set before the cluster is contacted: a refused driver never compiles, and the API server
    // never sees its process.
    // One runtime (one engine) compiles and instantiates every driver.
    let runtime = global.runtime()?;
    let (checked, routing) = load::check(global, &runtime, &args, &set).await?;
    let kube = start::kube_config(args.kubeconfig.as_deref(), args.master.as_deref()).await?;
    let client = start::client_from(kube.clone())?;
    let serving = match tls {
        Some(tls) => Some(args.serving(tls).await?),
        None => None,
    };
    let facts = cluster_facts(&client).await?;
    announce_kubernetes_version(&facts.kubernetes_version);
    let loaded = load::load(&runtime, &args, &set, checked, routing, &facts).await?;
    if !set.is_flags() {
        tracing::info!(
            drivers = %loaded.routing.drivers().iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", "),
            "several drivers: nodes by owner, load balancers by class"
        );
    }
    start::start(
        &args,
        &kube,
        client,
        serving,
        loaded,
        config,
        controllers,
        lease_name,
        facts.kubernetes_version,
    )
    .await
}
