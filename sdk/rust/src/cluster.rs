//! A read-only view of the cluster and events on the object being reconciled (the `cluster`
//! import).

use std::cell::RefCell;
use std::rc::Rc;

use crate::bindings::wasm_ccm::provider::cluster as imports;
use crate::types::{AddressClaim, EventType, Node, NodeSet, Service};

/// All Services of type LoadBalancer in the cluster. Each call copies every one of them into the
/// driver; prefer [`services_with_annotation`] and [`services_with_address`].
pub fn load_balancer_services() -> Vec<Service> {
    imports::load_balancer_services()
}

/// The LoadBalancer Services carrying annotation `key` and, when `values` is not empty, one of
/// those values. For cross-service checks such as a floating IP claimed twice.
pub fn services_with_annotation(key: &str, values: &[String]) -> Vec<Service> {
    imports::services_with_annotation(key, values)
}

/// The LoadBalancer Services using one of `ips` as `spec.loadBalancerIP` or as an ingress IP
/// (compared as addresses). For an address pool: which of these are taken?
pub fn services_with_address(ips: &[String]) -> Vec<Service> {
    imports::services_with_address(ips)
}

/// Which of `ips` the LoadBalancer Services hold, as `spec.loadBalancerIP`, as an ingress IP or
/// as the value of annotation `annotation` (empty: none), compared as addresses. Answers with
/// addresses and UIDs only: for an address pool asking about many candidates at once.
pub fn address_claims(ips: &[String], annotation: &str) -> Vec<AddressClaim> {
    imports::address_claims(ips, annotation)
}

thread_local! {
    /// The nodes of the last node-set generation fetched. A component instance is
    /// single-threaded and lives for many calls, so an unchanged set is copied in once.
    static NODES: RefCell<Option<(u64, Rc<[Node]>)>> = const { RefCell::new(None) };
}

/// The nodes of `set` (an `ensure` or `update` argument): fetched from the host once per
/// generation and kept for the next calls with the same generation. The export glue calls it,
/// so a driver's `ensure` and `update` simply receive the nodes.
pub fn nodes_of(set: &NodeSet) -> Rc<[Node]> {
    NODES.with(|cell| {
        if let Some((generation, nodes)) = cell.borrow().as_ref()
            && *generation == set.generation
        {
            return Rc::clone(nodes);
        }
        let nodes: Rc<[Node]> = imports::nodes().into();
        *cell.borrow_mut() = Some((set.generation, Rc::clone(&nodes)));
        nodes
    })
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
