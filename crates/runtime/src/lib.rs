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
//!   `capability/` ([`http`], checked by the [`EgressPolicy`]; [`log`]; `cluster`); WASI is
//!   linked deny-by-default.
//! - The values a driver exchanges with the host are the host model (`model/`, reachable as
//!   [`types`], [`http`] and [`AddressClaim`]/[`AddressUse`]), with serde in WIT's names; the
//!   generated bindings stay private and are converted at the boundary, one module per WIT
//!   version (`wit/`).
//!
//! The controllers, the CLI and the conformance runner all use this one crate. Its public
//! surface is what they use, re-exported here; every other module is private, so the
//! workspace's `unreachable_pub` lint flags a `pub` item nothing outside can reach:
//!
//! - loading and calling: [`Runtime`], [`RuntimeOptions`], [`EngineOptions`], [`WasmEngine`], [`Compiler`],
//!   [`Tier`], [`Allocation`], [`AotCache`], [`CacheOutcome`], [`Compiled`], [`Declarations`], [`Driver`],
//!   [`DriverOptions`], [`InitInput`], [`PoolOptions`], [`InstanceMode`], [`DriverStats`];
//! - a call's scope and result: [`CallScope`], [`ClusterView`], [`StaticCluster`],
//!   [`SharedNodes`], [`AddressQuery`], [`claims_of`], [`Outcome`], [`DriverEvent`],
//!   [`EventKind`];
//! - errors: [`HostError`], [`CallError`], [`Described`], [`GuestBacktrace`], [`GuestFrame`]
//!   and its limits, [`sanitize`];
//! - the contract: [`CONTRACT_VERSION`], [`SUPPORTED_VERSIONS`], [`PACKAGE`],
//!   [`MAX_COMPONENT_BYTES`], [`check_bytes`], [`Surface`], [`Exports`], [`validate_info`],
//!   [`validate_plain_env`];
//! - egress: [`EgressPolicy`], [`Grant`], [`parse_grant`], [`parse_grants`],
//!   [`broad_grant_warnings`], [`HostAddresses`];
//! - grouped modules: [`types`], [`http`], [`log`], [`json`], [`secrets`], [`trace`] (why each
//!   is grouped is said where it is re-exported);
//! - [`TokenBucket`], the one rate limiter of the workspace.

mod bindings;
mod cache;
mod call;
mod capability;
mod config_secrets;
mod driver;
mod egress;
mod engine;
mod error;
mod info_rules;
mod lowered;
mod model;
mod plain_env;
mod result_caps;
pub mod secrets;
mod special_addr;
mod state;
mod surface;
mod text;
mod token_bucket;
pub mod trace;
mod wit;

// Grouped paths, kept where the module's name is part of what its items mean:
// - `types`: the host model's records (Service, Node, ProviderError, …), one namespace that
//   mirrors WIT's `types` interface; at the root they would crowd out the runtime's own types.
// - `http` and `log`: each capability's configuration, values and hooks (`http::Config` and
//   `log::Config`, `http::Request`, `log::Level`) — the same short names in two capabilities.
// - `json`: reading a host-model value from JSON (`json::from_value`), which names its format
//   only under `json::`.
// - `secrets` (declared above): the vault, its options, the placeholder shape and the CloudStack
//   signer are one subsystem; `secrets::cloudstack` is the signer, where `cloudstack` alone
//   would read as the driver.
// - `trace` (declared above): the span target and the trace-header propagation drivers' calls
//   carry (`trace::TARGET` names the tracing target only under `trace::`).
pub use capability::{http, log};
pub use model::{json, types};

pub use cache::{AotCache, CacheOutcome};
pub use call::{
    AddressQuery, CallScope, ClusterView, DriverEvent, EventKind, Outcome, SharedNodes,
    StaticCluster, claims_of,
};
pub use driver::{
    Compiled, Declarations, Driver, DriverOptions, DriverStats, InitInput, InstanceMode,
    PoolOptions, Runtime, RuntimeOptions,
};
pub use egress::{EgressPolicy, Grant, broad_grant_warnings, parse_grant, parse_grants};
pub use engine::{Allocation, Compiler, EngineOptions, Tier, WasmEngine};
pub use error::{
    CallError, Described, GuestBacktrace, GuestFrame, HostError, MAX_BACKTRACE_FRAMES,
    MAX_FRAME_TEXT_BYTES, MAX_SHORT_BACKTRACE_BYTES, sanitize,
};
pub use info_rules::validate as validate_info;
pub use model::cluster::{AddressClaim, AddressUse};
pub use plain_env::validate as validate_plain_env;
pub use special_addr::HostAddresses;
pub use surface::{
    CONTRACT_VERSION, Exports, MAX_COMPONENT_BYTES, PACKAGE, SUPPORTED_VERSIONS, Surface,
    check_bytes,
};
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
