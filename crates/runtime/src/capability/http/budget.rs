//! One driver's cloud request budget: a request rate and burst the operator sets per driver
//! (`--cloud-request-rate`, `--cloud-request-burst`, or `limits.cloudRequestRate` and
//! `limits.cloudRequestBurst` of a DriverSet), shared by every instance of the driver, and a
//! pause of all of them when the cloud answers that it is overloaded.
//!
//! The budget stands between the egress checks and the network: a request that passed every
//! check takes a token of the workspace's [`TokenBucket`] before it leaves. Waiting never
//! outlives the call: a request whose token (or the end of the cloud's pause) would come later
//! than the time the call has left for a request (the call's deadline less the margin of
//! [`super::timing::request_budget`]) is refused at once, unsent, with a `timeout` error that says what
//! to raise.
//!
//! The cloud's own limit: a 429, or a 503 with `Retry-After`, pauses every request of the driver
//! until the time the cloud named (RFC 9110 §10.2.3: delta-seconds or an HTTP-date), or for
//! [`DEFAULT_PAUSE`] when a 429 names none. The value is the cloud's text, so it is never
//! trusted blindly: a malformed one counts as absent, and any pause is capped at [`MAX_PAUSE`].
//! The answer itself still goes back to the driver unchanged: the driver decides what a 429
//! means for its call.
//!
//! Without a budget (the default) the host neither paces nor pauses: today's behaviour.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::model::http::{HttpError, Response};
use crate::token_bucket::TokenBucket;

/// The pause after a 429 without a usable `Retry-After` (client-go's default wait for a 429
/// without one is 1 s as well: `rest/request.go`, `checkWait`).
pub const DEFAULT_PAUSE: Duration = Duration::from_secs(1);

/// The longest pause a cloud's answer can impose: a `Retry-After` of an hour (or a date in
/// 2099) pauses for this long, then the driver's requests go out again and meet the cloud's
/// answer anew.
pub const MAX_PAUSE: Duration = Duration::from_secs(60);

/// How one request fared with the budget: the `outcome` label of
/// `wasm_ccm_cloud_requests_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// Left without waiting.
    Sent,
    /// Left after waiting for a token or for the end of the cloud's pause.
    Waited,
    /// Not sent: no token before the call's deadline.
    RefusedByBudget,
    /// Not sent: the cloud's pause lasts past the call's deadline.
    RefusedWhilePaused,
    /// Sent, and the cloud answered 429 (or 503 with `Retry-After`): the driver's requests
    /// paused.
    RateLimitedByCloud,
}

impl Outcome {
    /// Every outcome, in label order.
    pub const ALL: [Outcome; 5] = [
        Outcome::Sent,
        Outcome::Waited,
        Outcome::RefusedByBudget,
        Outcome::RefusedWhilePaused,
        Outcome::RateLimitedByCloud,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Sent => "sent",
            Outcome::Waited => "waited",
            Outcome::RefusedByBudget => "refused_by_budget",
            Outcome::RefusedWhilePaused => "refused_while_paused",
            Outcome::RateLimitedByCloud => "rate_limited_by_cloud",
        }
    }
}

/// What the budget counted since it was made (it outlives reloads of the driver: the same
/// options, so the same budget).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BudgetCounts {
    /// Requests by outcome ([`Outcome::ALL`] order).
    pub requests: [u64; 5],
    /// Seconds requests spent waiting for a token or for the end of a pause, summed over
    /// requests (two requests waiting a second each count two).
    pub wait_seconds: f64,
}

impl BudgetCounts {
    /// Requests with `outcome`.
    pub fn get(&self, outcome: Outcome) -> u64 {
        self.requests[outcome as usize]
    }
}

/// A driver's request budget (see the module documentation). Shared by the driver's instances
/// through its one HTTP client, and by its reloads through its options.
#[derive(Debug)]
pub struct RequestBudget {
    rate: f64,
    burst: u32,
    bucket: TokenBucket,
    /// Until when the cloud asked the driver to pause, if it did.
    paused_until: Mutex<Option<Instant>>,
    counts: [AtomicU64; 5],
    wait_nanos: AtomicU64,
}

impl RequestBudget {
    /// A budget of `rate` requests a second with bursts of `burst`; `rate` 0 paces nothing but
    /// still pauses when the cloud asks to.
    pub fn new(rate: f64, burst: u32) -> Self {
        let rate = if rate.is_finite() && rate > 0.0 {
            rate
        } else {
            0.0
        };
        RequestBudget {
            rate,
            burst,
            bucket: TokenBucket::new(rate, burst),
            paused_until: Mutex::new(None),
            counts: Default::default(),
            wait_nanos: AtomicU64::new(0),
        }
    }

    /// What was counted so far.
    pub fn counts(&self) -> BudgetCounts {
        BudgetCounts {
            requests: std::array::from_fn(|i| self.counts[i].load(Ordering::Relaxed)),
            wait_seconds: Duration::from_nanos(self.wait_nanos.load(Ordering::Relaxed))
                .as_secs_f64(),
        }
    }

