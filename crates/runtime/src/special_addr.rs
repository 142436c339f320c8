//! Which addresses a driver may reach without naming them: the IANA special-purpose address
//! registries, addresses that embed an IPv4 address, cloud metadata endpoints and the host's own
//! interface addresses.
//!
//! Every address falls in one of three classes ([`Reach`]):
//! - **global**: globally reachable unicast. Any grant that matches the URL reaches it.
//! - **special**: in a range of the IANA IPv4 or IPv6 special-purpose address registry (loopback,
//!   private-use, link-local, documentation, multicast, …), or outside the IPv6 global unicast
//!   space. Only a grant whose address range contains it reaches it.
//! - **pinned**: a well-known cloud metadata endpoint, or an address of the host wasm-ccm runs on.
//!   Only a grant naming that exact address reaches it: a CIDR or a wildcard never does, so
//!   `http://0.0.0.0/0:*` does not hand a driver the node's credentials or its kubelet.
//!
//! IPv6 addresses that carry an IPv4 address (IPv4-mapped, IPv4-compatible, NAT64, 6to4, Teredo)
//! are judged by the IPv4 address too: the packet ends up there, so a special or pinned IPv4
//! address stays special or pinned inside any of them.
//!
//! Ranges the registry marks globally reachable but where no cloud API lives (the AS112 and AMT
//! blocks, the anycast and ORCHID blocks inside 2001::/23, the IETF protocol assignments in
//! 192.0.0.0/24) are treated as special: refusing them costs nothing and keeps the rule simple.

use std::io::BufRead;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What an address is, for the egress checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Globally reachable unicast: any grant that matches the URL reaches it.
    Global,
    /// In a special-purpose range: only a grant whose address range contains it reaches it.
    Special {
        /// What the range is, with its prefix and RFC, e.g. `loopback (127.0.0.0/8, RFC 1122)`.
        kind: String,
        /// Whether it is a loopback address (127.0.0.0/8 or ::1), which a `localhost` grant
        /// reaches by itself.
        loopback: bool,
    },
    /// A cloud metadata endpoint or an address of this host: only a grant naming this exact
    /// address reaches it.
    Pinned {
        /// What it is, e.g. `the instance metadata endpoint of AWS, …`.
        kind: String,
        /// Whether it is a cloud metadata endpoint (else an address of this host): denials never
        /// suggest granting one.
        metadata: bool,
    },
}

impl Reach {
    /// The description of a special or pinned address; empty for a global one.
    pub(crate) fn kind(&self) -> &str {
        match self {
            Reach::Global => "",
            Reach::Special { kind, .. } | Reach::Pinned { kind, .. } => kind,
        }
    }
}

/// Classifies `ip`; `own` are the host's interface addresses.
pub(crate) fn classify(ip: IpAddr, own: &HostAddresses) -> Reach {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4, own),
        IpAddr::V6(v6) => classify_v6(v6, own),
    }
}

fn classify_v4(ip: Ipv4Addr, own: &HostAddresses) -> Reach {
    if let Some(what) = metadata_endpoint(IpAddr::V4(ip)) {
        return Reach::Pinned {
            kind: what.to_string(),
            metadata: true,
        };
    }
    let loopback = ip.octets()[0] == 127;
    // Loopback addresses are the host's own too, but a grant of 127.0.0.0/8 says plainly what it
    // opens; a grant of 10.0.0.0/8 does not say that it opens this pod or node.
    if !loopback && own.contains(IpAddr::V4(ip)) {
        return Reach::Pinned {
            kind: OWN_ADDRESS.to_string(),
            metadata: false,
        };
    }
    match v4_range(ip) {
        Some(kind) => Reach::Special {
            kind: kind.to_string(),
            loopback,
        },
        None => Reach::Global,
    }
}

const OWN_ADDRESS: &str = "an address of the host wasm-ccm runs on";

fn classify_v6(ip: Ipv6Addr, own: &HostAddresses) -> Reach {
    if let Some(what) = metadata_endpoint(IpAddr::V6(ip)) {
        return Reach::Pinned {
            kind: what.to_string(),
            metadata: true,
        };
    }
    let loopback = ip == Ipv6Addr::LOCALHOST;
    if !loopback && own.contains(IpAddr::V6(ip)) {
        return Reach::Pinned {
            kind: OWN_ADDRESS.to_string(),
            metadata: false,
        };
    }
    let range = v6_range(ip);
    // The IPv4 address inside decides as well: a pinned one pins the IPv6 form, a special one
    // makes it special even in a range that is otherwise global (NAT64).
    let mut embedded_special = None;
    for (v4, how) in embedded_ipv4(ip) {
        match classify_v4(v4, own) {
            Reach::Pinned { kind, metadata } => {
                return Reach::Pinned {
                    kind: format!("{how} address embedding {v4}, {kind}"),
                    metadata,
                };
            }
            Reach::Special { kind, .. } => {
                embedded_special.get_or_insert(format!("{how} address embedding {v4}, {kind}"));
            }
            Reach::Global => {}
        }
    }
    match (range, embedded_special) {
        (Some(V6Class::Special(kind)), Some(inner)) => Reach::Special {
            kind: format!("{kind}: {inner}"),
            loopback,
        },
        (Some(V6Class::Special(kind)), None) => Reach::Special {
            kind: kind.to_string(),
            loopback,
        },
        (_, Some(inner)) => Reach::Special {
            kind: inner,
            loopback,
        },
        (Some(V6Class::ByEmbedded), None) | (None, None) => Reach::Global,
    }
}

