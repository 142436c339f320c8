//! CloudStack's error answers: the HTTP status is the API error code, and the body is the
//! command's envelope holding `uuidList`, `errorcode`, `cserrorcode` (the code of the Java
//! exception class behind the error) and `errortext`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// `cserrorcode` of `InvalidParameterValueException`.
const CS_INVALID_PARAMETER: u32 = 4350;
/// `cserrorcode` of `NetworkRuleConflictException`.
const CS_RULE_CONFLICT: u32 = 4360;
/// `cserrorcode` of `PermissionDeniedException`.
const CS_PERMISSION_DENIED: u32 = 4365;
/// `cserrorcode` of `InsufficientAddressCapacityException`.
const CS_ADDRESS_CAPACITY: u32 = 4320;
/// `cserrorcode` of `RequestLimitException`.
const CS_REQUEST_LIMIT: u32 = 4545;
/// `cserrorcode` of a bare `ServerApiException`.
pub(crate) const CS_SERVER_API: u32 = 9999;

/// The `errortext` of every authentication failure: CloudStack does not say which check failed.
pub(crate) const AUTH_FAILED: &str = "unable to verify user credentials and/or request signature";

/// An API error: rendered as `{"<command>response": {...}}` with `status` as the HTTP status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CsError {
    /// HTTP status and `errorcode`.
    pub status: u16,
    /// `cserrorcode`.
    pub cs_code: u32,
    /// `errortext`.
    pub text: String,
    /// Seconds for a `Retry-After` header (injected throttling).
    pub retry_after: Option<u32>,
}

impl CsError {
    /// An error with these codes.
    pub(crate) fn new(status: u16, cs_code: u32, text: impl Into<String>) -> CsError {
        CsError {
            status,
            cs_code,
            text: text.into(),
            retry_after: None,
        }
    }

    /// 431: a parameter error (`InvalidParameterValueException`).
    pub(crate) fn param(text: impl Into<String>) -> CsError {
        CsError::new(431, CS_INVALID_PARAMETER, text)
    }

    /// 431 from a bare `ServerApiException(PARAM_ERROR, …)` (cserrorcode 9999), as the API
    /// dispatcher's own parameter checks throw it (e.g. `BaseListCmd`'s paging rule).
    pub(crate) fn server_param(text: impl Into<String>) -> CsError {
        CsError::new(431, CS_SERVER_API, text)
    }

    /// 431 for a UUID parameter that names no (visible) entity, in CloudStack's words (the
    /// drivers map this text to "not found").
    pub(crate) fn unknown_id(param: &str, value: &str) -> CsError {
        CsError::param(format!(
            "Invalid parameter {param} value={value} due to incorrect long value format, or \
             entity does not exist or due to incorrect parameter annotation for the field in api \
             cmd class."
        ))
    }

    /// 431 for a required parameter that is missing; `command` is the command as sent.
    pub(crate) fn missing(command: &str, param: &str) -> CsError {
        CsError::param(format!(
            "Unable to execute API command {} due to missing parameter {param}",
            command.to_lowercase()
        ))
    }

    /// 431 for a value that does not parse as the parameter's type.
    pub(crate) fn bad_value(command: &str, param: &str, value: &str) -> CsError {
        CsError::param(format!(
            "Unable to execute API command {} due to invalid value {value} for parameter {param}",
            command.to_lowercase()
        ))
    }

    /// 432: the API does not exist or the account may not call it.
    pub(crate) fn unavailable(command: &str, user: &str) -> CsError {
        CsError::new(
            432,
            CS_PERMISSION_DENIED,
            format!(
                "The API [{command}] does not exist or is not available for the account for user \
                 {user}."
            ),
        )
    }

    /// 401: the signature, key or expiry did not check out.
    pub(crate) fn auth() -> CsError {
        CsError::new(401, CS_SERVER_API, AUTH_FAILED)
    }

    /// 537: a network rule conflicts with an existing one.
    pub(crate) fn conflict(text: impl Into<String>) -> CsError {
        CsError::new(537, CS_RULE_CONFLICT, text)
    }

    /// 533: no public address left.
    pub(crate) fn no_address(text: impl Into<String>) -> CsError {
        CsError::new(533, CS_ADDRESS_CAPACITY, text)
    }

    /// An injected failure with `status` (a status outside 100–999 answers 500).
    pub(crate) fn injected(status: u16) -> CsError {
        let status = if (100..=999).contains(&status) {
            status
        } else {
            500
        };
        CsError::new(status, CS_SERVER_API, "Simulated failure.")
    }

    /// An injected throttle: 429 with `Retry-After` (a proxy in front of CloudStack; its own API
    /// throttling answers as [`CsError::api_limit`], without the header).
    pub(crate) fn throttled(retry_after: u32) -> CsError {
        CsError {
            retry_after: Some(retry_after),
            ..CsError::new(
                429,
                CS_REQUEST_LIMIT,
                format!("There are too many API calls; retry in {retry_after} seconds."),
            )
        }
    }

    /// CloudStack's API throttling refusing a request `wait` before the account's window ends
    /// (see `CloudApi::rate_limited` in `server.rs` for the source).
    pub(crate) fn api_limit(wait: std::time::Duration) -> CsError {
        CsError::new(
            429,
            CS_SERVER_API,
            format!(
                "The given user has reached his/her account api limit, please retry after [{}] ms.",
                wait.as_millis()
            ),
        )
    }

    /// The error object inside the envelope (also a failed job's `jobresult`, without
    /// `uuidList`).
    pub(crate) fn body(&self) -> Value {
        json!({
            "uuidList": [],
            "errorcode": self.status,
            "cserrorcode": self.cs_code,
            "errortext": self.text,
        })
    }

    /// The response for `command` (as sent; the envelope key is its lowercase form plus
    /// `response`).
    pub(crate) fn into_response_for(self, command: &str) -> Response {
        let mut response = json_response(self.status, &envelope(command, self.body()));
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// `{"<command lowercased>response": inner}`; a request without a command answers under
/// `errorresponse`.
pub(crate) fn envelope(command: &str, inner: Value) -> Value {
    let name = if command.is_empty() { "error" } else { command };
    let mut map = serde_json::Map::new();
    map.insert(format!("{}response", name.to_lowercase()), inner);
    Value::Object(map)
}

/// A JSON response with CloudStack's content type.
pub(crate) fn json_response(status: u16, body: &Value) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        code,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=UTF-8"),
        )],
        serde_json::to_vec(body).unwrap_or_default(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies() {
        let e = CsError::unknown_id("id", "x");
        assert_eq!(e.status, 431);
        assert!(
            e.text
                .starts_with("Invalid parameter id value=x due to incorrect long value")
        );
        assert_eq!(
            envelope("listZones", e.body())["listzonesresponse"]["cserrorcode"],
            4350
        );
        assert!(envelope("", json!({})).get("errorresponse").is_some());
        assert_eq!(
            CsError::missing("createLoadBalancerRule", "name").text,
            "Unable to execute API command createloadbalancerrule due to missing parameter name"
        );
        assert_eq!(CsError::injected(42).status, 500);
    }
}
