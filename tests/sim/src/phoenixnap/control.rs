//! `/sim/...`: the control API of the standalone binary, the HTTP twin of the library calls for
//! scripts and the playground. Control requests need no token and are neither faulted nor
//! logged.

use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Shared;
use super::error::{ApiError, json_response};
use super::seed::{Seed, apply};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StatusBody {
    status: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GoneStatus {
    status: u16,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResourceType {
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Millis {
    ms: u64,
}

fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::new(400, e.to_string()))
}

/// Serves a `/sim` request.
pub(crate) fn handle(sim: &Shared, method: &Method, path: &str, body: &[u8]) -> Response {
    match control(sim, method, path, body) {
        Ok(None) => StatusCode::NO_CONTENT.into_response(),
        Ok(Some(v)) => json_response(200, &v),
        Err(e) => e.into_response(),
    }
}

fn not_found() -> ApiError {
    ApiError::new(404, "Not found.")
}

fn control(
    sim: &Shared,
    method: &Method,
    path: &str,
    body: &[u8],
) -> Result<Option<Value>, ApiError> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method.as_str(), segments.as_slice()) {
        ("POST", ["sim", "settle"]) => sim.lock().settle(),
        ("PUT", ["sim", "assign-after"]) => {
            let Millis { ms } = parse(body)?;
            sim.lock().assign_after = Duration::from_millis(ms);
        }
        ("POST", ["sim", "seed"]) => {
            let seed =
                Seed::parse(&String::from_utf8_lossy(body)).map_err(|e| ApiError::new(400, e))?;
            let mut state = sim.lock();
            let mut next = state.clone();
            apply(&mut next, &seed, Instant::now()).map_err(|e| ApiError::new(400, e))?;
            *state = next;
        }
        ("POST", ["sim", "expire-tokens"]) => sim.tokens.expire_all(),
        ("PUT", ["sim", "gone-server-status"]) => {
            let GoneStatus { status } = parse(body)?;
            if !matches!(status, 403 | 404) {
                return Err(ApiError::new(400, "status: 403 or 404"));
            }
            sim.lock().gone_server_status = status;
        }
        ("PUT", ["sim", "network-resource-type"]) => {
            let ResourceType { kind } = parse(body)?;
            if kind.trim().is_empty() {
                return Err(ApiError::new(400, "type: must not be empty"));
            }
            sim.lock().network_resource_type = kind;
        }
        ("PUT", ["sim", "servers", id, "status"]) => {
            let StatusBody { status } = parse(body)?;
            let mut state = sim.lock();
            let server = state
                .servers
                .iter_mut()
                .find(|s| s.id == *id)
                .ok_or_else(not_found)?;
            server.status = status;
        }
        ("DELETE", ["sim", "servers", id]) => {
            let mut state = sim.lock();
            let before = state.servers.len();
            state.servers.retain(|s| s.id != *id);
            if state.servers.len() == before {
                return Err(not_found());
            }
        }
        ("PUT", ["sim", "ip-blocks", id, "status"]) => {
            let StatusBody { status } = parse(body)?;
            if !super::set_block_status(&mut sim.lock(), id, &status) {
                return Err(not_found());
            }
        }
        ("GET", ["sim", "requests"]) => {
            let list: Vec<Value> = sim
                .log
                .all()
                .into_iter()
                .map(|r| {
                    json!({"method": r.method, "path": r.path, "query": r.query,
                           "body": r.body, "status": r.status})
                })
                .collect();
            return Ok(Some(Value::Array(list)));
        }
        ("DELETE", ["sim", "requests"]) => sim.log.clear(),
        ("POST", ["sim", "faults"]) => {
            let faults = &sim.faults;
            parse::<crate::fixture::FaultCommand>(body)?.apply(faults);
        }
        ("DELETE", ["sim", "faults"]) => sim.faults.clear(),
        _ => return Err(not_found()),
    }
    Ok(None)
}
