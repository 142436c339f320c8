//! The object store: one ordered map per resource, a global resourceVersion, a bounded history of
//! changes for watches that resume, and a broadcast channel that feeds open watches.
//!
//! Every write goes through [`Store::commit`]/[`Store::commit_delete`] under one write lock, so
//! resourceVersions are strictly increasing in history and broadcast order, and a watch that
//! subscribes under the read lock sees exactly the changes after its snapshot.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use axum::body::Bytes;
use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};

use super::allocated::Allocated;
use super::error::ApiError;
use super::events;
use super::meta::{self, finalizers, is_terminating, meta_mut, meta_str};
use super::namespaces;
use super::node_ports::PortRange;
use super::nodes;
pub(crate) use super::obj_key::ObjKey;
use super::patch::{self, PatchError, PatchKind};
use super::resources::{
    CONFIGMAPS, EVENTS, EVENTS_V1, LEASES, NAMESPACES, NODES, RESOURCES, ResourceType, SERVICES,
};
use super::selector::Filter;
use super::services;
use super::validation::{self, Errors};

/// Default number of changes kept for watches resuming from a resourceVersion; older ones get
/// 410 Gone. An event write is two changes (one per Event API view) with one resourceVersion.
pub const HISTORY_LIMIT: usize = 10_000;
/// Default number of changes buffered per watch before it counts as lagging (and is ended with
/// 410).
pub const WATCH_BUFFER: usize = 16_384;
/// Namespaces that exist from the start; the first three cannot be deleted.
pub const DEFAULT_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeType {
    Added,
    Modified,
    Deleted,
}

impl ChangeType {
    /// The watch event `type`.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            ChangeType::Added => "ADDED",
            ChangeType::Modified => "MODIFIED",
            ChangeType::Deleted => "DELETED",
        }
    }
}

/// One committed write.
#[derive(Debug)]
pub(crate) struct Change {
    pub rv: u64,
    pub resource: usize,
    pub kind: ChangeType,
    /// The object after the change (for deletions: the last state, with the deletion's rv).
    pub object: Arc<Value>,
    /// The object before the change, so selector watches can tell "stopped matching".
    pub previous: Option<Arc<Value>>,
    /// The serialised watch line for `kind`, shared by every watch that sends it unchanged.
    line: OnceLock<Bytes>,
}

impl Change {
    /// A change not yet serialised.
    pub(super) fn new(
        rv: u64,
        resource: usize,
        kind: ChangeType,
        object: Arc<Value>,
        previous: Option<Arc<Value>>,
    ) -> Change {
        Change {
            rv,
            resource,
            kind,
            object,
            previous,
            line: OnceLock::new(),
        }
    }

    /// The watch line (`{"type":..,"object":..}\n`) for this change as `kind`.
    pub(super) fn line(&self, kind: ChangeType) -> Bytes {
        if kind == self.kind {
            self.line
                .get_or_init(|| watch_line(kind.as_str(), &self.object))
                .clone()
        } else {
            watch_line(kind.as_str(), &self.object)
        }
    }
}

/// Serialises one watch event line.
pub(crate) fn watch_line(kind: &str, object: &Value) -> Bytes {
    #[derive(serde::Serialize)]
    struct Line<'a> {
        #[serde(rename = "type")]
        kind: &'a str,
        object: &'a Value,
    }
    let mut buf = serde_json::to_vec(&Line { kind, object }).unwrap_or_default();
    buf.push(b'\n');
    Bytes::from(buf)
}

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The main resource: `status` is kept as stored (for resources with a status subresource).
    Main,
    /// The `status` subresource: `spec` (every field but metadata and status) is kept as stored.
    Status,
    /// Library writes: everything may change.
    Whole,
}

/// DeleteOptions preconditions.
#[derive(Debug, Clone, Default)]
pub(crate) struct Preconditions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

/// One page of a list.
pub(crate) struct ListPage {
    pub resource_version: u64,
    pub items: Vec<Arc<Value>>,
    pub continue_token: Option<String>,
    pub remaining: Option<usize>,
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WatchFrom {
    /// `resourceVersion` unset or "0": synthetic ADDED for the current state, then changes.
    Current,
    /// Changes after this resourceVersion.
    After(u64),
}

/// What a new watch needs: its starting events and its subscription, taken atomically.
pub(crate) struct WatchStart {
    /// Objects to announce as ADDED (for [`WatchFrom::Current`] or initial events).
    pub initial: Vec<Arc<Value>>,
    /// History to replay (for [`WatchFrom::After`]).
    pub replay: Vec<Arc<Change>>,
    pub receiver: broadcast::Receiver<Arc<Change>>,
    /// The resourceVersion of the snapshot; broadcast changes are all newer.
    pub resource_version: u64,
    /// Set when the requested resourceVersion is older than the history: (requested, oldest).
    pub expired: Option<(u64, u64)>,
}

struct State {
    rv: u64,
    objects: Vec<BTreeMap<ObjKey, Arc<Value>>>,
    history: VecDeque<Arc<Change>>,
    /// Every change with rv > floor is in `history`.
    floor: u64,
    /// The write under way is a dry run (`dryRun=All`): validated and answered, not committed.
    /// Set by every public write method under the write lock, so it never leaks between writes.
    dry_run: bool,
    /// The namespace controller's pass ([`Store::sync_namespace`]) is under way: the deletes it
    /// makes do not start another.
    syncing_namespace: bool,
    /// The cluster IPs and node ports the stored Services hold, kept with every Service write.
    allocated: Allocated,
}

/// The store shared by the HTTP server and the library API.
pub(crate) struct Store {
    state: RwLock<State>,
    changes: broadcast::Sender<Arc<Change>>,
    /// Bumped to end every open watch (drop_watches, shutdown).
    watch_epoch: watch::Sender<u64>,
    history_limit: usize,
    /// The NodePort range Services' node ports come from (`--service-node-port-range`).
    node_ports: PortRange,
}

impl Store {
    /// A store holding the default namespaces, keeping `history_limit` changes for resuming
    /// watches and buffering `watch_buffer` changes per watch (both at least 1).
    pub(super) fn new(history_limit: usize, watch_buffer: usize) -> Store {
        let (changes, _) = broadcast::channel(watch_buffer.max(1));
        let store = Store {
            state: RwLock::new(State {
                rv: 0,
                objects: RESOURCES.iter().map(|_| BTreeMap::new()).collect(),
                history: VecDeque::new(),
                floor: 0,
                dry_run: false,
                syncing_namespace: false,
                allocated: Allocated::default(),
            }),
            changes,
            watch_epoch: watch::channel(0).0,
            history_limit: history_limit.max(1),
            node_ports: PortRange::DEFAULT,
        };
        for ns in DEFAULT_NAMESPACES {
            let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            // Cannot fail: a valid name in an empty store.
            let _ = store.create(&RESOURCES[NAMESPACES], None, obj, false);
        }
        store
    }

