//! Shadow mode (`wasm-ccm run --shadow`): every controller and driver call runs as usual beside
//! the CCM in charge, but nothing is written. Kubernetes writes go through [`crate::context::Kube`]
//! and are recorded here instead of sent (or sent with `dryRun=All` when the apiserver should
//! judge them); the driver's requests that would change the cloud are refused by the runtime
//! before they leave (`wasm_ccm_runtime::http::shadow`) and recorded here from the call's
//! exchanges; events are not published at all.
//!
//! The log keeps one entry per object and kind of write: the would-be patches of an object
//! compose into its would-be state, so a resync repeating a write counts an attempt and reports
//! nothing new, and a different write updates the entry. The verdict is judged when the report
//! is made, against the objects the watch delivers now: a would-be state the object already has
//! is `agreed`; one it still lacks is `pending` for the grace period (the CCM in charge may do
//! the same meanwhile) and `diverged` after.

mod announce;
mod diff;
mod report;

pub(crate) use announce::{PERIOD as ANNOUNCE_PERIOD, announce_divergences};

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Service};
use serde_json::Value;

use crate::informer::Store;

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
    /// Cloud: a later call for the same object and function needed no write.
    resolved: bool,
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
    /// writes, or, when there were none and the call succeeded, that the object needs no cloud
    /// write now (which settles an earlier one as agreed).
    pub(crate) fn record_cloud(
        &self,
        function: &str,
        kind: &'static str,
        object: &str,
        refused: Vec<String>,
        succeeded: bool,
    ) -> Recorded {
        let key = Key {
            kind,
            object: object.to_string(),
            target: "cloud",
            action: function.to_string(),
        };
        if refused.is_empty() {
            if succeeded
                && let Some(entry) = self.lock().get_mut(&key)
                && !entry.resolved
            {
                entry.resolved = true;
                entry.last_changed = jiff::Timestamp::now();
            }
            return Recorded::Repeated;
        }
        let mut refused = refused;
        refused.truncate(MAX_CLOUD_WRITES);
        self.upsert(key, function, |entry, fresh| {
            let changed = fresh || entry.resolved || entry.cloud_writes != refused;
            entry.cloud_writes = refused.clone();
            entry.resolved = false;
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
        let now = jiff::Timestamp::now();
        for (key, entry) in self.lock().iter_mut() {
            if key.target == "cloud"
                && key.kind == kind
                && key.action == function
                && !entry.resolved
                && !planned.contains(key.object.as_str())
            {
                entry.resolved = true;
                entry.last_changed = now;
            }
        }
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
        let now = jiff::Timestamp::now();
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
                let age = (now - entry.last_changed).get_seconds().max(0) as u64;
                let verdict = if settled {
                    Verdict::Agreed
                } else if Duration::from_secs(age) < grace {
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

/// Whether the entry is settled (the object is what the shadow would make it, or the cloud
/// needed no write on a later call), and the fields that still differ.
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
