//! The wasm-ccm host runtime: loads cloud drivers (WebAssembly components implementing
//! `wasm-ccm:provider`) into a sandbox and calls them.
//!
//! - [`Runtime`] owns the one wasmtime engine (epoch interruption, pooling allocator), the
//!   linker with the host's imports and the on-disk compile cache.
//! - [`Runtime::compile`] checks and compiles a `.wasm` without running it; [`Runtime::load`]
//!   runs `info` and `init` and returns a [`Driver`].
//! - A [`Driver`] keeps a warm pool of initialised instances; every call has a deadline and a
//!   memory cap, and an instance that trapped, ran out of memory or hit its deadline is replaced.
//! - Drivers reach the world only through the `http` import ([`http`], checked by [`egress`]) and
//!   `log` ([`log`]); WASI is linked deny-by-default.
//!
//! The controllers, the CLI and the conformance runner all use this one crate.

pub mod bindings;
pub mod cache;
pub mod call;
pub mod config_secrets;
mod driver;
pub mod egress;
pub mod engine;
pub mod error;
pub mod http;
pub mod info_rules;
pub mod json;
pub mod log;
mod lowered;
pub mod result_caps;
pub mod special_addr;
mod state;
pub mod surface;

pub use bindings::cluster::{AddressClaim, AddressUse};
pub use bindings::types;
pub use cache::{AotCache, CacheOutcome};
pub use call::{
    AddressQuery, CallScope, ClusterView, DriverEvent, EmptyCluster, EventKind, Outcome,
    SharedNodes, StaticCluster, annotation_matches, claims_of,
};
pub use driver::{
    Compiled, Driver, DriverOptions, DriverStats, InstanceMode, Runtime, RuntimeOptions,
};
pub use engine::{Allocation, EngineOptions};
pub use error::{CallError, Described, HostError};
