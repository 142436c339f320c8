//! The cloud-controller loops of wasm-ccm on kube-rs, with upstream's semantics
//! (`k8s.io/cloud-provider`), delegating every cloud decision to a WebAssembly driver.
//!
//! - `node`: initialises nodes registered with the uninitialized taint, refreshes addresses.
//! - `lifecycle`: deletes nodes whose instance is gone, taints shut-down ones.
//! - `service`: load balancers for Services of type LoadBalancer, with the cleanup finalizer.
//! - `route`: cloud routes for node pod CIDRs and the `NetworkUnavailable` condition.
//! - `routing`: several drivers in one process: nodes by owner, load balancers by class.
//!
//! The process around the loops (leader election, serving, hot reload, the version policy, the
//! User-Agent) is the `wasm-ccm-manager` crate's, which the product uses and the playground
//! need not link.
//!
//! Each controller is one folder under `controllers/`: its loop (`mod.rs`), the pure rules it
//! follows (`rules.rs`) and upstream's test tables (`upstream.rs`); what every controller runs
//! on (informer, work queue, runner, errors, the token bucket) is in `machinery/`, and the one
//! list of controllers is `registry.rs`. `answer_rules` holds what a driver's answer may put
//! into Kubernetes (every answer is checked there before anything is written).
//!
//! The public surface is what the manager and the developer tools need: [`start_driver_set`]
//! and [`start_controllers`] (the loops) with their settings and the [`Running`] handles,
//! [`DriverSlot`] (the driver in service, which a reload swaps), [`Events`] (the event
//! recorders), [`Metrics`] and the shadow run's options and report ([`ShadowOptions`],
//! [`ShadowReport`], whose parts are in [`shadow`]). Everything else is internal.

mod answer_rules;
mod backends;
mod clients;
mod cloud;
mod cluster_view;
mod config;
mod controllers;
mod convert;
mod ctx;
mod events;
mod kube;
mod machinery;
mod metrics;
mod ownership;
mod registry;
mod routing;
mod run;
pub mod shadow;

pub use clients::{CONTROLLER_ACCOUNTS, ControllerClients, account_of};
pub use cloud::DriverSlot;
pub use cloud::listing::{ListingIndex, PageRules};
pub use config::ControllerConfig;
pub use events::Events;
pub use metrics::Metrics;
pub use registry::EnabledControllers;
pub use routing::{DriverRoles, LoadBalancerClaim, NodeClaim, Routing};
pub use run::{Running, RunningView, start_controllers, start_driver_set};
pub use shadow::{ShadowOptions, ShadowReport};

#[cfg(test)]
mod test_support;
