//! `/sim/...`: the control API of the standalone binary, the HTTP twin of the library calls
//! for scripts and the playground. The request core serves what every cloud has (faults,
//! requests, seed, settle); these are cloudscale's own.

use std::time::Duration;

use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::error::ApiError;
use super::reply::Reply;
use super::seed::{Seed, apply};
use super::shared::Shared;
use crate::request_core::{ControlAnswer, ControlApi, ControlRequest, FaultCommandFor, StatusBody};

/// A `POST /sim/faults` command: a common one, or cloudscale's refusal of mutations while a
/// load balancer is `changing`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum FaultCommand {
    Common(crate::fixture::FaultCommand),
    Cloudscale(CloudscaleFault),
}

#[derive(Debug, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum CloudscaleFault {
    RefuseWhileChanging { on: bool },
}

impl FaultCommandFor<Shared> for FaultCommand {
    fn apply_to(self, sim: &Shared) {
        match self {
            FaultCommand::Common(command) => command.apply(&sim.faults),
            FaultCommand::Cloudscale(CloudscaleFault::RefuseWhileChanging { on }) => {
                sim.faults.refuse_while_changing(on)
            }
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadyAfter {
    ms: u64,
}

impl ControlApi for Shared {
    type Error = ApiError;
    type FaultCommand = FaultCommand;

    /// Also stops refusing mutations of changing load balancers.
    fn clear_faults(&self) {
        self.faults.clear();
    }

    fn settle(&self) {
        super::settle(&mut self.state.lock());
    }

    fn seed(&self, text: &str) -> Result<(), String> {
        let seed = Seed::parse(text)?;
        self.state.change(|state| apply(state, &seed))
    }

    fn control(&self, request: &ControlRequest<'_>) -> ControlAnswer<ApiError> {
        let body = request.body;
        match (request.method, request.segments.as_slice()) {
            ("PUT", ["sim", "lb-ready-after"]) => {
                let ReadyAfter { ms } = Shared::parse_body(body)?;
                self.state.lock().lb_ready_after = Duration::from_millis(ms);
            }
            ("PUT", ["sim", "servers", uuid, "status"]) => {
                let StatusBody { status } = Shared::parse_body(body)?;
                let mut state = self.state.lock();
                let server = state
                    .servers
                    .get_mut(*uuid)
                    .ok_or_else(ApiError::not_found)?;
                server.status = status;
            }
            ("DELETE", ["sim", "servers", uuid]) => {
                if !super::remove_server(&mut self.state.lock(), uuid) {
                    return Err(ApiError::not_found());
                }
            }
            _ => return Err(ApiError::not_found()),
        }
        Ok(None)
    }

    fn bad_request(message: String) -> ApiError {
        ApiError::detail(400, message)
    }

    fn control_json(value: &Value) -> Response {
        Reply::Ok(value.clone()).into_response()
    }

    fn control_error(error: ApiError) -> Response {
        error.into_response()
    }
}
