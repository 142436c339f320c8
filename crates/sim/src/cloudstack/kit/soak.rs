//! The CloudStack simulator's fault model for the chaos soak ([`crate::kit::soak`]).

use std::time::Duration;

use serde_json::Value;

use crate::cloudstack::{CloudstackSim, Match};
use crate::kit::soak::{
    CloudFault, CloudLb, MemberSet, SoakCloud, SplitMix64, Tally, inject_common,
};

/// The tag the CloudStack driver puts on every public IP it associates
/// (drivers/cloudstack/README.md).
const OWNER_TAG: &str = "wasm-ccm/load-balancer";

/// The annotations the workload changes on CloudStack Services.
const ANNOTATIONS: &[(&str, &[&str])] = &[
    (
        "service.beta.kubernetes.io/cloudstack-load-balancer-proxy-protocol",
        &["true", "false"],
    ),
    (
        "service.beta.kubernetes.io/cloudstack-load-balancer-source-cidrs",
        &["10.0.0.0/8", "0.0.0.0/0", "192.0.2.0/24,198.51.100.0/24"],
    ),
];

/// `a` + the UID without dashes, cut to 32 characters: the CloudStack driver's load balancer
/// name, the prefix of its rules' names and the value of its ownership tag.
fn lb_name(uid: &str) -> String {
    let mut name: String = std::iter::once('a')
        .chain(uid.chars().filter(|c| *c != '-'))
        .collect();
    name.truncate(32);
    name
}

/// The load balancer name a rule belongs to: rules are named `<lbname>-<protocol>-<port>`.
fn rule_owner(rule: &Value) -> Option<String> {
    rule["name"]
        .as_str()
        .and_then(|n| n.rsplitn(3, '-').nth(2))
        .map(str::to_string)
}

impl SoakCloud for CloudstackSim {
    fn lb_objects(&self) -> Vec<CloudLb> {
        let rules = self.load_balancer_rules();
        self.public_ips()
            .iter()
            .filter(|ip| ip["issourcenat"] != true)
            .filter(|ip| matches!(ip["state"].as_str(), Some("Allocated" | "Allocating")))
            .map(|ip| {
                let id = ip["id"].as_str().unwrap_or_default().to_string();
                let tagged = ip["tags"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|t| t["key"] == OWNER_TAG)
                    .and_then(|t| t["value"].as_str())
                    .map(str::to_string);
                let by_rule = rules
                    .iter()
                    .filter(|r| r["publicipid"].as_str() == Some(id.as_str()))
                    .find_map(rule_owner);
                CloudLb {
                    owner: tagged.or(by_rule),
                    addresses: ip["ipaddress"]
                        .as_str()
                        .map(|a| vec![a.to_string()])
                        .unwrap_or_default(),
                    id,
                }
            })
            .collect()
    }

    fn owner(&self, _namespace: &str, _name: &str, uid: &str) -> String {
        lb_name(uid)
    }

    /// Each rule's assigned VMs (members are instance IDs, the default key).
    fn member_sets(&self) -> Option<Vec<MemberSet>> {
        Some(
            self.load_balancer_rules()
                .iter()
                .map(|r| MemberSet {
                    id: r["id"].as_str().unwrap_or_default().to_string(),
                    owner: rule_owner(r),
                    members: r["members"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|m| m.as_str().map(str::to_string))
                        .collect(),
                })
                .collect(),
        )
    }

    fn annotation(&self, rng: &mut SplitMix64) -> Option<(String, String)> {
        let (key, values) = rng.pick(ANNOTATIONS)?;
        let value = rng.pick(values)?;
        Some((key.to_string(), value.to_string()))
    }

    fn inject(&self, kind: CloudFault, rng: &mut SplitMix64) -> Option<String> {
        match kind {
            CloudFault::Busy => {
                let command = *rng.pick(&[
                    "createLoadBalancerRule",
                    "associateIpAddress",
                    "assignToLoadBalancerRule",
                    "createFirewallRule",
                ])?;
                // One at a time: the simulator has no call to take a pending job failure back,
                // so what is left at quiescence is used up by the retries.
                self.fail_next_jobs(command, 1);
                Some(format!("the next {command} job fails (rolled back)"))
            }
            CloudFault::SlowJobs => {
                let ms = rng.between(500, 4000);
                self.set_job_duration(Some(Duration::from_millis(ms)));
                Some(format!("asynchronous jobs take {ms} ms"))
            }
            other => inject_common(&self.faults(), other, rng),
        }
    }

    fn end_timed(&self, kind: CloudFault) {
        match kind {
            CloudFault::Latency => self.faults().set_latency(Duration::ZERO),
            CloudFault::SlowJobs => self.set_job_duration(None),
            _ => {}
        }
    }

    fn arm_kill_point(&self) {
        self.faults()
            .kill_after(Match::command("createLoadBalancerRule"), 1, 503);
    }

    fn kill_point_reached(&self) -> bool {
        self.faults().killed()
    }

    fn clear_faults(&self) {
        self.faults().clear();
        self.set_job_duration(None);
        self.settle();
    }

    fn drain_requests(&self) -> Tally {
        let log = self.requests();
        self.clear_requests();
        Tally::of(log, |r| r.is_mutation().then(|| r.line()))
    }

    /// A public IP associated by a process killed (or whose answer was lost) before its
    /// `createTags` was accepted carries no tag and no rule: `associateIpAddress` takes no name
    /// or tag, so nothing can tell it from a user's address (drivers/cloudstack/README.md,
    /// "Crash consistency"; BENCHMARKS.md, RELIABILITY finding 6).
    fn unowned_is_known_window(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_key_follows_the_drivers_name() {
        // `a` + the UID without dashes, cut to 32 characters (drivers/cloudstack/README.md).
        assert_eq!(
            lb_name("844e6108-d5f1-46ee-b61c-4fe80a2bef86"),
            "a844e6108d5f146eeb61c4fe80a2bef8"
        );
        assert_eq!(
            rule_owner(&serde_json::json!({"name": "a844e6108d-tcp-80"})).as_deref(),
            Some("a844e6108d")
        );
    }
}
