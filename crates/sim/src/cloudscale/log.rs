//! The request log: every request in order, including rejected and faulted ones.

use serde_json::{Value, json};

pub use crate::fixture::LOG_CAPACITY;
use crate::request_core::LogEntry;

/// One served request.
#[derive(Clone, Debug)]
pub struct LoggedRequest {
    /// HTTP method.
    pub method: String,
    /// Path and query, e.g. `/v1/load-balancers?tag:a=b`.
    pub path: String,
    /// The body: parsed JSON, a JSON string holding the text when it was not JSON, or None
    /// when empty.
    pub body: Option<Value>,
    /// The status answered.
    pub status: u16,
    /// The W3C `traceparent` header, when the client sent one (the trace tests check which
    /// requests carry it).
    pub traceparent: Option<String>,
}

impl LoggedRequest {
    /// Whether the request changes something in the cloud: any method but GET.
    pub fn is_mutation(&self) -> bool {
        self.method != "GET"
    }

    /// `METHOD path status`, e.g. `POST /v1/load-balancers/pools 201`.
    pub fn line(&self) -> String {
        format!("{} {} {}", self.method, self.path, self.status)
    }
}

impl LogEntry for LoggedRequest {
    fn to_json(&self) -> Value {
        let mut entry = json!({"method": self.method, "path": self.path, "body": self.body, "status": self.status});
        if let Some(t) = &self.traceparent {
            entry["traceparent"] = json!(t);
        }
        entry
    }
}

/// The log of this simulator's requests.
pub(crate) type RequestLog = crate::fixture::RequestLog<LoggedRequest>;
