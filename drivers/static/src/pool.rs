//! The load-balancer address pool: single IPs and CIDRs, allocated first-free.
//!
//! Ranges are kept as numeric intervals and never expanded, so a large IPv6 prefix costs nothing;
//! finding a free address walks at most (taken addresses + 1) candidates per range.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An inclusive interval of addresses of one family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    v6: bool,
    first: u128,
    last: u128,
}

/// IP family filter for allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// IPv4 only.
    V4,
    /// IPv6 only.
    V6,
}

/// The configured pool, in configuration order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressPool {
    ranges: Vec<Range>,
}

fn to_num(ip: IpAddr) -> (bool, u128) {
    match ip {
        IpAddr::V4(v4) => (false, u128::from(u32::from(v4))),
        IpAddr::V6(v6) => (true, u128::from(v6)),
    }
}

fn from_num(v6: bool, n: u128) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::from(n))
    } else {
        // Ranges of family v4 only hold numbers below 2^32.
        IpAddr::V4(Ipv4Addr::from(n as u32))
    }
}

/// The mask of the lowest `bits` bits (all ones for 128).
fn host_mask(bits: u32) -> u128 {
    1u128.checked_shl(bits).map_or(u128::MAX, |b| b - 1)
}

/// Parses `a.b.c.d/len` or `x::/len` into (network address, prefix length), refusing host bits.
pub fn parse_cidr(s: &str) -> Result<(IpAddr, u8), String> {
    let (addr, len) = s
        .split_once('/')
        .ok_or_else(|| format!("{s:?} is not a CIDR (address/prefix-length)"))?;
    let ip: IpAddr = addr
        .parse()
        .map_err(|_| format!("{s:?}: {addr:?} is not an IP address"))?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let len: u8 = len
        .parse()
        .ok()
        .filter(|l| *l <= max)
        .ok_or_else(|| format!("{s:?}: prefix length must be 0..={max}"))?;
    let (v6, n) = to_num(ip);
    let host_bits = u32::from(max - len);
    let mask = host_mask(host_bits);
    if n & mask != 0 {
        return Err(format!(
            "{s:?} has host bits set; did you mean {}/{len}?",
            from_num(v6, n & !mask)
        ));
    }
    Ok((ip, len))
}

impl AddressPool {
    /// Parses pool entries; errors name `path[i]`.
    pub fn parse(entries: &[String], path: &str) -> Result<Self, String> {
        let mut ranges = Vec::with_capacity(entries.len());
        for (i, entry) in entries.iter().enumerate() {
            let entry = entry.trim();
            let range = if entry.contains('/') {
                let (ip, len) = parse_cidr(entry).map_err(|e| format!("{path}[{i}]: {e}"))?;
                let (v6, n) = to_num(ip);
                let host_bits = if v6 { 128 } else { 32 } - u32::from(len);
                let (mut first, mut last) = (n, n | host_mask(host_bits));
                // IPv4 networks of 4 or more addresses (/30 and larger) lose their network and
                // broadcast addresses; /31 and /32 (RFC 3021) and IPv6 keep all.
                if !v6 && len <= 30 {
                    first += 1;
                    last -= 1;
                }
                Range { v6, first, last }
            } else {
                let ip: IpAddr = entry.parse().map_err(|_| {
                    format!("{path}[{i}]: {entry:?} is not an IP address or a CIDR")
                })?;
                let (v6, n) = to_num(ip);
                Range {
                    v6,
                    first: n,
                    last: n,
                }
            };
            ranges.push(range);
        }
        Ok(Self { ranges })
    }

    /// No addresses configured.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Whether `ip` belongs to the pool.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let (v6, n) = to_num(ip);
        self.ranges
            .iter()
            .any(|r| r.v6 == v6 && r.first <= n && n <= r.last)
    }

    /// The first address (in configuration order) that is not in `taken`, of `family` if given.
    pub fn first_free(&self, taken: &HashSet<IpAddr>, family: Option<Family>) -> Option<IpAddr> {
        self.addresses(family).find(|ip| !taken.contains(ip))
    }

    /// Every address of the pool in configuration order, of `family` if given.
    pub fn addresses(&self, family: Option<Family>) -> impl Iterator<Item = IpAddr> + '_ {
        self.ranges
            .iter()
            .filter(move |r| match family {
                Some(Family::V4) => !r.v6,
                Some(Family::V6) => r.v6,
                None => true,
            })
            .flat_map(|r| {
                // `first..=last` never overflows, even for a range ending at the last address.
                (r.first..=r.last).map(move |n| from_num(r.v6, n))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(entries: &[&str]) -> AddressPool {
        let v: Vec<String> = entries.iter().map(|s| s.to_string()).collect();
        AddressPool::parse(&v, "p").unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn cidrs_exclude_network_and_broadcast() {
        let p = pool(&["192.0.2.16/30"]);
        assert!(!p.contains(ip("192.0.2.16")));
        assert!(p.contains(ip("192.0.2.17")));
        assert!(p.contains(ip("192.0.2.18")));
        assert!(!p.contains(ip("192.0.2.19")));
        let p31 = pool(&["192.0.2.0/31"]);
        assert!(p31.contains(ip("192.0.2.0")) && p31.contains(ip("192.0.2.1")));
        let p6 = pool(&["2001:db8::/127"]);
        assert!(p6.contains(ip("2001:db8::")));
    }

    #[test]
    fn allocation_is_first_free_in_order() {
        let p = pool(&["192.0.2.10", "192.0.2.16/30"]);
        let mut taken = HashSet::new();
        assert_eq!(p.first_free(&taken, None), Some(ip("192.0.2.10")));
        taken.insert(ip("192.0.2.10"));
        assert_eq!(p.first_free(&taken, None), Some(ip("192.0.2.17")));
        taken.insert(ip("192.0.2.17"));
        taken.insert(ip("192.0.2.18"));
        assert_eq!(p.first_free(&taken, None), None);
        assert_eq!(p.first_free(&HashSet::new(), Some(Family::V6)), None);
    }

    #[test]
    fn huge_ranges_are_cheap() {
        let p = pool(&["2001:db8::/32", "10.0.0.0/8"]);
        let taken: HashSet<IpAddr> = [ip("2001:db8::")].into_iter().collect();
        assert_eq!(p.first_free(&taken, None), Some(ip("2001:db8::1")));
        assert_eq!(p.first_free(&taken, Some(Family::V4)), Some(ip("10.0.0.1")));
        let all = pool(&["::/0"]);
        assert!(all.contains(ip("ffff::1")));
    }

    #[test]
    fn bad_entries_are_refused_with_path() {
        let e =
            AddressPool::parse(&["192.0.2.1".into(), "192.0.2.17/30".into()], "lb").unwrap_err();
        assert_eq!(
            e,
            "lb[1]: \"192.0.2.17/30\" has host bits set; did you mean 192.0.2.16/30?"
        );
        assert!(
            AddressPool::parse(&["x".into()], "lb")
                .unwrap_err()
                .starts_with("lb[0]")
        );
        assert!(parse_cidr("10.0.0.0/33").is_err());
        assert!(parse_cidr("10.0.0.0").is_err());
        assert_eq!(parse_cidr("0.0.0.0/0"), Ok((ip("0.0.0.0"), 0)));
    }
}
