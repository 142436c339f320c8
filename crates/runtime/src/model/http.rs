//! The records of the WIT's `http` import: what a driver sends, what it gets back, and why no
//! response came. An [`crate::http::HttpInterceptor`] sees these.

use serde::{Deserialize, Serialize};

use super::wit_enum;

wit_enum! {
    /// HTTP request method (`method`).
    Method {
        /// `GET`.
        #[default]
        Get = "get",
        /// `HEAD`.
        Head = "head",
        /// `POST`.
        Post = "post",
        /// `PUT`.
        Put = "put",
        /// `PATCH`.
        Patch = "patch",
        /// `DELETE`.
        Delete = "delete",
        /// `OPTIONS`.
        Options = "options",
    }
}

/// One request of a driver (`request`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// Absolute `http://` or `https://` URL.
    pub url: String,
    /// Header names and values, in order (a name may repeat).
    #[serde(with = "super::pairs")]
    pub headers: Vec<(String, String)>,
    /// The body.
    #[serde(deserialize_with = "super::bytes::deserialize")]
    pub body: Vec<u8>,
    /// Give up after this many milliseconds; the host caps it by the call's deadline.
    pub timeout_ms: Option<u32>,
}

/// A whole response (`response`); an HTTP error status is a response too.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Header names and values, in order (a name may repeat).
    #[serde(with = "super::pairs")]
    pub headers: Vec<(String, String)>,
    /// The body.
    #[serde(deserialize_with = "super::bytes::deserialize")]
    pub body: Vec<u8>,
}

/// Why no response came back (`http-error`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HttpError {
    /// The egress policy refused the destination; the text names the grant to add.
    #[serde(rename = "denied")]
    Denied(String),
    /// No complete response within the time allowed.
    #[serde(rename = "timeout")]
    Timeout(String),
    /// Could not connect (DNS, refused, TLS).
    #[serde(rename = "connect")]
    Connect(String),
    /// The response was larger than the host allows.
    #[serde(rename = "too-large")]
    TooLarge(String),
    /// The request itself is malformed (bad URL, header or method).
    #[serde(rename = "invalid")]
    Invalid(String),
}

impl HttpError {
    /// The WIT name of the case, e.g. `too-large`.
    pub fn case(&self) -> &'static str {
        match self {
            HttpError::Denied(_) => "denied",
            HttpError::Timeout(_) => "timeout",
            HttpError::Connect(_) => "connect",
            HttpError::TooLarge(_) => "too-large",
            HttpError::Invalid(_) => "invalid",
        }
    }

    /// The host's text.
    pub fn message(&self) -> &str {
        match self {
            HttpError::Denied(m)
            | HttpError::Timeout(m)
            | HttpError::Connect(m)
            | HttpError::TooLarge(m)
            | HttpError::Invalid(m) => m,
        }
    }
}

/// The case and the text, e.g. `denied: … add --allow-egress https://api.example.com`.
impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.case(), self.message())
    }
}

impl std::error::Error for HttpError {}

/// One request a driver made during a call, for conformance checks and debugging.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HttpExchange {
    /// The HTTP method.
    pub method: String,
    /// The URL with its query removed (queries may carry signatures or keys).
    pub url: String,
    /// The status, when a response came back.
    pub status: Option<u16>,
    /// The error case (`denied`, `timeout`, …) when none did.
    pub error: Option<String>,
    /// Whether the request changes state in the cloud (see `crate::http::shadow::would_write`).
    pub mutating: bool,
    /// In a shadow run, what the host refused to send because it would change the cloud.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadowed: Option<String>,
}

/// The HTTP name of a method.
pub fn method_name(m: Method) -> &'static str {
    match m {
        Method::Get => "GET",
        Method::Head => "HEAD",
        Method::Post => "POST",
        Method::Put => "PUT",
        Method::Patch => "PATCH",
        Method::Delete => "DELETE",
        Method::Options => "OPTIONS",
    }
}

/// `url` without its query (queries may carry signatures or keys), for messages and logs.
pub fn strip_query(url: &str) -> String {
    match url.split_once('?') {
        Some((base, _)) => format!("{base}?…"),
        None => url.to_string(),
    }
}
