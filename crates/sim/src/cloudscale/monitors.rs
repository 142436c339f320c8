//! Health monitors (`/v1/load-balancers/health-monitors`).

use serde_json::Value;

use super::body::Fields;
use super::error::{ApiError, does_not_exist};
use super::model::{Ctx, Http, Monitor, State, new_uuid};
use super::render;
use super::reply::Reply;

/// Monitor types the API accepts.
const TYPES: &[&str] = &["ping", "tcp", "http", "https", "tls-hello", "udp-connect"];
/// HTTP methods an http(s) monitor may use.
const METHODS: &[&str] = &[
    "CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE",
];
/// HTTP versions an http(s) monitor may speak.
const VERSIONS: &[&str] = &["1.0", "1.1"];
/// Seconds and thresholds.
const SMALL: std::ops::RangeInclusive<i64> = 1..=3_600;

fn is_http(kind: &str) -> bool {
    matches!(kind, "http" | "https")
}

/// Merges the request's `http` object into `base`, recording errors under `http` in `f`.
/// Absent or null means no change (all defaults on create).
fn merge_http(f: &mut Fields, mut base: Http) -> Http {
    let map = match f.raw("http") {
        None | Some(Value::Null) => return base,
        Some(Value::Object(map)) => map.clone(),
        Some(_) => {
            f.fail("http", "Expected a dictionary of items.");
            return base;
        }
    };
    let mut h = Fields::from_map(map);
    if h.has("method") {
        base.method = h.choice("method", METHODS, None);
    }
    if let Some(path) = h.opt_string("url_path") {
        if !path.starts_with('/') {
            h.fail("url_path", "The URL path must start with \"/\".");
        }
        base.url_path = path;
    }
    if h.has("version") {
        base.version = h.choice("version", VERSIONS, None);
    }
    if h.has("host") {
        base.host = h.nullable_string("host");
    }
    if let Some(codes) = h.opt_strings("expected_codes") {
        let valid = |c: &String| c.len() == 3 && c.bytes().all(|b| b.is_ascii_digit());
        if let Some(bad) = codes.iter().find(|c| !valid(c)) {
            h.fail(
                "expected_codes",
                format!("\"{bad}\" is not an HTTP status code."),
            );
        }
        base.expected_codes = codes;
    }
    for (k, msg) in h.into_errors() {
        f.fail("http", format!("{k}: {msg}"));
    }
    base
}

/// `POST /v1/load-balancers/health-monitors`. `http` is kept only for http/https monitors
/// (with defaults for missing fields); for other types it reads null.
pub(crate) fn create(state: &mut State, ctx: &Ctx, body: &[u8]) -> Result<Reply, ApiError> {
    let mut f = Fields::parse(body)?;
    let pool = f.string("pool");
    let delay_s = f.int("delay_s", SMALL, Some(2));
    let timeout_s = f.int("timeout_s", SMALL, Some(1));
    let up_threshold = f.int("up_threshold", 1..=10, Some(2));
    let down_threshold = f.int("down_threshold", 1..=10, Some(3));
    let kind = f.choice("type", TYPES, None);
    let http = merge_http(&mut f, Http::default());
    let tags = f.opt_tags().unwrap_or_default();
    let lb = state.pools.get(&pool).map(|p| p.lb.clone());
    if !pool.is_empty() && lb.is_none() {
        f.fail("pool", does_not_exist(&pool));
    }
    if lb.is_some() && state.monitors.values().any(|m| m.pool == pool) {
        f.fail("pool", "This pool already has a health monitor.");
    }
    f.finish()?;
    state.ensure_not_changing(ctx, lb.as_deref().unwrap_or(""))?;
    let uuid = new_uuid();
    let monitor = Monitor {
        meta: state.new_meta(tags),
        uuid: uuid.clone(),
        pool,
        delay_s,
        timeout_s,
        up_threshold,
        down_threshold,
        http: is_http(&kind).then_some(http),
        kind,
    };
    let json = render::monitor(state, ctx, &monitor);
    state.monitors.insert(uuid, monitor);
    Ok(Reply::Created(json))
}

/// The monitor's LB UUID, or 404.
fn monitor_lb(state: &State, uuid: &str) -> Result<String, ApiError> {
    let monitor = state.monitors.get(uuid).ok_or_else(ApiError::not_found)?;
    Ok(state
        .pools
        .get(&monitor.pool)
        .map(|p| p.lb.clone())
        .unwrap_or_default())
}

/// `PATCH /v1/load-balancers/health-monitors/{uuid}`: any of the timings and thresholds,
/// `http` (its keys merged into the existing block; ignored for non-http types), `tags`.
pub(crate) fn patch(
    state: &mut State,
    ctx: &Ctx,
    uuid: &str,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let lb = monitor_lb(state, uuid)?;
    let current = state.monitors.get(uuid).and_then(|m| m.http.clone());
    let mut f = Fields::parse(body)?;
    let delay_s = f.opt_int("delay_s", SMALL);
    let timeout_s = f.opt_int("timeout_s", SMALL);
    let up_threshold = f.opt_int("up_threshold", 1..=10);
    let down_threshold = f.opt_int("down_threshold", 1..=10);
    let http = current.map(|h| merge_http(&mut f, h));
    let tags = f.opt_tags();
    f.finish()?;
    state.ensure_not_changing(ctx, &lb)?;
    if let Some(m) = state.monitors.get_mut(uuid) {
        m.delay_s = delay_s.unwrap_or(m.delay_s);
        m.timeout_s = timeout_s.unwrap_or(m.timeout_s);
        m.up_threshold = up_threshold.unwrap_or(m.up_threshold);
        m.down_threshold = down_threshold.unwrap_or(m.down_threshold);
        if http.is_some() {
            m.http = http;
        }
        if let Some(tags) = tags {
            m.meta.tags = tags;
        }
    }
    Ok(Reply::NoContent)
}

/// `DELETE /v1/load-balancers/health-monitors/{uuid}`.
pub(crate) fn delete(state: &mut State, ctx: &Ctx, uuid: &str) -> Result<Reply, ApiError> {
    let lb = monitor_lb(state, uuid)?;
    state.ensure_not_changing(ctx, &lb)?;
    state.monitors.remove(uuid);
    Ok(Reply::NoContent)
}
