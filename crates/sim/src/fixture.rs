//! What the cloud API simulators (cloudscale, PhoenixNAP, CloudStack) share as test fixtures:
//! fault injection by request rules, its `/sim/faults` command, and the bounded request log.
//!
//! Fault rules are consumed in the order they were added: the first rule that matches a request
//! and has a count left answers it. The request core ([`crate::request_core`]) applies faults
//! before authentication and handling, so they change no state, and each simulator renders them
//! with its own error body; a cut is the exception: the request is handled, then its connection
//! breaks.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

/// Which requests a fault applies to; unset fields match anything.
#[derive(Clone, Debug, Default)]
pub struct Match {
    /// HTTP method, e.g. `POST` (case-insensitive).
    pub method: Option<String>,
    /// Prefix of the request path (without the query), e.g. `/v1/load-balancers`.
    pub path_prefix: Option<String>,
    /// The API command, for APIs with one endpoint that name the operation in a parameter
    /// (CloudStack's `command`, case-insensitive). A rule with a command never matches a request
    /// without one.
    pub command: Option<String>,
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

    /// Requests for this API command, e.g. CloudStack's `createLoadBalancerRule`.
    pub fn command(name: &str) -> Self {
        Match::any().with_command(name)
    }

    /// Also requires this method.
    pub fn with_method(mut self, m: &str) -> Self {
        self.method = Some(m.to_string());
        self
    }

    /// Also requires this API command.
    pub fn with_command(mut self, name: &str) -> Self {
        self.command = Some(name.to_string());
        self
    }

    fn matches(&self, method: &str, path: &str, command: Option<&str>) -> bool {
        self.method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && self
                .path_prefix
                .as_deref()
                .is_none_or(|p| path.starts_with(p))
            && self
                .command
                .as_deref()
                .is_none_or(|c| command.is_some_and(|got| c.eq_ignore_ascii_case(got)))
    }
}

/// What an injected fault answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Injected {
    /// This status with the simulator's error body.
    Fail(u16),
    /// 429 with `Retry-After` in seconds.
    Throttle(u32),
    /// Served, then cut: the request is carried out and the response's headers are sent, then
    /// the connection breaks ([`cut_body`]), so the client cannot tell whether it worked.
    Cut,
}

/// `response` with its status and headers but a body that fails at once: the client sees the
/// connection break after the headers (hyper aborts a connection whose body errors).
pub(crate) fn cut_body(response: axum::response::Response) -> axum::response::Response {
    let (mut parts, _) = response.into_parts();
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    let broken = futures::stream::once(async {
        Err::<axum::body::Bytes, _>(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "connection cut by the simulator's fault injection",
        ))
    });
    axum::response::Response::from_parts(parts, axum::body::Body::from_stream(broken))
}

#[derive(Debug)]
struct Rule {
    matcher: Match,
    action: Injected,
    remaining: usize,
}

/// A simulated crash of the client: once `remaining` matching requests were served, every
/// later request fails with `status`.
#[derive(Debug)]
struct Kill {
    matcher: Match,
    remaining: usize,
    status: u16,
}

#[derive(Debug, Default)]
struct State {
    rules: Vec<Rule>,
    latency: Duration,
    kill: Option<Kill>,
}