    /// The store with Services' node ports taken from `range` (default [`PortRange::DEFAULT`]).
    pub(super) fn with_node_ports(mut self, range: PortRange) -> Store {
        self.node_ports = range;
        self
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        // A panic while holding the lock cannot leave a half-written map (writes are single
        // inserts), so a poisoned lock is still consistent.
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current global resourceVersion.
    pub(super) fn resource_version(&self) -> u64 {
        self.read().rv
    }

    /// A receiver that changes when every watch must end.
    pub(super) fn watch_epoch(&self) -> watch::Receiver<u64> {
        self.watch_epoch.subscribe()
    }

    /// Watch streams open now (each holds a receiver of the epoch until its body ends).
    pub(super) fn open_watches(&self) -> usize {
        self.watch_epoch.receiver_count()
    }

    /// Ends every open watch stream.
    pub(super) fn drop_watches(&self) {
        self.watch_epoch.send_modify(|e| *e += 1);
    }

    /// Forgets the history: a watch from any resourceVersion before now gets 410 Gone.
    pub(super) fn compact(&self) {
        let mut st = self.write();
        st.history.clear();
        st.floor = st.rv;
    }

    /// One object.
    pub(super) fn get(&self, rt: &ResourceType, key: &ObjKey) -> Result<Arc<Value>, ApiError> {
        self.read().objects[rt.index]
            .get(key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(rt, &key.name))
    }

    /// The first page of the objects `filter` selects now, in key order.
    pub(super) fn list(
        &self,
        rt: &ResourceType,
        filter: &Filter,
        limit: Option<usize>,
    ) -> ListPage {
        let st = self.read();
        page(rt, &st.objects[rt.index], st.rv, filter, limit, None)
    }

    /// A later page of a list (`continue`), read from the first page's snapshot as the
    /// apiserver's etcd3 `GetList` reads it (`withRev = continueRV`,
    /// k8s.io/apiserver pkg/storage/etcd3/store.go): objects created, changed or deleted since
    /// the first page do not show. A snapshot older than the kept history is the 410 of
    /// `handleCompactedErrorForPaging` (same package), whose Status carries a token that
    /// continues at the latest version (`rv` -1); such a token pages on current data.
    pub(super) fn list_continue(
        &self,
        rt: &ResourceType,
        filter: &Filter,
        limit: Option<usize>,
        token: &ContinueToken,
    ) -> Result<ListPage, ApiError> {
        let st = self.read();
        let Ok(rv) = u64::try_from(token.rv) else {
            // `continueRV < 0`: the latest version, and later tokens name it.
            return Ok(page(
                rt,
                &st.objects[rt.index],
                st.rv,
                filter,
                limit,
                Some(&token.after),
            ));
        };
        if rv > st.rv {
            return Err(ApiError::new(
                500,
                format!(
                    "the continue token names resourceVersion {rv}, newer than this simulator's {} (was it issued by another simulator, or before `restart`?); start a new list without `continue`",
                    st.rv
                ),
            ));
        }
        if rv < st.floor {
            let again = ContinueToken {
                rv: -1,
                after: token.after.clone(),
            };
            return Err(ApiError {
                continue_token: Some(encode_continue(rt, filter.namespace.as_deref(), &again)),
                ..ApiError::new(410, INCONSISTENT_CONTINUE)
            });
        }
        let snapshot = snapshot(&st, rt, rv);
        Ok(page(rt, &snapshot, rv, filter, limit, Some(&token.after)))
    }

    /// A list as of resourceVersion `rv` (`resourceVersionMatch=Exact`), rebuilt from the kept
    /// history: `Err(oldest)` (410) when `rv` is older than the history, `Ok(None)` when it is
    /// newer than the store (the apiserver's "Too large resource version").
    pub(super) fn list_exact(
        &self,
        rt: &ResourceType,
        filter: &Filter,
        limit: Option<usize>,
        rv: u64,
    ) -> Result<Option<ListPage>, u64> {
        let st = self.read();
        if rv > st.rv {
            return Ok(None);
        }
        if rv < st.floor {
            return Err(st.floor);
        }
        let snapshot = snapshot(&st, rt, rv);
        Ok(Some(page(rt, &snapshot, rv, filter, limit, None)))
    }
}

/// The objects of one namespace in a namespaced resource's map (a key range: keys sort by
/// namespace first).
fn in_namespace<'a>(
    map: &'a BTreeMap<ObjKey, Arc<Value>>,
    namespace: &'a str,
) -> impl Iterator<Item = (&'a ObjKey, &'a Arc<Value>)> {
    let start = ObjKey {
        namespace: namespace.to_string(),
        name: String::new(),
    };
    map.range(start..)
        .take_while(move |(k, _)| k.namespace == namespace)
}

/// The 410 message of a `continue` whose snapshot is gone (`inconsistentContinue`,
/// k8s.io/apiserver pkg/storage/etcd3/errors.go).
pub(crate) const INCONSISTENT_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// The objects of `rt` as of `rv` (at least the history floor): the current map when nothing of
/// `rt` changed since, else a copy with the newer changes undone from the kept history.
fn snapshot<'a>(
    st: &'a State,
    rt: &ResourceType,
    rv: u64,
) -> std::borrow::Cow<'a, BTreeMap<ObjKey, Arc<Value>>> {
    let newer = st.history.iter().rev().take_while(|c| c.rv > rv);
    if !newer.clone().any(|c| c.resource == rt.index) {
        return std::borrow::Cow::Borrowed(&st.objects[rt.index]);
    }
    let mut map = st.objects[rt.index].clone();
    // Newest first: the last write to a key is the undo of its oldest newer change.
    for change in newer.filter(|c| c.resource == rt.index) {
        let key = ObjKey {
            namespace: meta_str(&change.object, "namespace")
                .filter(|_| rt.namespaced)
                .unwrap_or("")
                .to_string(),
            name: meta_str(&change.object, "name").unwrap_or("").to_string(),
        };
        match &change.previous {
            Some(p) => map.insert(key, p.clone()),
            None => map.remove(&key),
        };
    }
    std::borrow::Cow::Owned(map)
}

