//! `/healthz`, `/livez`, `/readyz` and `/metrics` over HTTPS on `--secure-port`, as upstream's
//! controller-manager serves them: TLS with a given or self-signed certificate ([`tls`]), and
//! delegated authentication and authorization ([`delegated_auth`]; `/metrics` needs a user
//! allowed to `get` it, the health paths are always allowed by default).
//!
//! Each connection is served by hyper directly rather than through `axum::serve`, so that it has
//! the timeouts and limits of [`ConnectionLimits`] (upstream's `secure_serving.go` sets
//! `ReadHeaderTimeout`, `IdleTimeout` and `MaxHeaderBytes`; without them a client that connects
//! and sends nothing holds a task and a socket for ever), and the number of connections is capped.

mod cert_files;
mod cert_reload;
pub mod delegated_auth;
pub mod tls;

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

pub(crate) use delegated_auth::DelegatedAuth;
pub use delegated_auth::DelegatedAuthOptions;
pub use tls::{MinTlsVersion, TlsError, TlsOptions};
use wasm_ccm_controllers::{Metrics, ShadowReport};

/// How long a client has to finish the TLS handshake (a stalled one must not hold a task).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The limits of each connection to the serving port, after upstream's `secure_serving.go`
/// (`ReadHeaderTimeout` 32 s, `IdleTimeout` 90 s, `MaxHeaderBytes` 1 MiB) where hyper allows.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// Time to finish the TLS handshake.
    pub handshake_timeout: Duration,
    /// Time to send a request's headers, counted from when the connection waits for a request:
    /// hyper (≥ 1.4) starts this timer on a kept-alive connection too, so it is also the idle
    /// time allowed between requests (upstream allows 90 s there; hyper has no separate knob).
    pub header_read_timeout: Duration,
    /// A connection that moves no byte either way for this long is closed (a client that stops
    /// reading a response or sending a body; upstream's `IdleTimeout` is 90 s).
    pub idle_timeout: Duration,
    /// hyper's read buffer, which bounds the request line and headers (a larger request gets
    /// 431). Upstream allows 1 MiB of headers; 64 KiB is ample for a bearer token and keeps
    /// `max_connections` buffers far below the pod's memory limit.
    pub max_header_bytes: usize,
    /// Connections served at once. At the cap the server stops accepting: further clients wait
    /// in the kernel's listen queue (not accepted and closed, which would fail a probe that a
    /// freed slot could still serve) until an idle or slow connection times out.
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            handshake_timeout: HANDSHAKE_TIMEOUT,
            header_read_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            max_header_bytes: 64 * 1024,
            max_connections: 256,
        }
    }
}

/// What the endpoints report.
#[derive(Default)]
pub(crate) struct Health {
    /// The driver is loaded and the caches synced (and, with leader election, we lead or wait).
    pub(crate) ready: AtomicBool,
    /// Something fatal happened (leadership lost); liveness fails.
    pub(crate) failed: AtomicBool,
    /// Called before rendering `/metrics` to copy gauges from elsewhere (driver counters).
    pub(crate) before_scrape: std::sync::Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
    /// A shadow run's report, made on request; `None` outside shadow mode (and before the
    /// controllers start).
    pub(crate) shadow_report: std::sync::Mutex<Option<ShadowReporter>>,
}

/// Makes the shadow report now.
pub(crate) type ShadowReporter = Box<dyn Fn() -> Option<ShadowReport> + Send + Sync>;

/// `GET /shadow`: the shadow report as JSON, or as text with `?format=text`.
async fn shadow_report(
    State(s): State<AppState>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> Response {
    let report = s
        .health
        .shadow_report
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .and_then(|f| f());
    let Some(report) = report else {
        return (
            StatusCode::NOT_FOUND,
            "no shadow report: this process does not run with --shadow (or its controllers have \
             not started yet)\n",
        )
            .into_response();
    };
    if query.as_deref() == Some("format=text") {
        return (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            report.to_text(),
        )
            .into_response();
    }
    match serde_json::to_string_pretty(&report) {
        Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("could not encode the shadow report: {e}\n"),
        )
            .into_response(),
    }
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
    /// Timeouts and caps of the connections.
    pub limits: ConnectionLimits,
}

