//! The egress allow-list: which URLs a driver may reach, and which resolved addresses.
//!
//! A grant is `scheme://host[:port]`:
//! - `host` is a DNS name (`api.cloudscale.ch`), a wildcard (`*.example.com`: any name below
//!   example.com; `*` alone: any name), an IP address or a CIDR (`10.0.0.0/8`);
//! - the port defaults to the scheme's (443, 80); `:*` allows any port;
//! - no path: egress is decided per destination, not per URL.
//!
//! Names are matched before DNS; after DNS every resolved address is checked again, so a granted
//! name that resolves to loopback, a private range, link-local or a cloud metadata address is
//! refused unless such an address is granted explicitly as an IP or CIDR (or, for loopback, by
//! granting the name `localhost`). That stops a driver — or a DNS answer — from reaching the
//! node's metadata service or the cluster network through a public-looking name.

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use url::{Host, Url};

/// One `scheme://host[:port]` grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    scheme: Scheme,
    host: HostPattern,
    port: PortPattern,
    text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Http,
    Https,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    /// An exact DNS name, lower-cased, without a trailing dot.
    Name(String),
    /// `*.suffix`: any name ending in `.suffix`.
    Below(String),
    /// `*`: any DNS name (never an IP literal).
    AnyName,
    /// An address or a range of addresses.
    Net(IpNet),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PortPattern {
    Exact(u16),
    Any,
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for Grant {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!(
                "invalid egress pattern `{text}`: {why}; write scheme://host[:port], e.g. https://api.cloudscale.ch, https://*.example.com:8443 or http://127.0.0.1:8080"
            )
        };
        let (scheme, rest) = text.split_once("://").ok_or_else(|| bad("no scheme"))?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "https" => Scheme::Https,
            "http" => Scheme::Http,
            other => return Err(bad(&format!("scheme `{other}` is not http or https"))),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains('/') && rest.parse::<IpNet>().is_err() && !looks_like_cidr_with_port(rest)
        {
            return Err(bad("patterns have no path"));
        }
        let (host, port) = split_host_port(rest).map_err(|e| bad(&e))?;
        let port = match port {
            None => PortPattern::Exact(default_port(scheme)),
            Some("*") => PortPattern::Any,
            Some(p) => PortPattern::Exact(
                p.parse()
                    .map_err(|_| bad(&format!("`{p}` is not a port")))?,
            ),
        };
        let host = parse_host_pattern(host).map_err(|e| bad(&e))?;
        Ok(Grant {
            scheme,
            host,
            port,
            text: text.to_string(),
        })
    }
}

fn looks_like_cidr_with_port(rest: &str) -> bool {
    split_host_port(rest)
        .map(|(h, _)| h.parse::<IpNet>().is_ok())
        .unwrap_or(false)
}

fn default_port(scheme: Scheme) -> u16 {
    match scheme {
        Scheme::Https => 443,
        Scheme::Http => 80,
    }
}

/// Splits `host[:port]`, where host may be `[v6]`, `[v6]/len` or `v4/len`.
fn split_host_port(rest: &str) -> Result<(&str, Option<&str>), String> {
    if let Some(after) = rest.strip_prefix('[') {
        let (inside, tail) = after.split_once(']').ok_or("unclosed `[`")?;
        // `[2001:db8::]/32:443` keeps the prefix length with the address.
        let (len, tail) = match tail.strip_prefix('/') {
            Some(t) => match t.split_once(':') {
                Some((l, p)) => (Some(l), Some(p)),
                None => (Some(t), None),
            },
            None => (None, tail.strip_prefix(':')),
        };
        if tail.is_none() && !rest.ends_with(']') && len.is_none() {
            return Err("unexpected text after `]`".into());
        }
        let host_end = 1 + inside.len() + 1 + len.map(|l| l.len() + 1).unwrap_or(0);
        return Ok((&rest[..host_end], tail));
    }
    Ok(match rest.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (rest, None),
    })
}

fn parse_host_pattern(host: &str) -> Result<HostPattern, String> {
    if host.is_empty() {
        return Err("empty host".into());
    }
    let unbracketed = host.replace(['[', ']'], "");
    if let Ok(net) = unbracketed.parse::<IpNet>() {
        return Ok(HostPattern::Net(net));
    }
    if let Ok(ip) = unbracketed.parse::<IpAddr>() {
        return Ok(HostPattern::Net(IpNet::from(ip)));
    }
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if host == "*" {
        return Ok(HostPattern::AnyName);
    }
    let (pattern, name) = match host.strip_prefix("*.") {
        Some(suffix) => (HostPattern::Below(suffix.to_string()), suffix),
        None => (HostPattern::Name(host.clone()), host.as_str()),
    };
    let valid_label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    if name.split('.').all(valid_label) {
        Ok(pattern)
    } else {
        Err(format!(
            "`{host}` is not a DNS name, an IP address or a CIDR (wildcards only as a leading `*.`)"
        ))
    }
}

