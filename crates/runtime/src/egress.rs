//! The egress allow-list: which URLs a driver may reach, and which resolved addresses.
//!
//! A grant is `scheme://host[:port]`:
//! - `host` is a DNS name (`api.cloudscale.ch`), a wildcard (`*.example.com`: any name below
//!   example.com; `*` alone: any name), an IPv4 address or CIDR (`10.0.0.0/8`), or an IPv6
//!   address or CIDR in brackets (`[fd00::1]`, `[fd00::]/8`, `[2001:db8::]/32:443`);
//! - the port defaults to the scheme's (443, 80); `:*` allows any port;
//! - no path: egress is decided per destination, not per URL.
//!
//! Every decision is made one grant at a time, never from the union of several grants' parts: a
//! URL passes when one grant matches its scheme, its host and its port. Names are matched before
//! DNS; after DNS every resolved address is judged against the grants that matched the URL
//! ([`crate::special_addr`] classifies addresses):
//! - a globally reachable unicast address passes;
//! - a special-purpose address (loopback, private-use, link-local, documentation, …) passes only
//!   when a grant naming this host exactly — not a wildcard — matched the URL *and* an address
//!   grant with the URL's scheme and port contains the address. A name then reaches nothing the
//!   address in the URL would not have reached, and a wildcard grant (`http://*:8080`) never leads
//!   into the cluster network or to the node. `localhost`, granted by that name, reaches loopback
//!   by itself;
//! - a cloud metadata endpoint, or an address of the host wasm-ccm runs on, passes only with an
//!   address grant naming exactly that address: no CIDR (not even `0.0.0.0/0`) and no wildcard
//!   opens one. Denials never suggest granting a metadata endpoint.
//!
//! IP literals in URLs get the same rules in [`EgressPolicy::check_url`] (the connector does not
//! resolve them). A driver's own `default-egress` is held to more — DNS names below one
//! registrable domain, no `localhost`, no IPs, no `*`, no any-port ([`validate_default_egress`]) —
//! so every special address is the operator's decision; [`broad_grant_warnings`] points out wide
//! grants for `inspect` and `conformance`.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use url::{Host, Url};

use crate::special_addr::{self, HostAddresses, Reach};

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

impl Scheme {
    fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
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
                "invalid egress pattern `{text}`: {why}; write scheme://host[:port], e.g. https://api.cloudscale.ch, https://*.example.com:8443, http://127.0.0.1:8080 or http://[fd00::]/8"
            )
        };
        let (scheme, rest) = text.split_once("://").ok_or_else(|| bad("no scheme"))?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "https" => Scheme::Https,
            "http" => Scheme::Http,
            other => return Err(bad(&format!("scheme `{other}` is not http or https"))),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (host, port) = split_pattern(rest).map_err(|e| bad(&e))?;
        let port = match port {
            None => PortPattern::Exact(default_port(scheme)),
            Some("*") => PortPattern::Any,
            Some(p) => PortPattern::Exact(
                p.parse()
                    .map_err(|_| bad(&format!("`{p}` is not a port")))?,
            ),
        };
        Ok(Grant {
            scheme,
            host,
            port,
            text: text.to_string(),
        })
    }
}

impl Grant {
    /// Whether the grant is for this scheme and port.
    fn allows(&self, scheme: Scheme, port: u16) -> bool {
        self.scheme == scheme
            && match self.port {
                PortPattern::Any => true,
                PortPattern::Exact(p) => p == port,
            }
    }

    /// Whether the grant's host pattern matches the URL's host (names by name, literals by
    /// address).
    fn matches_host(&self, host: &Host<&str>) -> bool {
        match (&self.host, host) {
            (HostPattern::Name(n), Host::Domain(d)) => *n == normalise(d),
            (HostPattern::Below(s), Host::Domain(d)) => normalise(d).ends_with(&format!(".{s}")),
            (HostPattern::AnyName, Host::Domain(_)) => true,
            (HostPattern::Net(net), Host::Ipv4(ip)) => net.contains(&IpAddr::V4(*ip)),
            (HostPattern::Net(net), Host::Ipv6(ip)) => net.contains(&IpAddr::V6(*ip)),
            _ => false,
        }
    }

    /// Whether the grant's address range contains `ip`.
    fn contains(&self, ip: IpAddr) -> bool {
        matches!(&self.host, HostPattern::Net(net) if net.contains(&ip))
    }

    /// Whether the grant names exactly `ip`: one address, not a range.
    fn names_exactly(&self, ip: IpAddr) -> bool {
        matches!(&self.host, HostPattern::Net(net)
            if net.prefix_len() == net.max_prefix_len() && net.addr() == ip)
    }

    fn is_exact_name(&self) -> bool {
        matches!(self.host, HostPattern::Name(_))
    }

    fn is_localhost(&self) -> bool {
        matches!(&self.host, HostPattern::Name(n) if n == "localhost")
    }

