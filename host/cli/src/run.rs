//! `wasm-ccm run`: the cloud-controller-manager, with upstream's flag names and defaults.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{ArgAction, Args};
use k8s_openapi::api::core::v1::ObjectReference;
use tokio_util::sync::CancellationToken;
use wasm_ccm_controllers::{
    ControllerConfig, EnabledControllers, Exit, LeaderConfig, Loader, Refusal, ReloadOptions,
    RunOptions, default_identity,
};
use wasm_ccm_runtime::types::Context;
use wasm_ccm_runtime::{Driver, DriverOptions, HostError, InstanceMode, Runtime};

use crate::GlobalArgs;
use crate::source::{PluginSource, RegistryArgs, fetch};
use crate::units::{parse_duration, parse_size};

/// Booleans take Go's forms: `--flag`, `--flag=true`, `--flag=false` (`ArgAction::Set` with an
/// optional value).
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The cloud provider's name; must be the driver's name (`wasm-ccm inspect` shows it).
    #[arg(long)]
    cloud_provider: Option<String>,
    /// The driver's configuration file, handed to its `init`.
    #[arg(long)]
    cloud_config: Option<PathBuf>,
    /// The driver: a `.wasm` path (a mounted ConfigMap; watched and hot-reloaded) or
    /// `oci://REGISTRY/REPO@sha256:DIGEST` (a tag is resolved to a digest and logged).
    #[arg(long, value_name = "PATH|oci://…")]
    plugin: String,
    /// Only a driver with this sha256 may run, at startup or on reload.
    #[arg(long, value_name = "HEX", value_parser = crate::source::parse_sha256)]
    plugin_sha256: Option<String>,
    /// How often a file `--plugin` is checked for a new version (0: never).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    plugin_watch_interval: Duration,
    #[command(flatten)]
    registry: RegistryArgs,
    /// Path to a kubeconfig (default: in-cluster, then $KUBECONFIG / ~/.kube/config).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The API server's address; overrides the kubeconfig's.
    #[arg(long)]
    master: Option<String>,
    /// Controllers to run: `*` (all), `name` to enable, `-name` to disable; comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "*")]
    controllers: Vec<String>,
    /// Nodes initialised concurrently.
    #[arg(long, default_value_t = 1)]
    concurrent_node_syncs: usize,
    /// Workers of the periodic address update (0: as many as --concurrent-node-syncs).
    #[arg(long, default_value_t = 0)]
    concurrent_node_status_updates: usize,
    /// Services synced concurrently.
    #[arg(long, default_value_t = 1)]
    concurrent_service_syncs: usize,
    /// Period of the node lifecycle check.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    node_monitor_period: Duration,
    /// Period of the node address update.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    node_status_update_frequency: Duration,
    /// Period of the route reconciliation.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    route_reconciliation_period: Duration,
    /// Whether routes are configured (needs a driver exporting `routes` and --cluster-cidr).
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    configure_cloud_routes: bool,
    /// Accepted for compatibility; not used by a cloud-controller-manager.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    allocate_node_cidrs: bool,
    /// The cluster's pod CIDR(s), for the route controller.
    #[arg(long, default_value = "")]
    cluster_cidr: String,
    /// Accepted for compatibility; not used.
    #[arg(long, default_value = "RangeAllocator")]
    cidr_allocator_type: String,
    /// The cluster's name, handed to the driver.
    #[arg(long, default_value = "kubernetes")]
    cluster_name: String,
    /// Run only while holding the lease.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    leader_elect: bool,
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    leader_elect_lease_duration: Duration,
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    leader_elect_renew_deadline: Duration,
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    leader_elect_retry_period: Duration,
    /// Only `leases` is supported, as upstream today.
    #[arg(long, default_value = "leases")]
    leader_elect_resource_lock: String,
    #[arg(long, default_value = "cloud-controller-manager")]
    leader_elect_resource_name: String,
    #[arg(long, default_value = "kube-system")]
    leader_elect_resource_namespace: String,
    /// Address of /healthz, /readyz and /metrics.
    #[arg(long, default_value = "0.0.0.0")]
    bind_address: IpAddr,
    /// Port of /healthz, /readyz and /metrics (plain HTTP; 0 disables).
    #[arg(long, default_value_t = 10258)]
    secure_port: u16,
    /// Kubernetes API requests per second.
    #[arg(long, default_value_t = 20.0)]
    kube_api_qps: f32,
    /// Kubernetes API request burst.
    #[arg(long, default_value_t = 30)]
    kube_api_burst: u32,
    /// Accepted for compatibility (JSON is always used).
    #[arg(long, default_value = "application/vnd.kubernetes.protobuf")]
    kube_api_content_type: String,
    /// Accepted for compatibility (the watch is never resynced from a stale cache).
    #[arg(long, default_value = "12h", value_parser = parse_duration)]
    min_resync_period: Duration,
    /// Accepted for compatibility; not supported (one identity for every controller).
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    use_service_account_credentials: bool,
    /// Accepted for compatibility.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    profiling: bool,
    /// Deprecated upstream; accepted and ignored.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", hide = true)]
    allow_untagged_cloud: Option<String>,
    /// Deprecated upstream; accepted and ignored.
    #[arg(long, hide = true)]
    node_sync_period: Option<String>,
    /// Deprecated upstream; accepted and ignored.
    #[arg(long, hide = true)]
    external_cloud_volume_plugin: Option<String>,
    /// Accepted for compatibility with upstream manifests, without effect (a warning says so):
    /// klog verbosity (use --log), feature gates, TLS and delegated-auth settings of the secure
    /// port, the start interval and the leader-migration lock.
    #[arg(long = "v", hide = true)]
    verbosity: Option<String>,
    #[arg(long, hide = true)]
    feature_gates: Option<String>,
    #[arg(long, hide = true)]
    controller_start_interval: Option<String>,
    #[arg(long, hide = true)]
    cert_dir: Option<String>,
    #[arg(long, hide = true)]
    tls_cert_file: Option<String>,
    #[arg(long, hide = true)]
    tls_private_key_file: Option<String>,
    #[arg(long, hide = true)]
    authentication_kubeconfig: Option<String>,
    #[arg(long, hide = true)]
    authorization_kubeconfig: Option<String>,
    #[arg(long, num_args = 0..=1, default_missing_value = "true", hide = true)]
    enable_leader_migration: Option<String>,
    #[arg(long, hide = true)]
    leader_migration_config: Option<String>,
    /// Grant the driver egress to PATTERN (`https://api.example.com`, `*.example.com`, a CIDR);
    /// repeatable. Default: what the driver declares.
    #[arg(long = "allow-egress", value_name = "PATTERN")]
    allow_egress: Vec<String>,
    /// Deadline of one driver call.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    call_timeout: Duration,
    /// Deadline of the driver's `init` (and of instantiation), which may do first-call work.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    init_timeout: Duration,
    /// Memory limit of one driver instance.
    #[arg(long, default_value = "64Mi", value_parser = parse_size)]
    memory_limit: usize,
    /// How often the driver's `housekeeping` runs.
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    housekeeping_period: Duration,
}

