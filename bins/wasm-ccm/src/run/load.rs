//! Loading the drivers of a set (one for the one-driver flags): each is read or pulled and its
//! signature verified, compiled and asked what it declares before the cluster is contacted;
//! then initialised with the cluster's facts, checked again, announced, and given its
//! credential rotation and hot reload.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::ObjectReference;
use wasm_ccm_controllers::Routing;
use wasm_ccm_manager::{DriverEntry, Loader, Refusal, ReloadOptions};
use wasm_ccm_runtime::types::{Context, ProviderInfo};
use wasm_ccm_runtime::{
    Compiled, Driver, DriverOptions, HostError, InitInput, InstanceMode, PoolOptions, Runtime,
};

use super::args::RunArgs;
use super::facts::ClusterFacts;
use crate::GlobalArgs;
use crate::driver_set::{DriverLoad, DriverSet, check_declared, check_loaded};
use crate::signing::VerifyArgs;
use crate::source::{DriverSource, fetch_verified};

/// A driver of the set read (or pulled), verified, compiled and asked what it declares; not
/// yet initialised.
pub(super) struct Checked {
    origin: String,
    compiled: Compiled,
    /// Its `init` configuration (the cloud config's bytes, read before the cluster is asked).
    config: Vec<u8>,
    /// Fetching and compiling, for the load metric.
    elapsed: Duration,
}

/// The drivers ready to start: the routing table with every scheme declared, and one entry
/// per driver in its order.
pub(super) struct Loaded {
    pub(super) routing: Arc<Routing>,
    pub(super) entries: Vec<DriverEntry>,
}

/// `what` about driver `d` of `set`: the one-driver flags' errors are the flags' own, a
/// DriverSet's name the driver (and, with `file`, the flag).
fn about<T>(
    set: &DriverSet,
    d: &DriverLoad,
    file: bool,
    r: anyhow::Result<T>,
) -> anyhow::Result<T> {
    match (set.is_flags(), file) {
        (true, _) => r,
        (false, true) => r.with_context(|| format!("--drivers-config: driver {:?}", d.name)),
        (false, false) => r.with_context(|| format!("driver {:?}", d.name)),
    }
}

/// Everything checkable of every driver before the cluster is contacted: its cloud config is
/// read, its bytes read or pulled (a signature verified before a byte compiles), compiled,
/// and asked what it declares (`info` in a throw-away instance: no `init`, no egress), which
/// must match the set (the flags' `--cloud-provider`, a file's scheme and roles). A set that
/// does not match its drivers is refused without a request to the API server.
pub(super) async fn check(
    global: &GlobalArgs,
    runtime: &Runtime,
    args: &RunArgs,
    set: &DriverSet,
) -> anyhow::Result<(Vec<Checked>, Arc<Routing>)> {
    let mut configs = Vec::with_capacity(set.drivers.len());
    for d in &set.drivers {
        configs.push(read_cloud_config(set, d)?);
    }
    let mut fetched = Vec::with_capacity(set.drivers.len());
    for d in &set.drivers {
        let started = Instant::now();
        let f = fetch_verified(
            global,
            &d.source,
            &args.registry,
            d.sha256.as_deref(),
            &args.verify,
        )
        .await;
        fetched.push((about(set, d, true, f)?, started.elapsed()));
    }
    let mut checked = Vec::with_capacity(fetched.len());
    let mut declared: Vec<(String, ProviderInfo)> = Vec::new();
    for (((d, roles), (f, fetch_time)), config) in set
        .drivers
        .iter()
        .zip(set.routing.drivers())
        .zip(fetched)
        .zip(configs)
    {
        let compiling = Instant::now();
        let compiled = about(
            set,
            d,
            false,
            runtime
                .compile(&f.origin, f.bytes)
                .await
                .map_err(Into::into),
        )?;
        let info = about(
            set,
            d,
            false,
            runtime.info(&compiled).await.map_err(Into::into),
        )?;
        if set.is_flags() {
            same_provider(&d.name, &f.origin, &info.name)?;
        } else {
            check_declared(roles, &info, &compiled.surface.exports, &declared)?;
        }
        declared.push((d.name.clone(), info));
        checked.push(Checked {
            origin: f.origin,
            compiled,
            config,
            elapsed: fetch_time + compiling.elapsed(),
        });
    }
    let schemes: Vec<String> = declared
        .into_iter()
        .map(|(_, info)| info.provider_id_scheme)
        .collect();
    Ok((checked, set.routing_with(&schemes)))
}

