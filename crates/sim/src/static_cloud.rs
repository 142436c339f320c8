//! The static driver's inventory service: the "cloud" of the reference driver when instances and
//! routes must change while it runs (the playground, end-to-end tests, benchmarks).
//!
//! `GET /instances` → `{"instances": [...]}`, `GET /routes` → `{"routes": [...]}`,
//! `PUT /routes/{name}` stores the JSON body, `DELETE /routes/{name}` (404 when absent). With a
//! token, every request needs `Authorization: Bearer <token>` (401 otherwise).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

#[derive(Default)]
struct Inventory {
    instances: BTreeMap<String, Value>,
    routes: BTreeMap<String, Value>,
    /// `GET /instances` rendered once per change: every driver call reads it.
    instances_body: Option<Bytes>,
}

struct Shared {
    inventory: Mutex<Inventory>,
    token: Option<String>,
    reads: AtomicU64,
    writes: AtomicU64,
}

/// A running inventory service.
#[derive(Clone)]
pub struct StaticCloud {
    shared: Arc<Shared>,
    addr: SocketAddr,
}

fn json_response(status: StatusCode, body: impl Into<Bytes>) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.into(),
    )
        .into_response()
}

fn error(status: StatusCode, message: &str) -> Response {
    json_response(status, json!({ "error": message }).to_string())
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inventory> {
        self.inventory.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn authorized(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|t| t == token)
    }
}

async fn list_instances(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if !s.authorized(&headers) {
        return error(StatusCode::UNAUTHORIZED, "missing or wrong bearer token");
    }
    s.reads.fetch_add(1, Ordering::Relaxed);
    let mut inv = s.lock();
    let body = match &inv.instances_body {
        Some(b) => b.clone(),
        None => {
            let list: Vec<&Value> = inv.instances.values().collect();
            let b = Bytes::from(json!({ "instances": list }).to_string());
            inv.instances_body = Some(b.clone());
            b
        }
    };
    json_response(StatusCode::OK, body)
}

async fn list_routes(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if !s.authorized(&headers) {
        return error(StatusCode::UNAUTHORIZED, "missing or wrong bearer token");
    }
    s.reads.fetch_add(1, Ordering::Relaxed);
    let routes: Vec<Value> = s.lock().routes.values().cloned().collect();
    json_response(StatusCode::OK, json!({ "routes": routes }).to_string())
}

async fn put_route(
    State(s): State<Arc<Shared>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !s.authorized(&headers) {
        return error(StatusCode::UNAUTHORIZED, "missing or wrong bearer token");
    }
    let Ok(mut route) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "the body is not JSON");
    };
    if !route.is_object() {
        return error(StatusCode::BAD_REQUEST, "the body must be a JSON object");
    }
    route["name"] = Value::String(name.clone());
    s.writes.fetch_add(1, Ordering::Relaxed);
    s.lock().routes.insert(name, route.clone());
    json_response(StatusCode::OK, route.to_string())
}

async fn delete_route(
    State(s): State<Arc<Shared>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !s.authorized(&headers) {
        return error(StatusCode::UNAUTHORIZED, "missing or wrong bearer token");
    }
    s.writes.fetch_add(1, Ordering::Relaxed);
    match s.lock().routes.remove(&name) {
        Some(_) => StatusCode::NO_CONTENT.into_response(),
        None => error(StatusCode::NOT_FOUND, &format!("route {name} not found")),
    }
}

impl StaticCloud {
    /// Serves on `listen` (port 0 picks one) with the given instances (the static driver's
    /// instance schema) and an optional bearer token.
    pub async fn start(
        listen: SocketAddr,
        instances: Vec<Value>,
        token: Option<String>,
    ) -> anyhow::Result<StaticCloud> {
        let shared = Arc::new(Shared {
            inventory: Mutex::default(),
            token,
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
        });
        let app = Router::new()
            .route("/instances", get(list_instances))
            .route("/routes", get(list_routes))
            .route(
                "/routes/{name}",
                axum::routing::put(put_route).delete(delete_route),
            )
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "static cloud stopped");
            }
        });
        let cloud = StaticCloud { shared, addr };
        for i in instances {
            cloud.upsert_instance(i)?;
        }
        Ok(cloud)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Adds or replaces an instance (keyed by its `name`).
    pub fn upsert_instance(&self, instance: Value) -> anyhow::Result<()> {
        let name = instance
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow::anyhow!("an instance needs a string `name`"))?
            .to_string();
        let mut inv = self.shared.lock();
        inv.instances.insert(name, instance);
        inv.instances_body = None;
        Ok(())
    }

    /// Removes an instance; returns whether it existed.
    pub fn remove_instance(&self, name: &str) -> bool {
        let mut inv = self.shared.lock();
        inv.instances_body = None;
        inv.instances.remove(name).is_some()
    }

    /// Sets an instance's `shutdown` flag; returns whether it exists.
    pub fn set_shutdown(&self, name: &str, shutdown: bool) -> bool {
        let mut inv = self.shared.lock();
        inv.instances_body = None;
        match inv.instances.get_mut(name) {
            Some(i) => {
                i["shutdown"] = Value::Bool(shutdown);
                true
            }
            None => false,
        }
    }

    /// The stored routes.
    pub fn routes(&self) -> Vec<Value> {
        self.shared.lock().routes.values().cloned().collect()
    }

    /// Requests served: (reads, writes).
    pub fn request_counts(&self) -> (u64, u64) {
        (
            self.shared.reads.load(Ordering::Relaxed),
            self.shared.writes.load(Ordering::Relaxed),
        )
    }
}
