//! Clients against the TLS simulator (`KubeSim::start_tls`): kube-rs from the simulator's
//! kubeconfig (`certificate-authority-data`) and reqwest with `ca_pem()` verify its certificate
//! and authenticate with a bearer token; without the CA the handshake fails with a certificate
//! error and no request reaches the server.

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;
use wasm_ccm_sim::kube::KubeSim;

async fn tls_sim() -> KubeSim {
    let sim = KubeSim::start_tls("127.0.0.1:0".parse().expect("literal address"))
        .await
        .unwrap_or_else(|e| panic!("TLS simulator did not start: {e:#}"));
    sim.enable_rbac();
    sim.add_token("reader-token", "reader", &[]);
    sim.load_rbac(vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "node-reader"},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "reader-node-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "node-reader"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "reader"}]}),
    ])
    .expect("RBAC objects load");
    sim.seed(vec![
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}}),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-b"}}),
    ])
    .expect("seed");
    sim
}

async fn kube_config(sim: &KubeSim, token: &str) -> kube::Config {
    let kubeconfig =
        Kubeconfig::from_yaml(&sim.kubeconfig_for_token(token)).expect("kubeconfig parses");
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig is usable")
}

/// The error and its sources, one line.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

#[tokio::test]
async fn kube_rs_lists_nodes_over_tls_with_the_ca() {
    let sim = tls_sim().await;
    let config = kube_config(&sim, "reader-token").await;
    assert_eq!(config.cluster_url.scheme_str(), Some("https"));
    assert!(config.root_cert.is_some(), "the kubeconfig carries the CA");
    let client = kube::Client::try_from(config).expect("client");
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("list nodes over TLS: {}", chain(&e)));
    let names: Vec<_> = nodes
        .items
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    assert_eq!(names, ["node-a", "node-b"]);
    assert!(
        sim.requests().iter().any(|r| r.path == "/api/v1/nodes"
            && r.status == 200
            && r.authorization.as_deref() == Some("Bearer reader-token")),
        "the list was authenticated as reader"
    );

    // RBAC still applies over TLS: the reader may not delete.
    let denied = Api::<Node>::all(client)
        .delete("node-a", &Default::default())
        .await
        .expect_err("reader cannot delete nodes");
    match denied {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 403);
            assert_eq!(
                status.message,
                "nodes \"node-a\" is forbidden: User \"reader\" cannot delete resource \"nodes\" in API group \"\" at the cluster scope"
            );
        }
        other => panic!("expected a 403 Status, got {}", chain(&other)),
    }
}

#[tokio::test]
async fn kube_rs_without_the_ca_fails_with_a_certificate_error() {
    let sim = tls_sim().await;
    let mut config = kube_config(&sim, "reader-token").await;
    config.root_cert = None;
    let client = kube::Client::try_from(config).expect("client");
    let err = Api::<Node>::all(client)
        .list(&ListParams::default())
        .await
        .expect_err("an unknown CA must not be trusted");
    let text = chain(&err);
    assert!(
        text.contains("invalid peer certificate"),
        "a certificate error: {text}"
    );
    assert!(
        sim.requests().is_empty(),
        "no request got past the handshake: {:?}",
        sim.requests()
    );
}

#[tokio::test]
async fn reqwest_with_ca_pem_verifies_and_without_fails() {
    let sim = tls_sim().await;
    let ca = sim.ca_pem().expect("TLS mode has a CA");
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    let cert = reqwest::Certificate::from_pem(ca.as_bytes()).expect("CA PEM parses");
    let client = reqwest::Client::builder()
        .no_proxy()
        .add_root_certificate(cert)
        .build()
        .expect("client");
    // `localhost` is in the certificate as well as 127.0.0.1.
    let port = sim.addr().port();
    for base in [sim.url(), format!("https://localhost:{port}")] {
        let r = client
            .get(format!("{base}/api/v1/nodes/node-a"))
            .bearer_auth("reader-token")
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET over TLS at {base}: {}", chain(&e)));
        assert_eq!(r.status(), 200, "{base}");
    }
    let plain = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let err = plain
        .get(format!("{}/api/v1/nodes", sim.url()))
        .bearer_auth("reader-token")
        .send()
        .await
        .expect_err("an unknown CA must not be trusted");
    assert!(
        chain(&err).to_ascii_lowercase().contains("certificate"),
        "{}",
        chain(&err)
    );
    // A graceful shutdown stops the TLS listener too.
    let url = sim.url();
    sim.shutdown().await;
    assert!(
        client
            .get(format!("{url}/api/v1/nodes"))
            .bearer_auth("reader-token")
            .send()
            .await
            .is_err(),
        "nothing serves after shutdown"
    );
    // Plain HTTP start is unchanged.
    let http = KubeSim::start("127.0.0.1:0".parse().expect("literal address"))
        .await
        .expect("start");
    assert!(http.url().starts_with("http://"), "{}", http.url());
    assert!(http.ca_pem().is_none());
    assert!(!http.kubeconfig().contains("certificate-authority"));
}