/// One row of a special-purpose registry: a prefix and what it is.
struct Range<T> {
    net: T,
    len: u32,
    kind: &'static str,
}

impl Range<u32> {
    fn contains(&self, ip: Ipv4Addr) -> bool {
        let mask = u32::MAX.checked_shl(32 - self.len).unwrap_or(0);
        u32::from(ip) & mask == self.net
    }
}

impl Range<u128> {
    fn contains(&self, ip: Ipv6Addr) -> bool {
        let mask = u128::MAX.checked_shl(128 - self.len).unwrap_or(0);
        u128::from(ip) & mask == self.net
    }
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u32, kind: &'static str) -> Range<u32> {
    Range {
        net: u32::from_be_bytes([a, b, c, d]),
        len,
        kind,
    }
}

/// The IANA IPv4 Special-Purpose Address Registry (RFC 6890), plus multicast and the limited
/// broadcast address. More specific rows come first so the message names the narrowest range.
const V4_RANGES: &[Range<u32>] = &[
    // RFC 1122 §3.2.1.3: "this host on this network".
    v4(
        0,
        0,
        0,
        0,
        32,
        "the unspecified address (0.0.0.0/32, RFC 1122)",
    ),
    // RFC 791 §3.2, RFC 1122 §3.2.1.3: "this network".
    v4(0, 0, 0, 0, 8, "this network (0.0.0.0/8, RFC 791)"),
    // RFC 1918.
    v4(10, 0, 0, 0, 8, "private-use (10.0.0.0/8, RFC 1918)"),
    // RFC 6598: carrier-grade NAT between a provider and its customers.
    v4(
        100,
        64,
        0,
        0,
        10,
        "shared address space (100.64.0.0/10, RFC 6598)",
    ),
    // RFC 1122 §3.2.1.3.
    v4(127, 0, 0, 0, 8, "loopback (127.0.0.0/8, RFC 1122)"),
    // RFC 3927.
    v4(169, 254, 0, 0, 16, "link-local (169.254.0.0/16, RFC 3927)"),
    // RFC 1918.
    v4(172, 16, 0, 0, 12, "private-use (172.16.0.0/12, RFC 1918)"),
    // RFC 6890 §2.1: IETF protocol assignments, among them the DS-Lite service continuity
    // prefix 192.0.0.0/29 (RFC 7335), the dummy address 192.0.0.8 (RFC 7600), PCP and TURN
    // anycast 192.0.0.9 and .10 (RFC 7723, RFC 8155) and NAT64 discovery 192.0.0.170/.171
    // (RFC 8880).
    v4(
        192,
        0,
        0,
        0,
        24,
        "IETF protocol assignments (192.0.0.0/24, RFC 6890)",
    ),
    // RFC 5737.
    v4(
        192,
        0,
        2,
        0,
        24,
        "documentation TEST-NET-1 (192.0.2.0/24, RFC 5737)",
    ),
    // RFC 7535: AS112 DNS sinks.
    v4(192, 31, 196, 0, 24, "AS112-v4 (192.31.196.0/24, RFC 7535)"),
    // RFC 7450: automatic multicast tunnelling relays.
    v4(192, 52, 193, 0, 24, "AMT (192.52.193.0/24, RFC 7450)"),
    // RFC 7526 (deprecated 6to4 relay anycast), including 192.88.99.2 for 6a44 (RFC 6751).
    v4(
        192,
        88,
        99,
        0,
        24,
        "deprecated 6to4 relay anycast (192.88.99.0/24, RFC 7526)",
    ),
    // RFC 1918.
    v4(192, 168, 0, 0, 16, "private-use (192.168.0.0/16, RFC 1918)"),
    // RFC 7534: AS112 direct delegation.
    v4(
        192,
        175,
        48,
        0,
        24,
        "AS112 direct delegation (192.175.48.0/24, RFC 7534)",
    ),
    // RFC 2544.
    v4(198, 18, 0, 0, 15, "benchmarking (198.18.0.0/15, RFC 2544)"),
    // RFC 5737.
    v4(
        198,
        51,
        100,
        0,
        24,
        "documentation TEST-NET-2 (198.51.100.0/24, RFC 5737)",
    ),
    // RFC 5737.
    v4(
        203,
        0,
        113,
        0,
        24,
        "documentation TEST-NET-3 (203.0.113.0/24, RFC 5737)",
    ),
    // RFC 5771 (the multicast registry, not the special-purpose one: multicast is not unicast).
    v4(224, 0, 0, 0, 4, "multicast (224.0.0.0/4, RFC 5771)"),
    // RFC 919 §7, RFC 8190: before 240/4, which contains it.
    v4(
        255,
        255,
        255,
        255,
        32,
        "limited broadcast (255.255.255.255/32, RFC 919)",
    ),
    // RFC 1112 §4.
    v4(240, 0, 0, 0, 4, "reserved (240.0.0.0/4, RFC 1112)"),
];

