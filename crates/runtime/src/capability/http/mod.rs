//! The `http` capability: the driver's one way out of the sandbox.
//!
//! Every request is checked against the egress policy ([`crate::EgressPolicy`]) before it leaves,
//! every resolved address again at connect time, and every redirect hop again; bodies and
//! headers are capped. The client that does this is `HttpCapability`; an [`HttpInterceptor`]
//! may stand between its checks and the network (conformance faults and cassettes).
//!
//! As a capability unit (see `crate::capability`):
//! - config: [`Config`]: the operator's egress grants (or else the driver's declared defaults),
//!   the host's own addresses, [`HttpLimits`], the interceptor, shadow mode, trace
//!   propagation (`client`) and the credential options (read when the driver's declared
//!   secrets are sealed into the vault this client attaches);
//! - per-driver state: one `HttpCapability` in the driver's `DriverHost`, and the driver's
//!   request budget ([`budget`]), which its options carry so that a reload keeps it;
//! - per-call state: `HttpCall`, the requests the call made, for its `Outcome`;
//! - host view: `HttpHost`, which implements `http::Host`; a store's data gives it through
//!   `HttpView`, so this unit knows nothing of the store or of the driver's options.

pub mod budget;
mod client;
pub mod shadow;
mod timing;

// The public `wasm_ccm_runtime::http` API is the client's, unchanged by the move into the
// capability unit.
pub use self::client::*;
pub use self::timing::request_budget;
// What a driver sends and gets back, in the host model: the types an `HttpInterceptor` sees.
pub use crate::model::http::{
    HttpError, HttpExchange, Method, Request, Response, method_name, strip_query,
};

use std::time::Instant;

use tracing::Instrument;
use wasmtime::component::{HasData, Linker};

use crate::bindings::http as wit;
use crate::egress::EgressPolicy;
use crate::error::HostError;
use crate::special_addr::HostAddresses;
use crate::wit::Convert;

use super::log::DriverLogger;

/// What the `http` capability is configured with, per driver (`DriverOptions::http`). The
/// default grants nothing beyond the driver's declared egress, with the default limits, no
/// interceptor, no shadow mode, the system's addresses, no trace propagation and the default
/// credential options.
#[derive(Clone, Default)]
pub struct Config {
    /// The operator's egress grants (`--allow-egress`, parsed where the flag was read);
    /// `None`: the driver's declared defaults.
    pub egress: Option<EgressPolicy>,
    /// Caps on bodies, headers, redirects and time.
    pub limits: HttpLimits,
    /// Stands between the client's checks and the network (fault injection, record/replay);
    /// `None` in production.
    pub interceptor: Option<std::sync::Arc<dyn HttpInterceptor>>,
    /// Shadow mode (`--shadow`): every request that would change the cloud is refused with
    /// `denied` before it leaves, and recorded in the call's exchanges
    /// (`HttpExchange::shadowed`).
    pub shadow: bool,
    /// What the egress checks take for this host's own addresses (refused unless granted by
    /// address): the system's interfaces in production; a fixed list lets tests prove those
    /// stay closed on any machine.
    pub host_addresses: HostAddresses,
    /// The origins whose requests carry the call's `traceparent`
    /// (`--trace-propagation-origins`); `None` sends it nowhere.
    pub trace_propagation: Option<crate::trace::TracePropagation>,
    /// The operator's credential options (`--secret-origin`, `--allow-plain-http-secrets`):
    /// where the driver's declared secrets, which this capability attaches, may go.
    pub secrets: crate::secrets::SecretOptions,
    /// The driver's cloud request budget (`--cloud-request-rate`, `--cloud-request-burst`):
    /// one for the driver, shared by its instances and kept across its reloads (clones of these
    /// options share it); `None`, the default: no pacing and no pause on a 429.
    pub request_budget: Option<std::sync::Arc<budget::RequestBudget>>,
}

/// HTTP exchanges a single call keeps a record of (for conformance and the request log); the
/// requests beyond are still made and counted, only not recorded.
pub(crate) const MAX_EXCHANGES_PER_CALL: usize = 256;

