//! The HTTP client behind the `http` capability: the driver's one way out of the sandbox.
//!
//! Every request is checked against the egress policy before it leaves, every resolved address
//! again at connect time (in the DNS resolver, so no connection is ever opened to a refused
//! address), and every redirect hop again. The resolver only learns a host name, yet resolved
//! addresses are judged by the grant that matched the URL (its scheme and port too): the request
//! future carries its URL in a task-local that the resolver reads and the redirect policy updates
//! for each hop; a resolution that cannot be tied to a request admits globally reachable addresses
//! only.
//!
//! A request's time is the driver's timeout, cut to end a margin before the call's deadline, so a
//! slow cloud ends as an HTTP `timeout` the driver can answer rather than a host deadline that
//! throws the instance away. Response bodies and headers are capped.
//!
//! An [`HttpInterceptor`] may stand between the checks and the network: the conformance runner
//! injects faults and records or replays cassettes there, so what a driver sees is exactly what
//! the host would hand it, egress policy included.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::Url;

use crate::egress::{Denied, EgressPolicy, SpecialAddress};
use crate::model::http::{
    HttpError, HttpExchange, Method, Request, Response, method_name, strip_query,
};
use crate::secrets::{Applied, Vault};
use crate::trace::TracePropagation;

use super::budget::RequestBudget;
use super::timing::request_budget;

/// Limits on a driver's HTTP traffic.
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// Time allowed to open a connection.
    pub connect_timeout: Duration,
    /// Longest a single request may take when the driver asks for no timeout (the call's
    /// deadline, less a margin, caps it anyway).
    pub request_timeout: Duration,
    /// Largest response body accepted.
    pub max_response_body: usize,
    /// Largest total size of response headers accepted.
    pub max_response_headers: usize,
    /// Largest request body a driver may send.
    pub max_request_body: usize,
    /// Redirects followed per request (each re-checked against the policy).
    pub max_redirects: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            max_response_body: 16 * 1024 * 1024,
            max_response_headers: 128 * 1024,
            max_request_body: 16 * 1024 * 1024,
            max_redirects: 5,
        }
    }
}

/// Counters of requests by destination host and outcome (status code or error case).
///
/// The host label is the driver's choice, so it is bounded: requests the egress policy refused
/// count under [`UNGRANTED_HOST`] (a driver could otherwise mint one series per made-up name
/// without sending anything), and past [`MAX_COUNTED_HOSTS`] distinct series new ones count
/// under [`OTHER_HOSTS`]. Both keep `/metrics` and host memory bounded.
#[derive(Debug, Default)]
pub(crate) struct HttpCounters {
    by_host_outcome: Mutex<BTreeMap<(String, String), u64>>,
}

/// Distinct (host, outcome) series kept per driver.
pub(crate) const MAX_COUNTED_HOSTS: usize = 256;
/// The host label of requests the egress policy refused or that had no valid URL.
pub(crate) const UNGRANTED_HOST: &str = "(not granted)";
/// The host label once [`MAX_COUNTED_HOSTS`] series exist.
pub(crate) const OTHER_HOSTS: &str = "(other)";
/// Longest URL a driver may ask for; longer is `invalid` (no cloud API needs more).
pub(crate) const MAX_URL_BYTES: usize = 8 * 1024;
/// Longest URL kept in a call's record of exchanges.
const MAX_RECORDED_URL_BYTES: usize = 2 * 1024;

impl HttpCounters {
    fn count(&self, host: &str, outcome: &str) {
        if let Ok(mut m) = self.by_host_outcome.lock() {
            let key = (host.to_string(), outcome.to_string());
            let key = if m.contains_key(&key) || m.len() < MAX_COUNTED_HOSTS {
                key
            } else {
                (OTHER_HOSTS.to_string(), outcome.to_string())
            };
            *m.entry(key).or_default() += 1;
        }
    }

    /// `(host, outcome) → requests`.
    pub(crate) fn snapshot(&self) -> BTreeMap<(String, String), u64> {
        self.by_host_outcome
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }
}

/// What an [`HttpInterceptor`] returns: the response the driver will see.
pub type Intercepted<'a> = Pin<Box<dyn Future<Output = Result<Response, HttpError>> + Send + 'a>>;

/// Sees every request that passed the egress policy and the size limits, and decides what the
/// driver gets back: the network's answer ([`Forward::send`]) or one of its own.
pub trait HttpInterceptor: Send + Sync {
    /// Answers one request.
    fn intercept<'a>(&'a self, forward: Forward<'a>) -> Intercepted<'a>;
}

