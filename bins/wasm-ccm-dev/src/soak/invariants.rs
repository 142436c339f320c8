//! The invariants, checked at every step (those that must hold at any moment, or within a
//! converge window) and at quiescence (those that hold once the faults and the workload stop).
//! None depends on timing: each compares what the workload did (the model), what the apiserver
//! holds and what the cloud holds.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;
use wasm_ccm_sim::kube::KubeSim;

use super::cloud::{CloudLb, SoakCloud};
use super::workload::{FINALIZER, Model, NAMESPACE, Shape, UNINITIALIZED};

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
        }
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
        for r in records.iter().filter(|r| r.seq > self.last_seq) {
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
        let lbs = cloud.load_balancers();
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
    let lbs = cloud.load_balancers();
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
