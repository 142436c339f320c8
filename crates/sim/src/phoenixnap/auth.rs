//! OAuth2 client credentials: the Keycloak-style token endpoint, the issued bearer tokens with
//! their expiry, and the bearer check every API request goes through.
//!
//! Client credentials are taken from HTTP Basic (user and password form-URL-encoded, as Go's
//! `clientcredentials` sends them) or, when there is no Basic header (or Basic is switched off),
//! from the `client_id`/`client_secret` form fields.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::response::{IntoResponse, Response};
use rand::Rng as _;
use serde_json::json;

use super::error::{ApiError, json_response};

/// The token endpoint's path.
pub const TOKEN_PATH: &str = "/auth/realms/BMC/protocol/openid-connect/token";
/// The scope granted when the request names none: what the PhoenixNAP CCM asks for.
pub(crate) const DEFAULT_SCOPE: &str = "bmc bmc.read tags tags.read";

/// Issued tokens and the credentials that get one.
#[derive(Debug)]
pub(crate) struct Tokens {
    pub client_id: String,
    pub client_secret: String,
    ttl: Duration,
    accept_basic: AtomicBool,
    /// Token → expiry.
    issued: Mutex<HashMap<String, Instant>>,
    /// Every token request's client credentials as they arrived, in order.
    seen: Mutex<Vec<TokenRequest>>,
}

/// How one token request carried its client credentials, as the token endpoint received them
/// (decoded), whether or not it was granted; for tests that check where credentials travel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenRequest {
    /// The `Authorization` header's scheme and decoded pair, when it is HTTP Basic:
    /// `(client_id, client_secret)`; `None` without such a header.
    pub basic: Option<(String, String)>,
    /// The raw `Authorization` header when it is not HTTP Basic.
    pub other_authorization: Option<String>,
    /// The form fields of the body, decoded, in order.
    pub form: Vec<(String, String)>,
    /// The status answered.
    pub status: u16,
}

/// Why a bearer token is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    Missing,
    Unknown,
    Expired,
}

impl Tokens {
    pub(crate) fn new(client_id: String, client_secret: String, ttl: Duration) -> Tokens {
        Tokens {
            client_id,
            client_secret,
            ttl,
            accept_basic: AtomicBool::new(true),
            issued: Mutex::new(HashMap::new()),
            seen: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Instant>> {
        self.issued.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new token valid for the TTL; forgets tokens that expired.
    pub(crate) fn issue(&self) -> String {
        let bytes: [u8; 24] = rand::rng().random();
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let now = Instant::now();
        let mut issued = self.lock();
        issued.retain(|_, expiry| *expiry > now);
        issued.insert(token.clone(), now.checked_add(self.ttl).unwrap_or(now));
        token
    }

    /// The tokens held: every one issued, but for those that had expired when a later one was
    /// issued. Sorted.
    pub(crate) fn held(&self) -> Vec<String> {
        let mut tokens: Vec<String> = self.lock().keys().cloned().collect();
        tokens.sort();
        tokens
    }

    /// The token requests received so far, in order.
    pub(crate) fn requests(&self) -> Vec<TokenRequest> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Every issued token expires now.
    pub(crate) fn expire_all(&self) {
        let now = Instant::now();
        for expiry in self.lock().values_mut() {
            *expiry = now;
        }
    }

    /// Whether HTTP Basic client authentication is accepted (on by default).
    pub(crate) fn set_accept_basic(&self, on: bool) {
        self.accept_basic.store(on, Ordering::Relaxed);
    }

    /// The check of an `Authorization: Bearer <token>` header.
    pub(crate) fn check(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, rest) = v.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
            })
            .ok_or(Refusal::Missing)?;
        match self.lock().get(token) {
            None => Err(Refusal::Unknown),
            Some(expiry) if *expiry <= Instant::now() => Err(Refusal::Expired),
            Some(_) => Ok(()),
        }
    }

    /// The client credentials of a token request: from HTTP Basic, else from the form.
    fn credentials(
        &self,
        headers: &HeaderMap,
        form: &[(String, String)],
    ) -> Result<(String, String), ApiError> {
        let field = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let basic = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Basic ")
                    .or_else(|| v.strip_prefix("basic "))
            });
        if let Some(encoded) = basic
            && self.accept_basic.load(Ordering::Relaxed)
        {
            let decoded = base64_decode(encoded.trim())
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|s| {
                    let (id, secret) = s.split_once(':')?;
                    Some((form_decode(id), form_decode(secret)))
                });
            return decoded.ok_or_else(|| {
                ApiError::oauth(
                    400,
                    "invalid_request",
                    "Malformed HTTP Basic authorization header",
                )
            });
        }
        match (field("client_id"), field("client_secret")) {
            (Some(id), Some(secret)) => Ok((id, secret)),
            _ if basic.is_some() => Err(ApiError::oauth(
                401,
                "unauthorized_client",
                "HTTP Basic client authentication is not accepted; send client_id and client_secret",
            )),
            _ => Err(ApiError::oauth(
                401,
                "unauthorized_client",
                "Client credentials were not provided",
            )),
        }
    }
}

