//! Host-side bindings generated from `wit/provider.wit` (`wasm-ccm:provider@0.1.0`).
//!
//! One module per supported WIT version lives here; when 0.2 arrives, 0.1 keeps its own module
//! and is adapted onto the newest types, the way Zed keeps its extension API versions.

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "full-driver",
    imports: {
        // The only import that waits on the network: async in the host, blocking for the guest.
        "wasm-ccm:provider/http.send": async,
    },
    exports: { default: async },
    additional_derives: [PartialEq, Eq],
});

pub use exports::wasm_ccm::provider::{instances, load_balancer, provider, routes};
pub use wasm_ccm::provider::{cluster, http, log, types};
