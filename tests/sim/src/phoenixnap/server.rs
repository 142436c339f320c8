//! The HTTP front: one fallback handler that applies latency and faults, serves the token
//! endpoint, checks the bearer token, routes by path, serves under the state lock and logs the
//! request.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State as AxumState;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::{IntoResponse, Response};

use super::Shared;
use super::api::{self, Reply};
use super::auth::{Refusal, TOKEN_PATH, token_endpoint};
use super::error::ApiError;
use super::log::LoggedRequest;
use super::{control, model::State};
use crate::fixture::Injected;

/// A served path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route<'a> {
    Token,
    Servers,
    Server(&'a str),
    Blocks,
    Block(&'a str),
    BlockTags(&'a str),
    Networks,
    Network(&'a str),
    NetworkBlocks(&'a str),
    NetworkBlock(&'a str, &'a str),
    Tags,
    Tag(&'a str),
}

impl<'a> Route<'a> {
    /// The route of a path (one trailing slash tolerated), None when nothing is served there.
    fn parse(path: &'a str) -> Option<Route<'a>> {
        let path = path.strip_suffix('/').unwrap_or(path);
        if path == TOKEN_PATH {
            return Some(Route::Token);
        }
        let segments: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
        if segments.iter().any(|s| s.is_empty()) {
            return None;
        }
        Some(match segments.as_slice() {
            ["bmc", "v1", "servers"] => Route::Servers,
            ["bmc", "v1", "servers", id] => Route::Server(id),
            ["ips", "v1", "ip-blocks"] => Route::Blocks,
            ["ips", "v1", "ip-blocks", id] => Route::Block(id),
            ["ips", "v1", "ip-blocks", id, "tags"] => Route::BlockTags(id),
            ["networks", "v1", "public-networks"] => Route::Networks,
            ["networks", "v1", "public-networks", id] => Route::Network(id),
            ["networks", "v1", "public-networks", id, "ip-blocks"] => Route::NetworkBlocks(id),
            ["networks", "v1", "public-networks", id, "ip-blocks", block] => {
                Route::NetworkBlock(id, block)
            }
            ["tag-manager", "v1", "tags"] => Route::Tags,
            ["tag-manager", "v1", "tags", id] => Route::Tag(id),
            _ => return None,
        })
    }

    /// The methods served on the route, for 405 and its `Allow` header.
    fn allow(self) -> &'static str {
        match self {
            Route::Token | Route::NetworkBlocks(_) => "POST",
            Route::Servers
            | Route::Server(_)
            | Route::Networks
            | Route::Network(_)
            | Route::Tag(_) => "GET",
            Route::Blocks | Route::Tags => "GET, POST",
            Route::Block(_) => "GET, PATCH, DELETE",
            Route::BlockTags(_) => "PUT",
            Route::NetworkBlock(..) => "DELETE",
        }
    }
}

/// The router serving everything through [`handle`].
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(handle).with_state(shared)
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
    let query = uri.query().unwrap_or("").to_string();
    let response = match sim.faults.take(method.as_str(), &path) {
        Some(Injected::Cut) => {
            crate::fixture::cut_body(serve(&sim, &method, &path, &query, &headers, &body))
        }
        Some(fault) => fault_response(fault, &path).into_response(),
        None => serve(&sim, &method, &path, &query, &headers, &body),
    };
    let status = response.status().as_u16();
    tracing::debug!(%method, %uri, status, "phoenixnap-sim request");
    sim.log.record(LoggedRequest {
        method: method.to_string(),
        path,
        query,
        body: crate::fixture::body_value(&body),
        status,
    });
    response
}

/// The response of an injected fault: OAuth2's body on the token endpoint, the API's elsewhere.
fn fault_response(fault: Injected, path: &str) -> ApiError {
    let token = Route::parse(path) == Some(Route::Token);
    match fault {
        // Handled by the caller (served, then cut); a plain failure if it ever gets here.
        Injected::Cut => ApiError::new(500, "Simulated failure."),
        Injected::Fail(status) if token => {
            ApiError::oauth(status, "server_error", "Simulated failure.")
        }
        Injected::Fail(status) => ApiError::new(status, "Simulated failure."),
        Injected::Throttle(seconds) => {
            let message = format!("Too many requests; retry in {seconds} seconds.");
            let error = if token {
                ApiError::oauth(429, "temporarily_unavailable", &message)
            } else {
                ApiError::new(429, message)
            };
            ApiError {
                retry_after: Some(seconds),
                ..error
            }
        }
    }
}

fn serve(
    sim: &Shared,
    method: &Method,
    path: &str,
    query: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let route = Route::parse(path);
    if route == Some(Route::Token) {
        return token_endpoint(&sim.tokens, method, headers, body);
    }
    match serve_api(sim, route, method, path, query, headers, body) {
        Ok(reply) => reply.into_response(),
        Err(e) => e.into_response(),
    }
}

fn serve_api(
    sim: &Shared,
    route: Option<Route<'_>>,
    method: &Method,
    path: &str,
    query: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Reply, ApiError> {
    if let Err(refusal) = sim.tokens.check(headers) {
        return Err(ApiError::new(
            401,
            match refusal {
                Refusal::Missing => "Unauthorized: no bearer token.",
                Refusal::Unknown => "Unauthorized: the bearer token is not valid.",
                Refusal::Expired => "Unauthorized: the bearer token has expired.",
            },
        ));
    }
    let route = route.ok_or_else(|| ApiError::new(404, format!("No endpoint at {path}.")))?;
    if !route.allow().split(", ").any(|m| m == method.as_str()) {
        return Err(ApiError {
            allow: Some(route.allow()),
            ..ApiError::new(405, format!("Method {method} is not allowed on {path}."))
        });
    }
    let now = Instant::now();
    let mut state = sim.lock();
    state.advance(now);
    dispatch(&mut state, now, route, method, query, body)
}

fn dispatch(
    state: &mut State,
    now: Instant,
    route: Route<'_>,
    method: &Method,
    query: &str,
    body: &[u8],
) -> Result<Reply, ApiError> {
    match (method.as_str(), route) {
        ("GET", Route::Servers) => Ok(api::list_servers(state)),
        ("GET", Route::Server(id)) => api::get_server(state, id),
        ("GET", Route::Blocks) => Ok(api::list_blocks(state, query)),
        ("POST", Route::Blocks) => api::create_block(state, body),
        ("GET", Route::Block(id)) => api::get_block(state, id),
        ("PATCH", Route::Block(id)) => api::patch_block(state, id, body),
        ("DELETE", Route::Block(id)) => api::delete_block(state, id),
        ("PUT", Route::BlockTags(id)) => api::put_block_tags(state, id, body),
        ("GET", Route::Networks) => Ok(api::list_networks(state, query)),
        ("GET", Route::Network(id)) => api::get_network(state, id),
        ("POST", Route::NetworkBlocks(id)) => api::assign_block(state, now, id, body),
        ("DELETE", Route::NetworkBlock(id, block)) => api::unassign_block(state, now, id, block),
        ("GET", Route::Tags) => Ok(api::list_tags(state, query)),
        ("POST", Route::Tags) => api::create_tag(state, body),
        ("GET", Route::Tag(id)) => api::get_tag(state, id),
        // allow() admitted nothing else.
        _ => Err(ApiError::new(
            405,
            format!("Method {method} is not allowed."),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(Route::parse(TOKEN_PATH), Some(Route::Token));
        assert_eq!(
            Route::parse("/networks/v1/public-networks/n/ip-blocks/b/"),
            Some(Route::NetworkBlock("n", "b"))
        );
        assert_eq!(
            Route::parse("/ips/v1/ip-blocks/x/tags"),
            Some(Route::BlockTags("x"))
        );
        assert_eq!(Route::parse("/bmc/v1/servers//x"), None);
        assert_eq!(Route::parse("/bmc/v2/servers"), None);
        assert_eq!(Route::parse("/tag-manager/v1/tags/a/b"), None);
    }
}
