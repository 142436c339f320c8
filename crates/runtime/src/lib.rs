//! The wasm-ccm host runtime: loads cloud drivers (WebAssembly components implementing
//! `wasm-ccm:provider`) into a sandbox and calls them.
//!
//! - [`Runtime`] owns the wasmtime engines (epoch interruption, pooling allocator; one per
//!   compiler tier, [`Compiler`]), the linkers with the host's imports and the on-disk compile
//!   cache.
//! - [`Runtime::compile`] checks and compiles a `.wasm` without running it; [`Runtime::load`]
//!   runs `info` and `init` and returns a [`Driver`].
//! - A [`Driver`] keeps a warm pool of initialised instances; every call has a deadline and a
//!   memory cap, and an instance that trapped, ran out of memory or hit its deadline is replaced.
//! - Drivers reach the world only through the host capabilities, one module each under
//!   `capability/` ([`http`], checked by [`egress`]; [`log`]; `cluster`); WASI is linked
//!   deny-by-default.
//!
//! - The values a driver exchanges with the host are the host model ([`model`], reachable as
//!   [`types`] and [`http`]), with serde in WIT's names; the generated bindings stay private and
//!   are converted at the boundary, one module per WIT version (`wit/`).
//!
//! The controllers, the CLI and the conformance runner all use this one crate.

mod bindings;
pub mod cache;
pub mod call;
mod capability;
pub mod config_secrets;
mod driver;
pub mod egress;
pub mod engine;
pub mod error;
pub mod info_rules;
mod lowered;
pub mod model;
pub mod result_caps;
pub mod secrets;
pub mod special_addr;
mod state;
pub mod surface;

/// TEMPORARY until the release-kit branch lands its build-script value.
pub const CONTRACT_VERSION: &str = "0.2.0";
pub mod trace;
mod wit;

pub use cache::{AotCache, CacheOutcome};
pub use model::cluster::{AddressClaim, AddressUse};
pub use model::{json, types};
// The capabilities' public modules keep the paths they had before they became units.
pub use call::{
    AddressQuery, CallScope, ClusterView, DriverEvent, EmptyCluster, EventKind, Outcome,
    SharedNodes, StaticCluster, annotation_matches, claims_of,
};
pub use capability::{http, log};
pub use driver::{
    Compiled, Driver, DriverOptions, DriverStats, InstanceMode, Runtime, RuntimeOptions,
};
pub use engine::{Allocation, Compiler, EngineOptions, Tier};
pub use error::{CallError, Described, HostError};
