//! The drivers `wasm-ccm run` starts: a DriverSet file (`--drivers-config FILE`, several
//! drivers in one process) or the one-driver flags (`--driver`, `--cloud-provider`, …), which
//! are a DriverSet of one ([`DriverSet::from_flags`]): the default for nodes and class-less
//! Services, with upstream's names and finalizer. Both are loaded and started by one path
//! (`run/`).
//!
//! The file is a versioned YAML document (`apiVersion: wasm-ccm.io/v1alpha1`, `kind:
//! DriverSet`), mounted from a ConfigMap like Kubernetes' own multi-provider files (the
//! kube-apiserver's `EncryptionConfiguration`, the kubelet's credential providers): each driver
//! needs nested settings (egress list, node selector, classes, limits) that repeatable flags
//! could only express with a private mini-syntax. It is read once at start; changing it needs a
//! restart (roll the Deployment on the ConfigMap's hash). Each file driver's bytes keep their
//! own hot reload.
//!
//! Everything checkable is checked before the cluster is contacted: the document's shape (an
//! unknown field is an error naming it), the routing table's rules (`Routing::new`: unique
//! names and schemes, one default per role, classes the apiserver accepts, exclusive node
//! selectors), every file, and what each driver declares: its `info` (asked of a throw-away
//! instance, without `init` and without egress) must name the scheme the file gives it, it must
//! export what its roles call, and no driver may declare an environment prefix that is a prefix
//! of another's (it would receive the other's secrets). The same is checked again once each is
//! loaded.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;
use wasm_ccm_controllers::{DriverRoles, LoadBalancerClaim, NodeClaim, Routing};
use wasm_ccm_runtime::Driver;
use wasm_ccm_runtime::Exports;
use wasm_ccm_runtime::types::ProviderInfo;

use crate::preflight::{PathFlag, readable_files};
use crate::signing::VerifyArgs;
use crate::source::DriverSource;
use crate::units::{parse_duration, parse_size};

/// The only `apiVersion` this release reads.
pub const API_VERSION: &str = "wasm-ccm.io/v1alpha1";
/// The document's `kind`.
pub const KIND: &str = "DriverSet";

/// The file, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DriverSetFile {
    /// Must be [`API_VERSION`].
    pub api_version: String,
    /// Must be [`KIND`].
    pub kind: String,
    /// The drivers, in the order their events and checks are reported.
    pub drivers: Vec<DriverConfig>,
}

/// One driver of the file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DriverConfig {
    /// A DNS label of at most 40 characters, unique: metric label, event prefix, finalizer.
    pub name: String,
    /// A `.wasm` path (watched and hot-reloaded) or `oci://REGISTRY/REPO@sha256:DIGEST`.
    pub source: String,
    /// Only a driver with this sha256 may run, at start or on reload (as `--driver-sha256`).
    #[serde(default)]
    pub sha256: Option<String>,
    /// The provider-ID scheme of its nodes; must equal its `info`'s.
    #[serde(rename = "providerIDScheme")]
    pub provider_id_scheme: String,
    /// The configuration file handed to its `init` (as `--cloud-config`).
    #[serde(default)]
    pub cloud_config: Option<PathBuf>,
    /// Egress grants (as `--allow-egress`); empty: what the driver declares.
    #[serde(default)]
    pub allow_egress: Vec<String>,
    /// Memory and time limits.
    #[serde(default)]
    pub limits: Limits,
    /// Which uninitialised nodes it claims.
    #[serde(default)]
    pub nodes: NodesConfig,
    /// Which Services it serves.
    #[serde(default)]
    pub load_balancer: LoadBalancerConfig,
    /// Whether it runs the route controller (at most one driver).
    #[serde(default)]
    pub routes: bool,
}

/// Per-driver limits; absent fields take `run`'s flags' defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Limits {
    /// Linear memory of one instance (`64Mi`).
    #[serde(default)]
    pub memory: Option<String>,
    /// Deadline of one call (`30s`).
    #[serde(default)]
    pub call_timeout: Option<String>,
    /// Deadline of `init` (`60s`).
    #[serde(default)]
    pub init_timeout: Option<String>,
    /// Cloud requests a second over all the driver's instances (its request budget; `0` paces
    /// nothing but still pauses on the cloud's 429). Absent: `--cloud-request-rate`, else none.
    #[serde(default)]
    pub cloud_request_rate: Option<f64>,
    /// The budget's burst (default: the rate rounded up, at least 1); needs `cloudRequestRate`.
    #[serde(default)]
    pub cloud_request_burst: Option<u32>,
}

