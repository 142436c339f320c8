//! Shadow mode (`wasm-ccm run --shadow`): every controller and driver call runs as usual beside
//! the CCM in charge, but nothing is written. Kubernetes writes go through [`crate::kube::Kube`]
//! and are recorded here instead of sent (or sent with `dryRun=All` when the apiserver should
//! judge them); the driver's requests that would change the cloud are refused by the runtime
//! before they leave (`wasm_ccm_runtime::http::shadow`) and recorded here from the call's
//! exchanges; events are not published at all.
//!
//! The log keeps one entry per object and kind of write: the would-be patches of an object
//! compose into its would-be state, so a resync repeating a write counts an attempt and reports
//! nothing new, and a different write updates the entry. The verdict is judged when the report
//! is made: a Kubernetes write against the objects the watch delivers now, a cloud write by the
//! last read-only look at the cloud (see below). A would-be state the object already has is
//! `agreed`; one it still lacks is `pending` for the grace period (the CCM in charge may do the
//! same meanwhile) and `diverged` after.
//!
//! The shadow cannot read the cloud's state as a whole, only through its driver, so a cloud
//! write is judged by asking the driver again: a later call about the same object that needs no
//! write (the host refuses writes, so the call is read-only) shows the cloud already is what
//! the shadow wanted. Which function the CCM in charge used to get there does not matter, and
//! neither does which function asks: a call that decides the object's whole cloud state
//! (`WHOLE_STATE`: `load-balancer.ensure`, `load-balancer.delete`) answers for every cloud
//! write about it, any other call for its own function's. So that a pending write is looked at
//! again even when nothing else re-runs its object, `recheck.rs` re-runs the reconcile of each
//! object with a pending cloud write every [`ShadowLog::recheck_period`] until it is agreed or
//! past the grace.

mod announce;
mod diff;
mod recheck;
mod report;

pub(crate) use announce::{PERIOD as ANNOUNCE_PERIOD, announce_divergences};
pub(crate) use recheck::recheck_pending;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Service};
use serde_json::Value;

use crate::machinery::informer::Store;

pub use report::{Difference, FieldChange, ShadowReport, Summary, Verdict};

/// `--shadow` and its settings.
#[derive(Debug, Clone)]
pub struct ShadowOptions {
    /// `--shadow-grace`: how long the CCM in charge has to reach a would-be state by itself
    /// before the difference counts as diverged.
    pub grace: Duration,
    /// `--shadow-validate=server`: send each would-be Kubernetes write with `dryRun=All` and
    /// record the apiserver's verdict (needs the write RBAC).
    pub validate_on_server: bool,
    /// `--shadow-events`: publish one `ShadowDiverged` event per diverged object (needs
    /// `create` on events; off in the read-only role).
    pub events: bool,
}

impl Default for ShadowOptions {
    fn default() -> Self {
        ShadowOptions {
            grace: Duration::from_secs(600),
            validate_on_server: false,
            events: false,
        }
    }
}

/// Objects and kinds of write the log keeps; past it new ones are counted, not kept (a shadow
/// of a cluster that diverges everywhere still has bounded memory).
const MAX_ENTRIES: usize = 20_000;
/// Cloud requests kept per entry.
const MAX_CLOUD_WRITES: usize = 8;

/// Driver functions that decide an object's whole cloud state from Kubernetes (a load balancer
/// made or changed to match the Service and its nodes, or deleted): one that succeeds without a
/// write shows that nothing about the object is left to write, so it settles every pending
/// cloud write about it, whichever function wanted it. Any other function (`update` looks at
/// the members only) settles only the writes it wanted itself.
const WHOLE_STATE: &[&str] = &["load-balancer.ensure", "load-balancer.delete"];

/// Bounds of [`ShadowLog::recheck_period`]: often enough that a CCM in charge slower than the
/// shadow is seen agreeing well inside the grace, seldom enough that a long list of pending
/// Services is not a load on the cloud's read API.
const RECHECK_MIN: Duration = Duration::from_secs(1);
const RECHECK_MAX: Duration = Duration::from_secs(30);
/// The grace is split into this many rechecks (bounded by the above).
const RECHECKS_PER_GRACE: u32 = 10;

