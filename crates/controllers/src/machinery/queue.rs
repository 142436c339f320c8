//! A work queue with client-go's guarantees: a key is never processed by two workers at once,
//! keys added while queued coalesce, a key added while being processed is processed once more
//! afterwards, and retries wait for a per-key exponential backoff.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Per-key exponential backoff: `base · 2^failures`, capped.
#[derive(Debug)]
pub(crate) struct Backoff<K> {
    base: Duration,
    cap: Duration,
    failures: Mutex<HashMap<K, u32>>,
}

impl<K: Hash + Eq + Clone> Backoff<K> {
    /// A backoff from `base` doubling up to `cap`.
    pub(crate) fn new(base: Duration, cap: Duration) -> Self {
        Backoff {
            base,
            cap,
            failures: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<K, u32>> {
        self.failures.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a failure of `key` and returns how long to wait before the next try.
    pub(crate) fn next_delay(&self, key: &K) -> Duration {
        let mut failures = self.lock();
        let n = failures.entry(key.clone()).or_insert(0);
        let delay = self
            .base
            .checked_mul(1u32.checked_shl(*n).unwrap_or(u32::MAX))
            .unwrap_or(self.cap)
            .min(self.cap);
        *n = n.saturating_add(1);
        delay
    }

    /// Forgets `key`'s failures (after a success).
    pub(crate) fn forget(&self, key: &K) {
        self.lock().remove(key);
    }
}

struct State<K> {
    /// Keys ready for a worker, with when each was added (for the queue-wait histogram).
    ready: VecDeque<(K, Instant)>,
    queued: HashSet<K>,
    /// Keys with a worker, with when it took each (for the in-flight gauges).
    processing: HashMap<K, Instant>,
    /// Keys added while being processed, with when they were added.
    dirty: HashMap<K, Instant>,
    /// The earliest pending delayed add per key (a later one is dropped: earliest wins).
    delayed: HashMap<K, Instant>,
    closed: bool,
}

/// A deduplicating work queue of keys.
pub(crate) struct WorkQueue<K> {
    state: Mutex<State<K>>,
    notify: Notify,
}

impl<K: Hash + Eq + Clone + Send + Sync + 'static> WorkQueue<K> {
    /// An empty queue.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(WorkQueue {
            state: Mutex::new(State {
                ready: VecDeque::new(),
                queued: HashSet::new(),
                processing: HashMap::new(),
                dirty: HashMap::new(),
                delayed: HashMap::new(),
                closed: false,
            }),
            notify: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `key` now. Returns whether it was new (not already waiting).
    pub(crate) fn add(&self, key: K) -> bool {
        self.add_since(key, Instant::now())
    }

    /// Adds `key`, counting its wait from `since` (when it was first asked for).
    fn add_since(&self, key: K, since: Instant) -> bool {
        let mut s = self.lock();
        if s.closed || s.queued.contains(&key) {
            return false;
        }
        if s.processing.contains_key(&key) {
            if s.dirty.contains_key(&key) {
                return false;
            }
            s.dirty.insert(key, since);
            return true;
        }
        s.queued.insert(key.clone());
        s.ready.push_back((key, since));
        drop(s);
        self.notify.notify_one();
        true
    }

    /// Adds `key` after `delay` (immediately when zero). A pending earlier add wins.
    pub(crate) fn add_after(self: &Arc<Self>, key: K, delay: Duration) {
        if delay.is_zero() {
            self.add(key);
            return;
        }
        let due = Instant::now() + delay;
        {
            let mut s = self.lock();
            if s.closed {
                return;
            }
            match s.delayed.get(&key) {
                Some(existing) if *existing <= due => return,
                _ => {
                    s.delayed.insert(key.clone(), due);
                }
            }
        }
        let queue = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep_until(due).await;
            let fire = {
                let mut s = queue.lock();
                if s.delayed.get(&key) == Some(&due) {
                    s.delayed.remove(&key);
                    true
                } else {
                    false
                }
            };
            if fire {
                queue.add(key);
            }
        });
    }

    /// Waits for the next key; `None` once the queue is closed.
    #[cfg(test)]
    pub(crate) async fn get(&self) -> Option<K> {
        self.get_timed().await.map(|(key, _)| key)
    }

