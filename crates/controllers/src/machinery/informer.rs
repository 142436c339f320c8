//! One watch per resource shared by every controller: a cache of the objects and change
//! callbacks with the old and the new object, like client-go's shared informers.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::core::Status;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Config as WatchConfig, Event, watcher};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Called with (old, new): (None, Some) added, (Some, Some) updated, (Some, None) deleted.
pub(crate) type Handler<K> = Box<dyn Fn(Option<&K>, Option<&K>) + Send + Sync>;

/// The cache key of an object: `namespace/name`, or `name` for cluster-scoped objects.
pub(crate) fn key_of<K: Resource>(obj: &K) -> String {
    match obj.meta().namespace.as_deref() {
        Some(ns) => format!("{ns}/{}", obj.name_any()),
        None => obj.name_any(),
    }
}

/// The one secondary index an informer's cache keeps (client-go's `Indexer` with a single index
/// function): the value an object is found by besides its key.
pub(crate) trait Indexed {
    /// The indexed value of this object; `None` leaves it out of the index.
    fn index_value(&self) -> Option<&str>;
}

impl Indexed for Node {
    /// `spec.providerID`, so node initialisation finds the other node carrying an ID without a
    /// scan of every node (a scan per initialisation is O(N²) over a cold start of thousands).
    fn index_value(&self) -> Option<&str> {
        self.spec.as_ref().and_then(|s| s.provider_id.as_deref())
    }
}

impl Indexed for Service {
    /// Nothing looks Services up by anything but their key.
    fn index_value(&self) -> Option<&str> {
        None
    }
}

/// The cached objects by key and the index over them, behind one lock so a reader never sees
/// one updated without the other.
struct Cache<K> {
    objects: HashMap<String, Arc<K>>,
    /// Indexed value → keys of the objects carrying it (sorted, so look-ups are deterministic).
    index: HashMap<String, BTreeSet<String>>,
}

impl<K> Default for Cache<K> {
    fn default() -> Self {
        Cache {
            objects: HashMap::new(),
            index: HashMap::new(),
        }
    }
}

impl<K: Indexed> Cache<K> {
    /// A cache holding exactly `objects`, its index built in one pass.
    fn from_objects(objects: HashMap<String, Arc<K>>) -> Self {
        let mut cache = Self::default();
        for (key, obj) in &objects {
            cache.index_add(key, obj);
        }
        cache.objects = objects;
        cache
    }

    fn index_add(&mut self, key: &str, obj: &K) {
        if let Some(value) = obj.index_value() {
            self.index
                .entry(value.to_string())
                .or_default()
                .insert(key.to_string());
        }
    }

    fn index_remove(&mut self, key: &str, obj: &K) {
        if let Some(value) = obj.index_value()
            && let Some(keys) = self.index.get_mut(value)
        {
            keys.remove(key);
            // An empty bucket would keep every provider ID ever seen.
            if keys.is_empty() {
                self.index.remove(value);
            }
        }
    }

    /// Stores `obj` under `key`, moving its index entry when the indexed value changed; returns
    /// the object it replaced.
    fn insert(&mut self, key: String, obj: Arc<K>) -> Option<Arc<K>> {
        let old = self.objects.insert(key.clone(), Arc::clone(&obj));
        if let Some(old) = &old {
            self.index_remove(&key, old);
        }
        self.index_add(&key, &obj);
        old
    }

    /// Removes the object under `key` and its index entry; returns it.
    fn remove(&mut self, key: &str) -> Option<Arc<K>> {
        let old = self.objects.remove(key);
        if let Some(old) = &old {
            self.index_remove(key, old);
        }
        old
    }
}

/// A read-only view of an informer's cache.
pub(crate) struct Store<K> {
    map: Arc<RwLock<Cache<K>>>,
    generation: Arc<AtomicU64>,
    synced: watch::Receiver<bool>,
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Store {
            map: Arc::clone(&self.map),
            generation: Arc::clone(&self.generation),
            synced: self.synced.clone(),
        }
    }
}

impl<K> Store<K> {
    /// A number that changes whenever the cache does (bumped after each change is in the map,
    /// before the handlers run). A value derived from [`Store::list`] after reading generation
    /// `g` is current while the generation is still `g`: read the generation first.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The object under `key`.
    pub(crate) fn get(&self, key: &str) -> Option<Arc<K>> {
        self.map
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .objects
            .get(key)
            .cloned()
    }

