//! Fault injection: failing and throttled responses, and latency.
//!
//! Rules are consumed in the order they were added: the first rule that matches a request and
//! has a count left answers it. Injected faults apply before authentication and handling (also
//! on the token endpoint), so they change no state.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Which requests a fault applies to; unset fields match anything.
#[derive(Clone, Debug, Default)]
pub struct Match {
    /// HTTP method, e.g. `POST` (case-insensitive).
    pub method: Option<String>,
    /// Prefix of the request path (without the query), e.g. `/ips/v1/ip-blocks`.
    pub path_prefix: Option<String>,
}

impl Match {
    /// Every request.
    pub fn any() -> Self {
        Match::default()
    }

    /// Requests with this method.
    pub fn method(m: &str) -> Self {
        Match::any().with_method(m)
    }

    /// Requests whose path starts with `prefix`.
    pub fn path(prefix: &str) -> Self {
        Match {
            path_prefix: Some(prefix.to_string()),
            ..Match::default()
        }
    }

    /// Also requires this method.
    pub fn with_method(mut self, m: &str) -> Self {
        self.method = Some(m.to_string());
        self
    }

    fn matches(&self, method: &str, path: &str) -> bool {
        self.method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && self
                .path_prefix
                .as_deref()
                .is_none_or(|p| path.starts_with(p))
    }
}

/// What an injected fault answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Injected {
    /// This status with `{"message": "Simulated failure."}`.
    Fail(u16),
    /// 429 with `Retry-After` in seconds.
    Throttle(u32),
}

#[derive(Debug)]
struct Rule {
    matcher: Match,
    action: Injected,
    remaining: usize,
}

#[derive(Debug, Default)]
struct State {
    rules: Vec<Rule>,
    latency: Duration,
}

/// A handle on the simulator's fault injection; clones share it, changes apply to every later
/// request.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    state: Arc<Mutex<State>>,
}

impl Faults {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, matcher: Match, action: Injected, count: usize) {
        if count > 0 {
            self.lock().rules.push(Rule {
                matcher,
                action,
                remaining: count,
            });
        }
    }

    /// The next `count` matching requests answer `status` with
    /// `{"message": "Simulated failure."}` (the token endpoint: `{"error": "server_error", ...}`;
    /// a status outside 100–999 answers 500).
    pub fn fail_next(&self, matcher: Match, status: u16, count: usize) {
        self.push(matcher, Injected::Fail(status), count);
    }

    /// The next `count` matching requests answer 429 with `Retry-After: <seconds>`.
    pub fn throttle_next(&self, matcher: Match, retry_after_secs: u32, count: usize) {
        self.push(matcher, Injected::Throttle(retry_after_secs), count);
    }

    /// Every request waits this long before being handled (zero: no delay).
    pub fn set_latency(&self, d: Duration) {
        self.lock().latency = d;
    }

    /// Removes every rule and the latency.
    pub fn clear(&self) {
        *self.lock() = State::default();
    }

    /// Failures and throttles still to be injected (summed over rules).
    pub fn pending(&self) -> usize {
        self.lock().rules.iter().map(|r| r.remaining).sum()
    }

    /// The fault answering this request, consuming one count of the first matching rule.
    pub(crate) fn take(&self, method: &str, path: &str) -> Option<Injected> {
        let mut state = self.lock();
        let index = state
            .rules
            .iter()
            .position(|r| r.matcher.matches(method, path))?;
        let rule = &mut state.rules[index];
        rule.remaining -= 1;
        let action = rule.action;
        if rule.remaining == 0 {
            state.rules.remove(index);
        }
        Some(action)
    }

    /// The configured latency.
    pub(crate) fn latency(&self) -> Duration {
        self.lock().latency
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_consumed_in_order() {
        let f = Faults::default();
        f.fail_next(Match::method("post"), 500, 1);
        f.throttle_next(Match::path("/ips/v1/ip-blocks"), 3, 2);
        assert_eq!(f.take("GET", "/bmc/v1/servers"), None);
        assert_eq!(
            f.take("POST", "/ips/v1/ip-blocks"),
            Some(Injected::Fail(500))
        );
        assert_eq!(
            f.take("POST", "/ips/v1/ip-blocks"),
            Some(Injected::Throttle(3))
        );
        assert_eq!(f.pending(), 1);
        f.clear();
        assert_eq!(f.take("GET", "/ips/v1/ip-blocks"), None);
    }
}
