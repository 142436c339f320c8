//! The request log (a bounded ring of recent requests) and always-on counters.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use serde::Serialize;

use super::request::Verb;
use super::resources::RESOURCES;

/// Requests kept in the log; older ones are dropped first.
pub const LOG_CAPACITY: usize = 10_000;
/// Request bodies longer than this are cut in the log.
const BODY_LIMIT: usize = 64 * 1024;

/// One logged request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestRecord {
    /// Position in the sequence of all requests since start (not reset by clearing).
    pub seq: u64,
    /// HTTP method.
    pub method: String,
    /// Path, e.g. `/api/v1/nodes/n1/status`.
    pub path: String,
    /// Raw query string (without `?`), empty if none.
    pub query: String,
    /// Kubernetes verb, if the path addressed a resource.
    pub verb: Option<Verb>,
    /// Plural resource name, if any (`nodes`; group-qualified for non-core: `leases.coordination.k8s.io`).
    pub resource: Option<String>,
    /// Namespace, if any.
    pub namespace: Option<String>,
    /// Object name, if any.
    pub name: Option<String>,
    /// Subresource, if any.
    pub subresource: Option<String>,
    /// HTTP status of the response (for watches: of the response head).
    pub status: u16,
    /// `Content-Type` of the request (tells the patch flavour).
    pub content_type: Option<String>,
    /// Body of a mutating request, as text (cut at 64 KiB).
    pub body: Option<String>,
    /// The `Authorization` header, if any (anything is accepted).
    pub authorization: Option<String>,
    /// The `User-Agent` header, if any.
    pub user_agent: Option<String>,
    /// Whether an injected fault answered this request.
    pub faulted: bool,
    /// Position in the order requests arrived in (before any injected latency), since start;
    /// `seq` is the order they were answered in. A write that arrived before another but was
    /// answered after it shows here.
    pub arrival: u64,
    /// Injected latency this request waited, in milliseconds.
    pub delay_ms: u64,
}

/// Request totals by verb.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RequestCounts {
    /// GET of one object.
    pub get: u64,
    /// GET of a collection.
    pub list: u64,
    /// Watch requests.
    pub watch: u64,
    /// POST.
    pub create: u64,
    /// PUT.
    pub update: u64,
    /// PATCH.
    pub patch: u64,
    /// DELETE.
    pub delete: u64,
    /// Discovery, health and unknown paths.
    pub other: u64,
    /// Responses with status ≥ 400 (injected faults included).
    pub errors: u64,
}

impl RequestCounts {
    /// get + list.
    pub fn reads(&self) -> u64 {
        self.get + self.list
    }

    /// create + update + patch + delete.
    pub fn mutations(&self) -> u64 {
        self.create + self.update + self.patch + self.delete
    }

    /// Every request.
    pub fn total(&self) -> u64 {
        self.reads() + self.watch + self.mutations() + self.other
    }
}

const SLOTS: usize = 9;

fn slot(verb: Option<Verb>) -> usize {
    match verb {
        Some(Verb::Get) => 0,
        Some(Verb::List) => 1,
        Some(Verb::Watch) => 2,
        Some(Verb::Create) => 3,
        Some(Verb::Update) => 4,
        Some(Verb::Patch) => 5,
        Some(Verb::Delete) => 6,
        None => 7,
    }
}

#[derive(Debug, Default)]
struct Counters([AtomicU64; SLOTS]);

impl Counters {
    fn snapshot(&self) -> RequestCounts {
        let c = |i: usize| self.0[i].load(Ordering::Relaxed);
        RequestCounts {
            get: c(0),
            list: c(1),
            watch: c(2),
            create: c(3),
            update: c(4),
            patch: c(5),
            delete: c(6),
            other: c(7),
            errors: c(8),
        }
    }

