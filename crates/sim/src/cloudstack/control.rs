//! `/sim/...`: the control API of the standalone binary, the HTTP twin of the library calls for
//! scripts and the playground. The request core serves what every cloud has (faults, requests,
//! seed, settle); these are CloudStack's own.

use std::time::Duration;

use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::{CsError, json_response};
use super::seed::{Seed, apply};
use super::{CidrSeparator, Shared, snapshot};
use crate::request_core::{ControlAnswer, ControlApi, ControlRequest};

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

/// A 400 of a control request.
fn bad_request(text: impl Into<String>) -> CsError {
    CsError::new(400, super::error::CS_SERVER_API, text)
}

fn not_found(path: &str) -> CsError {
    CsError::new(
        404,
        super::error::CS_SERVER_API,
        format!("No control endpoint {path}"),
    )
}

impl ControlApi for Shared {
    type Error = CsError;
    type FaultCommand = crate::fixture::FaultCommand;

    fn settle(&self) {
        self.state.lock().settle();
    }

    fn seed(&self, text: &str) -> Result<(), String> {
        let seed = Seed::parse(text)?;
        self.state.change(|state| apply(state, &seed))
    }

    fn control(&self, request: &ControlRequest<'_>) -> ControlAnswer<CsError> {
        let ControlRequest { body, path, .. } = *request;
        match (request.method, request.segments.as_slice()) {
            ("PUT", ["sim", "job-polls"]) => {
                self.state.lock().settings.job_polls = Shared::parse_body::<Polls>(body)?.polls
            }
            ("PUT", ["sim", "job-duration"]) => {
                self.state.lock().settings.job_duration = Shared::parse_body::<Millis>(body)?
                    .ms
                    .map(Duration::from_millis);
            }
            ("POST", ["sim", "fail-jobs"]) => {
                let FailJobs { command, count } = Shared::parse_body(body)?;
                super::fail_jobs(&mut self.state.lock(), &command, count);
            }
            ("PUT", ["sim", "cidr-separator"]) => {
                self.state.lock().settings.cidr_separator =
                    Shared::parse_body::<Separator>(body)?.separator;
            }
            ("PUT", ["sim", "admin"]) => {
                self.state.lock().settings.admin = Shared::parse_body::<Admin>(body)?.admin
            }
            ("PUT", ["sim", "version"]) => {
                let Version { version } = Shared::parse_body(body)?;
                if super::model::parse_version(&version).is_none() {
                    return Err(bad_request(format!(
                        "{version:?} is not a version such as 4.18.0.0"
                    )));
                }
                self.state.lock().settings.version = version;
            }
            ("PUT", ["sim", "page-size"]) => {
                let PageSize { max } = Shared::parse_body(body)?;
                if max == 0 {
                    return Err(bad_request("max must be at least 1"));
                }
                self.state.lock().settings.page_size_limit = max;
            }
            ("PUT", ["sim", "vms", id, "state"]) => {
                let VmState { state: vm_state } = Shared::parse_body(body)?;
                let mut state = self.state.lock();
                let vm = state
                    .vms
                    .iter_mut()
                    .find(|v| v.id == *id)
                    .ok_or_else(|| not_found(path))?;
                vm.state = vm_state;
            }
            ("DELETE", ["sim", "vms", id]) => {
                if !self.state.lock().remove_vm(id) {
                    return Err(not_found(path));
                }
            }
            ("GET", ["sim", "state"]) => {
                let mut state = self.state.lock();
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
            _ => return Err(not_found(path)),
        }
        Ok(None)
    }

    fn bad_request(message: String) -> CsError {
        bad_request(message)
    }

    fn control_json(value: &Value) -> Response {
        json_response(200, value)
    }

    /// CloudStack's error envelope, named after the pseudo-command `sim`.
    fn control_error(error: CsError) -> Response {
        error.into_response_for("sim")
    }
}