/// A page of `map` as of `resource_version`.
fn page(
    rt: &ResourceType,
    map: &BTreeMap<ObjKey, Arc<Value>>,
    resource_version: u64,
    filter: &Filter,
    limit: Option<usize>,
    after: Option<&ObjKey>,
) -> ListPage {
    {
        let start = match (after, &filter.namespace) {
            (Some(key), _) => std::ops::Bound::Excluded(key.clone()),
            (None, Some(ns)) if rt.namespaced => std::ops::Bound::Included(ObjKey {
                namespace: ns.clone(),
                name: String::new(),
            }),
            _ => std::ops::Bound::Unbounded,
        };
        let mut selected = map
            .range((start, std::ops::Bound::Unbounded))
            .take_while(|(k, _)| {
                !rt.namespaced
                    || filter
                        .namespace
                        .as_ref()
                        .is_none_or(|ns| &k.namespace == ns)
            })
            .filter(|(_, v)| filter.matches(v));
        let mut items = Vec::new();
        let mut last = None;
        for (k, v) in selected.by_ref() {
            if limit.is_some_and(|l| items.len() >= l) {
                // One more matched: there is a next page, starting after the last item sent.
                let remaining = 1 + selected.count();
                return ListPage {
                    resource_version,
                    items,
                    continue_token: last.map(|k: &ObjKey| {
                        let token = ContinueToken {
                            rv: i64::try_from(resource_version).unwrap_or(i64::MAX),
                            after: k.clone(),
                        };
                        encode_continue(rt, filter.namespace.as_deref(), &token)
                    }),
                    remaining: Some(remaining),
                };
            }
            items.push(v.clone());
            last = Some(k);
        }
        ListPage {
            resource_version,
            items,
            continue_token: None,
            remaining: None,
        }
    }
}

impl Store {
    /// Every object of a resource (library use).
    pub(super) fn all(&self, rt: &ResourceType) -> Vec<Arc<Value>> {
        self.read().objects[rt.index].values().cloned().collect()
    }

    /// POST: creates an object. `namespace` comes from the path (or the library caller).
    pub(super) fn create(
        &self,
        rt: &'static ResourceType,
        namespace: Option<&str>,
        obj: Value,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        let mut st = self.write();
        st.dry_run = dry_run;
        self.create_locked(&mut st, rt, namespace, obj, false)
    }

    /// PUT: replaces an object, optimistic-concurrency checked when the body carries a
    /// resourceVersion.
    pub(super) fn update(
        &self,
        rt: &'static ResourceType,
        key: &ObjKey,
        obj: Value,
        scope: Scope,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        let mut st = self.write();
        st.dry_run = dry_run;
        self.update_locked(&mut st, rt, key, obj, scope, true)
    }

    /// PATCH (merge, JSON or strategic merge; server-side apply is refused, see
    /// [`ApiError::apply_unsupported`]).
    pub(super) fn patch(
        &self,
        rt: &'static ResourceType,
        key: &ObjKey,
        kind: PatchKind,
        body: &[u8],
        scope: Scope,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        if kind == PatchKind::Apply {
            return Err(ApiError::apply_unsupported());
        }
        let mut st = self.write();
        st.dry_run = dry_run;
        let current = st.objects[rt.index]
            .get(key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(rt, &key.name))?;
        let patched = patch::apply(kind, &current, body).map_err(patch_error)?;
        self.update_locked(&mut st, rt, key, patched, scope, true)
    }

    /// Read-modify-write of the whole object under the lock (library use, no rv check).
    pub(super) fn modify(
        &self,
        rt: &'static ResourceType,
        key: &ObjKey,
        f: impl FnOnce(&mut Value),
    ) -> Result<Arc<Value>, ApiError> {
        let mut st = self.write();
        st.dry_run = false;
        let current = st.objects[rt.index]
            .get(key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(rt, &key.name))?;
        let mut obj = (*current).clone();
        f(&mut obj);
        self.update_locked(&mut st, rt, key, obj, Scope::Whole, false)
    }

    /// Inserts or replaces an object as given (uid, timestamps, status and finalizers kept when
    /// present), creating its namespace if missing. For seeding; still notifies watches.
    pub(super) fn seed(&self, obj: Value) -> Result<Arc<Value>, ApiError> {
        let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
        let rt = super::resources::by_kind(api_version, kind).ok_or_else(|| {
            ApiError::new(
                404,
                format!("the simulator does not serve kind {kind:?} of apiVersion {api_version:?}"),
            )
        })?;
        let mut obj = obj;
        let namespace = if rt.namespaced {
            let ns = meta_str(&obj, "namespace")
                .filter(|n| !n.is_empty())
                .unwrap_or("default")
                .to_string();
            meta_mut(&mut obj).insert("namespace".into(), json!(ns));
            Some(ns)
        } else {
            None
        };
        let mut st = self.write();
        st.dry_run = false;
        if let Some(ns) = &namespace {
            let ns_key = ObjKey::new(&RESOURCES[NAMESPACES], None, ns);
            if !st.objects[NAMESPACES].contains_key(&ns_key) {
                let ns_obj =
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
                self.create_locked(&mut st, &RESOURCES[NAMESPACES], None, ns_obj, false)?;
            }
        }
        let name = meta_str(&obj, "name").unwrap_or("").to_string();
        let key = ObjKey::new(rt, namespace.as_deref(), &name);
        if let Some(existing) = st.objects[rt.index].get(&key).cloned() {
            let uid = meta_str(&obj, "uid").filter(|u| !u.is_empty());
            if uid.is_none_or(|u| Some(u) == meta_str(&existing, "uid")) {
                meta_mut(&mut obj).remove("resourceVersion");
                return self.update_locked(&mut st, rt, &key, obj, Scope::Whole, false);
            }
            // Another uid is another object: the old one goes away first, as it would for real.
            self.commit_delete(&mut st, rt, &key, &existing);
        }
        self.create_locked(&mut st, rt, namespace.as_deref(), obj, true)
    }

