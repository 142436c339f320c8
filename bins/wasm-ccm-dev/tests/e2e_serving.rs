//! End to end: `wasm-ccm run` serves `/metrics` like upstream's cloud-controller-manager. HTTPS
//! on --secure-port (a generated self-signed certificate, one from --cert-dir, or the given
//! --tls-cert-file), and `/metrics` only for a user the apiserver allows to `get` it: the CCM
//! asks the simulator with a TokenReview and a SubjectAccessReview, evaluated with the RBAC of
//! deploy/base plus a metrics reader's ClusterRole.

use std::path::Path;
use std::time::Instant;

mod common;

use common::rbac::*;
use common::*;
use serde_json::{Value, json};
use wasm_ccm_manager::server::TlsOptions;
use wasm_ccm_sim::kube::KubeSim;
use wasm_ccm_sim::static_cloud::StaticCloud;

const READER_TOKEN: &str = "reader-token";
const READER: &str = "system:serviceaccount:monitoring:prometheus";
const OTHER_TOKEN: &str = "other-token";
const OTHER: &str = "jane";

/// deploy/base/rbac.yaml plus a ClusterRole for scraping, bound to [`READER`] only.
fn rbac_objects() -> Vec<Value> {
    let mut objects = deploy_rbac();
    objects.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "metrics-reader"},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
    }));
    objects.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "metrics-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}],
    }));
    objects
}

/// A simulator with RBAC on and the three identities of these tests.
async fn serving_sim(objects: Vec<Value>) -> KubeSim {
    let reader_groups: &[&str] = &[
        "system:serviceaccounts",
        "system:serviceaccounts:monitoring",
    ];
    rbac_sim(
        objects,
        &[
            (READER_TOKEN, READER, reader_groups),
            (OTHER_TOKEN, OTHER, &[]),
        ],
    )
    .await
}

/// Starts the CCM serving on `port` with `extra` flags, as the ServiceAccount of deploy/base.
async fn start(sim: &KubeSim, dir: &Path, port: u16, extra: &[&str]) -> (Ccm, StaticCloud) {
    let (cloud, config) = static_cloud(vec![instance("n1", "10.0.0.1")]).await;
    let kubeconfig = service_account_kubeconfig(sim, dir);
    let port = port.to_string();
    let mut args = vec![
        "--kubeconfig",
        &kubeconfig,
        "--secure-port",
        &port,
        "--bind-address",
        "127.0.0.1",
        "--leader-elect=false",
        "--configure-cloud-routes=false",
    ];
    let egress = cloud.url();
    args.extend(["--allow-egress", &egress]);
    args.extend(extra);
    let ccm = Ccm::start(
        sim,
        wasm_ccm_drivers::STATIC_DRIVER,
        "static",
        &config,
        &args,
    );
    (ccm, cloud)
}

/// The status, body and served certificate (DER) of `GET path`, or `None` while the port does
/// not answer.
async fn get(port: u16, path: &str, token: Option<&str>) -> Option<(u16, String, Vec<u8>)> {
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .tls_info(true)
        .build()
        .expect("client");
    let mut req = client.get(format!("https://127.0.0.1:{port}{path}"));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.ok()?;
    let status = resp.status().as_u16();
    let cert = resp
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|i| i.peer_certificate())
        .map(<[u8]>::to_vec)
        .unwrap_or_default();
    let body = resp.text().await.unwrap_or_default();
    Some((status, body, cert))
}