    /// The cached objects whose [`Indexed::index_value`] is `value`, in key order: one hash
    /// look-up, so a look-up per node initialisation does not cost a scan of every node.
    pub(crate) fn by_index(&self, value: &str) -> Vec<Arc<K>> {
        let cache = self.map.read().unwrap_or_else(|p| p.into_inner());
        cache
            .index
            .get(value)
            .into_iter()
            .flatten()
            .filter_map(|key| cache.objects.get(key).cloned())
            .collect()
    }

    /// Every cached object.
    pub(crate) fn list(&self) -> Vec<Arc<K>> {
        self.map
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .objects
            .values()
            .cloned()
            .collect()
    }

    /// Waits until the first list arrived.
    pub(crate) async fn wait_synced(&self) {
        let mut rx = self.synced.clone();
        let _ = rx.wait_for(|s| *s).await;
    }
}

/// Watches one resource, keeps the cache and calls the handlers.
pub(crate) struct Informer<K> {
    api: Api<K>,
    map: Arc<RwLock<Cache<K>>>,
    generation: Arc<AtomicU64>,
    synced_tx: watch::Sender<bool>,
    synced_rx: watch::Receiver<bool>,
    handlers: Vec<Handler<K>>,
}

impl<K> Informer<K>
where
    K: Resource + Indexed + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default,
{
    /// An informer over every object `api` lists.
    pub(crate) fn new(api: Api<K>) -> Self {
        let (synced_tx, synced_rx) = watch::channel(false);
        Informer {
            api,
            map: Arc::default(),
            generation: Arc::default(),
            synced_tx,
            synced_rx,
            handlers: Vec::new(),
        }
    }

    /// The cache.
    pub(crate) fn store(&self) -> Store<K> {
        Store {
            map: Arc::clone(&self.map),
            generation: Arc::clone(&self.generation),
            synced: self.synced_rx.clone(),
        }
    }

    /// Registers a change handler; handlers run on the informer's task, so they must be quick
    /// (enqueue a key, wake a loop).
    pub(crate) fn on_change(
        &mut self,
        handler: impl Fn(Option<&K>, Option<&K>) + Send + Sync + 'static,
    ) {
        self.handlers.push(Box::new(handler));
    }

    fn changed(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    fn notify(&self, old: Option<&K>, new: Option<&K>) {
        for h in &self.handlers {
            h(old, new);
        }
    }

    fn apply(&self, obj: K) {
        let key = key_of(&obj);
        let obj = Arc::new(obj);
        let old = self
            .map
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, Arc::clone(&obj));
        self.changed();
        self.notify(old.as_deref(), Some(&obj));
    }

    fn delete(&self, obj: &K) {
        let old = self
            .map
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&key_of(obj));
        self.changed();
        self.notify(old.as_deref().or(Some(obj)), None);
    }

    /// Replaces the cache after a (re)list: new and changed objects are updates, objects no
    /// longer listed are deletions.
    pub(crate) fn replace(&self, listed: Vec<K>) {
        let listed: HashMap<String, Arc<K>> = listed
            .into_iter()
            .map(|o| (key_of(&o), Arc::new(o)))
            .collect();
        let old = std::mem::replace(
            &mut *self.map.write().unwrap_or_else(|p| p.into_inner()),
            Cache::from_objects(listed.clone()),
        )
        .objects;
        self.changed();
        for (key, obj) in &listed {
            self.notify(old.get(key).map(|o| o.as_ref()), Some(obj));
        }
        for (key, obj) in &old {
            if !listed.contains_key(key) {
                self.notify(Some(obj), None);
            }
        }
    }

    /// Lists and watches until `cancel`; watch errors are retried with backoff (410 Gone → relist).
    /// Lists are streamed ([`InitialList::Streaming`]) until the apiserver refuses that as
    /// unsupported ([`refuses_streaming`]); from then on, for the rest of the informer's life,
    /// it lists with an ordinary LIST ([`InitialList::ListThenWatch`]).
    pub(crate) async fn run(self, cancel: CancellationToken) {
        let kind = K::kind(&K::DynamicType::default()).to_string();
        let mut strategy = InitialList::Streaming;
        loop {
            let Some(refusal) = self.follow(strategy, &kind, &cancel).await else {
                return;
            };
            // Said once: the switch is for good, so the next relist asks no more.
            tracing::info!(
                kind = %kind,
                reason = %refusal.message,
                "the apiserver does not serve streaming lists (WatchList); listing with LIST then WATCH from now on"
            );
            strategy = InitialList::ListThenWatch;
        }
    }

    /// Follows one `watcher` until `cancel` or its end (`None`), or until the apiserver refuses
    /// a streaming list as unsupported: that refusal is returned, the watcher dropped.
    async fn follow(
        &self,
        strategy: InitialList,
        kind: &str,
        cancel: &CancellationToken,
    ) -> Option<Box<Status>> {
        let stream = watcher(self.api.clone(), strategy.config()).default_backoff();
        futures::pin_mut!(stream);
        let mut buffer: Vec<K> = Vec::new();
        loop {
            let next = tokio::select! {
                _ = cancel.cancelled() => return None,
                next = stream.next() => next,
            };
            match next {
                None => return None,
                Some(Err(e)) => {
                    if strategy == InitialList::Streaming
                        && let Some(status) = streaming_refusal(&e)
                    {
                        return Some(Box::new(status.clone()));
                    }
                    tracing::warn!(kind = %kind, error = %e, "watch failed; retrying with backoff");
                }
                Some(Ok(Event::Init)) => buffer.clear(),
                Some(Ok(Event::InitApply(obj))) => buffer.push(obj),
                Some(Ok(Event::InitDone)) => {
                    self.replace(std::mem::take(&mut buffer));
                    self.synced_tx.send_replace(true);
                }
                Some(Ok(Event::Apply(obj))) => self.apply(obj),
                Some(Ok(Event::Delete(obj))) => self.delete(&obj),
            }
        }
    }
}