    fn reset(&self) {
        for c in &self.0 {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// The log and the counters (overall and per resource).
#[derive(Debug)]
pub(crate) struct RequestLog {
    enabled: AtomicBool,
    seq: AtomicU64,
    arrivals: AtomicU64,
    ring: Mutex<VecDeque<RequestRecord>>,
    total: Counters,
    per_resource: Vec<Counters>,
}

impl Default for RequestLog {
    fn default() -> Self {
        RequestLog {
            enabled: AtomicBool::new(true),
            seq: AtomicU64::new(0),
            arrivals: AtomicU64::new(0),
            ring: Mutex::new(VecDeque::new()),
            total: Counters::default(),
            per_resource: RESOURCES.iter().map(|_| Counters::default()).collect(),
        }
    }
}

impl RequestLog {
    /// Counts a request and, if the log is on, keeps its record.
    pub(super) fn record(&self, resource: Option<usize>, mut record: RequestRecord) {
        let i = slot(record.verb);
        let error = record.status >= 400;
        for counters in
            std::iter::once(&self.total).chain(resource.and_then(|r| self.per_resource.get(r)))
        {
            counters.0[i].fetch_add(1, Ordering::Relaxed);
            if error {
                counters.0[8].fetch_add(1, Ordering::Relaxed);
            }
        }
        record.seq = self.seq.fetch_add(1, Ordering::Relaxed);
        if !self.enabled.load(Ordering::Relaxed) {
            return;
        }
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        if ring.len() >= LOG_CAPACITY {
            ring.pop_front();
        }
        ring.push_back(record);
    }

    /// The next arrival number ([`RequestRecord::arrival`]).
    pub(super) fn arrive(&self) -> u64 {
        self.arrivals.fetch_add(1, Ordering::Relaxed)
    }

    /// The arrival number the next request gets.
    pub(super) fn arrivals(&self) -> u64 {
        self.arrivals.load(Ordering::Relaxed)
    }

    /// The kept records, oldest first.
    pub(super) fn records(&self) -> Vec<RequestRecord> {
        self.ring
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }

    /// Drops the kept records.
    pub(super) fn clear(&self) {
        self.ring
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Turns keeping records on or off (counters always count).
    pub(super) fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    /// Totals over all requests.
    pub(super) fn counts(&self) -> RequestCounts {
        self.total.snapshot()
    }

    /// Totals for one resource.
    pub(super) fn counts_for(&self, resource: usize) -> RequestCounts {
        self.per_resource
            .get(resource)
            .map(Counters::snapshot)
            .unwrap_or_default()
    }

    /// Zeroes every counter.
    pub(super) fn reset_counts(&self) {
        self.total.reset();
        for c in &self.per_resource {
            c.reset();
        }
    }
}

/// The body of a request as log text, cut at the limit.
pub(crate) fn body_text(body: &[u8]) -> String {
    let cut = &body[..body.len().min(BODY_LIMIT)];
    String::from_utf8_lossy(cut).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(verb: Option<Verb>, status: u16) -> RequestRecord {
        RequestRecord {
            seq: 0,
            method: "GET".into(),
            path: "/".into(),
            query: String::new(),
            verb,
            resource: None,
            namespace: None,
            name: None,
            subresource: None,
            status,
            content_type: None,
            body: None,
            authorization: None,
            user_agent: None,
            faulted: false,
            arrival: 0,
            delay_ms: 0,
        }
    }

    #[test]
    fn counts_and_ring() {
        let log = RequestLog::default();
        log.record(Some(1), rec(Some(Verb::List), 200));
        log.record(Some(1), rec(Some(Verb::Patch), 409));
        log.record(None, rec(None, 200));
        let c = log.counts();
        assert_eq!(
            (c.reads(), c.mutations(), c.other, c.errors, c.total()),
            (1, 1, 1, 1, 3)
        );
        assert_eq!(log.counts_for(1).total(), 2);
        assert_eq!(log.records().len(), 3);
        assert_eq!(log.records()[2].seq, 2);
        log.set_enabled(false);
        log.record(None, rec(None, 200));
        assert_eq!(log.records().len(), 3);
        log.reset_counts();
        assert_eq!(log.counts(), RequestCounts::default());
        log.clear();
        assert!(log.records().is_empty());
    }
}
