//! What a component is, before any of its code runs: component or not, which wasm-ccm
//! interfaces it exports, at which WIT version, and whether the host can satisfy its imports.

use wasmtime::Engine;
use wasmtime::component::Component;

use crate::capability;
use crate::error::HostError;

/// The version of the driver contract this host was built with: the package version of
/// `wit/provider.wit` (`package wasm-ccm:provider@X.Y.Z;`), read by the build script, so it
/// cannot drift from the WIT the bindings are generated from. Which versions a driver may
/// implement to be loaded is [`SUPPORTED_VERSIONS`].
pub const CONTRACT_VERSION: &str = env!("WASM_CCM_CONTRACT_VERSION");

/// The WIT package every driver implements.
pub const PACKAGE: &str = "wasm-ccm:provider";

/// WIT versions this host supports, as `major.minor` (minor matters while the major is 0).
/// `0.2` is the first released contract (`wit/README.md`, "Versioning"): every later host keeps
/// loading it for as long as that section promises, which `tests/golden/` proves.
pub const SUPPORTED_VERSIONS: &[&str] = &["0.2"];

/// Development versions that were never released, with what their drivers need instead. They
/// changed in place while nothing was released, so no host loads them; the message says how to
/// rebuild rather than pointing at a release that does not exist.
const UNRELEASED: &[(&str, &str)] = &[(
    "0.1",
    "0.1 was the unreleased development contract and no release loads it: rebuild the driver against wasm-ccm:provider@0.2.0 or later (the SDKs build against the latest 0.2.z); a driver built from the last 0.1 sources needs no code change, 0.2.0 is that contract frozen",
)];

/// What to do about a component that implements `found`, which this host does not support.
fn advice(found: &str) -> String {
    UNRELEASED
        .iter()
        .find(|(v, _)| minor_key(found).as_deref() == Some(*v))
        .map(|(_, advice)| advice.to_string())
        .unwrap_or_else(|| {
            format!(
                "use a driver built for one of those, or a wasm-ccm release that supports {found}"
            )
        })
}

/// Largest component accepted: Python and JS drivers are tens of MiB (BENCHMARKS.md, "Drivers in
/// other languages").
pub const MAX_COMPONENT_BYTES: usize = 64 << 20;

/// The capability interfaces a driver may export besides `provider`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Exports {
    /// `instances`: what the node controllers need.
    pub instances: bool,
    /// `load-balancer`: what the service controller needs.
    pub load_balancer: bool,
    /// `routes`: what the route controller needs.
    pub routes: bool,
}

impl Exports {
    /// The exported interface names, e.g. `["provider", "instances"]`.
    pub fn names(&self) -> Vec<&'static str> {
        let mut v = vec!["provider"];
        if self.instances {
            v.push("instances");
        }
        if self.load_balancer {
            v.push("load-balancer");
        }
        if self.routes {
            v.push("routes");
        }
        v
    }
}

/// What a component offers and needs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Surface {
    /// The `wasm-ccm:provider` version it implements, e.g. `0.1.0`.
    pub wit_version: String,
    /// The capability interfaces it exports.
    pub exports: Exports,
    /// Whether it exports `environment` (contract 0.2.1): its plain variables, so the host can
    /// hand `init` an allow-list of the environment (`crate::plain_env`).
    pub environment: bool,
    /// Whether it exports `instance-listing` (contract 0.2.2): the cluster's instances in one
    /// paged listing, so the host asks the cloud once per pass instead of once per node.
    pub instance_listing: bool,
    /// Every import name, e.g. `wasm-ccm:provider/http@0.2.0`, `wasi:cli/stdout@0.2.6`.
    pub imports: Vec<String>,
}

