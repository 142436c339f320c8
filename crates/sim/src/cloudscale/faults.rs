//! Fault injection: the simulators' common rules (failing and throttled responses, latency) plus
//! refusing mutations of load balancers that are still `changing`.

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

pub use crate::fixture::Match;

/// A handle on the simulator's fault injection; clones share it, changes apply to every later
/// request. The common rules ([`crate::fixture::Faults`]: `fail_next`, `throttle_next`,
/// `set_latency`, `pending`) are reached through it.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    common: crate::fixture::Faults,
    refuse_while_changing: Arc<AtomicBool>,
    busy_next: Arc<AtomicUsize>,
}

impl Deref for Faults {
    type Target = crate::fixture::Faults;

    fn deref(&self) -> &Self::Target {
        &self.common
    }
}

impl Faults {
    /// While an LB is `changing`, mutating requests on it or its children (pools, members,
    /// listeners, monitors; PATCH/DELETE of the LB) answer 400
    /// `{"detail": "Load balancer is currently changing, try again later."}`. Off by default.
    pub fn refuse_while_changing(&self, on: bool) {
        self.refuse_while_changing.store(on, Ordering::Relaxed);
    }

    /// The next `count` mutating requests (POST, PATCH, DELETE) under `/v1/load-balancers` answer
    /// the refusal [`Faults::refuse_while_changing`] gives, whatever the LB's status: the LB
    /// turning `changing` between a client's status read and its write, which the time-based
    /// status cannot produce deterministically (review 2026-11-23, finding 6).
    pub fn refuse_next_as_busy(&self, count: usize) {
        self.busy_next.store(count, Ordering::Relaxed);
    }

    /// Removes every rule and the latency, and stops refusing mutations of changing LBs.
    pub fn clear(&self) {
        self.common.clear();
        self.refuse_while_changing(false);
        self.refuse_next_as_busy(0);
    }

    /// Whether this request is one of the next ones [`Faults::refuse_next_as_busy`] refuses
    /// (counts it down).
    pub(crate) fn take_busy(&self, method: &str, path: &str) -> bool {
        matches!(method, "POST" | "PATCH" | "DELETE")
            && path.starts_with("/v1/load-balancers")
            && self
                .busy_next
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
    }

    /// Whether mutations of changing LBs are refused.
    pub(crate) fn refusing_while_changing(&self) -> bool {
        self.refuse_while_changing.load(Ordering::Relaxed)
    }
}