fn v4_range(ip: Ipv4Addr) -> Option<&'static str> {
    V4_RANGES.iter().find(|r| r.contains(ip)).map(|r| r.kind)
}

/// How a row of the IPv6 table is judged.
enum V6Class {
    /// Special whatever it carries.
    Special(&'static str),
    /// Globally reachable when the IPv4 address inside is (the NAT64 well-known prefix: on an
    /// IPv6-only cluster with DNS64 every public API resolves into it).
    ByEmbedded,
}

const fn v6(segments: [u16; 8], len: u32, kind: &'static str) -> Range<u128> {
    let mut net: u128 = 0;
    let mut i = 0;
    while i < 8 {
        net = (net << 16) | segments[i] as u128;
        i += 1;
    }
    Range { net, len, kind }
}

/// The IANA IPv6 Special-Purpose Address Registry (RFC 6890), plus site-local, multicast and the
/// IETF reserved space outside 2000::/3. More specific rows come first. The NAT64 well-known
/// prefix is in [`NAT64_WELL_KNOWN`], judged by the address it carries.
const V6_RANGES: &[Range<u128>] = &[
    // RFC 4291 §2.5.2.
    v6([0; 8], 128, "the unspecified address (::/128, RFC 4291)"),
    // RFC 4291 §2.5.3.
    v6(
        [0, 0, 0, 0, 0, 0, 0, 1],
        128,
        "loopback (::1/128, RFC 4291)",
    ),
    // RFC 4291 §2.5.5.2.
    v6(
        [0, 0, 0, 0, 0, 0xffff, 0, 0],
        96,
        "IPv4-mapped (::ffff:0:0/96, RFC 4291)",
    ),
    // RFC 4291 §2.5.5.1 (deprecated): after ::/128 and ::1/128, which it contains.
    v6([0; 8], 96, "IPv4-compatible, deprecated (::/96, RFC 4291)"),
    // RFC 8215: local-use IPv4/IPv6 translation.
    v6(
        [0x64, 0xff9b, 1, 0, 0, 0, 0, 0],
        48,
        "local-use IPv4/IPv6 translation (64:ff9b:1::/48, RFC 8215)",
    ),
    // RFC 6666.
    v6(
        [0x100, 0, 0, 0, 0, 0, 0, 0],
        64,
        "discard-only (100::/64, RFC 6666)",
    ),
    // RFC 9780.
    v6(
        [0x100, 0, 0, 1, 0, 0, 0, 0],
        64,
        "dummy IPv6 prefix (100:0:0:1::/64, RFC 9780)",
    ),
    // RFC 4380: Teredo, before 2001::/23, which contains it.
    v6(
        [0x2001, 0, 0, 0, 0, 0, 0, 0],
        32,
        "Teredo (2001::/32, RFC 4380)",
    ),
    // RFC 5180.
    v6(
        [0x2001, 2, 0, 0, 0, 0, 0, 0],
        48,
        "benchmarking (2001:2::/48, RFC 5180)",
    ),
    // RFC 2928, RFC 6890: IETF protocol assignments, among them PCP, TURN and DNS-SD anycast
    // (2001:1::1-3, RFC 7723, RFC 8155, RFC 9665), AMT (2001:3::/32, RFC 7450), AS112-v6
    // (2001:4:112::/48, RFC 7535), ORCHIDv2 (2001:20::/28, RFC 7343) and DRIP (2001:30::/28,
    // RFC 9374).
    v6(
        [0x2001, 0, 0, 0, 0, 0, 0, 0],
        23,
        "IETF protocol assignments (2001::/23, RFC 2928)",
    ),
    // RFC 3849.
    v6(
        [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0],
        32,
        "documentation (2001:db8::/32, RFC 3849)",
    ),
    // RFC 3056 (deprecated for anycast relays by RFC 7526).
    v6(
        [0x2002, 0, 0, 0, 0, 0, 0, 0],
        16,
        "6to4 (2002::/16, RFC 3056)",
    ),
    // RFC 7534.
    v6(
        [0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0],
        48,
        "AS112 direct delegation (2620:4f:8000::/48, RFC 7534)",
    ),
    // RFC 9637.
    v6(
        [0x3fff, 0, 0, 0, 0, 0, 0, 0],
        20,
        "documentation (3fff::/20, RFC 9637)",
    ),
    // RFC 9602.
    v6(
        [0x5f00, 0, 0, 0, 0, 0, 0, 0],
        16,
        "segment routing SIDs (5f00::/16, RFC 9602)",
    ),
    // RFC 4193 (AWS, GCP and Oracle place metadata endpoints here; those are pinned).
    v6(
        [0xfc00, 0, 0, 0, 0, 0, 0, 0],
        7,
        "unique-local (fc00::/7, RFC 4193)",
    ),
    // RFC 4291 §2.5.6.
    v6(
        [0xfe80, 0, 0, 0, 0, 0, 0, 0],
        10,
        "link-local (fe80::/10, RFC 4291)",
    ),
    // RFC 3879 (deprecated site-local).
    v6(
        [0xfec0, 0, 0, 0, 0, 0, 0, 0],
        10,
        "site-local, deprecated (fec0::/10, RFC 3879)",
    ),
    // RFC 4291 §2.7.
    v6(
        [0xff00, 0, 0, 0, 0, 0, 0, 0],
        8,
        "multicast (ff00::/8, RFC 4291)",
    ),
];

/// RFC 6052: the NAT64 well-known prefix 64:ff9b::/96. The registry marks it globally reachable;
/// what it reaches is the IPv4 address in its last 32 bits.
const NAT64_WELL_KNOWN: Range<u128> = v6(
    [0x64, 0xff9b, 0, 0, 0, 0, 0, 0],
    96,
    "NAT64 (64:ff9b::/96, RFC 6052)",
);

/// RFC 4291 §2.4 and the IANA IPv6 address space registry: only 2000::/3 is allocated as global
/// unicast; everything else not listed above is reserved by the IETF.
const GLOBAL_UNICAST: Range<u128> = v6([0x2000, 0, 0, 0, 0, 0, 0, 0], 3, "");

fn v6_range(ip: Ipv6Addr) -> Option<V6Class> {
    if NAT64_WELL_KNOWN.contains(ip) {
        return Some(V6Class::ByEmbedded);
    }
    if let Some(r) = V6_RANGES.iter().find(|r| r.contains(ip)) {
        return Some(V6Class::Special(r.kind));
    }
    if !GLOBAL_UNICAST.contains(ip) {
        return Some(V6Class::Special(
            "reserved, outside the global unicast space 2000::/3 (RFC 4291)",
        ));
    }
    None
}

/// The IPv4 addresses an IPv6 address carries, each with the mechanism that carries it.
pub(crate) fn embedded_ipv4(ip: Ipv6Addr) -> Vec<(Ipv4Addr, &'static str)> {
    let bits = u128::from(ip);
    let low32 = Ipv4Addr::from(bits as u32);
    let s = ip.segments();
    let mut found = Vec::new();
    // RFC 4291 §2.5.5.2: ::ffff:a.b.c.d.
    if bits >> 32 == 0xffff {
        found.push((low32, "IPv4-mapped"));
    }
    // RFC 4291 §2.5.5.1: ::a.b.c.d (:: and ::1 are the unspecified and loopback addresses).
    if bits >> 32 == 0 && bits > 1 {
        found.push((low32, "IPv4-compatible"));
    }
    // RFC 6052 §2.2: the well-known prefix is a /96, the address in the last 32 bits.
    if NAT64_WELL_KNOWN.contains(ip) {
        found.push((low32, "NAT64"));
    }
    // RFC 8215: the local-use prefix 64:ff9b:1::/48 is subnetted by the operator, so the address
    // may sit where RFC 6052 puts it for a /48 (bits 48..64 and 72..88, skipping the u-octet) or,
    // for a /96 inside it, in the last 32 bits; both are judged.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1 {
        let b = ip.octets();
        found.push((Ipv4Addr::new(b[6], b[7], b[9], b[10]), "local-use NAT64"));
        found.push((low32, "local-use NAT64"));
    }
    // RFC 3056: 2002:AABB:CCDD::/48 carries AA.BB.CC.DD.
    if s[0] == 0x2002 {
        let b = ip.octets();
        found.push((Ipv4Addr::new(b[2], b[3], b[4], b[5]), "6to4"));
    }
    // RFC 4380 §4: 2001:0:SSSS:SSSS:flags:port:CCCC:CCCC, the client's address obscured by
    // inverting every bit.
    if s[0] == 0x2001 && s[1] == 0 {
        found.push((Ipv4Addr::from(!(bits as u32)), "Teredo"));
    }
    found
}