    /// Why this grant is broad, if it is.
    fn broadness(&self) -> Vec<String> {
        let text = &self.text;
        let mut why = Vec::new();
        match &self.host {
            HostPattern::Net(net) => {
                let (len, bits, limit) = match net {
                    IpNet::V4(n) => (n.prefix_len(), 32, 24),
                    IpNet::V6(n) => (n.prefix_len(), 128, 48),
                };
                if len < limit {
                    why.push(format!(
                        "`{text}` grants a /{len}: 2^{} addresses, more than a /{limit}; grant the cloud API's address or a narrower range",
                        bits - len
                    ));
                }
            }
            HostPattern::AnyName => why.push(format!(
                "`{text}` grants every DNS name; grant the cloud API's host instead"
            )),
            HostPattern::Below(suffix) => why.push(format!(
                "`{text}` grants every name below {suffix}, not one host"
            )),
            HostPattern::Name(_) => {}
        }
        if self.port == PortPattern::Any {
            why.push(format!(
                "`{text}` grants every port; name the port the API listens on"
            ));
        }
        why
    }
}

fn default_port(scheme: Scheme) -> u16 {
    match scheme {
        Scheme::Https => 443,
        Scheme::Http => 80,
    }
}

/// Splits `host[:port]` and parses the host: a name, `*`, `*.name`, an IPv4 address or CIDR
/// (`10.0.0.0/8`), or an IPv6 address or CIDR in brackets (`[fd00::1]`, `[fd00::]/8`; the prefix
/// length stays outside the brackets, as in `[2001:db8::]/32:443`).
fn split_pattern(rest: &str) -> Result<(HostPattern, Option<&str>), String> {
    const NO_PATH: &str = "patterns have no path";
    if let Some(after) = rest.strip_prefix('[') {
        let (inside, mut tail) = after.split_once(']').ok_or("unclosed `[`")?;
        let mut len = None;
        if let Some(t) = tail.strip_prefix('/') {
            let end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
            if end == 0 {
                return Err(NO_PATH.into());
            }
            len = Some(&t[..end]);
            tail = &t[end..];
        }
        let port = match tail {
            "" => None,
            t => match t.strip_prefix(':') {
                Some(p) => Some(p),
                None if t.starts_with('/') => return Err(NO_PATH.into()),
                None => return Err(format!("unexpected `{t}` after the address")),
            },
        };
        if port.is_some_and(|p| p.contains('/')) {
            return Err(NO_PATH.into());
        }
        let addr: Ipv6Addr = inside.parse().map_err(|_| {
            format!("`[{inside}]` is not an IPv6 address (brackets hold IPv6 addresses only)")
        })?;
        let net = match len {
            None => IpNet::from(IpAddr::V6(addr)),
            Some(l) => IpNet::V6(
                l.parse::<u8>()
                    .ok()
                    .and_then(|l| Ipv6Net::new(addr, l).ok())
                    .ok_or_else(|| format!("/{l} is not an IPv6 prefix length (0-128)"))?,
            ),
        };
        return Ok((HostPattern::Net(net), port));
    }
    let (host, port) = match rest.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (rest, None),
    };
    if port.is_some_and(|p| p.contains(':')) {
        return Err(
            "write IPv6 addresses in brackets, e.g. http://[fd00::1]:8080 or http://[fd00::]/8"
                .into(),
        );
    }
    if port.is_some_and(|p| p.contains('/')) {
        return Err(NO_PATH.into());
    }
    if let Some((addr, len)) = host.split_once('/') {
        // Only an IPv4 CIDR has a `/` in an unbracketed host; anything else is a path.
        let Ok(addr) = addr.parse::<Ipv4Addr>() else {
            return Err(NO_PATH.into());
        };
        let net = len
            .parse::<u8>()
            .ok()
            .and_then(|l| Ipv4Net::new(addr, l).ok())
            .ok_or_else(|| format!("/{len} is not an IPv4 prefix length (0-32)"))?;
        return Ok((HostPattern::Net(IpNet::V4(net)), port));
    }
    Ok((parse_host_pattern(host)?, port))
}

fn parse_host_pattern(host: &str) -> Result<HostPattern, String> {
    if host.is_empty() {
        return Err("empty host".into());
    }
    if let Ok(ip) = host.parse::<Ipv4Addr>() {
        return Ok(HostPattern::Net(IpNet::from(IpAddr::V4(ip))));
    }
    let host = normalise(host);
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
pub(crate) struct Denied(pub String);

/// A driver's effective egress policy: the operator's grants, or the driver's declared defaults.
#[derive(Debug, Clone, Default)]
pub struct EgressPolicy {
    grants: Vec<Grant>,
    host_addresses: HostAddresses,
}

/// A URL's scheme, host and port: what grants are matched against.
struct Target<'a> {
    scheme: Scheme,
    host: Host<&'a str>,
    port: u16,
}

impl<'a> Target<'a> {
    fn of(url: &'a Url) -> Result<Self, Denied> {
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
        Ok(Target { scheme, host, port })
    }

    fn ip(&self) -> Option<IpAddr> {
        match self.host {
            Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
            Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
            Host::Domain(_) => None,
        }
    }

    /// `scheme://address:port` with another host: the grant that would open it.
    fn with_address(&self, ip: IpAddr) -> String {
        format!("{}://{}:{}", self.scheme.as_str(), ip_text(ip), self.port)
    }
}

impl fmt::Display for Target<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}://{}:{}",
            self.scheme.as_str(),
            host_text(&self.host),
            self.port
        )
    }
}

