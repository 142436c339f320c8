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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_ends_a_margin_before_the_deadline() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        // The default: a 30 s request in a 30 s call ends 3 s early (10 %).
        assert_eq!(request_budget(s(30), s(30)), s(27));
        // At least a second is kept ...
        assert_eq!(request_budget(s(30), s(8)), s(7));
        // ... but never more than half the time left.
        assert_eq!(request_budget(s(30), ms(600)), ms(300));
        assert_eq!(request_budget(s(30), Duration::ZERO), Duration::ZERO);
        // A driver's shorter timeout stands.
        assert_eq!(request_budget(s(2), s(30)), s(2));
    }
}
