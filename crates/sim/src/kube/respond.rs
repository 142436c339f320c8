//! JSON responses as the simulated apiserver writes them, and an error's Status (a leaf the
//! HTTP front, the API handlers and the control API all write with).

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::error::ApiError;

/// A JSON response.
pub(crate) fn json_response(status: u16, body: impl Into<Body>) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        code,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.into(),
    )
        .into_response()
}

/// A JSON response of a value.
pub(crate) fn value_response(status: u16, value: &Value) -> Response {
    json_response(status, serde_json::to_vec(value).unwrap_or_default())
}

/// The Status response of an error (with `Retry-After` when it asks for one).
pub(crate) fn error_response(e: &ApiError) -> Response {
    let mut response = value_response(e.code, &e.status());
    if let Some(seconds) = e.retry_after
        && let Ok(v) = HeaderValue::from_str(&seconds.to_string())
    {
        response.headers_mut().insert(header::RETRY_AFTER, v);
    }
    response
}
