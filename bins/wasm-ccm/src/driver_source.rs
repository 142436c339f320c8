//! What names a driver and how its registry is reached: `--driver`'s [`DriverSource`] (a file
//! or an OCI reference) and the registry flags ([`RegistryArgs`]). A leaf, so the fetching
//! (`source.rs`) and the signing (`signing.rs`) both read it without naming each other both
//! ways.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use wasm_ccm_oci::{Client, ClientOptions, DockerConfig, Reference};

/// `--driver`: a path, or `oci://REGISTRY/REPO@sha256:…` (a tag is resolved and logged).
#[derive(Debug, Clone)]
pub enum DriverSource {
    /// A `.wasm` file (a mounted ConfigMap), watched for new versions.
    File(PathBuf),
    /// An OCI artifact, pulled once at start.
    Oci(Reference),
}

impl DriverSource {
    /// Parses `--driver`.
    pub fn parse(value: &str) -> anyhow::Result<DriverSource> {
        if value.starts_with(wasm_ccm_oci::SCHEME) {
            Ok(DriverSource::Oci(
                Reference::parse(value).map_err(anyhow::Error::msg)?,
            ))
        } else if value.is_empty() {
            bail!("--driver is empty: give the driver's .wasm path or an oci:// reference")
        } else {
            Ok(DriverSource::File(PathBuf::from(value)))
        }
    }
}

/// How registries are reached.
#[derive(Args, Debug, Clone, Default)]
pub struct RegistryArgs {
    /// Registry credentials: a dockerconfigjson file, such as an `imagePullSecrets` Secret
    /// mounted into the pod. A missing file means anonymous access.
    #[arg(long, value_name = "PATH")]
    registry_config: Option<PathBuf>,
    /// A registry (`host` or `host:port`) spoken to over plain HTTP. Loopback registries always
    /// are; any other needs this flag. Repeatable.
    #[arg(long, value_name = "HOST[:PORT]", value_parser = parse_registry_host)]
    insecure_registry: Vec<String>,
}

/// A registry as `--insecure-registry` names it: `host` or `host:port` (`[v6]:port` for IPv6),
/// nothing else. A URL or a path would silently match no registry, and plain HTTP would then be
/// refused at pull time with a message that never mentions the typo.
fn parse_registry_host(text: &str) -> Result<String, String> {
    let t = text.trim();
    if let Some((_, rest)) = t.split_once("://") {
        return Err(format!(
            "`{t}` is a URL; give the registry's host (and port) only: `{}`",
            rest.split('/').next().unwrap_or_default()
        ));
    }
    if t.contains('/') {
        return Err(format!(
            "`{t}` has a path; give the registry's host (and port) only: `{}`",
            t.split('/').next().unwrap_or_default()
        ));
    }
    let (host, port) = match t.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((addr, rest)) => (addr, rest.strip_prefix(':')),
            None => return Err(format!("`{t}`: an IPv6 address needs its closing `]`")),
        },
        None => match t.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (t, None),
        },
    };
    let host_ok = !host.is_empty()
        && (t.starts_with('[') && host.parse::<std::net::Ipv6Addr>().is_ok()
            || host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.'));
    if !host_ok {
        return Err(format!(
            "`{t}` is not a registry host: write `host` or `host:port`, e.g. `registry.lan:5000`"
        ));
    }
    if let Some(port) = port
        && !port.parse::<u16>().is_ok_and(|p| p > 0)
    {
        return Err(format!("`{t}`: `{port}` is not a port (1–65535)"));
    }
    Ok(t.to_string())
}

impl RegistryArgs {
    /// `--registry-config`, when it names something that exists (absent means anonymous).
    pub fn existing_config(&self) -> Option<&std::path::Path> {
        self.registry_config.as_deref().filter(|p| p.exists())
    }

    /// The registry client these options describe.
    pub fn client(&self) -> anyhow::Result<Client> {
        let credentials = match &self.registry_config {
            Some(path) if path.exists() => DockerConfig::read(path).map_err(anyhow::Error::msg)?,
            Some(path) => {
                // The Deployment mounts an optional Secret: no Secret, no file, anonymous pulls.
                tracing::info!(path = %path.display(), "no registry credentials file; pulling anonymously");
                DockerConfig::default()
            }
            None => DockerConfig::default(),
        };
        for registry in &self.insecure_registry {
            tracing::warn!(%registry, "plain HTTP allowed to this registry (--insecure-registry)");
        }
        Client::new(ClientOptions {
            credentials,
            insecure_registries: self.insecure_registry.clone(),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod registry_host_tests {
    use super::parse_registry_host;

    #[test]
    fn hosts_and_ports_pass_and_urls_paths_and_bad_ports_are_refused_with_the_fix() {
        for ok in [
            "registry.lan",
            "registry.lan:5000",
            "10.0.0.5:80",
            "[::1]:5000",
            "[fd00::1]",
        ] {
            assert_eq!(parse_registry_host(ok).as_deref(), Ok(ok));
        }
        let e = parse_registry_host("http://registry.lan:5000/v2").unwrap_err();
        assert!(
            e.contains("is a URL") && e.contains("`registry.lan:5000`"),
            "{e}"
        );
        let e = parse_registry_host("registry.lan/team").unwrap_err();
        assert!(
            e.contains("has a path") && e.contains("`registry.lan`"),
            "{e}"
        );
        assert!(
            parse_registry_host("registry.lan:http")
                .unwrap_err()
                .contains("not a port")
        );
        assert!(parse_registry_host("registry.lan:0").is_err());
        assert!(parse_registry_host("").is_err());
        assert!(parse_registry_host("reg istry").is_err());
        assert!(parse_registry_host("[::1").is_err());
    }
}
