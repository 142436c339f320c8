//! The token bucket of the whole workspace (client-go's `flowcontrol` rate limiter: `qps` tokens
//! a second refill a bucket of `burst`), on tokio's clock so tests can pause time. It lives in
//! the runtime, the crate every other one builds on: a driver's log limit (lines and bytes,
//! `capability/log/logger.rs`), the controllers' worker pacing (`machinery/runner.rs`) and
//! Kubernetes client QPS (`kube.rs`), the manager's delegated-authentication reviews
//! (`server/delegated_auth.rs`) and a driver's cloud request budget (`capability/http/budget.rs`)
//! all take their tokens here.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// A token bucket (`qps` refill, `burst` capacity). [`TokenBucket::reserve`] always takes a
/// token and says how long to wait for it (callers that will wait anyway);
/// [`TokenBucket::reserve_before`] takes one only when it is valid by a deadline (callers that
/// give up leave no debt behind); inside this crate, `try_take_at` takes several at once only
/// when they are there (callers that drop instead of waiting, like the log limit).
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    /// Tokens left (negative: owed by reservations not yet valid) as of the instant.
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// A full bucket. `qps <= 0` means unlimited.
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps,
            burst,
            state: Mutex::new((burst, Instant::now())),
        }
    }

    /// Takes a token and returns how long to wait until it is valid (zero when one was left).
    pub fn reserve(&self) -> Duration {
        let now = Instant::now();
        self.take(now, None)
            .map_or(Duration::ZERO, |at| at.saturating_duration_since(now))
    }

    /// Takes a token and returns when it is valid, or takes nothing and returns `None` when that
    /// would be after `deadline`.
    pub fn reserve_before(&self, deadline: Instant) -> Option<Instant> {
        self.take(Instant::now(), Some(deadline))
    }

    /// A full bucket of `burst` that never refills by itself: `qps` 0 in a limit that means
    /// "this many, then nothing" (a driver's log limit of 0 lines a second), where
    /// [`TokenBucket::new`] takes 0 for unlimited.
    pub(crate) fn without_refill(burst: u32) -> Self {
        TokenBucket {
            qps: f64::MIN_POSITIVE,
            burst: f64::from(burst),
            state: Mutex::new((f64::from(burst), Instant::now())),
        }
    }

    /// Takes `n` tokens if that many are there now, else takes nothing (no debt): for callers
    /// that drop the work instead of waiting.
    #[cfg(test)]
    pub(crate) fn try_take(&self, n: f64) -> bool {
        self.try_take_at(n, Instant::now())
    }

    /// Takes `n` tokens if that many are there at `now`, else takes nothing (no debt): for
    /// callers that drop the work instead of waiting. `now` is passed in so that a caller
    /// taking from two buckets at once (the driver logger's lines and bytes) reads the clock
    /// once for both.
    pub(crate) fn try_take_at(&self, n: f64, now: Instant) -> bool {
        if self.qps <= 0.0 {
            return true;
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let tokens = self.refilled(*state, now);
        if tokens >= n {
            *state = (tokens - n, now);
            true
        } else {
            *state = (tokens, now);
            false
        }
    }

    /// Puts back `n` tokens taken by [`TokenBucket::try_take_at`] for work that did not happen
    /// (capped at the burst).
    pub(crate) fn give_back(&self, n: f64) {
        if self.qps <= 0.0 {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.0 = (state.0 + n).min(self.burst);
    }

    /// Tokens in the bucket at `now`, refilled since the state's instant.
    fn refilled(&self, (tokens, last): (f64, Instant), now: Instant) -> f64 {
        (tokens + now.duration_since(last).as_secs_f64() * self.qps).min(self.burst)
    }

    /// Waits for a token.
    pub async fn acquire(&self) {
        let wait = self.reserve();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }

    /// Refills up to `now`, then takes a token valid at the returned instant, unless that is
    /// after `deadline` (then nothing is taken and the answer is `None`).
    fn take(&self, now: Instant, deadline: Option<Instant>) -> Option<Instant> {
        if self.qps <= 0.0 {
            // Unlimited.
            return Some(now);
        }
        // A poisoned lock only means another taker panicked; the count is still a number.
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let tokens = self.refilled(*state, now);
        let at = if tokens >= 1.0 {
            now
        } else {
            now + Duration::from_secs_f64((1.0 - tokens) / self.qps)
        };
        if deadline.is_some_and(|deadline| at > deadline) {
            *state = (tokens, now);
            return None;
        }
        *state = (tokens - 1.0, now);
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn token_bucket_allows_a_burst_then_paces() {
        let bucket = TokenBucket::new(10.0, 3);
        for _ in 0..3 {
            assert_eq!(bucket.reserve(), Duration::ZERO);
        }
        assert_eq!(bucket.reserve(), Duration::from_millis(100));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(bucket.reserve(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn try_take_takes_all_or_nothing_and_give_back_is_capped() {
        let b = TokenBucket::new(100.0, 1000);
        assert!(b.try_take(600.0));
        assert!(!b.try_take(600.0), "400 left: 600 is refused whole");
        assert!(b.try_take(400.0), "the refusal took nothing");
        assert!(!b.try_take(1.0));
        tokio::time::advance(Duration::from_millis(10)).await;
        assert!(b.try_take(1.0), "one token refilled in 10 ms at 100/s");
        b.give_back(5000.0);
        assert!(
            b.try_take(1000.0) && !b.try_take(1.0),
            "given back up to the burst only"
        );
        let fixed = TokenBucket::without_refill(2);
        assert!(fixed.try_take(2.0));
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert!(!fixed.try_take(1.0), "no refill, even an hour later");
    }

    #[tokio::test(start_paused = true)]
    async fn the_bucket_never_promises_past_the_deadline() {
        let b = TokenBucket::new(1.0, 2);
        let now = Instant::now();
        assert_eq!(b.reserve_before(now), Some(now));
        assert_eq!(b.reserve_before(now), Some(now));
        // The third token comes in a second: too late for a deadline in half a second, and
        // refusing it takes nothing.
        assert_eq!(b.reserve_before(now + Duration::from_millis(500)), None);
        assert_eq!(
            b.reserve_before(now + Duration::from_secs(5)),
            Some(now + Duration::from_secs(1))
        );
        assert_eq!(
            b.reserve_before(now + Duration::from_secs(5)),
            Some(now + Duration::from_secs(2))
        );
    }
}
