//! The simulator's opt-in TLS mode ([`super::KubeSim::start_tls`]).
//!
//! client-go (kubectl) sends bearer tokens only over TLS, so authentication and RBAC can be
//! tested with kubectl only against an `https://` server. Every TLS simulator makes its own CA
//! and a serving certificate for the loopback names at start: nothing is shared between
//! simulators (tests stay parallel-safe) and nothing is written to disk.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How long a client may take to complete its handshake before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The certificates of one TLS simulator.
pub(crate) struct TlsMaterial {
    /// The CA certificate (PEM) clients trust.
    pub ca_pem: String,
    /// The server side of the handshake, with the serving certificate and key.
    pub acceptor: TlsAcceptor,
}

/// The names the serving certificate covers: `localhost`, `127.0.0.1`, `::1`, and the bound
/// address when it is a specific one (an unspecified bind address is reached through loopback,
/// as [`super::KubeSim::url`] shows it).
fn subject_alt_names(addr: SocketAddr) -> anyhow::Result<Vec<SanType>> {
    let mut ips: Vec<IpAddr> = vec![Ipv4Addr::LOCALHOST.into(), Ipv6Addr::LOCALHOST.into()];
    if !addr.ip().is_unspecified() && !ips.contains(&addr.ip()) {
        ips.push(addr.ip());
    }
    let localhost = "localhost"
        .try_into()
        .context("`localhost` is an IA5 string")?;
    Ok(std::iter::once(SanType::DnsName(localhost))
        .chain(ips.into_iter().map(SanType::IpAddress))
        .collect())
}

fn distinguished_name(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn
}

/// Makes a CA (ECDSA P-256) and a serving certificate for `addr` signed by it, and the
/// server configuration serving HTTP/1.1 (the only protocol the simulator's server speaks, so
/// ALPN offers nothing else).
pub(crate) fn generate(addr: SocketAddr) -> anyhow::Result<TlsMaterial> {
    let ca_key = KeyPair::generate().context("CA key")?;
    let mut ca_params = CertificateParams::default();
    ca_params.distinguished_name = distinguished_name("wasm-ccm-sim kube CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    // Go's verifier wants a CA to be allowed to sign certificates.
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).context("CA certificate")?;
    let ca_pem = ca_cert.pem();
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate().context("serving key")?;
    let mut params = CertificateParams::default();
    params.distinguished_name = distinguished_name("kube-apiserver");
    params.subject_alt_names = subject_alt_names(addr)?;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let cert = params
        .signed_by(&key, &issuer)
        .context("serving certificate")?;

    // ring explicitly: the process-wide default provider is ambiguous when a dependency
    // also enables another one.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .context("TLS server configuration")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsMaterial {
        ca_pem,
        acceptor: TlsAcceptor::from(Arc::new(config)),
    })
}

/// A listener whose connections are TLS streams. Handshakes run on their own tasks, so a slow
/// or failing client does not hold up the others; failed handshakes (e.g. a client that does
/// not trust the CA) are logged and dropped.
pub(crate) struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    handshakes: JoinSet<Option<(TlsStream<TcpStream>, SocketAddr)>>,
}

impl TlsListener {
    /// Serves TLS with `acceptor` on `tcp`.
    pub(crate) fn new(tcp: TcpListener, acceptor: TlsAcceptor) -> TlsListener {
        TlsListener {
            tcp,
            acceptor,
            handshakes: JoinSet::new(),
        }
    }
}

async fn handshake(
    acceptor: TlsAcceptor,
    tcp: TcpStream,
    peer: SocketAddr,
) -> Option<(TlsStream<TcpStream>, SocketAddr)> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => Some((tls, peer)),
        Ok(Err(e)) => {
            tracing::debug!(%peer, "kube simulator TLS handshake failed: {e}");
            None
        }
        Err(_) => {
            tracing::debug!(%peer, "kube simulator TLS handshake timed out");
            None
        }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    // Cancel-safe (axum drops this future on shutdown): a TCP connection is moved into the
    // handshake set in the same poll that accepts it, and `join_next` loses nothing.
    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            tokio::select! {
                (tcp, peer) = axum::serve::Listener::accept(&mut self.tcp) => {
                    self.handshakes.spawn(handshake(self.acceptor.clone(), tcp, peer));
                }
                Some(done) = self.handshakes.join_next(), if !self.handshakes.is_empty() => {
                    if let Ok(Some(conn)) = done {
                        return conn;
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
