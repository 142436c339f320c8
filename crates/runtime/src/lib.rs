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
mod cache;
mod call;
mod capability;
mod config_secrets;
mod driver;
pub mod egress;
mod engine;
pub mod error;
pub mod info_rules;
mod lowered;
pub mod model;
pub mod plain_env;
mod result_caps;
pub mod secrets;
pub mod special_addr;
mod state;
pub mod surface;
mod text;
mod token_bucket;
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
    Compiled, Declarations, Driver, DriverOptions, DriverStats, InitInput, InstanceMode,
    PoolOptions, Runtime, RuntimeOptions,
};
pub use engine::{Allocation, Compiler, EngineOptions, Tier};
pub use error::{CallError, Described, HostError};

pub use surface::CONTRACT_VERSION;
pub use token_bucket::TokenBucket;

#[cfg(test)]
mod tests {
    use super::CONTRACT_VERSION;

    /// The package version in `wit/provider.wit`, read here independently of the build script.
    fn wit_package_version() -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../wit/provider.wit");
        let text = std::fs::read_to_string(path).expect("read wit/provider.wit");
        let line = text
            .lines()
            .find(|l| l.starts_with("package "))
            .expect("wit/provider.wit has a package line");
        line.trim_start_matches("package wasm-ccm:provider@")
            .trim_end_matches(';')
            .to_string()
    }

    #[test]
    fn the_contract_version_is_semver() {
        let core = CONTRACT_VERSION
            .split(['-', '+'])
            .next()
            .expect("split yields one part at least");
        let parts: Vec<&str> = core.split('.').collect();
        assert_eq!(parts.len(), 3, "{CONTRACT_VERSION} is MAJOR.MINOR.PATCH");
        for p in parts {
            assert!(
                p.parse::<u64>().is_ok() && (p == "0" || !p.starts_with('0')),
                "{CONTRACT_VERSION}: `{p}` is not a semver number"
            );
        }
    }

    #[test]
    fn the_contract_version_is_the_wit_package_version() {
        assert_eq!(CONTRACT_VERSION, wit_package_version());
    }

    #[test]
    fn the_contract_version_is_one_the_host_loads() {
        // SUPPORTED_VERSIONS is `major.minor`; the contract it was built with must be among them.
        let minor = CONTRACT_VERSION
            .split('.')
            .take(2)
            .collect::<Vec<_>>()
            .join(".");
        assert!(
            crate::surface::SUPPORTED_VERSIONS.contains(&minor.as_str()),
            "{CONTRACT_VERSION} not in {:?}",
            crate::surface::SUPPORTED_VERSIONS
        );
    }
}