impl EgressPolicy {
    /// Parses every pattern; the first malformed one is an error naming it.
    pub fn parse<S: AsRef<str>>(patterns: &[S]) -> Result<Self, String> {
        Ok(Self::from_grants(parse_grants(patterns)?))
    }

    /// The policy of grants already parsed (by clap, from `--allow-egress`: a flag is parsed
    /// once, where it is read).
    pub fn from_grants(grants: Vec<Grant>) -> Self {
        EgressPolicy {
            grants,
            host_addresses: HostAddresses::default(),
        }
    }

    /// Parses a driver's own `default-egress`, refusing what only an operator may grant (see
    /// `validate_default_egress`). The loader checks and parses in two steps; this pair is for the
    /// tests.
    #[cfg(test)]
    pub(crate) fn parse_driver_defaults<S: AsRef<str>>(patterns: &[S]) -> Result<Self, String> {
        validate_default_egress(patterns)?;
        Self::parse(patterns)
    }

    /// The same policy judging "this host's own addresses" by `addresses` instead of the
    /// system's interfaces (tests; hosts that know better).
    pub(crate) fn with_host_addresses(mut self, addresses: HostAddresses) -> Self {
        self.host_addresses = addresses;
        self
    }

    /// The grants as written.
    pub(crate) fn patterns(&self) -> Vec<String> {
        self.grants.iter().map(|g| g.text.clone()).collect()
    }

    /// Warnings about broad grants in this policy (see [`broad_grant_warnings`]).
    pub fn warnings(&self) -> Vec<String> {
        self.grants.iter().flat_map(Grant::broadness).collect()
    }

    fn matching<'g>(&'g self, target: &Target) -> Vec<&'g Grant> {
        self.grants
            .iter()
            .filter(|g| g.allows(target.scheme, target.port) && g.matches_host(&target.host))
            .collect()
    }

    fn granted_text(&self) -> String {
        if self.grants.is_empty() {
            "the driver has no egress grants".to_string()
        } else {
            format!("granted: {}", self.patterns().join(", "))
        }
    }

    /// Decides whether `url` may be requested (before DNS). An IP literal is judged in full
    /// here: a metadata endpoint or this host's own address needs a grant naming it exactly.
    pub(crate) fn check_url(&self, url: &Url) -> Result<(), Denied> {
        self.check_url_named(url).map(|_| ())
    }

    /// [`EgressPolicy::check_url`], also telling whether a grant that let `url` pass names its
    /// host exactly (a DNS name without a wildcard, or a single address): then the host is the
    /// operator's text, not a name the driver chose.
    pub(crate) fn check_url_named(&self, url: &Url) -> Result<bool, Denied> {
        let target = Target::of(url)?;
        let matched = self.matching(&target);
        let named = || {
            matched
                .iter()
                .any(|g| g.is_exact_name() || target.ip().is_some_and(|ip| g.names_exactly(ip)))
        };
        let pinned =
            target.ip().and_then(
                |ip| match special_addr::classify(ip, &self.host_addresses) {
                    Reach::Pinned { kind, metadata } => Some((ip, kind, metadata)),
                    _ => None,
                },
            );
        match (pinned, matched.is_empty()) {
            (None, false) => Ok(named()),
            (None, true) => Err(Denied(format!(
                "egress to {target} denied ({}); add it with --allow-egress {target}",
                self.granted_text()
            ))),
            (Some((ip, kind, metadata)), true) => Err(Denied(format!(
                "egress to {target} denied: {ip} is {kind}; {} ({})",
                pinned_note(metadata),
                self.granted_text()
            ))),
            (Some((ip, kind, metadata)), false) => {
                if matched.iter().any(|g| g.names_exactly(ip)) {
                    return Ok(true);
                }
                Err(Denied(format!(
                    "egress to {target} denied: {ip} is {kind}, which a range grant ({}) never opens; {}",
                    texts(&matched),
                    pinned_note(metadata)
                )))
            }
        }
    }

    /// Decides whether `ip`, an address `url`'s host resolved to, may be connected to, judged by
    /// the grants that matched `url` (see the module documentation). Without `url` (the host
    /// could not tell which request a connection is for) only globally reachable addresses
    /// pass.
    pub(crate) fn check_resolved(
        &self,
        url: Option<&Url>,
        ip: IpAddr,
    ) -> Result<(), SpecialAddress> {
        let reach = special_addr::classify(ip, &self.host_addresses);
        let (loopback, pinned) = match &reach {
            Reach::Global => return Ok(()),
            Reach::Special { loopback, .. } => (*loopback, false),
            Reach::Pinned { .. } => (false, true),
        };
        let refuse = |remedy: String| {
            Err(SpecialAddress {
                ip,
                kind: reach.kind().to_string(),
                remedy,
            })
        };
        let Some(target) = url.and_then(|u| Target::of(u).ok()) else {
            return refuse(
                "the host could not tell which request this connection is for, so only globally reachable addresses are allowed"
                    .into(),
            );
        };
        let matched = self.matching(&target);
        // An address grant for the URL's scheme and port that opens this address.
        let opens = |g: &Grant| {
            g.allows(target.scheme, target.port)
                && if pinned {
                    g.names_exactly(ip)
                } else {
                    g.contains(ip)
                }
        };
        let allowed = match &target.host {
            Host::Ipv4(_) | Host::Ipv6(_) => matched.iter().any(|g| opens(g)),
            Host::Domain(_) => {
                let by_name: Vec<&Grant> = matched
                    .iter()
                    .copied()
                    .filter(|g| g.is_exact_name())
                    .collect();
                !by_name.is_empty()
                    && ((loopback && by_name.iter().any(|g| g.is_localhost()))
                        || self.grants.iter().any(opens))
            }
        };
        if allowed {
            Ok(())
        } else {
            refuse(remedy(&target, ip, &reach, &matched))
        }
    }
}

