//! Helpers shared by the runtime's integration tests.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use wasm_ccm_runtime::types::Node;
use wasm_ccm_runtime::{Compiled, Driver, DriverOptions, Runtime, RuntimeOptions};

/// One runtime per test process (one engine, like the real host); no disk cache.
pub fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| Runtime::new(RuntimeOptions::default()).expect("runtime"))
}

pub async fn compile(path: &str) -> Compiled {
    runtime()
        .compile_file(std::path::Path::new(path))
        .await
        .expect("compiles")
}

pub async fn load(path: &str, opts: DriverOptions) -> Driver {
    let compiled = compile(path).await;
    runtime().load(&compiled, opts).await.expect("loads")
}

pub fn node(name: &str) -> Node {
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

pub fn node_with(name: &str, annotations: &[(&str, &str)]) -> Node {
    let mut n = node(name);
    n.annotations = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    n
}

/// What the loopback test server answers.
#[derive(Clone, Copy)]
pub enum Reply {
    /// 200 with a body of this many bytes.
    Body(usize),
    /// Accept, read the request, never answer.
    Hang,
}

/// Serves every connection on 127.0.0.1 with `reply`; returns the port.
pub async fn serve(reply: Reply) -> u16 {
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
                }
            });
        }
    });
    port
}
