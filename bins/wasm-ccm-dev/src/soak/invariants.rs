//! The invariants, checked at every step (those that must hold at any moment, or within a
//! converge window) and at quiescence (those that hold once the faults and the workload stop).
//! None depends on timing: each compares what the workload did (the model), what the apiserver
//! holds and what the cloud holds.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;
use wasm_ccm_sim::kube::KubeSim;

use super::workload::{EXCLUDE_LB_LABEL, FINALIZER, Model, NAMESPACE, Shape, UNINITIALIZED};
use wasm_ccm_sim::kit::soak::{CloudLb, SoakCloud};

/// The taint that takes a node out of the load balancers (the controllers'
/// `service::rules::TO_BE_DELETED_TAINT`).
const TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";
/// The bearer token prefix of the per-process kubeconfigs: `soak-<slot>-<incarnation>`.
pub(crate) const TOKEN_PREFIX: &str = "soak-";
/// Injected apiserver latency from which a request counts as slowed to seconds.
const SLOW_MS: u64 = 1000;

/// A broken invariant.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Violation {
    /// The step at which it was seen (after the last step: at quiescence).
    pub step: u64,
    /// Which invariant.
    pub invariant: &'static str,
    /// What was seen.
    pub detail: String,
}

/// The invariants that must hold at every step, with the little state they need across steps.
pub(crate) struct Continuous {
    /// When two cloud objects were first seen for one Service, by Service UID.
    duplicates_since: HashMap<String, Instant>,
    /// How long two objects for one Service are tolerated.
    window: Duration,
    /// The last apiserver request looked at.
    last_seq: u64,
    /// What was already reported (each problem once).
    reported: BTreeSet<String>,
    /// Every controller write to the apiserver (leases and events left out) by arrival:
    /// (writer incarnation, `METHOD path status`).
    writes: BTreeMap<u64, (String, String)>,
    /// Cloud partitions: (first arrival during it, first arrival after it or None while on,
    /// when it started).
    partitions: Vec<(u64, Option<u64>, Instant)>,
    /// Node DELETE requests seen during a partition (each checked).
    pub partition_node_deletes: u64,
    /// apiserver requests that waited an injected latency of a second or more.
    pub slowed_requests: u64,
    /// Longest injected latency a request waited, ms.
    pub slowest_ms: u64,
    /// What the log shows of the Lease: renewals through latency, each slot's renewTime.
    pub lease: super::lease::LeaseEvidence,
}

/// The writer incarnation of a request (`a#2`), from its per-process bearer token.
pub(super) fn writer(authorization: Option<&str>) -> Option<String> {
    let token = authorization?
        .strip_prefix("Bearer ")?
        .strip_prefix(TOKEN_PREFIX)?;
    let (slot, incarnation) = token.split_once('-')?;
    Some(format!("{slot}#{incarnation}"))
}

/// Whether a logged request is a controller write the leader alone may make: a mutation of
/// anything but the lease (every candidate writes it) and events (a recorder's flush is not a
/// decision).
fn leader_write(r: &wasm_ccm_sim::kube::RequestRecord) -> bool {
    !matches!(r.method.as_str(), "GET" | "HEAD")
        && r.resource
            .as_deref()
            .is_some_and(|res| !res.starts_with("leases") && !res.starts_with("events"))
}

/// Whether a Node is a load balancer backend by the controllers' rules
/// (`service::rules::is_backend`, upstream's stable node set): not being deleted, not excluded
/// by the label (its value read as Go's `strconv.ParseBool`, an unparsable one excludes), not
/// tainted `ToBeDeletedByClusterAutoscaler`. Readiness is deliberately not a rule (KEP-3458).
/// A Node without a provider ID cannot be a member (drivers leave it out with a warning).
pub(crate) fn eligible_backend(node: &Value) -> bool {
    let deleting = node["metadata"]["deletionTimestamp"].is_string();
    let included = match node["metadata"]["labels"][EXCLUDE_LB_LABEL].as_str() {
        None => true,
        Some(v) => matches!(v, "0" | "f" | "F" | "false" | "FALSE" | "False"),
    };
    let doomed = node["spec"]["taints"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["key"] == TO_BE_DELETED_TAINT));
    let initialised = node["spec"]["providerID"].is_string();
    !deleting && included && !doomed && initialised
}

