//! The NodePort range (`kube-apiserver --service-node-port-range`) and the choice of a free port
//! in it.
//!
//! Sources: the range is k8s.io/apimachinery/pkg/util/net/port_range.go (`PortRange`: its
//! parsing and its text); the refusals are pkg/registry/core/service/portallocator/allocator.go
//! (`ErrNotInRange`, `ErrAllocated`, `ErrFull`); the dynamic choice is the same file's
//! `calculateRangeOffset` with pkg/registry/core/service/allocator/bitmap.go's
//! `randomScanStrategyWithOffset` (a random free port of the upper band, then of the lower band,
//! which is kept for ports that users ask for by number).

use std::fmt;
use std::str::FromStr;

use rand::Rng;

/// A range of ports, `BASE-END` inclusive, as `net.PortRange`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    base: u32,
    size: u32,
}

impl PortRange {
    /// The apiserver's default, `30000-32767` (`kubeoptions.DefaultServiceNodePortRange`).
    pub const DEFAULT: PortRange = PortRange {
        base: 30000,
        size: 2768,
    };

    /// The range `base..=last`, or `None` when `last < base` or `last > 65535`.
    pub fn new(base: u32, last: u32) -> Option<PortRange> {
        (base <= last && last <= 65535).then(|| PortRange {
            base,
            size: last - base + 1,
        })
    }

    /// The first port.
    pub fn base(&self) -> u64 {
        u64::from(self.base)
    }

    /// The last port (inclusive).
    pub fn last(&self) -> u64 {
        u64::from(self.base + self.size - 1)
    }

    /// How many ports the range holds.
    pub fn size(&self) -> u64 {
        u64::from(self.size)
    }

    /// Whether `port` is in the range (`PortRange.Contains`).
    pub fn contains(&self, port: u64) -> bool {
        (self.base()..=self.last()).contains(&port)
    }

    /// The size of the lower band, kept for ports asked for by number: `calculateRangeOffset`,
    /// `min(max(16, size/32), 128)`, and 0 for ranges of 16 ports or fewer.
    fn static_band(&self) -> u64 {
        let size = self.size();
        if size <= 16 {
            0
        } else {
            (size / 32).clamp(16, 128)
        }
    }

    /// A port not `taken`, or `None` when every port is taken ("range is full"):
    /// a random free one of the upper band, scanning forward from a random start and wrapping
    /// within the band; then the same in the lower band.
    pub(crate) fn allocate(&self, taken: impl Fn(u64) -> bool) -> Option<u64> {
        let band = self.static_band();
        let mut rng = rand::rng();
        let mut scan = |first: u64, len: u64| {
            if len == 0 {
                return None;
            }
            let start = rng.random_range(0..len);
            (0..len)
                .map(|i| first + (start + i) % len)
                .find(|p| !taken(*p))
        };
        scan(self.base() + band, self.size() - band).or_else(|| scan(self.base(), band))
    }

    /// Why `port` cannot be had: out of the range, or `taken` (the portallocator's
    /// `ErrNotInRange` and `ErrAllocated`, worded as the apiserver words them).
    pub(crate) fn check(&self, port: u64, taken: impl Fn(u64) -> bool) -> Result<(), String> {
        if !self.contains(port) {
            return Err(format!(
                "provided port is not in the valid range. The range of valid ports is {self}"
            ));
        }
        if taken(port) {
            return Err("provided port is already allocated".into());
        }
        Ok(())
    }
}

impl Default for PortRange {
    fn default() -> Self {
        PortRange::DEFAULT
    }
}

/// `PortRange.String`: `BASE-END`.
impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.base(), self.last())
    }
}

