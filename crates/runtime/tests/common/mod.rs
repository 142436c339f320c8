//! Helpers shared by the runtime's integration tests.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use wasm_ccm_runtime::types::{EnsureResult, Node, Service, SessionAffinity, TrafficPolicy};
use wasm_ccm_runtime::{
    Compiled, Compiler, Driver, DriverOptions, EngineOptions, Runtime, RuntimeOptions,
};

/// One runtime per test process (like the real host); no disk cache.
///
/// Its compiler is Cranelift, not the host's tiered default, so that every test runs one known
/// build: a swap in the middle of a test would retire warm instances that a test counts or keeps
/// state in. `WASM_CCM_TEST_COMPILER=winch` runs the same tests on Winch code (`tiers.rs` covers
/// the tiered host and Winch's share of the sandbox in every run).
pub(crate) fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let compiler = match std::env::var("WASM_CCM_TEST_COMPILER").as_deref() {
            Ok("winch") => Compiler::Winch,
            Ok("tiered") => Compiler::Tiered,
            _ => Compiler::Cranelift,
        };
        runtime_with(compiler)
    })
}

/// A runtime with `compiler` and no disk cache.
pub(crate) fn runtime_with(compiler: Compiler) -> Runtime {
    Runtime::new(RuntimeOptions {
        engine: EngineOptions {
            compiler,
            ..Default::default()
        },
        cache_dir: None,
    })
    .expect("runtime")
}

pub(crate) async fn compile(path: &str) -> Compiled {
    runtime()
        .compile_file(std::path::Path::new(path))
        .await
        .expect("compiles")
}

pub(crate) async fn load(path: &str, opts: DriverOptions) -> Driver {
    let compiled = compile(path).await;
    runtime().load(&compiled, opts).await.expect("loads")
}

pub(crate) fn node(name: &str) -> Node {
    Node {
        name: name.into(),
        uid: format!("uid-{name}"),
        provider_id: String::new(),
        labels: Vec::new(),
        annotations: Vec::new(),
        addresses: Vec::new(),
        taints: Vec::new(),
        ready: true,
    }
}

/// A Service of type LoadBalancer in `default` without ports, annotations or status.
pub(crate) fn lb_service(name: &str, uid: &str) -> Service {
    Service {
        namespace: "default".into(),
        name: name.into(),
        uid: uid.into(),
        labels: vec![],
        annotations: vec![],
        ports: vec![],
        external_traffic_policy: TrafficPolicy::Cluster,
        health_check_node_port: 0,
        load_balancer_ip: None,
        load_balancer_source_ranges: vec![],
        session_affinity: SessionAffinity::None,
        session_affinity_timeout: None,
        ip_families: vec![],
        load_balancer_class: None,
        ingress: vec![],
    }
}

/// The Service as the host leaves it after a successful ensure: annotations set, ingress
/// written.
pub(crate) fn apply(mut svc: Service, r: &EnsureResult) -> Service {
    for (k, v) in &r.set_annotations {
        svc.annotations.retain(|(key, _)| key != k);
        svc.annotations.push((k.clone(), v.clone()));
    }
    svc.ingress = r.ingress.clone();
    svc
}

pub(crate) fn node_with(name: &str, annotations: &[(&str, &str)]) -> Node {
    let mut n = node(name);
    n.annotations = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    n
}

/// What the loopback test server answers.
#[derive(Clone, Copy)]
pub(crate) enum Reply {
    /// 200 with a body of this many bytes.
    Body(usize),
    /// Accept, read the request, never answer.
    Hang,
    /// 302 to `http://127.0.0.1:<port>/`.
    RedirectTo(u16),
    /// 200 with a header of this many bytes.
    BigHeader(usize),
}

