//! A small blocking HTTP client over the host's `http` import — the driver's only way out.
//!
//! ```ignore
//! use wasm_ccm_sdk::http;
//!
//! let servers: Vec<Server> = http::get("https://api.example.com/v1/servers")
//!     .bearer(&token)
//!     .timeout_ms(10_000)
//!     .send()?
//!     .error_for_status()?
//!     .json()?;
//! ```
//!
//! Every destination is checked against the operator's egress allow-list by the host; a refused
//! one comes back as [`HttpError::Denied`], whose text names the `--allow-egress` grant to add.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::bindings::wasm_ccm::provider::http as imports;
pub use crate::bindings::wasm_ccm::provider::http::{HttpError, Method};
use crate::types::ProviderError;

/// Longest body excerpt put into an error message, in bytes.
pub const BODY_SNIPPET_LIMIT: usize = 512;

/// Starts a GET request.
pub fn get(url: impl Into<String>) -> RequestBuilder {
    RequestBuilder::new(Method::Get, url)
}

/// Starts a POST request.
pub fn post(url: impl Into<String>) -> RequestBuilder {
    RequestBuilder::new(Method::Post, url)
}

/// Starts a PUT request.
pub fn put(url: impl Into<String>) -> RequestBuilder {
    RequestBuilder::new(Method::Put, url)
}

/// Starts a PATCH request.
pub fn patch(url: impl Into<String>) -> RequestBuilder {
    RequestBuilder::new(Method::Patch, url)
}

/// Starts a DELETE request.
pub fn delete(url: impl Into<String>) -> RequestBuilder {
    RequestBuilder::new(Method::Delete, url)
}

/// A request being put together; [`RequestBuilder::send`] sends it.
#[derive(Clone, Debug)]
pub struct RequestBuilder {
    method: Method,
    url: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    timeout_ms: Option<u32>,
    // A body that could not be encoded; reported by `send` so the builder stays chainable.
    error: Option<String>,
}

impl RequestBuilder {
    /// A request with any method.
    pub fn new(method: Method, url: impl Into<String>) -> Self {
        Self {
            method,
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
            timeout_ms: None,
            error: None,
        }
    }

    /// Adds a header (repeated names are sent as repeated headers).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Replaces every header named `name` (case-insensitive) with one value.
    fn set_header(mut self, name: &str, value: String) -> Self {
        self.headers.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
        self.headers.push((name.to_string(), value));
        self
    }

    /// `Authorization: Bearer <token>`.
    pub fn bearer(self, token: &str) -> Self {
        self.set_header("authorization", format!("Bearer {token}"))
    }

    /// `Authorization: Basic …` from a user name and password.
    pub fn basic_auth(self, user: &str, password: &str) -> Self {
        let credentials = base64(format!("{user}:{password}").as_bytes());
        self.set_header("authorization", format!("Basic {credentials}"))
    }

    /// Sets the raw body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// Sets a JSON body and `content-type: application/json`.
    pub fn json<T: Serialize + ?Sized>(mut self, value: &T) -> Self {
        match serde_json::to_vec(value) {
            Ok(body) => self.body = body,
            Err(e) => self.error = Some(format!("cannot encode the JSON body: {e}")),
        }
        self.set_header("content-type", "application/json".to_string())
    }

    /// Sets an `application/x-www-form-urlencoded` body.
    pub fn form(mut self, fields: &[(&str, &str)]) -> Self {
        self.body = form_urlencode(fields).into_bytes();
        self.set_header(
            "content-type",
            "application/x-www-form-urlencoded".to_string(),
        )
    }

    /// Gives up after `ms` milliseconds (the host caps it by the call's deadline).
    pub fn timeout_ms(mut self, ms: u32) -> Self {
        self.timeout_ms = Some(ms);
        self
    }

    /// Sends the request and waits for the whole response. An HTTP error status is a
    /// [`Response`]; use [`Response::error_for_status`] to turn it into a [`ProviderError`].
    pub fn send(self) -> Result<Response, HttpError> {
        if let Some(e) = self.error {
            return Err(HttpError::Invalid(e));
        }
        let request = imports::Request {
            method: self.method,
            url: self.url,
            headers: self.headers,
            body: self.body,
            timeout_ms: self.timeout_ms,
        };
        let response = imports::send(&request)?;
        Ok(Response {
            url: request.url,
            status: response.status,
            headers: response.headers,
            body: response.body,
        })
    }
}

