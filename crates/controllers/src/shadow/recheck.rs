//! Looking again at pending cloud writes. A cloud write the shadow wanted is settled only by a
//! later driver call about its object that needs no write (see the module doc of
//! [`super`]), and for a Service nothing guarantees such a call: the service controller calls
//! the driver when the Service or the nodes change and when a sync failed, with a backoff that
//! grows to five minutes, so a member the CCM in charge added after the shadow's `update` would
//! never be looked at again. This loop re-runs the reconcile of every object with a pending
//! cloud write (in a shadow run every driver call is read-only: the host refuses writes before
//! they leave), so the driver itself says whether a write is still wanted.
//!
//! Services are the only kind that needs it. The other calls that can want a cloud write come
//! back by themselves, at most a period apart: routes with the route pass
//! (`--route-reconciliation-period`), housekeeping with its period, the instance calls of a
//! node with the lifecycle monitor and the node status updates.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::ShadowLog;

/// Every `period` until `cancel`, hands `rerun` the key of each object of `kind` that has a
/// cloud write still pending ([`ShadowLog::due_for_recheck`]); `rerun` queues its reconcile.
pub(crate) async fn recheck_pending(
    shadow: Arc<ShadowLog>,
    kind: &'static str,
    period: Duration,
    rerun: impl Fn(String) + Send + Sync + 'static,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
        let due = shadow.due_for_recheck(kind);
        if !due.is_empty() {
            tracing::debug!(
                kind,
                objects = due.len(),
                "shadow: re-running the reconcile of objects with a pending cloud write"
            );
        }
        for key in due {
            rerun(key);
        }
    }
}
