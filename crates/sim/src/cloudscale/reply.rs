//! [`Reply`]: what a handler answers on success, as the HTTP front writes it.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::error::json_response;

/// What a handler answers on success.
#[derive(Debug)]
pub(crate) enum Reply {
    /// 200 with a body.
    Ok(Value),
    /// 201 with the created object.
    Created(Value),
    /// 204, empty body.
    NoContent,
}

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        match self {
            Reply::Ok(v) => json_response(200, serde_json::to_vec(&v).unwrap_or_default()),
            Reply::Created(v) => json_response(201, serde_json::to_vec(&v).unwrap_or_default()),
            Reply::NoContent => StatusCode::NO_CONTENT.into_response(),
        }
    }
}
