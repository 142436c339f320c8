//! One runner for every queue-driven controller: the work queue (per-key serialisation,
//! coalescing), the workers, the retry (a driver's exact `retry-after`, else a per-key
//! exponential backoff, optionally paced by a token bucket) and the workqueue metrics. A
//! controller supplies only `reconcile(key)` and, if it reports failures itself, `on_error`.
//!
//! Why not kube-runtime's `Controller`: it triggers on every change of a watched object, while
//! upstream's service controller decides from the old and the new object together
//! (`needsUpdate`), skips its own annotation writes and coalesces node changes into one backend
//! pass; its reflector would be a second cache beside the informers that already stream lists
//! with a fallback (`informer.rs`); and its error policy has no global token bucket beside the
//! per-key backoff, which upstream's node controller uses. The queue keeps client-go's
//! guarantees (`queue.rs`), which is what the runner needs from kube-runtime's scheduler.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::machinery::error::ReconcileError;
use crate::machinery::queue::{Backoff, WorkQueue};
use crate::metrics::Metrics;
use wasm_ccm_runtime::TokenBucket;

/// What to do with a key after a successful reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Nothing until the next change.
    Done,
    /// Look again after this long (a periodic check of one object).
    #[allow(dead_code)] // no controller needs it yet; the runner handles it for the next one
    RequeueAfter(Duration),
}

/// A controller's reconcile body, run by the [`Runner`].
pub(crate) trait Reconciler: Send + Sync + 'static {
    /// Brings the object behind `key` to its desired state.
    fn reconcile<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Action, ReconcileError>>;

    /// Runs after a failure, before the retry is scheduled: the controller's Warning event.
    fn on_error<'a>(&'a self, _key: &'a str, _error: &'a ReconcileError) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

/// How a runner retries a failed key.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RetryPolicy {
    /// The first backoff delay; doubled per consecutive failure of a key.
    pub(crate) base: Duration,
    /// The longest backoff delay.
    pub(crate) cap: Duration,
    /// A global token bucket (qps, burst) every retry also waits for, as client-go's default
    /// controller rate limiter; `None` for the per-key backoff alone.
    pub(crate) bucket: Option<(f64, u32)>,
}

/// The queue and retry state of one controller; the reconciler holds an `Arc` of it to enqueue.
pub(crate) struct Runner {
    name: String,
    /// The kind of the objects its keys name (`Node`, `Service`), for the reconcile span.
    kind: &'static str,
    queue: Arc<WorkQueue<String>>,
    backoff: Backoff<String>,
    bucket: Option<TokenBucket>,
    metrics: Arc<Metrics>,
}

impl Runner {
    /// A runner whose metrics and logs say `name` (upstream's queue names: `node`, `service`)
    /// over keys of objects of `kind`.
    pub(crate) fn new(
        name: impl Into<String>,
        kind: &'static str,
        policy: RetryPolicy,
        metrics: Arc<Metrics>,
    ) -> Arc<Self> {
        Arc::new(Runner {
            name: name.into(),
            kind,
            queue: WorkQueue::new(),
            backoff: Backoff::new(policy.base, policy.cap),
            bucket: policy
                .bucket
                .map(|(qps, burst)| TokenBucket::new(qps, burst)),
            metrics,
        })
    }

    /// Adds `key` now (coalesces with a waiting add; a key in flight runs once more after).
    pub(crate) fn enqueue(&self, key: String) {
        if self.queue.add(key) {
            self.metrics
                .inc("workqueue_adds_total", &[("name", &self.name)]);
        }
    }

    /// Adds `key` after `delay` (an earlier pending add wins).
    pub(crate) fn enqueue_after(&self, key: String, delay: Duration) {
        self.queue.add_after(key, delay);
    }

    /// Sets the gauges read rather than kept (before a scrape, `RunningView::export_metrics`):
    /// client-go's `workqueue_unfinished_work_seconds` and
    /// `workqueue_longest_running_processor_seconds`, from the keys in flight now.
    pub(crate) fn export_in_flight(&self) {
        let (unfinished, longest) = self.queue.in_flight();
        let labels = [("name", self.name.as_str())];
        self.metrics.set(
            "workqueue_unfinished_work_seconds",
            &labels,
            unfinished.as_secs_f64(),
        );
        self.metrics.set(
            "workqueue_longest_running_processor_seconds",
            &labels,
            longest.as_secs_f64(),
        );
    }

