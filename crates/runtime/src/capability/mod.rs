//! The host capabilities: the `wasm-ccm:provider` imports a driver may use, each one unit.
//!
//! Every capability has the same shape, in `capability/<name>.rs` or `capability/<name>/`:
//!
//! - its `Config` (what the operator set for it, per driver) and a constructor of its
//!   per-driver state from it, kept in [`DriverHost`];
//! - its per-call state, a field of [`CallState`], reset by [`CallState::begin`];
//! - a host view (a small struct borrowing just what it needs) that implements the bindgen
//!   `Host` trait of its interface, and a view trait (`HttpView`, `LogView`, `ClusterStateView`)
//!   through which a store's data hands it out, as wasmtime's WASI asks for `WasiView`: the
//!   capability knows neither the store's type (`crate::state`) nor the driver's options;
//! - its `add_to_linker`, generic over the store's data;
//! - its unit tests.
//!
//! [`ALL`] is the one list that names them: [`add_to_linker`] links what it lists, and
//! [`crate::surface`] derives the imports it accepts and its hints from it. Only this file knows
//! every capability; the units depend on leaves (the model, the bindings, the egress policy) and
//! on `log` (every unit redacts with the driver's logger), never on this file.

pub(crate) mod cluster;
pub mod http;
pub mod log;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use wasmtime::component::{HasData, Linker};

use crate::bindings::types;
use crate::call::{CallScope, SharedNodes};
use crate::error::HostError;
use crate::model::types::ProviderInfo;

/// One host capability, as the linker and the import checks see it.
pub(crate) struct CapabilityInfo {
    /// Its interface in `wasm-ccm:provider`, e.g. `http`.
    pub name: &'static str,
    /// Interfaces outside `wasm-ccm:provider` that this capability stands in for, each a name
    /// prefix (`wasi:http/`) with the hint a driver importing it gets: a driver built with the
    /// standard interface is refused with a pointer to the capability.
    pub stands_in_for: &'static [(&'static str, &'static str)],
    /// Which unit's `add_to_linker` links it.
    link: Link,
}

/// The unit a [`CapabilityInfo`] links (a function pointer cannot be generic over the store).
#[derive(Clone, Copy)]
enum Link {
    Http,
    Log,
    Cluster,
}

/// Every capability, in the order the hints name them.
pub(crate) const ALL: &[CapabilityInfo] = &[
    CapabilityInfo {
        name: "http",
        stands_in_for: &[(
            "wasi:http/",
            "drivers reach the network only through the wasm-ccm:provider/http import (the SDKs' HTTP client), never wasi:http",
        )],
        link: Link::Http,
    },
    CapabilityInfo {
        name: "log",
        stands_in_for: &[],
        link: Link::Log,
    },
    CapabilityInfo {
        name: "cluster",
        stands_in_for: &[],
        link: Link::Cluster,
    },
];

/// Interfaces of `wasm-ccm:provider` that hold only types other interfaces use: a driver may
/// import them, and they grant nothing.
pub(crate) const TYPE_INTERFACES: &[&str] = &["types"];

/// Whether `iface` (an interface name of `wasm-ccm:provider`) is one the host provides.
pub(crate) fn provides(iface: &str) -> bool {
    TYPE_INTERFACES.contains(&iface) || ALL.iter().any(|c| c.name == iface)
}

/// The capabilities' names as prose: `http, log and cluster`.
pub(crate) fn names_in_prose() -> String {
    match ALL.split_last() {
        None => String::new(),
        Some((last, [])) => last.name.to_string(),
        Some((last, rest)) => {
            let rest: Vec<&str> = rest.iter().map(|c| c.name).collect();
            format!("{} and {}", rest.join(", "), last.name)
        }
    }
}

/// The capabilities' names as a WIT path set: `{http,log,cluster}`.
pub(crate) fn names_as_set() -> String {
    let names: Vec<&str> = ALL.iter().map(|c| c.name).collect();
    format!("{{{}}}", names.join(","))
}

/// The hint for an import one of the capabilities stands in for, if any.
pub(crate) fn stand_in_hint(import: &str) -> Option<&'static str> {
    ALL.iter()
        .flat_map(|c| c.stands_in_for)
        .find(|(prefix, _)| import.starts_with(prefix))
        .map(|(_, hint)| *hint)
}

/// The type-only interfaces' host side: they have no functions.
struct NoFunctions;

impl types::Host for NoFunctions {}

impl HasData for NoFunctions {
    type Data<'a> = NoFunctions;
}

/// Links the type-only interfaces and every capability in [`ALL`] for a store whose data gives
/// each capability its view.
pub(crate) fn add_to_linker<T>(linker: &mut Linker<T>) -> wasmtime::Result<()>
where
    T: http::HttpView + log::LogView + cluster::ClusterStateView + Send + 'static,
{
    // `types` has no functions, but a component importing it still needs the instance defined.
    types::add_to_linker::<T, NoFunctions>(linker, |_| NoFunctions)?;
    for capability in ALL {
        match capability.link {
            Link::Http => http::add_to_linker(linker)?,
            Link::Log => log::add_to_linker(linker)?,
            Link::Cluster => cluster::add_to_linker(linker)?,
        }
    }
    Ok(())
}