/// What to do about a refused resolved address.
fn remedy(target: &Target, ip: IpAddr, reach: &Reach, matched: &[&Grant]) -> String {
    let address = target.with_address(ip);
    match (reach, &target.host) {
        (Reach::Global, _) => String::new(),
        (Reach::Pinned { metadata, .. }, _) => pinned_note(*metadata).to_string(),
        (Reach::Special { .. }, Host::Ipv4(_) | Host::Ipv6(_)) => {
            format!("add --allow-egress {address} (or a CIDR containing it)")
        }
        (Reach::Special { loopback, .. }, Host::Domain(name)) => {
            if matched.iter().any(|g| g.is_exact_name()) {
                return format!(
                    "a name reaches such an address only when the address is granted for the same scheme and port too: add --allow-egress {address} (or a CIDR containing it)"
                );
            }
            let by = if matched.is_empty() {
                "no grant names this host".to_string()
            } else {
                format!(
                    "{} matches the name by wildcard, which reaches globally reachable addresses only",
                    texts(matched)
                )
            };
            let name_grant = format!(
                "{}://{}:{}",
                target.scheme.as_str(),
                normalise(name),
                target.port
            );
            if *loopback && normalise(name) == "localhost" {
                format!("{by}; grant the name itself: --allow-egress {name_grant}")
            } else {
                format!(
                    "{by}; to allow it, grant the name itself and the address: --allow-egress {name_grant} --allow-egress {address}"
                )
            }
        }
    }
}

/// Why a pinned address stays closed. Never a suggestion to grant a metadata endpoint.
fn pinned_note(metadata: bool) -> &'static str {
    if metadata {
        "drivers are kept away from cloud metadata endpoints"
    } else {
        "no wildcard or range grant opens the host's own addresses"
    }
}

