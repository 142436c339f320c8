//! How long one request may take within its call (a leaf: the client and the request budget
//! both use it, and neither names the other for it).

use std::time::Duration;

/// The time a request may take: what the driver asked for, but ending a margin before the call's
/// deadline — the larger of 1 s and a tenth of the time left, yet never more than half of it
/// (under a short deadline a whole second would leave the request little or nothing) — so a
/// request that runs out of time comes back to the driver as `timeout` while it can still answer.
pub fn request_budget(asked: Duration, left: Duration) -> Duration {
    let margin = (left / 10).max(Duration::from_secs(1)).min(left / 2);
    asked.min(left.saturating_sub(margin))
}