/// The settings a driver for the controllers is loaded with (whatever its source).
pub struct DriverSpec<'a> {
    pub config: Vec<u8>,
    pub egress: Vec<String>,
    pub call_timeout: Duration,
    /// Deadline of `init`.
    pub init_timeout: Duration,
    pub memory_limit: usize,
    pub cluster_name: &'a str,
    pub max_concurrency: usize,
    /// What `init` learns about the cluster (see [`cluster_facts`]).
    pub facts: ClusterFacts,
    /// Variables added to the process environment for the driver (later ones win).
    pub extra_env: Vec<(String, String)>,
}

/// Facts about the cluster a driver's `init` receives in its context.
#[derive(Debug, Clone, Default)]
pub struct ClusterFacts {
    /// The API server's `gitVersion`, e.g. `v1.31.2`.
    pub kubernetes_version: String,
    /// The UID of the `kube-system` namespace.
    pub cluster_id: String,
}

/// Reads the API server's version and the `kube-system` UID. Drivers use the version for
/// features such as `ipMode` (Kubernetes ≥ 1.30); a failure is logged and leaves the fact empty,
/// because the controllers report an unreachable API server more usefully than `init` would.
pub async fn cluster_facts(client: &kube::Client) -> ClusterFacts {
    let kubernetes_version = match client.apiserver_version().await {
        Ok(info) => info.git_version,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the API server version; the driver gets none");
            String::new()
        }
    };
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
        kube::Api::all(client.clone());
    let cluster_id = match namespaces.get_opt("kube-system").await {
        Ok(ns) => ns.and_then(|ns| ns.metadata.uid).unwrap_or_default(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the kube-system namespace; the driver gets no cluster ID");
            String::new()
        }
    };
    ClusterFacts {
        kubernetes_version,
        cluster_id,
    }
}

