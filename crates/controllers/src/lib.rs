//! The cloud-controller loops of wasm-ccm on kube-rs, with upstream's semantics
//! (`k8s.io/cloud-provider`), delegating every cloud decision to a WebAssembly driver.
//!
//! - `node`: initialises nodes registered with the uninitialized taint, refreshes addresses.
//! - `lifecycle`: deletes nodes whose instance is gone, taints shut-down ones.
//! - `service`: load balancers for Services of type LoadBalancer, with the cleanup finalizer.
//! - `route`: cloud routes for node pod CIDRs and the `NetworkUnavailable` condition.
//! - `leader`: client-go-compatible leader election; [`server`]: health and metrics over HTTPS
//!   with delegated authentication and authorization, as upstream serves them.
//! - `routing`: several drivers in one process: nodes by owner, load balancers by class.
//! - `reload`: hot reload of a file-mounted driver, swapped only after it loaded and passed
//!   `info`/`init`.
//!
//! Each controller is one folder under `controllers/`: its loop (`mod.rs`), the pure rules it
//! follows (`rules.rs`) and upstream's test tables (`upstream.rs`); what every controller runs
//! on (informer, work queue, runner, errors, the token bucket) is in `machinery/`, and the one
//! list of controllers is `registry.rs`. `answer_rules` holds what a driver's answer may put
//! into Kubernetes (every answer is checked there before anything is written).
//!
//! The public surface is what `wasm-ccm run` and the developer tools need: [`run`] (the whole
//! controller manager) or [`start_controllers`] (the loops alone, for the playground), their
//! settings, [`metrics::Metrics`], the serving options in [`server`], the Kubernetes client's
//! [`user_agent`] and the supported Kubernetes versions ([`kubernetes_version`]). Everything
//! else is internal.

mod answer_rules;
mod backends;
mod cloud;
mod cluster_view;
mod config;
mod controllers;
mod convert;
mod ctx;
mod events;
mod kube;
pub mod kubernetes_version;
mod leader;
mod machinery;
pub mod metrics;
mod ownership;
mod registry;
mod reload;
mod routing;
mod run;
pub mod server;
pub mod shadow;
pub mod user_agent;

pub use cloud::DriverSlot;
pub use config::ControllerConfig;
pub use leader::{LeaderConfig, default_identity};
pub use registry::EnabledControllers;
pub use reload::{Loader, Refusal, ReloadOptions};
pub use routing::{DriverRoles, LoadBalancerClaim, NodeClaim, Routing};
pub use run::{DriverEntry, Exit, RunOptions, Running, run, start_controllers, start_driver_set};

#[cfg(test)]
mod test_support;
