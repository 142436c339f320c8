//! Fault injection: failing responses, dropped connections, latency and expiring watches.
//!
//! Rules are consumed in the order they were added; the first rule that matches a request and
//! still has a count left decides its fate. Latency rules all apply (their delays add up).

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::request::{ApiRequest, Verb};

/// Which requests a fault applies to. Every field that is set must match (all unset: any
/// request, including discovery).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RequestMatcher {
    /// HTTP method, e.g. `PUT` (case-insensitive).
    pub method: Option<String>,
    /// Kubernetes verbs; empty matches any.
    pub verbs: Vec<Verb>,
    /// Resource: plural (`nodes`), kubectl-style qualified (`leases.coordination.k8s.io`),
    /// singular or short name.
    pub resource: Option<String>,
    /// Subresource, e.g. `status`; `""` matches only the main resource.
    pub subresource: Option<String>,
    /// Namespace.
    pub namespace: Option<String>,
    /// Object name.
    pub name: Option<String>,
    /// Substring of the request path.
    pub path_contains: Option<String>,
}

impl RequestMatcher {
    /// Matches every request.
    pub fn any() -> RequestMatcher {
        RequestMatcher::default()
    }

    /// Matches requests for `resource` (any verb).
    pub fn resource(resource: &str) -> RequestMatcher {
        RequestMatcher {
            resource: Some(resource.to_string()),
            ..RequestMatcher::default()
        }
    }

    /// Also requires this HTTP method.
    pub fn with_method(mut self, method: &str) -> RequestMatcher {
        self.method = Some(method.to_string());
        self
    }

    /// Also requires this verb (repeat to allow several).
    pub fn with_verb(mut self, verb: Verb) -> RequestMatcher {
        self.verbs.push(verb);
        self
    }

    /// Also requires this subresource (`""` for the main resource only).
    pub fn with_subresource(mut self, subresource: &str) -> RequestMatcher {
        self.subresource = Some(subresource.to_string());
        self
    }

    /// Also requires this namespace.
    pub fn with_namespace(mut self, namespace: &str) -> RequestMatcher {
        self.namespace = Some(namespace.to_string());
        self
    }

    /// Also requires this object name.
    pub fn with_name(mut self, name: &str) -> RequestMatcher {
        self.name = Some(name.to_string());
        self
    }

    /// Also requires the path to contain `fragment`.
    pub fn with_path_contains(mut self, fragment: &str) -> RequestMatcher {
        self.path_contains = Some(fragment.to_string());
        self
    }

    pub(crate) fn matches(&self, method: &str, path: &str, req: &ApiRequest) -> bool {
        let rt = req.resource();
        self.method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && (self.verbs.is_empty() || req.verb.is_some_and(|v| self.verbs.contains(&v)))
            && self.resource.as_deref().is_none_or(|r| {
                rt.is_some_and(|rt| {
                    super::resources::by_name(r).is_some_and(|x| x.index == rt.index)
                })
            })
            && self
                .subresource
                .as_deref()
                .is_none_or(|s| req.subresource().unwrap_or("") == s)
            && self
                .namespace
                .as_deref()
                .is_none_or(|n| req.namespace() == Some(n))
            && self.name.as_deref().is_none_or(|n| req.name() == Some(n))
            && self
                .path_contains
                .as_deref()
                .is_none_or(|p| path.contains(p))
    }
}

/// What an injected failure does to a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum FaultAction {
    /// Answer with this HTTP status and a matching `Status` body (429 adds `Retry-After: 1`).
    Status {
        /// HTTP status code.
        code: u16,
    },
    /// Send response headers, then break the connection without a body.
    Disconnect,
}

#[derive(Debug, Clone)]
struct Rule {
    remaining: u64,
    action: FaultAction,
    matcher: RequestMatcher,
}

#[derive(Debug, Default)]
struct State {
    rules: Vec<Rule>,
    latency: Vec<(RequestMatcher, Duration)>,
    expire_watches: u64,
}

/// Runtime-settable fault injection, shared by every request.
#[derive(Debug, Default)]
pub struct Faults {
    state: Mutex<State>,
}