/// A handle on a simulator's fault injection; clones share it, changes apply to every later
/// request.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    state: Arc<Mutex<State>>,
    /// The simulator's request limit, if any: an option of the cloud rather than a fault, so
    /// clearing the faults leaves it.
    limiter: Arc<crate::rate_limit::RateLimiter>,
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

    /// The next `count` matching requests answer `status` with the simulator's error body (a
    /// status outside 100–999 answers 500).
    pub fn fail_next(&self, matcher: Match, status: u16, count: usize) {
        self.push(matcher, Injected::Fail(status), count);
    }

    /// The next `count` matching requests answer 429 with `Retry-After: <seconds>`.
    pub fn throttle_next(&self, matcher: Match, retry_after_secs: u32, count: usize) {
        self.push(matcher, Injected::Throttle(retry_after_secs), count);
    }

    /// The next `count` matching requests are carried out, then their connection breaks after
    /// the response's headers: an ambiguous answer (did the write happen?).
    pub fn cut_next(&self, matcher: Match, count: usize) {
        self.push(matcher, Injected::Cut, count);
    }

    /// A kill point: the next `count` requests matching `matcher` (and every request before
    /// them) are served as usual, and from then on every request fails with `status` (a status
    /// outside 100–999 answers 500), whatever rules are queued, until [`Faults::clear`]. It
    /// stands for a controller killed between two cloud calls: what it sent last was carried
    /// out, nothing after it reached the cloud. `count` 0 kills at once.
    pub fn kill_after(&self, matcher: Match, count: usize, status: u16) {
        self.lock().kill = Some(Kill {
            matcher,
            remaining: count,
            status,
        });
    }

    /// Whether a kill point was reached (requests are failing).
    pub fn killed(&self) -> bool {
        self.lock().kill.as_ref().is_some_and(|k| k.remaining == 0)
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

    /// The fault answering this request, consuming one count of the first matching rule;
    /// `command` is the operation an API names in a parameter, None when the request has none.
    pub(crate) fn take_for(
        &self,
        method: &str,
        path: &str,
        command: Option<&str>,
    ) -> Option<Injected> {
        let mut state = self.lock();
        if let Some(kill) = &mut state.kill {
            if kill.remaining == 0 {
                return Some(Injected::Fail(kill.status));
            }
            if kill.matcher.matches(method, path, command) {
                // This one is served; every later one fails.
                kill.remaining -= 1;
            }
        }
        let index = state
            .rules
            .iter()
            .position(|r| r.matcher.matches(method, path, command))?;
        let rule = &mut state.rules[index];
        rule.remaining -= 1;
        let action = rule.action;
        if rule.remaining == 0 {
            state.rules.remove(index);
        }
        Some(action)
    }

    /// No faults, with the simulator's `rate_limit` option (see [`Faults::set_rate_limit`]).
    pub fn with_rate_limit(limit: Option<crate::RateLimit>) -> Self {
        let faults = Faults::default();
        faults.set_rate_limit(limit);
        faults
    }

    /// Limits requests to `limit` (the simulators' `rate_limit` option; `None` lifts it): a
    /// request over it is answered as the cloud answers one, never served.
    pub fn set_rate_limit(&self, limit: Option<crate::RateLimit>) {
        self.limiter.set(limit);
    }

    /// Counts a request against the rate limit: `None` when it may be served, else how long
    /// until the limit's window ends.
    pub(crate) fn over_rate_limit(&self) -> Option<Duration> {
        self.limiter.check()
    }

    /// The configured latency.
    pub(crate) fn latency(&self) -> Duration {
        self.lock().latency
    }
}

/// A `POST /sim/faults` command every cloud simulator understands.
#[derive(Debug, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum FaultCommand {
    Fail {
        status: u16,
        #[serde(default = "one")]
        count: usize,
        #[serde(default)]
        method: Option<String>,
        #[serde(default)]
        path_prefix: Option<String>,
        #[serde(default)]
        command: Option<String>,
    },
    Throttle {
        retry_after: u32,
        #[serde(default = "one")]
        count: usize,
        #[serde(default)]
        method: Option<String>,
        #[serde(default)]
        path_prefix: Option<String>,
        #[serde(default)]
        command: Option<String>,
    },
    /// See [`Faults::cut_next`].
    Cut {
        #[serde(default = "one")]
        count: usize,
        #[serde(default)]
        method: Option<String>,
        #[serde(default)]
        path_prefix: Option<String>,
        #[serde(default)]
        command: Option<String>,
    },
    Latency {
        ms: u64,
    },
    /// See [`Faults::kill_after`].
    KillAfter {
        #[serde(default = "one")]
        count: usize,
        #[serde(default = "unavailable")]
        status: u16,
        #[serde(default)]
        method: Option<String>,
        #[serde(default)]
        path_prefix: Option<String>,
        #[serde(default)]
        command: Option<String>,
    },
    Clear,
}

