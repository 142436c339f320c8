//! What start-up reads of the cluster before the drivers' `init`: the API server's version
//! (checked against the supported minors) and the cluster's ID.

use wasm_ccm_manager::kubernetes_version;

/// Facts about the cluster a driver's `init` receives in its context.
#[derive(Debug, Clone, Default)]
pub struct ClusterFacts {
    /// The API server's `gitVersion`, e.g. `v1.31.2`.
    pub kubernetes_version: String,
    /// The UID of the `kube-system` namespace.
    pub cluster_id: String,
}

/// How long start-up keeps asking an API server that does not answer for the cluster facts.
const FACTS_PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

/// Reads the API server's version and the `kube-system` UID. Drivers use the version for
/// features such as `ipMode` (Kubernetes ≥ 1.30) and the UID to tag what they create
/// (PhoenixNAP's IP blocks). An API server that does not answer (a broken connection, 5xx, 429)
/// is asked again with backoff for up to a minute, then start-up fails: a driver started
/// without the cluster ID would fail every call until a restart (found by the soak: a replica
/// restarted during an apiserver restart). A definite refusal (e.g. 403) is logged and leaves
/// the fact empty, as before.
pub async fn cluster_facts(client: &kube::Client) -> anyhow::Result<ClusterFacts> {
    cluster_facts_within(client, FACTS_PATIENCE).await
}

/// [`cluster_facts`] with its patience as a parameter (tests).
pub async fn cluster_facts_within(
    client: &kube::Client,
    patience: std::time::Duration,
) -> anyhow::Result<ClusterFacts> {
    let deadline = tokio::time::Instant::now() + patience;
    let kubernetes_version = match ask_until(deadline, || client.apiserver_version()).await {
        Ok(info) => info.git_version,
        Err(e) if answered_for_good(&e) => {
            tracing::warn!(error = %e, "cannot read the API server version; the driver gets none");
            String::new()
        }
        Err(e) => anyhow::bail!(
            "the API server did not answer /version within {patience:?}: {e}; check that it is reachable (--kubeconfig, --master) and start again"
        ),
    };
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
        kube::Api::all(client.clone());
    let cluster_id = match ask_until(deadline, || namespaces.get_opt("kube-system")).await {
        Ok(ns) => ns.and_then(|ns| ns.metadata.uid).unwrap_or_default(),
        Err(e) if answered_for_good(&e) => {
            tracing::warn!(error = %e, "cannot read the kube-system namespace; the driver gets no cluster ID");
            String::new()
        }
        Err(e) => anyhow::bail!(
            "the API server did not answer for the kube-system namespace (the cluster ID) within {patience:?}: {e}; check that it is reachable and start again"
        ),
    };
    Ok(ClusterFacts {
        kubernetes_version,
        cluster_id,
    })
}

/// The start-up check of the API server's version against the supported Kubernetes minors
/// ([`wasm_ccm_controllers::kubernetes_version`]): outside them, one warning naming the
/// server's version, the supported range and what to do. It never refuses to start: a cluster
/// mid-upgrade, or one a release ahead of this wasm-ccm, may well work, and a CCM that stops
/// would take node initialisation and load balancers down with it; operators alert on
/// `wasm_ccm_kubernetes_version_supported` instead, which `run` sets from the same version.
pub fn announce_kubernetes_version(git_version: &str) {
    let support = kubernetes_version::Support::of(git_version);
    if let Some(warning) = support.warning(git_version) {
        tracing::warn!(
            server_version = %git_version,
            supported = %kubernetes_version::supported_range(),
            "{warning}"
        );
    }
}

/// A refusal asking again will not change: any 4xx but 429.
fn answered_for_good(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if (400..500).contains(&s.code) && s.code != 429)
}

/// Runs `ask` until it answers, fails for good, or `deadline` passes (0.5 s doubling to 8 s
/// between attempts); the last error when time is up.
async fn ask_until<T, F, Fut>(deadline: tokio::time::Instant, mut ask: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut wait = std::time::Duration::from_millis(500);
    loop {
        let e = match tokio::time::timeout_at(deadline, ask()).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) => e,
            Err(_) => {
                return Err(kube::Error::Service(
                    "no answer before the start-up deadline".into(),
                ));
            }
        };
        if answered_for_good(&e) || tokio::time::Instant::now() + wait >= deadline {
            return Err(e);
        }
        tracing::warn!(error = %e, retry_in = ?wait, "the API server did not answer; asking again");
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(std::time::Duration::from_secs(8));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn facts_sim() -> (wasm_ccm_sim::kube::KubeSim, kube::Client) {
        let sim = wasm_ccm_sim::kube::KubeSim::start("127.0.0.1:0".parse().expect("loopback"))
            .await
            .expect("simulator");
        let client = kube::Client::try_from(kube::Config::new(sim.url().parse().expect("url")))
            .expect("client");
        (sim, client)
    }

    #[tokio::test]
    async fn cluster_facts_wait_for_an_api_server_that_does_not_answer_yet() {
        use wasm_ccm_sim::kube::RequestMatcher;
        let (sim, client) = facts_sim().await;
        // Two 503s, then the answer: the cluster ID is read, not left empty.
        sim.faults()
            .fail_next(2, 503, RequestMatcher::resource("namespaces"));
        let facts = cluster_facts_within(&client, std::time::Duration::from_secs(20))
            .await
            .expect("facts");
        assert!(!facts.cluster_id.is_empty(), "{facts:?}");
        assert!(!facts.kubernetes_version.is_empty(), "{facts:?}");
        assert_eq!(sim.faults().pending(), 0, "both faults fired");

        // An API server that keeps failing ends start-up with a message, never an empty ID.
        sim.faults()
            .fail_next(1_000, 500, RequestMatcher::resource("namespaces"));
        let err = cluster_facts_within(&client, std::time::Duration::from_secs(2))
            .await
            .expect_err("no cluster ID");
        assert!(
            err.to_string()
                .contains("did not answer for the kube-system namespace"),
            "{err}"
        );
        sim.faults().clear();

        // A definite refusal (403) is not retried: the fact stays empty, start-up goes on.
        sim.faults()
            .fail_next(1, 403, RequestMatcher::resource("namespaces"));
        let facts = cluster_facts_within(&client, std::time::Duration::from_secs(20))
            .await
            .expect("facts");
        assert!(facts.cluster_id.is_empty(), "{facts:?}");
        assert_eq!(sim.faults().pending(), 0);
    }
}