    /// Keys waiting, in flight or delayed: zero means the controller is idle.
    pub(crate) fn pending(&self) -> usize {
        self.queue.pending()
    }

    /// Keys waiting for a worker (not in flight, not delayed).
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.queue.len()
    }

    /// Runs `workers` workers over `reconciler` until `cancel`, then waits for them.
    pub(crate) async fn run<R: Reconciler>(
        self: Arc<Self>,
        reconciler: Arc<R>,
        workers: usize,
        cancel: CancellationToken,
    ) {
        let mut tasks = Vec::new();
        for _ in 0..workers.max(1) {
            let me = Arc::clone(&self);
            let reconciler = Arc::clone(&reconciler);
            tasks.push(tokio::spawn(async move { me.worker(reconciler).await }));
        }
        cancel.cancelled().await;
        self.queue.close();
        for t in tasks {
            let _ = t.await;
        }
    }

    async fn worker<R: Reconciler>(&self, reconciler: Arc<R>) {
        while let Some((key, waited)) = self.queue.get_timed().await {
            let labels = [("name", self.name.as_str())];
            self.metrics.observe(
                "workqueue_queue_duration_seconds",
                &labels,
                waited.as_secs_f64(),
            );
            // One root span per reconcile of one object: the driver calls and Kubernetes
            // requests of the reconcile are its children, and its log lines carry its trace ID.
            let span = reconcile_span(&self.name, self.kind, &key);
            let started = tokio::time::Instant::now();
            let result = reconciler.reconcile(&key).instrument(span.clone()).await;
            self.metrics.observe(
                "workqueue_work_duration_seconds",
                &labels,
                started.elapsed().as_secs_f64(),
            );
            let outcome = match &result {
                Ok(_) => "ok",
                Err(e) => e.kind.label(),
            };
            if !span.is_disabled() {
                span.record("wasm_ccm.outcome", outcome);
                // Work in progress (a load balancer provisioning) is not a failure of the trace.
                if let Err(e) = &result
                    && !e.in_progress()
                {
                    span.record("error.type", outcome);
                    span.record("otel.status_code", "ERROR");
                }
            }
            match result {
                Ok(Action::Done) => self.backoff.forget(&key),
                Ok(Action::RequeueAfter(delay)) => {
                    self.backoff.forget(&key);
                    self.queue.add_after(key.clone(), delay);
                }
                Err(e) => {
                    reconciler.on_error(&key, &e).instrument(span.clone()).await;
                    let delay = self.retry_delay(&key, &e);
                    let _in_span = span.enter();
                    if e.in_progress() {
                        tracing::info!(controller = %self.name, key = %key, reason = %e.message, retry_in = ?delay, "work in progress");
                    } else {
                        tracing::warn!(controller = %self.name, key = %key, kind = e.kind.label(), error = %e.message, retry_in = ?delay, "failed to sync");
                    }
                    self.metrics
                        .inc("workqueue_retries_total", &[("name", &self.name)]);
                    self.metrics.inc(
                        "wasm_ccm_reconcile_errors_total",
                        &[("controller", &self.name), ("kind", e.kind.label())],
                    );
                    self.queue.add_after(key.clone(), delay);
                }
            }
            self.queue.done(&key);
            self.metrics.set(
                "workqueue_depth",
                &[("name", &self.name)],
                self.queue.len() as f64,
            );
        }
    }

    /// The driver's requested delay exactly; else the key's backoff, paced by the bucket.
    fn retry_delay(&self, key: &String, e: &ReconcileError) -> Duration {
        if let Some(delay) = e.retry_after {
            return delay;
        }
        let backoff = self.backoff.next_delay(key);
        match &self.bucket {
            Some(bucket) => backoff.max(bucket.reserve()),
            None => backoff,
        }
    }
}

