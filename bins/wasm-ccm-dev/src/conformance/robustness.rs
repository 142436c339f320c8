//! Robustness: every request of a call answered with one fault, for each fault. The driver must
//! come back with a typed error that tells the controllers what to do — never a trap, never a
//! made-up answer, never "not found" (a failing cloud is not a missing instance).

use wasm_ccm_runtime::types::{Node, ProviderError, Service};
use wasm_ccm_runtime::{CallError, CallScope, Described, Driver, Outcome};

use super::faults::{Fault, RETRY_AFTER_SECONDS};
use super::harness::Harness;
use super::report::Checks;

/// A call exercised under faults.
pub(super) enum Target {
    Metadata(Node),
    Exists(Node),
    Ensure(Service, Vec<Node>),
    Delete(Service),
    RoutesList,
}

impl Target {
    fn function(&self) -> &'static str {
        match self {
            Target::Metadata(_) => "instances.instance-metadata",
            Target::Exists(_) => "instances.instance-exists",
            Target::Ensure(..) => "load-balancer.ensure",
            Target::Delete(_) => "load-balancer.delete",
            Target::RoutesList => "routes.list",
        }
    }

    /// Whether the answer can only come from a response body (a read), as opposed to a change
    /// whose response may rightly be ignored.
    fn reads(&self) -> bool {
        matches!(
            self,
            Target::Metadata(_) | Target::Exists(_) | Target::RoutesList
        )
    }

    /// Calls it, the value rendered as text.
    async fn call(&self, driver: &Driver) -> Outcome<String> {
        let sc = CallScope::object("conformance");
        match self {
            Target::Metadata(n) => text(driver.instance_metadata(n, &sc).await),
            Target::Exists(n) => text(driver.instance_exists(n, &sc).await),
            Target::Ensure(s, nodes) => text(driver.load_balancer_ensure(s, nodes, &sc).await),
            Target::Delete(s) => text(driver.load_balancer_delete(s, &sc).await),
            Target::RoutesList => text(driver.routes_list(&sc).await),
        }
    }
}

fn text<T: std::fmt::Debug>(o: Outcome<T>) -> Outcome<String> {
    Outcome {
        result: o.result.map(|v| format!("{v:?}")),
        events: o.events,
        http: o.http,
        elapsed: o.elapsed,
        peak_memory: o.peak_memory,
    }
}

enum Verdict {
    Pass(String),
    Fail(String),
    Skip(String),
}

fn judge(fault: Fault, reads: bool, o: &Outcome<String>) -> Verdict {
    let body_fault = matches!(fault, Fault::MalformedJson | Fault::TruncatedBody);
    match &o.result {
        Err(CallError::Host(e)) => {
            Verdict::Fail(format!("the driver did not return a typed error: {e}"))
        }
        Ok(_) if o.http.is_empty() => {
            Verdict::Skip("answered without a request (from memory)".into())
        }
        Ok(_) if body_fault && !reads => Verdict::Pass(
            "succeeded: the change was accepted (status 200) and its response body is not needed"
                .into(),
        ),
        Ok(v) => Verdict::Fail(format!(
            "returned {v} although every request failed ({}); a failed cloud call must be an error",
            fault.id()
        )),
        Err(CallError::Provider(p)) => match (fault, p) {
            (_, ProviderError::NotFound(m)) => Verdict::Fail(format!(
                "returned not-found ({m}) for a failing cloud; the host would treat the object as gone"
            )),
            (Fault::Http429, ProviderError::RateLimited(s)) => Verdict::Pass(match s {
                Some(s) if *s == RETRY_AFTER_SECONDS => format!("rate-limited({s}s)"),
                Some(s) => format!("rate-limited({s}s; the response said {RETRY_AFTER_SECONDS})"),
                None => "rate-limited (without the Retry-After seconds)".into(),
            }),
            (Fault::Http429, other) => Verdict::Fail(format!(
                "a 429 with Retry-After: {RETRY_AFTER_SECONDS} must come back as rate-limited({RETRY_AFTER_SECONDS}), got {}",
                Described(other)
            )),
            (Fault::Http401, ProviderError::Unauthorized(_)) => {
                Verdict::Pass(format!("{}", Described(p)))
            }
            (Fault::Http401, other) => Verdict::Fail(format!(
                "a 401 must come back as unauthorized, got {}",
                Described(other)
            )),
            (_, other) => Verdict::Pass(format!("typed error: {}", Described(other))),
        },
    }
}

