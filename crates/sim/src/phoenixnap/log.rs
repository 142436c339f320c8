//! The request log: every request in order, including rejected and faulted ones.

use serde_json::{Value, json};

pub use crate::fixture::LOG_CAPACITY;
use crate::request_core::LogEntry;

/// One served request.
#[derive(Clone, Debug, PartialEq)]
pub struct LoggedRequest {
    /// HTTP method.
    pub method: String,
    /// The path, e.g. `/ips/v1/ip-blocks`.
    pub path: String,
    /// The raw query string without `?`, e.g. `tag=usage.x&tag=cluster.y`; empty when none.
    pub query: String,
    /// The body: parsed JSON, a JSON string holding the text when it was not JSON (the token
    /// endpoint's form), or None when empty.
    pub body: Option<Value>,
    /// The status answered.
    pub status: u16,
}

impl LoggedRequest {
    /// Whether the request changes something in the cloud: any method but GET, except the
    /// token endpoint's POST (a token changes nothing in the cloud).
    pub fn is_mutation(&self) -> bool {
        self.method != "GET" && !self.path.ends_with("/openid-connect/token")
    }

    /// `METHOD path[?query] status`, e.g. `POST /ips/v1/ip-blocks 201`.
    pub fn line(&self) -> String {
        if self.query.is_empty() {
            format!("{} {} {}", self.method, self.path, self.status)
        } else {
            format!(
                "{} {}?{} {}",
                self.method, self.path, self.query, self.status
            )
        }
    }
}

impl LogEntry for LoggedRequest {
    fn to_json(&self) -> Value {
        json!({"method": self.method, "path": self.path, "query": self.query,
               "body": self.body, "status": self.status})
    }
}

/// The log of this simulator's requests.
pub(crate) type RequestLog = crate::fixture::RequestLog<LoggedRequest>;
