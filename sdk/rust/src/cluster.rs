//! A read-only view of the cluster and events on the object being reconciled (the `cluster`
//! import).

use crate::bindings::wasm_ccm::provider::cluster as imports;
use crate::types::{EventType, Service};

/// All Services of type LoadBalancer in the cluster, for cross-service checks such as an IP
/// claimed twice.
pub fn load_balancer_services() -> Vec<Service> {
    imports::load_balancer_services()
}

/// Records a Kubernetes event on the object of the current call. `reason` is UpperCamelCase.
pub fn event(kind: EventType, reason: &str, message: &str) {
    imports::event(kind, reason, message);
}

/// Records a Warning event on the object of the current call.
pub fn warning(reason: &str, message: &str) {
    event(EventType::Warning, reason, message);
}

/// Records a Normal event on the object of the current call.
pub fn normal(reason: &str, message: &str) {
    event(EventType::Normal, reason, message);
}
