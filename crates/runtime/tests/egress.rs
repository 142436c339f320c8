//! Egress means what it says, proven with the hostile driver against servers on loopback: a
//! special address is judged by the grant that matched the URL (redirect hops included), metadata
//! endpoints and the host's own addresses stay closed under wide grants, IPv6 CIDR grants work, a
//! slow cloud ends as an HTTP `timeout` the driver answers, and oversized response heads are
//! `too-large`. Nothing leaves loopback: refused destinations are refused before any connection,
//! and the tests that aim at metadata endpoints or the host's addresses run with no network
//! behind the checks at all (`NoNetwork`), with a fixed list of host addresses.

mod common;

use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Reply, load, node_with, serve};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use wasm_ccm_drivers::HOSTILE_DRIVER;
use wasm_ccm_runtime::HostAddresses;
use wasm_ccm_runtime::http;
use wasm_ccm_runtime::http::Response;
use wasm_ccm_runtime::http::{Forward, HttpInterceptor, Intercepted};
use wasm_ccm_runtime::types::ProviderError;
use wasm_ccm_runtime::{CallError, CallScope, DriverOptions, HostError};

/// A server on `bind` that answers every connection with `response` and counts connections.
/// `None` when the address cannot be bound (e.g. no IPv6 loopback).
async fn serve_fixed(bind: &str, response: Vec<u8>) -> Option<(u16, Arc<AtomicUsize>)> {
    let listener = TcpListener::bind(bind).await.ok()?;
    let port = listener.local_addr().ok()?.port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let response = Arc::new(response);
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            let response = response.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let _ = sock.read(&mut buf).await;
                let _ = sock.write_all(&response).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    Some((port, hits))
}

fn ok_response(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn redirect_response(location: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    )
    .into_bytes()
}

/// What the hostile driver made of a GET of `url`: `Ok("status=… bytes=…")` or the HTTP error
/// it reported (`http-error <case>: <message>`).
async fn fetch(opts: DriverOptions, url: &str) -> Result<String, String> {
    fetch_with(&load(HOSTILE_DRIVER, opts).await, url).await
}

async fn fetch_with(driver: &wasm_ccm_runtime::Driver, url: &str) -> Result<String, String> {
    match driver
        .instance_metadata(
            &node_with("fetch", &[("url", url)]),
            &CallScope::object("test"),
        )
        .await
        .result
    {
        Ok(metadata) => Ok(metadata.instance_type),
        Err(CallError::Provider(ProviderError::Permanent(m))) => Err(m),
        Err(other) => panic!("expected the guest to report the outcome, got {other:?}"),
    }
}