    fn count(&self, outcome: Outcome) {
        self.counts[outcome as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The end of the cloud's pause, if one is running at `now`.
    fn paused_at(&self, now: Instant) -> Option<Instant> {
        let until = *self.paused_until.lock().unwrap_or_else(|p| p.into_inner());
        until.filter(|until| *until > now)
    }

    /// Waits until the request may leave: the end of any pause, then a token, then the end of
    /// a pause that began meanwhile. `deadline` is the call's; a request that could only leave
    /// after the last moment it could still get an answer is refused, unsent.
    pub(crate) async fn admit(&self, deadline: std::time::Instant) -> Result<(), HttpError> {
        let start = Instant::now();
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        // The latest start that leaves the request the time `request_budget` would give it.
        let by = start + super::timing::request_budget(left, left);
        let mut waited = self.wait_out_pause(by).await?;
        match self.bucket.reserve_before(by) {
            None => {
                self.count(Outcome::RefusedByBudget);
                return Err(HttpError::Timeout(format!(
                    "not sent: the driver's cloud request budget ({}) has no request left before the call's deadline in {left:?}; raise --cloud-request-rate or --cloud-request-burst (limits.cloudRequestRate, limits.cloudRequestBurst in a DriverSet), or --call-timeout",
                    self.describe()
                )));
            }
            Some(at) if at > Instant::now() => {
                tokio::time::sleep_until(at).await;
                waited = true;
            }
            Some(_) => {}
        }
        // A pause the cloud asked for while this request waited for its token holds it too.
        waited |= self.wait_out_pause(by).await?;
        if waited {
            let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.wait_nanos.fetch_add(nanos, Ordering::Relaxed);
            self.count(Outcome::Waited);
        } else {
            self.count(Outcome::Sent);
        }
        Ok(())
    }

    /// Sleeps through the cloud's pause (whether it did), or refuses the request when the
    /// pause ends after `by`.
    async fn wait_out_pause(&self, by: Instant) -> Result<bool, HttpError> {
        let mut waited = false;
        // Another 429 may extend the pause while this request sleeps: look again on waking.
        while let Some(until) = self.paused_at(Instant::now()) {
            if until > by {
                self.count(Outcome::RefusedWhilePaused);
                let rest = until.saturating_duration_since(Instant::now());
                return Err(HttpError::Timeout(format!(
                    "not sent: the cloud answered 429 (too many requests) and asked this driver to pause for another {rest:?}, longer than the call has left; the host holds every request of the driver until then. Lower --cloud-request-rate (limits.cloudRequestRate in a DriverSet; now {}) below the cloud's limit, or raise --call-timeout",
                    self.describe()
                )));
            }
            tokio::time::sleep_until(until).await;
            waited = true;
        }
        Ok(waited)
    }

    /// Reads the cloud's answer: a 429, or a 503 with `Retry-After`, pauses the driver's
    /// requests (see the module documentation).
    pub(crate) fn observe(&self, response: &Response) {
        // Only these two answers can pause the driver: the others' headers are not read.
        if !matches!(response.status, 429 | 503) {
            return;
        }
        let retry_after = response
            .headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("retry-after"))
            .map(|(_, value)| value.as_str());
        let pause = match (response.status, retry_after) {
            (429, value) => value
                .and_then(|v| parse_retry_after(v, jiff::Timestamp::now()))
                .unwrap_or(DEFAULT_PAUSE),
            (503, Some(value)) => match parse_retry_after(value, jiff::Timestamp::now()) {
                Some(pause) => pause,
                // A 503 whose `Retry-After` cannot be read is only a failure, not a limit.
                None => return,
            },
            _ => return,
        };
        self.count(Outcome::RateLimitedByCloud);
        let until = Instant::now() + pause.min(MAX_PAUSE);
        let mut paused = self.paused_until.lock().unwrap_or_else(|p| p.into_inner());
        // A shorter answer never ends a longer pause early.
        if paused.is_none_or(|p| p < until) {
            *paused = Some(until);
        }
    }

    /// `5 requests/s, burst 10`, or `no rate limit` for rate 0.
    fn describe(&self) -> String {
        if self.rate > 0.0 {
            format!("{} requests/s, burst {}", self.rate, self.burst.max(1))
        } else {
            "no rate limit".to_string()
        }
    }
}

/// A `Retry-After` value (RFC 9110 §10.2.3): delta-seconds (digits only) or an HTTP-date
/// (§5.6.7: the IMF-fixdate, and the obsolete RFC 850 and asctime forms a recipient must
/// accept), as a wait from `now`; a date in the past waits nothing. `None` for anything else.
/// The caller caps the wait: the value is the cloud's text.
pub fn parse_retry_after(value: &str, now: jiff::Timestamp) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Digits too many for a u64 are a very long wait, not an error: the cap applies.
        return Some(
            value
                .parse::<u64>()
                .map_or(Duration::MAX, Duration::from_secs),
        );
    }
    const FORMATS: [&str; 3] = [
        // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
        "%a, %d %b %Y %H:%M:%S GMT",
        // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
        "%A, %d-%b-%y %H:%M:%S GMT",
        // asctime: Sun Nov  6 08:49:37 1994
        "%a %b %e %H:%M:%S %Y",
    ];
    let at = FORMATS.iter().find_map(|format| {
        jiff::civil::DateTime::strptime(format, value)
            .ok()?
            .to_zoned(jiff::tz::TimeZone::UTC)
            .ok()
    })?;
    let wait = now.duration_until(at.timestamp());
    Some(Duration::try_from(wait).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests;