/// Why a destination was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Denied(pub String);

/// A driver's effective egress policy: the operator's grants, or the driver's declared defaults.
#[derive(Debug, Clone, Default)]
pub struct EgressPolicy {
    grants: Vec<Grant>,
}

impl EgressPolicy {
    /// Parses every pattern; the first malformed one is an error naming it.
    pub fn parse<S: AsRef<str>>(patterns: &[S]) -> Result<Self, String> {
        let grants = patterns
            .iter()
            .map(|p| p.as_ref().trim().parse())
            .collect::<Result<_, _>>()?;
        Ok(EgressPolicy { grants })
    }

    /// The grants as written.
    pub fn patterns(&self) -> Vec<String> {
        self.grants.iter().map(|g| g.text.clone()).collect()
    }

    /// Decides whether `url` may be requested (before DNS).
    pub fn check_url(&self, url: &Url) -> Result<(), Denied> {
        let scheme = match url.scheme() {
            "https" => Scheme::Https,
            "http" => Scheme::Http,
            other => {
                return Err(Denied(format!(
                    "egress to {url} denied: scheme `{other}` is not allowed; drivers may use http and https only"
                )));
            }
        };
        let port = url.port_or_known_default().unwrap_or(default_port(scheme));
        let host = url
            .host()
            .ok_or_else(|| Denied(format!("egress to {url} denied: the URL has no host")))?;
        let granted = self.grants.iter().any(|g| {
            g.scheme == scheme
                && match g.port {
                    PortPattern::Any => true,
                    PortPattern::Exact(p) => p == port,
                }
                && match (&g.host, &host) {
                    (HostPattern::Name(n), Host::Domain(d)) => n == &normalise(d),
                    (HostPattern::Below(s), Host::Domain(d)) => {
                        normalise(d).ends_with(&format!(".{s}"))
                    }
                    (HostPattern::AnyName, Host::Domain(_)) => true,
                    (HostPattern::Net(net), Host::Ipv4(ip)) => net.contains(&IpAddr::V4(*ip)),
                    (HostPattern::Net(net), Host::Ipv6(ip)) => net.contains(&IpAddr::V6(*ip)),
                    _ => false,
                }
        });
        if granted {
            return Ok(());
        }
        let destination = format!("{}://{}:{}", url.scheme(), host_text(&host), port);
        let current = if self.grants.is_empty() {
            "the driver has no egress grants".to_string()
        } else {
            format!("granted: {}", self.patterns().join(", "))
        };
        Err(Denied(format!(
            "egress to {destination} denied ({current}); add it with --allow-egress {destination}"
        )))
    }

    /// Decides whether a resolved address may be connected to. Public addresses always may;
    /// special ones (loopback, private, link-local, metadata, …) only when granted as an IP/CIDR,
    /// or loopback when `localhost` itself is granted.
    pub fn check_resolved(&self, ip: IpAddr) -> Result<(), SpecialAddress> {
        let Some(kind) = special_kind(ip) else {
            return Ok(());
        };
        let granted = self.grants.iter().any(|g| match &g.host {
            HostPattern::Net(net) => net.contains(&ip),
            HostPattern::Name(n) => n == "localhost" && kind == "loopback",
            _ => false,
        });
        if granted {
            Ok(())
        } else {
            Err(SpecialAddress { ip, kind })
        }
    }
}

/// A resolved address in a range that needs an explicit grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{ip} is a {kind} address")]
pub struct SpecialAddress {
    /// The address.
    pub ip: IpAddr,
    /// What kind of range it is in (loopback, private, link-local, …).
    pub kind: &'static str,
}

