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

/// How the client credentials are sent to the token endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AuthStyle {
    /// HTTP Basic with `id` and `secret` form-urlencoded first (RFC 6749 §2.3.1; Go's
    /// `clientcredentials` does this).
    EncodedBasic,
    /// HTTP Basic with the raw `id:secret` (servers that do not decode the parts).
    RawBasic,
    /// `client_id`/`client_secret` form fields (Go's `AuthStyleInParams`).
    FormFields,
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
    /// The credential style the token endpoint accepted last; tried first from then on.
    style: RefCell<Option<AuthStyle>>,
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
            style: RefCell::new(None),
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

    /// One token request with the credentials in `style`.
    fn token_request(&self, style: AuthStyle) -> Result<Response, ProviderError> {
        let base = [("grant_type", "client_credentials"), ("scope", SCOPES)];
        let request = match style {
            AuthStyle::EncodedBasic => http::post(&self.token_url)
                .basic_auth(
                    &http::form_encode_component(&self.client_id),
                    &http::form_encode_component(&self.client_secret),
                )
                .form(&base),
            AuthStyle::RawBasic => http::post(&self.token_url)
                .basic_auth(&self.client_id, &self.client_secret)
                .form(&base),
            AuthStyle::FormFields => http::post(&self.token_url).form(&[
                base[0],
                base[1],
                ("client_id", &self.client_id),
                ("client_secret", &self.client_secret),
            ]),
        };
        Ok(request.timeout_ms(TIMEOUT_MS).send()?)
    }

    /// The styles to try, in order: the remembered one first, then HTTP Basic form-encoded
    /// (RFC 6749 §2.3.1), raw HTTP Basic (only when encoding changes the credentials), and
    /// form fields (the fallback of Go's `clientcredentials`, which upstream uses).
    fn styles(&self) -> Vec<AuthStyle> {
        let encoding_changes = http::form_encode_component(&self.client_id) != self.client_id
            || http::form_encode_component(&self.client_secret) != self.client_secret;
        let mut styles = Vec::with_capacity(3);
        if let Some(s) = *self.style.borrow() {
            styles.push(s);
        }
        for s in [
            AuthStyle::EncodedBasic,
            AuthStyle::RawBasic,
            AuthStyle::FormFields,
        ] {
            if (s != AuthStyle::RawBasic || encoding_changes) && !styles.contains(&s) {
                styles.push(s);
            }
        }
        styles
    }

    /// Client credentials in the remembered style, else each style in turn while the server
    /// refuses them (400/401); the style that worked is remembered.
    fn fetch_token(&self) -> Result<Token, ProviderError> {
        let mut response = None;
        for style in self.styles() {
            let r = self.token_request(style)?;
            let refused = matches!(r.status, 400 | 401);
            if (200..300).contains(&r.status) {
                *self.style.borrow_mut() = Some(style);
            }
            response = Some(r);
            if !refused {
                break;
            }
        }
        let Some(response) = response else {
            return Err(ProviderError::Permanent("no token request was made".into()));
        };
        if matches!(response.status, 400 | 401) {
            self.style.borrow_mut().take();
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

    /// `GET` a JSON document; `Err(status)` for a 403 or 404 (the caller decides what they
    /// mean), every other failure an error.
    pub fn get_or_status<T: DeserializeOwned>(
        &self,
        path: &str,
    ) -> Result<Result<T, u16>, ProviderError> {
        let response = self.send(|| http::get(self.url(path)))?;
        if matches!(response.status, 403 | 404) {
            return Ok(Err(response.status));
        }
        response.error_for_status()?.json().map(Ok)
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

    /// `POST` a JSON body, ignoring the response body; the statuses in `also_fine` count as
    /// success (e.g. 409 "already exists").
    pub fn post_accepting<B: Serialize>(
        &self,
        path: &str,
        body: &B,
        also_fine: &[u16],
    ) -> Result<(), ProviderError> {
        let response = self.send(|| http::post(self.url(path)).json(body))?;
        if also_fine.contains(&response.status) {
            return Ok(());
        }
        response.error_for_status()?;
        Ok(())
    }

    /// `PUT` a JSON body.
    pub fn put<B: Serialize>(&self, path: &str, body: &B) -> Result<(), ProviderError> {
        self.send(|| http::put(self.url(path)).json(body))?
            .error_for_status()?;
        Ok(())
    }

    /// `DELETE`. Every failure is an error, 404 included: the specs list no 404 for the
    /// deletes the driver sends (ipapi.spec.yaml `ipBlocksIpBlockIdDelete`, networkapi.spec.yaml
    /// `publicNetworksNetworkIdIpBlocksIpBlockIdDelete`), so a 404 is a wrong URL, not proof
    /// that the object is gone. The next list decides.
    pub fn delete(&self, path: &str) -> Result<(), ProviderError> {
        self.send(|| http::delete(self.url(path)))?
            .error_for_status()?;
        Ok(())
    }

    /// `POST` a JSON body, ignoring the response body; `Err(status)` for a 400 or 409 (the
    /// caller re-reads to learn what they mean), every other failure an error.
    pub fn post_or_status<B: Serialize>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<Result<(), u16>, ProviderError> {
        let response = self.send(|| http::post(self.url(path)).json(body))?;
        if matches!(response.status, 400 | 409) {
            return Ok(Err(response.status));
        }
        response.error_for_status()?;
        Ok(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(secret: &str) -> Api {
        let env = vec![
            ("PNAP_CLIENT_ID".to_string(), "id".to_string()),
            ("PNAP_CLIENT_SECRET".to_string(), secret.to_string()),
        ];
        Api::new(&Config::parse(b"", &env).expect("config"))
    }

    #[test]
    fn encoded_basic_first_raw_only_when_it_differs_remembered_style_first() {
        use AuthStyle::*;
        assert_eq!(api("plain").styles(), [EncodedBasic, FormFields]);
        let special = api("a+b%2Fc");
        assert_eq!(special.styles(), [EncodedBasic, RawBasic, FormFields]);
        *special.style.borrow_mut() = Some(RawBasic);
        assert_eq!(special.styles(), [RawBasic, EncodedBasic, FormFields]);
        *special.style.borrow_mut() = Some(FormFields);
        assert_eq!(special.styles(), [FormFields, EncodedBasic, RawBasic]);
    }
}