/// Compiles (or loads from the cache) and initialises the driver at `plugin`.
pub async fn load_driver(
    global: &GlobalArgs,
    plugin: &std::path::Path,
    spec: DriverSpec<'_>,
) -> anyhow::Result<Arc<Driver>> {
    let runtime = global.runtime()?;
    let compiled = runtime.compile_file(plugin).await?;
    Ok(Arc::new(
        runtime.load(&compiled, driver_options(spec)).await?,
    ))
}

/// The options a driver is loaded with.
pub fn driver_options(spec: DriverSpec<'_>) -> DriverOptions {
    DriverOptions {
        context: Context {
            cluster_name: spec.cluster_name.to_string(),
            cluster_id: spec.facts.cluster_id,
            kubernetes_version: spec.facts.kubernetes_version,
        },
        config: spec.config,
        env: std::env::vars().chain(spec.extra_env).collect(),
        egress: (!spec.egress.is_empty()).then_some(spec.egress),
        call_timeout: spec.call_timeout,
        init_timeout: spec.init_timeout,
        memory_limit: spec.memory_limit,
        mode: InstanceMode::Warm,
        max_concurrency: spec.max_concurrency,
        ..Default::default()
    }
}

/// Compiles and initialises new bytes of a watched driver; a failure is a refusal with a
/// reason for the metric.
fn reload_loader(runtime: Runtime, opts: DriverOptions) -> Loader {
    Arc::new(move |origin: String, bytes: Vec<u8>| {
        let (runtime, opts) = (runtime.clone(), opts.clone());
        Box::pin(async move {
            let compiled = runtime.compile(&origin, bytes).await.map_err(refusal)?;
            let driver = runtime.load(&compiled, opts).await.map_err(refusal)?;
            Ok(Arc::new(driver))
        })
    })
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

/// A Kubernetes client from `--kubeconfig`/`--master`, in-cluster config, or the default
/// kubeconfig, in that order.
pub async fn kube_client(
    kubeconfig: Option<&std::path::Path>,
    master: Option<&str>,
) -> anyhow::Result<kube::Client> {
    let mut config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read --kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("--kubeconfig {} is not usable", path.display()))?
        }
        None => match master {
            Some(m) => kube::Config::new(m.parse().with_context(|| format!("--master {m:?} is not a URL"))?),
            None => kube::Config::infer().await.context(
                "no Kubernetes configuration: not in a cluster and no kubeconfig; pass --kubeconfig or --master",
            )?,
        },
    };
    if let Some(m) = master {
        config.cluster_url = m
            .parse()
            .with_context(|| format!("--master {m:?} is not a URL"))?;
    }
    kube::Client::try_from(config)
        .map(|c| {
            use wasm_ccm_controllers::user_agent::{user_agent, with_user_agent};
            with_user_agent(c, std::sync::Arc::new(|| user_agent(None)))
        })
        .context("cannot build the Kubernetes client")
}

