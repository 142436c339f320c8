//! The token bucket of the whole crate (client-go's `flowcontrol` rate limiter: `qps` tokens a
//! second refill a bucket of `burst`), on tokio's clock so tests can pause time. The workers'
//! pacing (`runner.rs`), the Kubernetes client's QPS (`kube.rs`) and the reviews of delegated
//! authentication (`server/delegated_auth.rs`) all take their tokens here.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// A token bucket (`qps` refill, `burst` capacity). [`TokenBucket::reserve`] always takes a
/// token and says how long to wait for it (callers that will wait anyway);
/// [`TokenBucket::reserve_before`] takes one only when it is valid by a deadline (callers that
/// give up leave no debt behind).
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

    /// Waits for a token.
    pub(crate) async fn acquire(&self) {
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
        let (tokens, last) = *state;
        let tokens = (tokens + now.duration_since(last).as_secs_f64() * self.qps).min(self.burst);
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
