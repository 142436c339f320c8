//! Where the workspace's guest components are.
//!
//! The build script compiles every driver and test plugin to `wasm32-wasip2` (profile `guest`,
//! into `target/guest`) whenever their sources change, checks that each output is a component,
//! and bakes the absolute paths in here. Host tests and the CLI depend on this crate instead of
//! building `.wasm` files themselves, so `cargo test` from a fresh clone needs no manual step.

/// The reference driver (`plugins/static`, world `full-driver`).
pub const STATIC_DRIVER: &str = env!("WASM_CCM_STATIC_DRIVER");

/// The cloudscale.ch driver (`plugins/cloudscale`, world `load-balancer-driver`).
pub const CLOUDSCALE_DRIVER: &str = env!("WASM_CCM_CLOUDSCALE_DRIVER");

/// The PhoenixNAP driver (`plugins/phoenixnap`, world `load-balancer-driver`).
pub const PHOENIXNAP_DRIVER: &str = env!("WASM_CCM_PHOENIXNAP_DRIVER");

/// The Apache CloudStack driver (`plugins/cloudstack`, world `load-balancer-driver`).
pub const CLOUDSTACK_DRIVER: &str = env!("WASM_CCM_CLOUDSTACK_DRIVER");

/// The hostile test driver (`tests/plugins/hostile`, world `instances-driver`): loops, memory
/// bombs, traps, egress, log floods and leaks chosen by `node.name`.
pub const HOSTILE_DRIVER: &str = env!("WASM_CCM_HOSTILE_DRIVER");

/// A component exporting `wasm-ccm:provider@9.0.0` (`tests/plugins/future-major`), which the
/// host must refuse by its major version.
pub const FUTURE_MAJOR_DRIVER: &str = env!("WASM_CCM_FUTURE_MAJOR_DRIVER");

/// A driver with one switchable bug (`tests/plugins/broken`, world `load-balancer-driver`):
/// conformance must fail exactly the checks each bug breaks.
pub const BROKEN_DRIVER: &str = env!("WASM_CCM_BROKEN_DRIVER");

/// The SDK's template driver (`sdk/rust/template`, world `instances-driver`), which passes
/// conformance as it is.
pub const TEMPLATE_DRIVER: &str = env!("WASM_CCM_TEMPLATE_DRIVER");

/// Every guest component as (short name, absolute path): `static`, `cloudscale`, `phoenixnap`,
/// `cloudstack`, `hostile`, `future-major`, `broken`, `template`.
pub fn all() -> &'static [(&'static str, &'static str)] {
    &[
        ("static", STATIC_DRIVER),
        ("cloudscale", CLOUDSCALE_DRIVER),
        ("phoenixnap", PHOENIXNAP_DRIVER),
        ("cloudstack", CLOUDSTACK_DRIVER),
        ("hostile", HOSTILE_DRIVER),
        ("future-major", FUTURE_MAJOR_DRIVER),
        ("broken", BROKEN_DRIVER),
        ("template", TEMPLATE_DRIVER),
    ]
}

/// The most a ConfigMap may hold: the API server sums the lengths of every key and value (a
/// `binaryData` value counted as raw bytes) and refuses more than 1 MiB.
pub const CONFIGMAP_LIMIT: u64 = 1024 * 1024;

/// The key the deploy manifests mount the driver from (`deploy/overlays/*-configmap`).
pub const CONFIGMAP_KEY: &str = "plugin.wasm";

/// The size the API server counts for a ConfigMap holding a `wasm_len`-byte driver under
/// [`CONFIGMAP_KEY`], or an error naming the driver, the size and the limit.
pub fn check_fits_configmap(name: &str, wasm_len: u64) -> Result<u64, String> {
    let counted = CONFIGMAP_KEY.len() as u64 + wasm_len;
    if counted > CONFIGMAP_LIMIT {
        Err(format!(
            "the {name} driver ({wasm_len} bytes) would make a ConfigMap of {counted} bytes, over the API server's limit of {CONFIGMAP_LIMIT} bytes (1 MiB): shrink it (opt-level \"s\", strip, fewer dependencies) or ship it as an OCI artifact"
        ))
    } else {
        Ok(counted)
    }
}