fn texts(grants: &[&Grant]) -> String {
    grants
        .iter()
        .map(|g| format!("`{}`", g.text))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A resolved address the grants that matched the URL do not open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{ip} is {kind}")]
pub(crate) struct SpecialAddress {
    /// The address.
    pub ip: IpAddr,
    /// What it is: its special-purpose range with the RFC, a metadata endpoint, the host's own.
    pub kind: String,
    /// What the operator can do about it (never: grant a metadata endpoint).
    pub remedy: String,
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

fn ip_text(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// Checks the `default-egress` a driver declares for itself. A driver may grant itself DNS
/// names only — `https://api.example.com`, `https://*.api.example.com`, with an explicit scheme
/// and at most a fixed port — because everything else reaches what only the operator can
/// vouch for: IP literals and CIDRs (loopback, the cluster network, metadata endpoints, the node
/// itself), `localhost` and other local-only names, `*` (every host), `:*` (every port), and
/// wildcards broader than one registrable domain (`*.com`, `*.co.uk`).
///
/// Returns every problem, each naming the pattern, what is wrong and what to write instead.
///
/// "Broader than one registrable domain" is a heuristic, not the Public Suffix List: a wildcard
/// needs at least two labels below it (`*.example.com`), three when its last two labels are a
/// common multi-label public suffix (`*.example.co.uk`; see [`MULTI_LABEL_PUBLIC_SUFFIXES`]).
/// Suffixes run by companies (`amazonaws.com`) are deliberately not listed: a cloud's own
/// driver legitimately grants `*.amazonaws.com`.
pub(crate) fn validate_default_egress<S: AsRef<str>>(patterns: &[S]) -> Result<(), String> {
    let problems: Vec<String> = patterns
        .iter()
        .filter_map(|p| default_grant_problem(p.as_ref().trim()))
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

fn default_grant_problem(text: &str) -> Option<String> {
    let grant: Grant = match text.parse() {
        Ok(g) => g,
        Err(e) => return Some(e),
    };
    let operator = "only the operator grants that, with --allow-egress";
    let name = match &grant.host {
        HostPattern::Net(_) => {
            return Some(format!(
                "`{text}`: a driver's default egress names DNS hosts, not IP addresses or CIDRs (those may be loopback, the cluster network, a metadata endpoint or the node itself); {operator}"
            ));
        }
        HostPattern::AnyName => {
            return Some(format!(
                "`{text}`: a bare `*` grants every host there is; declare the cloud API's host (e.g. https://api.example.com) or a wildcard below the cloud's own domain (e.g. https://*.api.example.com)"
            ));
        }
        HostPattern::Name(n) | HostPattern::Below(n) => n,
    };
    if let Some(local) = local_only_suffix(name) {
        return Some(format!(
            "`{text}`: names under `{local}` are local to this machine or network, not a cloud API; {operator}"
        ));
    }
    if let HostPattern::Below(suffix) = &grant.host
        && let Some(why) = too_broad(suffix)
    {
        return Some(format!(
            "`{text}`: {why}; use a wildcard below the cloud's own domain (e.g. https://*.example.com or https://*.example.co.uk) or name the API's host"
        ));
    }
    if grant.port == PortPattern::Any {
        return Some(format!(
            "`{text}`: a driver may not grant itself every port; name the port (e.g. {}://api.example.com:8443) or leave it out for the scheme's default",
            grant.scheme.as_str()
        ));
    }
    None
}

/// The special-use domain a name belongs to when it resolves only locally: `localhost`
/// (RFC 6761), `local` (mDNS, RFC 6762), `home.arpa` (RFC 8375), `internal` (reserved by ICANN
/// for private use), `localdomain` (a common resolver default).
fn local_only_suffix(name: &str) -> Option<&'static str> {
    ["localhost", "local", "home.arpa", "internal", "localdomain"]
        .into_iter()
        .find(|s| name == *s || name.ends_with(&format!(".{s}")))
}

/// Common public suffixes of two labels (ICANN section of the Public Suffix List): a wildcard
/// directly below one covers every domain registered there. The list is short on purpose; it
/// catches the usual mistakes, it is not a registry.
#[rustfmt::skip]
pub(crate) const MULTI_LABEL_PUBLIC_SUFFIXES: &[&str] = &[
    // United Kingdom, Ireland
    "co.uk", "org.uk", "me.uk", "ltd.uk", "plc.uk", "net.uk", "ac.uk", "gov.uk", "sch.uk",
    "nhs.uk", "gov.ie",
    // Australia, New Zealand
    "com.au", "net.au", "org.au", "edu.au", "gov.au", "id.au", "asn.au",
    "co.nz", "net.nz", "org.nz", "ac.nz", "govt.nz",
    // Japan, Korea
    "co.jp", "ne.jp", "or.jp", "ac.jp", "go.jp", "gr.jp", "ed.jp", "lg.jp",
    "co.kr", "or.kr", "ne.kr", "go.kr", "ac.kr",
    // China, Hong Kong, Taiwan, Singapore
    "com.cn", "net.cn", "org.cn", "gov.cn", "edu.cn", "ac.cn",
    "com.hk", "net.hk", "org.hk", "gov.hk", "edu.hk",
    "com.tw", "net.tw", "org.tw", "gov.tw", "edu.tw",
    "com.sg", "net.sg", "org.sg", "gov.sg", "edu.sg",
    // South and South-East Asia
    "co.in", "net.in", "org.in", "firm.in", "gen.in", "ind.in", "ac.in", "gov.in",
    "co.id", "or.id", "ac.id", "go.id", "com.my", "net.my", "org.my", "gov.my",
    "com.ph", "net.ph", "org.ph", "com.vn", "net.vn", "co.th", "in.th", "ac.th", "go.th",
    "com.pk", "com.bd",
    // Americas
    "com.br", "net.br", "org.br", "gov.br", "com.mx", "org.mx", "gob.mx", "com.ar", "gob.ar",
    "com.co", "com.pe", "com.uy", "com.ve", "com.ec",
    // Europe, Middle East, Africa
    "co.at", "or.at", "gv.at", "ac.at", "com.es", "org.es", "gob.es", "com.pt", "org.pt",
    "com.gr", "gov.gr", "com.pl", "net.pl", "org.pl", "com.tr", "net.tr", "org.tr", "gov.tr",
    "com.ua", "net.ua", "org.ua", "gov.ua", "co.il", "org.il", "ac.il", "gov.il",
    "com.sa", "gov.sa", "com.eg", "com.ng", "co.za", "org.za", "gov.za", "ac.za",
    "co.ke", "co.ug", "co.tz",
];

/// Why a wildcard below `suffix` covers more than one registrable domain, if it does.
fn too_broad(suffix: &str) -> Option<String> {
    let labels = suffix.split('.').count();
    if labels < 2 {
        return Some(format!(
            "`*.{suffix}` covers every domain under the top-level domain `{suffix}`"
        ));
    }
    if MULTI_LABEL_PUBLIC_SUFFIXES.contains(&suffix) {
        return Some(format!(
            "`{suffix}` is a public suffix, so `*.{suffix}` covers every domain registered under it"
        ));
    }
    None
}

/// Parses every pattern into a [`Grant`]; the first malformed one is an error naming it.
pub fn parse_grants<S: AsRef<str>>(patterns: &[S]) -> Result<Vec<Grant>, String> {
    patterns.iter().map(|p| parse_grant(p.as_ref())).collect()
}

/// Parses one pattern (surrounding blanks ignored): the one parser of a grant, which the flags'
/// `value_parser`s and the files' readers share.
pub fn parse_grant(text: &str) -> Result<Grant, String> {
    text.trim().parse()
}

/// Human-readable warnings about broad grants in an effective egress list, one per problem:
/// CIDRs wider than a /24 (IPv4) or a /48 (IPv6), wildcard hosts (`*`, `*.example.com`) and
/// any-port grants. A pattern that does not parse is reported as such. `inspect` shows these;
/// `conformance` fails a driver whose defaults have any.
pub fn broad_grant_warnings<S: AsRef<str>>(patterns: &[S]) -> Vec<String> {
    patterns
        .iter()
        .flat_map(|p| match p.as_ref().trim().parse::<Grant>() {
            Ok(g) => g.broadness(),
            Err(e) => vec![e],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A policy whose host has no addresses of its own, so results do not depend on the machine.
    fn policy(p: &[&str]) -> EgressPolicy {
        EgressPolicy::parse(p)
            .expect("valid patterns")
            .with_host_addresses(HostAddresses::fixed([]))
    }

    fn url(u: &str) -> Url {
        Url::parse(u).expect("valid url")
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("an address")
    }

    /// Whether `address`, resolved for `u`, passes.
    fn resolves(p: &EgressPolicy, u: &str, address: &str) -> bool {
        p.check_resolved(Some(&url(u)), ip(address)).is_ok()
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
    fn only_an_exact_grant_names_the_host() {
        let p = policy(&[
            "https://api.example.com",
            "https://*.example.org",
            "http://10.0.0.0/8",
            "http://192.0.2.7",
        ]);
        let named = |u: &str| p.check_url_named(&url(u)).expect("granted");
        assert!(named("https://api.example.com/v1"));
        assert!(!named("https://s3cr3t.example.org/v1"));
        assert!(!named("http://10.1.2.3/"));
        assert!(named("http://192.0.2.7/"));
        assert!(p.check_url_named(&url("https://evil.example/")).is_err());
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
        assert!(resolves(&p, "https://10.9.8.7/", "10.1.1.1"));
        assert!(resolves(&p, "http://127.0.0.1:8080/", "127.0.0.1"));
        assert!(!resolves(&p, "https://10.9.8.7/", "192.168.1.1"));
    }

    #[test]
    fn ipv6_cidr_grants_parse() {
        let p = policy(&[
            "http://[fd00::]/8",
            "http://[::1]/128",
            "https://[2001:db8::]/32:443",
            "http://[::]/0:*",
            "http://[fd00::1]:8080/",
            "http://[fe80::]/10/",
        ]);
        assert!(p.check_url(&url("http://[fd12::1]/")).is_ok());
        assert!(p.check_url(&url("http://[::1]/")).is_ok());
        assert!(p.check_url(&url("https://[2001:db8:1::5]/")).is_ok());
        assert!(p.check_url(&url("https://[2001:db9::5]/")).is_err());
        assert!(p.check_url(&url("http://[2a00::1]:1234/")).is_ok());
        assert!(p.check_url(&url("http://[fd00::1]:8080/")).is_ok());
        assert!(
            p.check_url(&url("http://10.0.0.1/")).is_err(),
            "an IPv6 range holds no IPv4 address"
        );
        for bad in [
            "http://[::1]/129",
            "http://[::1]/path",
            "http://[::1]/64/path",
            "http://[::1]x",
            "http://[10.0.0.1]",
            "http://[::1",
            "http://::1",
            "http://fd00::/8",
            "http://10.0.0.0/33",
            "http://10.0.0.0/8/x",
            "http://[::1]:80/x",
        ] {
            let e = EgressPolicy::parse(&[bad]).unwrap_err();
            assert!(e.contains("scheme://host[:port]"), "{bad}: {e}");
        }
        let e = EgressPolicy::parse(&["http://[::1]/path"]).unwrap_err();
        assert!(e.contains("no path"), "{e}");
        let e = EgressPolicy::parse(&["http://fd00::1"]).unwrap_err();
        assert!(e.contains("brackets"), "{e}");
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
            let e = p
                .check_resolved(Some(&url("https://api.example.com/")), ip.parse().unwrap())
                .unwrap_err();
            assert_eq!(
                e.ip.to_string().parse::<IpAddr>().unwrap(),
                ip.parse::<IpAddr>().unwrap()
            );
        }
        assert!(resolves(&p, "https://api.example.com/", "8.8.8.8"));
        let local = policy(&["http://localhost:8080"]);
        assert!(resolves(&local, "http://localhost:8080/", "127.0.0.1"));
        assert!(resolves(&local, "http://localhost:8080/", "::1"));
        assert!(!resolves(&local, "http://localhost:8080/", "10.0.0.1"));
    }

    #[test]
    fn a_special_address_is_judged_by_the_grant_that_matched_the_url() {
        // S1-2: loopback granted on one port, every name on another.
        let p = policy(&["http://127.0.0.1:18081", "http://*:18082"]);
        assert!(!resolves(&p, "http://localhost:18082/", "127.0.0.1"));
        let p = policy(&["http://localhost:18081", "http://*:18082"]);
        assert!(!resolves(&p, "http://localhost:18082/", "127.0.0.1"));
        assert!(!resolves(&p, "http://evil.example:18082/", "127.0.0.1"));
        assert!(resolves(&p, "http://localhost:18081/", "127.0.0.1"));
        // A wildcard never leads to a special address, even with the address granted beside it.
        let p = policy(&["http://*:8080", "http://10.0.0.0/8:8080"]);
        assert!(!resolves(&p, "http://evil.example:8080/", "10.1.2.3"));
        assert!(p.check_url(&url("http://10.1.2.3:8080/")).is_ok());
        // An exact name pairs with an address grant of the same scheme and port ...
        let p = policy(&[
            "https://cloudstack.corp",
            "https://10.1.2.0/24",
            "http://10.9.0.0/16",
            "https://10.8.0.0/16:8443",
        ]);
        assert!(resolves(&p, "https://cloudstack.corp/", "10.1.2.3"));
        // ... not with another scheme's, another port's, or one that does not contain it.
        assert!(!resolves(&p, "https://cloudstack.corp/", "10.9.0.1"));
        assert!(!resolves(&p, "https://cloudstack.corp/", "10.8.0.1"));
        assert!(!resolves(&p, "https://cloudstack.corp/", "192.168.0.1"));
        // `localhost` by name opens loopback, on its own scheme and port only.
        let p = policy(&["http://localhost:8080"]);
        assert!(!resolves(&p, "https://localhost:8080/", "127.0.0.1"));
        assert!(!resolves(&p, "http://localhost:8081/", "127.0.0.1"));
        // A literal URL is judged by the address grant that matched it.
        let p = policy(&["http://127.0.0.0/8:9000"]);
        assert!(resolves(&p, "http://127.0.0.5:9000/", "127.0.0.5"));
        assert!(!resolves(&p, "http://127.0.0.5:9001/", "127.0.0.5"));
        // Without a URL only global addresses pass.
        assert!(p.check_resolved(None, ip("127.0.0.1")).is_err());
        assert!(p.check_resolved(None, ip("8.8.8.8")).is_ok());
    }

    #[test]
    fn resolution_refusals_say_what_would_open_the_address() {
        let p = policy(&["http://*:18082"]);
        let e = p
            .check_resolved(Some(&url("http://localhost:18082/")), ip("127.0.0.1"))
            .unwrap_err();
        assert!(e.to_string().contains("loopback"), "{e}");
        assert!(e.remedy.contains("wildcard"), "{}", e.remedy);
        assert!(
            e.remedy.contains("--allow-egress http://localhost:18082"),
            "{}",
            e.remedy
        );
        let e = p
            .check_resolved(Some(&url("http://private.test:18082/")), ip("10.1.2.3"))
            .unwrap_err();
        assert!(
            e.remedy.contains(
                "--allow-egress http://private.test:18082 --allow-egress http://10.1.2.3:18082"
            ),
            "{}",
            e.remedy
        );
        let p = policy(&["https://cloudstack.corp"]);
        let e = p
            .check_resolved(Some(&url("https://cloudstack.corp/")), ip("fd00::5"))
            .unwrap_err();
        assert!(
            e.remedy.contains("--allow-egress https://[fd00::5]:443"),
            "{}",
            e.remedy
        );
    }

    #[test]
    fn metadata_endpoints_open_only_to_a_grant_naming_them() {
        for grants in [
            &["http://169.254.0.0/16"][..],
            &["http://0.0.0.0/0:*"],
            &["http://[::]/0:*"],
            &["http://*:*", "http://169.254.169.254/31"],
        ] {
            let p = policy(grants);
            for u in [
                "http://169.254.169.254/latest/meta-data/",
                "http://[::ffff:169.254.169.254]/",
                "http://[2002:a9fe:a9fe::1]/",
                "http://[64:ff9b::a9fe:a9fe]/",
            ] {
                if let Err(Denied(m)) = p.check_url(&url(u)) {
                    assert!(!m.contains("--allow-egress"), "{m}");
                }
                let target = url(u);
                let host = target.host_str().unwrap_or_default();
                let resolved = host.trim_matches(['[', ']']);
                assert!(!resolves(&p, u, resolved), "{grants:?} must not open {u}");
            }
            assert!(p.check_url(&url("http://169.254.169.254/")).is_err());
            assert!(!resolves(&p, "http://metadata.test/", "169.254.169.254"));
            assert!(!resolves(&p, "http://metadata.test/", "168.63.129.16"));
        }
        // The denial for an ungranted metadata address does not suggest granting it.
        let Denied(m) = policy(&[])
            .check_url(&url("http://169.254.169.254/latest/meta-data/"))
            .unwrap_err();
        assert!(!m.contains("--allow-egress"), "{m}");
        assert!(m.contains("metadata"), "{m}");
        let e = policy(&["https://*"])
            .check_resolved(Some(&url("https://wire.test/")), ip("168.63.129.16"))
            .unwrap_err();
        assert!(e.kind.contains("Azure"), "{e:?}");
        assert!(!e.remedy.contains("--allow-egress"), "{e:?}");
        // A grant naming the exact address opens it (the operator's explicit decision).
        let p = policy(&["http://169.254.169.254", "http://metadata.test"]);
        assert!(p.check_url(&url("http://169.254.169.254/")).is_ok());
        assert!(resolves(&p, "http://metadata.test/", "169.254.169.254"));
        assert!(!resolves(&p, "http://metadata.test:81/", "169.254.169.254"));
    }

    #[test]
    fn the_hosts_own_addresses_open_only_to_a_grant_naming_them() {
        let own = HostAddresses::fixed([ip("192.0.2.2"), ip("10.244.1.5"), ip("2a01:4f8::2")]);
        let p = policy(&["http://*:10250", "https://0.0.0.0/0:*", "https://[::]/0:*"])
            .with_host_addresses(own.clone());
        assert!(!resolves(&p, "http://selfip.test:10250/", "192.0.2.2"));
        assert!(p.check_url(&url("https://10.244.1.5:10250/")).is_err());
        assert!(p.check_url(&url("https://[2a01:4f8::2]:10250/")).is_err());
        assert!(p.check_url(&url("https://10.244.1.6:10250/")).is_ok());
        let Denied(m) = p.check_url(&url("https://10.244.1.5:10250/")).unwrap_err();
        assert!(m.contains("the host wasm-ccm runs on"), "{m}");
        let p = policy(&["https://10.244.1.5:10250"]).with_host_addresses(own);
        assert!(p.check_url(&url("https://10.244.1.5:10250/")).is_ok());
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
            "https://x.org:443/path",
            "https://x.org:http",
            "https://a..b",
            "https://",
        ] {
            let e = EgressPolicy::parse(&[bad]).unwrap_err();
            assert!(e.contains("scheme://host[:port]"), "{bad}: {e}");
        }
    }

    #[test]
    fn driver_defaults_name_dns_hosts_below_one_domain() {
        for good in [
            "https://api.cloudscale.ch",
            "https://api.phoenixnap.com",
            "https://auth.phoenixnap.com",
            "https://*.example.com",
            "https://*.amazonaws.com",
            "https://*.example.co.uk",
            "https://api.example.com:8443",
            "http://api.example.com",
        ] {
            assert_eq!(validate_default_egress(&[good]), Ok(()), "{good}");
        }
        for (bad, says) in [
            ("http://0.0.0.0/0:*", "not IP addresses or CIDRs"),
            ("http://10.0.0.0/8", "not IP addresses or CIDRs"),
            ("http://[fd00::]/8", "not IP addresses or CIDRs"),
            ("https://203.0.113.10", "not IP addresses or CIDRs"),
            ("http://*", "bare `*`"),
            ("http://*:*", "bare `*`"),
            ("http://localhost:8080", "local to this machine"),
            ("http://api.localhost", "local to this machine"),
            ("http://metadata.google.internal", "local to this machine"),
            ("https://printer.local", "local to this machine"),
            ("https://*.com", "top-level domain"),
            ("https://*.co.uk", "public suffix"),
            ("https://*.com.au", "public suffix"),
            ("https://api.example.com:*", "every port"),
            ("https://*.example.com:*", "every port"),
            ("api.example.com", "no scheme"),
        ] {
            let e = validate_default_egress(&[bad]).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(e.contains(bad), "{bad}: the error names the pattern: {e}");
        }
        let both =
            validate_default_egress(&["http://10.0.0.0/8", "https://ok.example.com", "http://*"])
                .unwrap_err();
        assert!(
            both.contains("10.0.0.0/8") && both.contains("http://*"),
            "{both}"
        );
        assert!(EgressPolicy::parse_driver_defaults(&["http://0.0.0.0/0:*"]).is_err());
        assert_eq!(
            EgressPolicy::parse_driver_defaults(&["https://api.example.com"])
                .expect("valid")
                .patterns(),
            ["https://api.example.com"]
        );
    }

    #[test]
    fn broad_grants_are_pointed_out() {
        let w = broad_grant_warnings(&[
            "http://0.0.0.0/0:*",
            "https://10.0.0.0/16",
            "https://10.0.0.0/24",
            "https://[fd00::]/8",
            "https://[2001:db8::]/48",
            "https://*",
            "https://*.example.com",
            "https://api.example.com",
            "https://api.example.com:*",
            "nonsense",
        ]);
        let has = |needle: &str| w.iter().any(|m| m.contains(needle));
        assert!(
            has("`http://0.0.0.0/0:*` grants a /0: 2^32 addresses"),
            "{w:?}"
        );
        assert!(has("`http://0.0.0.0/0:*` grants every port"), "{w:?}");
        assert!(has("`https://10.0.0.0/16` grants a /16"), "{w:?}");
        assert!(!has("10.0.0.0/24"), "{w:?}");
        assert!(has("`https://[fd00::]/8` grants a /8: 2^120"), "{w:?}");
        assert!(!has("2001:db8::"), "{w:?}");
        assert!(has("`https://*` grants every DNS name"), "{w:?}");
        assert!(has("every name below example.com"), "{w:?}");
        assert!(
            has("`https://api.example.com:*` grants every port"),
            "{w:?}"
        );
        assert!(
            !w.iter().any(|m| m.starts_with("`https://api.example.com`")),
            "{w:?}"
        );
        assert!(has("invalid egress pattern `nonsense`"), "{w:?}");
        assert_eq!(w.len(), 8, "{w:?}");
        assert_eq!(
            policy(&["https://*", "https://a.example"]).warnings().len(),
            1
        );
    }
}