/// Counts every answered request by route and status code.
async fn count_requests(State(metrics): State<Arc<Metrics>>, req: Request, next: Next) -> Response {
    // Only the known routes are labels, so a scanner cannot grow the series without bound.
    let path: &'static str = match req.uri().path() {
        "/healthz" => "/healthz",
        "/livez" => "/livez",
        "/readyz" => "/readyz",
        "/metrics" => "/metrics",
        "/shadow" => "/shadow",
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

/// The instant of the last byte read or written on a connection, for the idle timeout.
#[derive(Clone)]
struct Activity(Arc<std::sync::Mutex<tokio::time::Instant>>);

impl Activity {
    fn new() -> Activity {
        Activity(Arc::new(std::sync::Mutex::new(tokio::time::Instant::now())))
    }

    fn touch(&self) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = tokio::time::Instant::now();
    }

    /// Resolves once nothing moved for `idle`.
    async fn idle_for(&self, idle: Duration) {
        loop {
            let deadline = *self.0.lock().unwrap_or_else(|p| p.into_inner()) + idle;
            if tokio::time::Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

/// A stream that records its progress in an [`Activity`].
struct Tracked<T> {
    inner: T,
    activity: Activity,
}

impl<T: AsyncRead + Unpin> AsyncRead for Tracked<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Tracked<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Accepts TCP connections until `cancel`, at most `limits.max_connections` at once, and serves
/// each on a task of its own (so one slow client delays nobody).
async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    app: Router,
    limits: Arc<ConnectionLimits>,
    cancel: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    loop {
        // The slot first: at the cap, connections stay in the listen queue (see
        // `ConnectionLimits::max_connections`).
        let slot = tokio::select! {
            () = cancel.cancelled() => return,
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                // Never closed.
                Err(_) => return,
            },
        };
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
        tokio::spawn(serve_connection(
            tcp,
            peer,
            acceptor.clone(),
            app.clone(),
            Arc::clone(&limits),
            cancel.clone(),
            slot,
        ));
    }
}

/// Handshakes and serves one connection; its slot is freed when it ends.
async fn serve_connection(
    tcp: TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    app: Router,
    limits: Arc<ConnectionLimits>,
    cancel: CancellationToken,
    _slot: OwnedSemaphorePermit,
) {
    let tls = match tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            return;
        }
    };
    let activity = Activity::new();
    let io = TokioIo::new(Tracked {
        inner: tls,
        activity: activity.clone(),
    });
    // axum::serve would build this builder without a timer, and without one hyper ignores
    // `header_read_timeout`: a client that sends nothing would hold the connection for ever.
    let mut builder = auto::Builder::new(TokioExecutor::new()).http1_only();
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true)
        .max_buf_size(limits.max_header_bytes.max(8192));
    let conn = builder.serve_connection(io, TowerToHyperService::new(app));
    tokio::pin!(conn);
    let mut shutting_down = false;
    loop {
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(e) = served {
                    tracing::debug!(%peer, error = %e, "connection ended");
                }
                return;
            }
            () = cancel.cancelled(), if !shutting_down => {
                // Finish the request in progress, then close.
                conn.as_mut().graceful_shutdown();
                shutting_down = true;
            }
            () = activity.idle_for(limits.idle_timeout) => {
                tracing::debug!(%peer, "closing an idle connection");
                return;
            }
        }
    }
}

/// Binds `serving.addr` and serves HTTPS until `cancel`; returns the bound address. `client`
/// makes the reviews for which `serving.auth` names no client of its own.
pub(crate) async fn serve(
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
        .route("/shadow", get(shadow_report))
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
    listen(serving.addr, serving.tls, app, serving.limits, cancel).await
}

