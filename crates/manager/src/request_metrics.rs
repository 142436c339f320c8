//! client-go's REST client metrics on every Kubernetes request of the process (the informers'
//! lists and watches, leader election, reviews, the controllers' writes): upstream's CCM exports
//! them through `k8s.io/component-base/metrics/prometheus/restclient` (v0.36.2), with
//! `rest_client_requests_total{code,method,host}` (`code` the HTTP status, `<error>` when no
//! answer came) and `rest_client_request_duration_seconds{verb,host}` (until the response's
//! headers: a watch is timed to its start, as client-go times it).
//!
//! A wrapper around the client's service, like [`crate::user_agent::with_user_agent`], rather
//! than a count in the write seam: the seam sees only the controllers' writes.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use kube::Client;
use kube::client::Body;
use tokio::time::Instant;
use wasm_ccm_controllers::Metrics;

#[derive(Clone)]
struct Counted {
    inner: Client,
    counted: RequestMetrics,
}

/// Where and under which `host` a client's requests are counted.
#[derive(Clone)]
pub struct RequestMetrics {
    host: String,
    metrics: Arc<Metrics>,
}

impl RequestMetrics {
    /// Counts in `metrics` with the label `host` (the API server's `host[:port]`).
    pub fn new(host: String, metrics: Arc<Metrics>) -> Self {
        RequestMetrics { host, metrics }
    }

    /// The registry counted in.
    pub fn registry(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// `client`, counting every request.
    pub fn wrap(&self, client: Client) -> Client {
        let default_namespace = client.default_namespace().to_string();
        Client::new(
            Counted {
                inner: client,
                counted: self.clone(),
            },
            default_namespace,
        )
    }
}

impl tower_service::Service<Request<Body>> for Counted {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, kube::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // The inner client buffers and waits for readiness itself.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let method = request.method().as_str().to_string();
        // The request's URI is relative here (the inner client adds the cluster's base URL
        // below this wrapper), so the host is the configured one.
        let host = self.counted.host.clone();
        let (inner, metrics) = (self.inner.clone(), Arc::clone(&self.counted.metrics));
        Box::pin(async move {
            let started = Instant::now();
            let result = inner.send(request).await;
            // At this depth every HTTP answer is `Ok` (kube-rs reads statuses into errors
            // later, in `Api`); an error is no answer at all.
            let code = match &result {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "<error>".to_string(),
            };
            metrics.inc(
                "rest_client_requests_total",
                &[("code", &code), ("method", &method), ("host", &host)],
            );
            metrics.observe(
                "rest_client_request_duration_seconds",
                &[("verb", &method), ("host", &host)],
                started.elapsed().as_secs_f64(),
            );
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Node;
    use kube::Api;
    use wasm_ccm_sim::kube::KubeSim;

    use super::*;

    /// Every request is counted with its real status, method and the given host, and timed.
    #[tokio::test]
    async fn requests_are_counted_by_code_method_and_host() {
        let sim = KubeSim::start("127.0.0.1:0".parse().expect("loopback"))
            .await
            .expect("simulator");
        let config = kube::Config::new(sim.url().parse().expect("URL"));
        let client = Client::try_from(config).expect("client");
        let metrics = Arc::new(Metrics::default());
        let client =
            RequestMetrics::new("api.example:6443".into(), Arc::clone(&metrics)).wrap(client);
        let nodes: Api<Node> = Api::all(client);
        nodes.list(&Default::default()).await.expect("list");
        let missing = nodes.get("nope").await.expect_err("404");
        assert!(
            matches!(missing, kube::Error::Api(ref s) if s.code == 404),
            "{missing:?}"
        );
        let text = metrics.render();
        for line in [
            r#"rest_client_requests_total{code="200",method="GET",host="api.example:6443"} 1"#,
            r#"rest_client_requests_total{code="404",method="GET",host="api.example:6443"} 1"#,
            r#"rest_client_request_duration_seconds_count{verb="GET",host="api.example:6443"} 2"#,
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        // No answer at all: `<error>`.
        drop(sim);
        let _ = nodes.list(&Default::default()).await;
        let text = metrics.render();
        assert!(text.contains(r#"code="<error>",method="GET""#), "{text}");
    }
}
