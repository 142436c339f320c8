//! The `/sim/...` control API, so a standalone simulator can be driven like the library:
//!
//! | request | effect |
//! | --- | --- |
//! | `POST /sim/faults` with a [`FaultCommand`] or a list of them | add faults, compact, drop watches |
//! | `DELETE /sim/faults` | remove every fault |
//! | `GET /sim/requests`, `DELETE /sim/requests` | the request log, clear it |
//! | `GET /sim/counts`, `DELETE /sim/counts` | the counters (total and by resource), reset them |
//! | `POST /sim/compact`, `POST /sim/drop-watches` | as the library calls |
//! | `POST /sim/restart` with `{"down_ms": 500}` | a restart with the state kept ([`super::KubeSim::restart`]) |
//! | `GET /sim/restart` | what the restarts did ([`super::RestartStats`]) and the 410 watches |
//! | `POST /sim/seed` with YAML/JSON objects | insert or replace objects |
//! | `GET /sim/watch-list`, `PUT /sim/watch-list` with `{"watch_list": "gate_disabled"}` | whether streaming lists are served ([`WatchList`]) |
//!
//! Control requests are neither logged, counted nor subject to faults.

use std::time::Duration;

use axum::http::Method;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::error::ApiError;
use super::faults::FaultCommand;
use super::resources::RESOURCES;
use super::respond::{error_response, value_response};
use super::seed;
use super::{Shared, WatchList};

/// Serves one control request.
pub(crate) fn handle(sim: &Shared, method: &Method, path: &str, body: &[u8]) -> Response {
    match run(sim, method, path, body) {
        Ok(v) => value_response(200, &v),
        Err(e) => error_response(&e),
    }
}

fn run(sim: &Shared, method: &Method, path: &str, body: &[u8]) -> Result<Value, ApiError> {
    let ok = || Ok(json!({"ok": true}));
    match (method.as_str(), path.trim_end_matches('/')) {
        ("POST", "/sim/faults") => {
            let v: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("invalid JSON: {e}")))?;
            let commands: Vec<Value> = match v {
                Value::Array(a) => a,
                other => vec![other],
            };
            // Parse all first so a bad command changes nothing.
            let parsed = commands
                .into_iter()
                .map(serde_json::from_value::<FaultCommand>)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| ApiError::bad_request(format!("invalid fault command: {e}")))?;
            for c in parsed {
                apply(sim, c);
            }
            ok()
        }
        ("DELETE", "/sim/faults") => {
            sim.faults.clear();
            ok()
        }
        ("GET", "/sim/requests") => {
            serde_json::to_value(sim.log.records()).map_err(|e| ApiError::new(500, e.to_string()))
        }
        ("DELETE", "/sim/requests") => {
            sim.log.clear();
            ok()
        }
        ("GET", "/sim/counts") => {
            let mut by_resource = Map::new();
            for rt in RESOURCES {
                let c = sim.log.counts_for(rt.index);
                if c.total() > 0 {
                    by_resource.insert(rt.qualified(), json!(c));
                }
            }
            Ok(json!({"total": sim.log.counts(), "by_resource": by_resource}))
        }
        ("DELETE", "/sim/counts") => {
            sim.log.reset_counts();
            ok()
        }
        ("POST", "/sim/compact") => {
            sim.store.compact();
            ok()
        }
        ("POST", "/sim/drop-watches") => {
            sim.store.drop_watches();
            ok()
        }
        ("POST", "/sim/restart") => {
            let setting: RestartSetting = if body.is_empty() {
                RestartSetting { down_ms: 0 }
            } else {
                serde_json::from_slice(body)
                    .map_err(|e| ApiError::bad_request(format!("invalid restart: {e}")))?
            };
            sim.restart(Duration::from_millis(setting.down_ms));
            ok()
        }
        ("GET", "/sim/restart") => Ok(json!({
            "stats": sim.gate.stats(),
            "expired_watches": sim.expired_watches.load(std::sync::atomic::Ordering::Relaxed),
        })),
        ("POST", "/sim/seed") => {
            let text = std::str::from_utf8(body)
                .map_err(|_| ApiError::bad_request("seed body must be UTF-8"))?;
            let objects = seed::parse(text).map_err(|e| ApiError::bad_request(e.to_string()))?;
            let count = objects.len();
            for obj in objects {
                sim.store.seed(obj)?;
            }
            Ok(json!({"ok": true, "seeded": count}))
        }
        ("GET", "/sim/watch-list") => Ok(json!({"watch_list": sim.watch_list()})),
        ("PUT", "/sim/watch-list") => {
            let setting: WatchListSetting = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("invalid watch-list setting: {e}")))?;
            sim.set_watch_list(setting.watch_list);
            Ok(json!({"watch_list": setting.watch_list}))
        }
        _ => Err(ApiError::new(
            404,
            format!("no control endpoint {method} {path}"),
        )),
    }
}

/// The body of `POST /sim/restart`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RestartSetting {
    #[serde(default)]
    down_ms: u64,
}

/// The body of `PUT /sim/watch-list`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WatchListSetting {
    watch_list: WatchList,
}

fn apply(sim: &Shared, command: FaultCommand) {
    match command {
        FaultCommand::Fail {
            count,
            status,
            matcher,
        } => sim.faults.fail_next(count, status, matcher),
        FaultCommand::Conflict { count, resource } => {
            sim.faults.conflict_next_writes(&resource, count)
        }
        FaultCommand::Disconnect { count, matcher } => sim.faults.disconnect_next(count, matcher),
        FaultCommand::Latency { ms, matcher } => match matcher {
            Some(m) => sim.faults.add_latency(m, Duration::from_millis(ms)),
            None => sim.faults.set_latency(Duration::from_millis(ms)),
        },
        FaultCommand::ExpireWatches { count } => sim.faults.expire_next_watches(count),
        FaultCommand::DropWatches => sim.store.drop_watches(),
        FaultCommand::Compact => sim.store.compact(),
        FaultCommand::Clear => sim.faults.clear(),
    }
}
