//! The request log: every request in order, including rejected and faulted ones.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde_json::Value;

/// Requests kept; older ones are dropped first (bounds memory in long benchmark runs).
pub const LOG_CAPACITY: usize = 100_000;

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

    /// The log's rendering of a request body.
    pub(crate) fn body_value(body: &[u8]) -> Option<Value> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        Some(
            serde_json::from_slice(body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned())),
        )
    }
}

/// The log shared by the server and every handle.
#[derive(Debug, Default)]
pub(crate) struct RequestLog {
    entries: Mutex<VecDeque<LoggedRequest>>,
}

impl RequestLog {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<LoggedRequest>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn record(&self, request: LoggedRequest) {
        let mut entries = self.lock();
        if entries.len() >= LOG_CAPACITY {
            entries.pop_front();
        }
        entries.push_back(request);
    }

    pub(crate) fn all(&self) -> Vec<LoggedRequest> {
        self.lock().iter().cloned().collect()
    }

    pub(crate) fn clear(&self) {
        self.lock().clear();
    }
}