/// `PortRange.Set`: `BASE-END` (inclusive), `BASE+OFFSET` (the ports BASE to BASE+OFFSET,
/// inclusive, as the apiserver reads it) or one port; the apiserver's messages for what it
/// refuses. An empty text, which the apiserver reads as an empty range, is refused here: every
/// NodePort Service would then fail with "range is full".
impl FromStr for PortRange {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let value = text.trim();
        if value.is_empty() {
            return Err(
                "the NodePort range is empty: give BASE-END (e.g. 30000-32767), BASE+OFFSET or one port"
                    .into(),
            );
        }
        let number = |s: &str| {
            s.parse::<u32>()
                .map_err(|e| format!("unable to parse port range: {value}: {s:?}: {e}"))
        };
        let (low, high) = match (value.find('-'), value.find('+')) {
            (None, None) => {
                let port = number(value)?;
                (port, port)
            }
            (Some(i), None) => (number(&value[..i])?, number(&value[i + 1..])?),
            (None, Some(i)) => {
                let low = number(&value[..i])?;
                (low, low.saturating_add(number(&value[i + 1..])?))
            }
            (Some(_), Some(_)) => return Err(format!("unable to parse port range: {value}")),
        };
        if low > 65535 || high > 65535 {
            return Err(format!(
                "the port range cannot be greater than 65535: {value}"
            ));
        }
        PortRange::new(low, high)
            .ok_or_else(|| format!("end port cannot be less than start port: {value}"))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn ranges_parse_as_the_apiserver_parses_them() {
        let parse = |s: &str| s.parse::<PortRange>();
        assert_eq!(parse("30000-32767"), Ok(PortRange::DEFAULT));
        assert_eq!(
            parse(" 30000-32767 ").map(|r| r.to_string()).as_deref(),
            Ok("30000-32767")
        );
        // BASE+OFFSET: 100+10 is 100 to 110, eleven ports.
        let plus = parse("100+10").expect("plus");
        assert_eq!((plus.base(), plus.last(), plus.size()), (100, 110, 11));
        let one = parse("8080").expect("one port");
        assert_eq!((one.base(), one.size()), (8080, 1));
        assert_eq!(
            parse("30000-70000"),
            Err("the port range cannot be greater than 65535: 30000-70000".into())
        );
        assert_eq!(
            parse("32767-30000"),
            Err("end port cannot be less than start port: 32767-30000".into())
        );
        assert!(parse("a-b").is_err_and(|e| e.starts_with("unable to parse port range: a-b")));
        assert!(parse("1-2+3").is_err_and(|e| e == "unable to parse port range: 1-2+3"));
        assert!(parse("").is_err_and(|e| e.contains("empty")));
    }

    #[test]
    fn checks_word_the_refusals_as_the_apiserver() {
        let range = PortRange::new(30000, 30009).expect("range");
        let used: HashSet<u64> = [30001].into();
        assert_eq!(range.check(30000, |p| used.contains(&p)), Ok(()));
        assert_eq!(
            range.check(30010, |p| used.contains(&p)),
            Err(
                "provided port is not in the valid range. The range of valid ports is 30000-30009"
                    .into()
            )
        );
        assert_eq!(
            range.check(30001, |p| used.contains(&p)),
            Err("provided port is already allocated".into())
        );
    }

    /// Dynamic ports come from the upper band while it has room, then from the lower band;
    /// a full range gives none.
    #[test]
    fn allocation_prefers_the_upper_band_and_fills_the_range() {
        // 64 ports: the lower band is 16 (min(max(16, 64/32), 128)).
        let range = PortRange::new(40000, 40063).expect("range");
        assert_eq!(range.static_band(), 16);
        let mut used = HashSet::new();
        for _ in 0..48 {
            let p = range
                .allocate(|p| used.contains(&p))
                .expect("room in the upper band");
            assert!((40016..=40063).contains(&p), "{p}");
            assert!(used.insert(p));
        }
        for _ in 0..16 {
            let p = range
                .allocate(|p| used.contains(&p))
                .expect("room in the lower band");
            assert!((40000..40016).contains(&p), "{p}");
            assert!(used.insert(p));
        }
        assert_eq!(range.allocate(|p| used.contains(&p)), None);
        // The default range keeps 86 ports (2768/32) for static requests.
        assert_eq!(PortRange::DEFAULT.static_band(), 86);
        assert_eq!(PortRange::new(1, 16).map(|r| r.static_band()), Some(0));
        assert_eq!(PortRange::new(1, 65535).map(|r| r.static_band()), Some(128));
    }
}
