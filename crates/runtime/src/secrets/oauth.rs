//! OAuth2 client-credentials tokens sealed by the host (`secret-use.oauth2-client`): the driver
//! keeps its token flow, but the `access_token` it gets back is a placeholder bound to the
//! grant's token origins, usable only as a bearer token. The host caches the answer for the
//! token's lifetime, so every instance of a driver shares one token (one token request per
//! lifetime instead of one per instance), and drops it on a 401.

use std::time::{Duration, Instant};

use super::placeholder::mint;
use super::tokens::{
    DEFAULT_LIFETIME, SECOND_CREDENTIALS, Token, TokenAsk, answer_of, build_answer, names_a_token,
    parse_answer,
};
use super::vault::Vault;
use crate::model::http::Response;

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
                    crate::text::cut(field, 64)
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
                crate::text::cut(field, 64)
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
