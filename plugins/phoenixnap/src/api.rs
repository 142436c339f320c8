//! The PhoenixNAP APIs over the host's `http` import: an OAuth2 client-credentials token, cached
//! across calls and refreshed before it expires, and JSON requests that answer a 401 with one
//! refresh and one retry.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use serde::Serialize;
use serde::de::DeserializeOwned;
use wasm_ccm_sdk::http::{self, RequestBuilder, Response};
use wasm_ccm_sdk::types::ProviderError;

use crate::config::Config;

/// The token endpoint below the auth server's URL (Keycloak realm `BMC`).
pub const TOKEN_PATH: &str = "/auth/realms/BMC/protocol/openid-connect/token";
/// The scopes upstream asks for.
pub const SCOPES: &str = "bmc bmc.read tags tags.read";
/// A token is refreshed this long before it expires, as Go's oauth2 does.
const EXPIRY_MARGIN_SECS: u64 = 10;
/// One request may take this long; well inside the host's call deadline.
const TIMEOUT_MS: u32 = 10_000;

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

#[derive(Clone)]
struct Token {
    value: String,
    /// Unix seconds after which it is refreshed.
    refresh_at: u64,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The API client. The token is a cache: an instance that loses it asks for a new one.
pub struct Api {
    base: String,
    token_url: String,
    client_id: String,
    client_secret: String,
    token: RefCell<Option<Token>>,
}

impl Api {
    /// A client for the configured hosts and credentials.
    pub fn new(config: &Config) -> Self {
        Api {
            base: config.base_url.clone(),
            token_url: format!("{}{TOKEN_PATH}", config.auth_url),
            client_id: config.client_id.clone(),
            client_secret: config.client_secret.clone(),
            token: RefCell::new(None),
        }
    }

    /// `{base}{path}`, e.g. `/bmc/v1/servers`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn token(&self) -> Result<String, ProviderError> {
        if let Some(t) = self.token.borrow().as_ref()
            && now() < t.refresh_at
        {
            return Ok(t.value.clone());
        }
        let fresh = self.fetch_token()?;
        let value = fresh.value.clone();
        *self.token.borrow_mut() = Some(fresh);
        Ok(value)
    }

    /// Client credentials as HTTP Basic first; when the server refuses that, as form fields
    /// (Go's `clientcredentials` does the same).
    fn fetch_token(&self) -> Result<Token, ProviderError> {
        let basic = http::post(&self.token_url)
            .basic_auth(&self.client_id, &self.client_secret)
            .form(&[("grant_type", "client_credentials"), ("scope", SCOPES)])
            .timeout_ms(TIMEOUT_MS)
            .send()?;
        let response = if matches!(basic.status, 400 | 401) {
            http::post(&self.token_url)
                .form(&[
                    ("grant_type", "client_credentials"),
                    ("scope", SCOPES),
                    ("client_id", &self.client_id),
                    ("client_secret", &self.client_secret),
                ])
                .timeout_ms(TIMEOUT_MS)
                .send()?
        } else {
            basic
        };
        if matches!(response.status, 400 | 401) {
            return Err(ProviderError::Unauthorized(format!(
                "PhoenixNAP refused the client credentials (HTTP {} from {}): {}; check PNAP_CLIENT_ID/PNAP_CLIENT_SECRET or clientID/clientSecret in cloud-sa.json",
                response.status,
                http::display_url(&self.token_url),
                http::body_snippet(&response.body)
            )));
        }
        let t: TokenResponse = response.error_for_status()?.json()?;
        let lifetime = t.expires_in.unwrap_or(300);
        Ok(Token {
            value: t.access_token,
            refresh_at: now() + lifetime.saturating_sub(EXPIRY_MARGIN_SECS),
        })
    }

    /// Sends with the token; a 401 drops it and tries once more with a new one.
    fn send(&self, build: impl Fn() -> RequestBuilder) -> Result<Response, ProviderError> {
        let request = |token: &str| {
            build()
                .bearer(token)
                .header("accept", "application/json")
                .timeout_ms(TIMEOUT_MS)
                .send()
        };
        let response = request(&self.token()?)?;
        if response.status != 401 {
            return Ok(response);
        }
        self.token.borrow_mut().take();
        Ok(request(&self.token()?)?)
    }

    /// `GET` a JSON document.
    pub fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ProviderError> {
        self.send(|| http::get(self.url(path)))?
            .error_for_status()?
            .json()
    }

    /// `GET` a JSON document; `None` when the API says 404 or 403 (upstream reads both as
    /// "not there": the API answers 403 for servers of other accounts).
    pub fn get_optional<T: DeserializeOwned>(
        &self,
        path: &str,
    ) -> Result<Option<T>, ProviderError> {
        let response = self.send(|| http::get(self.url(path)))?;
        if matches!(response.status, 403 | 404) {
            return Ok(None);
        }
        response.error_for_status()?.json().map(Some)
    }

    /// `POST` a JSON body; the response is decoded when `T` is not `()`-like.
    pub fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ProviderError> {
        self.send(|| http::post(self.url(path)).json(body))?
            .error_for_status()?
            .json()
    }

    /// `POST` a JSON body, ignoring the response body (asynchronous operations answer 202).
    pub fn post_accepted<B: Serialize>(&self, path: &str, body: &B) -> Result<(), ProviderError> {
        self.send(|| http::post(self.url(path)).json(body))?
            .error_for_status()?;
        Ok(())
    }

    /// `PUT` a JSON body.
    pub fn put<B: Serialize>(&self, path: &str, body: &B) -> Result<(), ProviderError> {
        self.send(|| http::put(self.url(path)).json(body))?
            .error_for_status()?;
        Ok(())
    }

    /// `DELETE`; already gone (404) counts as deleted.
    pub fn delete(&self, path: &str) -> Result<(), ProviderError> {
        match self
            .send(|| http::delete(self.url(path)))?
            .error_for_status()
        {
            Ok(_) | Err(ProviderError::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
