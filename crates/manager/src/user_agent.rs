//! The `User-Agent` of every Kubernetes request (Kubernetes API review D): operators see in the
//! apiserver's audit log which controller manager and which driver made a change, as with
//! upstream's `cloud-controller-manager/<version>`.
//!
//! kube-rs sets no user agent. [`with_user_agent`] wraps a client so that each request carries
//! one computed at request time; the controllers compute it from the driver in service, so a hot
//! reload shows up in the next request.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::header::{HeaderValue, USER_AGENT};
use http::{Request, Response};
use kube::Client;
use kube::client::Body;
use wasm_ccm_runtime::types::ProviderInfo;

/// This program's version (the workspace version `wasm-ccm` is built with).
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Longest driver name or version shown (the runtime refuses longer ones at load anyway).
const MAX_PART: usize = 64;

/// A driver-supplied part made safe for a header: at most 64 characters of `[A-Za-z0-9._+-]`,
/// anything else replaced by `_`.
fn token(value: &str) -> String {
    let t: String = value
        .chars()
        .take(MAX_PART)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if t.is_empty() { "unknown".into() } else { t }
}

/// `wasm-ccm/<version> (<driver>/<driver-version>)`, or `wasm-ccm/<version>` before a driver is
/// loaded.
pub fn user_agent(driver: Option<&ProviderInfo>) -> String {
    match driver {
        Some(info) => format!(
            "wasm-ccm/{VERSION} ({}/{})",
            token(&info.name),
            token(&info.version)
        ),
        None => format!("wasm-ccm/{VERSION}"),
    }
}

/// [`user_agent`] of a shadow run: `wasm-ccm/<version> (<driver>/<driver-version>; shadow)`, so
/// the apiserver's audit log tells its (read-only) requests from those of the CCM in charge.
pub fn shadow_user_agent(driver: &ProviderInfo) -> String {
    format!(
        "wasm-ccm/{VERSION} ({}/{}; shadow)",
        token(&driver.name),
        token(&driver.version)
    )
}

/// Computes the header value of each request.
pub type AgentFn = Arc<dyn Fn() -> String + Send + Sync>;

#[derive(Clone)]
struct WithUserAgent {
    inner: Client,
    agent: AgentFn,
}

impl tower_service::Service<Request<Body>> for WithUserAgent {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, kube::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // The inner client buffers and waits for readiness itself.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        // The outermost wrapper wins: an inner one (the CLI's, made before the driver was loaded)
        // leaves a user agent that is already there.
        if !request.headers().contains_key(USER_AGENT)
            && let Ok(value) = HeaderValue::from_str(&(self.agent)())
        {
            request.headers_mut().insert(USER_AGENT, value);
        }
        let inner = self.inner.clone();
        Box::pin(async move { inner.send(request).await })
    }
}

/// `client` with a `User-Agent` from `agent` on every request that has none yet.
pub fn with_user_agent(client: Client, agent: AgentFn) -> Client {
    let default_namespace = client.default_namespace().to_string();
    Client::new(
        WithUserAgent {
            inner: client,
            agent,
        },
        default_namespace,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, version: &str) -> ProviderInfo {
        ProviderInfo {
            name: name.into(),
            version: version.into(),
            provider_id_scheme: "x".into(),
            default_egress: Vec::new(),
            env_prefixes: Vec::new(),
            annotation_prefixes: Vec::new(),
            secrets: Vec::new(),
        }
    }

    #[test]
    fn names_the_program_and_the_driver() {
        assert_eq!(user_agent(None), format!("wasm-ccm/{VERSION}"));
        assert_eq!(
            user_agent(Some(&info("static", "0.1.0+build.1"))),
            format!("wasm-ccm/{VERSION} (static/0.1.0+build.1)")
        );
        assert_eq!(
            shadow_user_agent(&info("static", "0.1.0")),
            format!("wasm-ccm/{VERSION} (static/0.1.0; shadow)")
        );
    }

    #[test]
    fn hostile_driver_strings_stay_a_valid_short_header() {
        let agent = user_agent(Some(&info("a b\r\nX-Evil: 1", &"9".repeat(100_000))));
        assert!(HeaderValue::from_str(&agent).is_ok(), "{agent}");
        assert!(agent.len() < 160, "{agent}");
        assert!(agent.contains("(a_b__X-Evil__1/"), "{agent}");
        assert!(user_agent(Some(&info("", ""))).ends_with("(unknown/unknown)"));
    }
}
