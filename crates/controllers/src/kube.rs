//! The write seam: the Kubernetes client with `--kube-api-qps/burst` applied and requests
//! counted. Every write the controllers make goes through [`Kube::patch`],
//! [`Kube::patch_conditions`] or [`Kube::delete_node`], so shadow mode lives here (a shadow run
//! records the writes instead of sending them) and not in the controllers. Every call names its
//! controller, whose client it goes out on ([`ControllerClients::for_controller`]: its own
//! ServiceAccount's with `--use-service-account-credentials`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::Value;

use crate::clients::ControllerClients;

use crate::metrics::Metrics;
use crate::shadow::{KubeChange, Recorded, ShadowLog};
use wasm_ccm_runtime::TokenBucket;

/// The Kubernetes client with `--kube-api-qps/burst` applied and requests counted. Every write
/// the controllers make goes through [`Kube::patch`], [`Kube::patch_conditions`] or
/// [`Kube::delete_node`], so a shadow run can record them instead.
pub(crate) struct Kube {
    clients: ControllerClients,
    limiter: TokenBucket,
    metrics: Arc<Metrics>,
    shadow: Option<Arc<ShadowLog>>,
}

/// The object a controller writes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target<'a> {
    /// A Node by name.
    Node(&'a str),
    /// A Service.
    Service { namespace: &'a str, name: &'a str },
}

impl Target<'_> {
    fn kind(&self) -> &'static str {
        match self {
            Target::Node(_) => "Node",
            Target::Service { .. } => "Service",
        }
    }

    fn key(&self) -> String {
        match self {
            Target::Node(name) => name.to_string(),
            Target::Service { namespace, name } => format!("{namespace}/{name}"),
        }
    }
}

impl Kube {
    /// Wraps `clients`; with `shadow`, writes are recorded there instead of sent.
    pub(crate) fn new(
        clients: ControllerClients,
        qps: f32,
        burst: u32,
        metrics: Arc<Metrics>,
        shadow: Option<Arc<ShadowLog>>,
    ) -> Self {
        Kube {
            clients,
            limiter: TokenBucket::new(f64::from(qps), burst),
            metrics,
            shadow,
        }
    }

    /// Merge-patches `target` (its `status` subresource when `status`).
    pub(crate) async fn patch(
        &self,
        controller: &'static str,
        target: Target<'_>,
        patch: &Value,
        status: bool,
    ) -> Result<(), kube::Error> {
        let change = KubeChange::Patch { patch, status };
        self.write(controller, target, change, |dry_run| {
            let params = PatchParams {
                dry_run,
                ..Default::default()
            };
            let patch = Patch::Merge(patch);
            async move {
                match (target, status) {
                    (Target::Node(name), false) => self
                        .nodes(controller)
                        .patch(name, &params, &patch)
                        .await
                        .map(drop),
                    (Target::Node(name), true) => self
                        .nodes(controller)
                        .patch_status(name, &params, &patch)
                        .await
                        .map(drop),
                    (Target::Service { namespace, name }, false) => self
                        .services(controller, namespace)
                        .patch(name, &params, &patch)
                        .await
                        .map(drop),
                    (Target::Service { namespace, name }, true) => self
                        .services(controller, namespace)
                        .patch_status(name, &params, &patch)
                        .await
                        .map(drop),
                }
            }
        })
        .await
    }

    /// Strategic-merge-patches a Node's status conditions (merged by `type`, so the other
    /// conditions stay as the kubelet wrote them).
    pub(crate) async fn patch_conditions(
        &self,
        controller: &'static str,
        node: &str,
        patch: &Value,
    ) -> Result<(), kube::Error> {
        let change = KubeChange::Patch {
            patch,
            status: true,
        };
        self.write(controller, Target::Node(node), change, |dry_run| {
            let params = PatchParams {
                dry_run,
                ..Default::default()
            };
            async move {
                self.nodes(controller)
                    .patch_status(node, &params, &Patch::Strategic(patch))
                    .await
                    .map(drop)
            }
        })
        .await
    }

    /// Deletes a Node, preconditioned on its UID (a node re-registered under the same name
    /// meanwhile is left alone).
    pub(crate) async fn delete_node(
        &self,
        controller: &'static str,
        node: &str,
        uid: Option<&str>,
    ) -> Result<(), kube::Error> {
        let change = KubeChange::Delete { uid };
        self.write(controller, Target::Node(node), change, |dry_run| {
            let params = DeleteParams {
                dry_run,
                preconditions: Some(Preconditions {
                    uid: uid.map(str::to_string),
                    resource_version: None,
                }),
                ..Default::default()
            };
            async move { self.nodes(controller).delete(node, &params).await.map(drop) }
        })
        .await
    }