/// Longest recorded URL after redaction: a driver's secret in the URL is replaced before it is
/// cut, so no part of it survives.
const MAX_REDACTED_URL_BYTES: usize = 4 * 1024;

/// The client of a loaded driver: `egress` from the operator, or else the driver's declared
/// `default_egress`, checked against the host's own addresses.
pub(crate) fn client(
    driver: &str,
    default_egress: &[String],
    opts: &Config,
) -> Result<HttpCapability, HostError> {
    let policy = match &opts.egress {
        Some(granted) => granted.clone(),
        // A bad default is the driver's fault and the message says so.
        None => EgressPolicy::parse(default_egress).map_err(|e| {
            HostError::InvalidEgress(format!(
                "driver {driver} declares a bad default egress pattern: {e}"
            ))
        })?,
    }
    .with_host_addresses(opts.host_addresses.clone());
    Ok(HttpCapability::new(policy, opts.limits)
        .map_err(HostError::InvalidEgress)?
        .with_interceptor(opts.interceptor.clone())
        .with_shadow(opts.shadow)
        .with_trace_propagation(opts.trace_propagation.clone())
        .with_request_budget(opts.request_budget.clone()))
}

/// The client of a driver before `info` ran: it grants nothing.
pub(crate) fn bare(opts: &Config) -> Result<HttpCapability, HostError> {
    HttpCapability::new(EgressPolicy::default(), opts.limits).map_err(HostError::InvalidEgress)
}

/// The requests one call made.
#[derive(Default)]
pub(crate) struct HttpCall {
    /// At most [`MAX_EXCHANGES_PER_CALL`], URLs redacted.
    pub exchanges: Vec<HttpExchange>,
}

/// What `http.send` needs of an instance's state.
pub(crate) struct HttpHost<'a> {
    client: &'a HttpCapability,
    logger: &'a DriverLogger,
    deadline: Instant,
    call: &'a mut HttpCall,
}

impl<'a> HttpHost<'a> {
    /// A view of the driver's client and the call's record.
    pub(crate) fn new(
        client: &'a HttpCapability,
        logger: &'a DriverLogger,
        deadline: Instant,
        call: &'a mut HttpCall,
    ) -> Self {
        HttpHost {
            client,
            logger,
            deadline,
            call,
        }
    }
}

impl wit::Host for HttpHost<'_> {
    async fn send(&mut self, request: wit::Request) -> Result<wit::Response, wit::HttpError> {
        let prepared = self.client.prepare(request.into());
        let span = client_span(&prepared, self.logger);
        let (result, mut exchange) = if span.is_disabled() {
            self.client.send_prepared(prepared, self.deadline).await
        } else {
            let sent = self.client.send_prepared(prepared, self.deadline);
            let (result, exchange) = sent.instrument(span.clone()).await;
            // The outcome is the only thing recorded after the span's creation.
            match &result {
                Ok(r) => {
                    span.record("http.response.status_code", r.status);
                    if r.status >= 400 {
                        span.record("error.type", r.status);
                        span.record("otel.status_code", "ERROR");
                    }
                }
                Err(e) => {
                    span.record("error.type", e.case());
                    span.record("otel.status_code", "ERROR");
                }
            }
            (result, exchange)
        };
        if self.call.exchanges.len() < MAX_EXCHANGES_PER_CALL {
            exchange.url = self
                .logger
                .redact_bounded(&exchange.url, MAX_REDACTED_URL_BYTES);
            self.call.exchanges.push(exchange);
        }
        result.convert()
    }
}