/// A checked request on its way to the network.
pub struct Forward<'a> {
    capability: &'a HttpCapability,
    /// The request as the driver made it: placeholders, never credentials.
    request: Request,
    url: Url,
    /// The same request with the driver's credentials applied, when it carries any; only the
    /// network sees it, never an interceptor (so cassettes hold placeholders only).
    applied: Option<Applied>,
    budget: Duration,
    asked: Duration,
    /// The call's deadline: the request budget's wait ends before it.
    deadline: Instant,
}

impl Forward<'_> {
    /// The request as the driver made it (headers included: do not log them).
    pub fn request(&self) -> &Request {
        &self.request
    }

    /// The time this request may take: the driver's timeout, capped to end a margin before the
    /// call's deadline (see [`request_budget`]).
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// Sends the request to the network, as the host does without an interceptor.
    pub async fn send(self) -> Result<Response, HttpError> {
        let Forward {
            capability,
            request,
            url,
            applied,
            budget,
            asked,
            deadline,
        } = self;
        let time = RequestTime {
            budget,
            asked,
            deadline,
        };
        capability
            .forward_applied(request, url, applied, time)
            .await
    }
}

/// A request after the checks that need no network ([`HttpCapability::prepare`]).
pub(crate) struct Prepared {
    req: Request,
    checked: Result<Checked, Refused>,
}

/// A request the egress policy lets pass.
struct Checked {
    url: Url,
    /// Whether a grant names the host exactly (see [`EgressPolicy::check_url_named`]).
    named: bool,
}

/// A request refused before it leaves, and its URL when it has one.
struct Refused {
    error: HttpError,
    url: Option<Url>,
}

impl Prepared {
    /// The request's method.
    pub(crate) fn method(&self) -> Method {
        self.req.method
    }

    /// The parsed URL, refused by the egress policy or not; none when it is too long or not a
    /// URL.
    pub(crate) fn url(&self) -> Option<&Url> {
        match &self.checked {
            Ok(c) => Some(&c.url),
            Err(r) => r.url.as_ref(),
        }
    }

    /// Whether the egress policy let the request pass through a grant that names its host
    /// exactly: then the host is the operator's text, not a name the driver made up.
    pub(crate) fn host_named_by_grant(&self) -> bool {
        matches!(&self.checked, Ok(c) if c.named)
    }
}

/// A driver's HTTP client with its egress policy.
pub(crate) struct HttpCapability {
    policy: Arc<EgressPolicy>,
    /// Built on the first request: building it loads the system's root certificates, which
    /// drivers that never send (and `info`) should not pay for.
    client: OnceLock<Result<reqwest::Client, String>>,
    limits: HttpLimits,
    counters: Arc<HttpCounters>,
    interceptor: Option<Arc<dyn HttpInterceptor>>,
    /// Shadow mode: requests that would change the cloud are refused before they leave.
    shadow: bool,
    /// The origins that get the request's `traceparent` (none by default).
    propagation: Option<TracePropagation>,
    /// The driver's credentials, applied per grant ([`crate::secrets`]); none for a driver
    /// that declares no secrets.
    vault: Option<Arc<Vault>>,
    /// The driver's cloud request budget, shared by its instances; none: no pacing, no pause.
    request_budget: Option<Arc<RequestBudget>>,
}

impl HttpCapability {
    /// A client that enforces `policy` and `limits`.
    pub(crate) fn new(policy: EgressPolicy, limits: HttpLimits) -> Result<Self, String> {
        Ok(HttpCapability {
            policy: Arc::new(policy),
            client: OnceLock::new(),
            limits,
            counters: Arc::new(HttpCounters::default()),
            interceptor: None,
            shadow: false,
            propagation: None,
            vault: None,
            request_budget: None,
        })
    }

    /// Paces every request that leaves for the network by `budget`, and pauses them all when
    /// the cloud answers 429 (see [`super::budget`]).
    pub(crate) fn with_request_budget(mut self, budget: Option<Arc<RequestBudget>>) -> Self {
        self.request_budget = budget;
        self
    }

    /// Refuses every request that would change the cloud ([`super::shadow::would_write`]) with
    /// a `denied` error, after the egress checks (an ungranted write stays an egress refusal).
    pub(crate) fn with_shadow(mut self, shadow: bool) -> Self {
        self.shadow = shadow;
        self
    }

    /// Sends the `http.client` span's trace context to the origins `propagation` lists (and to no
    /// other, also not through a redirect).
    pub(crate) fn with_trace_propagation(mut self, propagation: Option<TracePropagation>) -> Self {
        self.propagation = propagation;
        self
    }

    /// Applies the credentials `vault` holds to the requests that carry their placeholders, and
    /// scrubs them from every response.
    pub(crate) fn with_vault(mut self, vault: Option<Arc<Vault>>) -> Self {
        self.vault = vault;
        self
    }

