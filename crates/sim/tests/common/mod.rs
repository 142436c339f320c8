//! Helpers shared by the integration tests: a started simulator, a reqwest client and a watch
//! line reader with bounded waits.

#![allow(dead_code)]

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use wasm_ccm_sim::kube::KubeSim;

/// Upper bound for anything a test waits for; never a sleep, only a limit.
pub(crate) const BOUND: Duration = Duration::from_secs(10);

/// A simulator plus a client pointed at it.
pub(crate) struct Sim {
    pub sim: KubeSim,
    pub client: reqwest::Client,
}

/// Starts a simulator on a free loopback port.
pub(crate) async fn start() -> Sim {
    let sim = match KubeSim::start("127.0.0.1:0".parse().expect("literal address")).await {
        Ok(s) => s,
        Err(e) => panic!("simulator did not start: {e:#}"),
    };
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("reqwest client");
    Sim { sim, client }
}

/// A response: status, headers and JSON body (Null if not JSON).
pub(crate) struct Resp {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Sim {
    /// Sends a request with an optional body and content type.
    pub(crate) async fn send(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> Resp {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.sim.url()));
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        if let Some(b) = body {
            req = req.body(b);
        }
        let resp = req.send().await.expect("request sent");
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.expect("body read");
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Resp {
            status,
            headers,
            body,
        }
    }

    pub(crate) async fn get(&self, path: &str) -> Resp {
        self.send(Method::GET, path, None, None).await
    }

    pub(crate) async fn post(&self, path: &str, body: &Value) -> Resp {
        self.send(
            Method::POST,
            path,
            Some("application/json"),
            Some(body.to_string().into_bytes()),
        )
        .await
    }

    pub(crate) async fn put(&self, path: &str, body: &Value) -> Resp {
        self.send(
            Method::PUT,
            path,
            Some("application/json"),
            Some(body.to_string().into_bytes()),
        )
        .await
    }

    pub(crate) async fn patch(&self, path: &str, content_type: &str, body: &Value) -> Resp {
        self.send(
            Method::PATCH,
            path,
            Some(content_type),
            Some(body.to_string().into_bytes()),
        )
        .await
    }

    pub(crate) async fn delete(&self, path: &str, body: Option<&Value>) -> Resp {
        self.send(
            Method::DELETE,
            path,
            body.map(|_| "application/json"),
            body.map(|b| b.to_string().into_bytes()),
        )
        .await
    }

    /// Opens a watch (path with query) and returns its line reader.
    pub(crate) async fn watch(&self, path_and_query: &str) -> Watch {
        let resp = self
            .client
            .get(format!("{}{path_and_query}", self.sim.url()))
            .send()
            .await
            .expect("watch request sent");
        assert_eq!(resp.status(), StatusCode::OK, "watch {path_and_query}");
        Watch {
            resp,
            buf: Vec::new(),
        }
    }
}

/// Reads a watch stream line by line.
pub(crate) struct Watch {
    resp: reqwest::Response,
    buf: Vec<u8>,
}

/// What waiting for the next watch event gave.
#[derive(Debug)]
pub(crate) enum Next {
    Event(Value),
    /// The server ended the body cleanly.
    Closed,
    /// The transport failed (a reset, a truncated chunk): not a clean end of the watch.
    Broken(String),
    TimedOut,
}

impl Watch {
    /// The next event, Closed when the server ended the stream, Broken when the transport
    /// failed, or TimedOut after `within`.
    pub(crate) async fn next_within(&mut self, within: Duration) -> Next {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                return Next::Event(serde_json::from_slice(&line).expect("watch line is JSON"));
            }
            match tokio::time::timeout_at(deadline, self.resp.chunk()).await {
                Err(_) => return Next::TimedOut,
                Ok(Ok(Some(chunk))) => self.buf.extend_from_slice(&chunk),
                Ok(Ok(None)) => return Next::Closed,
                Ok(Err(e)) => return Next::Broken(format!("{e:?}")),
            }
        }
    }

    /// The next event; panics if the stream ends or nothing comes within the bound.
    pub(crate) async fn next(&mut self) -> Value {
        match self.next_within(BOUND).await {
            Next::Event(e) => e,
            other => panic!("expected a watch event, got {other:?}"),
        }
    }

    /// The next event's type and object name.
    pub(crate) async fn next_named(&mut self) -> (String, String) {
        let e = self.next().await;
        (
            e["type"].as_str().unwrap_or("").to_string(),
            e["object"]["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        )
    }

    /// Asserts the stream is closed cleanly by the server (within the bound).
    pub(crate) async fn expect_closed(&mut self) {
        match self.next_within(BOUND).await {
            Next::Closed => {}
            other => panic!("expected the watch to close, got {other:?}"),
        }
    }
}

/// A minimal Node.
pub(crate) fn node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
}

/// A LoadBalancer Service with one port.
pub(crate) fn lb_service(ns: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}
    })
}

/// The names of a list response's items.
pub(crate) fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The resourceVersion of an object or list.
pub(crate) fn rv(v: &Value) -> String {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}