/// Polls `/healthz` until it answers 200; the CCM's log on timeout.
async fn serving(ccm: &Ccm, port: u16) -> Vec<u8> {
    let started = Instant::now();
    loop {
        if let Some((200, _, cert)) = get(port, "/healthz", None).await {
            return cert;
        }
        assert!(
            started.elapsed() < WAIT,
            "/healthz never answered 200 over HTTPS; log:\n{}",
            ccm.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

async fn answer(port: u16, path: &str, token: Option<&str>) -> (u16, String) {
    let (status, body, _) = get(port, path, token).await.expect("an answer");
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_need_a_user_allowed_to_get_them() {
    let sim = serving_sim(rbac_objects()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let (ccm, _cloud) = start(&sim, dir.path(), port, &[]).await;
    serving(&ccm, port).await;

    // Anonymous: authenticated as system:anonymous, then denied by the SubjectAccessReview.
    let (status, body) = answer(port, "/metrics", None).await;
    assert_eq!(status, 403, "{body}");
    let status_obj: Value = serde_json::from_str(&body).expect("a Status");
    assert_eq!(status_obj["kind"], "Status");
    assert_eq!(status_obj["reason"], "Forbidden");
    assert_eq!(
        status_obj["message"],
        "forbidden: User \"system:anonymous\" cannot get path \"/metrics\""
    );

    // The reader's ClusterRole grants `get` on /metrics.
    let (status, body) = answer(port, "/metrics", Some(READER_TOKEN)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("wasm_ccm_driver_info"), "{body}");

    // A valid token of a user without the grant.
    let (status, body) = answer(port, "/metrics", Some(OTHER_TOKEN)).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains(&format!(
            "User \\\"{OTHER}\\\" cannot get path \\\"/metrics\\\""
        )),
        "{body}"
    );

    // An unknown token is never anonymous: 401, on the always-allowed paths too.
    let (status, body) = answer(port, "/metrics", Some("no-such-token")).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("\"reason\":\"Unauthorized\""), "{body}");
    assert_eq!(answer(port, "/healthz", Some("no-such-token")).await.0, 401);

    // The health paths need no token.
    for path in ["/healthz", "/livez", "/readyz"] {
        let started = Instant::now();
        loop {
            let (status, body) = answer(port, path, None).await;
            if status == 200 {
                break;
            }
            // /readyz is 503 until the caches synced, never 401/403.
            assert_eq!((path, status), ("/readyz", 503), "{body}");
            assert!(started.elapsed() < WAIT, "{path} never became 200");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    // The CCM asked the simulator as its ServiceAccount, allowed by deploy/base's rules.
    let decisions = sim.rbac_decisions();
    for resource in ["tokenreviews", "subjectaccessreviews"] {
        assert!(
            decisions.iter().any(|d| d.user == SA_USER
                && d.allowed
                && d.attributes.resource == resource
                && d.attributes.verb == "create"),
            "no allowed create {resource} by the CCM"
        );
    }
    // Reviews are cached (10 s, as upstream): back-to-back scrapes with one token ask once.
    let reviews = |r: &str| {
        sim.requests()
            .iter()
            .filter(|q| q.method == "POST" && q.path.ends_with(r))
            .count()
    };
    assert_eq!(answer(port, "/metrics", Some(READER_TOKEN)).await.0, 200);
    let before = (reviews("/tokenreviews"), reviews("/subjectaccessreviews"));
    for _ in 0..3 {
        assert_eq!(answer(port, "/metrics", Some(READER_TOKEN)).await.0, 200);
    }
    let after = (reviews("/tokenreviews"), reviews("/subjectaccessreviews"));
    assert_eq!(before, after, "cached reviews");
    // At least the reader, the other user and the unknown token; anonymous, reader and other.
    assert!(after.0 >= 3 && after.1 >= 3, "{after:?}");

    let text = answer(port, "/metrics", Some(READER_TOKEN)).await.1;
    let after = (reviews("/tokenreviews"), reviews("/subjectaccessreviews"));
    assert_eq!(
        metric(
            &text,
            "apiserver_delegated_authn_request_total{code=\"201\"}"
        ),
        Some(after.0 as f64),
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            "apiserver_delegated_authz_request_total{code=\"201\"}"
        ),
        Some(after.1 as f64),
        "{text}"
    );
    // Each review's time, upstream's histograms: one observation per review sent.
    assert_eq!(
        metric(
            &text,
            "apiserver_delegated_authn_request_duration_seconds_count{code=\"201\"}"
        ),
        Some(after.0 as f64),
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            "apiserver_delegated_authz_request_duration_seconds_count{code=\"201\"}"
        ),
        Some(after.1 as f64),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("wasm_ccm_serving_requests_total{")
                && l.contains("code=\"403\"")
                && l.contains("path=\"/metrics\"")),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_review_is_not_an_open_door() {
    // The CCM's account lacks the review rights: the reviews are 403s.
    let mut objects = rbac_objects();
    for o in objects.iter_mut().filter(|o| o["kind"] == "ClusterRole") {
        if let Some(rules) = o["rules"].as_array_mut() {
            rules.retain(|r| {
                r["resources"] != json!(["tokenreviews"])
                    && r["resources"] != json!(["subjectaccessreviews"])
            });
        }
    }
    let sim2 = serving_sim(objects).await;
    let dir2 = tempfile::tempdir().expect("tempdir");
    let port2 = free_port();
    let (ccm2, _cloud2) = start(&sim2, dir2.path(), port2, &[]).await;
    serving(&ccm2, port2).await;
    // No TokenReview: 401 (never anonymous). No SubjectAccessReview: 500.
    assert_eq!(answer(port2, "/metrics", Some(READER_TOKEN)).await.0, 401);
    let (status, body) = answer(port2, "/metrics", None).await;
    assert_eq!(status, 500, "{body}");
    assert!(
        body.starts_with("Internal Server Error: \"/metrics\""),
        "{body}"
    );
    // The always-allowed paths need no review.
    assert_eq!(answer(port2, "/healthz", None).await.0, 200);
}

/// The first certificate of a PEM file, as DER.
fn first_cert(path: &Path) -> Vec<u8> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_file_iter(path)
        .expect("PEM file")
        .next()
        .expect("a certificate")
        .expect("valid PEM")
        .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cert_dir_pair_is_written_and_reused_and_given_files_are_served() {
    let sim = serving_sim(rbac_objects()).await;
    let work = tempfile::tempdir().expect("tempdir");
    let certs = work.path().join("certs");
    let certs_arg = certs.display().to_string();

    // --cert-dir: a pair named like upstream's is generated there and served.
    let port = free_port();
    let (ccm, _cloud) = start(&sim, work.path(), port, &["--cert-dir", &certs_arg]).await;
    let served = serving(&ccm, port).await;
    let crt = certs.join("cloud-controller-manager.crt");
    let key = certs.join("cloud-controller-manager.key");
    assert!(crt.exists() && key.exists(), "{}", ccm.log());
    assert_eq!(served, first_cert(&crt));
    let written = std::fs::read(&crt).expect("crt");
    drop(ccm);

    // A restart reuses it.
    let port = free_port();
    let (ccm, _cloud) = start(&sim, work.path(), port, &["--cert-dir", &certs_arg]).await;
    assert_eq!(serving(&ccm, port).await, first_cert(&crt));
    assert_eq!(
        std::fs::read(&crt).expect("crt"),
        written,
        "not regenerated"
    );
    drop(ccm);

    // Given files win over --cert-dir.
    let own = work.path().join("own");
    TlsOptions {
        cert_dir: Some(own.clone()),
        ..Default::default()
    }
    .serving_cert()
    .expect("a pair of our own");
    let (own_crt, own_key) = (own.join("tls.crt"), own.join("tls.key"));
    std::fs::rename(own.join("cloud-controller-manager.crt"), &own_crt).expect("rename");
    std::fs::rename(own.join("cloud-controller-manager.key"), &own_key).expect("rename");
    let (crt_arg, key_arg) = (own_crt.display().to_string(), own_key.display().to_string());
    let port = free_port();
    let (ccm, _cloud) = start(
        &sim,
        work.path(),
        port,
        &[
            "--cert-dir",
            &certs_arg,
            "--tls-cert-file",
            &crt_arg,
            "--tls-private-key-file",
            &key_arg,
        ],
    )
    .await;
    let served = serving(&ccm, port).await;
    assert_eq!(served, first_cert(&own_crt));
    assert_ne!(served, first_cert(&crt));
    drop(ccm);

    // A certificate file that is not one: a startup error naming it.
    let bad = work.path().join("bad.crt");
    std::fs::write(&bad, "not a certificate\n").expect("write");
    let bad_arg = bad.display().to_string();
    let (mut ccm, _cloud) = start(
        &sim,
        work.path(),
        free_port(),
        &[
            "--tls-cert-file",
            &bad_arg,
            "--tls-private-key-file",
            &key_arg,
        ],
    )
    .await;
    let code = ccm.wait_exit();
    assert!(matches!(code, Some(c) if c != 0), "exit {code:?}");
    let log = ccm.log();
    assert!(
        log.contains("bad.crt") && log.contains("serving certificate"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_serving_flags_are_accepted_and_the_cache_ttls_honoured() {
    let sim = serving_sim(rbac_objects()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = dir.path().join("ca.crt").display().to_string();
    let port = free_port();
    // What an upstream manifest may pass; the caches off, TLS 1.3 only.
    let (ccm, _cloud) = start(
        &sim,
        dir.path(),
        port,
        &[
            "--authentication-token-webhook-cache-ttl=0s",
            "--authorization-webhook-cache-authorized-ttl=0",
            "--authorization-webhook-cache-unauthorized-ttl=10s",
            "--tls-min-version=VersionTLS13",
            "--tls-cipher-suites=TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384",
            "--client-ca-file",
            &ca,
            "--requestheader-client-ca-file",
            &ca,
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-username-headers=X-Remote-User",
            "--authentication-skip-lookup",
            "--authentication-tolerate-lookup-failure=false",
            // Upstream's deprecated and node-IPAM flags: accepted, each with its warning.
            "--external-cloud-volume-plugin=gce",
            "--allow-untagged-cloud",
            "--node-sync-period=10s",
            "--allocate-node-cidrs=true",
            "--cidr-allocator-type=RangeAllocator",
        ],
    )
    .await;
    serving(&ccm, port).await;
    let log = ccm.log();
    for flag in [
        "--client-ca-file",
        "--requestheader-username-headers",
        "--external-cloud-volume-plugin",
        "--allow-untagged-cloud",
        "--node-sync-period",
        "--allocate-node-cidrs",
    ] {
        assert!(
            log.lines()
                .any(|l| l.contains(flag) && l.contains("no effect")),
            "no warning about {flag}: {log}"
        );
    }

    // TLS 1.2 is refused, 1.3 served.
    let tls12 = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .max_tls_version(reqwest::tls::Version::TLS_1_2)
        .build()
        .expect("client");
    assert!(
        tls12
            .get(format!("https://127.0.0.1:{port}/healthz"))
            .send()
            .await
            .is_err(),
        "a TLS 1.2 client was served"
    );

    // No token cache and no cache of allowed answers: each scrape asks again; denials are
    // still cached.
    let reviews = |r: &str| {
        sim.requests()
            .iter()
            .filter(|q| q.method == "POST" && q.path.ends_with(r))
            .count()
    };
    assert_eq!(answer(port, "/metrics", Some(READER_TOKEN)).await.0, 200);
    assert_eq!(answer(port, "/metrics", None).await.0, 403);
    let before = (reviews("/tokenreviews"), reviews("/subjectaccessreviews"));
    for _ in 0..3 {
        assert_eq!(answer(port, "/metrics", Some(READER_TOKEN)).await.0, 200);
        assert_eq!(answer(port, "/metrics", None).await.0, 403);
    }
    let after = (reviews("/tokenreviews"), reviews("/subjectaccessreviews"));
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (3, 3),
        "uncached token reviews and allowed decisions, cached denials"
    );
    drop(ccm);

    // TLS 1.0 and 1.1 cannot be served: a startup error that says so.
    let (mut ccm, _cloud) = start(
        &sim,
        dir.path(),
        free_port(),
        &["--tls-min-version=VersionTLS10"],
    )
    .await;
    let code = ccm.wait_exit();
    assert!(matches!(code, Some(c) if c != 0), "exit {code:?}");
    let log = ccm.log();
    assert!(
        log.contains("--tls-min-version=VersionTLS10 is not supported"),
        "{log}"
    );
}