/// What the shadow would write to Kubernetes.
pub(crate) enum KubeChange<'a> {
    /// A merge (or, for conditions, strategic) patch of the object or its status.
    Patch { patch: &'a Value, status: bool },
    /// Deleting the object (`uid` is the one the delete was preconditioned on).
    Delete { uid: Option<&'a str> },
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    kind: &'static str,
    object: String,
    target: &'static str,
    action: String,
}

#[derive(Debug, Clone)]
struct Entry {
    controller: String,
    /// The composed would-be patch (`Value::Null` for a delete or a cloud write).
    patch: Value,
    /// A delete's UID precondition.
    uid: Option<String>,
    cloud_writes: Vec<String>,
    /// Cloud: a later look at the cloud found nothing left to write (see the module doc).
    resolved: bool,
    /// Cloud: what settled it, for the report (`a later load-balancer.ensure needed no write`).
    settled: Option<String>,
    apiserver: Option<String>,
    first_seen: jiff::Timestamp,
    last_changed: jiff::Timestamp,
    attempts: u64,
}

/// The would-be writes of a shadow run.
pub struct ShadowLog {
    options: ShadowOptions,
    started: jiff::Timestamp,
    entries: Mutex<BTreeMap<Key, Entry>>,
    dropped: Mutex<u64>,
}

/// Whether a recorded write is new or changed what the shadow wants (counted), or repeats it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Recorded {
    /// New, or different from before.
    Changed,
    /// The same as before.
    Repeated,
    /// The log is full.
    Dropped,
}

impl ShadowLog {
    /// An empty log.
    pub fn new(options: ShadowOptions) -> Self {
        ShadowLog {
            options,
            started: jiff::Timestamp::now(),
            entries: Mutex::new(BTreeMap::new()),
            dropped: Mutex::new(0),
        }
    }

    /// The settings.
    pub fn options(&self) -> &ShadowOptions {
        &self.options
    }