/// Refuses anything that is not a WebAssembly component, with a hint at what it is instead.
pub fn check_bytes(origin: &str, bytes: &[u8]) -> Result<(), HostError> {
    let not = |detail: &str| HostError::NotAComponent {
        origin: origin.to_string(),
        detail: detail.to_string(),
    };
    if bytes.len() > MAX_COMPONENT_BYTES {
        return Err(HostError::TooLarge {
            origin: origin.to_string(),
            size: bytes.len(),
            limit: MAX_COMPONENT_BYTES,
        });
    }
    if Engine::detect_precompiled(bytes).is_some() {
        return Err(not(
            "it is a precompiled .cwasm artifact; give the host the portable .wasm, it compiles and caches it itself",
        ));
    }
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        let start = String::from_utf8_lossy(&bytes[..bytes.len().min(16)]).into_owned();
        return Err(not(&format!(
            "it does not start with the WebAssembly magic bytes (starts with {start:?}); was an error page or a text file saved in its place?"
        )));
    }
    match bytes[4..8] {
        [0x0d, 0x00, 0x01, 0x00] => Ok(()),
        [0x01, 0x00, 0x00, 0x00] => Err(not(
            "it is a core WebAssembly module; build the driver for the wasm32-wasip2 target (cargo build --target wasm32-wasip2) or wrap it with `wasm-tools component new`",
        )),
        _ => Err(not("it has an unknown WebAssembly version or layer")),
    }
}

/// Reads the exports and imports of `component` and checks them against what this host supports.
pub(crate) fn inspect(
    origin: &str,
    engine: &Engine,
    component: &Component,
) -> Result<Surface, HostError> {
    let ty = component.component_type();
    let mut exports = Exports::default();
    let mut has_provider = false;
    let mut environment = false;
    let mut instance_listing = false;
    let mut versions: Vec<String> = Vec::new();
    let mut export_names = Vec::new();
    for (name, _) in ty.exports(engine) {
        export_names.push(name.to_string());
        let Some((iface, version)) = split_interface(name) else {
            continue;
        };
        if !versions.contains(&version.to_string()) {
            versions.push(version.to_string());
        }
        match iface {
            "provider" => has_provider = true,
            "environment" => environment = true,
            "instance-listing" => instance_listing = true,
            "instances" => exports.instances = true,
            "load-balancer" => exports.load_balancer = true,
            "routes" => exports.routes = true,
            _ => {}
        }
    }
    let supported = SUPPORTED_VERSIONS
        .iter()
        .map(|v| format!("{v}.x"))
        .collect::<Vec<_>>()
        .join(", ");
    for v in &versions {
        if !is_supported(v) {
            return Err(HostError::UnsupportedWitVersion {
                origin: origin.into(),
                found: v.clone(),
                supported,
                advice: advice(v),
            });
        }
    }
    if versions.len() > 1 {
        return Err(HostError::UnsupportedWitVersion {
            origin: origin.into(),
            found: versions.join(" and "),
            supported: format!("one version per driver, from {supported}"),
            advice: "build every interface of the driver from one wit/ package".into(),
        });
    }
    if !has_provider {
        return Err(HostError::NotADriver {
            origin: origin.into(),
            exports: if export_names.is_empty() {
                "none".into()
            } else {
                export_names.join(", ")
            },
        });
    }
    let imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
    for import in &imports {
        check_import(origin, import)?;
    }
    Ok(Surface {
        wit_version: versions.pop().unwrap_or_default(),
        exports,
        environment,
        instance_listing,
        imports,
    })
}

/// `wasm-ccm:provider/instances@0.2.0` → `("instances", "0.2.0")`.
fn split_interface(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix(PACKAGE)?.strip_prefix('/')?;
    let (iface, version) = rest.split_once('@')?;
    Some((iface, version))
}

/// The part of a version that decides compatibility: `major.minor` while the major is 0 (a
/// minor is breaking then), else the major. `None` for text that is not a version.
fn minor_key(version: &str) -> Option<String> {
    let mut parts = version.split('.');
    let (Some(major), Some(minor)) = (parts.next(), parts.next()) else {
        return None;
    };
    Some(if major == "0" {
        format!("{major}.{minor}")
    } else {
        major.to_string()
    })
}

/// When linking a driver failed: advice if it was built against a later release of a supported
/// version than this host implements (it may import something added since), else `None`.
pub(crate) fn link_advice(driver_version: &str) -> Option<String> {
    let parse = |v: &str| -> Option<(u64, u64, u64)> {
        let mut parts = v.split(['.', '-', '+']).map(str::parse::<u64>);
        Some((
            parts.next()?.ok()?,
            parts.next()?.ok()?,
            parts.next()?.ok()?,
        ))
    };
    let host = CONTRACT_VERSION;
    (parse(driver_version)? > parse(host)?).then(|| {
        format!(
            "the driver was built against wasm-ccm:provider@{driver_version} and this host implements {host}: upgrade wasm-ccm to a release that implements {driver_version}, or build the driver against {host} (wit/README.md, \"Versioning\")"
        )
    })
}