/// `--cloud-provider` must be the driver's name.
fn same_provider(provider: &str, origin: &str, name: &str) -> anyhow::Result<()> {
    if name != provider {
        bail!(
            "--cloud-provider={provider:?} but the driver {origin} is {name:?}; pass --cloud-provider={name:?} or the right --driver"
        );
    }
    Ok(())
}

/// The cloud config handed to `d`'s `init` (empty without one).
fn read_cloud_config(set: &DriverSet, d: &DriverLoad) -> anyhow::Result<Vec<u8>> {
    let Some(p) = &d.cloud_config else {
        return Ok(Vec::new());
    };
    std::fs::read(p).with_context(|| {
        if set.is_flags() {
            format!("cannot read --cloud-config {}", p.display())
        } else {
            format!(
                "driver {:?}: cannot read cloudConfig {}",
                d.name,
                p.display()
            )
        }
    })
}

/// Initialises every checked driver with the cluster's `facts` (a shadow's refuse the
/// cloud's writes), checks it again (a driver answers `info` anew in each instance), says
/// what it was given, and sets up its credential rotation and, for a file, its hot reload.
pub(super) async fn load(
    runtime: &Runtime,
    args: &RunArgs,
    set: &DriverSet,
    checked: Vec<Checked>,
    routing: Arc<Routing>,
    facts: &ClusterFacts,
) -> anyhow::Result<Loaded> {
    let regarding = own_pod();
    let watching = !args.driver_watch_interval.is_zero();
    if watching
        && regarding.is_none()
        && set
            .drivers
            .iter()
            .any(|d| matches!(d.source, DriverSource::File(_)))
    {
        tracing::warn!(
            "POD_NAME and POD_NAMESPACE are not set (the downward API): driver reloads are logged and counted but record no events"
        );
    }
    let mut loaded: Vec<(String, Arc<Driver>)> = Vec::new();
    let mut entries = Vec::with_capacity(checked.len());
    for ((d, roles), c) in set.drivers.iter().zip(routing.drivers()).zip(checked) {
        let loading = Instant::now();
        let mut opts = driver_options(DriverSpec {
            config: c.config,
            egress: d.allow_egress.clone(),
            call_timeout: d.call_timeout,
            init_timeout: d.init_timeout,
            memory_limit: d.memory_limit,
            cluster_name: &args.cluster_name,
            max_concurrency: (args.concurrent_node_syncs + args.concurrent_service_syncs).max(4),
            facts: facts.clone(),
            extra_env: Vec::new(),
            trace_propagation: args.traces.propagation()?,
            secrets: args.secret_options(),
        });
        opts.http.shadow = args.shadow;
        // One budget per driver: made here, once, and kept by the reload loader's clone of
        // the options.
        let cloud_requests = d.cloud_requests;
        opts.http.request_budget = cloud_requests.map(|limit| limit.budget());
        let driver = runtime.load(&c.compiled, opts.clone()).await;
        let driver = Arc::new(about(set, d, false, driver.map_err(Into::into))?);
        if set.is_flags() {
            same_provider(&d.name, &c.origin, driver.name())?;
        } else {
            check_loaded(roles, &driver, &loaded)?;
        }
        tracing::info!(
            driver = %d.name,
            provider = %driver.name(),
            version = %driver.info().version,
            sha256 = %driver.compiled().sha256,
            origin = %c.origin,
            egress = %driver.egress().join(", "),
            env_prefixes = %driver.info().env_prefixes.join(", "),
            annotation_prefixes = %driver.info().annotation_prefixes.join(", "),
            "driver loaded"
        );
        if let Some(limit) = cloud_requests {
            tracing::info!(
                driver = %d.name,
                rate = limit.rate,
                burst = ?limit.burst,
                "cloud request budget: the driver's requests are paced over all its instances and pause on the cloud's 429"
            );
        }
        announce_grants(&driver, d.cloud_config.as_deref(), args, &opts.init.config);
        let reload = match &d.source {
            DriverSource::File(path) if watching => Some(ReloadOptions {
                path: path.clone(),
                interval: args.driver_watch_interval,
                pinned_sha256: d.sha256.clone(),
                load: reload_loader(
                    runtime.clone(),
                    opts,
                    reload_check(&args.verify, path)?,
                    d.cloud_config.clone(),
                ),
                regarding: regarding.clone(),
            }),
            _ => None,
        };
        entries.push(DriverEntry {
            driver: Arc::clone(&driver),
            reload,
            load_time: c.elapsed + loading.elapsed(),
        });
        loaded.push((d.name.clone(), driver));
    }
    Ok(Loaded { routing, entries })
}

