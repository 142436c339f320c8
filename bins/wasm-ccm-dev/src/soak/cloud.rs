//! The cloud side of a soak, one implementation per driver: instances for the workload's nodes,
//! the cloud objects a Service maps to (for the invariants), the cloud's fault injection and its
//! request log. Everything goes through the simulator's own Rust API.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use wasm_ccm_sim::cloudscale::{CloudscaleSim, Match};
use wasm_ccm_sim::cloudstack::CloudstackSim;
use wasm_ccm_sim::kit::{self, DriverSetup, SimCloud, SimNode, StartOptions};
use wasm_ccm_sim::phoenixnap::PhoenixnapSim;

use super::faults::FaultKind;
use super::rng::SplitMix64;

/// The prefix of the load balancer name the cloudscale driver gives a Service (drivers/cloudscale/README.md).
const CLOUDSCALE_LB_PREFIX: &str = "k8s-service-";
/// The annotations the workload changes on cloudscale Services (patched in place by the driver).
const CLOUDSCALE_ANNOTATIONS: &[(&str, &[&str])] = &[
    (
        "k8s.cloudscale.ch/loadbalancer-timeout-member-data-ms",
        &["20000", "40000", "60000"],
    ),
    (
        "k8s.cloudscale.ch/loadbalancer-timeout-client-data-ms",
        &["30000", "50000"],
    ),
];

/// One cloud object that stands for a Service's load balancer.
#[derive(Debug, Clone)]
pub(crate) struct CloudLb {
    /// Its ID in the cloud.
    pub id: String,
    /// The key of the Service it is named or tagged for ([`SoakCloud::owner`]), when it is
    /// named or tagged for one.
    pub owner: Option<String>,
    /// Its addresses, sorted (what the Service's ingress must show).
    pub addresses: Vec<String>,
}

/// One member set of a load balancer: a cloudscale pool (one per Service port), a CloudStack
/// load balancer rule (one per port).
#[derive(Debug, Clone)]
pub(crate) struct MemberSet {
    /// The pool's or rule's ID.
    pub id: String,
    /// The key of the Service its load balancer is named or tagged for ([`SoakCloud::owner`]).
    pub owner: Option<String>,
    /// Its members, each as [`SoakCloud::member_key`] names a node.
    pub members: std::collections::BTreeSet<String>,
}

/// Requests the cloud saw since the last drain.
#[derive(Debug, Default, Clone)]
pub(crate) struct Tally {
    /// Requests that change nothing.
    pub reads: u64,
    /// Mutating requests.
    pub writes: u64,
    /// `METHOD path status` of each mutating request.
    pub write_lines: Vec<String>,
}

impl Tally {
    /// Counts `log`: `write_line` gives the line of a mutating request, None for a read.
    fn of<R>(log: Vec<R>, write_line: impl Fn(&R) -> Option<String>) -> Tally {
        let mut tally = Tally::default();
        for r in &log {
            match write_line(r) {
                Some(line) => {
                    tally.writes += 1;
                    tally.write_lines.push(line);
                }
                None => tally.reads += 1,
            }
        }
        tally
    }
}

/// Starts the simulator of the cloud named `name` (the kit's list) on `addr`, with what the
/// soak drives on top of it; a cloud the soak has no fault model for is refused.
pub(super) async fn start(name: &str, addr: SocketAddr) -> anyhow::Result<Box<dyn SoakCloud>> {
    let cloud = kit::start(
        name,
        StartOptions {
            addr,
            ..Default::default()
        },
    )
    .await?;
    Ok(match name {
        "cloudscale" => Box::new(Cloudscale { cloud }),
        "cloudstack" => Box::new(Cloudstack { cloud }),
        "phoenixnap" => Box::new(Phoenixnap { cloud }),
        other => anyhow::bail!(
            "the soak has no fault model for the `{other}` cloud; choose cloudscale, cloudstack or phoenixnap"
        ),
    })
}

/// The concrete simulator behind a kit cloud: the soak's fault model is per cloud.
fn concrete<T: 'static>(cloud: &dyn SimCloud) -> &T {
    cloud.as_any().downcast_ref::<T>().unwrap_or_else(|| {
        panic!(
            "the kit's `{}` cloud is not the simulator the soak expects",
            cloud.name()
        )
    })
}