/// The default status of a kill point: the cloud is unreachable from a dead controller.
fn unavailable() -> u16 {
    503
}

fn one() -> usize {
    1
}

impl FaultCommand {
    /// Carries the command out on `faults`.
    pub(crate) fn apply(self, faults: &Faults) {
        match self {
            FaultCommand::Fail {
                status,
                count,
                method,
                path_prefix,
                command,
            } => faults.fail_next(
                Match {
                    method,
                    path_prefix,
                    command,
                },
                status,
                count,
            ),
            FaultCommand::Throttle {
                retry_after,
                count,
                method,
                path_prefix,
                command,
            } => faults.throttle_next(
                Match {
                    method,
                    path_prefix,
                    command,
                },
                retry_after,
                count,
            ),
            FaultCommand::Cut {
                count,
                method,
                path_prefix,
                command,
            } => faults.cut_next(
                Match {
                    method,
                    path_prefix,
                    command,
                },
                count,
            ),
            FaultCommand::Latency { ms } => faults.set_latency(Duration::from_millis(ms)),
            FaultCommand::KillAfter {
                count,
                status,
                method,
                path_prefix,
                command,
            } => faults.kill_after(
                Match {
                    method,
                    path_prefix,
                    command,
                },
                count,
                status,
            ),
            FaultCommand::Clear => faults.clear(),
        }
    }
}

/// Requests a log keeps; older ones are dropped first (bounds memory in long benchmark runs).
pub const LOG_CAPACITY: usize = 100_000;

/// The log's rendering of a request body: parsed JSON, a JSON string holding the text when it
/// was not JSON, or `None` when empty.
pub(crate) fn body_value(body: &[u8]) -> Option<Value> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    Some(
        serde_json::from_slice(body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned())),
    )
}

/// The clock of every simulator's request log in the process: a counter, so that the entries
/// of two simulators compare (a test of several clouds can tell that one cloud answered a
/// request before another cloud received one).
static CLOCK: AtomicU64 = AtomicU64::new(1);

/// The next tick of the process-wide log clock.
pub(crate) fn tick() -> u64 {
    CLOCK.fetch_add(1, Ordering::SeqCst)
}

/// A logged request with when it arrived (before any fault latency, authentication or
/// handling) and when it was answered (its effect done, before the response is sent), on the
/// clock every simulator of the process shares. `a.answered < b.arrived` means `a` was over,
/// effects included, before `b` reached its simulator.
#[derive(Clone, Debug)]
pub struct Sequenced<T> {
    /// The tick when the request arrived.
    pub arrived: u64,
    /// The tick when it was answered.
    pub answered: u64,
    /// The request.
    pub request: T,
}

/// A bounded log of served requests, shared by the server and every handle.
#[derive(Debug)]
pub(crate) struct RequestLog<T> {
    entries: Mutex<VecDeque<Sequenced<T>>>,
}

impl<T> Default for RequestLog<T> {
    fn default() -> Self {
        RequestLog {
            entries: Mutex::new(VecDeque::new()),
        }
    }
}

impl<T: Clone> RequestLog<T> {
    fn lock(&self) -> MutexGuard<'_, VecDeque<Sequenced<T>>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends a request that arrived at tick `arrived` and is answered now, dropping the
    /// oldest entry when full.
    pub(crate) fn record(&self, arrived: u64, request: T) {
        let mut entries = self.lock();
        if entries.len() >= LOG_CAPACITY {
            entries.pop_front();
        }
        entries.push_back(Sequenced {
            arrived,
            answered: tick(),
            request,
        });
    }

    /// Every entry, oldest first.
    pub(crate) fn all(&self) -> Vec<T> {
        self.lock().iter().map(|e| e.request.clone()).collect()
    }

    /// Every entry with its ticks, in the order they were answered.
    pub(crate) fn sequenced(&self) -> Vec<Sequenced<T>> {
        self.lock().iter().cloned().collect()
    }

