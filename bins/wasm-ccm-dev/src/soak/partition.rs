//! A network partition between the `wasm-ccm run` processes and the cloud: the processes reach
//! the cloud simulator through this TCP proxy, which can refuse every connection (and cut the
//! open ones) or hold them (requests hang: nothing is forwarded until the partition heals, then
//! the bytes flow again, as TCP retransmission delivers them late). The Kubernetes side is not
//! touched: nodes and Services keep changing while the cloud is unreachable. What the proxy
//! refused, cut and held is counted, so a soak can show the partition took effect.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context as _;
use serde::Serialize;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the link to the cloud does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Bytes flow.
    Open,
    /// Connections are refused (accepted and closed at once) and open ones cut.
    Refuse,
    /// Connections are held: nothing flows until the link opens again.
    Hang,
}

/// What the partitions did.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub(crate) struct PartitionStats {
    /// Connections closed at once while refusing.
    pub refused_connections: u64,
    /// Open connections cut when a refusing partition began.
    pub cut_connections: u64,
    /// Connections (new or open) held while hanging.
    pub held_connections: u64,
}

#[derive(Default)]
struct Counters {
    refused: AtomicU64,
    cut: AtomicU64,
    held: AtomicU64,
}

/// The proxy in front of the cloud simulator.
pub(super) struct Partition {
    addr: SocketAddr,
    mode: watch::Sender<Mode>,
    counters: Arc<Counters>,
    task: JoinHandle<()>,
}

impl Partition {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub(super) async fn start(upstream: SocketAddr) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .context("binding the cloud link proxy")?;
        let addr = listener.local_addr()?;
        let (mode, _) = watch::channel(Mode::Open);
        let counters = Arc::new(Counters::default());
        let task = tokio::spawn({
            let mode = mode.clone();
            let counters = counters.clone();
            async move {
                loop {
                    let Ok((client, _)) = listener.accept().await else {
                        continue;
                    };
                    tokio::spawn(connection(
                        client,
                        upstream,
                        mode.subscribe(),
                        counters.clone(),
                    ));
                }
            }
        });
        Ok(Partition {
            addr,
            mode,
            counters,
            task,
        })
    }

    /// Where the processes reach the cloud.
    pub(super) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sets what the link does from now on.
    pub(super) fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    /// What the partitions did so far.
    pub(super) fn stats(&self) -> PartitionStats {
        PartitionStats {
            refused_connections: self.counters.refused.load(Ordering::Relaxed),
            cut_connections: self.counters.cut.load(Ordering::Relaxed),
            held_connections: self.counters.held.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Waits while the link hangs (counting the connection once as held); false when it refuses.
async fn passable(mode: &mut watch::Receiver<Mode>, counters: &Counters, held: &mut bool) -> bool {
    loop {
        let now = *mode.borrow_and_update();
        match now {
            Mode::Open => return true,
            Mode::Refuse => return false,
            Mode::Hang => {
                if !*held {
                    *held = true;
                    counters.held.fetch_add(1, Ordering::Relaxed);
                }
                if mode.changed().await.is_err() {
                    return false;
                }
            }
        }
    }
}

async fn connection(
    mut client: TcpStream,
    upstream: SocketAddr,
    mut mode: watch::Receiver<Mode>,
    counters: Arc<Counters>,
) {
    let mut held = false;
    if !passable(&mut mode, &counters, &mut held).await {
        counters.refused.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (mut cr, mut cw) = client.split();
    let (mut sr, mut sw) = server.split();
    let mut up = [0u8; 16 * 1024];
    let mut down = [0u8; 16 * 1024];
    let (mut client_done, mut server_done) = (false, false);
    while !(client_done && server_done) {
        held = false;
        if !passable(&mut mode, &counters, &mut held).await {
            counters.cut.fetch_add(1, Ordering::Relaxed);
            return;
        }
        tokio::select! {
            r = cr.read(&mut up), if !client_done => match r {
                Ok(0) | Err(_) => {
                    client_done = true;
                    let _ = sw.shutdown().await;
                }
                Ok(n) => {
                    if sw.write_all(&up[..n]).await.is_err() {
                        return;
                    }
                }
            },
            r = sr.read(&mut down), if !server_done => match r {
                Ok(0) | Err(_) => {
                    server_done = true;
                    let _ = cw.shutdown().await;
                }
                Ok(n) => {
                    if cw.write_all(&down[..n]).await.is_err() {
                        return;
                    }
                }
            },
            changed = mode.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}
