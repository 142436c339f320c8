//! What every simulator shares: binding a loopback listener, serving an axum router on a task,
//! stopping it when the last handle goes away or gracefully on request, and random UUIDs.

use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use rand::Rng as _;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long [`Served::shutdown`] waits for in-flight requests before aborting.
const GRACE: Duration = Duration::from_secs(5);

/// Binds `addr` (port 0 picks a free port); returns the listener and the address it got.
pub(crate) async fn bind(addr: SocketAddr) -> anyhow::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr().context("listener has no address")?;
    Ok((listener, bound))
}

/// A router served on a spawned task; dropping it stops the server.
pub(crate) struct Served {
    stop: Mutex<Option<oneshot::Sender<()>>>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Served {
    /// Serves `app` on `listener` (a [`TcpListener`], or the Kubernetes simulator's TLS
    /// listener) on a task of the current tokio runtime; `name` is for the log.
    pub(crate) fn spawn<L>(listener: L, app: Router, name: &'static str) -> Self
    where
        L: axum::serve::Listener,
        L::Addr: std::fmt::Debug,
    {
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stop_rx.await;
                })
                .await;
            if let Err(e) = served {
                tracing::warn!("{name} simulator stopped: {e}");
            }
        });
        Served {
            stop: Mutex::new(Some(stop_tx)),
            task: Mutex::new(Some(task)),
        }
    }

    /// Stops accepting connections; in-flight requests finish.
    pub(crate) fn signal_stop(&self) {
        if let Some(tx) = self
            .stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            let _ = tx.send(());
        }
    }

    fn take_task(&self) -> Option<JoinHandle<()>> {
        self.task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Stops and waits for in-flight requests, aborting after a grace period.
    pub(crate) async fn shutdown(&self) {
        self.signal_stop();
        if let Some(task) = self.take_task() {
            let abort = task.abort_handle();
            if tokio::time::timeout(GRACE, task).await.is_err() {
                abort.abort();
            }
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.signal_stop();
        if let Some(task) = self.take_task() {
            task.abort();
        }
    }
}

/// A random version-4 UUID, lowercase: Kubernetes' `metadata.uid` and cloud object IDs.
pub(crate) fn new_uuid() -> String {
    let mut b: [u8; 16] = rand::rng().random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}
