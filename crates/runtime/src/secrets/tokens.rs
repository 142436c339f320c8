//! The sealed OAuth2 tokens of a driver ([`Tokens`]) and the token answers the host rebuilds:
//! what `oauth.rs`'s exchange stores and serves. A leaf.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::model::http::Response;

/// Most sealed tokens a driver holds at once; the oldest goes first.
pub(super) const MAX_TOKENS: usize = 32;

/// A token's lifetime when the server does not say (`expires_in` absent): short, so that a
/// server that never expires tokens is still asked again now and then.
pub(super) const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);

/// A cached answer is served only while this much of its lifetime is left; clients refresh
/// 10 s before expiry (Go's oauth2 `expiryDelta`), so the host asks anew before they would.
pub(super) const MIN_LEFT: Duration = Duration::from_secs(30);

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
    pub(super) ask: TokenAsk,
    /// The sealed answer's fields, `expires_in` rewritten when served from the cache.
    pub(super) answer: serde_json::Map<String, serde_json::Value>,
    /// The format the endpoint answered in, which the cache answers in too.
    pub(super) format: Format,
}

/// The formats of a token endpoint's answer the host reads (and so can seal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    /// `application/json`, RFC 6749 §5.1.
    Json,
    /// `application/x-www-form-urlencoded`, which several endpoints answer when asked
    /// (`Accept`), GitHub's among them.
    Form,
}

/// Fields of a token answer that hold a credential other than the access token: never passed
/// on (a client-credentials grant needs none, RFC 6749 §4.4.3).
pub(super) const SECOND_CREDENTIALS: &[&str] = &["refresh_token", "id_token"];

/// Whether a field name of an answer names a token of any kind.
pub(super) fn names_a_token(field: &str) -> bool {
    field.to_ascii_lowercase().contains("token") && field != "token_type"
}

/// The fields of a token answer in a format the host reads, or `None`.
pub(super) fn parse_answer(
    response: &Response,
) -> Option<(Format, serde_json::Map<String, serde_json::Value>)> {
    if let Ok(serde_json::Value::Object(map)) =
        serde_json::from_slice::<serde_json::Value>(&response.body)
    {
        return Some((Format::Json, map));
    }
    let text = std::str::from_utf8(&response.body).ok()?.trim();
    let is_form = text.contains('=')
        && text
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'{' && b != b'<');
    if !is_form {
        return None;
    }
    let map = url::form_urlencoded::parse(text.as_bytes())
        .map(|(k, v)| (k.into_owned(), serde_json::Value::String(v.into_owned())))
        .collect();
    Some((Format::Form, map))
}

/// A token answer built by the host from its fields alone: no header of the endpoint's is
/// passed on, so none can carry a token.
pub(super) fn build_answer(
    status: u16,
    format: Format,
    answer: &serde_json::Map<String, serde_json::Value>,
) -> Response {
    let (content_type, body) = match format {
        Format::Json => (
            "application/json",
            serde_json::to_vec(answer).unwrap_or_default(),
        ),
        Format::Form => {
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            for (k, v) in answer {
                let text = match v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                form.append_pair(k, &text);
            }
            (
                "application/x-www-form-urlencoded",
                form.finish().into_bytes(),
            )
        }
    };
    Response {
        status,
        headers: vec![
            ("content-type".into(), content_type.into()),
            ("cache-control".into(), "no-store".into()),
        ],
        body,
    }
}

/// The sealed tokens of a driver, by placeholder.
#[derive(Default)]
pub(crate) struct Tokens {
    pub(super) by_placeholder: HashMap<String, Token>,
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

    pub(super) fn cached(&self, ask: TokenAsk) -> Option<(&String, &Token)> {
        let now = Instant::now();
        self.by_placeholder
            .iter()
            .filter(|(_, t)| t.ask == ask && t.expires > now + MIN_LEFT)
            .max_by_key(|(_, t)| t.expires)
    }

    pub(super) fn insert(&mut self, placeholder: String, token: Token) {
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

/// The answer of a cached token, its `expires_in` set to what is left.
pub(super) fn answer_of(token: &Token) -> Response {
    let mut answer = token.answer.clone();
    let left = token.expires.saturating_duration_since(Instant::now());
    if answer.contains_key("expires_in") {
        answer.insert("expires_in".into(), left.as_secs().into());
    }
    build_answer(200, token.format, &answer)
}
