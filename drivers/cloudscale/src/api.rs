//! A small client for the cloudscale REST API over the host's `http` import.
//!
//! Errors keep the API's flat error body in the message. A 400 on a write is the API refusing a
//! value the operator chose (an annotation passed through), so it is `invalid-config`, unless it
//! says the load balancer is `changing` (`retry-after`, see [`write_error`]); the other statuses
//! map as the SDK maps them (404 `not-found`, 401/403 `unauthorized`, 429 `rate-limited`, 5xx
//! `transient`), with 409/423 `transient`.

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
        decode(&self.send(http::get(self.url(path)))?.error_for_status()?)
    }

    /// `GET` a JSON document; `None` on 404.
    pub fn get_optional<T: DeserializeOwned>(
        &self,
        path: &str,
    ) -> Result<Option<T>, ProviderError> {
        match self.send(http::get(self.url(path)))?.error_for_status() {
            Ok(response) => decode(&response).map(Some),
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
        decode(&write_error(
            self.send(http::post(self.url(path)).json(body))?,
        )?)
    }

    /// `PATCH` a JSON body; the response body is ignored.
    pub fn patch<B: Serialize>(&self, path: &str, body: &B) -> Result<(), ProviderError> {
        write_error(self.send(http::patch(self.url(path)).json(body))?)?;
        Ok(())
    }

    /// `DELETE` an object by its `href`, as upstream does; already gone counts as deleted.
    pub fn delete_href(&self, href: &str) -> Result<(), ProviderError> {
        // Prefix with the path, so `https://api.cloudscale.ch.evil/…` or `…@evil/…` do not pass.
        if !href.starts_with(&format!("{}/v1/", self.base)) {
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

/// Decodes a response with `null` read as "absent", so every field takes its default, as Go's
/// decoder reads `null` as the zero value: one `null` must not make a whole list unreadable.
fn decode<T: DeserializeOwned>(response: &Response) -> Result<T, ProviderError> {
    let mut value: serde_json::Value = response.json()?;
    strip_nulls(&mut value);
    serde_json::from_value(value).map_err(|e| {
        ProviderError::transient(format!(
            "unexpected response from {}: {e}; body: {}",
            http::display_url(&response.url),
            http::body_snippet(&response.body)
        ))
    })
}

fn strip_nulls(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// The status error of a write.
///
/// How the real API refuses a change to a busy (`changing`) load balancer is not documented
/// (review 2026-11-23, finding 6 and "Limits"); the simulator answers 400
/// `{"detail": "Load balancer is currently changing, try again later."}`. So any 4xx other than
/// 401/403/404/429 whose body mentions `changing` is `retry-after`, 409 and 423 (a conflict or
/// lock, the other plausible answers) are `transient`, and [`crate::reconcile`] re-reads the
/// load balancer after any other refused write and turns it into `retry-after` when the load
/// balancer is `changing`. The remaining 400s are the API refusing a value the operator chose.
fn write_error(response: Response) -> Result<Response, ProviderError> {
    let status = response.status;
    let url = http::display_url(&response.url);
    let body = http::body_snippet(&response.body);
    if (400..500).contains(&status)
        && !matches!(status, 401 | 403 | 404 | 429)
        && says_busy(&response.body)
    {
        return Err(ProviderError::retry_after(
            crate::reconcile::BUSY_RETRY_SECONDS,
            format!("the load balancer is busy: HTTP {status} from {url}: {body}"),
        ));
    }
    match status {
        400 => Err(ProviderError::invalid_config(format!(
            "the cloudscale API refused the request to {url}: {body}; check the \
             k8s.cloudscale.ch/* annotations of the Service"
        ))),
        409 | 423 => Err(ProviderError::transient(format!(
            "{CONFLICT_PREFIX}the cloudscale API answered HTTP {status} to {url}: {body}; \
             another client changed the same object at the same time, so the state is read \
             again and the change retried"
        ))),
        _ => response.error_for_status(),
    }
}

/// How a 409 or 423 answer's error message starts; [`is_conflict`] recognises it.
const CONFLICT_PREFIX: &str = "conflict: ";

/// Whether `e` is a write the API refused with 409 or 423: a race with another client, which is
/// a reason to read the state again, never a definite failure.
pub fn is_conflict(e: &ProviderError) -> bool {
    matches!(e, ProviderError::Transient(m) if m.starts_with(CONFLICT_PREFIX))
}

/// Whether an error body says the object is `changing` (the word the API uses for a busy load
/// balancer's status).
fn says_busy(body: &[u8]) -> bool {
    String::from_utf8_lossy(body)
        .to_ascii_lowercase()
        .contains("changing")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Listener;

    #[test]
    fn nulls_read_as_defaults() {
        let response = Response {
            url: "https://api.cloudscale.ch/v1/load-balancers/listeners".into(),
            status: 200,
            headers: vec![],
            body: br#"[{"uuid": "l1", "name": null, "pool": null, "allowed_cidrs": null, "protocol_port": 80}]"#
                .to_vec(),
        };
        let listeners: Vec<Listener> = decode(&response).unwrap();
        assert_eq!(listeners[0].name, "");
        assert_eq!(listeners[0].pool, None);
        assert!(listeners[0].allowed_cidrs.is_empty());
        assert_eq!(listeners[0].protocol_port, 80);
    }

    fn answer(status: u16, body: &str) -> Response {
        Response {
            url: "https://api.cloudscale.ch/v1/load-balancers/pools".into(),
            status,
            headers: vec![],
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn busy_answers_are_retried() {
        for status in [400, 409, 423, 422] {
            let e = write_error(answer(
                status,
                r#"{"detail": "Load balancer is currently changing, try again later."}"#,
            ))
            .unwrap_err();
            assert!(matches!(e, ProviderError::RetryAfter(_)), "{status}: {e}");
        }
        let e = write_error(answer(400, r#"{"algorithm": ["not a valid choice"]}"#)).unwrap_err();
        assert!(matches!(e, ProviderError::InvalidConfig(_)), "{e}");
        for status in [409, 423] {
            let e = write_error(answer(status, "{}")).unwrap_err();
            assert!(matches!(e, ProviderError::Transient(_)), "{status}: {e}");
            assert!(is_conflict(&e), "{status}: {e}");
        }
        let other = write_error(answer(500, "{}")).unwrap_err();
        assert!(!is_conflict(&other), "{other}");
        let e = write_error(answer(404, "changing")).unwrap_err();
        assert!(matches!(e, ProviderError::NotFound(_)), "{e}");
        assert!(write_error(answer(201, "{}")).is_ok());
    }
}
