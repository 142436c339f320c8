//! What the host's trace spans share: their `tracing` target, and the operator's allow-list of
//! origins that may receive the W3C `traceparent` header.
//!
//! The runtime creates plain `tracing` spans (`driver.call`, `http.client`) and knows nothing of
//! OpenTelemetry: the product installs an OpenTelemetry layer only when an endpoint is given, and
//! hands the runtime a [`TracePropagation`] whose injector reads the span's trace context. With
//! no layer the spans are disabled at their call site (level `TRACE` under [`TARGET`], below any
//! default log filter), so tracing off costs a check of a cached interest.

use std::fmt;
use std::sync::Arc;

use url::Url;

/// The `tracing` target of every span the host creates for tracing. The product's
/// OpenTelemetry layer takes spans of this target; its log filter leaves them out unless the
/// operator asks for `wasm_ccm::trace=trace`.
pub const TARGET: &str = "wasm_ccm::trace";

/// Writes the trace context of a span as headers (`traceparent`, and `tracestate` when it has
/// one); the product builds it from OpenTelemetry's W3C propagator.
pub type Injector = dyn Fn(&tracing::Span) -> Vec<(String, String)> + Send + Sync;

/// The origins that receive `traceparent`, and how to write it. Trace IDs reaching a third
/// party are a privacy concern (W3C Trace Context, "Privacy Considerations"), so nothing is
/// propagated unless the operator lists the origin (`--trace-propagation-origins`).
#[derive(Clone)]
pub struct TracePropagation {
    origins: Vec<TraceOrigin>,
    inject: Arc<Injector>,
}

impl TracePropagation {
    /// Propagation to exactly `origins`, headers written by `inject`.
    pub fn new(origins: Vec<TraceOrigin>, inject: Arc<Injector>) -> Self {
        TracePropagation { origins, inject }
    }

    /// Whether `url`'s origin (scheme, host and port) is one the operator listed.
    pub fn allows(&self, url: &Url) -> bool {
        self.origins.iter().any(|o| o.matches(url))
    }

    /// The headers that carry `span`'s context (empty when the span is not traced).
    pub fn headers(&self, span: &tracing::Span) -> Vec<(String, String)> {
        (self.inject)(span)
    }
}

impl fmt::Debug for TracePropagation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TracePropagation")
            .field("origins", &self.origins)
            .finish_non_exhaustive()
    }
}

/// One origin of `--trace-propagation-origins`: `scheme://host[:port]`, compared exactly (the
/// port defaults to the scheme's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceOrigin {
    scheme: String,
    host: String,
    port: u16,
}

impl TraceOrigin {
    /// Parses `scheme://host[:port]`; a path, query, fragment or user name is refused, because
    /// an origin is all that is compared and more would suggest otherwise.
    pub fn parse(text: &str) -> Result<Self, String> {
        let url = Url::parse(text).map_err(|e| {
            format!("{text:?} is not an origin ({e}); write scheme://host[:port], e.g. https://api.example.com")
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "{text:?}: only http and https origins can receive traceparent"
            ));
        }
        if url.path() != "/"
            || url.query().is_some()
            || url.fragment().is_some()
            || !url.username().is_empty()
            || url.password().is_some()
        {
            return Err(format!(
                "{text:?} is more than an origin; write only scheme://host[:port]"
            ));
        }
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return Err(format!("{text:?} has no host"));
        };
        Ok(TraceOrigin {
            scheme: url.scheme().to_string(),
            host: host.to_string(),
            port,
        })
    }

    fn matches(&self, url: &Url) -> bool {
        url.scheme() == self.scheme
            && url.host_str() == Some(self.host.as_str())
            && url.port_or_known_default() == Some(self.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).expect("test URL")
    }

    #[test]
    fn an_origin_matches_its_scheme_host_and_port_exactly() {
        let o = TraceOrigin::parse("http://127.0.0.1:8080").expect("origin");
        assert!(o.matches(&url("http://127.0.0.1:8080/v1/x?secret=1")));
        assert!(!o.matches(&url("https://127.0.0.1:8080/")));
        assert!(!o.matches(&url("http://127.0.0.1:8081/")));
        assert!(!o.matches(&url("http://localhost:8080/")));
        let o = TraceOrigin::parse("https://api.example.com").expect("origin");
        assert!(o.matches(&url("https://api.example.com:443/v1")));
        assert!(!o.matches(&url("https://api.example.com.evil/v1")));
        assert!(!o.matches(&url("https://sub.api.example.com/v1")));
    }

    #[test]
    fn more_than_an_origin_is_refused() {
        for bad in [
            "api.example.com",
            "https://api.example.com/v1",
            "https://api.example.com?x=1",
            "https://user@api.example.com",
            "ftp://api.example.com",
        ] {
            assert!(TraceOrigin::parse(bad).is_err(), "{bad}");
        }
        assert!(TraceOrigin::parse("https://api.example.com/").is_ok());
    }
}