/// The `reconcile` span of one object (see `wasm_ccm_runtime::trace`): a root, because a work
/// item is not caused by whatever span enqueued it. `key` is `namespace/name` or `name`.
pub(crate) fn reconcile_span(controller: &str, kind: &str, key: &str) -> tracing::Span {
    let (namespace, name) = match key.split_once('/') {
        Some((namespace, name)) => (Some(namespace), Some(name)),
        None => (None, (!key.is_empty()).then_some(key)),
    };
    // Every attribute known now is set at creation (one dispatch); only the outcome comes later.
    tracing::trace_span!(
        target: wasm_ccm_runtime::trace::TARGET,
        parent: None,
        "reconcile",
        otel.kind = "internal",
        wasm_ccm.controller = controller,
        wasm_ccm.object.kind = kind,
        wasm_ccm.object.namespace = namespace,
        wasm_ccm.object.name = name,
        wasm_ccm.outcome = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use wasm_ccm_runtime::CallError;
    use wasm_ccm_runtime::types::{ProviderError, Retry};

    /// Fails each key a scripted number of times, recording when each attempt ran.
    struct Scripted {
        failures: Mutex<std::collections::HashMap<String, Vec<ReconcileError>>>,
        attempts: Mutex<Vec<(String, tokio::time::Instant)>>,
        errors_seen: Mutex<Vec<String>>,
    }

    impl Reconciler for Scripted {
        fn reconcile<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Action, ReconcileError>> {
            Box::pin(async move {
                self.attempts
                    .lock()
                    .unwrap()
                    .push((key.to_string(), tokio::time::Instant::now()));
                match self
                    .failures
                    .lock()
                    .unwrap()
                    .get_mut(key)
                    .and_then(Vec::pop)
                {
                    Some(e) => Err(e),
                    None => Ok(Action::Done),
                }
            })
        }

        fn on_error<'a>(&'a self, key: &'a str, error: &'a ReconcileError) -> BoxFuture<'a, ()> {
            Box::pin(async move {
                self.errors_seen
                    .lock()
                    .unwrap()
                    .push(format!("{key}: {}", error.kind.label()));
            })
        }
    }

    fn driver_error(e: ProviderError) -> ReconcileError {
        ReconcileError::driver("failed".into(), &CallError::Provider(e))
    }

    async fn settle(runner: &Runner) {
        for _ in 0..10_000 {
            if runner.pending() == 0 {
                return;
            }
            tokio::time::advance(Duration::from_millis(100)).await;
            tokio::task::yield_now().await;
        }
        panic!("the runner never went idle");
    }

    #[tokio::test(start_paused = true)]
    async fn retries_back_off_exactly_and_are_counted_by_kind() {
        let metrics = Arc::new(Metrics::default());
        let runner = Runner::new(
            "service",
            "Service",
            RetryPolicy {
                base: Duration::from_secs(5),
                cap: Duration::from_secs(300),
                bucket: None,
            },
            Arc::clone(&metrics),
        );
        let scripted = Arc::new(Scripted {
            // Popped from the end: transient, then retry-after 7 s, then success.
            failures: Mutex::new(
                [(
                    "a".to_string(),
                    vec![
                        driver_error(ProviderError::RetryAfter(Retry {
                            seconds: 7,
                            reason: "building".into(),
                        })),
                        driver_error(ProviderError::Transient("flaky".into())),
                    ],
                )]
                .into(),
            ),
            attempts: Mutex::default(),
            errors_seen: Mutex::default(),
        });
        let cancel = CancellationToken::new();
        let task = tokio::spawn(Arc::clone(&runner).run(Arc::clone(&scripted), 2, cancel.clone()));
        runner.enqueue("a".into());
        runner.enqueue("a".into());
        settle(&runner).await;
        let attempts = scripted.attempts.lock().unwrap().clone();
        assert_eq!(
            attempts.len(),
            3,
            "two failures then a success: {attempts:?}"
        );
        let gaps: Vec<Duration> = attempts.windows(2).map(|w| w[1].1 - w[0].1).collect();
        // The backoff's first step (5 s), then exactly the driver's 7 s.
        assert!(
            gaps[0] >= Duration::from_secs(5) && gaps[0] < Duration::from_millis(5_200),
            "{gaps:?}"
        );
        assert!(
            gaps[1] >= Duration::from_secs(7) && gaps[1] < Duration::from_millis(7_200),
            "{gaps:?}"
        );
        assert_eq!(
            *scripted.errors_seen.lock().unwrap(),
            ["a: transient", "a: in-progress"]
        );
        let text = metrics.render();
        assert!(
            text.contains(
                "wasm_ccm_reconcile_errors_total{controller=\"service\",kind=\"transient\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "wasm_ccm_reconcile_errors_total{controller=\"service\",kind=\"in-progress\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("workqueue_adds_total{name=\"service\"} 1"),
            "{text}"
        );
        cancel.cancel();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_is_never_reconciled_by_two_workers_at_once() {
        struct Slow {
            running: Mutex<std::collections::HashSet<String>>,
            overlaps: Mutex<u32>,
            runs: Mutex<u32>,
        }
        impl Reconciler for Slow {
            fn reconcile<'a>(
                &'a self,
                key: &'a str,
            ) -> BoxFuture<'a, Result<Action, ReconcileError>> {
                Box::pin(async move {
                    if !self.running.lock().unwrap().insert(key.to_string()) {
                        *self.overlaps.lock().unwrap() += 1;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    self.running.lock().unwrap().remove(key);
                    *self.runs.lock().unwrap() += 1;
                    Ok(Action::Done)
                })
            }
        }
        let runner = Runner::new(
            "node",
            "Node",
            RetryPolicy {
                base: Duration::from_millis(5),
                cap: Duration::from_secs(1000),
                bucket: Some((10.0, 100)),
            },
            Arc::new(Metrics::default()),
        );
        let slow = Arc::new(Slow {
            running: Mutex::default(),
            overlaps: Mutex::default(),
            runs: Mutex::default(),
        });
        let cancel = CancellationToken::new();
        let task = tokio::spawn(Arc::clone(&runner).run(Arc::clone(&slow), 4, cancel.clone()));
        runner.enqueue("n".into());
        tokio::time::advance(Duration::from_millis(10)).await;
        tokio::task::yield_now().await;
        // Added while in flight: runs once more afterwards, never beside the first run.
        runner.enqueue("n".into());
        runner.enqueue("n".into());
        settle(&runner).await;
        assert_eq!(*slow.overlaps.lock().unwrap(), 0);
        assert_eq!(*slow.runs.lock().unwrap(), 2);
        cancel.cancel();
        task.await.unwrap();
    }

    /// client-go's work queue figures: how long keys waited and ran (histograms), and the work
    /// in flight when scraped (gauges read from the queue at render).
    #[tokio::test(start_paused = true)]
    async fn queue_wait_work_time_and_work_in_flight_are_measured() {
        struct OneSecond;
        impl Reconciler for OneSecond {
            fn reconcile<'a>(
                &'a self,
                _key: &'a str,
            ) -> BoxFuture<'a, Result<Action, ReconcileError>> {
                Box::pin(async move {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    Ok(Action::Done)
                })
            }
        }
        let metrics = Arc::new(Metrics::default());
        let policy = RetryPolicy {
            base: Duration::from_millis(5),
            cap: Duration::from_secs(1),
            bucket: None,
        };
        let runner = Runner::new("node", "Node", policy, Arc::clone(&metrics));
        let cancel = CancellationToken::new();
        // One worker, two keys: the second waits for the first's second.
        let task = tokio::spawn(Arc::clone(&runner).run(Arc::new(OneSecond), 1, cancel.clone()));
        runner.enqueue("a".into());
        runner.enqueue("b".into());
        tokio::time::sleep(Duration::from_millis(500)).await;
        runner.export_in_flight();
        let text = metrics.render();
        assert!(
            text.contains("workqueue_unfinished_work_seconds{name=\"node\"} 0.5\n"),
            "{text}"
        );
        assert!(
            text.contains("workqueue_longest_running_processor_seconds{name=\"node\"} 0.5\n"),
            "{text}"
        );
        settle(&runner).await;
        runner.export_in_flight();
        let text = metrics.render();
        // "a" waited 0 s, "b" 1 s; each ran 1 s.
        for line in [
            "workqueue_queue_duration_seconds_bucket{name=\"node\",le=\"0.1\"} 1\n",
            "workqueue_queue_duration_seconds_bucket{name=\"node\",le=\"1\"} 2\n",
            "workqueue_queue_duration_seconds_sum{name=\"node\"} 1\n",
            "workqueue_work_duration_seconds_bucket{name=\"node\",le=\"0.1\"} 0\n",
            "workqueue_work_duration_seconds_sum{name=\"node\"} 2\n",
            "workqueue_work_duration_seconds_count{name=\"node\"} 2\n",
            "workqueue_unfinished_work_seconds{name=\"node\"} 0\n",
        ] {
            assert!(text.contains(line), "{line}in\n{text}");
        }
        cancel.cancel();
        task.await.unwrap();
    }
}