/// Serves the token endpoint.
pub(crate) fn token_endpoint(
    tokens: &Tokens,
    method: &Method,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let response = match issue(tokens, method, headers, body) {
        Ok(response) => response,
        Err(e) => e.into_response(),
    };
    let authorization = headers
        .get(header::AUTHORIZATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let basic = authorization.as_deref().and_then(|v| {
        let encoded = v
            .strip_prefix("Basic ")
            .or_else(|| v.strip_prefix("basic "))?;
        let text = String::from_utf8(base64_decode(encoded.trim())?).ok()?;
        let (id, secret) = text.split_once(':')?;
        Some((form_decode(id), form_decode(secret)))
    });
    let seen = TokenRequest {
        other_authorization: authorization.filter(|_| basic.is_none()),
        basic,
        form: parse_form(&String::from_utf8_lossy(body)),
        status: response.status().as_u16(),
    };
    tokens
        .seen
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(seen);
    response
}

fn issue(
    tokens: &Tokens,
    method: &Method,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    if *method != Method::POST {
        return Err(ApiError {
            allow: Some("POST"),
            ..ApiError::oauth(405, "invalid_request", "HTTP method not allowed")
        });
    }
    let form = parse_form(&String::from_utf8_lossy(body));
    let field = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    match field("grant_type") {
        None => {
            return Err(ApiError::oauth(
                400,
                "invalid_request",
                "Missing form parameter: grant_type",
            ));
        }
        Some("client_credentials") => {}
        Some(_) => {
            return Err(ApiError::oauth(
                400,
                "unsupported_grant_type",
                "Unsupported grant_type",
            ));
        }
    }
    let (id, secret) = tokens.credentials(headers, &form)?;
    if id != tokens.client_id || secret != tokens.client_secret {
        return Err(ApiError::oauth(
            401,
            "unauthorized_client",
            "Invalid client or Invalid client credentials",
        ));
    }
    let scope = field("scope")
        .filter(|s| !s.trim().is_empty())
        .unwrap_or(DEFAULT_SCOPE);
    let body = json!({
        "access_token": tokens.issue(),
        "expires_in": tokens.ttl.as_secs(),
        "refresh_expires_in": 0,
        "token_type": "Bearer",
        "not-before-policy": 0,
        "scope": scope,
    });
    let mut response = json_response(200, &body);
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `application/x-www-form-urlencoded` pairs (also a URL query), decoded.
pub(crate) fn parse_form(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => (form_decode(k), form_decode(v)),
            None => (form_decode(pair), String::new()),
        })
        .collect()
}

/// Decodes `+` and `%XX` (invalid escapes stay as they are; invalid UTF-8 is replaced).
pub(crate) fn form_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    (Some(h), Some(l)) => {
                        // Two hex digits fit a byte.
                        out.push((h * 16 + l) as u8);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Standard base64 (padding optional); None when malformed.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            // The top byte of the accumulated bits.
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_and_base64_decoding() {
        assert_eq!(
            parse_form("grant_type=client_credentials&scope=bmc+bmc.read&x"),
            [
                ("grant_type".to_string(), "client_credentials".to_string()),
                ("scope".to_string(), "bmc bmc.read".to_string()),
                ("x".to_string(), String::new()),
            ]
        );
        assert_eq!(form_decode("a%2Fb%3d%zz%"), "a/b=%zz%");
        assert_eq!(
            base64_decode("c2ltLWNsaWVudDpzaW0tc2VjcmV0").as_deref(),
            Some(&b"sim-client:sim-secret"[..])
        );
        assert_eq!(base64_decode("YQ==").as_deref(), Some(&b"a"[..]));
        assert_eq!(base64_decode("a!"), None);
    }

    #[test]
    fn tokens_expire() {
        let tokens = Tokens::new("c".into(), "s".into(), Duration::from_secs(60));
        let t = tokens.issue();
        let mut headers = HeaderMap::new();
        assert_eq!(tokens.check(&headers), Err(Refusal::Missing));
        let bearer = HeaderValue::from_str(&format!("Bearer {t}")).expect("header");
        headers.insert(header::AUTHORIZATION, bearer);
        assert_eq!(tokens.check(&headers), Ok(()));
        tokens.expire_all();
        assert_eq!(tokens.check(&headers), Err(Refusal::Expired));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        assert_eq!(tokens.check(&headers), Err(Refusal::Unknown));
    }
}
