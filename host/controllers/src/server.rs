//! `/healthz`, `/livez`, `/readyz` and `/metrics` over HTTPS on `--secure-port`, as upstream's
//! controller-manager serves them: TLS with a given or self-signed certificate ([`tls`]), and
//! delegated authentication and authorization ([`delegated_auth`]; `/metrics` needs a user
//! allowed to `get` it, the health paths are always allowed by default).

pub mod delegated_auth;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
pub use delegated_auth::{DelegatedAuth, DelegatedAuthOptions};
pub use tls::{TlsError, TlsOptions};

/// How long a client has to finish the TLS handshake (a stalled one must not hold a task).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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

/// How the serving port is set up.
pub struct Serving {
    /// `--bind-address` and `--secure-port` (port 0 picks one).
    pub addr: SocketAddr,
    /// The TLS configuration ([`tls::server_config`]).
    pub tls: Arc<rustls::ServerConfig>,
    /// Delegated authentication and authorization; `None` lets every request through (for tests
    /// of the endpoints themselves).
    pub auth: Option<DelegatedAuthOptions>,
}

/// Counts every answered request by route and status code.
async fn count_requests(State(metrics): State<Arc<Metrics>>, req: Request, next: Next) -> Response {
    // Only the known routes are labels, so a scanner cannot grow the series without bound.
    let path: &'static str = match req.uri().path() {
        "/healthz" => "/healthz",
        "/livez" => "/livez",
        "/readyz" => "/readyz",
        "/metrics" => "/metrics",
        _ => "other",
    };
    let mut resp = next.run(req).await;
    // `WithCacheControl`: nothing served here may be cached.
    resp.headers_mut()
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-cache, private"));
    metrics.inc(
        "wasm_ccm_serving_requests_total",
        &[("path", path), ("code", resp.status().as_str())],
    );
    resp
}

/// The TLS connections, handshaken off the accept loop so that one slow client delays nobody.
struct TlsListener {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(conn) => conn,
            // The accept loop stopped (cancelled): no more connections; the graceful shutdown
            // ends the server.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

/// Accepts TCP connections and hands the handshaken ones to the server until `cancel`.
async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    tx: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
    cancel: CancellationToken,
) {
    loop {
        let (tcp, peer) = tokio::select! {
            () = cancel.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: try again shortly.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => {
                    let _ = tx.send((tls, peer)).await;
                }
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        });
    }
}

/// Binds `serving.addr` and serves HTTPS until `cancel`; returns the bound address. `client`
/// makes the reviews for which `serving.auth` names no client of its own.
pub async fn serve(
    serving: Serving,
    client: &kube::Client,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    cancel: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let mut app = Router::new()
        .route("/healthz", get(healthz))
        .route("/livez", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(render_metrics))
        .with_state(AppState {
            metrics: Arc::clone(&metrics),
            health,
        });
    if let Some(auth) = serving.auth {
        app = app.layer(axum::middleware::from_fn_with_state(
            Arc::new(DelegatedAuth::new(auth, client, Arc::clone(&metrics))),
            delegated_auth::filter,
        ));
    }
    let app = app.layer(axum::middleware::from_fn_with_state(
        metrics,
        count_requests,
    ));
    let listener = TcpListener::bind(serving.addr).await?;
    let bound = listener.local_addr()?;
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(accept_loop(
        listener,
        TlsAcceptor::from(serving.tls),
        tx,
        cancel.clone(),
    ));
    let tls = TlsListener { rx, local: bound };
    tokio::spawn(async move {
        let result = axum::serve(tls, app)
            .with_graceful_shutdown(async move { cancel.cancelled().await })
            .await;
        if let Err(e) = result {
            tracing::error!(error = %e, "health and metrics server stopped");
        }
    });
    Ok(bound)
}