    /// DELETE: removes an object, or marks it terminating while finalizers remain.
    pub(super) fn delete(
        &self,
        rt: &'static ResourceType,
        key: &ObjKey,
        pre: &Preconditions,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        let mut st = self.write();
        st.dry_run = dry_run;
        let current = st.objects[rt.index]
            .get(key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(rt, &key.name))?;
        let uid = meta_str(&current, "uid").unwrap_or("");
        if let Some(want) = pre.uid.as_deref().filter(|u| *u != uid) {
            return Err(ApiError::conflict(
                rt,
                &key.name,
                &format!(
                    "Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"
                ),
            ));
        }
        let rv = meta_str(&current, "resourceVersion").unwrap_or("");
        if let Some(want) = pre.resource_version.as_deref().filter(|r| *r != rv) {
            return Err(ApiError::conflict(
                rt,
                &key.name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {rv}"
                ),
            ));
        }
        if rt.index == NAMESPACES {
            // `NamespaceLifecycle.Admit`: the immortal namespaces.
            if DEFAULT_NAMESPACES[..3].contains(&key.name.as_str()) {
                return Err(ApiError {
                    details: Some(super::error::details(rt, &key.name)),
                    ..ApiError::new(
                        403,
                        format!(
                            "namespaces \"{}\" is forbidden: this namespace may not be deleted",
                            key.name
                        ),
                    )
                });
            }
            return Ok(self.delete_namespace(&mut st, key, current));
        }
        if finalizers(&current).is_empty() {
            return Ok(self.commit_delete(&mut st, rt, key, &current));
        }
        if is_terminating(&current) {
            return Ok(current);
        }
        let mut obj = (*current).clone();
        let m = meta_mut(&mut obj);
        m.insert("deletionTimestamp".into(), json!(meta::now()));
        m.insert("deletionGracePeriodSeconds".into(), json!(0));
        if let Some(g) = m.get("generation").and_then(Value::as_i64) {
            m.insert("generation".into(), json!(g + 1));
        }
        Ok(self.commit(&mut st, rt, key.clone(), obj, Some(current)))
    }

    /// DELETE of a namespace (`REST.Delete`, pkg/registry/core/namespace/storage/storage.go):
    /// the first one marks it `Terminating` and answers that state; the namespace controller's
    /// pass ([`Store::sync_namespace`]) then deletes its content and removes it once nothing is
    /// left. A later DELETE answers the namespace as it is.
    fn delete_namespace(&self, st: &mut State, key: &ObjKey, current: Arc<Value>) -> Arc<Value> {
        if is_terminating(&current) {
            return current;
        }
        let mut obj = (*current).clone();
        namespaces::mark_terminating(&mut obj);
        let marked = self.commit(st, &RESOURCES[NAMESPACES], key.clone(), obj, Some(current));
        self.sync_namespace(st, &key.name);
        marked
    }

    /// The namespace controller's pass over a terminating namespace
    /// (`namespacedResourcesDeleter.Delete`, pkg/controller/namespace/deletion/
    /// namespaced_resources_deleter.go), at once: everything in it is deleted (objects with
    /// finalizers get their `deletionTimestamp` and stay), the conditions say what is left, and
    /// once nothing is, the `kubernetes` finalizer goes and the namespace with it (unless its
    /// own `metadata.finalizers` keep it, `ShouldDeleteNamespaceDuringUpdate`). Run again
    /// whenever an object of a terminating namespace is finally deleted.
    fn sync_namespace(&self, st: &mut State, namespace: &str) {
        let ns_key = ObjKey::new(&RESOURCES[NAMESPACES], None, namespace);
        let Some(ns) = st.objects[NAMESPACES].get(&ns_key).cloned() else {
            return;
        };
        if st.dry_run || st.syncing_namespace || !is_terminating(&ns) {
            return;
        }
        st.syncing_namespace = true;
        self.empty_namespace(st, namespace);
        let mut remaining = namespaces::Remaining::default();
        for rt in RESOURCES.iter().filter(|r| r.namespaced) {
            let left: Vec<&Arc<Value>> = in_namespace(&st.objects[rt.index], namespace)
                .map(|(_, v)| v)
                .collect();
            if left.is_empty() {
                continue;
            }
            // `<resource>.<group>`, `services.` for the core group, as the controller writes it.
            remaining
                .by_resource
                .insert(format!("{}.{}", rt.plural, rt.group), left.len());
            for obj in left {
                for f in finalizers(obj) {
                    *remaining.by_finalizer.entry(f.to_string()).or_default() += 1;
                }
            }
        }
        let mut obj = (*ns).clone();
        namespaces::set_conditions(&mut obj, &remaining);
        if remaining.is_empty() {
            namespaces::finalize(&mut obj);
        }
        // Removes the namespace when neither finalizer list holds anything (see `commit`); a
        // pass that changes nothing writes nothing, as the controller skips the update.
        if obj != *ns {
            self.commit(st, &RESOURCES[NAMESPACES], ns_key, obj, Some(ns));
        }
        st.syncing_namespace = false;
    }

    /// Deletes (honouring finalizers) everything in a namespace being deleted, as the namespace
    /// controller's `deleteAllContent` does.
    fn empty_namespace(&self, st: &mut State, namespace: &str) {
        for rt in RESOURCES.iter().filter(|r| r.namespaced) {
            let keys: Vec<ObjKey> = in_namespace(&st.objects[rt.index], namespace)
                .map(|(k, _)| k.clone())
                .collect();
            for key in keys {
                let Some(current) = st.objects[rt.index].get(&key).cloned() else {
                    continue;
                };
                if finalizers(&current).is_empty() {
                    self.commit_delete(st, rt, &key, &current);
                } else if !is_terminating(&current) {
                    let mut obj = (*current).clone();
                    let m = meta_mut(&mut obj);
                    m.insert("deletionTimestamp".into(), json!(meta::now()));
                    m.insert("deletionGracePeriodSeconds".into(), json!(0));
                    self.commit(st, rt, key, obj, Some(current));
                }
            }
        }
    }

    /// Starts a watch: snapshot or history replay plus a subscription, atomically.
    pub(super) fn start_watch(
        &self,
        rt: &ResourceType,
        filter: &Filter,
        from: WatchFrom,
        send_initial: bool,
    ) -> WatchStart {
        let st = self.read();
        let receiver = self.changes.subscribe();
        let mut start = WatchStart {
            initial: Vec::new(),
            replay: Vec::new(),
            receiver,
            resource_version: st.rv,
            expired: None,
        };
        match from {
            WatchFrom::After(rv) if !send_initial => {
                if rv < st.floor {
                    start.expired = Some((rv, st.floor));
                    return start;
                }
                let first = st.history.partition_point(|c| c.rv <= rv);
                start.replay = st
                    .history
                    .range(first..)
                    .filter(|c| c.resource == rt.index)
                    .cloned()
                    .collect();
            }
            _ => {
                start.initial = st.objects[rt.index]
                    .values()
                    .filter(|v| filter.matches(v))
                    .cloned()
                    .collect();
            }
        }
        start
    }

    fn create_locked(
        &self,
        st: &mut State,
        rt: &'static ResourceType,
        namespace: Option<&str>,
        mut obj: Value,
        seeding: bool,
    ) -> Result<Arc<Value>, ApiError> {
        check_type(rt, &obj)?;
        let body_ns = meta_str(&obj, "namespace")
            .filter(|n| !n.is_empty())
            .map(str::to_string);
        let namespace = if rt.namespaced {
            match (namespace, body_ns) {
                (Some(path), Some(body)) if path != body => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                (Some(path), _) => Some(path.to_string()),
                (None, Some(body)) => Some(body),
                (None, None) => Some("default".to_string()),
            }
        } else {
            None
        };
        // `NamespaceLifecycle.Admit` runs before the registry names and validates the object:
        // no content in a missing namespace (404), nor new content in a terminating one (403).
        if let Some(ns) = &namespace {
            let ns_key = ObjKey::new(&RESOURCES[NAMESPACES], None, ns);
            match st.objects[NAMESPACES].get(&ns_key) {
                None => return Err(ApiError::not_found(&RESOURCES[NAMESPACES], ns)),
                Some(n) if !seeding && is_terminating(n) => {
                    return Err(namespaces::terminating_create_error(
                        &rt.qualified(),
                        rt.group,
                        rt.plural,
                        ns,
                        &obj,
                    ));
                }
                Some(_) => {}
            }
        }
        let name = match meta_str(&obj, "name").filter(|n| !n.is_empty()) {
            Some(n) => n.to_string(),
            None => match meta_str(&obj, "generateName").filter(|n| !n.is_empty()) {
                Some(prefix) => format!("{prefix}{}", meta::name_suffix()),
                None => {
                    return Err(ApiError::invalid(
                        rt,
                        "",
                        "metadata.name: Required value: name or generateName is required",
                    ));
                }
            },
        };
        // Name rules per kind: Services are DNS-1035 labels (`ValidateServiceName`),
        // Namespaces DNS-1123 labels (`ValidateNamespaceName`), the rest DNS-1123 subdomains
        // (`ValidateNodeName`, `ValidateConfigMapName`, ...; pkg/apis/core/validation).
        let rule: fn(&str) -> Vec<String> = match rt.index {
            SERVICES => validation::dns1035_label,
            NAMESPACES => validation::dns1123_label,
            _ => validation::dns1123_subdomain,
        };
        meta::validate_name_with(&name, rule).map_err(|e| ApiError::invalid_all(rt, &name, e))?;
        if !seeding && meta_str(&obj, "resourceVersion").is_some_and(|r| !r.is_empty()) {
            // The etcd3 storage layer's plain error, which the apiserver reports as a 500.
            return Err(ApiError::new(
                500,
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let key = ObjKey::new(rt, namespace.as_deref(), &name);
        if st.objects[rt.index].contains_key(&key) {
            return Err(ApiError::already_exists(rt, &name));
        }

        set_type(rt, &mut obj);
        let m = meta_mut(&mut obj);
        m.insert("name".into(), json!(name));
        match &namespace {
            Some(ns) => m.insert("namespace".into(), json!(ns)),
            None => m.remove("namespace"),
        };
        if !seeding
            || m.get("uid")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        {
            m.insert("uid".into(), json!(meta::new_uid()));
        }
        if !seeding || m.get("creationTimestamp").is_none_or(Value::is_null) {
            m.insert("creationTimestamp".into(), json!(meta::now()));
        }
        if !seeding {
            m.remove("deletionTimestamp");
            m.remove("deletionGracePeriodSeconds");
        }
        if rt.generation {
            m.insert("generation".into(), json!(1));
        } else {
            m.remove("generation");
        }
        if rt.clear_status_on_create
            && !seeding
            && let Some(o) = obj.as_object_mut()
        {
            o.insert("status".into(), json!({}));
        }
        match rt.index {
            SERVICES => {
                services::admit(&st.allocated, &key, None, &mut obj, &self.node_ports)?;
                if let Some(o) = obj.as_object_mut() {
                    let status = o.entry("status").or_insert_with(|| json!({}));
                    if let Some(s) = status.as_object_mut() {
                        s.entry("loadBalancer").or_insert_with(|| json!({}));
                    }
                }
            }
            NAMESPACES => namespaces::prepare_for_create(&name, &mut obj),
            _ => {}
        }
        validate_write(
            rt,
            &name,
            None,
            &mut obj,
            if seeding { Scope::Whole } else { Scope::Main },
        )?;
        Ok(self.commit(st, rt, key, obj, None))
    }

    fn update_locked(
        &self,
        st: &mut State,
        rt: &'static ResourceType,
        key: &ObjKey,
        mut new: Value,
        scope: Scope,
        check_rv: bool,
    ) -> Result<Arc<Value>, ApiError> {
        let old = st.objects[rt.index]
            .get(key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(rt, &key.name))?;
        check_type(rt, &new)?;
        if meta_str(&new, "name").is_some_and(|n| !n.is_empty() && n != key.name) {
            return Err(name_mismatch(&new, key));
        }
        if rt.namespaced
            && meta_str(&new, "namespace").is_some_and(|n| !n.is_empty() && n != key.namespace)
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let old_uid = meta_str(&old, "uid").unwrap_or("");
        if let Some(uid) = meta_str(&new, "uid").filter(|u| !u.is_empty() && *u != old_uid) {
            return Err(ApiError::conflict(
                rt,
                &key.name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {old_uid}"
                ),
            ));
        }
        let old_rv = meta_str(&old, "resourceVersion").unwrap_or("");
        if check_rv
            && meta_str(&new, "resourceVersion").is_some_and(|r| !r.is_empty() && r != old_rv)
        {
            return Err(ApiError::stale(rt, &key.name));
        }
        if !new.is_object() {
            return Err(ApiError::bad_request("the object must be a JSON object"));
        }
        reset_scope(rt, &old, &mut new, scope);
        if rt.index == NAMESPACES && scope == Scope::Main {
            namespaces::prepare_for_update(&old, &mut new);
        }
        // Identity and lifecycle fields are the server's, whatever the client sent.
        let old_meta = meta::meta(&old).cloned().unwrap_or_default();
        let m = meta_mut(&mut new);
        m.insert("name".into(), json!(key.name));
        if rt.namespaced {
            m.insert("namespace".into(), json!(key.namespace));
        } else {
            m.remove("namespace");
        }
        for field in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            match old_meta.get(field) {
                Some(v) => m.insert(field.into(), v.clone()),
                None => m.remove(field),
            };
        }
        m.insert("resourceVersion".into(), json!(old_rv));
        if is_terminating(&old) {
            let before = finalizers(&old);
            let added: Vec<&str> = finalizers(&new)
                .into_iter()
                .filter(|f| !before.contains(f))
                .collect();
            if !added.is_empty() {
                let list = added
                    .iter()
                    .map(|f| format!("{f:?}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(ApiError::invalid(
                    rt,
                    &key.name,
                    format!(
                        "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{list}}}"
                    ),
                ));
            }
        }
        if rt.index == SERVICES {
            services::admit(&st.allocated, key, Some(&old), &mut new, &self.node_ports)?;
        }
        validate_write(rt, &key.name, Some(&old), &mut new, scope)?;
        if rt.generation && new.get("spec") != old.get("spec") {
            let g = meta::meta(&old)
                .and_then(|m| m.get("generation"))
                .and_then(Value::as_i64)
                .unwrap_or(0);
            meta_mut(&mut new).insert("generation".into(), json!(g + 1));
        }
        set_type(rt, &mut new);
        // The apiserver skips writes that change nothing: no new resourceVersion, no event.
        if new == *old {
            return Ok(old);
        }
        Ok(self.commit(st, rt, key.clone(), new, Some(old)))
    }

    /// Stores `obj` with a new resourceVersion and announces it; an object that is terminating
    /// and has no finalizers left is removed instead.
    fn commit(
        &self,
        st: &mut State,
        rt: &ResourceType,
        key: ObjKey,
        mut obj: Value,
        previous: Option<Arc<Value>>,
    ) -> Arc<Value> {
        // `ShouldDeleteDuringUpdate` (k8s.io/apiserver pkg/registry/generic/registry/store.go);
        // a namespace also needs its `spec.finalizers` gone (`ShouldDeleteNamespaceDuringUpdate`).
        let finished = is_terminating(&obj)
            && finalizers(&obj).is_empty()
            && (rt.index != NAMESPACES || namespaces::spec_finalizers(&obj).is_empty());
        if finished && previous.is_some() {
            return self.commit_delete(st, rt, &key, &Arc::new(obj));
        }
        if st.dry_run {
            return Arc::new(obj);
        }
        st.rv += 1;
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(st.rv.to_string()));
        let obj = Arc::new(obj);
        st.objects[rt.index].insert(key.clone(), obj.clone());
        if rt.index == SERVICES {
            if let Some(previous) = &previous {
                st.allocated.remove(previous);
            }
            st.allocated.add(&obj);
        }
        let kind = if previous.is_some() {
            ChangeType::Modified
        } else {
            ChangeType::Added
        };
        self.record(st, rt, kind, obj.clone(), previous);
        if let Some((other, converted)) = event_mirror(rt, &obj) {
            let previous = st.objects[other].insert(key, converted.clone());
            let kind = if previous.is_some() {
                ChangeType::Modified
            } else {
                ChangeType::Added
            };
            self.record(st, &RESOURCES[other], kind, converted, previous);
        }
        obj
    }

    fn commit_delete(
        &self,
        st: &mut State,
        rt: &ResourceType,
        key: &ObjKey,
        last: &Arc<Value>,
    ) -> Arc<Value> {
        if st.dry_run {
            return last.clone();
        }
        st.rv += 1;
        let previous = st.objects[rt.index].remove(key);
        if rt.index == SERVICES
            && let Some(previous) = &previous
        {
            st.allocated.remove(previous);
        }
        let mut obj = (**last).clone();
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(st.rv.to_string()));
        let obj = Arc::new(obj);
        self.record(st, rt, ChangeType::Deleted, obj.clone(), previous);
        if let Some((other, converted)) = event_mirror(rt, &obj) {
            let previous = st.objects[other].remove(key);
            self.record(
                st,
                &RESOURCES[other],
                ChangeType::Deleted,
                converted,
                previous,
            );
        }
        // The last object of a terminating namespace lets the namespace go.
        if rt.namespaced {
            self.sync_namespace(st, &key.namespace);
        }
        obj
    }

    fn record(
        &self,
        st: &mut State,
        rt: &ResourceType,
        kind: ChangeType,
        object: Arc<Value>,
        previous: Option<Arc<Value>>,
    ) {
        let change = Arc::new(Change::new(st.rv, rt.index, kind, object, previous));
        if st.history.len() >= self.history_limit
            && let Some(old) = st.history.pop_front()
        {
            st.floor = old.rv;
        }
        st.history.push_back(change.clone());
        // No receivers is fine: nobody is watching.
        let _ = self.changes.send(change);
    }
}