/// A simulated cloud as the soak drives it: the kit's [`SimCloud`] (instances, the driver's
/// setup) plus what the soak needs of one cloud (its load balancers with their owners, its
/// faults, its request log).
pub(crate) trait SoakCloud {
    /// The cloud as the kit's list has it.
    fn base(&self) -> &dyn SimCloud;
    /// What the driver needs.
    fn driver(&self) -> DriverSetup {
        self.base().driver_setup()
    }
    /// Adds the instance behind node `name` (`index` makes its addresses unique); its ID.
    fn add_instance(&self, index: usize, name: &str) -> Result<String, String> {
        let node = SimNode {
            name: name.to_string(),
            ..SimNode::numbered(index)
        };
        self.base().add_instance(index, &node)
    }
    /// Deletes an instance; whether it existed.
    fn remove_instance(&self, id: &str) -> bool {
        self.base().remove_instance(id)
    }
    /// Powers an instance on or off; whether it exists.
    fn set_running(&self, id: &str, running: bool) -> bool {
        self.base().set_running(id, running)
    }
    /// The load balancers (or their equivalent: an IP block, a public IP with its rules) of
    /// this cluster.
    fn load_balancers(&self) -> Vec<CloudLb>;
    /// The key a Service's cloud objects are named or tagged with ([`CloudLb::owner`]).
    fn owner(&self, namespace: &str, name: &str, uid: &str) -> String;
    /// Every member set of this cluster's load balancers; None for a cloud whose load
    /// balancers have no members it can list (PhoenixNAP: kube-vip on the nodes announces the
    /// address, nothing in the cloud names the backends).
    fn member_sets(&self) -> Option<Vec<MemberSet>> {
        None
    }
    /// How a member set names the node `node` (a Node object) whose instance is `instance`.
    fn member_key(&self, _node: &Value, instance: &str) -> String {
        instance.to_string()
    }
    /// An annotation change the driver applies in place: (key, value).
    fn annotation(&self, rng: &mut SplitMix64) -> Option<(String, String)>;
    /// Injects a cloud fault of `kind`; what was done, or None if this cloud cannot.
    fn inject(&self, kind: FaultKind, rng: &mut SplitMix64) -> Option<String>;
    /// Ends a timed fault (latency, slow provisioning) injected earlier.
    fn end_timed(&self, kind: FaultKind);
    /// Arms a kill point: every cloud request after the next load balancer write fails, as if
    /// the controller had died right after that write.
    fn arm_kill_point(&self);
    /// Whether the armed kill point was reached.
    fn kill_point_reached(&self) -> bool;
    /// Removes every fault and makes pending provisioning finish.
    fn clear_faults(&self);
    /// The requests since the last call (the log is then emptied, which also keeps it below
    /// its capacity over a long soak; requests between reading and emptying are not counted).
    fn drain_requests(&self) -> Tally;
    /// Whether an object of this cluster named or tagged for no Service is a documented window
    /// of the driver that the cloud's API cannot close (reported, a violation only with
    /// `--strict`), rather than a bug.
    fn unowned_is_known_window(&self) -> bool {
        false
    }
}

/// The cloudscale API simulator.
pub(super) struct Cloudscale {
    cloud: Box<dyn SimCloud>,
}

impl Cloudscale {
    fn sim(&self) -> &CloudscaleSim {
        concrete(self.cloud.as_ref())
    }
}

impl SoakCloud for Cloudscale {
    fn base(&self) -> &dyn SimCloud {
        self.cloud.as_ref()
    }

