//! What Services hold of the shared ranges (cluster IPs, node ports and health-check node
//! ports), kept by the store as Services are written, so that a Service's allocation asks an
//! index instead of reading every other Service. The apiserver keeps bitmaps for the same reason
//! (pkg/registry/core/service/allocator/bitmap.go); reading every Service on each create made
//! seeding 2,500 LoadBalancer Services quadratic.

use std::collections::HashMap;

use serde_json::Value;

/// Counts per cluster IP and per node port over the stored Services. Counted, not a set, so
/// that two Services holding the same value (which admission refuses, but a library write may
/// carry) do not free it for a third when one of them lets it go.
#[derive(Debug, Default)]
pub(crate) struct Allocated {
    ips: HashMap<String, u32>,
    ports: HashMap<u64, u32>,
}

impl Allocated {
    /// Counts what `service` holds.
    pub(crate) fn add(&mut self, service: &Value) {
        let held = Held::of(Some(service));
        if let Some(ip) = held.ip {
            *self.ips.entry(ip.to_string()).or_default() += 1;
        }
        for port in held.ports {
            *self.ports.entry(port).or_default() += 1;
        }
    }

    /// Forgets what `service` held.
    pub(crate) fn remove(&mut self, service: &Value) {
        let held = Held::of(Some(service));
        if let Some(ip) = held.ip
            && let Some(n) = self.ips.get_mut(ip)
        {
            *n -= 1;
            if *n == 0 {
                self.ips.remove(ip);
            }
        }
        for port in held.ports {
            if let Some(n) = self.ports.get_mut(&port) {
                *n -= 1;
                if *n == 0 {
                    self.ports.remove(&port);
                }
            }
        }
    }

    /// The holdings of every Service but the one whose stored version is `own` (`None` for a
    /// Service being created).
    pub(crate) fn except<'a>(&'a self, own: Option<&'a Value>) -> Others<'a> {
        Others {
            all: self,
            own: Held::of(own),
        }
    }
}

/// What one Service holds: its cluster IP (not `None`, the headless marker) and its node ports.
#[derive(Debug, Default)]
struct Held<'a> {
    ip: Option<&'a str>,
    ports: Vec<u64>,
}

impl<'a> Held<'a> {
    fn of(service: Option<&'a Value>) -> Held<'a> {
        let Some(spec) = service.and_then(|s| s.get("spec")) else {
            return Held::default();
        };
        let ip = spec
            .get("clusterIP")
            .and_then(Value::as_str)
            .filter(|ip| !ip.is_empty() && *ip != "None");
        let mut ports: Vec<u64> = spec
            .get("ports")
            .and_then(Value::as_array)
            .map(|ports| {
                ports
                    .iter()
                    .filter_map(|p| p.get("nodePort")?.as_u64())
                    .collect()
            })
            .unwrap_or_default();
        ports.extend(spec.get("healthCheckNodePort").and_then(Value::as_u64));
        Held { ip, ports }
    }
}

/// The holdings of the other Services (see [`Allocated::except`]).
#[derive(Debug)]
pub(crate) struct Others<'a> {
    all: &'a Allocated,
    own: Held<'a>,
}

impl Others<'_> {
    /// Whether another Service holds cluster IP `ip`.
    pub(crate) fn has_ip(&self, ip: &str) -> bool {
        let all = self.all.ips.get(ip).copied().unwrap_or(0);
        let own = u32::from(self.own.ip == Some(ip));
        all > own
    }

    /// Whether another Service holds node port `port`.
    pub(crate) fn has_port(&self, port: u64) -> bool {
        let all = self.all.ports.get(&port).copied().unwrap_or(0);
        let own = self.own.ports.iter().filter(|p| **p == port).count();
        all as usize > own
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_follow_writes_and_exclude_the_service_itself() {
        let a = json!({"spec": {"clusterIP": "10.96.0.5", "ports": [{"nodePort": 30001}, {"nodePort": 30002}], "healthCheckNodePort": 30003}});
        let headless = json!({"spec": {"clusterIP": "None", "ports": [{"port": 80}]}});
        let mut allocated = Allocated::default();
        allocated.add(&a);
        allocated.add(&headless);
        let others = allocated.except(None);
        assert!(others.has_ip("10.96.0.5") && !others.has_ip("None"));
        assert!([30001, 30002, 30003].iter().all(|p| others.has_port(*p)));
        assert!(!others.has_port(30004));
        // Seen from `a` itself, nothing is taken.
        let mine = allocated.except(Some(&a));
        assert!(!mine.has_ip("10.96.0.5") && !mine.has_port(30001));
        // A second holder keeps the value taken when the first lets it go.
        let b = json!({"spec": {"clusterIP": "10.96.0.5", "ports": [{"nodePort": 30001}]}});
        allocated.add(&b);
        assert!(allocated.except(Some(&a)).has_port(30001));
        allocated.remove(&b);
        assert!(!allocated.except(Some(&a)).has_port(30001));
        allocated.remove(&a);
        assert!(!allocated.except(None).has_port(30002));
        assert!(allocated.ips.is_empty() && allocated.ports.is_empty());
    }
}