impl RunArgs {
    fn controller_config(&self) -> anyhow::Result<ControllerConfig> {
        if self.concurrent_node_syncs == 0 {
            bail!("--concurrent-node-syncs must be greater than 0");
        }
        let controllers =
            EnabledControllers::parse(&self.controllers).map_err(anyhow::Error::msg)?;
        Ok(ControllerConfig {
            cluster_name: self.cluster_name.clone(),
            controllers,
            concurrent_node_syncs: self.concurrent_node_syncs,
            concurrent_node_status_updates: self.concurrent_node_status_updates,
            concurrent_service_syncs: self.concurrent_service_syncs.max(1),
            node_monitor_period: self.node_monitor_period,
            node_status_update_frequency: self.node_status_update_frequency,
            route_reconciliation_period: self.route_reconciliation_period,
            housekeeping_period: self.housekeeping_period,
            configure_cloud_routes: self.configure_cloud_routes,
            cluster_cidr: self.cluster_cidr.clone(),
            kube_api_qps: self.kube_api_qps,
            kube_api_burst: self.kube_api_burst,
        })
    }

    fn warn_about_ignored_flags(&self) {
        for (given, flag) in [
            (
                self.allow_untagged_cloud.is_some(),
                "--allow-untagged-cloud",
            ),
            (self.node_sync_period.is_some(), "--node-sync-period"),
            (
                self.external_cloud_volume_plugin.is_some(),
                "--external-cloud-volume-plugin",
            ),
        ] {
            if given {
                tracing::warn!("{flag} is deprecated upstream and has no effect");
            }
        }
        for (given, flag) in [
            (self.verbosity.is_some(), "--v (use --log)"),
            (self.feature_gates.is_some(), "--feature-gates"),
            (
                self.controller_start_interval.is_some(),
                "--controller-start-interval",
            ),
            (self.cert_dir.is_some(), "--cert-dir"),
            (self.tls_cert_file.is_some(), "--tls-cert-file"),
            (
                self.tls_private_key_file.is_some(),
                "--tls-private-key-file",
            ),
            (
                self.authentication_kubeconfig.is_some(),
                "--authentication-kubeconfig",
            ),
            (
                self.authorization_kubeconfig.is_some(),
                "--authorization-kubeconfig",
            ),
            (
                self.enable_leader_migration.is_some(),
                "--enable-leader-migration",
            ),
            (
                self.leader_migration_config.is_some(),
                "--leader-migration-config",
            ),
        ] {
            if given {
                tracing::warn!(
                    "{flag} is accepted for compatibility but has no effect in wasm-ccm yet"
                );
            }
        }
        if self.use_service_account_credentials {
            tracing::warn!(
                "--use-service-account-credentials is not supported: every controller uses this process's credentials"
            );
        }
        if self.allocate_node_cidrs {
            tracing::warn!(
                "--allocate-node-cidrs has no effect in a cloud-controller-manager (node IPAM is the kube-controller-manager's)"
            );
        }
    }
}

