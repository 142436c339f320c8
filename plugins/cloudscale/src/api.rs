//! A small client for the cloudscale REST API over the host's `http` import.
//!
//! Errors keep the API's flat error body in the message. A 400 on a write is the API refusing a
//! value the operator chose (an annotation passed through), so it is `invalid-config`; the other
//! statuses map as the SDK maps them (404 `not-found`, 401/403 `unauthorized`, 429
//! `rate-limited`, 5xx `transient`).

use serde::Serialize;
use serde::de::DeserializeOwned;
use wasm_ccm_sdk::http::{self, RequestBuilder, Response};
use wasm_ccm_sdk::types::ProviderError;

use crate::config::Config;

/// The API client; cheap to clone.
#[derive(Clone, Debug)]
pub struct Api {
    base: String,
    token: String,
    timeout_ms: u32,
}

impl Api {
    /// A client for the configured API.
    pub fn new(config: &Config) -> Self {
        Self {
            base: config.api_url.clone(),
            token: config.token.clone(),
            timeout_ms: config.timeout_ms,
        }
    }

    /// `{base}/v1/{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("{}/v1/{path}", self.base)
    }

    fn send(&self, builder: RequestBuilder) -> Result<Response, ProviderError> {
        Ok(builder
            .bearer(&self.token)
            .header("accept", "application/json")
            .timeout_ms(self.timeout_ms)
            .send()?)
    }

    /// `GET` a JSON document.
    pub fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ProviderError> {
        self.send(http::get(self.url(path)))?
            .error_for_status()?
            .json()
    }

    /// `GET` a JSON document; `None` on 404.
    pub fn get_optional<T: DeserializeOwned>(
        &self,
        path: &str,
    ) -> Result<Option<T>, ProviderError> {
        match self.send(http::get(self.url(path)))?.error_for_status() {
            Ok(response) => response.json().map(Some),
            Err(ProviderError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `POST` a JSON body and decode the created object.
    pub fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ProviderError> {
        write_error(self.send(http::post(self.url(path)).json(body))?)?.json()
    }

    /// `PATCH` a JSON body; the response body is ignored.
    pub fn patch<B: Serialize>(&self, path: &str, body: &B) -> Result<(), ProviderError> {
        write_error(self.send(http::patch(self.url(path)).json(body))?)?;
        Ok(())
    }

    /// `DELETE` an object by its `href`, as upstream does; already gone counts as deleted.
    pub fn delete_href(&self, href: &str) -> Result<(), ProviderError> {
        if !href.starts_with(&self.base) {
            // An href elsewhere would send our token to another host.
            return Err(ProviderError::permanent(format!(
                "the API returned href {href:?} outside {}; refusing to send the token there",
                self.base
            )));
        }
        match write_error(self.send(http::delete(href))?) {
            Ok(_) | Err(ProviderError::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// The status error of a write, with 400 as `invalid-config`.
fn write_error(response: Response) -> Result<Response, ProviderError> {
    if response.status == 400 {
        return Err(ProviderError::invalid_config(format!(
            "the cloudscale API refused the request to {}: {}; check the k8s.cloudscale.ch/* \
             annotations of the Service",
            http::display_url(&response.url),
            http::body_snippet(&response.body)
        )));
    }
    response.error_for_status()
}