/// The other view of an event: (its resource index, the converted object with the same
/// resourceVersion). Core and events.k8s.io events are one storage on the apiserver.
fn event_mirror(rt: &ResourceType, obj: &Value) -> Option<(usize, Arc<Value>)> {
    match rt.index {
        EVENTS => Some((EVENTS_V1, Arc::new(events::to_events(obj)))),
        EVENTS_V1 => Some((EVENTS, Arc::new(events::to_core(obj)))),
        _ => None,
    }
}

/// The registry strategies' validation of a write, after defaulting: object metadata for every
/// kind, then the kind's own rules (each function names its apiserver source). `old` is `None`
/// on create.
fn validate_write(
    rt: &ResourceType,
    name: &str,
    old: Option<&Value>,
    new: &mut Value,
    scope: Scope,
) -> Result<(), ApiError> {
    let mut errs = Errors::default();
    validation::object_meta(rt, new, &mut errs)?;
    match rt.index {
        SERVICES => {
            // The main resource (and library writes, which stand for one) clears the status
            // of a Service that stopped being a LoadBalancer; the status subresource keeps the
            // spec and is validated instead.
            services::prepare_status(new, scope != Scope::Status && old.is_some());
            errs.0.extend(services::validate_status(new));
        }
        NODES => {
            if let Err(e) = nodes::validate(old, new) {
                errs.0.extend(e);
            }
        }
        CONFIGMAPS => validation::config_map(new, &mut errs)?,
        NAMESPACES if scope == Scope::Status && old.is_some() => {
            errs.0.extend(namespaces::validate_status(new));
        }
        LEASES => {
            validation::times("Lease", new, &["spec.acquireTime", "spec.renewTime"], &[])?;
            validation::lease(new, &mut errs)?;
        }
        EVENTS | EVENTS_V1 => {
            // Validation runs on the core form; events.k8s.io writes get the strict rules.
            let strict = rt.index == EVENTS_V1 && scope != Scope::Whole;
            let core = |v: &Value| {
                if rt.index == EVENTS_V1 {
                    events::to_core(v)
                } else {
                    v.clone()
                }
            };
            let new_core = core(new);
            validation::times(
                "Event",
                &new_core,
                &["eventTime", "series.lastObservedTime"],
                &["firstTimestamp", "lastTimestamp"],
            )?;
            errs.0.extend(match old {
                None => events::validate_create(&new_core, strict),
                Some(old) => events::validate_update(&core(old), &new_core, strict),
            });
        }
        _ => {}
    }
    errs.into_result(rt, name)?;
    // Unknown fields do not survive the apiserver's typed decoding.
    validation::unknown_fields(rt.index, new, true);
    // Field ownership is not modelled (server-side apply is refused): no `managedFields` are
    // kept, rather than echoing ones a client sent that nothing maintains.
    meta_mut(new).remove("managedFields");
    drop_empty_fields(rt, new);
    Ok(())
}