/// How an informer gets the objects its watch starts from, at the start and at every relist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InitialList {
    /// A streaming list (KEP-3157 WatchList): one WATCH with `sendInitialEvents=true`,
    /// `resourceVersionMatch=NotOlderThan` and `allowWatchBookmarks=true` whose initial ADDED
    /// events end at the bookmark annotated `k8s.io/initial-events-end: "true"`, then goes on
    /// as the watch. The apiserver sends the objects one event at a time from its watch cache
    /// instead of building one response holding all of them (and its memory peak with it).
    Streaming,
    /// The ordinary paginated LIST, then a WATCH from the list's resourceVersion.
    ListThenWatch,
}

impl InitialList {
    /// Both strategies ask at resourceVersion 0 (any recent state, served from the watch cache
    /// rather than a quorum read of etcd), as the informer always has.
    fn config(self) -> WatchConfig {
        match self {
            InitialList::Streaming => WatchConfig::default().streaming_lists(),
            InitialList::ListThenWatch => WatchConfig::default().any_semantic(),
        }
    }
}

/// The apiserver's refusal of a streaming list because it does not serve them, if `error` is
/// one. Only the answer to starting a watch can be one: the apiserver validates the watch's
/// options before it serves the watch (`ListResource`, k8s.io/apiserver
/// pkg/endpoints/handlers/get.go), so the refusal never arrives inside a stream.
fn streaming_refusal(error: &watcher::Error) -> Option<&Status> {
    match error {
        watcher::Error::WatchStartFailed(kube::Error::Api(status)) if refuses_streaming(status) => {
            Some(status)
        }
        _ => None,
    }
}

