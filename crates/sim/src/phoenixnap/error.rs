//! API errors. The PhoenixNAP APIs answer `{"message": "...", "validationErrors": [...]}`; the
//! token endpoint answers OAuth2's `{"error": "...", "error_description": "..."}`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// An error response.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// The JSON body.
    pub body: Value,
    /// Seconds for a `Retry-After` header (429).
    pub retry_after: Option<u32>,
    /// Methods for an `Allow` header (405).
    pub allow: Option<&'static str>,
}

impl ApiError {
    /// `{"message": message}`.
    pub(crate) fn new(status: u16, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            body: json!({"message": message.into()}),
            retry_after: None,
            allow: None,
        }
    }

    /// 400 `{"message": "Validation failed: a; b", "validationErrors": ["a", "b"]}`.
    pub(crate) fn validation(errors: Vec<String>) -> ApiError {
        ApiError {
            body: json!({
                "message": format!("Validation failed: {}", errors.join("; ")),
                "validationErrors": errors,
            }),
            ..ApiError::new(400, "")
        }
    }

    /// 404 naming what was not found, e.g. `IP Block with ID x not found.`.
    pub(crate) fn not_found(what: &str, id: &str) -> ApiError {
        ApiError::new(404, format!("{what} with ID {id} not found."))
    }

    /// OAuth2's error body, for the token endpoint.
    pub(crate) fn oauth(status: u16, error: &str, description: &str) -> ApiError {
        ApiError {
            body: json!({"error": error, "error_description": description}),
            ..ApiError::new(status, "")
        }
    }
}

/// A JSON response.
pub(crate) fn json_response(status: u16, body: &Value) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        code,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        serde_json::to_vec(body).unwrap_or_default(),
    )
        .into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = json_response(self.status, &self.body);
        let headers = response.headers_mut();
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if let Some(allow) = self.allow {
            headers.insert(header::ALLOW, HeaderValue::from_static(allow));
        }
        if self.status == 401 && self.body.get("message").is_some() {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}
