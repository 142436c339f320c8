//! A real OCI registry on loopback: Debian's `docker-registry` (CNCF distribution 2.8), started
//! per test with its own storage and port, stopped when dropped.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::debian_program;

/// The user the registry accepts when started with [`Registry::start_with_auth`].
pub const USER: &str = "ci";
/// That user's password.
pub const PASSWORD: &str = "wasm-ccm-test-password";
/// bcrypt (cost 5) of [`PASSWORD`]: distribution's htpasswd file takes only bcrypt.
const PASSWORD_BCRYPT: &str = "$2b$05$RP6YbMBB8NGF0sKotpBCWea7/XZnXePA1lyC1xwGlCM/T1sh5RbTC";

/// A running registry.
pub struct Registry {
    child: Child,
    addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl Registry {
    /// A registry anyone may push to and pull from.
    pub fn start() -> Result<Registry, String> {
        Registry::launch(false)
    }

    /// A registry that demands HTTP Basic credentials ([`USER`], [`PASSWORD`]).
    pub fn start_with_auth() -> Result<Registry, String> {
        Registry::launch(true)
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `127.0.0.1:PORT`, as a reference's registry part.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// The registry's storage root (blobs and repositories on disk).
    pub fn storage(&self) -> PathBuf {
        self.dir.path().join("storage")
    }

    /// The stored bytes of blob `digest` (`sha256:…`), read from the registry's filesystem
    /// layout rather than through a client: what a test checks the client against.
    pub fn stored_blob(&self, digest: &str) -> Vec<u8> {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        std::fs::read(
            self.storage()
                .join("docker/registry/v2/blobs/sha256")
                .join(&hex[..2])
                .join(hex)
                .join("data"),
        )
        .expect("the registry stores the blob")
    }

    /// The manifest digest `tag` of `repository` names in the registry's storage.
    pub fn stored_tag(&self, repository: &str, tag: &str) -> String {
        std::fs::read_to_string(
            self.storage()
                .join("docker/registry/v2/repositories")
                .join(repository)
                .join("_manifests/tags")
                .join(tag)
                .join("current/link"),
        )
        .expect("the registry stores the tag")
        .trim()
        .to_string()
    }

    fn launch(auth: bool) -> Result<Registry, String> {
        let program = debian_program("docker-registry", "docker-registry")?;
        // Another process can take the port between our probe and the registry's bind; the
        // registry then exits at once, and we try another.
        let mut last_error = String::new();
        for _ in 0..5 {
            let dir = tempfile::tempdir().map_err(|e| format!("cannot create a directory: {e}"))?;
            let addr = free_port()?;
            let config = dir.path().join("config.yml");
            let mut yaml = format!(
                "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n  secret: wasm-ccm-tests\n",
                dir.path().join("storage").display()
            );
            if auth {
                let htpasswd = dir.path().join("htpasswd");
                std::fs::write(&htpasswd, format!("{USER}:{PASSWORD_BCRYPT}\n"))
                    .map_err(|e| format!("cannot write {}: {e}", htpasswd.display()))?;
                yaml.push_str(&format!(
                    "auth:\n  htpasswd:\n    realm: wasm-ccm-tests\n    path: {}\n",
                    htpasswd.display()
                ));
            }
            std::fs::write(&config, yaml)
                .map_err(|e| format!("cannot write {}: {e}", config.display()))?;
            // The log goes to a file: a pipe nobody drains fills up and stalls the registry.
            let log_path = dir.path().join("registry.log");
            let log = std::fs::File::create(&log_path)
                .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
            let mut child = Command::new(&program)
                .arg("serve")
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
            match wait_ready(&mut child, addr, &log_path) {
                Ok(()) => {
                    return Ok(Registry { child, addr, dir });
                }
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    last_error = e;
                }
            }
        }
        Err(format!("the registry did not start: {last_error}"))
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<SocketAddr, String> {
    Ok(SocketAddr::from(([127, 0, 0, 1], crate::ports::reserve()?)))
}

/// Polls `GET /v2/` (any HTTP answer will do) until the registry answers, it exits, or 20 s pass.
fn wait_ready(child: &mut Child, addr: SocketAddr, log: &Path) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let stderr = std::fs::read_to_string(log).unwrap_or_default();
            return Err(format!("it exited ({status}): {}", stderr.trim()));
        }
        if answers_http(addr) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("nothing answered on {addr} within 20 s"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn answers_http(addr: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"GET /v2/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 ")
}
