//! OpenTelemetry traces end to end: the real `wasm-ccm run` binary with `--otlp-endpoint`, the
//! real cloudscale driver against its simulator and the Kubernetes simulator, and a real OTLP/HTTP
//! receiver on loopback decoding the collector protocol's protobuf. It checks the span tree
//! (reconcile → driver.call → http.client, and kube's requests under the reconcile), the
//! attributes, that no attribute carries a query string or a credential, that `traceparent`
//! reaches the cloud only when its origin is listed exactly, and that the reconcile's log lines
//! carry its trace ID.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::StatusCode;
use common::*;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use prost::Message as _;
use serde_json::json;
use wasm_ccm_sim::cloudscale::{CloudscaleOptions, CloudscaleSim, SeedServer};
use wasm_ccm_sim::kit::SimCloud as _;
use wasm_ccm_sim::kube::KubeSim;

/// One received span, flattened: ids in hex, attributes as text.
#[derive(Debug, Clone)]
struct Got {
    trace: String,
    id: String,
    parent: String,
    name: String,
    attrs: BTreeMap<String, String>,
}

impl Got {
    fn attr(&self, key: &str) -> &str {
        self.attrs.get(key).map(String::as_str).unwrap_or("")
    }
}

type Spans = Arc<Mutex<Vec<Got>>>;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(v: Option<&Any>) -> String {
    match v {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

/// An OTLP/HTTP receiver on loopback (`POST /v1/traces`, protobuf), keeping every span.
async fn receiver() -> (String, Spans) {
    let spans: Spans = Arc::default();
    let kept = Arc::clone(&spans);
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: Bytes| {
            let kept = Arc::clone(&kept);
            async move {
                let Ok(request) = ExportTraceServiceRequest::decode(body) else {
                    return StatusCode::BAD_REQUEST;
                };
                let mut kept = kept.lock().expect("spans");
                for rs in request.resource_spans {
                    for ss in rs.scope_spans {
                        for s in ss.spans {
                            kept.push(Got {
                                trace: hex(&s.trace_id),
                                id: hex(&s.span_id),
                                parent: hex(&s.parent_span_id),
                                name: s.name,
                                attrs: s
                                    .attributes
                                    .into_iter()
                                    .map(|kv| {
                                        let v = kv.value.and_then(|v| v.value);
                                        (kv.key, text(v.as_ref()))
                                    })
                                    .collect(),
                            });
                        }
                    }
                }
                StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind(localhost())
        .await
        .expect("bind the receiver");
    let addr = listener.local_addr().expect("receiver address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), spans)
}

struct Run {
    /// Kept alive for the run.
    _sim: KubeSim,
    cloud: CloudscaleSim,
    ccm: Ccm,
    spans: Spans,
    token: String,
}

/// The product traced into a fresh receiver, with `origins` as --trace-propagation-origins
/// (the cloud simulator's URL is written `{cloud}`, its port `{port}`), and a Service of type LoadBalancer.
async fn traced_run(origins: &[&str]) -> Run {
    let (otlp, spans) = receiver().await;
    let sim = KubeSim::start(localhost()).await.expect("kube sim");
    // The load balancer provisions for a second: the first ensure answers retry-after, so the
    // runner logs "work in progress" inside the reconcile.
    let cloud = CloudscaleSim::start(
        localhost(),
        CloudscaleOptions {
            lb_ready_after: Duration::from_secs(1),
            ..Default::default()
        },
    )
    .await
    .expect("cloudscale sim");
    cloud.add_server(
        SeedServer::new("worker-1")
            .public(&["5.102.148.11"])
            .private(
                "5c0ffee0-1111-4222-8333-944445555666",
                "10.1.1.0/24",
                &["10.1.1.11"],
            ),
    );
    sim.create(node("worker-1", None, true)).expect("node");
    let mut setup = cloud.driver_setup();
    // Batches leave every 100 ms instead of 5 s (the SDK's documented variable).
    setup
        .env
        .push(("OTEL_BSP_SCHEDULE_DELAY".into(), "100".into()));
    let origins: Vec<String> = origins
        .iter()
        .map(|o| {
            o.replace("{cloud}", &cloud.url())
                .replace("{port}", &port_of(&cloud.url()))
        })
        .collect();
    let mut args = vec!["--otlp-endpoint", otlp.as_str()];
    for o in &origins {
        args.extend(["--trace-propagation-origins", o.as_str()]);
    }
    let ccm = Ccm::start_setup(&sim, &setup, &args);
    sim.create(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
    }))
    .expect("service");
    eventually("load balancer status", || {
        service(&sim, "web").is_some_and(|s| ingress_ip(&s).is_some() && has_finalizer(&s))
    })
    .await;
    let token = cloud.token();
    Run {
        _sim: sim,
        cloud,
        ccm,
        spans,
        token,
    }
}

fn port_of(url: &str) -> String {
    url.rsplit(':')
        .next()
        .unwrap_or_default()
        .trim_end_matches('/')
        .to_string()
}

/// A reconcile of Service default/web, one of its `load-balancer.ensure` calls and one request
/// of that call, linked by parent IDs.
fn chain(spans: &[Got]) -> Option<(Got, Got, Got)> {
    spans
        .iter()
        .filter(|r| {
            r.name == "reconcile"
                && r.attr("wasm_ccm.controller") == "service"
                && r.attr("wasm_ccm.object.name") == "web"
        })
        .find_map(|r| {
            spans
                .iter()
                .filter(|d| {
                    d.name == "driver.call"
                        && d.parent == r.id
                        && d.attr("wasm_ccm.function") == "load-balancer.ensure"
                })
                .find_map(|d| {
                    let h = spans.iter().find(|h| {
                        h.attrs.contains_key("http.request.method") && h.parent == d.id
                    })?;
                    Some((r.clone(), d.clone(), h.clone()))
                })
        })
}

fn snapshot(spans: &Spans) -> Vec<Got> {
    spans.lock().expect("spans").clone()
}

fn ours(s: &Got) -> bool {
    matches!(s.name.as_str(), "reconcile" | "driver.call")
        || s.attrs.contains_key("http.request.method")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconcile_is_one_trace_down_to_each_cloud_request() {
    let run = traced_run(&["{cloud}"]).await;
    let cloud_port = port_of(&run.cloud.url());
    eventually("a reconcile → driver.call → http.client chain", || {
        chain(&snapshot(&run.spans)).is_some()
    })
    .await;
    let (r, d, h) = chain(&snapshot(&run.spans)).expect("chain");
    assert_eq!(r.parent, "", "a reconcile is a root span: {r:?}");
    assert_eq!(h.name, "http.client");
    assert_eq!(
        (d.trace.as_str(), h.trace.as_str()),
        (r.trace.as_str(), r.trace.as_str())
    );
    assert_eq!(r.attr("wasm_ccm.object.kind"), "Service");
    assert_eq!(r.attr("wasm_ccm.object.namespace"), "default");
    assert!(!r.attr("wasm_ccm.outcome").is_empty(), "{r:?}");
    assert_eq!(d.attr("wasm_ccm.driver"), "cloudscale");
    assert!(
        ["ok", "retry-after"].contains(&d.attr("wasm_ccm.outcome")),
        "{d:?}"
    );
    assert!(["GET", "POST", "PUT", "PATCH", "DELETE"].contains(&h.attr("http.request.method")));
    assert_eq!(h.attr("server.address"), "127.0.0.1");
    assert_eq!(h.attr("server.port"), cloud_port);
    assert_eq!(h.attr("url.scheme"), "http");
    assert!(!h.attr("http.response.status_code").is_empty(), "{h:?}");

    // The Kubernetes client's requests of the reconcile (the finalizer, the status) are its
    // children.
    eventually("a Kubernetes request under a service reconcile", || {
        let spans = snapshot(&run.spans);
        spans.iter().any(|k| {
            k.attrs.contains_key("http.method")
                && spans.iter().any(|r| {
                    r.name == "reconcile"
                        && r.attr("wasm_ccm.controller") == "service"
                        && k.parent == r.id
                })
        })
    })
    .await;

    // Every http.client span's parent is a driver call, and each call of a reconcile has it as
    // parent.
    let spans = snapshot(&run.spans);
    let by_id: BTreeMap<&str, &Got> = spans.iter().map(|s| (s.id.as_str(), s)).collect();
    for s in spans
        .iter()
        .filter(|s| s.attrs.contains_key("http.request.method"))
    {
        if let Some(p) = by_id.get(s.parent.as_str()) {
            assert_eq!(p.name, "driver.call", "{s:?} under {p:?}");
        }
    }

    // Nothing a span carries is a query string, a header value or the credential: neither ours
    // nor kube's, whose `http.url` loses its query (selectors, resourceVersion) before export.
    for s in &spans {
        for (k, v) in &s.attrs {
            assert!(!v.contains(&run.token), "{} {k} carries the token", s.name);
            assert!(!k.contains("header"), "{} has header attribute {k}", s.name);
            assert!(!v.contains('?'), "{} {k}={v:?} carries a query", s.name);
        }
    }
    assert!(
        spans
            .iter()
            .any(|s| !ours(s) && s.attr("http.url").contains("/api")),
        "kube's spans keep their URL's path"
    );

    // Each traced request to the listed origin carried its http.client span as parent.
    let requests = run.cloud.requests();
    let traced: Vec<&Got> = spans
        .iter()
        .filter(|s| {
            s.attrs.contains_key("http.request.method") && s.attr("server.port") == cloud_port
        })
        .collect();
    assert!(!traced.is_empty());
    for s in &traced {
        let expected = format!("00-{}-{}-01", s.trace, s.id);
        assert!(
            requests
                .iter()
                .any(|r| r.traceparent.as_deref() == Some(expected.as_str())),
            "no request to the cloud carried {expected}; requests: {:?}",
            requests
                .iter()
                .map(|r| (&r.path, &r.traceparent))
                .collect::<Vec<_>>()
        );
    }

    // The reconcile's log lines carry its trace ID.
    let traces: Vec<String> = spans
        .iter()
        .filter(|s| s.name == "reconcile" && s.attr("wasm_ccm.controller") == "service")
        .map(|s| s.trace.clone())
        .collect();
    eventually("a log line with a service reconcile's trace ID", || {
        let log = run.ccm.log();
        log.lines()
            .any(|l| traces.iter().any(|t| l.contains(&format!("trace_id={t}"))))
    })
    .await;
    // And nothing else of the trace: no span prefix in front of any line (the log is what it
    // is without tracing, plus `trace_id`).
    let log = run.ccm.log();
    for line in log.lines() {
        assert!(
            !line.contains("reconcile{") && !line.contains("driver.call{"),
            "a trace span in a log line: {line}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traceparent_goes_only_to_an_exactly_listed_origin() {
    // The same port under another host name, and another port: neither is the cloud's origin.
    let run = traced_run(&["http://localhost:{port}", "http://127.0.0.1:1"]).await;
    let cloud_port = port_of(&run.cloud.url());
    eventually("http.client spans of requests to the cloud", || {
        snapshot(&run.spans).iter().any(|s| {
            s.attrs.contains_key("http.request.method") && s.attr("server.port") == cloud_port
        })
    })
    .await;
    let requests = run.cloud.requests();
    assert!(!requests.is_empty());
    for r in &requests {
        assert_eq!(
            r.traceparent, None,
            "{} {} carried traceparent",
            r.method, r.path
        );
    }
    assert!(!run.ccm.log().is_empty());
}