fn normalise(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

fn host_text(host: &Host<&str>) -> String {
    match host {
        Host::Domain(d) => normalise(d),
        Host::Ipv4(ip) => ip.to_string(),
        Host::Ipv6(ip) => format!("[{ip}]"),
    }
}

/// The special range `ip` falls in, if any. Cloud metadata services live at link-local
/// 169.254.169.254 and at fd00:ec2::254 (unique-local), both covered here.
pub fn special_kind(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            if v4.is_loopback() {
                Some("loopback")
            } else if v4.is_unspecified() {
                Some("unspecified")
            } else if v4.is_link_local() {
                Some("link-local (cloud metadata)")
            } else if v4.is_private() {
                Some("private")
            } else if o[0] == 100 && (64..128).contains(&o[1]) {
                Some("carrier-grade NAT")
            } else if v4.is_multicast() || v4.is_broadcast() || o[0] >= 240 {
                Some("multicast or reserved")
            } else if o[0] == 0 {
                Some("this-network")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return special_kind(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            if v6.is_loopback() {
                Some("loopback")
            } else if v6.is_unspecified() {
                Some("unspecified")
            } else if first & 0xffc0 == 0xfe80 {
                Some("link-local")
            } else if first & 0xfe00 == 0xfc00 {
                Some("unique-local (private)")
            } else if v6.is_multicast() {
                Some("multicast")
            } else {
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(p: &[&str]) -> EgressPolicy {
        EgressPolicy::parse(p).expect("valid patterns")
    }

    fn url(u: &str) -> Url {
        Url::parse(u).expect("valid url")
    }

    #[test]
    fn exact_name_and_default_port() {
        let p = policy(&["https://api.cloudscale.ch"]);
        assert!(
            p.check_url(&url("https://api.cloudscale.ch/v1/servers"))
                .is_ok()
        );
        assert!(p.check_url(&url("https://API.cloudscale.ch./v1")).is_ok());
        assert!(
            p.check_url(&url("https://api.cloudscale.ch:8443/"))
                .is_err()
        );
        assert!(p.check_url(&url("http://api.cloudscale.ch/")).is_err());
        assert!(p.check_url(&url("https://evil.ch/")).is_err());
    }

    #[test]
    fn wildcards_match_below_only() {
        let p = policy(&["https://*.example.com:*"]);
        assert!(p.check_url(&url("https://a.example.com:1234/")).is_ok());
        assert!(p.check_url(&url("https://a.b.example.com/")).is_ok());
        assert!(p.check_url(&url("https://example.com/")).is_err());
        assert!(p.check_url(&url("https://badexample.com/")).is_err());
        let any = policy(&["https://*"]);
        assert!(any.check_url(&url("https://anything.org/")).is_ok());
        assert!(
            any.check_url(&url("https://1.2.3.4/")).is_err(),
            "* never matches IP literals"
        );
    }

    #[test]
    fn ip_and_cidr_grants() {
        let p = policy(&[
            "http://127.0.0.1:8080",
            "https://10.0.0.0/8",
            "http://[::1]:9000",
        ]);
        assert!(p.check_url(&url("http://127.0.0.1:8080/x")).is_ok());
        assert!(p.check_url(&url("http://127.0.0.1:8081/x")).is_err());
        assert!(p.check_url(&url("https://10.9.8.7/")).is_ok());
        assert!(p.check_url(&url("http://[::1]:9000/")).is_ok());
        assert!(p.check_resolved("10.1.1.1".parse().unwrap()).is_ok());
        assert!(p.check_resolved("127.0.0.1".parse().unwrap()).is_ok());
        assert!(p.check_resolved("192.168.1.1".parse().unwrap()).is_err());
    }

    #[test]
    fn resolved_special_addresses_need_explicit_grants() {
        let p = policy(&["https://api.example.com"]);
        for ip in [
            "127.0.0.1",
            "10.0.0.1",
            "169.254.169.254",
            "::1",
            "fd00:ec2::254",
            "::ffff:10.0.0.1",
            "100.64.0.1",
            "0.0.0.0",
        ] {
            let e = p.check_resolved(ip.parse().unwrap()).unwrap_err();
            assert_eq!(
                e.ip.to_string().parse::<IpAddr>().unwrap(),
                ip.parse::<IpAddr>().unwrap()
            );
        }
        assert!(p.check_resolved("8.8.8.8".parse().unwrap()).is_ok());
        let local = policy(&["http://localhost:8080"]);
        assert!(local.check_resolved("127.0.0.1".parse().unwrap()).is_ok());
        assert!(local.check_resolved("10.0.0.1".parse().unwrap()).is_err());
    }

    #[test]
    fn denial_names_the_grant_to_add() {
        let p = policy(&["https://api.example.com"]);
        let Denied(msg) = p
            .check_url(&url("https://other.example.com:8443/path"))
            .unwrap_err();
        assert!(
            msg.contains("--allow-egress https://other.example.com:8443"),
            "{msg}"
        );
        assert!(msg.contains("granted: https://api.example.com"), "{msg}");
    }

    #[test]
    fn malformed_patterns_are_refused_with_an_example() {
        for bad in [
            "api.example.com",
            "ftp://x.org",
            "https://x.org/path",
            "https://x.org:http",
            "https://a..b",
            "https://",
        ] {
            let e = EgressPolicy::parse(&[bad]).unwrap_err();
            assert!(e.contains("scheme://host[:port]"), "{bad}: {e}");
        }
    }
}
