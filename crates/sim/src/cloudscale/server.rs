//! The HTTP front, plugged into the request core (which applies latency and faults and logs):
//! cloudscale's fault bodies, the token check, routing by path and serving under the state lock.

use std::time::Instant;

use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::error::{ApiError, BUSY};
use super::reply::Reply;
use super::shared::Shared;

use super::log::{LoggedRequest, RequestLog};
use super::model::{Ctx, HasMeta, State, ordered};
use super::query::{self, ListFilter};
use super::{floating_ips, listeners, load_balancers, monitors, pools, render};
use crate::request_core::{CloudApi, Request};

/// A served path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route<'a> {
    Servers,
    Server(&'a str),
    LoadBalancers,
    LoadBalancer(&'a str),
    Pools,
    Pool(&'a str),
    Members(&'a str),
    Member(&'a str, &'a str),
    Listeners,
    Listener(&'a str),
    Monitors,
    Monitor(&'a str),
    FloatingIps,
    FloatingIp(&'a str),
    Networks,
    Network(&'a str),
    Subnets,
    Subnet(&'a str),
}

impl<'a> Route<'a> {
    /// The route of a path (one trailing slash tolerated), None when nothing is served there.
    fn parse(path: &'a str) -> Option<Route<'a>> {
        let rest = path.strip_prefix("/v1/")?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let segments: Vec<&str> = rest.split('/').collect();
        if segments.iter().any(|s| s.is_empty()) {
            return None;
        }
        Some(match segments.as_slice() {
            ["servers"] => Route::Servers,
            ["servers", id] => Route::Server(id),
            ["load-balancers"] => Route::LoadBalancers,
            ["load-balancers", "pools"] => Route::Pools,
            ["load-balancers", "pools", id] => Route::Pool(id),
            ["load-balancers", "pools", id, "members"] => Route::Members(id),
            ["load-balancers", "pools", pool, "members", id] => Route::Member(pool, id),
            ["load-balancers", "listeners"] => Route::Listeners,
            ["load-balancers", "listeners", id] => Route::Listener(id),
            ["load-balancers", "health-monitors"] => Route::Monitors,
            ["load-balancers", "health-monitors", id] => Route::Monitor(id),
            ["load-balancers", id] => Route::LoadBalancer(id),
            ["floating-ips"] => Route::FloatingIps,
            ["floating-ips", ip] => Route::FloatingIp(ip),
            ["networks"] => Route::Networks,
            ["networks", id] => Route::Network(id),
            ["subnets"] => Route::Subnets,
            ["subnets", id] => Route::Subnet(id),
            _ => return None,
        })
    }

    /// The methods served on the route, for 405 and its `Allow` header.
    fn allow(self) -> &'static str {
        match self {
            Route::Servers
            | Route::Server(_)
            | Route::Networks
            | Route::Network(_)
            | Route::Subnets
            | Route::Subnet(_) => "GET, HEAD",
            Route::LoadBalancers
            | Route::Pools
            | Route::Members(_)
            | Route::Listeners
            | Route::Monitors
            // POST: API doc "Create a Floating IP" (cloudscale-cli `floating-ip create`).
            | Route::FloatingIps => "GET, POST, HEAD",
            // DELETE: API doc "Delete a Floating IP" (cloudscale-cli `floating-ip delete`).
            Route::FloatingIp(_) => "GET, PATCH, DELETE, HEAD",
            Route::LoadBalancer(_)
            | Route::Pool(_)
            | Route::Member(..)
            | Route::Listener(_)
            | Route::Monitor(_) => "GET, PATCH, DELETE, HEAD",
        }
    }

    /// Whether the route is a list (where tag filters apply).
    fn is_list(self) -> bool {
        matches!(
            self,
            Route::Servers
                | Route::LoadBalancers
                | Route::Pools
                | Route::Members(_)
                | Route::Listeners
                | Route::Monitors
                | Route::FloatingIps
                | Route::Networks
                | Route::Subnets
        )
    }
}

impl CloudApi for Shared {
    const NAME: &'static str = "cloudscale";
    type Parsed = ();
    type Logged = LoggedRequest;

    fn faults(&self) -> &crate::fixture::Faults {
        &self.faults
    }

    fn log(&self) -> &RequestLog {
        &self.log
    }

    fn parse(&self, _: &Request) {}

    fn failure(_: &Request, _: &(), status: u16) -> Response {
        ApiError::detail(status, "Simulated failure.").into_response()
    }

    /// Also the answer over the rate limit. We found no request limit and no 429 answer in
    /// cloudscale.ch's API documentation (cloudscale.ch/en/api/v1; not re-read for this, so
    /// check it when it matters), so this is our choice, in the shape its API would give: the API is Django REST framework (its error
    /// bodies, see `error.rs`), whose throttling (`rest_framework.throttling`, DRF's
    /// "Throttling" guide) answers 429 `{"detail": "Request was throttled. Expected available
    /// in N seconds."}` with `Retry-After: N`.
    fn throttled(_: &Request, _: &(), seconds: u32) -> Response {
        let unit = if seconds == 1 { "second" } else { "seconds" };
        ApiError {
            retry_after: Some(seconds),
            ..ApiError::detail(
                429,
                format!("Request was throttled. Expected available in {seconds} {unit}."),
            )
        }
        .into_response()
    }

    fn refusal(&self, request: &Request) -> Option<Response> {
        self.faults
            .take_busy(request.method.as_str(), &request.path)
            .then(|| ApiError::detail(400, BUSY).into_response())
    }

    fn serve(&self, request: &Request, _: &()) -> Response {
        serve(self, request)
    }

    fn log_entry(request: &Request, _: &(), status: u16) -> LoggedRequest {
        LoggedRequest {
            method: request.method.to_string(),
            path: request
                .uri
                .path_and_query()
                .map_or_else(|| request.path.clone(), |p| p.as_str().to_string()),
            body: crate::fixture::body_value(&request.body),
            status,
            traceparent: request
                .headers
                .get("traceparent")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
        }
    }
}

/// `http://<Host>` when the request names a plausible host (so hrefs resolve for clients that
/// reach the simulator under another name, e.g. in a container), else the listen URL.
fn base_url(headers: &HeaderMap, fallback: &str) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b".-:[]_".contains(&b))
        });
    match host {
        Some(h) => format!("http://{h}"),
        None => fallback.to_string(),
    }
}

/// The token check: 401 with DRF's messages.
fn authorize(sim: &Shared, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Err(ApiError::detail(
            401,
            "Authentication credentials were not provided.",
        ));
    };
    let token = value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if token == Some(sim.token.as_str()) {
        Ok(())
    } else {
        Err(ApiError::detail(401, "Invalid token."))
    }
}

fn serve(sim: &Shared, request: &Request) -> Response {
    let Request {
        method,
        path,
        headers,
        body,
        ..
    } = request;
    let mut response = match serve_api(sim, method, path, request.query(), headers, body) {
        Ok(reply) => reply.into_response(),
        Err(e) => e.into_response(),
    };
    if method == Method::HEAD {
        *response.body_mut() = axum::body::Body::empty();
    }
    if response.status() == StatusCode::UNAUTHORIZED {
        // DRF's token authentication announces its scheme on 401.
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

fn serve_api(
    sim: &Shared,
    method: &Method,
    path: &str,
    raw_query: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Reply, ApiError> {
    authorize(sim, headers)?;
    let route = Route::parse(path).ok_or_else(ApiError::not_found)?;
    let filter = query::parse(raw_query)?;
    let verb = if *method == Method::HEAD {
        "GET"
    } else {
        method.as_str()
    };
    if !route.allow().split(", ").any(|m| m == verb) {
        return Err(ApiError {
            allow: Some(route.allow()),
            ..ApiError::detail(405, format!("Method \"{method}\" not allowed."))
        });
    }
    let ctx = Ctx {
        base: base_url(headers, &sim.url),
        now: Instant::now(),
        refuse_changing: sim.faults.refusing_while_changing(),
    };
    let filters_a_list = verb == "GET" && route.is_list();
    if !filter.is_empty() && !filters_a_list {
        // Tag filters are list parameters (module `query`); elsewhere they would be ignored
        // silently at best, so the simulator refuses them.
        return Err(ApiError::detail(
            400,
            format!("Tag filters apply to lists only; {method} {path} is not a list."),
        ));
    }
    let mut state = sim.state.lock();
    if verb == "GET" {
        return get(&state, &ctx, route, &filter).map(Reply::Ok);
    }
    let state = &mut *state;
    match (verb, route) {
        ("POST", Route::LoadBalancers) => load_balancers::create(state, &ctx, body),
        ("PATCH", Route::LoadBalancer(id)) => load_balancers::patch(state, &ctx, id, body),
        ("DELETE", Route::LoadBalancer(id)) => load_balancers::delete(state, &ctx, id),
        ("POST", Route::Pools) => pools::create(state, &ctx, body),
        ("PATCH", Route::Pool(id)) => pools::patch(state, &ctx, id, body),
        ("DELETE", Route::Pool(id)) => pools::delete(state, &ctx, id),
        ("POST", Route::Members(pool)) => pools::create_member(state, &ctx, pool, body),
        ("PATCH", Route::Member(pool, id)) => pools::patch_member(state, &ctx, pool, id, body),
        ("DELETE", Route::Member(pool, id)) => pools::delete_member(state, &ctx, pool, id),
        ("POST", Route::Listeners) => listeners::create(state, &ctx, body),
        ("PATCH", Route::Listener(id)) => listeners::patch(state, &ctx, id, body),
        ("DELETE", Route::Listener(id)) => listeners::delete(state, &ctx, id),
        ("POST", Route::Monitors) => monitors::create(state, &ctx, body),
        ("PATCH", Route::Monitor(id)) => monitors::patch(state, &ctx, id, body),
        ("DELETE", Route::Monitor(id)) => monitors::delete(state, &ctx, id),
        ("PATCH", Route::FloatingIp(ip)) => floating_ips::patch(state, ip, body),
        ("POST", Route::FloatingIps) => floating_ips::create(state, &ctx, body),
        ("DELETE", Route::FloatingIp(ip)) => floating_ips::delete(state, ip),
        // allow() admitted nothing else.
        _ => Err(ApiError::detail(
            405,
            format!("Method \"{method}\" not allowed."),
        )),
    }
}

/// A GET: one object (404 when absent) or a complete list in creation order.
fn get(state: &State, ctx: &Ctx, route: Route<'_>, filter: &ListFilter) -> Result<Value, ApiError> {
    fn one<T>(found: Option<&T>, render: impl FnOnce(&T) -> Value) -> Result<Value, ApiError> {
        found.map(render).ok_or_else(ApiError::not_found)
    }
    let list = |items: Vec<Value>| Ok(Value::Array(items));
    match route {
        Route::Servers => list(
            listed(filter, &state.servers)
                .into_iter()
                .map(|s| render::server(state, ctx, s))
                .collect(),
        ),
        Route::Server(id) => one(state.servers.get(id), |s| render::server(state, ctx, s)),
        Route::LoadBalancers => list(
            listed(filter, &state.load_balancers)
                .into_iter()
                .map(|lb| render::load_balancer(state, ctx, lb))
                .collect(),
        ),
        Route::LoadBalancer(id) => one(state.load_balancers.get(id), |lb| {
            render::load_balancer(state, ctx, lb)
        }),
        Route::Pools => list(
            listed(filter, &state.pools)
                .into_iter()
                .map(|p| render::pool(state, ctx, p))
                .collect(),
        ),
        Route::Pool(id) => one(state.pools.get(id), |p| render::pool(state, ctx, p)),
        Route::Members(pool) => {
            if !state.pools.contains_key(pool) {
                return Err(ApiError::not_found());
            }
            list(
                listed(filter, &state.members)
                    .into_iter()
                    .filter(|m| m.pool == pool)
                    .map(|m| render::member(state, ctx, m))
                    .collect(),
            )
        }
        Route::Member(pool, id) => {
            pools::find_member(state, pool, id).map(|m| render::member(state, ctx, m))
        }
        Route::Listeners => list(
            listed(filter, &state.listeners)
                .into_iter()
                .map(|l| render::listener(state, ctx, l))
                .collect(),
        ),
        Route::Listener(id) => one(state.listeners.get(id), |l| render::listener(state, ctx, l)),
        Route::Monitors => list(
            listed(filter, &state.monitors)
                .into_iter()
                .map(|m| render::monitor(state, ctx, m))
                .collect(),
        ),
        Route::Monitor(id) => one(state.monitors.get(id), |m| render::monitor(state, ctx, m)),
        Route::FloatingIps => list(
            listed(filter, &state.floating_ips)
                .into_iter()
                .map(|f| render::floating_ip(state, ctx, f))
                .collect(),
        ),
        Route::FloatingIp(ip) => {
            floating_ips::find(state, ip).map(|f| render::floating_ip(state, ctx, f))
        }
        // Like the real API, the public network and subnets are not listed (but resolve).
        Route::Networks => list(
            listed(filter, &state.networks)
                .into_iter()
                .filter(|n| !n.public)
                .map(|n| render::network(state, ctx, n))
                .collect(),
        ),
        Route::Network(id) => one(state.networks.get(id), |n| render::network(state, ctx, n)),
        Route::Subnets => list(
            listed(filter, &state.subnets)
                .into_iter()
                .filter(|s| !s.public)
                .map(|s| render::subnet(state, ctx, s))
                .collect(),
        ),
        Route::Subnet(id) => one(state.subnets.get(id), |s| render::subnet(state, ctx, s)),
    }
}

/// A table's resources in creation order, those whose tags match `filter`; every listed resource
/// has tags, so the filter applies to all lists alike.
fn listed<'a, T: HasMeta, K: Ord>(
    filter: &ListFilter,
    map: &'a std::collections::BTreeMap<K, T>,
) -> Vec<&'a T> {
    ordered(map)
        .into_iter()
        .filter(|x| filter.matches(&x.meta().tags))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(
            Route::parse("/v1/load-balancers/pools/p/members/m/"),
            Some(Route::Member("p", "m"))
        );
        assert_eq!(
            Route::parse("/v1/load-balancers/abc"),
            Some(Route::LoadBalancer("abc"))
        );
        assert_eq!(Route::parse("/v1/load-balancers//x"), None);
        assert_eq!(Route::parse("/v2/servers"), None);
        assert_eq!(Route::parse("/v1/servers/a/b"), None);
    }
}
