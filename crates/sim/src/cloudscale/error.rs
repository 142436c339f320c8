//! API errors: an HTTP status and a flat JSON object of strings, the shape Django REST framework
//! answers with. The Go SDK decodes error bodies into `map[string]string`, so a nested value
//! would turn an HTTP error into a decode error on the client side (and break 404 detection).

use std::collections::BTreeMap;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// An error response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// The flat body: field (or `detail`, `non_field_errors`) → message.
    pub body: BTreeMap<String, String>,
    /// Seconds for a `Retry-After` header.
    pub retry_after: Option<u32>,
    /// Methods for an `Allow` header (405).
    pub allow: Option<&'static str>,
}

impl ApiError {
    /// One message under one key.
    pub(crate) fn new(status: u16, key: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            body: BTreeMap::from([(key.to_string(), message.into())]),
            retry_after: None,
            allow: None,
        }
    }

    /// `{"detail": message}`.
    pub(crate) fn detail(status: u16, message: impl Into<String>) -> ApiError {
        ApiError::new(status, "detail", message)
    }

    /// 404 `{"detail": "Not found."}`.
    pub(crate) fn not_found() -> ApiError {
        ApiError::detail(404, "Not found.")
    }

    /// 400 with one field error.
    pub(crate) fn field(key: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(400, key, message)
    }

    /// 400 with several field errors.
    pub(crate) fn fields(body: BTreeMap<String, String>) -> ApiError {
        ApiError {
            status: 400,
            body,
            retry_after: None,
            allow: None,
        }
    }
}

/// DRF's message for a related object that does not exist.
pub(crate) fn does_not_exist(uuid: &str) -> String {
    format!("Object with uuid={uuid} does not exist.")
}

/// A JSON response with a body.
pub(crate) fn json_response(status: u16, body: Vec<u8>) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        code,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = json_response(
            self.status,
            serde_json::to_vec(&self.body).unwrap_or_default(),
        );
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if let Some(allow) = self.allow {
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static(allow));
        }
        response
    }
}

/// How the simulator refuses a change to a busy (`changing`) load balancer. The real wording and
/// status are not documented (review 2026-11-23, "Limits"); this is the simulator's assumption,
/// in the API's flat `detail` error shape.
pub(crate) const BUSY: &str = "Load balancer is currently changing, try again later.";