/// Serves every connection on 127.0.0.1 with `reply`; returns the port.
pub(crate) async fn serve(reply: Reply) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    let held = Arc::new(tokio::sync::Mutex::new(Vec::new()));
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let held = held.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let _ = sock.read(&mut buf).await;
                match reply {
                    Reply::Body(n) => {
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {n}\r\ncontent-type: application/octet-stream\r\nconnection: close\r\n\r\n"
                        );
                        let _ = sock.write_all(head.as_bytes()).await;
                        let _ = sock.write_all(&vec![b'x'; n]).await;
                    }
                    Reply::Hang => held.lock().await.push(sock),
                    Reply::BigHeader(n) => {
                        let head = format!(
                            "HTTP/1.1 200 OK\r\nx-big: {}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                            "y".repeat(n)
                        );
                        let _ = sock.write_all(head.as_bytes()).await;
                    }
                    Reply::RedirectTo(port) => {
                        let head = format!(
                            "HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:{port}/\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                        );
                        let _ = sock.write_all(head.as_bytes()).await;
                    }
                }
            });
        }
    });
    port
}

/// A stateful inventory service for the static driver's inventory mode, on 127.0.0.1:
/// `GET /instances`, `GET /routes`, `PUT /routes/{name}`, `DELETE /routes/{name}` (404 when
/// absent). Records every request as `METHOD path authorization`.
pub(crate) struct Inventory {
    pub(crate) port: u16,
    pub(crate) routes: Arc<std::sync::Mutex<std::collections::BTreeMap<String, serde_json::Value>>>,
    pub(crate) requests: Arc<std::sync::Mutex<Vec<String>>>,
}

pub(crate) async fn inventory(instances: serde_json::Value) -> Inventory {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    let routes = Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::new()));
    let requests = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (r, q) = (routes.clone(), requests.clone());
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let (routes, requests, instances) = (r.clone(), q.clone(), instances.clone());
            tokio::spawn(async move {
                let _ = serve_inventory(sock, routes, requests, instances).await;
            });
        }
    });
    Inventory {
        port,
        routes,
        requests,
    }
}

async fn serve_inventory(
    mut sock: tokio::net::TcpStream,
    routes: Arc<std::sync::Mutex<std::collections::BTreeMap<String, serde_json::Value>>>,
    requests: Arc<std::sync::Mutex<Vec<String>>>,
    instances: serde_json::Value,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    loop {
        // Read one request: head, then content-length bytes of body.
        let head_end = loop {
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            let mut chunk = [0u8; 4096];
            let n = sock.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
        let mut lines = head.lines();
        let mut first = lines.next().unwrap_or_default().split(' ');
        let (method, path) = (
            first.next().unwrap_or_default().to_string(),
            first.next().unwrap_or_default().to_string(),
        );
        let header = |name: &str| {
            head.lines().find_map(|l| {
                l.split_once(':')
                    .filter(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.trim().to_string())
            })
        };
        let len: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + len {
            let mut chunk = [0u8; 4096];
            let n = sock.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let body: Vec<u8> = buf[head_end..head_end + len].to_vec();
        buf.drain(..head_end + len);
        requests.lock().expect("log").push(format!(
            "{method} {path} {}",
            header("authorization").unwrap_or_default()
        ));
        let (status, reply) = match (method.as_str(), path.as_str()) {
            ("GET", "/instances") => (200, serde_json::json!({ "instances": instances })),
            ("GET", "/routes") => (
                200,
                serde_json::json!({ "routes": routes.lock().expect("routes").values().cloned().collect::<Vec<_>>() }),
            ),
            ("PUT", p) if p.starts_with("/routes/") => {
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                routes
                    .lock()
                    .expect("routes")
                    .insert(p["/routes/".len()..].to_string(), v);
                (200, serde_json::json!({}))
            }
            ("DELETE", p) if p.starts_with("/routes/") => match routes
                .lock()
                .expect("routes")
                .remove(&p["/routes/".len()..])
            {
                Some(_) => (204, serde_json::Value::Null),
                None => (404, serde_json::json!({ "error": "no such route" })),
            },
            _ => (404, serde_json::json!({ "error": "no such path" })),
        };
        let body = if reply.is_null() {
            Vec::new()
        } else {
            serde_json::to_vec(&reply).unwrap_or_default()
        };
        let mut out = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        out.extend_from_slice(&body);
        sock.write_all(&out).await?;
    }
}
