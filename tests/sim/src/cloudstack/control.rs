//! `/sim/...`: the control API of the standalone binary, the HTTP twin of the library calls for
//! scripts and the playground. Control requests need no signature and are neither faulted nor
//! logged.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::{CsError, json_response};
use super::seed::{Seed, apply};
use super::{CidrSeparator, Shared, snapshot};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Polls {
    polls: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Millis {
    ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FailJobs {
    command: String,
    #[serde(default = "one")]
    count: usize,
}

fn one() -> usize {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Separator {
    separator: CidrSeparator,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Admin {
    admin: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Version {
    version: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PageSize {
    max: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VmState {
    state: String,
}

fn bad_request(text: impl Into<String>) -> CsError {
    CsError::new(400, super::error::CS_SERVER_API, text)
}

fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, CsError> {
    serde_json::from_slice(body).map_err(|e| bad_request(e.to_string()))
}

/// Serves a `/sim` request.
pub(crate) fn handle(sim: &Shared, method: &Method, path: &str, body: &[u8]) -> Response {
    match control(sim, method, path, body) {
        Ok(None) => StatusCode::NO_CONTENT.into_response(),
        Ok(Some(v)) => json_response(200, &v),
        Err(e) => e.into_response_for("sim"),
    }
}

fn not_found(path: &str) -> CsError {
    CsError::new(
        404,
        super::error::CS_SERVER_API,
        format!("No control endpoint {path}"),
    )
}

fn control(
    sim: &Shared,
    method: &Method,
    path: &str,
    body: &[u8],
) -> Result<Option<Value>, CsError> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method.as_str(), segments.as_slice()) {
        ("POST", ["sim", "settle"]) => sim.lock().settle(),
        ("PUT", ["sim", "job-polls"]) => {
            sim.lock().settings.job_polls = parse::<Polls>(body)?.polls
        }
        ("PUT", ["sim", "job-duration"]) => {
            sim.lock().settings.job_duration = parse::<Millis>(body)?.ms.map(Duration::from_millis);
        }
        ("POST", ["sim", "fail-jobs"]) => {
            let FailJobs { command, count } = parse(body)?;
            super::fail_jobs(&mut sim.lock(), &command, count);
        }
        ("PUT", ["sim", "cidr-separator"]) => {
            sim.lock().settings.cidr_separator = parse::<Separator>(body)?.separator;
        }
        ("PUT", ["sim", "admin"]) => sim.lock().settings.admin = parse::<Admin>(body)?.admin,
        ("PUT", ["sim", "version"]) => {
            let Version { version } = parse(body)?;
            if super::model::parse_version(&version).is_none() {
                return Err(bad_request(format!(
                    "{version:?} is not a version such as 4.18.0.0"
                )));
            }
            sim.lock().settings.version = version;
        }
        ("PUT", ["sim", "page-size"]) => {
            let PageSize { max } = parse(body)?;
            if max == 0 {
                return Err(bad_request("max must be at least 1"));
            }
            sim.lock().settings.page_size_limit = max;
        }
        ("POST", ["sim", "seed"]) => {
            let seed = Seed::parse(&String::from_utf8_lossy(body)).map_err(bad_request)?;
            let mut state = sim.lock();
            let mut next = state.clone();
            apply(&mut next, &seed).map_err(bad_request)?;
            *state = next;
        }
        ("PUT", ["sim", "vms", id, "state"]) => {
            let VmState { state: vm_state } = parse(body)?;
            let mut state = sim.lock();
            let vm = state
                .vms
                .iter_mut()
                .find(|v| v.id == *id)
                .ok_or_else(|| not_found(path))?;
            vm.state = vm_state;
        }
        ("DELETE", ["sim", "vms", id]) => {
            if !sim.lock().remove_vm(id) {
                return Err(not_found(path));
            }
        }
        ("GET", ["sim", "state"]) => {
            let mut state = sim.lock();
            state.advance(std::time::Instant::now());
            return Ok(Some(json!({
                "loadbalancerrules": snapshot::load_balancer_rules(&state),
                "publicipaddresses": snapshot::public_ips(&state),
                "firewallrules": snapshot::firewall_rules(&state),
                "networkacls": snapshot::network_acls(&state),
                "virtualmachines": snapshot::vms(&state),
                "pendingjobs": state.pending_jobs(),
            })));
        }
        ("GET", ["sim", "requests"]) => {
            let list = sim.log.all().iter().map(|r| r.to_json()).collect();
            return Ok(Some(Value::Array(list)));
        }
        ("DELETE", ["sim", "requests"]) => sim.log.clear(),
        ("POST", ["sim", "faults"]) => {
            parse::<crate::fixture::FaultCommand>(body)?.apply(&sim.faults);
        }
        ("DELETE", ["sim", "faults"]) => sim.faults.clear(),
        _ => return Err(not_found(path)),
    }
    Ok(None)
}
