//! Why a reconcile failed, typed: the runner chooses the retry from it and counts it by kind in
//! `wasm_ccm_reconcile_errors_total{controller, kind}`, so an operator sees whether the cloud,
//! the driver or Kubernetes is failing without reading logs.

use std::fmt;
use std::time::Duration;

use wasm_ccm_runtime::CallError;
use wasm_ccm_runtime::types::ProviderError;

/// How soon a Service waiting for another driver's cleanup is looked at again.
pub(crate) const HANDOVER_RETRY: Duration = Duration::from_secs(2);

/// What failed, as the `kind` label of `wasm_ccm_reconcile_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    /// A Kubernetes API request failed (network, 409, 5xx, …).
    Kubernetes,
    /// The driver answered with an error; the payload is the WIT case (`not-found`,
    /// `transient`, …).
    Driver(&'static str),
    /// The host stopped the driver call (trap, deadline, memory, refused request).
    Host,
    /// The driver said the work is under way (`retry-after`): progress, not a failure.
    InProgress,
    /// The driver's answer broke a rule and nothing of it was written.
    AnswerRefused,
    /// The object itself cannot be reconciled as it is (e.g. a kubelet `--node-ip` that
    /// matches no address): it waits for a change.
    Invalid,
}

impl ErrorKind {
    /// The metric label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            ErrorKind::Kubernetes => "kubernetes",
            ErrorKind::Driver(case) => case,
            ErrorKind::Host => "host-error",
            ErrorKind::InProgress => "in-progress",
            ErrorKind::AnswerRefused => "answer-refused",
            ErrorKind::Invalid => "invalid-object",
        }
    }
}

/// A failed reconcile: what to tell the operator, what kind it was, and the delay the driver
/// asked for (honoured exactly instead of the backoff).
#[derive(Debug)]
pub(crate) struct ReconcileError {
    pub(crate) kind: ErrorKind,
    pub(crate) message: String,
    pub(crate) retry_after: Option<Duration>,
}

impl ReconcileError {
    /// A Kubernetes request failed; `context` says what was being written or read.
    pub(crate) fn kube(context: impl fmt::Display) -> Self {
        ReconcileError {
            kind: ErrorKind::Kubernetes,
            message: context.to_string(),
            retry_after: None,
        }
    }

    /// A driver call failed with `e`; `message` is the operator-facing text.
    pub(crate) fn driver(message: String, e: &CallError) -> Self {
        let kind = match e {
            CallError::Provider(ProviderError::RetryAfter(_)) => ErrorKind::InProgress,
            CallError::Provider(p) => ErrorKind::Driver(p.case()),
            CallError::Host(_) => ErrorKind::Host,
        };
        ReconcileError {
            kind,
            message,
            retry_after: requested_delay(e),
        }
    }

    /// The driver's answer was refused by the answer rules.
    pub(crate) fn refused(message: String) -> Self {
        ReconcileError {
            kind: ErrorKind::AnswerRefused,
            message,
            retry_after: None,
        }
    }

    /// The object cannot be reconciled as it is.
    pub(crate) fn invalid(message: String) -> Self {
        ReconcileError {
            kind: ErrorKind::Invalid,
            message,
            retry_after: None,
        }
    }

    /// Another driver still holds the Service's load balancer: progress (no Warning event),
    /// asked again shortly rather than after the growing backoff.
    pub(crate) fn handover(message: String) -> Self {
        ReconcileError {
            kind: ErrorKind::InProgress,
            message,
            retry_after: Some(HANDOVER_RETRY),
        }
    }

    /// Whether the driver said the work is under way: no Warning event, an info log line.
    pub(crate) fn in_progress(&self) -> bool {
        self.kind == ErrorKind::InProgress
    }
}

impl From<kube::Error> for ReconcileError {
    fn from(e: kube::Error) -> Self {
        ReconcileError::kube(format!("Kubernetes API: {e}"))
    }
}

impl fmt::Display for ReconcileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Whether the driver said the work is under way (`retry-after`): progress, not a failure worth
/// a Warning event.
pub(crate) fn in_progress(e: &CallError) -> bool {
    matches!(e, CallError::Provider(ProviderError::RetryAfter(_)))
}

/// The delay a driver error asks for (`retry-after`, `rate-limited(seconds)`), if any.
pub(crate) fn requested_delay(e: &CallError) -> Option<Duration> {
    match e {
        CallError::Provider(ProviderError::RetryAfter(r)) => {
            Some(Duration::from_secs(r.seconds.into()))
        }
        CallError::Provider(ProviderError::RateLimited(Some(s))) => {
            Some(Duration::from_secs((*s).into()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_ccm_runtime::HostError;
    use wasm_ccm_runtime::types::Retry;

    #[test]
    fn driver_errors_are_typed_by_their_case() {
        let retry = CallError::Provider(ProviderError::RetryAfter(Retry {
            seconds: 7,
            reason: "building".into(),
        }));
        let e = ReconcileError::driver("x".into(), &retry);
        assert_eq!(e.kind, ErrorKind::InProgress);
        assert!(e.in_progress());
        assert_eq!(e.retry_after, Some(Duration::from_secs(7)));

        let limited = CallError::Provider(ProviderError::RateLimited(Some(3)));
        let e = ReconcileError::driver("x".into(), &limited);
        assert_eq!(e.kind.label(), "rate-limited");
        assert_eq!(e.retry_after, Some(Duration::from_secs(3)));
        assert!(!e.in_progress());

        let gone = CallError::Provider(ProviderError::NotFound("vm".into()));
        let e = ReconcileError::driver("x".into(), &gone);
        assert_eq!(e.kind.label(), "not-found");
        assert_eq!(e.retry_after, None);

        let host = CallError::Host(HostError::Deadline {
            driver: "d".into(),
            function: "f".into(),
            deadline: Duration::from_secs(1),
        });
        assert_eq!(
            ReconcileError::driver("x".into(), &host).kind.label(),
            "host-error"
        );
        assert_eq!(
            ReconcileError::refused("y".into()).kind.label(),
            "answer-refused"
        );
        assert_eq!(ReconcileError::kube("z").kind.label(), "kubernetes");
    }

    #[test]
    fn driver_requested_delays_are_exact_and_everything_else_backs_off() {
        let p = |e| CallError::Provider(e);
        assert_eq!(
            requested_delay(&p(ProviderError::RetryAfter(Retry {
                seconds: 42,
                reason: "busy".into()
            }))),
            Some(Duration::from_secs(42))
        );
        assert_eq!(
            requested_delay(&p(ProviderError::RateLimited(Some(7)))),
            Some(Duration::from_secs(7))
        );
        for other in [
            ProviderError::RateLimited(None),
            ProviderError::Transient("x".into()),
            ProviderError::InvalidConfig("x".into()),
            ProviderError::NotFound("x".into()),
        ] {
            assert_eq!(requested_delay(&p(other)), None);
        }
    }
}
