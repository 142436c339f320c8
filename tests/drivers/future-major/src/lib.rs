//! A driver built against a future major version of the contract (`wasm-ccm:provider@9.0.0`),
//! straight from its own WIT copy, so the host's version check has something to refuse.

// Every public item here comes from `wit_bindgen::generate!` below, which writes no docs (an
// `allow` on the macro call itself is ignored); the crate's own items are private.
#![allow(missing_docs)]

wit_bindgen::generate!({
    world: "future-driver",
    path: "wit",
});

use exports::wasm_ccm::provider::provider::Guest;
use wasm_ccm::provider::types::ProviderInfo;

// Only named by the export glue, which exists on wasm alone.
#[allow(dead_code)]
struct FutureMajor;

impl Guest for FutureMajor {
    fn info() -> ProviderInfo {
        ProviderInfo {
            name: "future-major".to_string(),
            version: "9.0.0".to_string(),
            provider_id_scheme: "future".to_string(),
            default_egress: Vec::new(),
            env_prefixes: Vec::new(),
        }
    }
}

// The exported symbol names only link on wasm; natively the crate still type-checks.
#[cfg(target_arch = "wasm32")]
export!(FutureMajor);