    /// The driver's credentials, when it declares any.
    pub(crate) fn vault(&self) -> Option<&Arc<Vault>> {
        self.vault.as_ref()
    }

    /// Routes every checked request through `interceptor`.
    pub(crate) fn with_interceptor(
        mut self,
        interceptor: Option<Arc<dyn HttpInterceptor>>,
    ) -> Self {
        self.interceptor = interceptor;
        self
    }

    fn client(&self) -> Result<&reqwest::Client, HttpError> {
        let built = self.client.get_or_init(|| {
            build_client(self.policy.clone(), self.limits, self.propagation.clone())
        });
        built.as_ref().map_err(|e| HttpError::Connect(e.clone()))
    }

    /// The effective egress policy.
    pub(crate) fn policy(&self) -> &EgressPolicy {
        &self.policy
    }

    /// Requests by host and outcome since the driver was loaded.
    pub(crate) fn counters(&self) -> &HttpCounters {
        &self.counters
    }

    /// The driver's cloud request budget, when it has one.
    pub(crate) fn request_budget(&self) -> Option<&Arc<RequestBudget>> {
        self.request_budget.as_ref()
    }

    /// Sends `req`, finishing before `deadline`. Returns the response or the typed error, and
    /// what to record about the exchange. (The driver's calls go through `prepare` and
    /// `send_prepared`; this pair is for the tests.)
    #[cfg(test)]
    pub(crate) async fn send(
        &self,
        req: Request,
        deadline: Instant,
    ) -> (Result<Response, HttpError>, HttpExchange) {
        self.send_prepared(self.prepare(req), deadline).await
    }

    /// The checks of `req` that need no network, made once: the URL's length and syntax, and
    /// the egress grant. The URL is parsed here only; the trace span, the counters and the
    /// request itself reuse it.
    pub(crate) fn prepare(&self, req: Request) -> Prepared {
        if req.url.len() > MAX_URL_BYTES {
            let error = HttpError::Invalid(format!(
                "a URL of {} bytes is longer than the {MAX_URL_BYTES} bytes allowed",
                req.url.len()
            ));
            return Prepared {
                req,
                checked: Err(Refused { error, url: None }),
            };
        }
        let url = match Url::parse(&req.url) {
            Ok(url) => url,
            Err(e) => {
                let error = HttpError::Invalid(format!("`{}` is not a valid URL: {e}", req.url));
                return Prepared {
                    req,
                    checked: Err(Refused { error, url: None }),
                };
            }
        };
        let checked = match self.policy.check_url_named(&url) {
            Ok(named) => Ok(Checked { url, named }),
            Err(Denied(m)) => Err(Refused {
                error: HttpError::Denied(m),
                url: Some(url),
            }),
        };
        Prepared { req, checked }
    }

    /// Sends a request [`HttpCapability::prepare`] checked, or answers why it was refused.
    pub(crate) async fn send_prepared(
        &self,
        prepared: Prepared,
        deadline: Instant,
    ) -> (Result<Response, HttpError>, HttpExchange) {
        let Prepared { req, checked } = prepared;
        let method = method_name(req.method);
        let mutating = super::shadow::is_write(&req);
        let mut exchange = HttpExchange {
            method: method.to_string(),
            url: crate::text::cut(
                &strip_query(crate::text::cut(&req.url, MAX_URL_BYTES)),
                MAX_RECORDED_URL_BYTES,
            )
            .to_string(),
            status: None,
            error: None,
            mutating,
            shadowed: None,
        };
        // A refused request counts under `UNGRANTED_HOST`: only a checked one names its host.
        let host = match &checked {
            Ok(c) => c.url.host_str().unwrap_or_default().to_string(),
            Err(_) => String::new(),
        };
        // The summary is built only for a refusal: a normal run pays for the classification
        // alone.
        let shadowed = (self.shadow && mutating)
            .then(|| super::shadow::would_write(&req))
            .flatten();
        let result = match (checked, shadowed) {
            (Err(refused), _) => Err(refused.error),
            (Ok(_), Some(summary)) => {
                let refused = HttpError::Denied(super::shadow::refusal(&summary));
                exchange.shadowed = Some(summary);
                Err(refused)
            }
            (Ok(checked), None) => match self.apply_secrets(&req, &checked.url) {
                Ok(applied) => self.send_checked(req, checked.url, applied, deadline).await,
                Err(refused) => Err(refused),
            },
        };
        match &result {
            Ok(r) => {
                exchange.status = Some(r.status);
                self.counters.count(&host, &r.status.to_string());
            }
            Err(e) => {
                let case = error_case(e);
                exchange.error = Some(case.to_string());
                let host = match e {
                    HttpError::Denied(_) | HttpError::Invalid(_) => UNGRANTED_HOST,
                    _ => host.as_str(),
                };
                self.counters.count(host, case);
            }
        }
        (result, exchange)
    }