/// The apiserver stores typed objects: `omitempty` lists and maps that are empty do not come
/// back (k8s.io/api/core/v1/types.go: `ObjectMeta.Labels`, `Annotations`, `Finalizers`,
/// `OwnerReferences`; `NodeSpec.Taints`, `PodCIDRs`; `NodeStatus.Addresses`, `Conditions`).
/// So `kubectl get -o custom-columns=...taints[0]` prints `<none>` after the last taint went.
fn drop_empty_fields(rt: &ResourceType, obj: &mut Value) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["labels", "annotations", "finalizers", "ownerReferences"] {
            validation::drop_empty(m, field);
        }
    }
    if rt.index == NODES {
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            for field in ["taints", "podCIDRs"] {
                validation::drop_empty(spec, field);
            }
        }
        if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
            for field in ["addresses", "conditions"] {
                validation::drop_empty(status, field);
            }
        }
    }
}

/// 400 when `apiVersion`/`kind` are present and name another type; 400 for non-objects.
fn check_type(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request("the object must be a JSON object"));
    }
    let api_version = rt.api_version();
    if let Some(v) = obj.get("apiVersion").and_then(Value::as_str)
        && !v.is_empty()
        && v != api_version
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({v}) does not match the expected API version ({api_version})"
        )));
    }
    if let Some(k) = obj.get("kind").and_then(Value::as_str)
        && !k.is_empty()
        && k != rt.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({k}) does not match the expected kind ({})",
            rt.kind
        )));
    }
    Ok(())
}

