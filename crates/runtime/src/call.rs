//! What a caller gives a driver call and what it gets back besides the value.

use std::sync::Arc;
use std::time::Duration;

use crate::bindings::types::Service;
use crate::error::CallError;
use crate::http::HttpExchange;

/// The cluster as a driver may see it through the `cluster` import.
pub trait ClusterView: Send + Sync {
    /// All Services of type LoadBalancer.
    fn load_balancer_services(&self) -> Vec<Service>;
}

/// A cluster with no Services (the CLI, tests).
#[derive(Debug, Default, Clone, Copy)]
pub struct EmptyCluster;

impl ClusterView for EmptyCluster {
    fn load_balancer_services(&self) -> Vec<Service> {
        Vec::new()
    }
}

/// A fixed list of Services.
#[derive(Debug, Default, Clone)]
pub struct StaticCluster(pub Vec<Service>);

impl ClusterView for StaticCluster {
    fn load_balancer_services(&self) -> Vec<Service> {
        self.0.clone()
    }
}

/// Who a call is for: the object (for log lines and events) and the cluster view.
#[derive(Clone)]
pub struct CallScope {
    /// `namespace/name` of a Service or the name of a Node; empty when none.
    pub object: String,
    /// What `cluster.load-balancer-services` returns.
    pub cluster: Arc<dyn ClusterView>,
}

impl Default for CallScope {
    fn default() -> Self {
        CallScope {
            object: String::new(),
            cluster: Arc::new(EmptyCluster),
        }
    }
}

impl CallScope {
    /// A scope for `object` with an empty cluster.
    pub fn object(object: impl Into<String>) -> Self {
        CallScope {
            object: object.into(),
            ..Default::default()
        }
    }
}

/// Severity of a driver event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum EventKind {
    /// Kubernetes' `Normal` event type: something worth knowing happened.
    Normal,
    /// Kubernetes' `Warning` event type: something went wrong.
    Warning,
}

/// An event the driver recorded on the call's object; the host writes it to Kubernetes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DriverEvent {
    /// `Normal` or `Warning`.
    pub kind: EventKind,
    /// The event's reason: a short CamelCase word, as Kubernetes events have.
    pub reason: String,
    /// The human-readable note.
    pub message: String,
}

/// The result of a driver call plus what happened during it.
#[derive(Debug, Clone)]
pub struct Outcome<T> {
    /// The value, the driver's error, or the host's.
    pub result: Result<T, CallError>,
    /// Events the driver recorded (also when it failed).
    pub events: Vec<DriverEvent>,
    /// Requests the driver made.
    pub http: Vec<HttpExchange>,
    /// Wall time of the call, instantiation included when a new instance was needed.
    pub elapsed: Duration,
    /// The instance's linear-memory high-water mark, in bytes.
    pub peak_memory: usize,
}

impl<T> Outcome<T> {
    pub(crate) fn failed(error: CallError, elapsed: Duration) -> Self {
        Outcome {
            result: Err(error),
            events: Vec::new(),
            http: Vec::new(),
            elapsed,
            peak_memory: 0,
        }
    }

    /// The result alone.
    pub fn into_result(self) -> Result<T, CallError> {
        self.result
    }
}
