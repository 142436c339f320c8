//! Helpers the runtime's bench binaries share.

use wasm_ccm_runtime::types::Node;
use wasm_ccm_runtime::{Driver, Tier};

/// `d` once it serves its Cranelift build. A bench on the default, tiered runtime loads a
/// driver cold onto Winch code, which swaps when the background build is done: figures of warm
/// calls wait for the swap, to measure the code a host serves with for good (and not while the
/// background compile takes one of the cores).
#[allow(dead_code)] // the tiers bench watches the swap itself
pub(crate) async fn on_cranelift(d: Driver) -> Driver {
    let mut tier = d.watch_tier();
    tier.wait_for(|t| *t == Tier::Cranelift)
        .await
        .expect("the swap to Cranelift");
    d
}

/// A ready node named `name`, with nothing else set.
pub(crate) fn node(name: &str) -> Node {
    Node {
        name: name.into(),
        uid: String::new(),
        provider_id: String::new(),
        labels: vec![],
        annotations: vec![],
        addresses: vec![],
        taints: vec![],
        ready: true,
    }
}