/// The settings a driver for the controllers is loaded with (whatever its source).
pub struct DriverSpec<'a> {
    /// The configuration handed to `init` (`--cloud-config`'s bytes).
    pub config: Vec<u8>,
    /// The grants of where the driver may reach (`--allow-egress`, parsed); empty means its
    /// declared ones.
    pub egress: Vec<wasm_ccm_runtime::Grant>,
    /// Deadline of each call.
    pub call_timeout: Duration,
    /// Deadline of `init`.
    pub init_timeout: Duration,
    /// The most linear memory one instance may use, in bytes.
    pub memory_limit: usize,
    /// `--cluster-name`, in `init`'s context.
    pub cluster_name: &'a str,
    /// Calls in flight at once (the controllers' workers).
    pub max_concurrency: usize,
    /// What `init` learns about the cluster (see [`cluster_facts`]).
    pub facts: ClusterFacts,
    /// Variables added to the process environment for the driver (later ones win).
    pub extra_env: Vec<(String, String)>,
    /// The origins that get the `traceparent` of the driver's requests (`None`: none).
    pub trace_propagation: Option<wasm_ccm_runtime::trace::TracePropagation>,
    /// `--secret-origin` and `--allow-plain-http-secrets`.
    pub secrets: wasm_ccm_runtime::secrets::SecretOptions,
}

/// Compiles (or loads from the cache) and initialises a driver given as bytes (`origin` names
/// it in errors): what `wasm-ccm-dev` does with the drivers it embeds.
pub async fn load_driver_bytes(
    global: &GlobalArgs,
    origin: &str,
    bytes: Vec<u8>,
    spec: DriverSpec<'_>,
) -> anyhow::Result<Arc<Driver>> {
    let runtime = global.runtime()?;
    let compiled = runtime.compile(origin, bytes).await?;
    Ok(Arc::new(
        runtime.load(&compiled, driver_options(spec)).await?,
    ))
}

/// The options a driver is loaded with.
pub fn driver_options(spec: DriverSpec<'_>) -> DriverOptions {
    DriverOptions {
        init: InitInput {
            context: Context {
                cluster_name: spec.cluster_name.to_string(),
                cluster_id: spec.facts.cluster_id,
                kubernetes_version: spec.facts.kubernetes_version,
            },
            config: spec.config,
            env: std::env::vars().chain(spec.extra_env).collect(),
        },
        pool: PoolOptions {
            call_timeout: spec.call_timeout,
            init_timeout: spec.init_timeout,
            memory_limit: spec.memory_limit,
            mode: InstanceMode::Warm,
            max_concurrency: spec.max_concurrency,
            ..Default::default()
        },
        http: wasm_ccm_runtime::http::Config {
            egress: (!spec.egress.is_empty())
                .then(|| wasm_ccm_runtime::EgressPolicy::from_grants(spec.egress)),
            trace_propagation: spec.trace_propagation,
            secrets: spec.secrets,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// What every loaded driver gets at start, in the one-driver and the driver-set paths alike:
/// its effective egress grants and its credential mode said once where an operator reads them
/// (a broad grant is a choice), and the watch of its cloud config for rotated credentials.
fn announce_grants(
    driver: &Arc<wasm_ccm_runtime::Driver>,
    cloud_config: Option<&std::path::Path>,
    args: &RunArgs,
    config: &[u8],
) {
    for warning in driver.egress_warnings() {
        tracing::warn!(driver = %driver.name(), "egress grant: {warning}");
    }
    warn_about_credentials(driver);
    if let Some(path) = cloud_config
        && !args.secret_rotation_interval.is_zero()
        && !driver.info().secrets.is_empty()
    {
        watch_cloud_config(
            path.to_path_buf(),
            args.secret_rotation_interval,
            driver.clone(),
            config.to_vec(),
        );
    }
}

/// Says once, at start, how the driver's credentials are held.
pub fn warn_about_credentials(driver: &wasm_ccm_runtime::Driver) {
    let secrets: Vec<&str> = driver
        .info()
        .secrets
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    if secrets.is_empty() {
        tracing::warn!(
            driver = %driver.name(),
            "credentials: in guest (the driver declares no secrets; it receives its credentials in clear)"
        );
    } else {
        tracing::info!(
            driver = %driver.name(),
            secrets = %secrets.join(", "),
            "credentials: held by the host; the driver holds placeholders"
        );
    }
}

/// Reads `path` every `interval` and hands changed bytes to the driver's vault: a rotated
/// Secret's new credentials are used without re-initialising the driver.
fn watch_cloud_config(
    path: std::path::PathBuf,
    interval: Duration,
    driver: Arc<wasm_ccm_runtime::Driver>,
    mut last: Vec<u8>,
) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let Ok(bytes) = tokio::fs::read(&path).await else {
                tracing::warn!(path = %path.display(), "cannot read --cloud-config for rotated credentials; the current ones stay in use");
                continue;
            };
            if bytes == last {
                continue;
            }
            match driver.rotate_secrets(&bytes) {
                Ok(changed) => tracing::info!(
                    driver = %driver.name(),
                    changed,
                    "--cloud-config changed: rotated credentials are in use (the driver was not re-initialised)"
                ),
                Err(e) => {
                    tracing::warn!(driver = %driver.name(), "--cloud-config changed but its credentials were not rotated: {e}")
                }
            }
            last = bytes;
        }
    });
}