    /// The request with the driver's credentials applied, `None` when it carries none, or the
    /// refusal of a placeholder its grant does not allow there.
    fn apply_secrets(&self, req: &Request, url: &Url) -> Result<Option<Applied>, HttpError> {
        let Some(vault) = &self.vault else {
            return Ok(None);
        };
        vault.apply(req, url).map_err(|refusal| match refusal {
            crate::secrets::Refusal::Denied(m) => HttpError::Denied(m),
            crate::secrets::Refusal::Invalid(m) => HttpError::Invalid(m),
        })
    }

    async fn send_checked(
        &self,
        req: Request,
        url: Url,
        applied: Option<Applied>,
        deadline: Instant,
    ) -> Result<Response, HttpError> {
        if req.body.len() > self.limits.max_request_body {
            return Err(HttpError::TooLarge(format!(
                "request body of {} bytes exceeds the {} bytes allowed",
                req.body.len(),
                self.limits.max_request_body
            )));
        }
        let asked = req
            .timeout_ms
            .map(|ms| Duration::from_millis(u64::from(ms)))
            .unwrap_or(self.limits.request_timeout);
        let left = deadline.saturating_duration_since(Instant::now());
        let budget = request_budget(asked, left);
        let forward = Forward {
            capability: self,
            request: req,
            url,
            applied,
            budget,
            asked,
            deadline,
        };
        match &self.interceptor {
            Some(interceptor) => interceptor.intercept(forward).await,
            None => forward.send().await,
        }
    }

    /// Sends a checked request to the network: with its credentials applied when it carries
    /// any (no redirect followed, a token answer sealed or served from the cache, a 401 dropping
    /// the sealed tokens it carried), and the response scrubbed of every secret value.
    async fn forward_applied(
        &self,
        req: Request,
        url: Url,
        applied: Option<Applied>,
        time: RequestTime,
    ) -> Result<Response, HttpError> {
        let (Some(vault), Some(applied)) = (&self.vault, applied) else {
            let response = self
                .forward(req, url.clone(), &url, Carries::Nothing, time)
                .await?;
            return self.scrub(response, &url, &[]).await;
        };
        // A token request the cache cannot answer goes out alone: instances asking at the same
        // time wait here and are then answered from the cache (one request per lifetime).
        let _gate = match applied.token {
            Some(ask) => {
                if let Some(cached) = vault.cached_token(ask) {
                    return Ok(cached);
                }
                let gate = vault.token_gate().await;
                if let Some(cached) = vault.cached_token(ask) {
                    return Ok(cached);
                }
                Some(gate)
            }
            None => None,
        };
        let Applied {
            wire,
            url: wire_url,
            token,
            sealed,
            host_values,
        } = applied;
        // Everything the host tells the guest about this request is composed from `url`, the
        // guest's own (placeholders only): never from `wire`.
        let sent = CARRIES_SECRET.scope(
            true,
            self.forward(wire, wire_url, &url, Carries::Credential, time),
        );
        let mut response = sent.await?;
        if response.status == 401 {
            vault.drop_tokens(&sealed);
        }
        if let Some(ask) = token {
            response = vault.seal_token(ask, response).map_err(HttpError::Denied)?;
        }
        self.scrub(response, &url, &host_values).await
    }

    /// `response` with every secret value the driver's vault holds, and every value the host
    /// computed for this request (`host_values`: a signature), replaced, in the body, the header
    /// values and the header names (a header whose name holds one is dropped). A response the
    /// scanner cannot judge is refused, not passed on. A large body is scanned on a blocking
    /// thread: decoding it takes milliseconds (BENCHMARKS.md), which must not stall the tasks
    /// that share this worker (lease renewals, `/metrics`).
    async fn scrub(
        &self,
        response: Response,
        shown: &Url,
        host_values: &[String],
    ) -> Result<Response, HttpError> {
        let Some(vault) = &self.vault else {
            return Ok(response);
        };
        let mut scrubbers = vec![vault.scrubber()];
        if !host_values.is_empty() {
            scrubbers.push(Arc::new(crate::secrets::scrub::Scrubber::for_one_response(
                host_values
                    .iter()
                    .map(|v| (v.as_str(), crate::secrets::HOST_VALUE_MARK)),
            )));
        }
        let scanned = if response.body.len() > SCRUB_INLINE_BYTES {
            tokio::task::spawn_blocking(move || scrub_with(&scrubbers, response))
                .await
                .map_err(|e| {
                    HttpError::Denied(format!(
                        "the response could not be checked for the driver's credentials: {e}"
                    ))
                })?
        } else {
            scrub_with(&scrubbers, response)
        };
        scanned.map_err(|e| {
            HttpError::Denied(format!(
                "the response from {} was not passed on: the host could not check it for the driver's credentials ({e})",
                strip_query(shown.as_str())
            ))
        })
    }

