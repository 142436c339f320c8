//! What the chaos soak needs of a cloud beyond [`SimCloud`] ([`SoakCloud`]), and the faults it
//! injects. A leaf under the list: the clouds implement it without naming the list.

use std::time::Duration;

use serde_json::Value;

use crate::fixture::{Faults, Match};
use crate::kit::cloud::{BoxFuture, SimCloud, StartOptions};
use crate::kit::rng::SplitMix64;

/// Starts a cloud's simulator as the soak drives it, with no instances.
pub type SoakStartFn = fn(StartOptions) -> BoxFuture<'static, anyhow::Result<Box<dyn SoakCloud>>>;

/// A fault the cloud's simulator applies (the soak's cloud fault kinds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloudFault {
    /// Cloud API 500/502/503.
    Status5xx,
    /// Cloud API 429 with Retry-After.
    Status429,
    /// Cloud API latency, until ended.
    Latency,
    /// Cloud requests carried out whose answer is lost (the connection breaks after the
    /// headers): did the write happen?
    Reset,
    /// Load balancer writes refused because it is busy.
    Busy,
    /// Slow asynchronous provisioning, until ended.
    SlowJobs,
}

/// One cloud object that stands for a Service's load balancer.
#[derive(Debug, Clone)]
pub struct CloudLb {
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
pub struct MemberSet {
    /// The pool's or rule's ID.
    pub id: String,
    /// The key of the Service its load balancer is named or tagged for ([`SoakCloud::owner`]).
    pub owner: Option<String>,
    /// Its members, each as [`SoakCloud::member_key`] names a node.
    pub members: std::collections::BTreeSet<String>,
}

/// Requests the cloud saw since the last drain.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Requests that change nothing.
    pub reads: u64,
    /// Mutating requests.
    pub writes: u64,
    /// `METHOD path status` of each mutating request.
    pub write_lines: Vec<String>,
}

impl Tally {
    /// Counts `log`: `write_line` gives the line of a mutating request, None for a read.
    pub(crate) fn of<R>(log: Vec<R>, write_line: impl Fn(&R) -> Option<String>) -> Tally {
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

/// A simulated cloud as the soak drives it: the kit's [`SimCloud`] (instances, the driver's
/// setup) plus what the soak needs of one cloud (its load balancers with their owners, its
/// faults, its request log).
pub trait SoakCloud: SimCloud {
    /// The load balancers (or their equivalent: an IP block, a public IP with its rules) of
    /// this cluster.
    fn lb_objects(&self) -> Vec<CloudLb>;
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
    fn inject(&self, kind: CloudFault, rng: &mut SplitMix64) -> Option<String>;
    /// Ends a timed fault (latency, slow provisioning) injected earlier.
    fn end_timed(&self, kind: CloudFault);
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

/// Boxes a started simulator as a [`SoakStartFn`] returns it (a cloud's `start_sim` future).
pub(crate) fn boxed<S: SoakCloud + 'static>(
    started: impl std::future::Future<Output = anyhow::Result<S>> + Send + 'static,
) -> BoxFuture<'static, anyhow::Result<Box<dyn SoakCloud>>> {
    Box::pin(async move { Ok(Box::new(started.await?) as Box<dyn SoakCloud>) })
}

/// Common cloud faults on a simulator with the shared fault rules.
pub(crate) fn inject_common(
    faults: &Faults,
    kind: CloudFault,
    rng: &mut SplitMix64,
) -> Option<String> {
    match kind {
        CloudFault::Status5xx => {
            let status = *rng.pick(&[500u16, 502, 503])?;
            let count = rng.between(1, 4) as usize;
            faults.fail_next(Match::any(), status, count);
            Some(format!("next {count} cloud requests answer {status}"))
        }
        CloudFault::Status429 => Some(throttle_next(faults, rng)),
        CloudFault::Latency => Some(set_latency(faults, rng)),
        CloudFault::Reset => Some(cut_next(faults, rng)),
        _ => None,
    }
}

/// The next one to three cloud requests answer 429 with `Retry-After: 1`.
pub(crate) fn throttle_next(faults: &Faults, rng: &mut SplitMix64) -> String {
    let count = rng.between(1, 3) as usize;
    faults.throttle_next(Match::any(), 1, count);
    format!("next {count} cloud requests answer 429 Retry-After: 1")
}

/// Every cloud request waits 50 to 400 ms, until ended.
pub(crate) fn set_latency(faults: &Faults, rng: &mut SplitMix64) -> String {
    let ms = rng.between(50, 400);
    faults.set_latency(Duration::from_millis(ms));
    format!("cloud latency {ms} ms")
}

/// The next one or two cloud requests are carried out and their answers lost: the driver
/// cannot tell whether its write happened (it must neither create a second copy nor delete).
pub(crate) fn cut_next(faults: &Faults, rng: &mut SplitMix64) -> String {
    let count = rng.between(1, 2) as usize;
    faults.cut_next(Match::any(), count);
    format!("next {count} cloud requests carried out, their connections cut after the headers")
}