fn set_type(rt: &ResourceType, obj: &mut Value) {
    if let Some(o) = obj.as_object_mut() {
        o.insert("apiVersion".into(), json!(rt.api_version()));
        o.insert("kind".into(), json!(rt.kind));
    }
}

fn name_mismatch(obj: &Value, key: &ObjKey) -> ApiError {
    ApiError::bad_request(format!(
        "the name of the object ({}) does not match the name on the URL ({})",
        meta_str(obj, "name").unwrap_or(""),
        key.name
    ))
}

fn patch_error(e: PatchError) -> ApiError {
    match e {
        PatchError::Malformed(m) => ApiError::bad_request(m),
        // A patch that cannot be applied (a failed JSON-patch `test`, a missing path or merge
        // key): `errors.NewGenericServerResponse(422, "", GroupResource{}, "", err, 0, false)`
        // in k8s.io/apiserver/pkg/endpoints/handlers/patch.go `applyJSPatch`: the generic 422
        // message, the patch error as an `UnexpectedServerResponse` cause, no kind or name.
        PatchError::Unapplicable(m) => ApiError {
            details: Some(
                json!({"causes": [{"reason": "UnexpectedServerResponse", "message": m}]}),
            ),
            ..ApiError::new(
                422,
                "the server rejected our request due to an error in our request",
            )
        },
    }
}