/// `nodes:` of a driver.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodesConfig {
    /// Uninitialised nodes no selector matches go to this driver.
    #[serde(default)]
    pub default: bool,
    /// Uninitialised nodes whose labels match go to this driver (`matchLabels`,
    /// `matchExpressions` with In, NotIn, Exists, DoesNotExist).
    #[serde(default)]
    pub selector: Option<LabelSelector>,
}

/// `loadBalancer:` of a driver.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LoadBalancerConfig {
    /// Services without `spec.loadBalancerClass` go to this driver.
    #[serde(default)]
    pub default: bool,
    /// These `spec.loadBalancerClass` values go to this driver.
    #[serde(default)]
    pub classes: Vec<String>,
}

/// A checked set: the routing table and, per driver in its order, what loading it needs.
#[derive(Debug)]
pub struct DriverSet {
    /// The routing table. The one-driver flags' names no scheme (the driver's own `info`
    /// declares it): see [`DriverSet::routing_with`].
    pub routing: Arc<Routing>,
    /// The drivers' load settings, in the table's order.
    pub drivers: Vec<DriverLoad>,
    /// Whether it is the one-driver flags' ([`DriverSet::from_flags`]), not a file's.
    flags: bool,
}

/// What loading one driver of the set needs.
#[derive(Debug)]
pub struct DriverLoad {
    /// The configured name (`--cloud-provider` for the one-driver flags).
    pub name: String,
    /// Where its bytes are.
    pub source: DriverSource,
    /// The pin, if any.
    pub sha256: Option<String>,
    /// Its `init` configuration file.
    pub cloud_config: Option<PathBuf>,
    /// Its egress grants, parsed (`--allow-egress`, or `allowEgress` of the file).
    pub allow_egress: Vec<wasm_ccm_runtime::Grant>,
    /// Deadline of a call.
    pub call_timeout: Duration,
    /// Deadline of `init`.
    pub init_timeout: Duration,
    /// Memory of one instance, in bytes.
    pub memory_limit: usize,
    /// Its cloud request budget (`limits.cloudRequestRate`, else `--cloud-request-rate`'s);
    /// `None`: no budget.
    pub cloud_requests: Option<CloudRequestLimit>,
}

/// A driver's cloud request budget as the operator sets it: a rate over all its instances and
/// a burst.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CloudRequestLimit {
    /// Requests a second; 0: no pacing, but the cloud's 429 still pauses the driver.
    pub rate: f64,
    /// Requests that may leave at once; `None`: the rate rounded up, at least 1.
    pub burst: Option<u32>,
}

impl CloudRequestLimit {
    /// A checked limit: the rate a finite number, not negative.
    pub fn new(rate: f64, burst: Option<u32>) -> Result<Self, String> {
        if !rate.is_finite() || rate < 0.0 {
            return Err(format!(
                "{rate} is not a request rate; give requests a second, 0 or more (0: no pacing)"
            ));
        }
        if burst == Some(0) {
            return Err("a burst of 0 would send nothing; give 1 or more".to_string());
        }
        Ok(CloudRequestLimit { rate, burst })
    }

    /// The driver's budget, made once per driver (its reloads share it through its options).
    pub fn budget(self) -> Arc<wasm_ccm_runtime::http::budget::RequestBudget> {
        // A rate above u32::MAX requests a second saturates the default burst: no limit anyway.
        let burst = self.burst.unwrap_or(self.rate.ceil().max(1.0) as u32);
        Arc::new(wasm_ccm_runtime::http::budget::RequestBudget::new(
            self.rate, burst,
        ))
    }
}

/// The defaults a driver's absent limits take (the `run` flags').
#[derive(Debug, Clone, Copy)]
pub struct LimitDefaults {
    /// `--call-timeout`.
    pub call_timeout: Duration,
    /// `--init-timeout`.
    pub init_timeout: Duration,
    /// `--memory-limit`.
    pub memory_limit: usize,
    /// `--cloud-request-rate` and `--cloud-request-burst`; `None`: no budget.
    pub cloud_requests: Option<CloudRequestLimit>,
}

