//! The request core of the cloud API simulators (cloudscale, PhoenixNAP, CloudStack): the one
//! pipeline every request goes through, and the `/sim` control endpoints they all have.
//!
//! A request to `/sim` or below is a control request: answered without credentials, never
//! delayed, faulted or logged. Every other request waits the configured latency, then meets the
//! fault rules ([`Faults`]): a failure or throttle answers in the cloud's error shape without
//! touching the state, a cut serves it and breaks the connection after the headers, and a kill
//! point fails everything after it. What is left is served by the cloud's own routes, and every
//! answer, faulted or not, goes into the bounded request log.
//!
//! A cloud plugs in what differs: through [`CloudApi`] how it reads a request once (CloudStack
//! its parameters, to name the command faults match), its error bodies for injected faults, its
//! routes and its log entry; through [`ControlApi`] what settling and seeding do to its state,
//! its own `/sim` endpoints and its control error shape. [`StateCell`] holds its state (seeding
//! is all or nothing), [`parse_seed`] and [`load_seed_file`] read its seeds. The Kubernetes
//! simulator is not built on this: it authorises before faults, matches faults on Kubernetes
//! verbs and resources and can expire watches; it shares [`serving`](crate::serving) and
//! [`is_control_path`].

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State as AxumState;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::fixture::{FaultCommand, Faults, Injected, RequestLog, cut_body};
use crate::serving::{self, Served};

/// One request as the core received it.
#[derive(Debug)]
pub(crate) struct Request {
    /// The HTTP method.
    pub method: Method,
    /// The full URI (path and query).
    pub uri: Uri,
    /// The path without the query.
    pub path: String,
    /// The request headers.
    pub headers: HeaderMap,
    /// The whole body.
    pub body: Bytes,
}

impl Request {
    /// The raw query without `?`; empty when there is none.
    pub(crate) fn query(&self) -> &str {
        self.uri.query().unwrap_or("")
    }
}

/// What a `/sim` control request answers: `Ok(None)` is 204, `Ok(Some(v))` 200 with `v`.
pub(crate) type ControlAnswer<E> = Result<Option<Value>, E>;

/// What a cloud simulator plugs into the request pipeline. It is implemented by the state its
/// server shares with every handle.
pub(crate) trait CloudApi: Send + Sync + Sized + 'static {
    /// The simulator's name in log messages, e.g. `cloudscale`.
    const NAME: &'static str;
    /// What the cloud reads from a request once, before faults, for serving and logging it
    /// (CloudStack's merged parameters; `()` where the path and query say enough).
    type Parsed;
    /// One entry of the request log.
    type Logged: LogEntry;

    /// The fault rules requests meet.
    fn faults(&self) -> &Faults;

    /// The request log.
    fn log(&self) -> &RequestLog<Self::Logged>;

    /// Reads the request once; runs after the latency, before faults.
    fn parse(&self, request: &Request) -> Self::Parsed;

    /// The API command the request names, for fault rules with a command (CloudStack's
    /// `command` parameter); None for REST APIs, whose rules match on method and path.
    fn command(parsed: &Self::Parsed) -> Option<&str> {
        let _ = parsed;
        None
    }

    /// The answer of an injected failure with this status, in the cloud's error shape.
    fn failure(request: &Request, parsed: &Self::Parsed, status: u16) -> Response;

    /// The answer of an injected throttle: 429 with `Retry-After: seconds`.
    fn throttled(request: &Request, parsed: &Self::Parsed, seconds: u32) -> Response;

    /// Whether the simulator's rate limit counts this request (CloudStack exempts root
    /// admins); every request by default.
    fn rate_limited_request(&self, request: &Request, parsed: &Self::Parsed) -> bool {
        let _ = (request, parsed);
        true
    }

    /// The answer to a request over the simulator's rate limit ([`crate::rate_limit`]), `wait`
    /// before its window ends, as the cloud answers one. By default the throttle's answer
    /// (429 with `Retry-After` in whole seconds, rounded up, at least 1): the Kubernetes
    /// apiserver's way (its max-in-flight filter answers 429 with `Retry-After`), our choice
    /// for a cloud that documents none.
    fn rate_limited(
        request: &Request,
        parsed: &Self::Parsed,
        wait: std::time::Duration,
    ) -> Response {
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let seconds = u32::try_from(seconds.max(1)).unwrap_or(u32::MAX);
        Self::throttled(request, parsed, seconds)
    }

    /// A refusal of the cloud's own fault injection, asked only when no common rule answered
    /// (cloudscale's busy load balancers).
    fn refusal(&self, request: &Request) -> Option<Response> {
        let _ = request;
        None
    }

    /// Serves the request: credentials, routes, state.
    fn serve(&self, request: &Request, parsed: &Self::Parsed) -> Response;

    /// The log entry of a request answered with `status`.
    fn log_entry(request: &Request, parsed: &Self::Parsed, status: u16) -> Self::Logged;
}