    fn load_balancers(&self) -> Vec<CloudLb> {
        self.sim()
            .load_balancers()
            .iter()
            .map(|lb| {
                let name = lb["name"].as_str().unwrap_or_default();
                let mut addresses: Vec<String> = lb["vip_addresses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v["address"].as_str().map(str::to_string))
                    .collect();
                addresses.sort();
                CloudLb {
                    id: lb["uuid"].as_str().unwrap_or_default().to_string(),
                    owner: name.strip_prefix(CLOUDSCALE_LB_PREFIX).map(str::to_string),
                    addresses,
                }
            })
            .collect()
    }

    fn owner(&self, _namespace: &str, _name: &str, uid: &str) -> String {
        uid.to_string()
    }

    fn member_sets(&self) -> Option<Vec<MemberSet>> {
        let sim = self.sim();
        let lb_owner: std::collections::BTreeMap<String, Option<String>> = sim
            .load_balancers()
            .iter()
            .map(|lb| {
                (
                    lb["uuid"].as_str().unwrap_or_default().to_string(),
                    lb["name"]
                        .as_str()
                        .and_then(|n| n.strip_prefix(CLOUDSCALE_LB_PREFIX))
                        .map(str::to_string),
                )
            })
            .collect();
        let members = sim.members();
        Some(
            sim.pools()
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
        let (key, values) = rng.pick(CLOUDSCALE_ANNOTATIONS)?;
        let value = rng.pick(values)?;
        Some((key.to_string(), value.to_string()))
    }

    fn inject(&self, kind: FaultKind, rng: &mut SplitMix64) -> Option<String> {
        let faults = self.sim().faults();
        match kind {
            FaultKind::Cloud5xx => {
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
            FaultKind::Cloud429 => {
                let count = rng.between(1, 3) as usize;
                faults.throttle_next(Match::any(), 1, count);
                Some(format!(
                    "next {count} cloud requests answer 429 Retry-After: 1"
                ))
            }
            FaultKind::CloudLatency => {
                let ms = rng.between(50, 400);
                faults.set_latency(Duration::from_millis(ms));
                Some(format!("cloud latency {ms} ms"))
            }
            FaultKind::CloudReset => Some(cut_next(&faults, rng)),
            FaultKind::CloudBusy => {
                let count = rng.between(1, 3) as usize;
                faults.refuse_next_as_busy(count);
                Some(format!(
                    "next {count} load balancer writes refused as `changing`"
                ))
            }
            FaultKind::CloudSlowJobs => {
                let ms = rng.between(500, 3000);
                self.sim().set_lb_ready_after(Duration::from_millis(ms));
                faults.refuse_while_changing(true);
                Some(format!(
                    "new load balancers provision for {ms} ms; writes to a changing one are refused"
                ))
            }
            _ => None,
        }
    }

    fn end_timed(&self, kind: FaultKind) {
        match kind {
            FaultKind::CloudLatency => self.sim().faults().set_latency(Duration::ZERO),
            FaultKind::CloudSlowJobs => {
                self.sim().set_lb_ready_after(Duration::ZERO);
                self.sim().faults().refuse_while_changing(false);
                self.sim().settle();
            }
            _ => {}
        }
    }

    fn arm_kill_point(&self) {
        self.sim().faults().kill_after(
            Match::path("/v1/load-balancers").with_method("POST"),
            1,
            503,
        );
    }

    fn kill_point_reached(&self) -> bool {
        self.sim().faults().killed()
    }

    fn clear_faults(&self) {
        self.sim().faults().clear();
        self.sim().set_lb_ready_after(Duration::ZERO);
        self.sim().settle();
    }

    fn drain_requests(&self) -> Tally {
        let log = self.sim().requests();
        self.sim().clear_requests();
        Tally::of(log, |r| r.is_mutation().then(|| r.line()))
    }
}

/// Common cloud faults on a simulator with the shared fault rules (CloudStack, PhoenixNAP).
fn inject_common(
    faults: &wasm_ccm_sim::cloudstack::Faults,
    kind: FaultKind,
    rng: &mut SplitMix64,
) -> Option<String> {
    match kind {
        FaultKind::Cloud5xx => {
            let status = *rng.pick(&[500u16, 502, 503])?;
            let count = rng.between(1, 4) as usize;
            faults.fail_next(Match::any(), status, count);
            Some(format!("next {count} cloud requests answer {status}"))
        }
        FaultKind::Cloud429 => {
            let count = rng.between(1, 3) as usize;
            faults.throttle_next(Match::any(), 1, count);
            Some(format!(
                "next {count} cloud requests answer 429 Retry-After: 1"
            ))
        }
        FaultKind::CloudLatency => {
            let ms = rng.between(50, 400);
            faults.set_latency(Duration::from_millis(ms));
            Some(format!("cloud latency {ms} ms"))
        }
        FaultKind::CloudReset => Some(cut_next(faults, rng)),
        _ => None,
    }
}

/// The next one or two cloud requests are carried out and their answers lost: the driver
/// cannot tell whether its write happened (it must neither create a second copy nor delete).
fn cut_next(faults: &wasm_ccm_sim::cloudstack::Faults, rng: &mut SplitMix64) -> String {
    let count = rng.between(1, 2) as usize;
    faults.cut_next(Match::any(), count);
    format!("next {count} cloud requests carried out, their connections cut after the headers")
}

/// The tag the CloudStack driver puts on every public IP it associates (drivers/cloudstack/README.md).
const CLOUDSTACK_OWNER_TAG: &str = "wasm-ccm/load-balancer";

/// The annotations the workload changes on CloudStack Services.
const CLOUDSTACK_ANNOTATIONS: &[(&str, &[&str])] = &[
    (
        "service.beta.kubernetes.io/cloudstack-load-balancer-proxy-protocol",
        &["true", "false"],
    ),
    (
        "service.beta.kubernetes.io/cloudstack-load-balancer-source-cidrs",
        &["10.0.0.0/8", "0.0.0.0/0", "192.0.2.0/24,198.51.100.0/24"],
    ),
];

/// The CloudStack API simulator.
pub(super) struct Cloudstack {
    cloud: Box<dyn SimCloud>,
}

impl Cloudstack {
    fn sim(&self) -> &CloudstackSim {
        concrete(self.cloud.as_ref())
    }
}

/// `a` + the UID without dashes, cut to 32 characters: the CloudStack driver's load balancer
/// name, the prefix of its rules' names and the value of its ownership tag.
fn cloudstack_lb_name(uid: &str) -> String {
    let mut name: String = std::iter::once('a')
        .chain(uid.chars().filter(|c| *c != '-'))
        .collect();
    name.truncate(32);
    name
}

impl SoakCloud for Cloudstack {
    fn base(&self) -> &dyn SimCloud {
        self.cloud.as_ref()
    }

    fn load_balancers(&self) -> Vec<CloudLb> {
        let rules = self.sim().load_balancer_rules();
        self.sim()
            .public_ips()
            .iter()
            .filter(|ip| ip["issourcenat"] != true)
            .filter(|ip| matches!(ip["state"].as_str(), Some("Allocated" | "Allocating")))
            .map(|ip| {
                let id = ip["id"].as_str().unwrap_or_default().to_string();
                let tagged = ip["tags"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|t| t["key"] == CLOUDSTACK_OWNER_TAG)
                    .and_then(|t| t["value"].as_str())
                    .map(str::to_string);
                // Rules are named `<lbname>-<protocol>-<port>`.
                let by_rule = rules
                    .iter()
                    .filter(|r| r["publicipid"].as_str() == Some(id.as_str()))
                    .filter_map(|r| r["name"].as_str())
                    .filter_map(|n| n.rsplitn(3, '-').nth(2))
                    .map(str::to_string)
                    .next();
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
        cloudstack_lb_name(uid)
    }

    /// Each rule's assigned VMs (members are instance IDs, the default key).
    fn member_sets(&self) -> Option<Vec<MemberSet>> {
        Some(
            self.sim()
                .load_balancer_rules()
                .iter()
                .map(|r| MemberSet {
                    id: r["id"].as_str().unwrap_or_default().to_string(),
                    // Rules are named `<lbname>-<protocol>-<port>`.
                    owner: r["name"]
                        .as_str()
                        .and_then(|n| n.rsplitn(3, '-').nth(2))
                        .map(str::to_string),
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
        let (key, values) = rng.pick(CLOUDSTACK_ANNOTATIONS)?;
        let value = rng.pick(values)?;
        Some((key.to_string(), value.to_string()))
    }

    fn inject(&self, kind: FaultKind, rng: &mut SplitMix64) -> Option<String> {
        match kind {
            FaultKind::CloudBusy => {
                let command = *rng.pick(&[
                    "createLoadBalancerRule",
                    "associateIpAddress",
                    "assignToLoadBalancerRule",
                    "createFirewallRule",
                ])?;
                // One at a time: the simulator has no call to take a pending job failure back,
                // so what is left at quiescence is used up by the retries.
                self.sim().fail_next_jobs(command, 1);
                Some(format!("the next {command} job fails (rolled back)"))
            }
            FaultKind::CloudSlowJobs => {
                let ms = rng.between(500, 4000);
                self.sim().set_job_duration(Some(Duration::from_millis(ms)));
                Some(format!("asynchronous jobs take {ms} ms"))
            }
            other => inject_common(&self.sim().faults(), other, rng),
        }
    }

    fn end_timed(&self, kind: FaultKind) {
        match kind {
            FaultKind::CloudLatency => self.sim().faults().set_latency(Duration::ZERO),
            FaultKind::CloudSlowJobs => self.sim().set_job_duration(None),
            _ => {}
        }
    }

    fn arm_kill_point(&self) {
        self.sim()
            .faults()
            .kill_after(Match::command("createLoadBalancerRule"), 1, 503);
    }

    /// A public IP associated by a process killed (or whose answer was lost) before its
    /// `createTags` was accepted carries no tag and no rule: `associateIpAddress` takes no name
    /// or tag, so nothing can tell it from a user's address (drivers/cloudstack/README.md,
    /// "Crash consistency"; BENCHMARKS.md, RELIABILITY finding 6).
    fn unowned_is_known_window(&self) -> bool {
        true
    }

    fn kill_point_reached(&self) -> bool {
        self.sim().faults().killed()
    }

    fn clear_faults(&self) {
        self.sim().faults().clear();
        self.sim().set_job_duration(None);
        self.sim().settle();
    }

    fn drain_requests(&self) -> Tally {
        let log = self.sim().requests();
        self.sim().clear_requests();
        Tally::of(log, |r| r.is_mutation().then(|| r.line()))
    }
}

/// The PhoenixNAP API simulator.
pub(super) struct Phoenixnap {
    cloud: Box<dyn SimCloud>,
}

impl Phoenixnap {
    fn sim(&self) -> &PhoenixnapSim {
        concrete(self.cloud.as_ref())
    }
}

/// A tag's value on a PhoenixNAP resource.
fn pnap_tag<'a>(block: &'a Value, name: &str) -> Option<&'a str> {
    block["tags"]
        .as_array()?
        .iter()
        .find(|t| t["name"] == name)
        .and_then(|t| t["value"].as_str())
}

/// The address kube-vip announces for a block: its network address + 2.
fn pnap_vip(cidr: &str) -> Option<String> {
    let (net, _) = cidr.split_once('/')?;
    let addr: std::net::Ipv4Addr = net.parse().ok()?;
    Some(std::net::Ipv4Addr::from(u32::from(addr).checked_add(2)?).to_string())
}

impl SoakCloud for Phoenixnap {
    fn base(&self) -> &dyn SimCloud {
        self.cloud.as_ref()
    }

    fn load_balancers(&self) -> Vec<CloudLb> {
        self.sim()
            .ip_blocks()
            .iter()
            .map(|b| {
                let owner = pnap_tag(b, "serviceNamespace")
                    .zip(pnap_tag(b, "serviceName"))
                    .map(|(ns, name)| format!("{ns}/{name}"));
                CloudLb {
                    id: b["id"].as_str().unwrap_or_default().to_string(),
                    owner,
                    addresses: b["cidr"].as_str().and_then(pnap_vip).into_iter().collect(),
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

    fn inject(&self, kind: FaultKind, rng: &mut SplitMix64) -> Option<String> {
        match kind {
            FaultKind::CloudSlowJobs => {
                let ms = rng.between(500, 3000);
                self.sim().set_assign_after(Duration::from_millis(ms));
                Some(format!("IP block assignment takes {ms} ms"))
            }
            other => inject_common(&self.sim().faults(), other, rng),
        }
    }

    fn end_timed(&self, kind: FaultKind) {
        match kind {
            FaultKind::CloudLatency => self.sim().faults().set_latency(Duration::ZERO),
            FaultKind::CloudSlowJobs => {
                self.sim().set_assign_after(Duration::ZERO);
                self.sim().settle();
            }
            _ => {}
        }
    }

    fn arm_kill_point(&self) {
        self.sim().faults().kill_after(
            Match::path("/ips/v1/ip-blocks").with_method("POST"),
            1,
            503,
        );
    }

    fn kill_point_reached(&self) -> bool {
        self.sim().faults().killed()
    }

    fn clear_faults(&self) {
        self.sim().faults().clear();
        self.sim().set_assign_after(Duration::ZERO);
        self.sim().settle();
    }

    fn drain_requests(&self) -> Tally {
        let log = self.sim().requests();
        self.sim().clear_requests();
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
    fn cloud_keys_follow_the_drivers_names() {
        // `a` + the UID without dashes, cut to 32 characters (drivers/cloudstack/README.md).
        assert_eq!(
            cloudstack_lb_name("844e6108-d5f1-46ee-b61c-4fe80a2bef86"),
            "a844e6108d5f146eeb61c4fe80a2bef8"
        );
        // kube-vip announces the block's network address + 2.
        assert_eq!(pnap_vip("198.18.4.8/29").as_deref(), Some("198.18.4.10"));
        assert_eq!(pnap_vip("not a cidr"), None);
    }
}
