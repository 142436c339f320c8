//! The cloudscale simulator's fault model for the chaos soak ([`crate::kit::soak`]).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::cloudscale::{CloudscaleSim, Match};
use crate::kit::soak::{
    CloudFault, CloudLb, MemberSet, SoakCloud, SplitMix64, Tally, inject_common,
};

/// The prefix of the load balancer name the cloudscale driver gives a Service
/// (drivers/cloudscale/README.md).
const LB_PREFIX: &str = "k8s-service-";
/// The annotations the workload changes on cloudscale Services (patched in place by the driver).
const ANNOTATIONS: &[(&str, &[&str])] = &[
    (
        "k8s.cloudscale.ch/loadbalancer-timeout-member-data-ms",
        &["20000", "40000", "60000"],
    ),
    (
        "k8s.cloudscale.ch/loadbalancer-timeout-client-data-ms",
        &["30000", "50000"],
    ),
];

/// The Service a load balancer is named for (its UID), if it is named for one.
fn owner_of(lb: &Value) -> Option<String> {
    lb["name"]
        .as_str()
        .and_then(|n| n.strip_prefix(LB_PREFIX))
        .map(str::to_string)
}

impl SoakCloud for CloudscaleSim {
    fn lb_objects(&self) -> Vec<CloudLb> {
        CloudscaleSim::load_balancers(self)
            .iter()
            .map(|lb| {
                let mut addresses: Vec<String> = lb["vip_addresses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v["address"].as_str().map(str::to_string))
                    .collect();
                addresses.sort();
                CloudLb {
                    id: lb["uuid"].as_str().unwrap_or_default().to_string(),
                    owner: owner_of(lb),
                    addresses,
                }
            })
            .collect()
    }

    fn owner(&self, _namespace: &str, _name: &str, uid: &str) -> String {
        uid.to_string()
    }

    fn member_sets(&self) -> Option<Vec<MemberSet>> {
        let lb_owner: BTreeMap<String, Option<String>> = CloudscaleSim::load_balancers(self)
            .iter()
            .map(|lb| {
                (
                    lb["uuid"].as_str().unwrap_or_default().to_string(),
                    owner_of(lb),
                )
            })
            .collect();
        let members = self.members();
        Some(
            self.pools()
                .iter()
                .map(|pool| {
                    let id = pool["uuid"].as_str().unwrap_or_default().to_string();
                    let lb = pool["load_balancer"]["uuid"].as_str().unwrap_or_default();
                    MemberSet {
                        owner: lb_owner.get(lb).cloned().flatten(),
                        members: members
                            .iter()
                            .filter(|m| m["pool"]["uuid"].as_str() == Some(id.as_str()))
                            .filter_map(|m| m["address"].as_str().map(str::to_string))
                            .collect(),
                        id,
                    }
                })
                .collect(),
        )
    }

    /// Members are the servers' private addresses: the Node's InternalIP.
    fn member_key(&self, node: &Value, _instance: &str) -> String {
        node["status"]["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["type"] == "InternalIP")
            .and_then(|a| a["address"].as_str())
            .unwrap_or_default()
            .to_string()
    }

    fn annotation(&self, rng: &mut SplitMix64) -> Option<(String, String)> {
        let (key, values) = rng.pick(ANNOTATIONS)?;
        let value = rng.pick(values)?;
        Some((key.to_string(), value.to_string()))
    }

    fn inject(&self, kind: CloudFault, rng: &mut SplitMix64) -> Option<String> {
        let faults = self.faults();
        match kind {
            CloudFault::Status5xx => {
                let status = *rng.pick(&[500u16, 502, 503])?;
                let count = rng.between(1, 4) as usize;
                let (matcher, what) = if rng.chance(50) {
                    (Match::method("GET"), "GETs")
                } else {
                    (Match::any(), "requests")
                };
                faults.fail_next(matcher, status, count);
                Some(format!("next {count} cloud {what} answer {status}"))
            }
            CloudFault::Busy => {
                let count = rng.between(1, 3) as usize;
                faults.refuse_next_as_busy(count);
                Some(format!(
                    "next {count} load balancer writes refused as `changing`"
                ))
            }
            CloudFault::SlowJobs => {
                let ms = rng.between(500, 3000);
                self.set_lb_ready_after(Duration::from_millis(ms));
                faults.refuse_while_changing(true);
                Some(format!(
                    "new load balancers provision for {ms} ms; writes to a changing one are refused"
                ))
            }
            other => inject_common(&faults, other, rng),
        }
    }

    fn end_timed(&self, kind: CloudFault) {
        match kind {
            CloudFault::Latency => self.faults().set_latency(Duration::ZERO),
            CloudFault::SlowJobs => {
                self.set_lb_ready_after(Duration::ZERO);
                self.faults().refuse_while_changing(false);
                self.settle();
            }
            _ => {}
        }
    }

    fn arm_kill_point(&self) {
        self.faults().kill_after(
            Match::path("/v1/load-balancers").with_method("POST"),
            1,
            503,
        );
    }

    fn kill_point_reached(&self) -> bool {
        self.faults().killed()
    }

    fn clear_faults(&self) {
        self.faults().clear();
        self.set_lb_ready_after(Duration::ZERO);
        self.settle();
    }

    fn drain_requests(&self) -> Tally {
        let log = self.requests();
        self.clear_requests();
        Tally::of(log, |r| r.is_mutation().then(|| r.line()))
    }
}