fn is_supported(version: &str) -> bool {
    minor_key(version).is_some_and(|key| SUPPORTED_VERSIONS.contains(&key.as_str()))
}

fn check_import(origin: &str, import: &str) -> Result<(), HostError> {
    let refuse = |hint: &str| HostError::UnsupportedImport {
        origin: origin.into(),
        import: import.into(),
        hint: hint.into(),
    };
    if let Some((iface, version)) = split_interface(import) {
        if !capability::provides(iface) {
            return Err(refuse(&format!(
                "wasm-ccm:provider offers the imports {}",
                capability::names_in_prose()
            )));
        }
        if !is_supported(version) {
            return Err(refuse(
                "the driver was built against a wasm-ccm:provider version this host does not support",
            ));
        }
        return Ok(());
    }
    if let Some(hint) = capability::stand_in_hint(import) {
        return Err(refuse(hint));
    }
    if import.starts_with("wasi:") && import.contains("@0.2.") {
        // Linked deny-by-default: filesystem, sockets and environment exist but grant nothing.
        return Ok(());
    }
    Err(refuse(&format!(
        "a driver may import wasm-ccm:provider/{} and WASI 0.2 interfaces (which are deny-by-default)",
        capability::names_as_set()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert!(is_supported("0.2.0"));
        // A later patch of the frozen minor only adds (wit/README.md, "Versioning").
        assert!(is_supported("0.2.7"));
        assert!(!is_supported("0.1.0"));
        assert!(!is_supported("0.3.0"));
        assert!(!is_supported("9.0.0"));
        assert!(!is_supported("garbage"));
    }

    #[test]
    fn a_driver_newer_than_the_host_is_told_to_upgrade_the_host() {
        assert!(link_advice("0.2.0").is_none());
        assert!(link_advice("0.1.9").is_none());
        assert!(link_advice("garbage").is_none());
        let a = link_advice("0.2.9").expect("advice");
        assert!(a.contains("upgrade wasm-ccm"), "{a}");
    }

    #[test]
    fn the_unreleased_development_version_is_told_to_rebuild() {
        let a = advice("0.1.0");
        assert!(
            a.contains("no release loads it") && a.contains("@0.2.0"),
            "{a}"
        );
        let a = advice("0.3.0");
        assert!(a.contains("a wasm-ccm release that supports 0.3.0"), "{a}");
    }

    #[test]
    fn byte_checks_say_what_the_file_is() {
        let core = b"\0asm\x01\0\0\0";
        let e = check_bytes("x.wasm", core).unwrap_err().to_string();
        assert!(e.contains("core WebAssembly module"), "{e}");
        let html = b"<!DOCTYPE html><html>";
        let e = check_bytes("x.wasm", html).unwrap_err().to_string();
        assert!(e.contains("error page"), "{e}");
        assert!(check_bytes("x.wasm", b"\0asm\x0d\0\x01\0").is_ok());
    }

    #[test]
    fn imports() {
        assert!(check_import("d", "wasm-ccm:provider/http@0.2.0").is_ok());
        assert!(check_import("d", "wasi:cli/stdout@0.2.3").is_ok());
        assert!(
            check_import("d", "wasi:http/outgoing-handler@0.2.0")
                .unwrap_err()
                .to_string()
                .contains("wasm-ccm:provider/http")
        );
        let e = check_import("d", "acme:secret/keys@1.0.0")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("wasm-ccm:provider/{http,log,cluster} and WASI 0.2"),
            "{e}"
        );
        let e = check_import("d", "wasm-ccm:provider/kubernetes@0.2.0")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("offers the imports http, log and cluster"),
            "{e}"
        );
        assert!(check_import("d", "wasm-ccm:provider/types@0.2.0").is_ok());
        assert!(check_import("d", "wasm-ccm:provider/cluster@0.2.0").is_ok());
        assert!(check_import("d", "wasm-ccm:provider/kubernetes@0.2.0").is_err());
    }
}
