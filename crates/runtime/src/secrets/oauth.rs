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
    /// The sealed answer's fields, `expires_in` rewritten when served from the cache.
    answer: serde_json::Map<String, serde_json::Value>,
    /// The format the endpoint answered in, which the cache answers in too.
    format: Format,
}

/// The formats of a token endpoint's answer the host reads (and so can seal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// `application/json`, RFC 6749 §5.1.
    Json,
    /// `application/x-www-form-urlencoded`, which several endpoints answer when asked
    /// (`Accept`), GitHub's among them.
    Form,
}

/// Fields of a token answer that hold a credential other than the access token: never passed
/// on (a client-credentials grant needs none, RFC 6749 §4.4.3).
const SECOND_CREDENTIALS: &[&str] = &["refresh_token", "id_token"];

/// Whether a field name of an answer names a token of any kind.
fn names_a_token(field: &str) -> bool {
    field.to_ascii_lowercase().contains("token") && field != "token_type"
}

/// The fields of a token answer in a format the host reads, or `None`.
fn parse_answer(
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
fn build_answer(
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

/// The answer of a cached token, its `expires_in` set to what is left.
fn answer_of(token: &Token) -> Response {
    let mut answer = token.answer.clone();
    let left = token.expires.saturating_duration_since(Instant::now());
    if answer.contains_key("expires_in") {
        answer.insert("expires_in".into(), left.as_secs().into());
    }
    build_answer(200, token.format, &answer)
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

    /// The token endpoint's answer, sealed: its `access_token` replaced by a placeholder, its
    /// second credentials removed, rebuilt by the host from its fields (no header of the
    /// endpoint's passes). Every answer is read: JSON or a form, whatever the status. An answer
    /// in another format is refused when it is a success (it may carry a token the host cannot
    /// find), and passed on (scrubbed like every response) when it is an error page; an error
    /// answer that names a token is refused.
    pub(crate) fn seal_token(&self, ask: TokenAsk, response: Response) -> Result<Response, String> {
        let success = (200..300).contains(&response.status);
        let Some((format, mut answer)) = parse_answer(&response) else {
            return if success {
                Err(format!(
                    "the token endpoint answered {} in a format the host cannot seal (neither a JSON object nor a form); ask for application/json",
                    response.status
                ))
            } else {
                Ok(response)
            };
        };
        let token_value = answer
            .get("access_token")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string);
        for field in SECOND_CREDENTIALS {
            answer.remove(*field);
        }
        let (Some(value), true) = (token_value, success) else {
            if let Some(field) = answer.keys().find(|k| names_a_token(k)) {
                return Err(format!(
                    "the token endpoint answered {} with a field `{}` the host cannot seal; nothing was passed on",
                    response.status,
                    crate::capability::log::cut(field, 64)
                ));
            }
            return Ok(build_answer(response.status, format, &answer));
        };
        if let Some(field) = answer
            .keys()
            .find(|k| names_a_token(k) && k.as_str() != "access_token")
        {
            return Err(format!(
                "the token endpoint's answer has a field `{}` besides access_token that the host cannot seal; nothing was passed on",
                crate::capability::log::cut(field, 64)
            ));
        }
        let token_grant = self
            .grants
            .get(ask.grant)
            .and_then(|g| g.token.as_ref())
            .ok_or_else(|| "the token request's grant has no token endpoint".to_string())?;
        let lifetime = match answer.get("expires_in") {
            Some(serde_json::Value::Number(n)) => n.as_u64(),
            Some(serde_json::Value::String(s)) => s.parse().ok(),
            _ => None,
        }
        .map_or(DEFAULT_LIFETIME, Duration::from_secs);
        let placeholder = mint();
        answer.insert("access_token".into(), placeholder.clone().into());
        let token = Token {
            value,
            origins: token_grant.origins.clone(),
            expires: Instant::now() + lifetime,
            ask,
            answer: answer.clone(),
            format,
        };
        let sealed = build_answer(response.status, format, &answer);
        if let Ok(mut table) = self.table.write() {
            table.tokens.insert(placeholder, token);
            table.rebuild_scrubber();
        }
        Ok(sealed)
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
