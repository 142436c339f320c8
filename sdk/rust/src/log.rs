//! Structured logging into the host's log (the `log` import).
//!
//! The host tags every line with the driver, the function and the object, rate-limits it and
//! replaces every value passed to [`redact`] — so log freely, but register secrets first.

use crate::bindings::wasm_ccm::provider::log as imports;
use crate::types::Level;

/// Writes one line at `level` with key/value `fields`.
pub fn log(level: Level, message: &str, fields: &[(&str, &str)]) {
    let fields: Vec<(String, String)> = fields
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    imports::log(level, message, &fields);
}

/// Logs at trace level.
pub fn trace(message: &str, fields: &[(&str, &str)]) {
    log(Level::Trace, message, fields);
}

/// Logs at debug level.
pub fn debug(message: &str, fields: &[(&str, &str)]) {
    log(Level::Debug, message, fields);
}

/// Logs at info level.
pub fn info(message: &str, fields: &[(&str, &str)]) {
    log(Level::Info, message, fields);
}

/// Logs at warn level.
pub fn warn(message: &str, fields: &[(&str, &str)]) {
    log(Level::Warn, message, fields);
}

/// Logs at error level.
pub fn error(message: &str, fields: &[(&str, &str)]) {
    log(Level::Error, message, fields);
}

/// Marks `secret` (a token, a password) as secret: the host replaces it in every later log line
/// of this driver, including stdout/stderr, and in its errors, events and answers (see
/// `wit/README.md`). Call it in `init` for every credential read from the
/// configuration. Empty values are ignored, since redacting "" would be meaningless.
pub fn redact(secret: &str) {
    if !secret.is_empty() {
        imports::redact(secret);
    }
}
