//! The HTTP front, plugged into the request core (which serves the common `/sim` control API,
//! applies latency and faults and logs): reading the parameters (query merged with a form body)
//! so faults can match the command, CloudStack's fault bodies, the signature check, and running
//! the command under the state lock.

use std::time::Instant;

use axum::http::{HeaderMap, Method, header};
use axum::response::Response;

use super::commands::{self, Ctx};
use super::error::{CS_SERVER_API, CsError, envelope, json_response};
use super::log::{LoggedRequest, RequestLog};
use super::params::{Args, Params};
use super::signing;
use super::{Faults, Shared};
use crate::request_core::{CloudApi, Request};

/// The API's one endpoint.
pub const API_PATH: &str = "/client/api";

/// Whether a POST body holds form parameters: declared so, or undeclared.
fn is_form(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/x-www-form-urlencoded")
        })
}

impl CloudApi for Shared {
    const NAME: &'static str = "cloudstack";
    type Parsed = Params;
    type Logged = LoggedRequest;

    fn faults(&self) -> &Faults {
        &self.faults
    }

    fn log(&self) -> &RequestLog {
        &self.log
    }

    /// The parameters: the query merged with a form body.
    fn parse(&self, request: &Request) -> Params {
        let form = if request.method == Method::POST && is_form(&request.headers) {
            String::from_utf8_lossy(&request.body).into_owned()
        } else {
            String::new()
        };
        Params::parse(&[request.query(), &form])
    }

    fn command(params: &Params) -> Option<&str> {
        params.get("command")
    }

    fn failure(_: &Request, params: &Params, status: u16) -> Response {
        CsError::injected(status).into_response_for(command(params))
    }

    fn throttled(_: &Request, params: &Params, seconds: u32) -> Response {
        CsError::throttled(seconds).into_response_for(command(params))
    }

    /// CloudStack's API throttling exempts root admins (`ApiRateLimitServiceImpl.checkAccess`:
    /// "API limit does not apply" to a root admin account).
    fn rate_limited_request(&self, _: &Request, _: &Params) -> bool {
        !self.state.lock().settings.admin
    }

    /// CloudStack's own limiter: `ApiRateLimitServiceImpl.throwExceptionDueToApiRateLimitReached`
    /// throws `RequestLimitException` with the milliseconds left in the window, which `ApiServer`
    /// turns into `ServerApiException(ApiErrorCode.API_LIMIT_EXCEED, message)`: HTTP and
    /// `errorcode` 429, `cserrorcode` 9999 (that constructor's, `CSExceptionErrorCode` of
    /// `ServerApiException`), and no `Retry-After` header.
    fn rate_limited(_: &Request, params: &Params, wait: std::time::Duration) -> Response {
        CsError::api_limit(wait).into_response_for(command(params))
    }

    fn serve(&self, request: &Request, params: &Params) -> Response {
        serve(self, &request.method, &request.path, params)
    }

    fn log_entry(request: &Request, params: &Params, status: u16) -> LoggedRequest {
        LoggedRequest::new(request.method.as_str(), params, status)
    }
}

/// The `command` parameter; empty when missing.
fn command(params: &Params) -> &str {
    params.get("command").unwrap_or_default()
}

fn serve(sim: &Shared, method: &Method, path: &str, params: &Params) -> Response {
    let command = command(params);
    if path.trim_end_matches('/') != API_PATH {
        return CsError::new(
            404,
            CS_SERVER_API,
            format!("No API at {path}; the API is at {API_PATH}"),
        )
        .into_response_for(command);
    }
    if method != Method::GET && method != Method::POST {
        return CsError::new(
            405,
            CS_SERVER_API,
            format!("Method {method} is not allowed; use GET or POST"),
        )
        .into_response_for(command);
    }
    if command.is_empty() {
        return CsError::param("Invalid request, no command sent").into_response_for("");
    }
    let (api_key, secret_key) = sim.keys();
    if let Err(refusal) = signing::verify(params, &api_key, &secret_key, jiff::Timestamp::now()) {
        tracing::debug!(?refusal, command, "cloudstack-sim refused a request");
        return CsError::auth().into_response_for(command);
    }
    let now = Instant::now();
    let mut state = sim.state.lock();
    state.advance(now);
    let Some(spec) = commands::find(command).filter(|c| !c.admin_only || state.settings.admin)
    else {
        return CsError::unavailable(command, state.user_name()).into_response_for(command);
    };
    let mut ctx = Ctx {
        state: &mut state,
        args: Args { command, params },
        now,
    };
    match spec.run(&mut ctx) {
        Ok(body) => json_response(200, &envelope(command, body)),
        Err(e) => e.into_response_for(command),
    }
}
