//! `/sim/...`: the control API of the standalone binary, the HTTP twin of the library calls for
//! scripts and the playground. The request core serves what every cloud has (faults, requests,
//! seed, settle); these are PhoenixNAP's own.

use std::time::{Duration, Instant};

use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::Shared;
use super::error::{ApiError, json_response};
use super::seed::{Seed, apply};
use crate::request_core::{ControlAnswer, ControlApi, ControlRequest, StatusBody};

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

fn not_found() -> ApiError {
    ApiError::new(404, "Not found.")
}

impl ControlApi for Shared {
    type Error = ApiError;
    type FaultCommand = crate::fixture::FaultCommand;

    fn settle(&self) {
        self.state.lock().settle();
    }

    fn seed(&self, text: &str) -> Result<(), String> {
        let seed = Seed::parse(text)?;
        self.state
            .change(|state| apply(state, &seed, Instant::now()))
    }

    fn control(&self, request: &ControlRequest<'_>) -> ControlAnswer<ApiError> {
        let body = request.body;
        match (request.method, request.segments.as_slice()) {
            ("PUT", ["sim", "assign-after"]) => {
                let Millis { ms } = Shared::parse_body(body)?;
                self.state.lock().assign_after = Duration::from_millis(ms);
            }
            ("POST", ["sim", "expire-tokens"]) => self.tokens.expire_all(),
            ("PUT", ["sim", "gone-server-status"]) => {
                let GoneStatus { status } = Shared::parse_body(body)?;
                if !matches!(status, 403 | 404) {
                    return Err(ApiError::new(400, "status: 403 or 404"));
                }
                self.state.lock().gone_server_status = status;
            }
            ("PUT", ["sim", "network-resource-type"]) => {
                let ResourceType { kind } = Shared::parse_body(body)?;
                if kind.trim().is_empty() {
                    return Err(ApiError::new(400, "type: must not be empty"));
                }
                self.state.lock().network_resource_type = kind;
            }
            ("PUT", ["sim", "servers", id, "status"]) => {
                let StatusBody { status } = Shared::parse_body(body)?;
                let mut state = self.state.lock();
                let server = state
                    .servers
                    .iter_mut()
                    .find(|s| s.id == *id)
                    .ok_or_else(not_found)?;
                server.status = status;
            }
            ("DELETE", ["sim", "servers", id]) => {
                let mut state = self.state.lock();
                let before = state.servers.len();
                state.servers.retain(|s| s.id != *id);
                if state.servers.len() == before {
                    return Err(not_found());
                }
            }
            ("PUT", ["sim", "public-networks", id, "status"]) => {
                let StatusBody { status } = Shared::parse_body(body)?;
                if !super::model::NETWORK_STATUSES.contains(&status.as_str()) {
                    return Err(ApiError::new(
                        400,
                        format!(
                            "status: {status:?} is not one of {}",
                            super::model::NETWORK_STATUSES.join(", ")
                        ),
                    ));
                }
                if !super::set_network_status(&mut self.state.lock(), id, &status) {
                    return Err(not_found());
                }
            }
            ("PUT", ["sim", "ip-blocks", id, "status"]) => {
                let StatusBody { status } = Shared::parse_body(body)?;
                if !super::set_block_status(&mut self.state.lock(), id, &status) {
                    return Err(not_found());
                }
            }
            _ => return Err(not_found()),
        }
        Ok(None)
    }

    fn bad_request(message: String) -> ApiError {
        ApiError::new(400, message)
    }

    fn control_json(value: &Value) -> Response {
        json_response(200, value)
    }

    fn control_error(error: ApiError) -> Response {
        error.into_response()
    }
}