/// Whether `status` is how an apiserver without streaming lists answers one: the 422 `Invalid`
/// of `ListOptions.meta.k8s.io` that `ListResource` makes of `ValidateListOptions`' field
/// errors (k8s.io/apimachinery pkg/apis/meta/internalversion/validation/validation.go), every
/// cause a `FieldValueForbidden` of the two parameters such a server does not take:
///
/// - 1.27 and later with the `WatchList` feature gate off: `sendInitialEvents: Forbidden:
///   sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled`;
/// - 1.19 to 1.26, whose `ListOptions` has no `sendInitialEvents` (the decoder drops it):
///   `resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch`.
///
/// Nothing else switches the informer to LIST: not a 401/403 (credentials or RBAC, which a
/// LIST or WATCH would meet alike), a 404 (the resource is not served at all), a 429 or 5xx
/// (load and failures, retried with backoff), a network error, nor a 422 with any other
/// cause (a request the server does support but found wrong). client-go's reflector
/// (`ListAndWatchWithContext` in k8s.io/client-go tools/cache/reflector.go) falls back to a
/// LIST on any error of its watch-list attempt except the ones it retries (connection refused,
/// 429, expired or too-large resourceVersion), and tries streaming again at the next relist;
/// this follows it in falling back rather than retrying a refusal forever, but only on the
/// refusal that says the server lacks the feature, and for good, since a server's version and
/// feature gates do not change under a running informer often enough to pay a refused request
/// at every relist.
fn refuses_streaming(status: &Status) -> bool {
    status.code == 422
        && status.reason == "Invalid"
        && status.details.as_ref().is_some_and(|d| {
            d.group == "meta.k8s.io"
                && d.kind == "ListOptions"
                && !d.causes.is_empty()
                && d.causes.iter().all(|c| {
                    c.reason == "FieldValueForbidden"
                        && matches!(
                            c.field.as_str(),
                            "sendInitialEvents" | "resourceVersionMatch"
                        )
                })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An informer whose API is never called: the tests drive `apply`, `delete` and `replace`
    /// as the watch loop would.
    fn node_informer() -> Informer<Node> {
        let config = kube::Config::new("http://127.0.0.1:1".parse().expect("a URL"));
        let client = kube::Client::try_from(config).expect("a client");
        Informer::new(Api::all(client))
    }

    fn node(name: &str, provider_id: Option<&str>) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"providerID": provider_id},
        }))
        .expect("a node")
    }

    fn holders(store: &Store<Node>, id: &str) -> Vec<String> {
        store.by_index(id).iter().map(|n| n.name_any()).collect()
    }

    #[tokio::test]
    async fn the_provider_id_index_follows_every_change() {
        let informer = node_informer();
        let store = informer.store();
        informer.replace(vec![
            node("a", Some("p://1")),
            node("b", Some("p://2")),
            node("c", None),
        ]);
        assert_eq!(holders(&store, "p://1"), ["a"]);
        assert_eq!(holders(&store, "p://2"), ["b"]);
        assert!(holders(&store, "p://3").is_empty());

        // A node whose provider ID changes moves from the old ID to the new one.
        informer.apply(node("a", Some("p://3")));
        assert!(holders(&store, "p://1").is_empty());
        assert_eq!(holders(&store, "p://3"), ["a"]);

        // A node that gets an ID is indexed; an update that keeps it keeps one entry.
        informer.apply(node("c", Some("p://4")));
        informer.apply(node("c", Some("p://4")));
        assert_eq!(holders(&store, "p://4"), ["c"]);

        // Two nodes with the same ID are both found, in name order.
        informer.apply(node("d", Some("p://2")));
        assert_eq!(holders(&store, "p://2"), ["b", "d"]);

        // A deleted node is no longer found; the other holder of its ID still is.
        informer.delete(&node("b", Some("p://2")));
        assert_eq!(holders(&store, "p://2"), ["d"]);
        // The cached object decides what is unindexed, not the (possibly stale) deleted one.
        informer.delete(&node("d", Some("p://stale")));
        assert!(holders(&store, "p://2").is_empty());
        // Deleting a node the cache never had changes nothing.
        informer.delete(&node("zz", Some("p://3")));
        assert_eq!(holders(&store, "p://3"), ["a"]);

        // A relist rebuilds the index from the listed nodes alone.
        informer.replace(vec![node("e", Some("p://3"))]);
        assert_eq!(holders(&store, "p://3"), ["e"]);
        assert!(holders(&store, "p://4").is_empty());
        let cache = informer.map.read().unwrap_or_else(|p| p.into_inner());
        assert_eq!(cache.index.len(), 1, "no empty buckets are kept");
    }

    /// A `Status` body as the apiserver sends it.
    fn status(body: serde_json::Value) -> Status {
        serde_json::from_value(body).expect("a Status")
    }

    /// The 422 of `ListResource` for `ValidateListOptions`' field errors `(field, reason, text)`.
    fn list_options_invalid(causes: &[(&str, &str, &str)]) -> Status {
        let message = causes
            .iter()
            .map(|(field, _, text)| format!("{field}: {text}"))
            .collect::<Vec<_>>()
            .join(", ");
        status(json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("ListOptions.meta.k8s.io \"\" is invalid: {message}"),
            "reason": "Invalid",
            "details": {
                "group": "meta.k8s.io", "kind": "ListOptions",
                "causes": causes.iter().map(|(field, reason, text)| json!({
                    "reason": reason, "message": text, "field": field,
                })).collect::<Vec<_>>(),
            },
            "code": 422,
        }))
    }

    fn simple(code: u16, reason: &str, message: &str) -> Status {
        status(json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code,
        }))
    }

    fn start_failed(status: Status) -> watcher::Error {
        watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(status)))
    }

    const GATE_OFF: (&str, &str, &str) = (
        "sendInitialEvents",
        "FieldValueForbidden",
        "Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
    );
    const BEFORE_1_27: (&str, &str, &str) = (
        "resourceVersionMatch",
        "FieldValueForbidden",
        "Forbidden: resourceVersionMatch is forbidden for watch",
    );

    #[test]
    fn the_refusals_of_servers_without_watch_list_switch_to_list() {
        for causes in [&[GATE_OFF][..], &[BEFORE_1_27][..]] {
            let refusal = start_failed(list_options_invalid(causes));
            assert!(
                streaming_refusal(&refusal).is_some(),
                "not taken for a refusal: {causes:?}"
            );
        }
    }

    #[test]
    fn other_errors_do_not_switch_to_list() {
        let not_refusals = [
            // A 422 of ListOptions that names another parameter: the request is wrong, not
            // unsupported (alone, or beside a cause that would be a refusal).
            list_options_invalid(&[(
                "allowWatchBookmarks",
                "FieldValueForbidden",
                "Forbidden: sendInitialEvents requires setting allowWatchBookmarks to true",
            )]),
            list_options_invalid(&[
                GATE_OFF,
                ("fieldSelector", "FieldValueInvalid", "Invalid value: \"x\""),
            ]),
            // A value the server knows but refuses, not a parameter it does not take.
            list_options_invalid(&[(
                "resourceVersionMatch",
                "FieldValueNotSupported",
                "Unsupported value: \"Exact\": supported values: \"NotOlderThan\"",
            )]),
            list_options_invalid(&[]),
            // A 422 without the ListOptions details, e.g. from a proxy or an injected fault.
            simple(422, "Invalid", "sendInitialEvents is forbidden for watch"),
            // Naming the parameter is not enough at any other code.
            simple(400, "BadRequest", "sendInitialEvents: unknown parameter"),
            simple(401, "Unauthorized", "Unauthorized"),
            simple(
                403,
                "Forbidden",
                "nodes is forbidden: User \"ccm\" cannot watch resource \"nodes\" in API group \"\" at the cluster scope",
            ),
            simple(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ),
            simple(
                429,
                "TooManyRequests",
                "Too many requests, please try again later.",
            ),
            simple(
                500,
                "InternalError",
                "Internal error occurred: sendInitialEvents",
            ),
            simple(
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
            ),
        ];
        for s in not_refusals {
            assert!(
                streaming_refusal(&start_failed(s.clone())).is_none(),
                "taken for a refusal: {s:?}"
            );
        }

        // The refusal itself, but not as the answer to starting a watch: an ERROR event inside
        // a stream, a failing stream or a failed LIST are something else.
        let refusal = list_options_invalid(&[GATE_OFF]);
        for e in [
            watcher::Error::WatchError(Box::new(refusal.clone())),
            watcher::Error::WatchFailed(kube::Error::Api(Box::new(refusal.clone()))),
            watcher::Error::InitialListFailed(kube::Error::Api(Box::new(refusal))),
        ] {
            assert!(streaming_refusal(&e).is_none(), "taken for a refusal: {e}");
        }

        // A network error starting the watch.
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let e = watcher::Error::WatchStartFailed(kube::Error::Service(Box::new(refused)));
        assert!(streaming_refusal(&e).is_none());
    }

    #[test]
    fn both_strategies_list_at_any_recent_version() {
        use kube::runtime::watcher::{InitialListStrategy, ListSemantic};
        let streaming = InitialList::Streaming.config();
        assert_eq!(
            streaming.initial_list_strategy,
            InitialListStrategy::StreamingList
        );
        assert!(streaming.bookmarks, "a streaming list ends at a bookmark");
        let listing = InitialList::ListThenWatch.config();
        assert_eq!(
            listing.initial_list_strategy,
            InitialListStrategy::ListWatch
        );
        assert_eq!(listing.list_semantic, ListSemantic::Any);
    }
}