/// The well-known cloud metadata and host-agent endpoints, and whose they are. They hand out
/// credentials and instance identity, so only a grant naming one exactly opens it.
const METADATA_ENDPOINTS: &[(IpAddr, &str)] = &[
    // AWS EC2 IMDS, GCP, Azure IMDS, OpenStack (and clouds built on it, e.g. cloudscale),
    // Oracle Cloud, DigitalOcean, Hetzner, Linode/Akamai, Vultr, Exoscale, Huawei, IBM Cloud.
    (
        IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)),
        "the instance metadata endpoint of AWS, GCP, Azure, OpenStack, Oracle Cloud, DigitalOcean, Hetzner and others",
    ),
    // AWS Amazon Time Sync Service.
    (
        IpAddr::V4(Ipv4Addr::new(169, 254, 169, 123)),
        "the AWS time sync endpoint",
    ),
    // AWS Route 53 Resolver (the VPC's DNS server).
    (
        IpAddr::V4(Ipv4Addr::new(169, 254, 169, 253)),
        "the AWS VPC DNS resolver",
    ),
    // AWS ECS task metadata and credentials endpoint.
    (
        IpAddr::V4(Ipv4Addr::new(169, 254, 170, 2)),
        "the AWS ECS task metadata and credentials endpoint",
    ),
    // AWS EKS Pod Identity Agent.
    (
        IpAddr::V4(Ipv4Addr::new(169, 254, 170, 23)),
        "the AWS EKS Pod Identity credentials endpoint",
    ),
    // Scaleway instance metadata.
    (
        IpAddr::V4(Ipv4Addr::new(169, 254, 42, 42)),
        "the Scaleway instance metadata endpoint",
    ),
    // Tencent Cloud (metadata.tencentyun.com).
    (
        IpAddr::V4(Ipv4Addr::new(169, 254, 0, 23)),
        "the Tencent Cloud instance metadata endpoint",
    ),
    // Azure WireServer: the host agent, DNS and health probes; a globally routed address.
    (
        IpAddr::V4(Ipv4Addr::new(168, 63, 129, 16)),
        "the Azure WireServer (host agent) endpoint",
    ),
    // Alibaba Cloud ECS metadata.
    (
        IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
        "the Alibaba Cloud instance metadata endpoint",
    ),
    // Oracle Cloud at Customer / Oracle Cloud Infrastructure Classic metadata.
    (
        IpAddr::V4(Ipv4Addr::new(192, 0, 0, 192)),
        "the Oracle Cloud (Classic, Cloud at Customer) instance metadata endpoint",
    ),
    // AWS IMDS over IPv6.
    (
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
        "the AWS instance metadata endpoint (IPv6)",
    ),
    // AWS Time Sync over IPv6.
    (
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x123)),
        "the AWS time sync endpoint (IPv6)",
    ),
    // AWS Route 53 Resolver over IPv6.
    (
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x253)),
        "the AWS VPC DNS resolver (IPv6)",
    ),
    // AWS EKS Pod Identity Agent over IPv6.
    (
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23)),
        "the AWS EKS Pod Identity credentials endpoint (IPv6)",
    ),
    // GCP metadata server over IPv6.
    (
        IpAddr::V6(Ipv6Addr::new(0xfd20, 0xce, 0, 0, 0, 0, 0, 0x254)),
        "the GCP metadata endpoint (IPv6)",
    ),
    // Oracle Cloud Infrastructure IMDS over IPv6.
    (
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0xc1, 0, 0, 0, 0, 0xa9fe, 0xa9fe)),
        "the Oracle Cloud instance metadata endpoint (IPv6)",
    ),
    // OpenStack Neutron metadata over IPv6 (link-local anycast).
    (
        IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0xa9fe, 0xa9fe)),
        "the OpenStack metadata endpoint (IPv6)",
    ),
];