/// Binds `addr` and serves `app` over TLS until `cancel`; returns the bound address.
async fn listen(
    addr: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    limits: ConnectionLimits,
    cancel: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(accept_loop(
        listener,
        TlsAcceptor::from(tls),
        app,
        Arc::new(limits),
        cancel,
    ));
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio_rustls::TlsConnector;
    use tokio_rustls::client::TlsStream;

    /// A bound on every wait of these tests, far above what they expect.
    const BOUND: Duration = Duration::from_secs(10);

    /// Serves a `/healthz` on loopback with `limits`; the client configuration trusts its CA.
    async fn start(limits: ConnectionLimits) -> (SocketAddr, TlsConnector, CancellationToken) {
        let cert = TlsOptions::default().serving_cert().expect("generated");
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert.chain[1].clone()).expect("the CA");
        let tls = tls::server_config(cert, MinTlsVersion::Tls12).expect("usable");
        let client = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        let app = Router::new().route("/healthz", get(|| async { "ok\n" }));
        let cancel = CancellationToken::new();
        let addr = listen(
            "127.0.0.1:0".parse().expect("addr"),
            tls,
            app,
            limits,
            cancel.clone(),
        )
        .await
        .expect("bound");
        (addr, TlsConnector::from(Arc::new(client)), cancel)
    }

    async fn connect(addr: SocketAddr, connector: &TlsConnector) -> TlsStream<TcpStream> {
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
        tokio::time::timeout(BOUND, connector.connect(name, tcp))
            .await
            .expect("handshake in time")
            .expect("handshake")
    }

    /// Reads until the server closes the connection (EOF or a reset).
    async fn read_to_close(stream: &mut TlsStream<TcpStream>) -> Vec<u8> {
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return all,
                Ok(n) => all.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// `GET /healthz` on `stream`, keeping it open; the response's head and body.
    async fn get_healthz(stream: &mut TlsStream<TcpStream>) -> String {
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n")
            .await
            .expect("write");
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&all).ends_with("ok\n") {
            let n = tokio::time::timeout(BOUND, stream.read(&mut buf))
                .await
                .expect("an answer in time")
                .expect("read");
            assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&all));
            all.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&all).into_owned()
    }

    #[tokio::test]
    async fn a_client_that_sends_nothing_is_disconnected_after_the_header_timeout() {
        let timeout = Duration::from_millis(200);
        let (addr, connector, cancel) = start(ConnectionLimits {
            header_read_timeout: timeout,
            ..Default::default()
        })
        .await;
        let mut stream = connect(addr, &connector).await;
        let connected = Instant::now();
        let rest = tokio::time::timeout(BOUND, read_to_close(&mut stream))
            .await
            .expect("the server closes a silent connection");
        assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
        assert!(connected.elapsed() >= timeout - Duration::from_millis(50));

        // A kept-alive connection that goes quiet after a request is closed the same way.
        let mut stream = connect(addr, &connector).await;
        assert!(get_healthz(&mut stream).await.starts_with("HTTP/1.1 200"));
        assert!(get_healthz(&mut stream).await.starts_with("HTTP/1.1 200"));
        tokio::time::timeout(BOUND, read_to_close(&mut stream))
            .await
            .expect("an idle kept-alive connection is closed");
        cancel.cancel();
    }

    #[tokio::test]
    async fn connections_beyond_the_cap_wait_until_a_slot_is_free() {
        let timeout = Duration::from_millis(300);
        let (addr, connector, cancel) = start(ConnectionLimits {
            header_read_timeout: timeout,
            max_connections: 1,
            ..Default::default()
        })
        .await;
        let mut first = connect(addr, &connector).await;
        let first_connected = Instant::now();
        // The second client's handshake can only finish once the silent first one was closed,
        // which the server does no earlier than the header timeout after the first handshake.
        let mut second = connect(addr, &connector).await;
        assert!(
            first_connected.elapsed() >= timeout,
            "the second connection was served beside the first: {:?}",
            first_connected.elapsed()
        );
        tokio::time::timeout(BOUND, read_to_close(&mut first))
            .await
            .expect("the first is closed");
        assert!(get_healthz(&mut second).await.starts_with("HTTP/1.1 200"));
        cancel.cancel();
    }

    #[tokio::test]
    async fn headers_beyond_the_limit_are_refused() {
        let (addr, connector, cancel) = start(ConnectionLimits {
            max_header_bytes: 16 * 1024,
            ..Default::default()
        })
        .await;
        let mut stream = connect(addr, &connector).await;
        let request = format!(
            "GET /healthz HTTP/1.1\r\nhost: localhost\r\nx-big: {}\r\n\r\n",
            "a".repeat(32 * 1024)
        );
        // The server may answer and close before reading all of it.
        let _ = stream.write_all(request.as_bytes()).await;
        let answer = tokio::time::timeout(BOUND, read_to_close(&mut stream))
            .await
            .expect("an answer in time");
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
        cancel.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn idle_is_counted_from_the_last_byte() {
        let activity = Activity::new();
        let started = tokio::time::Instant::now();
        let watcher = activity.clone();
        let idle = tokio::spawn(async move { watcher.idle_for(Duration::from_secs(90)).await });
        tokio::time::sleep(Duration::from_secs(60)).await;
        activity.touch();
        idle.await.expect("watcher");
        assert_eq!(started.elapsed(), Duration::from_secs(150));
    }
}
