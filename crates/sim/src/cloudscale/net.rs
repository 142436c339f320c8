//! IP networks in CIDR notation and the address arithmetic the simulator needs (containment,
//! host iteration), for both families without an extra dependency.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A network: its address (host bits zero) and prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cidr {
    /// The network address.
    pub network: IpAddr,
    /// The prefix length (0–32 or 0–128).
    pub prefix: u8,
}

fn width(ip: IpAddr) -> u8 {
    if ip.is_ipv4() { 32 } else { 128 }
}

/// The address as an integer (IPv4 in the low 32 bits).
pub(crate) fn bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// The address of the family of `like` with these bits (IPv4 keeps the low 32 bits).
pub(crate) fn from_bits(like: IpAddr, value: u128) -> IpAddr {
    match like {
        // Truncation is the intent: IPv4 arithmetic never leaves the low 32 bits.
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(value as u32)),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(value)),
    }
}

/// The mask of the host bits of a `prefix` in a `width`-bit family.
fn host_mask(width: u8, prefix: u8) -> u128 {
    let host_bits = u32::from(width.saturating_sub(prefix));
    if host_bits >= 128 {
        u128::MAX
    } else {
        (1u128 << host_bits) - 1
    }
}

impl Cidr {
    /// Parses `address/prefix`; the address must be the network address (no host bits set),
    /// as the API and humans mean it.
    pub(crate) fn parse(text: &str) -> Result<Cidr, String> {
        let (addr, prefix) = text
            .split_once('/')
            .ok_or_else(|| format!("{text:?} is not in CIDR notation (address/prefix)"))?;
        let ip: IpAddr = addr
            .parse()
            .map_err(|_| format!("{addr:?} is not an IP address"))?;
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|p| *p <= width(ip))
            .ok_or_else(|| format!("{prefix:?} is not a valid prefix length for {addr}"))?;
        let cidr = Cidr::around(ip, prefix);
        if cidr.network != ip {
            return Err(format!("{text} has host bits set (the network is {cidr})"));
        }
        Ok(cidr)
    }

    /// The network of `prefix` bits that contains `ip`.
    pub(crate) fn around(ip: IpAddr, prefix: u8) -> Cidr {
        let prefix = prefix.min(width(ip));
        let network = from_bits(ip, bits(ip) & !host_mask(width(ip), prefix));
        Cidr { network, prefix }
    }

    /// Whether `ip` is inside this network (same family).
    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.network.is_ipv4()
            && Cidr::around(ip, self.prefix).network == self.network
    }

    /// 4 or 6.
    pub(crate) fn version(&self) -> u8 {
        if self.network.is_ipv4() { 4 } else { 6 }
    }

    /// The usable host addresses in order: without the network address and, for IPv4, the
    /// broadcast address (except in /31 and /32, which have no such reservations).
    pub(crate) fn hosts(&self) -> impl Iterator<Item = IpAddr> + use<> {
        let w = width(self.network);
        let first = bits(self.network);
        let last = first | host_mask(w, self.prefix);
        let (start, end) = if w - self.prefix <= 1 {
            (first, last)
        } else if w == 32 {
            (first + 1, last - 1)
        } else {
            (first + 1, last)
        };
        let like = self.network;
        (start..=end).map(move |b| from_bits(like, b))
    }

    /// Whether `ip` is reserved in this network (the network or IPv4 broadcast address).
    pub(crate) fn is_reserved(&self, ip: IpAddr) -> bool {
        let w = width(self.network);
        if w - self.prefix <= 1 {
            return false;
        }
        let b = bits(ip);
        b == bits(self.network) || (w == 32 && b == bits(self.network) | host_mask(w, self.prefix))
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    fn cidr(s: &str) -> Cidr {
        Cidr::parse(s).expect("test network")
    }

    #[test]
    fn parse_and_contain() {
        let c = cidr("10.1.1.0/24");
        assert_eq!(c.to_string(), "10.1.1.0/24");
        assert!(c.contains(ip("10.1.1.200")));
        assert!(!c.contains(ip("10.1.2.1")));
        assert!(!c.contains(ip("::1")));
        assert!(Cidr::parse("10.1.1.5/24").is_err());
        assert!(Cidr::parse("10.1.1.0/33").is_err());
        assert!(Cidr::parse("10.1.1.0").is_err());
        assert_eq!(
            Cidr::around(ip("2a06:c01::5"), 64).to_string(),
            "2a06:c01::/64"
        );
    }

    #[test]
    fn hosts_skip_reserved_addresses() {
        let c = cidr("192.168.0.0/30");
        let hosts: Vec<String> = c.hosts().map(|h| h.to_string()).collect();
        assert_eq!(hosts, ["192.168.0.1", "192.168.0.2"]);
        assert!(c.is_reserved(ip("192.168.0.3")));
        assert!(c.is_reserved(ip("192.168.0.0")));
        assert_eq!(cidr("fd00::/126").hosts().count(), 3);
        assert_eq!(cidr("10.0.0.7/32").hosts().count(), 1);
    }
}