/// An entry of a request log.
pub(crate) trait LogEntry: Clone + Send + 'static {
    /// The entry as `GET /sim/requests` shows it.
    fn to_json(&self) -> Value;
}

/// A `POST /sim/faults` body that a simulator carries out.
pub(crate) trait FaultCommandFor<C>: DeserializeOwned {
    /// Carries the command out on `sim`'s faults.
    fn apply_to(self, sim: &C);
}

impl<C: CloudApi> FaultCommandFor<C> for FaultCommand {
    fn apply_to(self, sim: &C) {
        self.apply(sim.faults());
    }
}

/// A `/sim` request as a cloud's own control endpoints see it.
#[derive(Debug)]
pub(crate) struct ControlRequest<'a> {
    /// The HTTP method.
    pub method: &'a str,
    /// The path's segments, `["sim", ...]`.
    pub segments: Vec<&'a str>,
    /// The path.
    pub path: &'a str,
    /// The body.
    pub body: &'a [u8],
}

/// What a cloud simulator plugs into the `/sim` control API: the common endpoints' effects on
/// its state, its own endpoints and its error shape.
pub(crate) trait ControlApi: CloudApi {
    /// The error of a control request, rendered by [`ControlApi::control_error`].
    type Error;
    /// The body of `POST /sim/faults`: the common [`FaultCommand`], or it and the cloud's own.
    type FaultCommand: FaultCommandFor<Self>;

    /// `DELETE /sim/faults`: every rule, the latency and any kill point go.
    fn clear_faults(&self) {
        self.faults().clear();
    }

    /// `POST /sim/settle`: every pending transition completes now.
    fn settle(&self);

    /// `POST /sim/seed`: parses the YAML or JSON seed and adds it, all or nothing.
    fn seed(&self, text: &str) -> Result<(), String>;

