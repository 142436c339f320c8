//! OAuth2 client-credentials tokens sealed by the host (`secret-use.oauth2-client`): the driver
//! keeps its token flow, but the `access_token` it gets back is a placeholder bound to the
//! grant's token origins, usable only as a bearer token. The host caches the answer for the
//! token's lifetime, so every instance of a driver shares one token (one token request per
//! lifetime instead of one per instance), and drops it on a 401.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::{Vault, mint};
use crate::model::http::Response;

/// Most sealed tokens a driver holds at once; the oldest goes first.
const MAX_TOKENS: usize = 32;

/// A token's lifetime when the server does not say (`expires_in` absent): short, so that a
/// server that never expires tokens is still asked again now and then.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);

/// A cached answer is served only while this much of its lifetime is left; clients refresh
/// 10 s before expiry (Go's oauth2 `expiryDelta`), so the host asks anew before they would.
const MIN_LEFT: Duration = Duration::from_secs(30);

/// A token request: which grant, and the guest's request (hashed, placeholders only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct TokenAsk {
    pub grant: usize,
    pub key: u64,
}

/// A sealed token.
#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub value: String,
    pub origins: Vec<url::Origin>,
    pub expires: Instant,
    ask: TokenAsk,
    /// The sealed JSON answer, `expires_in` rewritten when served from the cache.
    answer: serde_json::Map<String, serde_json::Value>,
}

/// The sealed tokens of a driver, by placeholder.
#[derive(Default)]
pub(crate) struct Tokens {
    by_placeholder: HashMap<String, Token>,
}

impl Tokens {
    /// Whether `placeholder` is a live sealed token.
    pub(crate) fn is_sealed(&self, placeholder: &str) -> bool {
        self.get(placeholder).is_some()
    }

    /// The live token behind `placeholder`.
    pub(crate) fn get(&self, placeholder: &str) -> Option<&Token> {
        self.by_placeholder
            .get(placeholder)
            .filter(|t| t.expires > Instant::now())
    }

    /// `(value, placeholder)` of every token, for the scrubber.
    pub(crate) fn values(&self) -> impl Iterator<Item = (&str, &str)> {
        self.by_placeholder
            .iter()
            .map(|(p, t)| (t.value.as_str(), p.as_str()))
    }

    pub(crate) fn clear(&mut self) {
        self.by_placeholder.clear();
    }

    fn cached(&self, ask: TokenAsk) -> Option<(&String, &Token)> {
        let now = Instant::now();
        self.by_placeholder
            .iter()
            .filter(|(_, t)| t.ask == ask && t.expires > now + MIN_LEFT)
            .max_by_key(|(_, t)| t.expires)
    }

    fn insert(&mut self, placeholder: String, token: Token) {
        let now = Instant::now();
        self.by_placeholder.retain(|_, t| t.expires > now);
        while self.by_placeholder.len() >= MAX_TOKENS {
            let oldest = self
                .by_placeholder
                .iter()
                .min_by_key(|(_, t)| t.expires)
                .map(|(p, _)| p.clone());
            match oldest {
                Some(p) => self.by_placeholder.remove(&p),
                None => break,
            };
        }
        self.by_placeholder.insert(placeholder, token);
    }
}

/// The JSON answer of a cached token, its `expires_in` set to what is left.
fn answer_of(token: &Token) -> Response {
    let mut answer = token.answer.clone();
    let left = token.expires.saturating_duration_since(Instant::now());
    if answer.contains_key("expires_in") {
        answer.insert("expires_in".into(), left.as_secs().into());
    }
    Response {
        status: 200,
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("cache-control".into(), "no-store".into()),
        ],
        body: serde_json::to_vec(&answer).unwrap_or_default(),
    }
}

impl Vault {
    /// Taken around a token request that the cache cannot answer (see `token_gate`).
    pub(crate) async fn token_gate(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.token_gate.lock().await
    }

    /// A still-valid sealed answer to the same token request, from the cache.
    pub(crate) fn cached_token(&self, ask: TokenAsk) -> Option<Response> {
        let table = self.table.read().ok()?;
        table.tokens.cached(ask).map(|(_, t)| answer_of(t))
    }

    /// The token endpoint's answer with its `access_token` sealed. An answer that is not a
    /// successful JSON object with a string `access_token` is passed on as it is (scrubbed
    /// later like every response): there is nothing to seal.
    pub(crate) fn seal_token(&self, ask: TokenAsk, mut response: Response) -> Response {
        if !(200..300).contains(&response.status) {
            return response;
        }
        let Ok(serde_json::Value::Object(mut answer)) =
            serde_json::from_slice::<serde_json::Value>(&response.body)
        else {
            return response;
        };
        let Some(value) = answer
            .get("access_token")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
        else {
            return response;
        };
        let Some(grant) = self.grants.get(ask.grant) else {
            return response;
        };
        let Some(token_grant) = &grant.token else {
            return response;
        };
        let lifetime = answer
            .get("expires_in")
            .and_then(serde_json::Value::as_u64)
            .map_or(DEFAULT_LIFETIME, Duration::from_secs);
        let placeholder = mint();
        answer.insert("access_token".into(), placeholder.clone().into());
        // A refresh or ID token would be a second credential in the guest; client credentials
        // need neither (RFC 6749 §4.4.3: a refresh token SHOULD NOT be issued).
        answer.remove("refresh_token");
        answer.remove("id_token");
        let token = Token {
            value,
            origins: token_grant.origins.clone(),
            expires: Instant::now() + lifetime,
            ask,
            answer: answer.clone(),
        };
        response.body = serde_json::to_vec(&answer).unwrap_or_default();
        response
            .headers
            .retain(|(k, _)| !k.eq_ignore_ascii_case("content-length"));
        if let Ok(mut table) = self.table.write() {
            table.tokens.insert(placeholder, token);
            table.rebuild_scrubber();
        }
        response
    }

    /// Drops sealed tokens an API refused (401): the next token request asks the server.
    pub(crate) fn drop_tokens(&self, placeholders: &[String]) {
        if placeholders.is_empty() {
            return;
        }
        if let Ok(mut table) = self.table.write() {
            for p in placeholders {
                table.tokens.by_placeholder.remove(p);
            }
            table.rebuild_scrubber();
        }
    }
}
