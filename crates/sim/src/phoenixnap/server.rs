//! The HTTP front, plugged into the request core (which applies latency and faults and logs):
//! PhoenixNAP's fault bodies, the token endpoint, the bearer token check, routing by path and
//! serving under the state lock.

use std::time::Instant;

use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Response};

use super::api::{self, Reply};
use super::auth::{Refusal, TOKEN_PATH, token_endpoint};
use super::error::ApiError;
use super::log::{LoggedRequest, RequestLog};
use super::model::State;
use super::{Faults, Shared};
use crate::request_core::{CloudApi, Request};

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

impl CloudApi for Shared {
    const NAME: &'static str = "phoenixnap";
    type Parsed = ();
    type Logged = LoggedRequest;

    fn faults(&self) -> &Faults {
        &self.faults
    }

    fn log(&self) -> &RequestLog {
        &self.log
    }

    fn parse(&self, _: &Request) {}

    /// OAuth2's body on the token endpoint, the API's elsewhere.
    fn failure(request: &Request, _: &(), status: u16) -> Response {
        if is_token(request) {
            ApiError::oauth(status, "server_error", "Simulated failure.")
        } else {
            ApiError::new(status, "Simulated failure.")
        }
        .into_response()
    }

    /// Also the answer over the rate limit. phoenixNAP's BMC, IP, network and tag OpenAPI
    /// specifications (material/go-sdk-bmc/specs/*.spec.yaml) document no 429 response and no
    /// `Retry-After`, and we found no limit in its API reference (developers.phoenixnap.com). So this is our choice, the apiserver-like 429 with `Retry-After`, in the
    /// API's error shape (OAuth2's `temporarily_unavailable`, RFC 6749 §5.2, on the token
    /// endpoint).
    fn throttled(request: &Request, _: &(), seconds: u32) -> Response {
        let message = format!("Too many requests; retry in {seconds} seconds.");
        let error = if is_token(request) {
            ApiError::oauth(429, "temporarily_unavailable", &message)
        } else {
            ApiError::new(429, message)
        };
        ApiError {
            retry_after: Some(seconds),
            ..error
        }
        .into_response()
    }

    fn serve(&self, request: &Request, _: &()) -> Response {
        serve(self, request)
    }

    fn log_entry(request: &Request, _: &(), status: u16) -> LoggedRequest {
        LoggedRequest {
            method: request.method.to_string(),
            path: request.path.clone(),
            query: request.query().to_string(),
            body: crate::fixture::body_value(&request.body),
            status,
        }
    }
}

/// Whether the request is for the token endpoint.
fn is_token(request: &Request) -> bool {
    Route::parse(&request.path) == Some(Route::Token)
}

fn serve(sim: &Shared, request: &Request) -> Response {
    let Request {
        method,
        path,
        headers,
        body,
        ..
    } = request;
    let query = request.query();
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
    let mut state = sim.state.lock();
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
        ("GET", Route::Servers) => api::list_servers(state, query),
        ("GET", Route::Server(id)) => api::get_server(state, id),
        ("GET", Route::Blocks) => api::list_blocks(state, query),
        ("POST", Route::Blocks) => api::create_block(state, body),
        ("GET", Route::Block(id)) => api::get_block(state, id),
        ("PATCH", Route::Block(id)) => api::patch_block(state, id, body),
        ("DELETE", Route::Block(id)) => api::delete_block(state, id),
        ("PUT", Route::BlockTags(id)) => api::put_block_tags(state, id, body),
        ("GET", Route::Networks) => api::list_networks(state, query),
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
