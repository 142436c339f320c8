//! The HTTP front: one handler that serves the `/sim` control API, applies latency and faults,
//! reads the parameters (query merged with a form body), checks the signature, runs the command
//! under the state lock and logs the request.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State as AxumState;
use axum::http::{HeaderMap, Method, Uri, header};
use axum::response::Response;

use super::Shared;
use super::commands::{self, Ctx};
use super::control;
use super::error::{CS_SERVER_API, CsError, envelope, json_response};
use super::log::LoggedRequest;
use super::params::{Args, Params};
use super::signing;
use crate::fixture::Injected;

/// The API's one endpoint.
pub const API_PATH: &str = "/client/api";

/// The router serving everything through [`handle`].
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(handle).with_state(shared)
}

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

async fn handle(
    AxumState(sim): AxumState<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    if path == "/sim" || path.starts_with("/sim/") {
        return control::handle(&sim, &method, &path, &body);
    }
    let latency = sim.faults.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let form = if method == Method::POST && is_form(&headers) {
        String::from_utf8_lossy(&body).into_owned()
    } else {
        String::new()
    };
    let params = Params::parse(&[uri.query().unwrap_or(""), &form]);
    let command = params.get("command").unwrap_or_default();
    let fault = sim.faults.take_for(
        method.as_str(),
        &path,
        Some(command).filter(|c| !c.is_empty()),
    );
    let response = match fault {
        Some(Injected::Fail(status)) => CsError::injected(status).into_response_for(command),
        Some(Injected::Throttle(seconds)) => CsError::throttled(seconds).into_response_for(command),
        Some(Injected::Cut) => crate::fixture::cut_body(serve(&sim, &method, &path, &params)),
        None => serve(&sim, &method, &path, &params),
    };
    let status = response.status().as_u16();
    tracing::debug!(%method, command, status, "cloudstack-sim request");
    sim.log
        .record(LoggedRequest::new(method.as_str(), &params, status));
    response
}

fn serve(sim: &Shared, method: &Method, path: &str, params: &Params) -> Response {
    let command = params.get("command").unwrap_or_default();
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
    if let Err(refusal) = signing::verify(
        params,
        &sim.api_key,
        &sim.secret_key,
        jiff::Timestamp::now(),
    ) {
        tracing::debug!(?refusal, command, "cloudstack-sim refused a request");
        return CsError::auth().into_response_for(command);
    }
    let now = Instant::now();
    let mut state = sim.lock();
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