    /// Sends a write (`send(false)`), or in a shadow run records it, after sending it as a dry
    /// run (`send(true)`) when the apiserver should judge it. A shadow write always "succeeds":
    /// the controller goes on as though it had written, which is the state the report judges.
    async fn write<F, Fut>(
        &self,
        controller: &'static str,
        target: Target<'_>,
        change: KubeChange<'_>,
        send: F,
    ) -> Result<(), kube::Error>
    where
        F: FnOnce(bool) -> Fut,
        Fut: std::future::Future<Output = Result<(), kube::Error>>,
    {
        let verb = match change {
            KubeChange::Delete { .. } => "delete",
            KubeChange::Patch { .. } => "patch",
        };
        let Some(shadow) = &self.shadow else {
            return self.request(verb, send(false)).await;
        };
        let apiserver = if shadow.options().validate_on_server {
            Some(match self.request(verb, send(true)).await {
                Ok(()) => "accepted".to_string(),
                Err(kube::Error::Api(s)) => format!("refused ({}): {}", s.code, s.message),
                Err(e) => format!("not judged: {e}"),
            })
        } else {
            None
        };
        let recorded =
            shadow.record_kube(controller, target.kind(), &target.key(), change, apiserver);
        if recorded == Recorded::Changed {
            self.metrics.inc(
                "wasm_ccm_shadow_writes_total",
                &[("controller", controller), ("target", "kube")],
            );
            tracing::info!(
                controller,
                kind = target.kind(),
                object = %target.key(),
                verb,
                "shadow: would write (recorded, not sent)"
            );
        }
        Ok(())
    }

    /// Nodes, as `controller` reads and writes them.
    pub(crate) fn nodes(&self, controller: &'static str) -> Api<Node> {
        Api::all(self.clients.for_controller(controller))
    }

    /// Services of one namespace, as `controller` reads and writes them.
    pub(crate) fn services(&self, controller: &'static str, namespace: &str) -> Api<Service> {
        Api::namespaced(self.clients.for_controller(controller), namespace)
    }

    /// Runs one request after the rate limit and counts it by verb and code.
    pub(crate) async fn request<T>(
        &self,
        verb: &'static str,
        fut: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, kube::Error> {
        self.limiter.acquire().await;
        let result = fut.await;
        let code = match &result {
            Ok(_) => "2xx".to_string(),
            Err(kube::Error::Api(s)) => s.code.to_string(),
            Err(_) => "error".to_string(),
        };
        self.metrics.inc(
            "wasm_ccm_kube_requests_total",
            &[("verb", verb), ("code", &code)],
        );
        result
    }
}

/// Whether a Kubernetes error is HTTP `code`.
pub(crate) fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::config::ControllerConfig;
    use crate::test_support::{FakeCloud, test_ctx};

    /// `--kube-api-qps` and `--kube-api-burst`, as the controllers' settings carry them, pace the
    /// controllers' requests: `burst` go at once, then one every 1/qps (paused time; the
    /// requests are answered at once, without a server).
    #[tokio::test(start_paused = true)]
    async fn kube_api_qps_and_burst_pace_the_controllers_requests() {
        let config = ControllerConfig {
            kube_api_qps: 4.0,
            kube_api_burst: 3,
            ..ControllerConfig::default()
        };
        let url = "http://127.0.0.1:1".parse().expect("URL");
        let client = kube::Client::try_from(kube::Config::new(url)).expect("client");
        let (ctx, _, _) = test_ctx(&client, &Arc::new(FakeCloud::default()), config);
        let start = tokio::time::Instant::now();
        let mut sent = Vec::new();
        for _ in 0..7 {
            let answer = ctx.kube.request("get", async { Ok::<_, kube::Error>(()) });
            answer.await.expect("answered");
            // Whole milliseconds: the bucket's arithmetic is in floating point.
            sent.push((start.elapsed().as_secs_f64() * 1000.0).round());
        }
        let want = [0.0, 0.0, 0.0, 250.0, 500.0, 750.0, 1000.0];
        assert_eq!(sent, want, "ms after the first");
        let text = ctx.metrics.render();
        let counted = r#"wasm_ccm_kube_requests_total{verb="get",code="2xx"} 7"#;
        assert!(text.contains(counted), "{text}");
    }
}