/// The `http.client` span of one request (see [`crate::trace`]), with OpenTelemetry's HTTP client
/// attributes except `url.full`: never the path's query (CloudStack signs there), and no header
/// value. Every attribute known before the request is set at creation, from the URL the egress
/// check parsed (one dispatch, no second parse); only the outcome is recorded later.
///
/// The host name goes through the redactor unless a grant names it exactly. An exact grant's
/// host is the operator's own text (`--allow-egress`, or the driver's declared default, which the
/// operator accepted), equal to the URL's host: a secret the driver holds cannot be in it. Under a
/// wildcard or range grant, or in a refused request, the host is the driver's free text (a token
/// as a DNS label, say), so it is redacted like the recorded URL.
fn client_span(prepared: &Prepared, logger: &DriverLogger) -> tracing::Span {
    if !tracing::span_enabled!(target: crate::trace::TARGET, tracing::Level::TRACE) {
        return tracing::Span::none();
    }
    let url = prepared.url();
    let host = url.and_then(url::Url::host_str).map(|host| {
        if prepared.host_named_by_grant() {
            std::borrow::Cow::Borrowed(host)
        } else {
            std::borrow::Cow::Owned(logger.redact_bounded(host, MAX_TRACED_HOST_BYTES))
        }
    });
    tracing::trace_span!(
        target: crate::trace::TARGET,
        "http.client",
        otel.kind = "client",
        http.request.method = method_name(prepared.method()),
        server.address = host.as_deref(),
        server.port = url.and_then(url::Url::port_or_known_default),
        url.scheme = url.map(url::Url::scheme),
        http.response.status_code = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    )
}

/// Longest host name recorded in a span (DNS allows 253).
const MAX_TRACED_HOST_BYTES: usize = 255;

/// Selects [`HttpHost`] as what the bindings call.
struct HttpData;

impl HasData for HttpData {
    type Data<'a> = HttpHost<'a>;
}

/// What `http` needs of a store's data: the driver's client and logger, the call's deadline and
/// its record of requests.
pub(crate) trait HttpView {
    /// The host view the bindings call.
    fn http_host(&mut self) -> HttpHost<'_>;
}

/// Links `http` for a store whose data is a [`HttpView`].
pub(crate) fn add_to_linker<T: HttpView + Send + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, HttpData>(linker, T::http_host)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::capability::log::{LogLimits, NullSink};
    use crate::model::http::{Method, Request};

    fn request(url: &str) -> Request {
        Request {
            method: Method::Get,
            url: url.to_string(),
            headers: Vec::new(),
            body: Vec::new(),
            timeout_ms: None,
        }
    }

    #[tokio::test]
    async fn a_call_records_its_requests_bounded_and_redacted() {
        let client = bare(&Config::default()).expect("client");
        let logger = DriverLogger::new("d", Arc::new(NullSink), LogLimits::default());
        logger.add_secret("s3cr3t-token-value");
        let mut call = HttpCall::default();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut host = HttpHost::new(&client, &logger, deadline, &mut call);
        for _ in 0..MAX_EXCHANGES_PER_CALL + 3 {
            // Nothing is granted, so every request is refused before it leaves.
            let request = request("https://s3cr3t-token-value.example/x").into();
            let sent = wit::Host::send(&mut host, request);
            assert!(sent.await.is_err());
        }
        assert_eq!(call.exchanges.len(), MAX_EXCHANGES_PER_CALL);
        let url = &call.exchanges[0].url;
        assert!(!url.contains("s3cr3t-token-value"), "{url}");
    }

    #[test]
    fn the_operators_grant_replaces_the_drivers_default() {
        let opts = Config {
            egress: Some(EgressPolicy::parse(&["https://api.example.com"]).expect("grant")),
            ..Default::default()
        };
        let defaults = ["https://default.example.com".to_string()];
        let grant = client("acme", &defaults, &opts).expect("valid");
        assert_eq!(grant.policy().patterns(), vec!["https://api.example.com"]);
        let default = client("acme", &defaults, &Config::default()).expect("valid");
        assert_eq!(
            default.policy().patterns(),
            vec!["https://default.example.com"]
        );
    }

    #[test]
    fn a_bad_default_is_blamed_on_the_driver() {
        // (A bad grant of the operator's never gets here: the flag's parser refuses it.)
        let bad = ["http://[::1".to_string()];
        let e = client("acme", &bad, &Config::default())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("driver acme declares a bad default egress pattern"),
            "{e}"
        );
    }
}