    /// The cloud's own control endpoints; anything it does not serve is its 404.
    fn control(&self, request: &ControlRequest<'_>) -> ControlAnswer<Self::Error>;

    /// A 400 of a control request: an unreadable body or a bad seed.
    fn bad_request(message: String) -> Self::Error;

    /// A control request's JSON body; a 400 naming what is wrong otherwise.
    fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, Self::Error> {
        serde_json::from_slice(body).map_err(|e| Self::bad_request(e.to_string()))
    }

    /// A control request's 200 body.
    fn control_json(value: &Value) -> Response;

    /// A control request's error.
    fn control_error(error: Self::Error) -> Response;
}

/// Binds `addr` (port 0 picks a free port; an unspecified address is shown as 127.0.0.1 in the
/// URL), builds the shared state from the base URL `http://IP:PORT` and serves it through the
/// core on a task of the current tokio runtime.
pub(crate) async fn start<C: ControlApi>(
    addr: SocketAddr,
    make: impl FnOnce(String) -> C,
) -> anyhow::Result<(Arc<C>, Arc<Served>)> {
    let (listener, mut bound) = serving::bind(addr).await?;
    if bound.ip().is_unspecified() {
        bound.set_ip(Ipv4Addr::LOCALHOST.into());
    }
    let shared = Arc::new(make(format!("http://{bound}")));
    let router = Router::new()
        .fallback(handle::<C>)
        .with_state(shared.clone());
    let server = Arc::new(Served::spawn(listener, router, C::NAME));
    Ok((shared, server))
}

/// Whether a request is for the `/sim` control API (the Kubernetes simulator's too).
pub(crate) fn is_control_path(path: &str) -> bool {
    path == "/sim" || path.starts_with("/sim/")
}

/// The pipeline every request goes through (see the module documentation).
async fn handle<C: ControlApi>(
    AxumState(sim): AxumState<Arc<C>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request = Request {
        path: uri.path().to_string(),
        method,
        uri,
        headers,
        body,
    };
    if is_control_path(&request.path) {
        return control(&*sim, &request);
    }
    let arrived = crate::fixture::tick();
    let latency = sim.faults().latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let parsed = sim.parse(&request);
    // The cloud's own limit comes first: a request over it is neither faulted nor served.
    let over_limit = sim
        .rate_limited_request(&request, &parsed)
        .then(|| sim.faults().over_rate_limit())
        .flatten();
    let response = match over_limit {
        Some(wait) => C::rate_limited(&request, &parsed, wait),
        None => match sim.faults().take_for(
            request.method.as_str(),
            &request.path,
            C::command(&parsed).filter(|c| !c.is_empty()),
        ) {
            Some(Injected::Fail(status)) => C::failure(&request, &parsed, status),
            Some(Injected::Throttle(seconds)) => C::throttled(&request, &parsed, seconds),
            Some(Injected::Cut) => cut_body(sim.serve(&request, &parsed)),
            None => match sim.refusal(&request) {
                Some(refused) => refused,
                None => sim.serve(&request, &parsed),
            },
        },
    };
    let status = response.status().as_u16();
    let (method, uri) = (&request.method, &request.uri);
    tracing::debug!(%method, %uri, status, "{}-sim request", C::NAME);
    sim.log()
        .record(arrived, C::log_entry(&request, &parsed, status));
    response
}

/// Serves a `/sim` request: the endpoints every cloud has here, the rest by the cloud.
fn control<C: ControlApi>(sim: &C, request: &Request) -> Response {
    match control_answer(sim, request) {
        Ok(None) => StatusCode::NO_CONTENT.into_response(),
        Ok(Some(value)) => C::control_json(&value),
        Err(e) => C::control_error(e),
    }
}

fn control_answer<C: ControlApi>(sim: &C, request: &Request) -> ControlAnswer<C::Error> {
    let control = ControlRequest {
        method: request.method.as_str(),
        segments: request.path.trim_matches('/').split('/').collect(),
        path: &request.path,
        body: &request.body,
    };
    match (control.method, control.segments.as_slice()) {
        ("POST", ["sim", "settle"]) => sim.settle(),
        ("POST", ["sim", "seed"]) => sim
            .seed(&String::from_utf8_lossy(control.body))
            .map_err(C::bad_request)?,
        ("GET", ["sim", "requests"]) => {
            let entries = sim.log().all().iter().map(LogEntry::to_json).collect();
            return Ok(Some(Value::Array(entries)));
        }
        ("DELETE", ["sim", "requests"]) => sim.log().clear(),
        ("POST", ["sim", "faults"]) => {
            C::parse_body::<C::FaultCommand>(control.body)?.apply_to(sim);
        }
        ("DELETE", ["sim", "faults"]) => sim.clear_faults(),
        _ => return sim.control(&control),
    }
    Ok(None)
}

/// `{"status": "..."}`: the body of the control endpoints that set an entity's status.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StatusBody {
    /// The new status, any string.
    pub status: String,
}

