//! `/sim/...`: the control API of the standalone binary, the HTTP twin of the library calls
//! for scripts and the playground. Control requests need no token and are neither faulted nor
//! logged.

use std::time::Duration;

use axum::http::Method;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::ApiError;
use super::seed::{Seed, apply};
use super::server::Reply;
use super::{Shared, settle};

/// A `POST /sim/faults` command: a common one, or cloudscale's refusal of mutations while a
/// load balancer is `changing`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum FaultCommand {
    Common(crate::fixture::FaultCommand),
    Cloudscale(CloudscaleFault),
}

#[derive(Debug, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
enum CloudscaleFault {
    RefuseWhileChanging { on: bool },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StatusBody {
    status: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadyAfter {
    ms: u64,
}

fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::detail(400, e.to_string()))
}

/// Serves a `/sim` request.
pub(crate) fn handle(sim: &Shared, method: &Method, path: &str, body: &[u8]) -> Response {
    match control(sim, method, path, body) {
        Ok(reply) => reply.into_response(),
        Err(e) => e.into_response(),
    }
}

fn control(sim: &Shared, method: &Method, path: &str, body: &[u8]) -> Result<Reply, ApiError> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method.as_str(), segments.as_slice()) {
        ("POST", ["sim", "settle"]) => {
            settle(&mut sim.lock());
            Ok(Reply::NoContent)
        }
        ("PUT", ["sim", "lb-ready-after"]) => {
            let ReadyAfter { ms } = parse(body)?;
            sim.lock().lb_ready_after = Duration::from_millis(ms);
            Ok(Reply::NoContent)
        }
        ("POST", ["sim", "seed"]) => {
            let text = String::from_utf8_lossy(body);
            let seed = Seed::parse(&text).map_err(|e| ApiError::detail(400, e))?;
            let mut state = sim.lock();
            let mut next = state.clone();
            apply(&mut next, &seed).map_err(|e| ApiError::detail(400, e))?;
            *state = next;
            Ok(Reply::NoContent)
        }
        ("PUT", ["sim", "servers", uuid, "status"]) => {
            let StatusBody { status } = parse(body)?;
            match sim.lock().servers.get_mut(*uuid) {
                Some(server) => {
                    server.status = status;
                    Ok(Reply::NoContent)
                }
                None => Err(ApiError::not_found()),
            }
        }
        ("DELETE", ["sim", "servers", uuid]) => {
            if super::remove_server(&mut sim.lock(), uuid) {
                Ok(Reply::NoContent)
            } else {
                Err(ApiError::not_found())
            }
        }
        ("GET", ["sim", "requests"]) => {
            let list: Vec<Value> = sim
                .log
                .all()
                .into_iter()
                .map(|r| json!({"method": r.method, "path": r.path, "body": r.body, "status": r.status}))
                .collect();
            Ok(Reply::Ok(Value::Array(list)))
        }
        ("DELETE", ["sim", "requests"]) => {
            sim.log.clear();
            Ok(Reply::NoContent)
        }
        ("POST", ["sim", "faults"]) => {
            let faults = &sim.faults;
            match parse::<FaultCommand>(body)? {
                FaultCommand::Common(command) => command.apply(faults),
                FaultCommand::Cloudscale(CloudscaleFault::RefuseWhileChanging { on }) => {
                    faults.refuse_while_changing(on)
                }
            }
            Ok(Reply::NoContent)
        }
        ("DELETE", ["sim", "faults"]) => {
            sim.faults.clear();
            Ok(Reply::NoContent)
        }
        _ => Err(ApiError::not_found()),
    }
}
