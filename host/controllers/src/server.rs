//! `/healthz`, `/livez`, `/readyz` and `/metrics`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// What the endpoints report.
#[derive(Default)]
pub struct Health {
    /// The driver is loaded and the caches synced (and, with leader election, we lead or wait).
    pub ready: AtomicBool,
    /// Something fatal happened (leadership lost); liveness fails.
    pub failed: AtomicBool,
    /// Called before rendering `/metrics` to copy gauges from elsewhere (driver counters).
    pub before_scrape: std::sync::Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
}

#[derive(Clone)]
struct AppState {
    metrics: Arc<Metrics>,
    health: Arc<Health>,
}

async fn healthz(State(s): State<AppState>) -> impl IntoResponse {
    if s.health.failed.load(Ordering::Relaxed) {
        (StatusCode::INTERNAL_SERVER_ERROR, "leader election lost\n")
    } else {
        (StatusCode::OK, "ok\n")
    }
}

async fn readyz(State(s): State<AppState>) -> impl IntoResponse {
    if s.health.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ok\n")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: driver loading or caches not synced\n",
        )
    }
}

async fn render_metrics(State(s): State<AppState>) -> impl IntoResponse {
    if let Some(f) = s
        .health
        .before_scrape
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
    {
        f();
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        s.metrics.render(),
    )
}

/// Binds `addr` and serves until `cancel`; returns the bound address (port 0 picks one).
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    cancel: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/livez", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(render_metrics))
        .with_state(AppState { metrics, health });
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        let result = axum::serve(listener, app)
            .with_graceful_shutdown(async move { cancel.cancelled().await })
            .await;
        if let Err(e) = result {
            tracing::error!(error = %e, "health and metrics server stopped");
        }
    });
    Ok(bound)
}