/// What all instances of one driver share: its name, the capabilities' per-driver state and the
/// lowered-bytes counter.
pub(crate) struct DriverHost {
    /// The driver's name (from `info`), or its origin before `info` ran.
    pub name: String,
    /// The `log` capability's logger; also the redactor of every driver text the host quotes.
    pub logger: Arc<log::DriverLogger>,
    /// The `http` capability's client and egress policy.
    pub http: Arc<http::HttpCapability>,
    /// Bytes copied into the driver's instances, arguments and imports' answers
    /// ([`crate::lowered`]).
    pub lowered: AtomicU64,
}

impl DriverHost {
    /// The state of a loaded driver: the egress the operator granted (or the driver's declared
    /// defaults), the vault of its declared credentials, and a logger that knows the secrets of
    /// `env`, of its cloud config and of the vault.
    pub(crate) fn new(
        info: &ProviderInfo,
        configs: (&http::Config, &log::Config),
        cloud_config: &[u8],
        env: &[(String, String)],
        vault: Option<Arc<crate::secrets::Vault>>,
    ) -> Result<Self, HostError> {
        let (http_config, log_config) = configs;
        let logger = log::logger(&info.name, log_config, env, cloud_config);
        // Every value the host holds, and each of its encodings, is redacted from whatever the
        // host writes (a backstop: the guest never holds them).
        if let Some(vault) = &vault {
            vault.teach_redactor(&logger);
        }
        let http = http::client(&info.name, &info.default_egress, http_config)?.with_vault(vault);
        // A secret whose origin the egress grants do not cover can never be sent: say so at
        // load, where the operator reads it, rather than as a `denied` per request.
        for (name, origin) in http.vault().iter().flat_map(|v| v.origins()) {
            let covered = url::Url::parse(origin)
                .ok()
                .is_some_and(|u| http.policy().check_url(&u).is_ok());
            if !covered {
                tracing::warn!(
                    driver = %info.name,
                    secret = name,
                    origin,
                    "the secret's origin is not covered by the driver's egress grants, so no request can carry it; add --allow-egress {origin} (or fix --secret-origin)"
                );
            }
        }
        Ok(DriverHost {
            name: info.name.clone(),
            logger: Arc::new(logger),
            http: Arc::new(http),
            lowered: AtomicU64::new(0),
        })
    }

    /// The state of a driver whose `info` has not run yet: no egress at all, and log lines
    /// tagged with where the driver came from.
    pub(crate) fn bare(
        origin: &str,
        configs: (&http::Config, &log::Config),
    ) -> Result<Self, HostError> {
        let (http_config, log_config) = configs;
        Ok(DriverHost {
            name: origin.to_string(),
            logger: Arc::new(log::bare(origin, log_config)),
            http: Arc::new(http::bare(http_config)?),
            lowered: AtomicU64::new(0),
        })
    }
}

/// Per-call state of the capabilities, replaced when a call begins.
pub(crate) struct CallState {
    /// When the call must end; the epoch callback interrupts the guest after it.
    pub deadline: Instant,
    /// The `http` capability's record of the call's requests.
    pub http: http::HttpCall,
    /// The `cluster` capability's view, node set and events.
    pub cluster: cluster::ClusterCall,
}

impl CallState {
    /// The state of a call for `scope` ending at `deadline`; `nodes` is the node set of a
    /// `load-balancer.ensure` or `update`.
    pub(crate) fn begin(deadline: Instant, scope: &CallScope, nodes: Option<SharedNodes>) -> Self {
        CallState {
            deadline,
            http: http::HttpCall::default(),
            cluster: cluster::ClusterCall::new(scope.cluster.clone(), nodes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The imports of the `host` world in `wit/provider.wit` (every driver world includes it).
    fn world_imports() -> Vec<String> {
        let wit = include_str!("../../../../wit/provider.wit");
        let Some(start) = wit.find("world host {") else {
            panic!("wit/provider.wit has no world host");
        };
        let world = &wit[start..];
        let end = world.find('}').unwrap_or(world.len());
        world[..end]
            .lines()
            .filter_map(|l| l.trim().strip_prefix("import "))
            .map(|l| l.trim_end_matches(';').trim().to_string())
            .collect()
    }

    #[test]
    fn every_import_of_the_host_world_is_a_capability() {
        let imports = world_imports();
        assert!(!imports.is_empty(), "found no imports in the world");
        for import in &imports {
            assert!(
                provides(import),
                "the world imports {import}, no capability serves it"
            );
        }
        for capability in ALL {
            assert!(
                imports.iter().any(|i| i == capability.name),
                "capability {} is not an import of the world",
                capability.name
            );
        }
    }

    #[test]
    fn names_are_unique_and_spelled_for_hints() {
        let mut names: Vec<&str> = ALL.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
        assert_eq!(names_in_prose(), "http, log and cluster");
        assert_eq!(names_as_set(), "{http,log,cluster}");
    }

    #[test]
    fn wasi_http_points_at_the_http_capability() {
        let hint = stand_in_hint("wasi:http/outgoing-handler@0.2.0").unwrap_or_default();
        assert!(hint.contains("wasm-ccm:provider/http"), "{hint}");
        assert_eq!(stand_in_hint("wasi:cli/stdout@0.2.3"), None);
    }

    #[test]
    fn the_capabilities_link_into_one_linker() {
        let engine = wasmtime::Engine::default();
        let mut linker = Linker::<crate::state::InstanceState>::new(&engine);
        add_to_linker(&mut linker).expect("every capability links once, without clashes");
    }
}