/// Whose metadata endpoint `ip` is, if it is one.
pub(crate) fn metadata_endpoint(ip: IpAddr) -> Option<&'static str> {
    METADATA_ENDPOINTS
        .iter()
        .find(|(a, _)| *a == ip)
        .map(|(_, what)| *what)
}

/// The host's own interface addresses: read from the system (and re-read every few seconds, as
/// addresses come and go), or a fixed list for tests.
#[derive(Debug, Clone, Default)]
pub struct HostAddresses(Source);

#[derive(Debug, Clone, Default)]
enum Source {
    #[default]
    System,
    Fixed(Arc<[IpAddr]>),
}

/// How long one reading of the system's addresses is trusted.
const REFRESH: Duration = Duration::from_secs(5);

struct Snapshot {
    read_at: Instant,
    addrs: Arc<[IpAddr]>,
}

static SYSTEM: Mutex<Option<Snapshot>> = Mutex::new(None);

impl HostAddresses {
    /// The addresses of this host's interfaces, as the kernel lists them.
    pub fn system() -> Self {
        HostAddresses(Source::System)
    }

    /// A fixed list (for tests, or a host that knows its addresses better).
    pub fn fixed(addrs: impl IntoIterator<Item = IpAddr>) -> Self {
        HostAddresses(Source::Fixed(addrs.into_iter().collect()))
    }