    /// Forgets every entry.
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_consumed_in_order() {
        let f = Faults::default();
        f.fail_next(Match::method("post"), 500, 1);
        f.throttle_next(Match::path("/v1/load-balancers"), 3, 2);
        assert_eq!(f.take_for("GET", "/v1/servers", None), None);
        assert_eq!(
            f.take_for("POST", "/v1/load-balancers", None),
            Some(Injected::Fail(500))
        );
        assert_eq!(
            f.take_for("POST", "/v1/load-balancers", None),
            Some(Injected::Throttle(3))
        );
        assert_eq!(f.pending(), 1);
        f.clear();
        assert_eq!(f.take_for("GET", "/v1/load-balancers", None), None);
    }

    #[test]
    fn command_rules_need_the_command() {
        let f = Faults::default();
        f.fail_next(Match::command("createLoadBalancerRule"), 530, 1);
        assert_eq!(f.take_for("POST", "/client/api", None), None);
        assert_eq!(f.take_for("POST", "/client/api", Some("listZones")), None);
        assert_eq!(
            f.take_for("POST", "/client/api", Some("createloadbalancerrule")),
            Some(Injected::Fail(530))
        );
        let c: FaultCommand = serde_json::from_str(
            r#"{"action": "throttle", "retry_after": 2, "command": "listZones"}"#,
        )
        .unwrap();
        c.apply(&f);
        assert_eq!(
            f.take_for("GET", "/client/api", Some("listZones")),
            Some(Injected::Throttle(2))
        );
    }

    #[test]
    fn a_kill_point_fails_everything_after_it() {
        let f = Faults::default();
        f.fail_next(Match::command("listZones"), 500, 1);
        f.kill_after(Match::command("associateIpAddress"), 1, 503);
        assert_eq!(f.take_for("GET", "/client/api", Some("listNetworks")), None);
        assert!(!f.killed());
        assert_eq!(
            f.take_for("POST", "/client/api", Some("associateIpAddress")),
            None
        );
        assert!(f.killed());
        for command in ["queryAsyncJobResult", "listZones", "associateIpAddress"] {
            assert_eq!(
                f.take_for("GET", "/client/api", Some(command)),
                Some(Injected::Fail(503))
            );
        }
        f.clear();
        assert_eq!(f.take_for("GET", "/client/api", Some("listNetworks")), None);
        let c: FaultCommand = serde_json::from_str(
            r#"{"action": "kill_after", "command": "createTags", "count": 2}"#,
        )
        .unwrap();
        c.apply(&f);
        assert_eq!(f.take_for("POST", "/client/api", Some("createTags")), None);
        assert_eq!(f.take_for("POST", "/client/api", Some("createTags")), None);
        assert_eq!(f.take_for("GET", "/v1/x", None), Some(Injected::Fail(503)));
    }

    #[test]
    fn commands_apply() {
        let f = Faults::default();
        let c: FaultCommand =
            serde_json::from_str(r#"{"action": "fail", "status": 503, "count": 2}"#).unwrap();
        c.apply(&f);
        assert_eq!(f.pending(), 2);
        let c: FaultCommand = serde_json::from_str(r#"{"action": "clear"}"#).unwrap();
        c.apply(&f);
        assert_eq!(f.pending(), 0);
    }

    #[test]
    fn the_log_is_bounded_and_bodies_render() {
        let log = RequestLog::<u32>::default();
        let arrived = tick();
        log.record(arrived, 1);
        log.record(tick(), 2);
        assert_eq!(log.all(), vec![1, 2]);
        let ticks: Vec<(u64, u64)> = log
            .sequenced()
            .iter()
            .map(|e| (e.arrived, e.answered))
            .collect();
        // Each answered after it arrived, the first over before the second arrived.
        assert!(ticks[0].0 < ticks[0].1 && ticks[0].1 < ticks[1].0 && ticks[1].0 < ticks[1].1);
        log.clear();
        assert!(log.all().is_empty());
        assert_eq!(body_value(b"  "), None);
        assert_eq!(body_value(b"{\"a\":1}"), Some(serde_json::json!({"a": 1})));
        assert_eq!(body_value(b"a=b"), Some(Value::String("a=b".into())));
    }
}