fn granting(grants: &[String]) -> DriverOptions {
    DriverOptions {
        http: http::Config {
            egress: Some(wasm_ccm_runtime::EgressPolicy::parse(grants).expect("egress grants")),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_granted_on_one_port_is_not_reached_on_another_through_a_wildcard() {
    let (allowed, _) = serve_fixed("127.0.0.1:0", ok_response("allowed"))
        .await
        .expect("bind");
    let (forbidden, hits) = serve_fixed("127.0.0.1:0", ok_response("FORBIDDEN-REACHED"))
        .await
        .expect("bind");
    for grants in [
        [
            format!("http://127.0.0.1:{allowed}"),
            format!("http://*:{forbidden}"),
        ],
        [
            format!("http://localhost:{allowed}"),
            format!("http://*:{forbidden}"),
        ],
        [
            format!("http://127.0.0.0/8:{forbidden}"),
            format!("http://*:{forbidden}"),
        ],
    ] {
        let m = fetch(
            granting(&grants),
            &format!("http://localhost:{forbidden}/port-leak"),
        )
        .await
        .expect_err("refused");
        assert!(m.contains("http-error denied"), "{grants:?}: {m}");
        assert!(m.contains("loopback"), "{m}");
        assert!(
            m.contains(&format!("--allow-egress http://localhost:{forbidden}")),
            "{m}"
        );
    }
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "the forbidden server saw a connection"
    );
    // Granting the name itself is what opens it.
    let reached = fetch(
        granting(&[format!("http://localhost:{forbidden}")]),
        &format!("http://localhost:{forbidden}/"),
    )
    .await;
    assert_eq!(reached, Ok("status=200 bytes=17".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_hop_is_judged_by_the_grant_that_matched_it() {
    let (target, hits) = serve_fixed("127.0.0.1:0", ok_response("target"))
        .await
        .expect("bind");
    let (redirector, _) = serve_fixed(
        "127.0.0.1:0",
        redirect_response(&format!("http://localhost:{target}/")),
    )
    .await
    .expect("bind");
    // The hop passes the URL check (the wildcard matches the name), but the wildcard does not
    // open the loopback address the name resolves to.
    let m = fetch(
        granting(&[
            format!("http://127.0.0.1:{redirector}"),
            format!("http://*:{target}"),
        ]),
        &format!("http://127.0.0.1:{redirector}/"),
    )
    .await
    .expect_err("refused");
    assert!(
        m.contains("http-error denied") && m.contains("loopback"),
        "{m}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    // With the name granted the hop's connection is judged by its own grant, not the first URL's.
    let followed = fetch(
        granting(&[
            format!("http://127.0.0.1:{redirector}"),
            format!("http://localhost:{target}"),
        ]),
        &format!("http://127.0.0.1:{redirector}/"),
    )
    .await;
    assert_eq!(followed, Ok("status=200 bytes=6".to_string()));
}

/// Stands where the network would be: records every request that passed the egress checks and
/// answers it itself, so nothing is ever sent, not even if a check regressed. A test aiming at
/// a metadata endpoint or a host address then proves the refusal (nothing recorded) without a
/// packet able to leave.
#[derive(Default)]
struct NoNetwork {
    reached: Mutex<Vec<String>>,
}

impl NoNetwork {
    fn reached(&self) -> Vec<String> {
        self.reached
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl HttpInterceptor for NoNetwork {
    fn intercept<'a>(&'a self, forward: Forward<'a>) -> Intercepted<'a> {
        self.reached
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(forward.request().url.clone());
        // `forward` is dropped unsent.
        Box::pin(async {
            Ok(Response {
                status: 200,
                headers: Vec::new(),
                body: b"intercepted".to_vec(),
            })
        })
    }
}

/// Options granting `grants`, with no network behind the checks and `own` as the host's
/// addresses.
fn offline(grants: &[String], own: &[IpAddr], net: &Arc<NoNetwork>) -> DriverOptions {
    let mut opts = granting(grants);
    opts.http.host_addresses = HostAddresses::fixed(own.iter().copied());
    opts.http.interceptor = Some(net.clone());
    opts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_endpoints_stay_closed_under_wide_grants_and_no_denial_suggests_them() {
    for grants in [
        vec![],
        vec!["http://0.0.0.0/0:*".to_string()],
        vec!["http://169.254.0.0/16".to_string()],
        vec!["http://[::]/0:*".to_string()],
    ] {
        let net = Arc::new(NoNetwork::default());
        let driver = load(HOSTILE_DRIVER, offline(&grants, &[], &net)).await;
        for url in [
            "http://169.254.169.254/latest/meta-data/",
            "http://[::ffff:169.254.169.254]/latest/meta-data/",
            "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/",
            "http://[2002:a9fe:a9fe::1]/",
            "http://168.63.129.16/machine?comp=goalstate",
            "http://[fd00:ec2::254]/latest/meta-data/",
        ] {
            let m = fetch_with(&driver, url).await.expect_err("refused");
            assert!(m.contains("http-error denied"), "{grants:?} {url}: {m}");
            assert!(
                !m.contains("--allow-egress"),
                "{grants:?} {url}: a denial suggests granting a metadata endpoint: {m}"
            );
        }
        assert_eq!(
            net.reached(),
            Vec::<String>::new(),
            "{grants:?}: a metadata request passed the checks"
        );
    }
    // The same driver and grant do reach the (stand-in) network for a neighbour that is no
    // metadata endpoint: the refusals above are the checks', not the stand-in's.
    let net = Arc::new(NoNetwork::default());
    let driver = load(
        HOSTILE_DRIVER,
        offline(&["http://169.254.0.0/16".to_string()], &[], &net),
    )
    .await;
    let reached = fetch_with(&driver, "http://169.254.169.250/").await;
    assert_eq!(reached, Ok("status=200 bytes=11".to_string()));
    assert_eq!(net.reached(), ["http://169.254.169.250/"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hosts_own_addresses_stay_closed_under_a_range_grant() {
    // A fixed, non-empty list of this host's addresses: the test holds on any machine (a
    // loopback-only one included), and nothing is sent even if the check regressed.
    let own: [IpAddr; 3] = [
        "10.77.0.5".parse().expect("v4"),
        "198.51.100.20".parse().expect("v4"),
        "2a01:4f8::5".parse().expect("v6"),
    ];
    let grants = [
        "http://0.0.0.0/0:*".to_string(),
        "http://[::]/0:*".to_string(),
    ];
    let net = Arc::new(NoNetwork::default());
    let driver = load(HOSTILE_DRIVER, offline(&grants, &own, &net)).await;
    for ip in own {
        let host = match ip {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => format!("[{v6}]"),
        };
        let m = fetch_with(&driver, &format!("http://{host}:10250/pods"))
            .await
            .expect_err("refused");
        assert!(
            m.contains("http-error denied") && m.contains("the host wasm-ccm runs on"),
            "{ip}: {m}"
        );
    }
    assert_eq!(
        net.reached(),
        Vec::<String>::new(),
        "a request to the host's own address passed the checks"
    );
    // Their neighbours, not the host's, pass the same grants: the refusals are the list's.
    for neighbour in [
        "http://10.77.0.6:10250/pods",
        "http://[2a01:4f8::6]:10250/pods",
    ] {
        assert_eq!(
            fetch_with(&driver, neighbour).await,
            Ok("status=200 bytes=11".to_string()),
            "{neighbour}"
        );
    }
    assert_eq!(net.reached().len(), 2, "{:?}", net.reached());
}

/// Set to skip the IPv6 test on a machine without an IPv6 loopback (the test fails otherwise,
/// so a silent skip never passes for a run).
const NO_IPV6: &str = "WASM_CCM_TEST_NO_IPV6";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipv6_cidr_grants_reach_ipv6_loopback() {
    let Some((port, hits)) = serve_fixed("[::1]:0", ok_response("v6")).await else {
        assert!(
            std::env::var_os(NO_IPV6).is_some(),
            "cannot bind [::1]: this machine has no IPv6 loopback; set {NO_IPV6}=1 to skip this test knowingly"
        );
        return;
    };
    let reached = fetch(
        granting(&[format!("http://[::1]/128:{port}")]),
        &format!("http://[::1]:{port}/"),
    )
    .await;
    assert_eq!(reached, Ok("status=200 bytes=2".to_string()));
    let m = fetch(
        granting(&[format!("http://[fd00::]/8:{port}")]),
        &format!("http://[::1]:{port}/"),
    )
    .await
    .expect_err("refused");
    assert!(m.contains("http-error denied"), "{m}");
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_cloud_ends_as_an_http_timeout_not_a_host_deadline() {
    let port = serve(Reply::Hang).await;
    let driver = load(HOSTILE_DRIVER, {
        let mut opts = granting(&[format!("http://127.0.0.1:{port}")]);
        // The driver sets no timeout of its own: the host's 30 s default meets the deadline.
        // With 3 s left the request ends 1 s before the deadline (`request_budget`'s
        // smallest margin), which leaves the guest a whole second to answer; a deadline of
        // a few hundred milliseconds left it a race it could lose on a loaded machine.
        opts.pool.call_timeout = Duration::from_secs(3);
        opts
    })
    .await;
    let n = node_with(
        "fetch",
        &[("url", &format!("http://127.0.0.1:{port}/trickle"))],
    );
    let result = driver
        .instance_metadata(&n, &CallScope::object("test"))
        .await
        .result;
    match result {
        Err(CallError::Provider(ProviderError::Permanent(m))) => {
            assert!(m.contains("http-error timeout"), "{m}");
            assert!(m.contains("before the call's deadline"), "{m}");
        }
        Err(CallError::Host(e @ HostError::Deadline { .. })) => {
            panic!("the host deadline won the race: {e}")
        }
        other => panic!("expected an http timeout, got {other:?}"),
    }
    assert_eq!(driver.stats().deadlines.load(Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_response_heads_are_too_large() {
    // One header bigger than hyper's read buffer.
    let huge = serve(Reply::BigHeader(1 << 20)).await;
    // One header within hyper's buffer but over the host's 128 KiB cap.
    let big = serve(Reply::BigHeader(200 * 1024)).await;
    // Ten thousand small headers.
    let mut many = String::from("HTTP/1.1 200 OK\r\n");
    for i in 0..10_000 {
        many.push_str(&format!("x-h{i}: v\r\n"));
    }
    many.push_str("content-length: 0\r\nconnection: close\r\n\r\n");
    let (numerous, _) = serve_fixed("127.0.0.1:0", many.into_bytes())
        .await
        .expect("bind");
    for port in [huge, big, numerous] {
        let m = fetch(
            granting(&[format!("http://127.0.0.1:{port}")]),
            &format!("http://127.0.0.1:{port}/"),
        )
        .await
        .expect_err("refused");
        assert!(m.contains("http-error too-large"), "{m}");
    }
}