/// A complete HTTP response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// The URL requested, for error messages.
    pub url: String,
    /// The HTTP status code.
    pub status: u16,
    /// The response headers, in order.
    pub headers: Vec<(String, String)>,
    /// The whole body.
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    /// The body as text; invalid UTF-8 is replaced.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Decodes the JSON body. A body that does not decode is `transient` (a proxy's error page,
    /// a truncated reply), with a message naming the URL and the expected type.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, ProviderError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            ProviderError::Transient(format!(
                "unexpected response from {}: expected JSON {}: {e}; body: {}",
                display_url(&self.url),
                short_type_name::<T>(),
                body_snippet(&self.body)
            ))
        })
    }

    /// `Ok(self)` for 1xx–3xx, else the [`ProviderError`] the status means (see
    /// [`status_error`]).
    pub fn error_for_status(self) -> Result<Self, ProviderError> {
        match status_error(self.status, &self.headers, &self.body, &self.url) {
            Some(e) => Err(e),
            None => Ok(self),
        }
    }
}

/// The first value of header `name` (case-insensitive) in `headers`.
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// The [`ProviderError`] an HTTP status means, or `None` below 400: 404 → `not-found`,
/// 401/403 → `unauthorized`, 429 → `rate-limited` (with Retry-After seconds when it is an
/// integer), 5xx → `transient`, other 4xx → `permanent`. Messages name the status, the URL
/// (without query string) and up to [`BODY_SNIPPET_LIMIT`] bytes of the body.
pub fn status_error(
    status: u16,
    headers: &[(String, String)],
    body: &[u8],
    url: &str,
) -> Option<ProviderError> {
    if status < 400 {
        return None;
    }
    let message = || {
        let snippet = body_snippet(body);
        let url = display_url(url);
        if snippet.is_empty() {
            format!("HTTP {status} from {url}")
        } else {
            format!("HTTP {status} from {url}: {snippet}")
        }
    };
    Some(match status {
        404 => ProviderError::NotFound(message()),
        401 | 403 => ProviderError::Unauthorized(message()),
        429 => ProviderError::RateLimited(
            header(headers, "retry-after").and_then(|v| v.trim().parse::<u32>().ok()),
        ),
        500..=599 => ProviderError::Transient(message()),
        _ => ProviderError::Permanent(message()),
    })
}

impl From<HttpError> for ProviderError {
    /// Timeouts and connection failures may pass (`transient`); a destination refused by the
    /// egress policy is the operator's to fix (`invalid-config`, the host's text names the
    /// `--allow-egress` grant); an oversized response or a malformed request will not pass by
    /// retrying (`permanent`).
    fn from(e: HttpError) -> Self {
        match e {
            HttpError::Timeout(m) => ProviderError::Transient(format!("HTTP timeout: {m}")),
            HttpError::Connect(m) => ProviderError::Transient(format!("HTTP connect: {m}")),
            // The host's text already names the destination and the grant to add.
            HttpError::Denied(m) => ProviderError::InvalidConfig(m),
            // The request body or the response: the host's text says which.
            HttpError::TooLarge(m) => ProviderError::Permanent(format!("HTTP too large: {m}")),
            HttpError::Invalid(m) => ProviderError::Permanent(format!("invalid HTTP request: {m}")),
        }
    }
}

/// At most [`BODY_SNIPPET_LIMIT`] bytes of `body` as text, cut on a character boundary, with
/// whitespace runs collapsed so an HTML error page stays on one log line.
pub fn body_snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.len() <= BODY_SNIPPET_LIMIT {
        return collapsed;
    }
    let mut end = BODY_SNIPPET_LIMIT;
    while !collapsed.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &collapsed[..end])
}

/// `url` without its query string, fragment or user info: those may carry credentials (API keys
/// in CloudStack's signed queries, for one) and must not reach a log or an event.
pub fn display_url(url: &str) -> String {
    let without_query = url.split(['?', '#']).next().unwrap_or(url);
    match without_query.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = match rest.find('/') {
                Some(i) => rest.split_at(i),
                None => (rest, ""),
            };
            let host = authority.rsplit('@').next().unwrap_or(authority);
            format!("{scheme}://{host}{path}")
        }
        None => without_query.to_string(),
    }
}

fn short_type_name<T>() -> &'static str {
    let full = std::any::type_name::<T>();
    // Keep generics readable: only strip the module path of the outermost type.
    let head = full.split('<').next().unwrap_or(full);
    let cut = head.rfind("::").map(|i| i + 2).unwrap_or(0);
    &full[cut..]
}