fn ingress(svc: &Value) -> Vec<String> {
    let mut ips: Vec<String> = svc["status"]["loadBalancer"]["ingress"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["ip"].as_str().or(i["hostname"].as_str()))
        .map(str::to_string)
        .collect();
    ips.sort();
    ips
}

fn has_finalizer(svc: &Value) -> bool {
    svc["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == FINALIZER))
}

/// Cloud objects by the key of the Service they are named or tagged for.
fn lbs_by_owner(lbs: &[CloudLb]) -> BTreeMap<String, Vec<&CloudLb>> {
    let mut map: BTreeMap<String, Vec<&CloudLb>> = BTreeMap::new();
    for lb in lbs {
        if let Some(owner) = &lb.owner {
            map.entry(owner.clone()).or_default().push(lb);
        }
    }
    map
}

impl Continuous {
    /// Checks with `window` as the converge window for duplicates.
    pub(crate) fn new(window: Duration) -> Self {
        Continuous {
            duplicates_since: HashMap::new(),
            window,
            last_seq: 0,
            reported: BTreeSet::new(),
            writes: BTreeMap::new(),
            partitions: Vec::new(),
            partition_node_deletes: 0,
            slowed_requests: 0,
            slowest_ms: 0,
            lease: super::lease::LeaseEvidence::default(),
        }
    }

    /// A cloud partition starts: apiserver requests arriving from `arrival` on are during it.
    pub(crate) fn partition_started(&mut self, arrival: u64) {
        self.partition_ended(arrival);
        self.partitions.push((arrival, None, Instant::now()));
    }

    /// The cloud partition ends: requests arriving from `arrival` on are after it.
    pub(crate) fn partition_ended(&mut self, arrival: u64) {
        if let Some(p) = self.partitions.last_mut().filter(|p| p.1.is_none()) {
            p.1 = Some(arrival);
        }
    }

    /// Distinct writer incarnations and hand-overs between them (runs of writes by one writer,
    /// minus one) in the apiserver's log so far.
    pub(crate) fn writers(&self) -> (usize, usize) {
        let distinct: BTreeSet<&str> = self.writes.values().map(|(w, _)| w.as_str()).collect();
        let mut runs: usize = 0;
        let mut last: Option<&str> = None;
        for (w, _) in self.writes.values() {
            if last != Some(w.as_str()) {
                runs += 1;
                last = Some(w);
            }
        }
        (distinct.len(), runs.saturating_sub(1))
    }

    /// No two leaders writing at once: by arrival order, each writer's writes form one run
    /// (a process that loses the lease exits, and a killed one never comes back, so an
    /// incarnation leads at most once); a writer that writes again after another one wrote was
    /// writing while that one led. Returns (writer, its earlier write, the other's write in
    /// between, its later write).
    fn interleaved(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut finished: BTreeMap<&str, (u64, &str)> = BTreeMap::new();
        let mut current: Option<(&str, u64, &str)> = None;
        for (arrival, (w, line)) in &self.writes {
            match current {
                Some((cw, _, _)) if cw == w => {}
                _ => {
                    if let Some((cw, ca, cl)) = current {
                        finished.insert(cw, (ca, cl));
                    }
                    if let Some((ea, el)) = finished.get(w.as_str()) {
                        let (ow, oa, ol) = current.unwrap_or(("?", 0, "?"));
                        out.push((
                            w.clone(),
                            format!(
                                "{w} wrote (arrival {ea}: {el}), then {ow} wrote (arrival {oa}: {ol}), then {w} again (arrival {arrival}: {line})"
                            ),
                        ));
                    }
                }
            }
            current = Some((w, *arrival, line));
        }
        out
    }

    fn report(
        &mut self,
        out: &mut Vec<Violation>,
        step: u64,
        invariant: &'static str,
        key: String,
        detail: String,
    ) {
        if self.reported.insert(format!("{invariant}/{key}")) {
            out.push(Violation {
                step,
                invariant,
                detail,
            });
        }
    }

    /// Everything that must hold now.
    pub(crate) fn check(
        &mut self,
        step: u64,
        model: &Model,
        kube: &KubeSim,
        cloud: &dyn SoakCloud,
    ) -> Vec<Violation> {
        let mut out = Vec::new();

        // No write to an object the driver does not own: a Service that was never of the CCM's
        // class and type. Every logged request comes from the controllers (the workload uses
        // the simulator's Rust API), so any write to such a Service is theirs.
        let never_ours: BTreeSet<&str> = model
            .services
            .iter()
            .filter(|(_, s)| !s.ever_ours)
            .map(|(k, _)| k.as_str())
            .collect();
        let records = kube.requests();
        let mut foreign = Vec::new();
        let mut deletes_during_partition = Vec::new();
        let now = super::lease::unix_now();
        for r in records.iter().filter(|r| r.seq > self.last_seq) {
            self.lease
                .record(r, writer(r.authorization.as_deref()).as_deref(), now);
            if r.delay_ms >= SLOW_MS {
                self.slowed_requests += 1;
            }
            self.slowest_ms = self.slowest_ms.max(r.delay_ms);
            if leader_write(r)
                && let Some(w) = writer(r.authorization.as_deref())
            {
                self.writes.insert(
                    r.arrival,
                    (w, format!("{} {} {}", r.method, r.path, r.status)),
                );
            }
            if r.method == "DELETE"
                && r.resource.as_deref() == Some("nodes")
                && r.subresource.is_none()
                && let Some((_, _, started)) = self
                    .partitions
                    .iter()
                    .find(|(from, to, _)| r.arrival >= *from && to.is_none_or(|t| r.arrival < t))
            {
                deletes_during_partition.push((
                    r.name.clone().unwrap_or_default(),
                    *started,
                    format!("{} {} → {}", r.method, r.path, r.status),
                ));
            }
            let writes = !matches!(r.method.as_str(), "GET" | "HEAD");
            if writes
                && r.resource.as_deref() == Some("services")
                && r.namespace.as_deref() == Some(NAMESPACE)
                && r.name.as_deref().is_some_and(|n| never_ours.contains(n))
            {
                foreign.push((
                    r.name.clone().unwrap_or_default(),
                    format!("{} {} → {}", r.method, r.path, r.status),
                ));
            }
        }
        if let Some(last) = records.last() {
            self.last_seq = last.seq;
        }
        for (name, line) in foreign {
            self.report(
                &mut out,
                step,
                "no write to an object the driver does not own",
                format!("{name}/{line}"),
                format!("Service {name} was never of the CCM's class, yet: {line}"),
            );
        }

        // No two leaders writing at once.
        for (w, detail) in self.interleaved() {
            self.report(&mut out, step, "no two leaders write at once", w, detail);
        }

        // No Node deleted during a cloud partition: the cloud cannot be asked whether an
        // instance exists, so no controller may conclude that it does not. A Node whose
        // instance the workload deleted before the partition may have been found gone before it.
        for (name, started, line) in deletes_during_partition {
            self.partition_node_deletes += 1;
            let known_gone = model
                .nodes
                .get(&name)
                .and_then(|n| n.instance_deleted_at)
                .is_some_and(|at| at < started);
            if !known_gone {
                self.report(
                    &mut out,
                    step,
                    "no Node is deleted during a cloud partition",
                    format!("{name}/{line}"),
                    format!("Node {name} deleted while the cloud was unreachable: {line}"),
                );
            }
        }

        // No node deleted while its instance exists: only the workload deletes instances, so
        // the model knows whether one exists.
        let present: BTreeSet<String> = kube
            .list("nodes")
            .iter()
            .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        for (name, node) in &model.nodes {
            if !node.node_deleted && !node.instance_deleted && !present.contains(name) {
                self.report(
                    &mut out,
                    step,
                    "no node is deleted while its instance exists",
                    name.clone(),
                    format!(
                        "Node {name} was deleted, but its instance {} exists{}",
                        node.instance,
                        if node.stopped { " (powered off)" } else { "" }
                    ),
                );
            }
        }

        // At most one cloud object per Service, beyond a converge window.
        let lbs = cloud.lb_objects();
        let now = Instant::now();
        let by_service = lbs_by_owner(&lbs);
        self.duplicates_since
            .retain(|uid, _| by_service.get(uid).is_some_and(|l| l.len() > 1));
        for (uid, objects) in by_service.iter().filter(|(_, l)| l.len() > 1) {
            let since = *self.duplicates_since.entry(uid.clone()).or_insert(now);
            if now.duration_since(since) > self.window {
                let ids: Vec<&str> = objects.iter().map(|l| l.id.as_str()).collect();
                self.report(
                    &mut out,
                    step,
                    "at most one cloud load balancer per Service",
                    uid.clone(),
                    format!(
                        "the Service named or tagged {uid} has {} cloud load balancers for more than {:?}: {ids:?}",
                        objects.len(),
                        self.window
                    ),
                );
            }
        }
        out
    }
}

/// What is not yet as it must be at quiescence; empty once converged. With
/// `tolerate_known_window`, objects named or tagged for no Service are left out where the cloud
/// says that is its driver's documented window ([`SoakCloud::unowned_is_known_window`]).
pub(crate) fn unconverged(
    model: &Model,
    kube: &KubeSim,
    cloud: &dyn SoakCloud,
    tolerate_known_window: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    let lbs = cloud.lb_objects();
    let by_service = lbs_by_owner(&lbs);
    let mut ours = BTreeSet::new();
    let mut owners = BTreeMap::new();
    for (name, state) in &model.services {
        let svc = kube.get("services", Some(NAMESPACE), name);
        if state.deleted {
            if svc.is_some() {
                out.push(format!(
                    "Service {name} was deleted but is still there (finalizer)"
                ));
            }
            continue;
        }
        let Some(svc) = svc else {
            out.push(format!("Service {name} is missing"));
            continue;
        };
        let uid = svc["metadata"]["uid"].as_str().unwrap_or_default();
        let key = cloud.owner(NAMESPACE, name, uid);
        owners.insert(key.clone(), name.clone());
        let objects = by_service.get(&key).map_or(&[][..], Vec::as_slice);
        if state.shape == Shape::Ours {
            ours.insert(key.clone());
            match objects {
                [lb] => {
                    let shown = ingress(&svc);
                    if shown != lb.addresses {
                        out.push(format!(
                            "Service {name}: ingress {shown:?}, but its load balancer {} has {:?}",
                            lb.id, lb.addresses
                        ));
                    }
                    if !has_finalizer(&svc) {
                        out.push(format!("Service {name} has no cleanup finalizer"));
                    }
                }
                _ => out.push(format!(
                    "Service {name} ({key}) has {} cloud load balancers, not 1",
                    objects.len()
                )),
            }
        } else {
            if !objects.is_empty() {
                out.push(format!(
                    "Service {name} ({:?}) still has {} cloud load balancer(s)",
                    state.shape,
                    objects.len()
                ));
            }
            if has_finalizer(&svc) {
                out.push(format!(
                    "Service {name} ({:?}) still has the cleanup finalizer",
                    state.shape
                ));
            }
            if !ingress(&svc).is_empty() {
                out.push(format!(
                    "Service {name} ({:?}) still shows an ingress",
                    state.shape
                ));
            }
        }
    }
    for lb in &lbs {
        match &lb.owner {
            Some(key) if ours.contains(key) => {}
            Some(key) => {
                let whose = owners.get(key).map_or_else(
                    || {
                        // A deleted Service's key is known from the model only (UID-based
                        // keys need the UID the workload recorded).
                        model
                            .services
                            .iter()
                            .find(|(name, s)| cloud.owner(NAMESPACE, name, &s.uid) == *key)
                            .map_or("no Service of the workload".to_string(), |(name, s)| {
                                format!(
                                    "{name}, {:?}{}",
                                    s.shape,
                                    if s.deleted { ", deleted" } else { "" }
                                )
                            })
                    },
                    |name| format!("{name}, which wants none"),
                );
                out.push(format!(
                    "cloud load balancer {} is named or tagged for {key} ({whose}): a leak",
                    lb.id
                ));
            }
            None if tolerate_known_window && cloud.unowned_is_known_window() => {}
            None => out.push(format!(
                "cloud object {} of this cluster is named or tagged for no Service: a leak",
                lb.id
            )),
        }
    }
    // Every load balancer's members are the eligible nodes, by the controllers' rules.
    if let Some(sets) = cloud.member_sets() {
        let eligible: BTreeSet<String> = kube
            .list("nodes")
            .iter()
            .filter(|n| eligible_backend(n))
            .filter_map(|n| {
                let name = n["metadata"]["name"].as_str()?;
                let instance = model.nodes.get(name).map_or("", |s| s.instance.as_str());
                Some(cloud.member_key(n, instance))
            })
            .collect();
        for set in &sets {
            let Some(owner) = set.owner.as_deref().filter(|o| ours.contains(*o)) else {
                continue;
            };
            if set.members != eligible {
                let missing: Vec<&String> = eligible.difference(&set.members).collect();
                let extra: Vec<&String> = set.members.difference(&eligible).collect();
                out.push(format!(
                    "load balancer of {} ({owner}): member set {} lacks eligible nodes {missing:?} and has ineligible members {extra:?}",
                    owners.get(owner).map_or("?", String::as_str),
                    set.id
                ));
            }
        }
    }
    for (name, node) in &model.nodes {
        let obj = kube.get("nodes", None, name);
        if node.instance_deleted {
            if obj.is_some() && !node.node_deleted {
                out.push(format!(
                    "Node {name} still exists though its instance was deleted"
                ));
            }
            continue;
        }
        if node.node_deleted {
            continue;
        }
        match obj {
            None => out.push(format!("Node {name} is missing")),
            Some(n) => {
                let tainted = n["spec"]["taints"]
                    .as_array()
                    .is_some_and(|t| t.iter().any(|t| t["key"] == UNINITIALIZED));
                if tainted || !n["spec"]["providerID"].is_string() {
                    out.push(format!("Node {name} is not initialised"));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn writers_come_from_the_per_process_tokens() {
        assert_eq!(writer(Some("Bearer soak-a-2")).as_deref(), Some("a#2"));
        assert_eq!(writer(Some("Bearer sim")), None);
        assert_eq!(writer(None), None);
    }

    #[test]
    fn a_writer_writing_again_after_another_is_two_leaders() {
        let mut c = Continuous::new(Duration::from_secs(1));
        for (arrival, w) in [(1, "a#1"), (2, "a#1"), (5, "b#1"), (9, "b#1")] {
            c.writes
                .insert(arrival, (w.into(), format!("PATCH /x/{arrival}")));
        }
        assert!(c.interleaved().is_empty());
        assert_eq!(c.writers(), (2, 1));
        // a#1's write arrived after b#1 had written: a deposed leader still writing.
        c.writes.insert(7, ("a#1".into(), "PATCH /x/7".into()));
        // a b a b: both wrote while the other led, each reported once.
        let found = c.interleaved();
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].0, "a#1");
        assert!(found[0].1.contains("arrival 7"), "{found:?}");
        assert_eq!(found[1].0, "b#1");
    }

    #[test]
    fn eligible_backends_follow_the_controllers_rules() {
        let node = |labels: Value, taints: Value, deleting: bool| {
            let mut n = json!({
                "metadata": {"name": "n", "labels": labels},
                "spec": {"providerID": "x://1", "taints": taints},
            });
            if deleting {
                n["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            }
            n
        };
        assert!(eligible_backend(&node(json!({}), json!([]), false)));
        assert!(eligible_backend(&node(
            json!({EXCLUDE_LB_LABEL: "false"}),
            json!([]),
            false
        )));
        for v in ["true", "1", "", "yes"] {
            assert!(
                !eligible_backend(&node(json!({EXCLUDE_LB_LABEL: v}), json!([]), false)),
                "{v:?}"
            );
        }
        assert!(!eligible_backend(&node(
            json!({}),
            json!([{"key": TO_BE_DELETED_TAINT, "effect": "NoSchedule"}]),
            false
        )));
        assert!(!eligible_backend(&node(json!({}), json!([]), true)));
        let mut uninitialised = node(json!({}), json!([]), false);
        uninitialised["spec"]
            .as_object_mut()
            .map(|s| s.remove("providerID"));
        assert!(!eligible_backend(&uninitialised));
    }
}