/// Reads and checks the file at `path` (shape, routing rules, every file it names); nothing
/// is contacted.
pub fn read(path: &Path, defaults: LimitDefaults) -> anyhow::Result<DriverSet> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "cannot read --drivers-config {}; give the path of the mounted DriverSet file",
            path.display()
        )
    })?;
    parse(&text, defaults).with_context(|| format!("--drivers-config {}", path.display()))
}

/// [`read`] of the file's text.
pub fn parse(text: &str, defaults: LimitDefaults) -> anyhow::Result<DriverSet> {
    let file: DriverSetFile = serde_norway::from_str(text).map_err(|e| {
        anyhow::anyhow!("is not a DriverSet document: {e}; see deploy/README.md for the format")
    })?;
    if file.api_version != API_VERSION || file.kind != KIND {
        bail!(
            "has apiVersion {:?} and kind {:?}; this release reads apiVersion {API_VERSION:?}, kind {KIND:?}",
            file.api_version,
            file.kind
        );
    }
    let mut roles = Vec::with_capacity(file.drivers.len());
    let mut drivers = Vec::with_capacity(file.drivers.len());
    for d in file.drivers {
        let at = |field: &str| format!("driver {:?}: {field}", d.name);
        let source = DriverSource::parse(&d.source).with_context(|| at("source"))?;
        let sha256 = d
            .sha256
            .as_deref()
            .map(crate::source::parse_sha256)
            .transpose()
            .map_err(|e| anyhow::anyhow!("{}: {e}", at("sha256")))?;
        let duration = |value: &Option<String>, default: Duration, field: &str| {
            value
                .as_deref()
                .map_or(Ok(default), parse_duration)
                .map_err(|e| anyhow::anyhow!("{}: {e}", at(field)))
        };
        let call_timeout = duration(
            &d.limits.call_timeout,
            defaults.call_timeout,
            "limits.callTimeout",
        )?;
        let init_timeout = duration(
            &d.limits.init_timeout,
            defaults.init_timeout,
            "limits.initTimeout",
        )?;
        let memory_limit = d
            .limits
            .memory
            .as_deref()
            .map_or(Ok(defaults.memory_limit), parse_size)
            .map_err(|e| anyhow::anyhow!("{}: {e}", at("limits.memory")))?;
        let cloud_requests = match (d.limits.cloud_request_rate, d.limits.cloud_request_burst) {
            (None, None) => defaults.cloud_requests,
            (None, Some(_)) => bail!(
                "{}: cloudRequestBurst needs cloudRequestRate (requests a second)",
                at("limits")
            ),
            (Some(rate), burst) => Some(
                CloudRequestLimit::new(rate, burst)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", at("limits.cloudRequestRate")))?,
            ),
        };
        let allow_egress = wasm_ccm_runtime::parse_grants(&d.allow_egress)
            .map_err(|e| anyhow::anyhow!("{}: {e}", at("allowEgress")))?;
        roles.push(DriverRoles {
            name: d.name.clone(),
            label: Some(d.name.clone()),
            provider_id_scheme: d.provider_id_scheme,
            nodes: NodeClaim {
                default: d.nodes.default,
                selector: d.nodes.selector,
            },
            load_balancer: LoadBalancerClaim {
                default: d.load_balancer.default,
                classes: d.load_balancer.classes,
            },
            routes: d.routes,
        });
        drivers.push(DriverLoad {
            name: d.name,
            source,
            sha256,
            cloud_config: d.cloud_config,
            allow_egress,
            call_timeout,
            init_timeout,
            memory_limit,
            cloud_requests,
        });
    }
    let routing = Routing::new(roles).map_err(anyhow::Error::msg)?;
    Ok(DriverSet {
        routing,
        drivers,
        flags: false,
    })
}

impl DriverSet {
    /// The one-driver flags as a set of one: `provider` (`--cloud-provider`, which must be the
    /// driver's name) loaded from `load`, the default for nodes, class-less Services and
    /// routes, with upstream's names and finalizer ([`DriverRoles::alone`]). Its scheme is
    /// the one the driver declares.
    pub fn from_flags(provider: &str, load: DriverLoad) -> DriverSet {
        DriverSet {
            routing: Routing::alone(provider, ""),
            drivers: vec![load],
            flags: true,
        }
    }

    /// Whether the set is the one-driver flags (errors name the flags, not the file).
    pub fn is_flags(&self) -> bool {
        self.flags
    }

