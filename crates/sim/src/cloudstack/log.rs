//! The request log: every API request in order, including rejected and faulted ones, with the
//! credentials redacted.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::params::Params;
pub use crate::fixture::LOG_CAPACITY;
use crate::request_core::LogEntry;

/// What stands in for `apiKey` and `signature` values in the log.
pub const REDACTED: &str = "REDACTED";

/// One served request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedRequest {
    /// HTTP method.
    pub method: String,
    /// The `command` parameter as sent; empty when missing.
    pub command: String,
    /// Every parameter (query and form merged, decoded; names as sent); `apiKey` and
    /// `signature` read [`REDACTED`].
    pub params: BTreeMap<String, String>,
    /// The status answered.
    pub status: u16,
}

impl LoggedRequest {
    /// The entry for a request.
    pub(crate) fn new(method: &str, request: &Params, status: u16) -> LoggedRequest {
        let params = request
            .pairs()
            .map(|(k, v)| {
                let secret =
                    k.eq_ignore_ascii_case("apiKey") || k.eq_ignore_ascii_case("signature");
                (k.to_string(), if secret { REDACTED } else { v }.to_string())
            })
            .collect();
        LoggedRequest {
            method: method.to_string(),
            command: request.get("command").unwrap_or_default().to_string(),
            params,
            status,
        }
    }

    /// Whether the command changes something: any command but `list*` and `query*` (a request
    /// without a command changes nothing).
    pub fn is_mutation(&self) -> bool {
        !self.command.is_empty()
            && !self.command.starts_with("list")
            && !self.command.starts_with("query")
    }

    /// `METHOD command status`, e.g. `POST createLoadBalancerRule 200`.
    pub fn line(&self) -> String {
        format!("{} {} {}", self.method, self.command, self.status)
    }
}

impl LogEntry for LoggedRequest {
    fn to_json(&self) -> Value {
        json!({
            "method": self.method,
            "command": self.command,
            "params": self.params,
            "status": self.status,
        })
    }
}

/// The log of this simulator's requests.
pub(crate) type RequestLog = crate::fixture::RequestLog<LoggedRequest>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_redacted() {
        let p = Params::parse(&["command=listZones&apiKey=k&signature=s&response=json"]);
        let r = LoggedRequest::new("GET", &p, 200);
        assert_eq!(r.command, "listZones");
        assert_eq!(r.params["apiKey"], REDACTED);
        assert_eq!(r.params["signature"], REDACTED);
        assert_eq!(r.params["response"], "json");
        assert!(!r.is_mutation());
        assert_eq!(r.line(), "GET listZones 200");
        let p = Params::parse(&["command=createLoadBalancerRule"]);
        assert!(LoggedRequest::new("POST", &p, 200).is_mutation());
        assert!(!LoggedRequest::new("POST", &Params::default(), 431).is_mutation());
    }
}