    /// Records a would-be Kubernetes write (`apiserver`: the dry run's verdict, if one ran).
    pub(crate) fn record_kube(
        &self,
        controller: &str,
        kind: &'static str,
        object: &str,
        change: KubeChange<'_>,
        apiserver: Option<String>,
    ) -> Recorded {
        let (action, patch, uid) = match change {
            KubeChange::Patch { patch, status } => {
                let mut patch = patch.clone();
                // The lock is ours, not part of what we would write.
                if let Some(meta) = patch.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove("resourceVersion");
                }
                let action = if status { "patch-status" } else { "patch" };
                (action, patch, None)
            }
            KubeChange::Delete { uid } => ("delete", Value::Null, uid.map(str::to_string)),
        };
        let key = Key {
            kind,
            object: object.to_string(),
            target: "kube",
            action: action.to_string(),
        };
        self.upsert(key, controller, |entry, fresh| {
            let before = (entry.patch.clone(), entry.uid.clone());
            if fresh {
                entry.patch = patch.clone();
            } else {
                diff::compose(&mut entry.patch, &patch);
            }
            entry.uid = uid.clone();
            if apiserver.is_some() {
                entry.apiserver = apiserver.clone();
            }
            fresh || before != (entry.patch.clone(), entry.uid.clone())
        })
    }

    /// Records the outcome of a driver call about `object`: the requests the host refused as
    /// writes, or, when there were none and the call succeeded, that the call found nothing to
    /// write, which settles the earlier cloud writes about the object it answers for (its own
    /// function's; every function's for a [`WHOLE_STATE`] function) as agreed.
    pub(crate) fn record_cloud(
        &self,
        function: &str,
        kind: &'static str,
        object: &str,
        refused: Vec<String>,
        succeeded: bool,
    ) -> Recorded {
        if refused.is_empty() {
            if succeeded {
                let whole = WHOLE_STATE.contains(&function);
                self.settle(
                    |key| {
                        key.kind == kind
                            && key.object == object
                            && (whole || key.action == function)
                    },
                    &format!("a later {function} needed no cloud write"),
                );
            }
            return Recorded::Repeated;
        }
        let key = Key {
            kind,
            object: object.to_string(),
            target: "cloud",
            action: function.to_string(),
        };
        let mut refused = refused;
        refused.truncate(MAX_CLOUD_WRITES);
        self.upsert(key, function, |entry, fresh| {
            let changed = fresh || entry.resolved || entry.cloud_writes != refused;
            entry.cloud_writes = refused.clone();
            entry.resolved = false;
            entry.settled = None;
            changed
        })
    }

    /// Settles the cloud writes of `function` on objects of `kind` that a fresh plan no longer
    /// wants (the route pass: a route the CCM in charge created is no longer planned here).
    pub(crate) fn settle_unplanned(
        &self,
        kind: &str,
        function: &str,
        planned: &std::collections::HashSet<&str>,
    ) {
        self.settle(
            |key| {
                key.kind == kind && key.action == function && !planned.contains(key.object.as_str())
            },
            "a later route pass (routes.list) plans no such write",
        );
    }

    /// Marks the unsettled cloud entries `matches` picks as agreed, saying why.
    fn settle(&self, matches: impl Fn(&Key) -> bool, why: &str) {
        let now = jiff::Timestamp::now();
        for (key, entry) in self.lock().iter_mut() {
            if key.target == "cloud" && !entry.resolved && matches(key) {
                entry.resolved = true;
                entry.settled = Some(why.to_string());
                entry.last_changed = now;
            }
        }
    }

    /// How often `recheck_pending` re-runs the objects with a pending cloud write: a tenth of the
    /// grace, but no longer than 30 s and no shorter than a second.
    pub fn recheck_period(&self) -> Duration {
        (self.options.grace / RECHECKS_PER_GRACE).clamp(RECHECK_MIN, RECHECK_MAX)
    }

    /// The objects of `kind` with a cloud write that is still pending now: neither settled nor
    /// past the grace. Past the grace the verdict is `diverged` and rechecks stop (the
    /// controllers' own retries may still find agreement later).
    pub(crate) fn due_for_recheck(&self, kind: &str) -> Vec<String> {
        self.due_for_recheck_at(kind, jiff::Timestamp::now())
    }

    fn due_for_recheck_at(&self, kind: &str, now: jiff::Timestamp) -> Vec<String> {
        let mut due: Vec<String> = self
            .lock()
            .iter()
            .filter(|(key, entry)| {
                key.target == "cloud"
                    && key.kind == kind
                    && !entry.resolved
                    && within(self.options.grace, entry.last_changed, now)
            })
            .map(|(key, _)| key.object.clone())
            .collect();
        due.dedup();
        due
    }

    fn upsert(
        &self,
        key: Key,
        controller: &str,
        update: impl FnOnce(&mut Entry, bool) -> bool,
    ) -> Recorded {
        let now = jiff::Timestamp::now();
        let mut entries = self.lock();
        let fresh = !entries.contains_key(&key);
        if fresh && entries.len() >= MAX_ENTRIES {
            drop(entries);
            *self.dropped.lock().unwrap_or_else(|p| p.into_inner()) += 1;
            return Recorded::Dropped;
        }
        let entry = entries.entry(key).or_insert_with(|| Entry {
            controller: controller.to_string(),
            patch: Value::Null,
            uid: None,
            cloud_writes: Vec::new(),
            resolved: false,
            settled: None,
            apiserver: None,
            first_seen: now,
            last_changed: now,
            attempts: 0,
        });
        entry.attempts += 1;
        if update(entry, fresh) {
            entry.last_changed = now;
            Recorded::Changed
        } else {
            Recorded::Repeated
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Key, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The report now: every entry judged against the objects in `nodes` and `services`.
    pub(crate) fn report(
        &self,
        driver: &str,
        nodes: &Store<Node>,
        services: &Store<Service>,
    ) -> ShadowReport {
        self.report_at(driver, nodes, services, jiff::Timestamp::now())
    }

    /// [`ShadowLog::report`] as it would be at `now` (tests look past the grace without
    /// waiting for it).
    fn report_at(
        &self,
        driver: &str,
        nodes: &Store<Node>,
        services: &Store<Service>,
        now: jiff::Timestamp,
    ) -> ShadowReport {
        let grace = self.options.grace;
        let entries: Vec<(Key, Entry)> = self
            .lock()
            .iter()
            .map(|(k, e)| (k.clone(), e.clone()))
            .collect();
        let mut differences: Vec<Difference> = entries
            .into_iter()
            .map(|(key, entry)| {
                let current = current_object(key.kind, &key.object, nodes, services);
                let (settled, changes) = judge(&key, &entry, current.as_ref());
                let verdict = if settled {
                    Verdict::Agreed
                } else if within(grace, entry.last_changed, now) {
                    Verdict::Pending
                } else {
                    Verdict::Diverged
                };
                Difference {
                    kind: key.kind.to_string(),
                    object: key.object,
                    controller: entry.controller,
                    target: key.target.to_string(),
                    action: key.action,
                    verdict,
                    changes,
                    cloud_writes: entry.cloud_writes,
                    settled: entry.settled.filter(|_| settled),
                    apiserver: entry.apiserver,
                    first_seen: entry.first_seen.to_string(),
                    last_changed: entry.last_changed.to_string(),
                    attempts: entry.attempts,
                }
            })
            .collect();
        // Diverged first: that is what an operator reads the report for.
        differences.sort_by(|a, b| {
            b.verdict
                .cmp(&a.verdict)
                .then_with(|| (&a.kind, &a.object).cmp(&(&b.kind, &b.object)))
        });
        let mut summary = Summary::default();
        for d in &differences {
            match d.verdict {
                Verdict::Pending => summary.pending += 1,
                Verdict::Agreed => summary.agreed += 1,
                Verdict::Diverged => summary.diverged += 1,
            }
        }
        ShadowReport {
            driver: driver.to_string(),
            grace_seconds: grace.as_secs(),
            started: self.started.to_string(),
            generated: now.to_string(),
            summary,
            dropped: *self.dropped.lock().unwrap_or_else(|p| p.into_inner()),
            differences,
        }
    }
}

/// Whether `since` is less than `grace` before `now` (a clock that went back counts as no time).
fn within(grace: Duration, since: jiff::Timestamp, now: jiff::Timestamp) -> bool {
    let age = (now - since).get_seconds().max(0) as u64;
    Duration::from_secs(age) < grace
}

/// The object as the watch shows it now, as JSON.
fn current_object(
    kind: &str,
    object: &str,
    nodes: &Store<Node>,
    services: &Store<Service>,
) -> Option<Value> {
    match kind {
        "Node" => nodes
            .get(object)
            .and_then(|n| serde_json::to_value(&*n).ok()),
        "Service" => services
            .get(object)
            .and_then(|s| serde_json::to_value(&*s).ok()),
        _ => None,
    }
}

/// Whether the entry is settled (the object is what the shadow would make it, or a later call
/// found nothing left to write in the cloud), and the fields that still differ.
fn judge(key: &Key, entry: &Entry, current: Option<&Value>) -> (bool, Vec<FieldChange>) {
    match (key.target, key.action.as_str()) {
        ("cloud", _) => (entry.resolved, Vec::new()),
        (_, "delete") => {
            let uid = current.and_then(|o| o.pointer("/metadata/uid").and_then(Value::as_str));
            // Gone, or replaced by a new object of the same name: the deletion happened.
            let gone = current.is_none() || (entry.uid.is_some() && uid != entry.uid.as_deref());
            (gone, Vec::new())
        }
        _ => match current {
            // Gone: there is nothing left to write.
            None => (true, Vec::new()),
            Some(object) => {
                let changes = diff::unsatisfied(&entry.patch, object);
                (changes.is_empty(), changes)
            }
        },
    }
}

#[cfg(test)]
mod tests;