/// What [`Faults::check`] decided for one request.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub delay: Duration,
    pub action: Option<FaultAction>,
    /// Answer a watch with a single 410 ERROR event.
    pub expire_watch: bool,
}

impl Faults {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next `n` requests matching `matcher` fail with HTTP `status` and a Status body
    /// (500 InternalError, 429 TooManyRequests with `Retry-After: 1`, 409 Conflict, ...).
    pub fn fail_next(&self, n: u64, status: u16, matcher: RequestMatcher) {
        self.add(n, FaultAction::Status { code: status }, matcher);
    }

    /// The next `n` PUT/PATCH requests for `resource` (main resource or status) get 409 Conflict.
    pub fn conflict_next_writes(&self, resource: &str, n: u64) {
        let matcher = RequestMatcher::resource(resource)
            .with_verb(Verb::Update)
            .with_verb(Verb::Patch);
        self.fail_next(n, 409, matcher);
    }

    /// The next `n` requests matching `matcher` lose their connection after the response headers.
    pub fn disconnect_next(&self, n: u64, matcher: RequestMatcher) {
        self.add(n, FaultAction::Disconnect, matcher);
    }

    /// Adds a rule with an explicit action.
    pub fn add(&self, n: u64, action: FaultAction, matcher: RequestMatcher) {
        if n > 0 {
            self.lock().rules.push(Rule {
                remaining: n,
                action,
                matcher,
            });
        }
    }

    /// Delays every request by `delay` (replaces earlier latency settings; zero removes them).
    pub fn set_latency(&self, delay: Duration) {
        let mut st = self.lock();
        st.latency.clear();
        if !delay.is_zero() {
            st.latency.push((RequestMatcher::any(), delay));
        }
    }

    /// Delays requests matching `matcher` by `delay`, on top of other latency settings.
    pub fn add_latency(&self, matcher: RequestMatcher, delay: Duration) {
        self.lock().latency.push((matcher, delay));
    }

    /// The next `n` watch requests get one `ERROR` event with a 410 Expired Status and end, as a
    /// watch from a compacted resourceVersion does.
    pub fn expire_next_watches(&self, n: u64) {
        self.lock().expire_watches += n;
    }

    /// Removes every rule, latency and pending watch expiry.
    pub fn clear(&self) {
        *self.lock() = State::default();
    }

    /// How many injected failures are still pending (summed over rules).
    pub fn pending(&self) -> u64 {
        self.lock().rules.iter().map(|r| r.remaining).sum()
    }

    /// Decides the fate of one request, consuming a count of the rule that fires.
    pub(crate) fn check(&self, method: &str, path: &str, req: &ApiRequest) -> Outcome {
        let mut st = self.lock();
        let delay = st
            .latency
            .iter()
            .filter(|(m, _)| m.matches(method, path, req))
            .map(|(_, d)| *d)
            .sum();
        let mut outcome = Outcome {
            delay,
            ..Outcome::default()
        };
        if let Some(i) = st
            .rules
            .iter()
            .position(|r| r.matcher.matches(method, path, req))
        {
            outcome.action = Some(st.rules[i].action.clone());
            st.rules[i].remaining -= 1;
            if st.rules[i].remaining == 0 {
                st.rules.remove(i);
            }
            return outcome;
        }
        if req.verb == Some(Verb::Watch) && st.expire_watches > 0 {
            st.expire_watches -= 1;
            outcome.expire_watch = true;
        }
        outcome
    }
}