    /// Sends a request to the network within its time, once the driver's request budget lets
    /// it leave (a token served from the vault's cache never gets here, so it takes none).
    /// `url` is where it goes; `shown` is the guest's URL, the only one any message names. A driver holding credentials never gets
    /// content-encoded bytes: the host asks for `identity` on each of its requests and refuses
    /// an encoded answer, so the scan reads what the guest would read.
    async fn forward(
        &self,
        req: Request,
        url: Url,
        shown: &Url,
        carries: Carries,
        time: RequestTime,
    ) -> Result<Response, HttpError> {
        let RequestTime {
            mut budget,
            asked,
            deadline,
        } = time;
        let owns_encoding = self.vault.is_some();
        let mut builder = self
            .client()?
            .request(to_reqwest_method(req.method), url.clone());
        // Only a listed origin gets the trace context, set after the egress checks; the host's
        // header replaces one the driver set, so a driver cannot forge the parent.
        let trace_headers = match &self.propagation {
            Some(p) if p.allows(&url) => Some(p.headers(&tracing::Span::current())),
            _ => None,
        };
        for (name, value) in &req.headers {
            if trace_headers.is_some()
                && (name.eq_ignore_ascii_case("traceparent")
                    || name.eq_ignore_ascii_case("tracestate"))
            {
                continue;
            }
            if owns_encoding && name.eq_ignore_ascii_case("accept-encoding") {
                continue;
            }
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| HttpError::Invalid(format!("`{name}` is not a valid header name")))?;
            if matches!(
                name.as_str(),
                "host" | "content-length" | "transfer-encoding" | "connection" | "upgrade"
            ) {
                return Err(HttpError::Invalid(format!(
                    "header `{name}` is set by the host, not by the driver"
                )));
            }
            let value = reqwest::header::HeaderValue::from_str(value).map_err(|_| {
                HttpError::Invalid(format!("the value of header `{name}` is not valid"))
            })?;
            builder = builder.header(name, value);
        }
        if owns_encoding {
            builder = builder.header(reqwest::header::ACCEPT_ENCODING, "identity");
        }
        for (name, value) in trace_headers.into_iter().flatten() {
            builder = builder.header(name, value);
        }
        if !req.body.is_empty() {
            builder = builder.body(req.body);
        }
        // Last, once nothing can refuse the request any more: its wait for the budget.
        if let Some(pacing) = &self.request_budget {
            pacing.admit(deadline).await?;
            // The wait used some of the call's time: the request gets what is left.
            let left = deadline.saturating_duration_since(Instant::now());
            budget = budget.min(request_budget(asked, left));
        }
        // The resolver judges addresses by this URL (or the redirect hop's, which the redirect
        // policy writes here); the scope travels with the future wherever it is polled.
        let exchange = CONNECTING_FOR.scope(
            RefCell::new(Some(url.clone())),
            tokio::time::timeout(
                budget,
                self.exchange(builder, shown, carries, owns_encoding),
            ),
        );
        match exchange.await {
            Ok(result) => {
                if let (Some(pacing), Ok(response)) = (&self.request_budget, &result) {
                    pacing.observe(response);
                }
                result
            }
            Err(_) => Err(HttpError::Timeout(format!(
                "no complete response from {} within {budget:?}{}",
                strip_query(shown.as_str()),
                if budget < asked {
                    " (cut short to end before the call's deadline)"
                } else {
                    ""
                }
            ))),
        }
    }

    async fn exchange(
        &self,
        builder: reqwest::RequestBuilder,
        shown: &Url,
        carries: Carries,
        owns_encoding: bool,
    ) -> Result<Response, HttpError> {
        let what = strip_query(shown.as_str());
        let mut resp = builder
            .send()
            .await
            .map_err(|e| self.map_error(e, &what, carries))?;
        let header_bytes: usize = resp
            .headers()
            .iter()
            .map(|(k, v)| k.as_str().len() + v.len() + 4)
            .sum();
        if header_bytes > self.limits.max_response_headers {
            return Err(HttpError::TooLarge(format!(
                "response headers from {what} are {header_bytes} bytes, more than the {} allowed",
                self.limits.max_response_headers
            )));
        }
        if owns_encoding
            && let Some(encoding) = resp.headers().get(reqwest::header::CONTENT_ENCODING)
            && !encoding.as_bytes().eq_ignore_ascii_case(b"identity")
        {
            return Err(HttpError::Denied(format!(
                "the response from {what} is content-encoded ({}) although the host asked for identity; the host passes no encoded answer to a driver that holds credentials, since it could not check it for them",
                crate::text::cut(&String::from_utf8_lossy(encoding.as_bytes()), 32)
            )));
        }
        let cap = self.limits.max_response_body;
        let too_large = || {
            HttpError::TooLarge(format!(
                "response body from {what} is larger than the {cap} bytes the host accepts"
            ))
        };
        if resp.content_length().is_some_and(|n| n > cap as u64) {
            return Err(too_large());
        }
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| self.map_error(e, &what, carries))?
        {
            if body.len() + chunk.len() > cap {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Response {
            status,
            headers,
            body,
        })
    }

    /// The guest's error for a failed exchange with `what` (the guest's URL, query cut).
    ///
    /// reqwest's own text quotes the URL it sent, which for a credentialed request is the wire
    /// URL (the key in a query, a signature). So for a credentialed request the message is
    /// composed only of `what` and a classification (the I/O error's kind, a fixed text); the
    /// error's text is never quoted. Other requests quote the error chain without its URL.
    fn map_error(&self, e: reqwest::Error, what: &str, carries: Carries) -> HttpError {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        let mut io_kind = None;
        while let Some(s) = source {
            if let Some(Denied(m)) = s.downcast_ref::<Denied>() {
                return HttpError::Denied(m.clone());
            }
            if let Some(refused) = s.downcast_ref::<ResolvedRefused>() {
                return HttpError::Denied(refused.to_string());
            }
            if let Some(io) = s.downcast_ref::<std::io::Error>() {
                io_kind = Some(io.kind());
            }
            source = s.source();
        }
        let e = e.without_url();
        // hyper refuses a response head over its buffer (one huge header) or with more headers
        // than it parses (thousands of small ones) with this message; hyper is not a direct
        // dependency, so its error type cannot be downcast. Either way the response was too large.
        if chain(&e).contains("message head is too large") {
            return HttpError::TooLarge(format!(
                "the response headers from {what} are larger or more numerous than the host accepts (at most {} bytes)",
                self.limits.max_response_headers
            ));
        }
        let detail = match carries {
            Carries::Nothing => chain(&e),
            Carries::Credential => match io_kind {
                Some(kind) => {
                    format!("{kind} (details withheld: the request carried a credential)")
                }
                None => {
                    "the connection failed (details withheld: the request carried a credential)"
                        .to_string()
                }
            },
        };
        if e.is_timeout() {
            HttpError::Timeout(format!("{what}: {detail}"))
        } else if e.is_connect() || e.is_request() {
            HttpError::Connect(format!("could not reach {what}: {detail}"))
        } else if e.is_redirect() {
            HttpError::Denied(format!("{what}: {detail}"))
        } else {
            HttpError::Connect(format!("{what}: {detail}"))
        }
    }
}