/// Percent-encodes `s` for `application/x-www-form-urlencoded` (space → `+`).
pub fn form_encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Percent-encodes `s` for use as one URL path segment (RFC 3986 unreserved characters kept).
pub fn encode_path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// `k1=v1&k2=v2`, form-encoded.
pub fn form_urlencode(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .map(|(k, v)| format!("{}={}", form_encode_component(k), form_encode_component(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Standard base64 with padding (RFC 4648), for Basic auth.
pub fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdrs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn statuses_map_onto_provider_errors() {
        let url = "https://api.example.com/v1/servers/x";
        assert_eq!(status_error(200, &[], b"", url), None);
        assert_eq!(status_error(302, &[], b"", url), None);
        assert!(matches!(
            status_error(404, &[], b"gone", url),
            Some(ProviderError::NotFound(m)) if m == "HTTP 404 from https://api.example.com/v1/servers/x: gone"
        ));
        assert!(matches!(
            status_error(401, &[], b"", url),
            Some(ProviderError::Unauthorized(m)) if m == "HTTP 401 from https://api.example.com/v1/servers/x"
        ));
        assert!(matches!(
            status_error(403, &[], b"", url),
            Some(ProviderError::Unauthorized(_))
        ));
        assert_eq!(
            status_error(429, &hdrs(&[("Retry-After", "7")]), b"", url),
            Some(ProviderError::RateLimited(Some(7)))
        );
        assert_eq!(
            status_error(
                429,
                &hdrs(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")]),
                b"",
                url
            ),
            Some(ProviderError::RateLimited(None))
        );
        assert!(matches!(
            status_error(503, &[], b"", url),
            Some(ProviderError::Transient(_))
        ));
        assert!(matches!(
            status_error(422, &[], b"{\"detail\":\"bad\"}", url),
            Some(ProviderError::Permanent(m)) if m.ends_with("{\"detail\":\"bad\"}")
        ));
    }

    #[test]
    fn snippets_are_short_and_utf8_safe() {
        let body = "é".repeat(600); // 1200 bytes, 2 per char
        let s = body_snippet(body.as_bytes());
        assert!(s.len() <= BODY_SNIPPET_LIMIT + '…'.len_utf8());
        assert!(s.ends_with('…'));
        assert_eq!(
            body_snippet(b"<html>\n  <b>oops</b>\n</html>"),
            "<html> <b>oops</b> </html>"
        );
        assert_eq!(body_snippet(&[0xff, b'a']), "\u{fffd}a");
    }

    #[test]
    fn urls_in_messages_drop_secrets() {
        assert_eq!(
            display_url("https://user:pw@api.example.com:8080/a/b?apikey=s#f"),
            "https://api.example.com:8080/a/b"
        );
        assert_eq!(display_url("http://h"), "http://h");
        let e = status_error(500, &[], b"", "https://h/p?signature=x").unwrap();
        assert!(!e.to_string().contains("signature"));
    }

    #[test]
    fn http_errors_map_onto_provider_errors() {
        let denied = ProviderError::from(HttpError::Denied(
            "egress to https://x:443 denied: add it with --allow-egress".into(),
        ));
        assert!(matches!(&denied, ProviderError::InvalidConfig(m) if m.contains("--allow-egress")));
        assert!(matches!(
            ProviderError::from(HttpError::Timeout("t".into())),
            ProviderError::Transient(_)
        ));
        assert!(matches!(
            ProviderError::from(HttpError::Connect("c".into())),
            ProviderError::Transient(_)
        ));
        assert!(matches!(
            ProviderError::from(HttpError::TooLarge("l".into())),
            ProviderError::Permanent(_)
        ));
        assert!(matches!(
            ProviderError::from(HttpError::Invalid("i".into())),
            ProviderError::Permanent(_)
        ));
    }

    #[test]
    fn encodings() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(
            base64(b"Aladdin:open sesame"),
            "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        assert_eq!(
            form_urlencode(&[("a b", "c&d=é"), ("x", "")]),
            "a+b=c%26d%3D%C3%A9&x="
        );
        assert_eq!(encode_path_segment("a/b c"), "a%2Fb%20c");
    }

    #[test]
    fn builder_sets_headers_once() {
        let r = get("http://h").bearer("a").bearer("b").json(&[1, 2]);
        let auth: Vec<_> = r
            .headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            .collect();
        assert_eq!(auth.len(), 1);
        assert_eq!(auth[0].1, "Bearer b");
        assert_eq!(r.body, b"[1,2]");
        assert_eq!(header(&r.headers, "Content-Type"), Some("application/json"));
    }

    #[test]
    fn json_errors_name_the_url_and_type() {
        let r = Response {
            url: "https://h/v1/servers?token=s".into(),
            status: 200,
            headers: vec![],
            body: b"<html>".to_vec(),
        };
        let e = r.json::<Vec<u32>>().unwrap_err();
        let m = e.to_string();
        assert!(
            m.starts_with("transient: unexpected response from https://h/v1/servers"),
            "{m}"
        );
        assert!(m.contains("Vec<u32>"), "{m}");
        assert!(!m.contains("token"), "{m}");
    }
}