/// Runs every fault against `target` with the faulty driver.
pub(super) async fn check(h: &mut Harness, target: &Target, checks: &mut Checks) {
    let function = target.function();
    let s = Some(function);
    let faulty = h.faulty.clone();
    h.faults.set(None);
    let baseline = target.call(&faulty).await;
    h.note_denied(function, &baseline);
    let skip_all = if let Err(e) = &baseline.result {
        Some(format!("the call fails even without faults ({e})"))
    } else if baseline.http.is_empty() {
        Some("the call makes no HTTP requests".into())
    } else {
        None
    };
    for fault in Fault::ALL {
        let id = format!("robustness/{}", fault.id());
        if let Some(why) = &skip_all {
            checks.skip(&id, s, why.clone());
            continue;
        }
        h.faults.set(Some(fault));
        let o = target.call(&faulty).await;
        h.faults.set(None);
        h.note_denied(function, &o);
        match judge(fault, target.reads(), &o) {
            Verdict::Pass(m) => checks.check(&id, s, Ok(m)),
            Verdict::Fail(m) => checks.check(&id, s, Err(m)),
            Verdict::Skip(m) => checks.skip(&id, s, m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use wasm_ccm_runtime::HostError;
    use wasm_ccm_runtime::http::HttpExchange;

    fn outcome(result: Result<String, CallError>, requests: usize) -> Outcome<String> {
        Outcome {
            result,
            events: vec![],
            http: (0..requests)
                .map(|_| HttpExchange {
                    method: "GET".into(),
                    url: "http://x/".into(),
                    status: Some(500),
                    error: None,
                    mutating: false,
                    shadowed: None,
                })
                .collect(),
            elapsed: Duration::ZERO,
            peak_memory: 0,
        }
    }

    fn passes(v: Verdict) -> bool {
        matches!(v, Verdict::Pass(_))
    }

    #[test]
    fn verdicts() {
        let p = |e: ProviderError| Err(CallError::Provider(e));
        assert!(passes(judge(
            Fault::Http500,
            true,
            &outcome(p(ProviderError::Transient("x".into())), 1)
        )));
        assert!(!passes(judge(
            Fault::Http500,
            true,
            &outcome(p(ProviderError::NotFound("x".into())), 1)
        )));
        assert!(!passes(judge(
            Fault::Http500,
            true,
            &outcome(Ok("true".into()), 1)
        )));
        assert!(matches!(
            judge(Fault::Http500, true, &outcome(Ok("true".into()), 0)),
            Verdict::Skip(_)
        ));
        assert!(passes(judge(
            Fault::Http429,
            true,
            &outcome(p(ProviderError::RateLimited(Some(7))), 1)
        )));
        assert!(!passes(judge(
            Fault::Http429,
            true,
            &outcome(p(ProviderError::Transient("x".into())), 1)
        )));
        assert!(passes(judge(
            Fault::Http401,
            true,
            &outcome(p(ProviderError::Unauthorized("x".into())), 1)
        )));
        assert!(!passes(judge(
            Fault::Http401,
            true,
            &outcome(p(ProviderError::Permanent("x".into())), 1)
        )));
        let trap = Err(CallError::Host(HostError::Trap {
            driver: "d".into(),
            function: "f".into(),
            detail: "unreachable".into(),
            backtrace: Default::default(),
        }));
        assert!(!passes(judge(Fault::Http500, true, &outcome(trap, 1))));
        let ok = || outcome(Ok("()".into()), 1);
        assert!(passes(judge(Fault::MalformedJson, false, &ok())));
        assert!(!passes(judge(Fault::MalformedJson, true, &ok())));
        assert!(!passes(judge(Fault::Http500, false, &ok())));
    }
}
