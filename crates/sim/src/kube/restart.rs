//! A simulated apiserver restart ([`super::KubeSim::restart`]): the state is kept (as etcd keeps
//! it), but every connection breaks, connections are refused for a moment, every watch ends, and
//! the watch history is gone (a watch resuming from an older resourceVersion gets 410 Gone, as
//! from a new apiserver's empty watch cache).
//!
//! The plain-HTTP listener is wrapped in a [`GatedListener`]: while the server is "down" it
//! accepts each connection and closes it at once without a byte (the client sees the connection
//! reset or closed before any response, which is what a client of a restarting apiserver sees
//! between the old process dying and the new one listening), and every connection accepted
//! before the restart fails its next read or write ([`GatedIo`]), as a keep-alive connection to a
//! dead process does. Both are counted ([`RestartStats`]), so a test can tell that a restart
//! took effect, not only that it was asked for.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// What the restarts did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RestartStats {
    /// Restarts asked for.
    pub restarts: u64,
    /// Connections accepted while down and closed at once (refused).
    pub refused_connections: u64,
    /// Connections of an earlier incarnation broken on their next read or write.
    pub broken_connections: u64,
    /// Watches answered 410 Expired that resumed from before the last restart (the history it
    /// forgot), whether or not a later compaction also forgot theirs; not injected expiries.
    pub expired_watches: u64,
}

/// The restart state shared by the listener, its connections and the simulator's handles.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    /// Bumped by each restart; a connection of an earlier generation is broken.
    generation: AtomicU64,
    /// Until when new connections are refused.
    down_until: Mutex<Option<Instant>>,
    restarts: AtomicU64,
    refused: AtomicU64,
    broken: AtomicU64,
    /// The history floor the last restart set (0: none yet).
    floor: AtomicU64,
    expired: AtomicU64,
}

impl Gate {
    /// Starts a restart: connections are refused for `down`, open ones break.
    pub(crate) fn restart(&self, down: Duration) {
        *self
            .down_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now() + down);
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.restarts.fetch_add(1, Ordering::Relaxed);
    }

    /// Records the history floor the restart set.
    pub(crate) fn set_floor(&self, floor: u64) {
        self.floor.store(floor, Ordering::SeqCst);
    }

    /// Counts a watch from resourceVersion `requested` answered 410: the restart's doing when
    /// it resumes from before the last restart's floor (a later compaction may have raised the
    /// floor since; the watch would have been refused by the restart alone).
    pub(crate) fn expired_at(&self, requested: u64) {
        if self.restarts.load(Ordering::Relaxed) > 0
            && requested < self.floor.load(Ordering::SeqCst)
        {
            self.expired.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn down(&self) -> bool {
        let mut until = self
            .down_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match *until {
            Some(t) if Instant::now() < t => true,
            Some(_) => {
                *until = None;
                false
            }
            None => false,
        }
    }

    /// The counters.
    pub(crate) fn stats(&self) -> RestartStats {
        RestartStats {
            restarts: self.restarts.load(Ordering::Relaxed),
            refused_connections: self.refused.load(Ordering::Relaxed),
            broken_connections: self.broken.load(Ordering::Relaxed),
            expired_watches: self.expired.load(Ordering::Relaxed),
        }
    }
}

/// A TCP listener that refuses connections while its [`Gate`] is down.
pub(crate) struct GatedListener {
    tcp: TcpListener,
    gate: Arc<Gate>,
}

impl GatedListener {
    pub(crate) fn new(tcp: TcpListener, gate: Arc<Gate>) -> Self {
        GatedListener { tcp, gate }
    }
}

impl axum::serve::Listener for GatedListener {
    type Io = GatedIo;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (tcp, peer) = axum::serve::Listener::accept(&mut self.tcp).await;
            if self.gate.down() {
                self.gate.refused.fetch_add(1, Ordering::Relaxed);
                drop(tcp);
                continue;
            }
            let generation = self.gate.generation.load(Ordering::SeqCst);
            return (
                GatedIo {
                    tcp,
                    gate: self.gate.clone(),
                    generation,
                    broken: false,
                },
                peer,
            );
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// A connection that fails once a restart happened after it was accepted.
pub(crate) struct GatedIo {
    tcp: TcpStream,
    gate: Arc<Gate>,
    generation: u64,
    broken: bool,
}

impl GatedIo {
    fn check(&mut self) -> io::Result<()> {
        if self.broken || self.gate.generation.load(Ordering::SeqCst) != self.generation {
            if !self.broken {
                self.broken = true;
                self.gate.broken.fetch_add(1, Ordering::Relaxed);
            }
            return Err(io::Error::new(
                io::ErrorKind::ConnectionReset,
                "the simulated apiserver restarted",
            ));
        }
        Ok(())
    }
}

impl AsyncRead for GatedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.check()?;
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for GatedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.check()?;
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.check()?;
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}
