//! Helpers the runtime's bench binaries share.

use wasm_ccm_runtime::types::Node;

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
