//! The PhoenixNAP simulator's fault model for the chaos soak ([`crate::kit::soak`]).

use std::time::Duration;

use serde_json::Value;

use crate::kit::soak::{CloudFault, CloudLb, SoakCloud, SplitMix64, Tally, inject_common};
use crate::phoenixnap::{Match, PhoenixnapSim};

/// A tag's value on a PhoenixNAP resource.
fn tag<'a>(block: &'a Value, name: &str) -> Option<&'a str> {
    block["tags"]
        .as_array()?
        .iter()
        .find(|t| t["name"] == name)
        .and_then(|t| t["value"].as_str())
}

/// The address kube-vip announces for a block: its network address + 2.
fn vip(cidr: &str) -> Option<String> {
    let (net, _) = cidr.split_once('/')?;
    let addr: std::net::Ipv4Addr = net.parse().ok()?;
    Some(std::net::Ipv4Addr::from(u32::from(addr).checked_add(2)?).to_string())
}

impl SoakCloud for PhoenixnapSim {
    fn lb_objects(&self) -> Vec<CloudLb> {
        self.ip_blocks()
            .iter()
            .map(|b| {
                let owner = tag(b, "serviceNamespace")
                    .zip(tag(b, "serviceName"))
                    .map(|(ns, name)| format!("{ns}/{name}"));
                CloudLb {
                    id: b["id"].as_str().unwrap_or_default().to_string(),
                    owner,
                    addresses: b["cidr"].as_str().and_then(vip).into_iter().collect(),
                }
            })
            .collect()
    }

    fn owner(&self, namespace: &str, name: &str, _uid: &str) -> String {
        format!("{namespace}/{name}")
    }

    fn annotation(&self, _rng: &mut SplitMix64) -> Option<(String, String)> {
        // The location annotation is ignored with PNAP_LOCATION set, and no other annotation
        // changes what the driver does.
        None
    }

    fn inject(&self, kind: CloudFault, rng: &mut SplitMix64) -> Option<String> {
        match kind {
            CloudFault::SlowJobs => {
                let ms = rng.between(500, 3000);
                self.set_assign_after(Duration::from_millis(ms));
                Some(format!("IP block assignment takes {ms} ms"))
            }
            other => inject_common(&self.faults(), other, rng),
        }
    }

    fn end_timed(&self, kind: CloudFault) {
        match kind {
            CloudFault::Latency => self.faults().set_latency(Duration::ZERO),
            CloudFault::SlowJobs => {
                self.set_assign_after(Duration::ZERO);
                self.settle();
            }
            _ => {}
        }
    }

    fn arm_kill_point(&self) {
        self.faults()
            .kill_after(Match::path("/ips/v1/ip-blocks").with_method("POST"), 1, 503);
    }

    fn kill_point_reached(&self) -> bool {
        self.faults().killed()
    }

    fn clear_faults(&self) {
        self.faults().clear();
        self.set_assign_after(Duration::ZERO);
        self.settle();
    }

    fn drain_requests(&self) -> Tally {
        let log = self.requests();
        self.clear_requests();
        // Token requests change nothing in the cloud: reads. The line leaves the query out.
        Tally::of(log, |r| {
            r.is_mutation()
                .then(|| format!("{} {} {}", r.method, r.path, r.status))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_vip_announces_the_blocks_address_plus_two() {
        assert_eq!(vip("198.18.4.8/29").as_deref(), Some("198.18.4.10"));
        assert_eq!(vip("not a cidr"), None);
    }
}