/// A cell holding a simulator's state, shared by its server and every handle.
#[derive(Debug, Default)]
pub(crate) struct StateCell<S> {
    state: Mutex<S>,
}

impl<S: Clone> StateCell<S> {
    /// A cell holding `state`.
    pub(crate) fn new(state: S) -> Self {
        StateCell {
            state: Mutex::new(state),
        }
    }

    /// The state, locked; a panic while it was held does not make it unusable (every change
    /// that can fail goes through [`StateCell::change`]).
    pub(crate) fn lock(&self) -> MutexGuard<'_, S> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies a change to a copy of the state and keeps it only on success: seeding is all or
    /// nothing.
    pub(crate) fn change<T>(
        &self,
        f: impl FnOnce(&mut S) -> Result<T, String>,
    ) -> Result<T, String> {
        let mut state = self.lock();
        let mut next = state.clone();
        let out = f(&mut next)?;
        *state = next;
        Ok(out)
    }
}

/// Parses YAML or JSON seed text (YAML is a superset of JSON).
pub(crate) fn parse_seed<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_norway::from_str(text).map_err(|e| e.to_string())
}

/// Reads a seed file, parses it with `parse` and validates it with `check`; errors name the
/// file and what is wrong.
pub(crate) fn load_seed_file<T>(
    path: &std::path::Path,
    parse: impl FnOnce(&str) -> Result<T, String>,
    check: impl FnOnce(&T) -> Result<(), String>,
) -> anyhow::Result<T> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read seed file {}: {e}", path.display()))?;
    let seed = parse(&text).map_err(|e| anyhow::anyhow!("seed file {}: {e}", path.display()))?;
    check(&seed).map_err(|e| anyhow::anyhow!("seed file {}: {e}", path.display()))?;
    Ok(seed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::header;
    use serde_json::json;

    /// A request path and the status it got.
    #[derive(Clone, Debug)]
    struct Entry(String, u16);

    impl LogEntry for Entry {
        fn to_json(&self) -> Value {
            json!(format!("{} {}", self.0, self.1))
        }
    }

    /// A cloud whose state is the list of paths it served.
    #[derive(Default)]
    struct Toy {
        state: StateCell<Vec<String>>,
        faults: Faults,
        log: RequestLog<Entry>,
        url: String,
    }

    impl CloudApi for Toy {
        const NAME: &'static str = "toy";
        type Parsed = ();
        type Logged = Entry;

        fn faults(&self) -> &Faults {
            &self.faults
        }

        fn log(&self) -> &RequestLog<Entry> {
            &self.log
        }

        fn parse(&self, _: &Request) {}

        fn failure(_: &Request, _: &(), status: u16) -> Response {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, "failed").into_response()
        }

        fn throttled(_: &Request, _: &(), seconds: u32) -> Response {
            let retry = [(header::RETRY_AFTER, seconds.to_string())];
            (StatusCode::TOO_MANY_REQUESTS, retry, "slow down").into_response()
        }

        fn serve(&self, request: &Request, _: &()) -> Response {
            self.state.lock().push(request.path.clone());
            "served".into_response()
        }

        fn log_entry(request: &Request, _: &(), status: u16) -> Entry {
            Entry(request.path.clone(), status)
        }
    }

    impl ControlApi for Toy {
        type Error = (StatusCode, String);
        type FaultCommand = FaultCommand;

        fn settle(&self) {
            self.state.lock().clear();
        }

        fn seed(&self, text: &str) -> Result<(), String> {
            let paths: Vec<String> = parse_seed(text)?;
            self.state.change(|state| {
                for path in paths {
                    if path.is_empty() {
                        return Err("empty path".into());
                    }
                    state.push(path);
                }
                Ok(())
            })
        }

        fn control(&self, request: &ControlRequest<'_>) -> ControlAnswer<Self::Error> {
            match (request.method, request.segments.as_slice()) {
                ("GET", ["sim", "state"]) => Ok(Some(json!(*self.state.lock()))),
                _ => Err((StatusCode::NOT_FOUND, format!("no {}", request.path))),
            }
        }

        fn bad_request(message: String) -> Self::Error {
            (StatusCode::BAD_REQUEST, message)
        }

        fn control_json(value: &Value) -> Response {
            axum::Json(value.clone()).into_response()
        }

        fn control_error(error: Self::Error) -> Response {
            error.into_response()
        }
    }

    async fn call(method: &str, url: String, body: &str) -> (u16, String) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let response = reqwest::Client::new()
            .request(method, url)
            .body(body.to_string())
            .send()
            .await
            .expect("the toy answers");
        let status = response.status().as_u16();
        (status, response.text().await.unwrap_or_default())
    }

    #[tokio::test]
    async fn the_pipeline_and_the_common_control_api() {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let (toy, _server) = start(addr, |url| Toy {
            url,
            ..Toy::default()
        })
        .await
        .expect("the toy starts");
        let url = |path: &str| format!("{}{path}", toy.url);

        // Seeding is all or nothing; control requests are neither faulted nor logged.
        assert_eq!(call("POST", url("/sim/seed"), "[a, b]").await.0, 204);
        let bad = call("POST", url("/sim/seed"), "[c, '']").await;
        assert_eq!(bad, (400, "empty path".into()));
        assert_eq!(
            call("GET", url("/sim/state"), "").await,
            (200, r#"["a","b"]"#.into())
        );
        assert_eq!(
            call("GET", url("/sim/nope/"), "").await,
            (404, "no /sim/nope/".into())
        );
        let fault = r#"{"action": "fail", "status": 503, "path_prefix": "/x"}"#;
        assert_eq!(call("POST", url("/sim/faults"), fault).await.0, 204);
        assert_eq!(call("POST", url("/sim/faults"), "{}").await.0, 400);

        // A failure changes nothing; the rule is used up.
        assert_eq!(call("GET", url("/x"), "").await, (503, "failed".into()));
        assert_eq!(call("GET", url("/x"), "").await, (200, "served".into()));
        let throttle = r#"{"action": "throttle", "retry_after": 2}"#;
        call("POST", url("/sim/faults"), throttle).await;
        assert_eq!(call("GET", url("/y"), "").await.0, 429);

        // A cut request is carried out, but its answer breaks.
        call("POST", url("/sim/faults"), r#"{"action": "cut"}"#).await;
        // (Whether the headers reach the client before the break is up to hyper's buffering.)
        let broken = match reqwest::get(url("/z")).await {
            Ok(response) => response.text().await.is_err(),
            Err(_) => true,
        };
        assert!(broken);
        assert_eq!(*toy.state.lock(), ["a", "b", "/x", "/z"]);

        let log = call("GET", url("/sim/requests"), "").await;
        assert_eq!(
            log,
            (200, r#"["/x 503","/x 200","/y 429","/z 200"]"#.into())
        );
        assert_eq!(call("DELETE", url("/sim/requests"), "").await.0, 204);
        call("POST", url("/sim/settle"), "").await;
        assert!(toy.state.lock().is_empty());

        // A kill point fails everything after it until the faults are cleared.
        let kill = r#"{"action": "kill_after", "path_prefix": "/k", "count": 1}"#;
        call("POST", url("/sim/faults"), kill).await;
        assert_eq!(call("GET", url("/k"), "").await.0, 200);
        assert_eq!(call("GET", url("/a"), "").await.0, 503);
        assert_eq!(call("DELETE", url("/sim/faults"), "").await.0, 204);
        assert_eq!(call("GET", url("/a"), "").await.0, 200);
        assert_eq!(toy.log.all().len(), 3);
    }
}
