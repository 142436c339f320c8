//! Faults injected in the host's HTTP layer, after the egress check: the driver sees exactly
//! what the host would hand it if the cloud (or the network) misbehaved.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use wasm_ccm_runtime::http::{Forward, HttpInterceptor, Intercepted, method_name};
use wasm_ccm_runtime::http::{HttpError, Response};

/// Seconds the injected 429 asks the driver to wait.
pub(super) const RETRY_AFTER_SECONDS: u32 = 7;

/// One way the cloud can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fault {
    ConnectTimeout,
    Http500,
    Http429,
    MalformedJson,
    TruncatedBody,
    SlowBody,
    Http401,
}

impl Fault {
    /// Every fault, in report order.
    pub(super) const ALL: [Fault; 7] = [
        Fault::ConnectTimeout,
        Fault::Http500,
        Fault::Http429,
        Fault::MalformedJson,
        Fault::TruncatedBody,
        Fault::SlowBody,
        Fault::Http401,
    ];

    /// The name used in check ids.
    pub(super) fn id(self) -> &'static str {
        match self {
            Fault::ConnectTimeout => "connect-timeout",
            Fault::Http500 => "http-500",
            Fault::Http429 => "http-429",
            Fault::MalformedJson => "malformed-json",
            Fault::TruncatedBody => "truncated-body",
            Fault::SlowBody => "slow-body",
            Fault::Http401 => "http-401",
        }
    }

    /// What the driver sees for a request, given the body a healthy cloud answered it with.
    fn answer(self, healthy_body: Option<&[u8]>, budget_ms: u128) -> Result<Response, HttpError> {
        let json = |status: u16, body: &[u8], extra: &[(&str, String)]| {
            let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
            headers.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
            Ok(Response {
                status,
                headers,
                body: body.to_vec(),
            })
        };
        match self {
            Fault::ConnectTimeout => Err(HttpError::Timeout(
                "could not connect within the connect timeout (injected by the conformance runner)"
                    .into(),
            )),
            Fault::Http500 => json(500, br#"{"detail":"Internal server error."}"#, &[]),
            Fault::Http429 => json(
                429,
                br#"{"detail":"Request was throttled."}"#,
                &[("retry-after", RETRY_AFTER_SECONDS.to_string())],
            ),
            Fault::MalformedJson => json(200, b"{\"items\": [oops, <html>", &[]),
            Fault::TruncatedBody => {
                // The healthy answer cut in half: a real document that ends mid-way.
                let body = healthy_body.unwrap_or(br#"{"items": [{"name": "trunc"#);
                let cut = body.len() / 2;
                json(200, &body[..cut], &[])
            }
            // The body starts but never completes before the request's time is spent; the host
            // then answers `timeout`. The runner answers at once instead of waiting it out.
            Fault::SlowBody => Err(HttpError::Timeout(format!(
                "the response body did not complete within {budget_ms} ms (injected by the conformance runner)"
            ))),
            Fault::Http401 => json(401, br#"{"detail":"Invalid token."}"#, &[]),
        }
    }
}

/// The interceptor of the driver the robustness checks call: passes requests to `inner` (the network, a
/// recorder or a replayer) and, while a fault is set, answers them with the fault instead. Healthy
/// bodies are remembered per request so a truncated body is a real one cut short.
pub(super) struct FaultLayer {
    inner: Option<Arc<dyn HttpInterceptor>>,
    fault: Mutex<Option<Fault>>,
    healthy: Mutex<HashMap<(String, String), Vec<u8>>>,
}

impl FaultLayer {
    /// A layer over `inner` (`None`: straight to the network).
    pub(super) fn new(inner: Option<Arc<dyn HttpInterceptor>>) -> FaultLayer {
        FaultLayer {
            inner,
            fault: Mutex::new(None),
            healthy: Mutex::default(),
        }
    }

    /// Sets (or clears) the fault for the requests that follow.
    pub(super) fn set(&self, fault: Option<Fault>) {
        if let Ok(mut f) = self.fault.lock() {
            *f = fault;
        }
    }

    fn current(&self) -> Option<Fault> {
        self.fault.lock().ok().and_then(|f| *f)
    }
}

impl HttpInterceptor for FaultLayer {
    fn intercept<'a>(&'a self, forward: Forward<'a>) -> Intercepted<'a> {
        let key = (
            method_name(forward.request().method).to_string(),
            forward.request().url.clone(),
        );
        if let Some(fault) = self.current() {
            let healthy = self.healthy.lock().ok().and_then(|h| h.get(&key).cloned());
            let answer = fault.answer(healthy.as_deref(), forward.budget().as_millis());
            return Box::pin(async move { answer });
        }
        Box::pin(async move {
            let result = match &self.inner {
                Some(inner) => inner.intercept(forward).await,
                None => forward.send().await,
            };
            if let Ok(r) = &result
                && r.status < 300
                && let Ok(mut h) = self.healthy.lock()
            {
                h.insert(key, r.body.clone());
            }
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_what_the_host_would_hand_over() {
        let r = Fault::Http429.answer(None, 1000).unwrap();
        assert_eq!(r.status, 429);
        assert!(
            r.headers
                .iter()
                .any(|(k, v)| k == "retry-after" && v == "7")
        );
        let t = Fault::TruncatedBody
            .answer(Some(br#"{"a": [1, 2, 3, 4]}"#), 1000)
            .unwrap();
        assert!(serde_json::from_slice::<serde_json::Value>(&t.body).is_err());
        assert!(
            serde_json::from_slice::<serde_json::Value>(
                &Fault::MalformedJson.answer(None, 1).unwrap().body
            )
            .is_err()
        );
        assert!(matches!(
            Fault::SlowBody.answer(None, 250),
            Err(HttpError::Timeout(m)) if m.contains("250 ms")
        ));
    }
}