/// A fault command of the HTTP control API (`POST /sim/faults`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case", tag = "action", deny_unknown_fields)]
pub enum FaultCommand {
    /// `{"action":"fail","count":2,"status":500,"match":{...}}`
    Fail {
        /// How many requests.
        count: u64,
        /// HTTP status.
        status: u16,
        /// Which requests.
        #[serde(default, rename = "match")]
        matcher: RequestMatcher,
    },
    /// `{"action":"conflict","count":1,"resource":"nodes"}`
    Conflict {
        /// How many writes.
        count: u64,
        /// Resource name.
        resource: String,
    },
    /// `{"action":"disconnect","count":1,"match":{...}}`
    Disconnect {
        /// How many requests.
        count: u64,
        /// Which requests.
        #[serde(default, rename = "match")]
        matcher: RequestMatcher,
    },
    /// `{"action":"latency","ms":100,"match":{...}}` (without `match`: replaces the global delay).
    Latency {
        /// Milliseconds.
        ms: u64,
        /// Which requests; absent means all (and replaces earlier settings).
        #[serde(default, rename = "match")]
        matcher: Option<RequestMatcher>,
    },
    /// `{"action":"expire_watches","count":1}`
    ExpireWatches {
        /// How many watch requests.
        count: u64,
    },
    /// `{"action":"drop_watches"}`: end every open watch now.
    DropWatches,
    /// `{"action":"compact"}`: forget watch history.
    Compact,
    /// `{"action":"clear"}`: remove every fault.
    Clear,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::request;
    use axum::http::Method;

    fn req(method: Method, path: &str) -> ApiRequest {
        request::parse(&method, path, Default::default())
    }

    #[test]
    fn rules_are_consumed_in_order() {
        let f = Faults::default();
        f.conflict_next_writes("nodes", 1);
        f.fail_next(2, 500, RequestMatcher::any().with_method("GET"));
        let put = req(Method::PUT, "/api/v1/nodes/a");
        let get = req(Method::GET, "/api/v1/nodes/a");
        assert_eq!(f.pending(), 3);
        assert_eq!(
            f.check("GET", "/api/v1/nodes/a", &get).action,
            Some(FaultAction::Status { code: 500 })
        );
        assert_eq!(
            f.check("PUT", "/api/v1/nodes/a", &put).action,
            Some(FaultAction::Status { code: 409 })
        );
        assert_eq!(f.check("PUT", "/api/v1/nodes/a", &put).action, None);
        assert_eq!(
            f.check("GET", "/api/v1/nodes/a", &get).action,
            Some(FaultAction::Status { code: 500 })
        );
        assert_eq!(f.check("GET", "/api/v1/nodes/a", &get).action, None);
        assert_eq!(f.pending(), 0);
    }

    #[test]
    fn matcher_fields() {
        let status = req(
            Method::PATCH,
            "/api/v1/namespaces/default/services/web/status",
        );
        let path = "/api/v1/namespaces/default/services/web/status";
        assert!(
            RequestMatcher::resource("svc")
                .with_subresource("status")
                .matches("PATCH", path, &status)
        );
        assert!(
            !RequestMatcher::resource("svc")
                .with_subresource("")
                .matches("PATCH", path, &status)
        );
        assert!(
            RequestMatcher::any()
                .with_namespace("default")
                .with_name("web")
                .matches("PATCH", path, &status)
        );
        assert!(!RequestMatcher::resource("nodes").matches("PATCH", path, &status));
        assert!(
            RequestMatcher::any()
                .with_path_contains("/web")
                .matches("PATCH", path, &status)
        );
        assert!(
            !RequestMatcher::any()
                .with_verb(Verb::Get)
                .matches("PATCH", path, &status)
        );
    }

    #[test]
    fn latency_adds_up_and_commands_parse() {
        let f = Faults::default();
        f.set_latency(Duration::from_millis(5));
        f.add_latency(RequestMatcher::resource("nodes"), Duration::from_millis(7));
        let r = req(Method::GET, "/api/v1/nodes");
        assert_eq!(
            f.check("GET", "/api/v1/nodes", &r).delay,
            Duration::from_millis(12)
        );
        f.clear();
        assert_eq!(f.check("GET", "/api/v1/nodes", &r).delay, Duration::ZERO);

        let cmd: Result<FaultCommand, _> = serde_json::from_str(
            r#"{"action":"fail","count":1,"status":429,"match":{"verbs":["update"],"resource":"nodes"}}"#,
        );
        assert!(matches!(
            cmd,
            Ok(FaultCommand::Fail {
                count: 1,
                status: 429,
                ..
            })
        ));
        let bad: Result<FaultCommand, _> = serde_json::from_str(r#"{"action":"explode"}"#);
        assert!(bad.is_err());
    }
}