/// Keeps what the subresource being written may not change.
fn reset_scope(rt: &ResourceType, old: &Value, new: &mut Value, scope: Scope) {
    let (Some(old), Some(new)) = (old.as_object(), new.as_object_mut()) else {
        return;
    };
    match scope {
        Scope::Main if rt.status => match old.get("status") {
            Some(s) => {
                new.insert("status".into(), s.clone());
            }
            None => {
                new.remove("status");
            }
        },
        Scope::Status => {
            let keep = |k: &str| !matches!(k, "metadata" | "status" | "apiVersion" | "kind");
            new.retain(|k, _| !keep(k));
            for (k, v) in old.iter().filter(|(k, _)| keep(k)) {
                new.insert(k.clone(), v.clone());
            }
        }
        _ => {}
    }
}

/// A decoded `continue` token: the snapshot of the first page (`-1`: the latest version, as
/// handed out with a 410) and the last key sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContinueToken {
    pub rv: i64,
    pub after: ObjKey,
}

/// Encodes a token like `storage.EncodeContinue` (k8s.io/apiserver pkg/storage/continue.go):
/// unpadded URL-safe base64 of `{"v":"meta.k8s.io/v1","rv":N,"start":"<key>\u0000"}`, the key
/// relative to the list's prefix (`namespace/name` across namespaces, else `name`) and the NUL
/// making it the first key after the last one sent.
fn encode_continue(rt: &ResourceType, scope: Option<&str>, token: &ContinueToken) -> String {
    use base64::Engine as _;
    let key = if rt.namespaced && scope.is_none() {
        format!("{}/{}\0", token.after.namespace, token.after.name)
    } else {
        format!("{}\0", token.after.name)
    };
    // Go's encoder writes the struct's fields in order; serde_json would sort the keys.
    let json = format!(
        r#"{{"v":"meta.k8s.io/v1","rv":{},"start":{}}}"#,
        token.rv,
        Value::String(key)
    );
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
}

/// Decodes a `continue` token of a list of `rt` (in namespace `scope`, if given), failing with
/// the reasons of `storage.DecodeContinue` (wrapped by the caller as `invalid continue token:
/// ...`).
pub(crate) fn decode_continue(
    rt: &ResourceType,
    scope: Option<&str>,
    token: &str,
) -> Result<ContinueToken, String> {
    use base64::Engine as _;
    const INVALID: &str = "continue key is not valid";
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|e| format!("{INVALID}: {e}"))?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| format!("{INVALID}: {e}"))?;
    let version = v.get("v").and_then(Value::as_str).unwrap_or("");
    if version != "meta.k8s.io/v1" {
        return Err(format!(
            "{INVALID}: server does not recognize this encoded version {version}"
        ));
    }
    let rv = v.get("rv").and_then(Value::as_i64).unwrap_or(0);
    if rv == 0 {
        return Err(format!(
            "{INVALID}: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
        ));
    }
    let start = v.get("start").and_then(Value::as_str).unwrap_or("");
    if start.is_empty() {
        return Err(format!(
            "{INVALID}: encoded start key empty (version meta.k8s.io/v1)"
        ));
    }
    let key = start.strip_suffix('\0').unwrap_or(start);
    let after = match (rt.namespaced, scope, key.split_once('/')) {
        (true, None, Some((namespace, name))) => ObjKey {
            namespace: namespace.to_string(),
            name: name.to_string(),
        },
        (true, Some(namespace), None) => ObjKey {
            namespace: namespace.to_string(),
            name: key.to_string(),
        },
        (false, _, None) => ObjKey {
            namespace: String::new(),
            name: key.to_string(),
        },
        // `DecodeContinue` refuses keys that would leave the list's prefix.
        _ => return Err(format!("{INVALID}: {start}")),
    };
    Ok(ContinueToken { rv, after })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let services = &RESOURCES[SERVICES];
        let token = ContinueToken {
            rv: 42,
            after: ObjKey {
                namespace: "ns".into(),
                name: "a.b".into(),
            },
        };
        let text = encode_continue(services, None, &token);
        assert_eq!(decode_continue(services, None, &text), Ok(token.clone()));
        // The apiserver's own encoding of the same position.
        assert_eq!(
            text,
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NDIsInN0YXJ0IjoibnMvYS5iXHUwMDAwIn0"
        );
        let nodes = &RESOURCES[NODES];
        let node = ContinueToken {
            rv: -1,
            after: ObjKey {
                namespace: String::new(),
                name: "n1".into(),
            },
        };
        assert_eq!(
            decode_continue(nodes, None, &encode_continue(nodes, None, &node)),
            Ok(node.clone())
        );
        // In one namespace the key is the name only, as the prefix holds the namespace.
        let scoped = encode_continue(services, Some("ns"), &token);
        assert_eq!(decode_continue(services, Some("ns"), &scoped), Ok(token));
        assert!(decode_continue(services, None, &scoped).is_err());
        assert!(decode_continue(services, None, "zz!").is_err());
        assert_eq!(
            decode_continue(services, None, &encode_continue(nodes, None, &node)),
            Err("continue key is not valid: n1\0".to_string())
        );
    }

    #[test]
    fn starts_with_default_namespaces() {
        let store = Store::new(HISTORY_LIMIT, WATCH_BUFFER);
        let names: Vec<String> = store
            .all(&RESOURCES[NAMESPACES])
            .iter()
            .filter_map(|n| meta_str(n, "name").map(str::to_string))
            .collect();
        assert_eq!(names.len(), 4);
        assert!(names.contains(&"kube-node-lease".to_string()));
        assert_eq!(store.resource_version(), 4);
    }

    #[test]
    fn history_is_bounded() {
        let store = Store::new(100, 10);
        let rt = &RESOURCES[3];
        for i in 0..105 {
            let ev = json!({"metadata": {"name": format!("e{i}"), "namespace": "default"}});
            assert!(store.create(rt, None, ev, false).is_ok());
        }
        let start = store.start_watch(rt, &Filter::default(), WatchFrom::After(1), false);
        assert!(start.expired.is_some());
        let rv = store.resource_version();
        let start = store.start_watch(rt, &Filter::default(), WatchFrom::After(rv - 3), false);
        assert_eq!(start.replay.len(), 3);
    }
}