    /// The current addresses.
    pub fn list(&self) -> Arc<[IpAddr]> {
        match &self.0 {
            Source::Fixed(addrs) => addrs.clone(),
            Source::System => system_addresses(),
        }
    }

    /// Whether `ip` is one of them.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.list().contains(&ip)
    }
}

fn system_addresses() -> Arc<[IpAddr]> {
    let mut cached = SYSTEM
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(s) = cached.as_ref()
        && s.read_at.elapsed() < REFRESH
    {
        return s.addrs.clone();
    }
    let addrs: Arc<[IpAddr]> = match read_system_addresses() {
        Ok(addrs) => addrs.into(),
        Err(e) => {
            // Keep the last good reading: losing the list would open the host's addresses.
            if let Some(s) = cached.as_ref() {
                tracing::warn!(
                    "could not re-read this host's addresses ({e}); keeping the last list"
                );
                return s.addrs.clone();
            }
            tracing::warn!(
                "could not read this host's interface addresses ({e}); they are protected only by the special-purpose ranges"
            );
            Arc::from(Vec::new())
        }
    };
    *cached = Some(Snapshot {
        read_at: Instant::now(),
        addrs: addrs.clone(),
    });
    addrs
}

/// Reads the kernel's list of local addresses from procfs: no socket is opened and nothing is
/// sent. IPv4 comes from the local routing table (`/proc/net/fib_trie`), IPv6 from
/// `/proc/net/if_inet6` (absent when IPv6 is disabled, which is not an error).
#[cfg(target_os = "linux")]
fn read_system_addresses() -> Result<Vec<IpAddr>, String> {
    let open = |path: &str| {
        std::fs::File::open(path)
            .map(std::io::BufReader::new)
            .map_err(|e| format!("{path}: {e}"))
    };
    let mut addrs: Vec<IpAddr> = parse_fib_trie(open("/proc/net/fib_trie")?)
        .into_iter()
        .map(IpAddr::V4)
        .collect();
    if let Ok(v6) = open("/proc/net/if_inet6") {
        addrs.extend(parse_if_inet6(v6).into_iter().map(IpAddr::V6));
    }
    addrs.sort();
    addrs.dedup();
    Ok(addrs)
}

#[cfg(not(target_os = "linux"))]
fn read_system_addresses() -> Result<Vec<IpAddr>, String> {
    Err("listing interface addresses is implemented for Linux only".into())
}

/// The addresses the kernel marks `/32 host LOCAL` in `/proc/net/fib_trie`: each follows the
/// `|-- a.b.c.d` line that names it. Read line by line: on a router the file can be large.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_fib_trie(text: impl BufRead) -> Vec<Ipv4Addr> {
    let mut found = Vec::new();
    let mut last = None;
    for line in text.lines().map_while(Result::ok) {
        let line = line.trim_start();
        if let Some(addr) = line.strip_prefix("|-- ") {
            last = addr.trim().parse::<Ipv4Addr>().ok();
        } else if line.starts_with("/32 host LOCAL")
            && let Some(addr) = last
            && !found.contains(&addr)
        {
            found.push(addr);
        }
    }
    found
}

