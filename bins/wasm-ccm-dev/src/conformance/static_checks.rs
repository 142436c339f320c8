//! Checks made without running any guest code: what the file is, which contract it implements,
//! what it needs from the host, how big it is and how long it takes to compile.

use std::time::Duration;

use wasm_ccm_runtime::MAX_COMPONENT_BYTES;
use wasm_ccm_runtime::{Compiled, HostError, Runtime};

use super::level::Level;
use super::report::Checks;

/// A ConfigMap (and so the ConfigMap way of mounting a driver) holds at most this much.
pub(super) const CONFIGMAP_LIMIT: usize = 1 << 20;

/// Runs the static checks; returns the compiled driver when it can be loaded at all.
/// `runtime` must compile without its cache so the compile time is real.
pub(super) async fn run(
    runtime: &Runtime,
    origin: &str,
    bytes: Vec<u8>,
    level: Level,
    max_compile_time: Duration,
    checks: &mut Checks,
) -> Option<Compiled> {
    let size = bytes.len();
    if size > MAX_COMPONENT_BYTES {
        checks.check(
            "static/size",
            None,
            Err(format!(
                "{size} bytes, more than the {MAX_COMPONENT_BYTES} a driver may have; build in release mode with opt-level \"s\", LTO and strip"
            )),
        );
        return None;
    }
    checks.check(
        "static/size",
        None,
        Ok(if size <= CONFIGMAP_LIMIT {
            format!("{size} bytes; fits a ConfigMap")
        } else {
            format!("{size} bytes; too big for a ConfigMap (1 MiB), ship it as an OCI artifact")
        }),
    );
    if let Err(e) = wasm_ccm_runtime::check_bytes(origin, &bytes) {
        checks.check("static/component", None, Err(e.to_string()));
        return None;
    }
    let compiled = match runtime.compile(origin, bytes).await {
        Ok(c) => c,
        Err(e) => {
            let id = match &e {
                HostError::UnsupportedWitVersion { .. } => "static/wit-version",
                HostError::UnsupportedImport { .. } => "static/imports",
                HostError::NotADriver { .. } => "static/exports",
                _ => "static/component",
            };
            checks.check(id, None, Err(e.to_string()));
            return None;
        }
    };
    checks.check(
        "static/component",
        None,
        Ok("a WebAssembly component that compiles".into()),
    );
    checks.check(
        "static/wit-version",
        None,
        Ok(format!(
            "wasm-ccm:provider@{} (this host supports {})",
            compiled.surface.wit_version,
            wasm_ccm_runtime::SUPPORTED_VERSIONS.join(", ")
        )),
    );
    let imports = match runtime.link(&compiled) {
        Ok(()) => Ok(format!(
            "imports only what the host provides: {}",
            compiled.surface.imports.join(", ")
        )),
        Err(e) => Err(e.to_string()),
    };
    let linked = imports.is_ok();
    checks.check("static/imports", None, imports);
    let t = compiled.load_time;
    checks.check(
        "static/compile-time",
        None,
        if t <= max_compile_time {
            Ok(format!("compiled in {} ms", t.as_millis()))
        } else {
            Err(format!(
                "compiling took {} ms, more than the {} ms allowed (--max-compile-time): the host compiles at start and on every reload; make the component smaller",
                t.as_millis(),
                max_compile_time.as_millis()
            ))
        },
    );
    let exports = compiled.surface.exports;
    let missing: Vec<&str> = level
        .required()
        .iter()
        .copied()
        .filter(|i| !exports.names().contains(i))
        .collect();
    checks.check(
        "static/exports",
        None,
        if missing.is_empty() {
            Ok(format!("exports {}", exports.names().join(", ")))
        } else {
            Err(format!(
                "level {} needs {}, but the driver exports only {}; implement them or check with --level core",
                level.name(),
                missing.join(", "),
                exports.names().join(", ")
            ))
        },
    );
    (linked && missing.is_empty()).then_some(compiled)
}