/// Compiles and initialises new bytes of a watched driver; a failure is a refusal with a
/// reason for the metric.
///
/// The cloud config is read again for each reload (`cloud_config`), so a reloaded driver gets the
/// credentials of a rotated Secret, not those of the process's start.
fn reload_loader(
    runtime: Runtime,
    opts: DriverOptions,
    check: Option<SignatureCheck>,
    cloud_config: Option<PathBuf>,
) -> Loader {
    Arc::new(move |origin: String, bytes: Vec<u8>| {
        let (runtime, mut opts, check) = (runtime.clone(), opts.clone(), check.clone());
        let cloud_config = cloud_config.clone();
        Box::pin(async move {
            if let Some(path) = &cloud_config {
                opts.init.config = tokio::fs::read(path).await.map_err(|e| Refusal {
                    reason: "cloud-config",
                    message: format!(
                        "cannot read the cloud config {} for the reloaded driver: {e}",
                        path.display()
                    ),
                })?;
            }
            // The signature is checked before a byte is compiled: a reload whose signature
            // fails is refused like any bad reload (the old version keeps serving).
            if let Some(check) = &check {
                crate::signing::verify_file(&check.policy, &check.driver, &bytes, &check.signature)
                    .map_err(|message| Refusal {
                        reason: "signature",
                        message,
                    })?;
            }
            let compiled = runtime.compile(&origin, bytes).await.map_err(refusal)?;
            let driver = runtime.load(&compiled, opts).await.map_err(refusal)?;
            Ok(Arc::new(driver))
        })
    })
}

/// What a reload of a file driver must pass when a signature policy is configured.
#[derive(Clone)]
struct SignatureCheck {
    policy: Arc<wasm_ccm_oci::Policy>,
    driver: PathBuf,
    signature: PathBuf,
}

fn reload_check(
    verify: &VerifyArgs,
    driver: &std::path::Path,
) -> anyhow::Result<Option<SignatureCheck>> {
    Ok(verify.policy()?.map(|policy| SignatureCheck {
        policy: Arc::new(policy),
        driver: driver.to_path_buf(),
        signature: verify.signature_path(driver),
    }))
}

fn refusal(e: HostError) -> Refusal {
    let reason = match &e {
        HostError::NotAComponent { .. } | HostError::TooLarge { .. } => "not-a-component",
        HostError::UnsupportedWitVersion { .. } => "wit-version",
        HostError::NotADriver { .. } | HostError::UnsupportedImport { .. } => "incompatible",
        HostError::InitFailed { .. } => "init-failed",
        _ => "load-failed",
    };
    Refusal {
        reason,
        message: e.to_string(),
    }
}

/// The pod this process runs in (from the downward API's `POD_NAME`/`POD_NAMESPACE`), which
/// reload events are about.
fn own_pod() -> Option<ObjectReference> {
    let name = std::env::var("POD_NAME").ok().filter(|s| !s.is_empty())?;
    let namespace = std::env::var("POD_NAMESPACE")
        .ok()
        .filter(|s| !s.is_empty())?;
    Some(ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(name),
        namespace: Some(namespace),
        uid: std::env::var("POD_UID").ok().filter(|s| !s.is_empty()),
        ..Default::default()
    })
}