/// Bodies up to this size are scanned on the calling task (tens of microseconds); larger ones on
/// a blocking thread.
const SCRUB_INLINE_BYTES: usize = 64 * 1024;

/// `response` scanned by each scrubber in turn (see [`HttpCapability::scrub`]).
fn scrub_with(
    scrubbers: &[Arc<crate::secrets::scrub::Scrubber>],
    mut response: Response,
) -> Result<Response, crate::secrets::scrub::Unscrubbable> {
    for scrubber in scrubbers {
        if scrubber.is_empty() {
            continue;
        }
        if let Some(body) = scrubber.scrub(&response.body)? {
            response.body = body;
        }
        let mut kept = Vec::with_capacity(response.headers.len());
        for (name, mut value) in std::mem::take(&mut response.headers) {
            if scrubber.finds(name.as_bytes())? {
                continue;
            }
            if let Some(v) = scrubber.scrub_str(&value)? {
                value = v;
            }
            kept.push((name, value));
        }
        response.headers = kept;
    }
    Ok(response)
}

/// Whether a request on the wire carries a credential the host applied: then no text of the
/// HTTP stack (which quotes the wire request) reaches the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Carries {
    Nothing,
    Credential,
}

/// The client behind a capability: address checks in the resolver, policy checks on redirects.
fn build_client(
    policy: Arc<EgressPolicy>,
    limits: HttpLimits,
    propagation: Option<TracePropagation>,
) -> Result<reqwest::Client, String> {
    let redirect_policy = {
        let policy = policy.clone();
        let max = limits.max_redirects;
        reqwest::redirect::Policy::custom(move |attempt| {
            // A request that carried a credential is never redirected: reqwest strips only a
            // few headers on a cross-origin hop, and a key in a query, a custom header or a
            // 307 body would follow. The driver gets the 3xx and decides.
            if CARRIES_SECRET.try_with(|carries| *carries).unwrap_or(false) {
                return attempt.stop();
            }
            if attempt.previous().len() > max {
                return attempt.error(Denied(format!("more than {max} redirects")));
            }
            // reqwest keeps custom headers on a redirect: a request that carried `traceparent`
            // must not take it to an origin the operator did not list.
            if let Some(p) = &propagation
                && attempt
                    .previous()
                    .first()
                    .is_some_and(|first| p.allows(first))
                && !p.allows(attempt.url())
            {
                let to = strip_query(attempt.url().as_str());
                return attempt.error(Denied(format!(
                    "redirect to {to} refused: the request carries traceparent and that origin is not in --trace-propagation-origins"
                )));
            }
            match policy.check_url(attempt.url()) {
                Ok(()) => {
                    // The next hop's connection is judged by the next hop's URL. Redirects are
                    // followed inside the request future, so the scope is there; were it not, the
                    // resolver would admit global addresses only.
                    let _ = CONNECTING_FOR
                        .try_with(|current| *current.borrow_mut() = Some(attempt.url().clone()));
                    attempt.follow()
                }
                Err(denied) => attempt.error(Denied(format!("redirect refused: {}", denied.0))),
            }
        })
    };
    reqwest::Client::builder()
        .dns_resolver(Arc::new(CheckedResolver {
            policy: policy.clone(),
        }))
        .redirect(redirect_policy)
        .connect_timeout(limits.connect_timeout)
        // A proxy would connect on the driver's behalf and bypass the address checks.
        .no_proxy()
        .user_agent(concat!("wasm-ccm/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("could not build the HTTP client: {e}"))
}

/// The whole error chain in one line: reqwest's top message alone rarely says what happened.
fn chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut s = e.source();
    while let Some(inner) = s {
        let text = inner.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        s = inner.source();
    }
    parts.join(": ")
}

tokio::task_local! {
    /// The URL a request is connecting for: set around each request, moved to the next hop by the
    /// redirect policy, read by [`CheckedResolver`].
    static CONNECTING_FOR: RefCell<Option<Url>>;

    /// Set around a request that carries a credential the host applied: its redirects are not
    /// followed.
    static CARRIES_SECRET: bool;
}

/// A request's time: what it may take (`budget`), what the driver asked for, and the call's
/// deadline.
#[derive(Debug, Clone, Copy)]
struct RequestTime {
    budget: Duration,
    asked: Duration,
    deadline: Instant,
}

/// Resolves names with the system resolver, then drops every address the policy refuses for the
/// request being connected; if none is left the connection fails with the refusal.
struct CheckedResolver {
    policy: Arc<EgressPolicy>,
}

/// Every address `host` resolved to was refused; the first refusal says why.
#[derive(Debug, thiserror::Error)]
#[error("egress to {host} denied: it resolved to {special}; {}", special.remedy)]
struct ResolvedRefused {
    host: String,
    special: SpecialAddress,
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_string();
        // Read now, while the request's scope is current. A URL for another host (which the
        // connector never asks for) is not used: the strict rule applies instead.
        let url = CONNECTING_FOR
            .try_with(|current| current.borrow().clone())
            .ok()
            .flatten()
            .filter(|u| {
                u.host_str()
                    .is_some_and(|h| same_host(h.trim_matches(['[', ']']), &host))
            });
        Box::pin(async move {
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut refused = None;
            let allowed: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|a| match policy.check_resolved(url.as_ref(), a.ip()) {
                    Ok(()) => true,
                    Err(special) => {
                        refused.get_or_insert(special);
                        false
                    }
                })
                .collect();
            if allowed.is_empty() {
                if let Some(special) = refused {
                    return Err(Box::new(ResolvedRefused { host, special })
                        as Box<dyn std::error::Error + Send + Sync>);
                }
                return Err(format!("{host} has no addresses").into());
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

fn same_host(a: &str, b: &str) -> bool {
    a.trim_end_matches('.')
        .eq_ignore_ascii_case(b.trim_end_matches('.'))
}

fn to_reqwest_method(m: Method) -> reqwest::Method {
    match m {
        Method::Get => reqwest::Method::GET,
        Method::Head => reqwest::Method::HEAD,
        Method::Post => reqwest::Method::POST,
        Method::Put => reqwest::Method::PUT,
        Method::Patch => reqwest::Method::PATCH,
        Method::Delete => reqwest::Method::DELETE,
        Method::Options => reqwest::Method::OPTIONS,
    }
}

/// The WIT case name of an [`HttpError`].
pub fn error_case(e: &HttpError) -> &'static str {
    e.case()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(body: &str) -> Request {
        Request {
            method: Method::Post,
            url: "https://auth.example/token".into(),
            headers: vec![],
            body: body.as_bytes().to_vec(),
            timeout_ms: None,
        }
    }

    #[tokio::test]
    async fn a_driver_cannot_grow_the_counters_or_the_exchange_record() {
        let policy = EgressPolicy::parse(&["https://api.example".to_string()]).expect("grant");
        let http = HttpCapability::new(policy, HttpLimits::default()).expect("capability");
        let deadline = Instant::now() + Duration::from_secs(5);
        // 1,000 made-up hosts, all refused: one series, not 1,000.
        for i in 0..1000 {
            let mut req = post("");
            req.method = Method::Get;
            req.url = format!("https://made-up-{i}.example/");
            let (result, _) = http.send(req, deadline).await;
            assert!(matches!(result, Err(HttpError::Denied(_))));
        }
        let snapshot = http.counters().snapshot();
        assert_eq!(snapshot.len(), 1, "{snapshot:?}");
        assert_eq!(
            snapshot.get(&(UNGRANTED_HOST.to_string(), "denied".to_string())),
            Some(&1000)
        );
        // A 1 MiB URL is invalid, and its record is cut.
        let mut req = post("");
        req.url = format!("https://api.example/{}", "a".repeat(1 << 20));
        let (result, exchange) = http.send(req, deadline).await;
        assert!(matches!(result, Err(HttpError::Invalid(m)) if m.contains("longer than")));
        assert!(exchange.url.len() <= MAX_RECORDED_URL_BYTES);
    }

    /// Answers 200 to everything it sees and counts what reached it (the network's stand-in).
    struct CountingNetwork(std::sync::atomic::AtomicUsize);

    impl HttpInterceptor for CountingNetwork {
        fn intercept<'a>(&'a self, _forward: Forward<'a>) -> Intercepted<'a> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async {
                Ok(Response {
                    status: 200,
                    headers: vec![],
                    body: vec![],
                })
            })
        }
    }

    #[tokio::test]
    async fn a_shadow_run_sends_reads_and_refuses_writes_before_they_leave() {
        let policy = EgressPolicy::parse(&["https://api.example".to_string()]).expect("grant");
        let network = Arc::new(CountingNetwork(Default::default()));
        let http = HttpCapability::new(policy, HttpLimits::default())
            .expect("capability")
            .with_interceptor(Some(network.clone()))
            .with_shadow(true);
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut read = post("");
        read.method = Method::Get;
        read.url = "https://api.example/v1/servers".into();
        let (result, exchange) = http.send(read, deadline).await;
        assert!(result.is_ok(), "{result:?}");
        assert_eq!((exchange.mutating, exchange.shadowed), (false, None));
        let mut write = post(r#"{"name":"lb"}"#);
        write.url = "https://api.example/v1/load-balancers?sig=SECRET".into();
        let (result, exchange) = http.send(write, deadline).await;
        let Err(HttpError::Denied(message)) = result else {
            panic!("a write in shadow mode must be denied: {result:?}");
        };
        assert!(
            message.contains("shadow mode") && !message.contains("SECRET"),
            "{message}"
        );
        assert_eq!(
            exchange.shadowed.as_deref(),
            Some("POST https://api.example/v1/load-balancers?…")
        );
        assert_eq!(exchange.error.as_deref(), Some("denied"));
        // A write to an ungranted host stays an egress refusal, not a would-be write.
        let mut elsewhere = post("x=1");
        elsewhere.url = "https://elsewhere.example/v1/x".into();
        let (result, exchange) = http.send(elsewhere, deadline).await;
        assert!(matches!(result, Err(HttpError::Denied(m)) if !m.contains("shadow")));
        assert_eq!(exchange.shadowed, None);
        // Only the read reached the network.
        assert_eq!(network.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn counted_series_are_bounded() {
        let counters = HttpCounters::default();
        for i in 0..(MAX_COUNTED_HOSTS + 100) {
            counters.count(&format!("h{i}.example"), "200");
        }
        let snapshot = counters.snapshot();
        assert_eq!(snapshot.len(), MAX_COUNTED_HOSTS + 1);
        assert_eq!(
            snapshot.get(&(OTHER_HOSTS.to_string(), "200".to_string())),
            Some(&100)
        );
    }

    #[test]
    fn token_requests_are_not_mutations() {
        use super::super::shadow::is_token_request;
        assert!(is_token_request(&post(
            "grant_type=client_credentials&scope=bmc"
        )));
        assert!(!is_token_request(&post(r#"{"grant_type": "x"}"#)));
        assert!(!is_token_request(&post("name=lb-1")));
        let mut get = post("grant_type=client_credentials");
        get.method = Method::Get;
        assert!(!is_token_request(&get));
    }
}