/// The addresses in `/proc/net/if_inet6`: one per line, 32 hex digits first.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_if_inet6(text: impl BufRead) -> Vec<Ipv6Addr> {
    text.lines()
        .map_while(Result::ok)
        .filter_map(|line| {
            let hex = line.split_whitespace().next()?;
            (hex.len() == 32)
                .then(|| u128::from_str_radix(hex, 16).ok())
                .flatten()
                .map(Ipv6Addr::from)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none() -> HostAddresses {
        HostAddresses::fixed([])
    }

    fn reach(ip: &str) -> Reach {
        classify(ip.parse().expect("an address"), &none())
    }

    fn is_special(ip: &str) -> bool {
        matches!(reach(ip), Reach::Special { .. })
    }

    fn is_pinned(ip: &str) -> bool {
        matches!(reach(ip), Reach::Pinned { .. })
    }

    #[test]
    fn every_ipv4_registry_range_is_special_at_both_ends() {
        let ranges = [
            ("0.0.0.0", "0.255.255.255"),
            ("10.0.0.0", "10.255.255.255"),
            ("100.64.0.0", "100.127.255.255"),
            ("127.0.0.0", "127.255.255.255"),
            ("169.254.0.0", "169.254.255.255"),
            ("172.16.0.0", "172.31.255.255"),
            ("192.0.0.0", "192.0.0.255"),
            ("192.0.2.0", "192.0.2.255"),
            ("192.31.196.0", "192.31.196.255"),
            ("192.52.193.0", "192.52.193.255"),
            ("192.88.99.0", "192.88.99.255"),
            ("192.168.0.0", "192.168.255.255"),
            ("192.175.48.0", "192.175.48.255"),
            ("198.18.0.0", "198.19.255.255"),
            ("198.51.100.0", "198.51.100.255"),
            ("203.0.113.0", "203.0.113.255"),
            ("224.0.0.0", "239.255.255.255"),
            ("240.0.0.0", "255.255.255.254"),
            ("255.255.255.255", "255.255.255.255"),
        ];
        for (first, last) in ranges {
            assert!(is_special(first), "{first}: {:?}", reach(first));
            assert!(is_special(last), "{last}: {:?}", reach(last));
        }
    }

    #[test]
    fn ipv4_neighbours_of_special_ranges_are_global() {
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.255.255",
            "169.255.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.1.0",
            "192.0.3.0",
            "192.88.98.255",
            "192.167.255.255",
            "192.169.0.0",
            "198.17.255.255",
            "198.20.0.0",
            "203.0.112.255",
            "223.255.255.255",
        ] {
            assert_eq!(reach(ip), Reach::Global, "{ip}");
        }
    }

    #[test]
    fn ranges_are_named_with_their_rfc() {
        assert!(reach("127.0.0.1").kind().contains("loopback"));
        assert!(reach("192.0.2.2").kind().contains("RFC 5737"));
        assert!(
            reach("255.255.255.255")
                .kind()
                .contains("limited broadcast")
        );
        assert!(reach("0.0.0.0").kind().contains("unspecified"));
        assert!(reach("fec0::1").kind().contains("RFC 3879"));
        assert!(matches!(
            reach("127.0.0.1"),
            Reach::Special { loopback: true, .. }
        ));
        assert!(matches!(
            reach("::1"),
            Reach::Special { loopback: true, .. }
        ));
        assert!(matches!(
            reach("10.0.0.1"),
            Reach::Special {
                loopback: false,
                ..
            }
        ));
    }

    #[test]
    fn every_ipv6_registry_range_is_special() {
        for ip in [
            "::",
            "::1",
            "::ffff:8.8.8.8",
            "::8.8.8.8",
            "64:ff9b:1::808:808",
            "100::1",
            "100:0:0:1::1",
            "2001::1",
            "2001:1::1",
            "2001:2::1",
            "2001:3::1",
            "2001:4:112::1",
            "2001:20::1",
            "2001:1ff:ffff::1",
            "2001:db8::1",
            "2002:808:808::1",
            "2620:4f:8000::1",
            "3fff::1",
            "3fff:fff:ffff::1",
            "5f00::1",
            "fc00::1",
            "fdff:ffff::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "feff::1",
            "ff02::1",
            // Outside 2000::/3: reserved by the IETF.
            "4000::1",
            "1::1",
            "e000::1",
        ] {
            assert!(is_special(ip), "{ip}: {:?}", reach(ip));
        }
    }

    #[test]
    fn global_ipv6_unicast_passes() {
        for ip in [
            "2001:200::1",
            "2001:4860:4860::8888",
            "2606:4700::1111",
            "2a00:1450::1",
            "3ffe::1",
            "3fff:1000::1",
            "2620:4f:8001::1",
            // NAT64 well-known prefix with a public IPv4 inside: a DNS64 answer for a public API.
            "64:ff9b::808:808",
        ] {
            assert_eq!(reach(ip), Reach::Global, "{ip}");
        }
    }

    #[test]
    fn embedded_ipv4_is_decoded_for_every_mechanism() {
        let one = |ip: &str| {
            embedded_ipv4(ip.parse().expect("v6"))
                .into_iter()
                .map(|(a, how)| format!("{how} {a}"))
                .collect::<Vec<_>>()
        };
        assert_eq!(one("::ffff:10.1.2.3"), ["IPv4-mapped 10.1.2.3"]);
        assert_eq!(one("::10.1.2.3"), ["IPv4-compatible 10.1.2.3"]);
        assert_eq!(one("64:ff9b::a01:203"), ["NAT64 10.1.2.3"]);
        assert_eq!(
            one("64:ff9b:1:a01:2:300::"),
            ["local-use NAT64 10.1.2.3", "local-use NAT64 0.0.0.0"]
        );
        assert_eq!(
            one("64:ff9b:1::a01:203"),
            ["local-use NAT64 0.0.0.0", "local-use NAT64 10.1.2.3"]
        );
        assert_eq!(one("2002:a01:203::1"), ["6to4 10.1.2.3"]);
        // Teredo: server 65.54.227.120, client 10.1.2.3 stored inverted (f5fe:fdfc).
        assert_eq!(
            one("2001:0:4136:e378:8000:63bf:f5fe:fdfc"),
            ["Teredo 10.1.2.3"]
        );
        assert!(one("2001:db8::1").is_empty());
        assert!(one("::1").is_empty());
        assert!(one("::").is_empty());
    }

    #[test]
    fn a_special_embedded_address_makes_the_ipv6_form_special() {
        // NAT64 is otherwise global: the embedded address decides.
        let r = reach("64:ff9b::a01:203");
        assert!(
            matches!(&r, Reach::Special { kind, .. } if kind.contains("NAT64") && kind.contains("private-use")),
            "{r:?}"
        );
        for ip in [
            "::ffff:127.0.0.1",
            "::127.0.0.1",
            "2002:c000:202::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdfd", // Teredo client 192.0.2.2
        ] {
            assert!(is_special(ip), "{ip}: {:?}", reach(ip));
        }
        assert!(reach("2002:a9fe:a9fe::1").kind().contains("6to4"));
    }

    #[test]
    fn metadata_endpoints_are_pinned_in_every_encoding() {
        for ip in [
            "169.254.169.254",
            "169.254.170.2",
            "169.254.169.123",
            "168.63.129.16",
            "100.100.100.200",
            "192.0.0.192",
            "fd00:ec2::254",
            "fd00:ec2::23",
            "fd20:ce::254",
            "::ffff:169.254.169.254",
            "::169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::a9fe:a9fe",
            "2002:a9fe:a9fe::1",
            "2002:a83f:8110::1",                    // 168.63.129.16 through 6to4
            "2001:0:4136:e378:8000:63bf:5601:5601", // Teredo client 169.254.169.254
        ] {
            assert!(is_pinned(ip), "{ip}: {:?}", reach(ip));
        }
        assert!(reach("168.63.129.16").kind().contains("Azure"));
        assert!(reach("100.100.100.200").kind().contains("Alibaba"));
        assert!(reach("2002:a9fe:a9fe::1").kind().contains("AWS"));
        // A neighbour of a metadata endpoint is only as special as its range.
        assert!(is_special("169.254.169.250"));
        assert_eq!(reach("168.63.129.17"), Reach::Global);
    }

    #[test]
    fn the_hosts_own_addresses_are_pinned_except_loopback() {
        let own = HostAddresses::fixed([
            "203.0.113.7".parse().expect("v4"),
            "8.8.4.4".parse().expect("v4"),
            "2a01:4f8::7".parse().expect("v6"),
            "127.0.0.1".parse().expect("v4"),
            "::1".parse().expect("v6"),
        ]);
        let c = |ip: &str| classify(ip.parse().expect("ip"), &own);
        assert!(matches!(c("8.8.4.4"), Reach::Pinned { .. }));
        assert!(matches!(c("203.0.113.7"), Reach::Pinned { .. }));
        assert!(matches!(c("2a01:4f8::7"), Reach::Pinned { .. }));
        assert!(matches!(c("::ffff:8.8.4.4"), Reach::Pinned { .. }));
        assert!(matches!(c("2002:808:404::1"), Reach::Pinned { .. }));
        assert!(matches!(c("64:ff9b::808:404"), Reach::Pinned { .. }));
        assert!(matches!(
            c("127.0.0.1"),
            Reach::Special { loopback: true, .. }
        ));
        assert!(matches!(c("::1"), Reach::Special { loopback: true, .. }));
        assert_eq!(c("8.8.8.8"), Reach::Global);
    }

    #[test]
    fn procfs_listings_are_parsed() {
        let trie = "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n     +-- 127.0.0.0/8 2 0 2\n        +-- 127.0.0.0/31 1 0 0\n           |-- 127.0.0.0\n              /8 host LOCAL\n           |-- 127.0.0.1\n              /32 host LOCAL\n        |-- 127.255.255.255\n           /32 link BROADCAST\n     +-- 192.0.2.0/24 2 0 2\n           |-- 192.0.2.0\n              /24 link UNICAST\n           |-- 192.0.2.2\n              /32 host LOCAL\nLocal:\n           |-- 127.0.0.1\n              /32 host LOCAL\n";
        assert_eq!(
            parse_fib_trie(trie.as_bytes()),
            [Ipv4Addr::new(127, 0, 0, 1), Ipv4Addr::new(192, 0, 2, 2)]
        );
        let inet6 = "fd000000000000000000000000000002 04 40 00 82     eth0\n00000000000000000000000000000001 01 80 10 80       lo\ngarbage\n";
        assert_eq!(
            parse_if_inet6(inet6.as_bytes()),
            [
                "fd00::2".parse::<Ipv6Addr>().expect("v6"),
                Ipv6Addr::LOCALHOST
            ]
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_system_list_holds_loopback() {
        let list = HostAddresses::system().list();
        assert!(list.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)), "{list:?}");
    }
}
