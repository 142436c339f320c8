//! One watch per resource shared by every controller: a cache of the objects and change
//! callbacks with the old and the new object, like client-go's shared informers.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{Config as WatchConfig, Event, watcher};
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

/// A read-only view of an informer's cache.
pub(crate) struct Store<K> {
    map: Arc<RwLock<HashMap<String, Arc<K>>>>,
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
            .get(key)
            .cloned()
    }

    /// The first cached object `pred` accepts, found under the read lock without copying the
    /// cache (a look-up per node initialisation must not cost a list of every node).
    pub(crate) fn find(&self, mut pred: impl FnMut(&K) -> bool) -> Option<Arc<K>> {
        self.map
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .find(|o| pred(o))
            .cloned()
    }

    /// Every cached object.
    pub(crate) fn list(&self) -> Vec<Arc<K>> {
        self.map
            .read()
            .unwrap_or_else(|p| p.into_inner())
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
    map: Arc<RwLock<HashMap<String, Arc<K>>>>,
    generation: Arc<AtomicU64>,
    synced_tx: watch::Sender<bool>,
    synced_rx: watch::Receiver<bool>,
    handlers: Vec<Handler<K>>,
}

impl<K> Informer<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
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
    fn replace(&self, listed: Vec<K>) {
        let listed: HashMap<String, Arc<K>> = listed
            .into_iter()
            .map(|o| (key_of(&o), Arc::new(o)))
            .collect();
        let old = std::mem::replace(
            &mut *self.map.write().unwrap_or_else(|p| p.into_inner()),
            listed.clone(),
        );
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
    pub(crate) async fn run(self, cancel: CancellationToken) {
        let kind = K::kind(&K::DynamicType::default()).to_string();
        let stream =
            watcher(self.api.clone(), WatchConfig::default().any_semantic()).default_backoff();
        futures::pin_mut!(stream);
        let mut buffer: Vec<K> = Vec::new();
        loop {
            let next = tokio::select! {
                _ = cancel.cancelled() => return,
                next = stream.next() => next,
            };
            match next {
                None => return,
                Some(Err(e)) => {
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