    /// The routing table once every driver declared its scheme (`schemes`, in order): the
    /// file's as read (each scheme was checked against the file by [`check_declared`]), or
    /// the one-driver flags' with the scheme its driver declares.
    pub fn routing_with(&self, schemes: &[String]) -> Arc<Routing> {
        match (self.is_flags(), schemes) {
            (true, [scheme]) => Routing::alone(&self.drivers[0].name, scheme),
            _ => Arc::clone(&self.routing),
        }
    }

    /// Checks that every file the set names is readable (drivers, cloud configs, signatures
    /// when a policy is configured). The one-driver flags' are checked with the other flags
    /// (`RunArgs::preflight`), under the flags' names.
    pub fn preflight(&self, verify: &VerifyArgs) -> anyhow::Result<()> {
        if self.is_flags() {
            return Ok(());
        }
        for d in &self.drivers {
            let driver_file = match &d.source {
                DriverSource::File(p) => Some(p.as_path()),
                DriverSource::Oci(_) => None,
            };
            readable_files(&[
                PathFlag {
                    flag: "source",
                    path: driver_file,
                    what: "the driver's .wasm",
                    hint: "give the path of the driver component (a mounted ConfigMap key) or an oci:// reference",
                },
                PathFlag {
                    flag: "cloudConfig",
                    path: d.cloud_config.as_deref(),
                    what: "the driver's configuration",
                    hint: "give the path of the mounted Secret's key, or leave cloudConfig out",
                },
            ])
            .with_context(|| format!("--drivers-config: driver {:?}", d.name))?;
            verify
                .preflight(&d.source)
                .with_context(|| format!("--drivers-config: driver {:?}", d.name))?;
        }
        Ok(())
    }
}

/// What a loaded driver of the set must satisfy against its roles and the drivers before it:
/// the scheme the file names, the exports its roles call, environment prefixes that cannot
/// capture another driver's variables ([`check_declared`] on what the loaded driver declares;
/// `run` checks the same before the cluster is contacted, and again after `init`, since a
/// driver answers `info` anew in each instance).
pub fn check_loaded(
    roles: &DriverRoles,
    driver: &Driver,
    earlier: &[(String, Arc<Driver>)],
) -> anyhow::Result<()> {
    let earlier: Vec<(String, ProviderInfo)> = earlier
        .iter()
        .map(|(name, d)| (name.clone(), d.info().clone()))
        .collect();
    check_declared(
        roles,
        driver.info(),
        &driver.compiled().surface.exports,
        &earlier,
    )
}

/// [`check_loaded`] on what a driver declares (its `info`, from a throw-away instance without
/// `init`, and its compiled exports), so a DriverSet that does not match its drivers is refused
/// before the cluster is contacted.
pub fn check_declared(
    roles: &DriverRoles,
    info: &ProviderInfo,
    exports: &Exports,
    earlier: &[(String, ProviderInfo)],
) -> anyhow::Result<()> {
    if info.provider_id_scheme != roles.provider_id_scheme {
        bail!(
            "driver {:?} ({}) declares provider-ID scheme {:?}, not the providerIDScheme {:?} the DriverSet gives it; correct providerIDScheme or the source",
            roles.name,
            info.name,
            info.provider_id_scheme,
            roles.provider_id_scheme
        );
    }
    let needs = [
        (
            roles.load_balancer.default || !roles.load_balancer.classes.is_empty(),
            exports.load_balancer,
            "load-balancer",
            "loadBalancer",
        ),
        (roles.routes, exports.routes, "routes", "routes"),
        (
            roles.nodes.default || roles.nodes.selector.is_some(),
            exports.instances,
            "instances",
            "nodes",
        ),
    ];
    for (wanted, exported, interface, field) in needs {
        if wanted && !exported {
            bail!(
                "driver {:?} ({}) exports no `{interface}` interface, but the DriverSet gives it `{field}`; remove that role or use a driver that implements it",
                roles.name,
                info.name
            );
        }
    }
    for (other, theirs_info) in earlier {
        for mine in &info.env_prefixes {
            for theirs in &theirs_info.env_prefixes {
                if mine.starts_with(theirs.as_str()) || theirs.starts_with(mine.as_str()) {
                    bail!(
                        "drivers {other:?} and {:?} declare the environment prefixes {theirs:?} and {mine:?}, one a prefix of the other: one driver would receive the other's variables (credentials); run them in separate processes",
                        roles.name
                    );
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