/// Runs the controller manager.
pub async fn run(global: &GlobalArgs, args: RunArgs) -> anyhow::Result<ExitCode> {
    let Some(provider) = args.cloud_provider.clone().filter(|p| !p.is_empty()) else {
        bail!(
            "--cloud-provider is required: the name of the cloud provider, which must match the driver's name"
        );
    };
    if args.leader_elect_resource_lock != "leases" {
        bail!(
            "--leader-elect-resource-lock={:?} is not supported: only `leases` is",
            args.leader_elect_resource_lock
        );
    }
    let config = args.controller_config()?;
    args.warn_about_ignored_flags();
    let cloud_config = match &args.cloud_config {
        Some(p) => std::fs::read(p)
            .with_context(|| format!("cannot read --cloud-config {}", p.display()))?,
        None => Vec::new(),
    };
    let source = PluginSource::parse(&args.plugin)?;
    let client = kube_client(args.kubeconfig.as_deref(), args.master.as_deref()).await?;
    let facts = cluster_facts(&client).await;
    let loading = std::time::Instant::now();
    let fetched = fetch(
        global,
        &source,
        &args.registry,
        args.plugin_sha256.as_deref(),
    )
    .await?;
    let runtime = global.runtime()?;
    let opts = driver_options(DriverSpec {
        config: cloud_config,
        egress: args.allow_egress.clone(),
        call_timeout: args.call_timeout,
        init_timeout: args.init_timeout,
        memory_limit: args.memory_limit,
        cluster_name: &args.cluster_name,
        max_concurrency: (args.concurrent_node_syncs + args.concurrent_service_syncs).max(4),
        facts,
        extra_env: Vec::new(),
    });
    let compiled = runtime.compile(&fetched.origin, fetched.bytes).await?;
    let driver = Arc::new(runtime.load(&compiled, opts.clone()).await?);
    let driver_load_time = loading.elapsed();
    if driver.name() != provider {
        bail!(
            "--cloud-provider={provider:?} but the driver {} is {:?}; pass --cloud-provider={:?} or the right --plugin",
            fetched.origin,
            driver.name(),
            driver.name()
        );
    }
    tracing::info!(
        driver = %driver.name(),
        version = %driver.info().version,
        sha256 = %driver.compiled().sha256,
        origin = %fetched.origin,
        egress = %driver.egress().join(", "),
        env_prefixes = %driver.info().env_prefixes.join(", "),
        annotation_prefixes = %driver.info().annotation_prefixes.join(", "),
        "driver loaded"
    );
    // The effective grants, said once where an operator reads them: a broad one is a choice.
    for warning in wasm_ccm_runtime::egress::broad_grant_warnings(&driver.egress()) {
        tracing::warn!(driver = %driver.name(), "egress grant: {warning}");
    }
    let reload = match &source {
        PluginSource::File(path) if !args.plugin_watch_interval.is_zero() => {
            let regarding = own_pod();
            if regarding.is_none() {
                tracing::warn!(
                    "POD_NAME and POD_NAMESPACE are not set (the downward API): driver reloads are logged and counted but record no events"
                );
            }
            Some(ReloadOptions {
                path: path.clone(),
                interval: args.plugin_watch_interval,
                pinned_sha256: args.plugin_sha256.clone(),
                load: reload_loader(runtime.clone(), opts),
                regarding,
            })
        }
        _ => None,
    };
    let identity = default_identity();
    let leader = args.leader_elect.then(|| LeaderConfig {
        namespace: args.leader_elect_resource_namespace.clone(),
        name: args.leader_elect_resource_name.clone(),
        identity: identity.clone(),
        lease_duration: args.leader_elect_lease_duration,
        renew_deadline: args.leader_elect_renew_deadline,
        retry_period: args.leader_elect_retry_period,
    });
    let cancel = CancellationToken::new();
    let on_signal = cancel.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutting down");
        on_signal.cancel();
    });
    let exit = wasm_ccm_controllers::run(
        client,
        driver,
        RunOptions {
            config,
            leader,
            bind: (args.secure_port != 0)
                .then(|| SocketAddr::new(args.bind_address, args.secure_port)),
            identity,
            reload,
            driver_load_time,
        },
        cancel,
    )
    .await
    .with_context(|| format!("cannot serve on {}:{}", args.bind_address, args.secure_port))?;
    match exit {
        Exit::Stopped => Ok(ExitCode::SUCCESS),
        Exit::LostLeadership => {
            eprintln!(
                "wasm-ccm: lost the leader lease; exiting so the process restarts as a candidate"
            );
            Ok(ExitCode::from(1))
        }
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
