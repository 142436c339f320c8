//! The optional request limit of a cloud simulator (`sim <cloud> --rate-limit 5/1s`, or the
//! `rate_limit` of a simulator's options): at most `max` requests in each fixed window of
//! `window`, counted from the window's first request; a request over the limit is answered in
//! the cloud's way (`CloudApi::rate_limited`) and never served.
//!
//! The fixed window is Apache CloudStack's documented algorithm (`api.throttling.interval`
//! seconds, `api.throttling.max` requests per account: plugins/api/rate-limit,
//! `ApiRateLimitServiceImpl.hasApiRateLimitBeenExceeded`: a counter created with the first
//! request of a window, incremented by every request, refused ones too, and the request refused
//! once it passes the maximum). The other clouds document no algorithm, so they share it: a
//! limit whose windows a test can count. Each simulator serves one account, so one counter
//! stands for the account's.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A request limit: `max` requests per `window`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests allowed in one window (at least 1).
    pub max: u32,
    /// The window's length (at least 1 ms).
    pub window: Duration,
}

impl RateLimit {
    /// `max` requests per `window`.
    pub fn new(max: u32, window: Duration) -> Self {
        RateLimit {
            max: max.max(1),
            window: window.max(Duration::from_millis(1)),
        }
    }

    /// Parses `MAX/WINDOW`, e.g. `5/1s` or `25/1s` (CloudStack's `api.throttling.max` per
    /// `api.throttling.interval`), the window as `500ms`, `2s`, `1m` or plain seconds.
    pub fn parse(text: &str) -> Result<RateLimit, String> {
        let (max, window) = text.split_once('/').ok_or_else(|| {
            format!("{text:?} is not MAX/WINDOW, e.g. 5/1s (5 requests per second)")
        })?;
        let max: u32 = max
            .trim()
            .parse()
            .ok()
            .filter(|m| *m > 0)
            .ok_or_else(|| format!("{max:?} is not a number of requests of at least 1"))?;
        let window = crate::kit::parse_duration(window)?;
        if window.is_zero() {
            return Err("the window must be longer than 0, e.g. 1s".to_string());
        }
        Ok(RateLimit::new(max, window))
    }
}

/// The current window: when it began and the requests counted in it.
type Window = (Instant, u32);

/// The limit and the counter of the current window.
#[derive(Debug, Default)]
pub(crate) struct RateLimiter {
    state: Mutex<(Option<RateLimit>, Option<Window>)>,
}

impl RateLimiter {
    /// Sets (or with `None` lifts) the limit; the count starts anew.
    pub(crate) fn set(&self, limit: Option<RateLimit>) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = (limit, None);
    }

    /// Counts a request: `None` when it may be served, or how long until the window ends.
    pub(crate) fn check(&self) -> Option<Duration> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (Some(limit), window) = &mut *state else {
            return None;
        };
        let now = Instant::now();
        // A window begins with the first request after the last one ended.
        let (started, count) = match *window {
            Some((started, count)) if now.duration_since(started) < limit.window => {
                (started, count)
            }
            _ => (now, 0),
        };
        // Refused requests count too (CloudStack increments before it compares).
        let count = count.saturating_add(1);
        *window = Some((started, count));
        (count > limit.max).then(|| (started + limit.window).saturating_duration_since(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_allows_max_then_refuses_until_it_ends() {
        let limiter = RateLimiter::default();
        assert_eq!(limiter.check(), None, "no limit: everything passes");
        limiter.set(Some(RateLimit::new(2, Duration::from_secs(3600))));
        assert_eq!(limiter.check(), None);
        assert_eq!(limiter.check(), None);
        let wait = limiter.check().expect("the third is refused");
        assert!(wait > Duration::from_secs(3500) && wait <= Duration::from_secs(3600));
        limiter.set(Some(RateLimit::new(1, Duration::from_millis(1))));
        assert_eq!(limiter.check(), None, "a new limit counts anew");
    }

    #[test]
    fn limits_parse() {
        assert_eq!(
            RateLimit::parse("5/1s"),
            Ok(RateLimit::new(5, Duration::from_secs(1)))
        );
        assert_eq!(
            RateLimit::parse("25/500ms"),
            Ok(RateLimit::new(25, Duration::from_millis(500)))
        );
        for bad in ["5", "0/1s", "x/1s", "5/0s", "5/1h"] {
            assert!(RateLimit::parse(bad).is_err(), "{bad}");
        }
    }
}