    /// Waits for the next key and says how long it waited since it was added; `None` once
    /// the queue is closed.
    pub(crate) async fn get_timed(&self) -> Option<(K, Duration)> {
        loop {
            let notified = self.notify.notified();
            {
                let mut s = self.lock();
                if s.closed {
                    return None;
                }
                if let Some((key, since)) = s.ready.pop_front() {
                    s.queued.remove(&key);
                    let now = Instant::now();
                    s.processing.insert(key.clone(), now);
                    if !s.ready.is_empty() {
                        // Wake another worker for the rest.
                        self.notify.notify_one();
                    }
                    return Some((key, now.saturating_duration_since(since)));
                }
            }
            notified.await;
        }
    }

    /// Marks `key` processed; if it was added meanwhile it goes back in the queue (its wait
    /// counted from that add, as client-go counts it).
    pub(crate) fn done(&self, key: &K) {
        let again = {
            let mut s = self.lock();
            s.processing.remove(key);
            s.dirty.remove(key)
        };
        if let Some(since) = again {
            self.add_since(key.clone(), since);
        }
    }

    /// The keys being processed: the sum of how long each has been, and the longest
    /// (client-go's `unfinished_work_seconds` and `longest_running_processor_seconds`).
    pub(crate) fn in_flight(&self) -> (Duration, Duration) {
        let now = Instant::now();
        let s = self.lock();
        s.processing
            .values()
            .map(|started| now.saturating_duration_since(*started))
            .fold((Duration::ZERO, Duration::ZERO), |(sum, longest), d| {
                (sum + d, longest.max(d))
            })
    }

    /// Keys waiting now (not counting delayed ones).
    pub(crate) fn len(&self) -> usize {
        self.lock().ready.len()
    }

    /// Whether no key waits.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys waiting, being processed or delayed: zero means the queue is idle.
    pub(crate) fn pending(&self) -> usize {
        let s = self.lock();
        s.ready.len() + s.processing.len() + s.delayed.len()
    }

    /// Stops the queue: workers waiting in [`WorkQueue::get`] return `None`.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.notify.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap_and_resets() {
        let b = Backoff::new(Duration::from_millis(5), Duration::from_secs(1000));
        let k = "n".to_string();
        let delays: Vec<_> = (0..4).map(|_| b.next_delay(&k)).collect();
        assert_eq!(delays, [5, 10, 20, 40].map(Duration::from_millis).to_vec());
        for _ in 0..40 {
            b.next_delay(&k);
        }
        assert_eq!(b.next_delay(&k), Duration::from_secs(1000));
        b.forget(&k);
        assert_eq!(b.next_delay(&k), Duration::from_millis(5));
        let svc = Backoff::new(Duration::from_secs(5), Duration::from_secs(300));
        let d: Vec<_> = (0..8).map(|_| svc.next_delay(&k).as_secs()).collect();
        assert_eq!(d, vec![5, 10, 20, 40, 80, 160, 300, 300]);
    }

    #[tokio::test]
    async fn keys_coalesce_and_are_redone_after_a_concurrent_add() {
        let q = WorkQueue::new();
        assert!(q.add("a"));
        assert!(!q.add("a"), "a queued key coalesces");
        q.add("b");
        assert_eq!(q.get().await, Some("a"));
        // Added while processing: not handed to another worker now…
        assert!(q.add("a"));
        assert_eq!(q.get().await, Some("b"));
        assert!(q.is_empty());
        // …but again once the first run is done.
        q.done(&"a");
        assert_eq!(q.get().await, Some("a"));
        q.done(&"a");
        q.done(&"b");
        assert_eq!(q.pending(), 0);
        q.close();
        assert_eq!(q.get().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_adds_fire_once_and_the_earliest_wins() {
        let q = WorkQueue::new();
        q.add_after("a", Duration::from_secs(10));
        q.add_after("a", Duration::from_secs(2));
        q.add_after("a", Duration::from_secs(5));
        assert_eq!(q.pending(), 1);
        tokio::time::advance(Duration::from_secs(3)).await;
        tokio::task::yield_now().await;
        assert_eq!(q.len(), 1);
        assert_eq!(q.get().await, Some("a"));
        q.done(&"a");
        tokio::time::advance(Duration::from_secs(10)).await;
        tokio::task::yield_now().await;
        assert!(q.is_empty(), "the later delayed adds were dropped");
    }
}
