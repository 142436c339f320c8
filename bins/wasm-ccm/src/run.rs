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
use wasm_ccm_controllers::server::delegated_auth::AlwaysAllowPaths;
use wasm_ccm_controllers::server::tls::server_config;
use wasm_ccm_controllers::server::{
    ConnectionLimits, DelegatedAuthOptions, MinTlsVersion, Serving, TlsOptions,
};
use wasm_ccm_controllers::{
    ControllerConfig, DriverEntry, EnabledControllers, Exit, LeaderConfig, Loader, Refusal,
    ReloadOptions, RunOptions, default_identity, kubernetes_version,
};
use wasm_ccm_runtime::types::Context;
use wasm_ccm_runtime::{Driver, DriverOptions, HostError, InstanceMode, Runtime};

use wasm_ccm_controllers::shadow::ShadowOptions;

use crate::GlobalArgs;
use crate::signing::VerifyArgs;
use crate::source::{DriverSource, RegistryArgs, fetch_verified};
use crate::units::{parse_duration, parse_duration_or_zero, parse_size};

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
    /// (`--plugin` is the same flag, kept for manifests written for earlier releases.)
    #[arg(
        long,
        alias = "plugin",
        value_name = "PATH|oci://…",
        required_unless_present = "drivers_config"
    )]
    driver: Option<String>,
    /// Several drivers in one process: a DriverSet file (`apiVersion: wasm-ccm.io/v1alpha1`)
    /// naming each driver's source, settings and roles (nodes by owner, load balancers by
    /// class, routes). Replaces --driver and the per-driver flags (see deploy/README.md).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["driver", "cloud_provider", "cloud_config", "driver_sha256", "allow_egress", "shadow"]
    )]
    drivers_config: Option<PathBuf>,
    /// Only a driver with this sha256 may run, at startup or on reload.
    #[arg(long, alias = "plugin-sha256", value_name = "HEX", value_parser = crate::source::parse_sha256)]
    driver_sha256: Option<String>,
    /// How often a file `--driver` is checked for a new version (0: never).
    #[arg(long, alias = "plugin-watch-interval", default_value = "2s", value_parser = parse_duration)]
    driver_watch_interval: Duration,
    #[command(flatten)]
    registry: RegistryArgs,
    #[command(flatten)]
    verify: VerifyArgs,
    /// Path to a kubeconfig (default: in-cluster, then $KUBECONFIG / ~/.kube/config).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The API server's address; overrides the kubeconfig's.
    #[arg(long)]
    master: Option<String>,
    /// Controllers to run: `*` (all), `name` to enable, `-name` to disable; comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "*")]
    controllers: Vec<String>,
    /// Nodes initialised concurrently; also the workers of the periodic node address update
    /// when --concurrent-node-status-updates is not given.
    #[arg(long, default_value_t = 1)]
    concurrent_node_syncs: usize,
    /// Workers concurrently updating node statuses (the periodic address refresh every
    /// --node-status-update-frequency). If unspecified or 0, --concurrent-node-syncs is used
    /// instead (upstream's flag and fallback since 1.36).
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
    /// The Lease's name: `cloud-controller-manager` (upstream's), or `wasm-ccm-shadow` with
    /// --shadow, which must never hold the lease of the CCM in charge.
    #[arg(long)]
    leader_elect_resource_name: Option<String>,
    #[arg(long, default_value = "kube-system")]
    leader_elect_resource_namespace: String,
    /// Run beside the CCM in charge and change nothing: Kubernetes writes are recorded, not
    /// sent; the driver's requests that would change the cloud are refused before they leave;
    /// no events. What it would have done is served at /shadow (see `wasm-ccm shadow report`).
    #[arg(long)]
    shadow: bool,
    /// With --shadow: how long the CCM in charge has to reach a would-be state by itself before
    /// the difference counts as diverged.
    #[arg(long, default_value = "10m", value_parser = parse_duration_or_zero)]
    shadow_grace: Duration,
    /// With --shadow: `server` sends each would-be Kubernetes write with dryRun=All so the
    /// apiserver judges it (needs the write RBAC); `none` sends nothing.
    #[arg(long, default_value = "none", value_parser = ["none", "server"])]
    shadow_validate: String,
    /// With --shadow: publish one `ShadowDiverged` event per diverged object (needs `create` on
    /// events, which the read-only role does not grant).
    #[arg(long)]
    shadow_events: bool,
    /// Address of /healthz, /livez, /readyz and /metrics.
    #[arg(long, default_value = "0.0.0.0")]
    bind_address: IpAddr,
    /// HTTPS port of /healthz, /livez, /readyz and /metrics (0 disables serving).
    #[arg(long, default_value_t = 10258)]
    secure_port: u16,
    /// Directory of the serving certificate: `cloud-controller-manager.crt` and `.key` there are
    /// served, or generated (self-signed) and written there when absent. Ignored with
    /// --tls-cert-file and --tls-private-key-file. Default: a self-signed pair in memory.
    #[arg(long, value_name = "DIR")]
    cert_dir: Option<PathBuf>,
    /// PEM certificate(s) served on --secure-port (the serving certificate first, then any
    /// intermediates); with --tls-private-key-file.
    #[arg(long, value_name = "FILE")]
    tls_cert_file: Option<PathBuf>,
    /// PEM private key of --tls-cert-file.
    #[arg(long, value_name = "FILE")]
    tls_private_key_file: Option<PathBuf>,
    /// Kubeconfig allowed to create tokenreviews.authentication.k8s.io, which check the bearer
    /// tokens sent to --secure-port (default: the controllers' own connection).
    #[arg(long, value_name = "FILE")]
    authentication_kubeconfig: Option<PathBuf>,
    /// Kubeconfig allowed to create subjectaccessreviews.authorization.k8s.io, which decide who
    /// may read /metrics (default: the controllers' own connection).
    #[arg(long, value_name = "FILE")]
    authorization_kubeconfig: Option<PathBuf>,
    /// Paths served without authorization (exact, or a prefix ending in `*`); comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "/healthz,/readyz,/livez",
        value_name = "PATHS"
    )]
    authorization_always_allow_paths: Vec<String>,
    /// Oldest TLS version served on --secure-port: VersionTLS12 (default) or VersionTLS13
    /// (VersionTLS10 and VersionTLS11 are refused: not implemented by rustls).
    #[arg(long, value_name = "VERSION")]
    tls_min_version: Option<String>,
    /// How long a TokenReview's answer is cached (0: not cached).
    #[arg(long, default_value = "10s", value_parser = parse_cache_ttl)]
    authentication_token_webhook_cache_ttl: Duration,
    /// How long an allowing SubjectAccessReview's answer is cached (0: not cached).
    #[arg(long, default_value = "10s", value_parser = parse_cache_ttl)]
    authorization_webhook_cache_authorized_ttl: Duration,
    /// How long a denying SubjectAccessReview's answer is cached (0: not cached).
    #[arg(long, default_value = "10s", value_parser = parse_cache_ttl)]
    authorization_webhook_cache_unauthorized_ttl: Duration,
    /// Upstream's serving flags for client certificates, request-header authentication, the
    /// cipher suites and the lookup of `extension-apiserver-authentication`: accepted so an
    /// upstream manifest starts, without effect (a warning says so).
    #[arg(long, hide = true, value_delimiter = ',')]
    tls_cipher_suites: Option<Vec<String>>,
    #[arg(long, hide = true)]
    client_ca_file: Option<String>,
    #[arg(long, hide = true)]
    requestheader_client_ca_file: Option<String>,
    #[arg(long, hide = true, value_delimiter = ',')]
    requestheader_allowed_names: Option<Vec<String>>,
    #[arg(long, hide = true, value_delimiter = ',')]
    requestheader_extra_headers_prefix: Option<Vec<String>>,
    #[arg(long, hide = true, value_delimiter = ',')]
    requestheader_group_headers: Option<Vec<String>>,
    #[arg(long, hide = true, value_delimiter = ',')]
    requestheader_username_headers: Option<Vec<String>>,
    #[arg(long, num_args = 0..=1, default_missing_value = "true", hide = true)]
    authentication_skip_lookup: Option<String>,
    #[arg(long, num_args = 0..=1, default_missing_value = "true", hide = true)]
    authentication_tolerate_lookup_failure: Option<String>,
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
    /// klog verbosity (use --log), feature gates, the start interval and the leader-migration
    /// lock.
    #[arg(long = "v", hide = true)]
    verbosity: Option<String>,
    #[arg(long, hide = true)]
    feature_gates: Option<String>,
    #[arg(long, hide = true)]
    controller_start_interval: Option<String>,
    #[arg(long, num_args = 0..=1, default_missing_value = "true", hide = true)]
    enable_leader_migration: Option<String>,
    #[arg(long, hide = true)]
    leader_migration_config: Option<String>,
    /// Grant the driver egress to PATTERN (`https://api.example.com`, `*.example.com`, a CIDR);
    /// repeatable. Default: what the driver declares.
    #[arg(long = "allow-egress", value_name = "PATTERN")]
    allow_egress: Vec<String>,
    /// Send the declared secret NAME only to URL's origin (scheme, host, port) instead of the
    /// origin the driver declares; repeatable. The origin must also be an egress grant.
    #[arg(long = "secret-origin", value_name = "NAME=URL", value_parser = parse_secret_origin)]
    secret_origins: Vec<(String, String)>,
    /// Let the host put bearer, header, parameter and Basic credentials into plain `http://`
    /// requests to hosts other than loopback (CloudStack signatures never need it: the key does
    /// not travel).
    #[arg(long)]
    allow_plain_http_secrets: bool,
    /// How often the `--cloud-config` file is read again for rotated credentials (the kubelet
    /// updates a mounted Secret in place); 0 turns it off. The driver is not re-initialised.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    secret_rotation_interval: Duration,
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
    /// OpenTelemetry traces (`--otlp-endpoint`, `--trace-propagation-origins`); read by `main`
    /// before logging starts, and here for the drivers' propagation.
    #[command(flatten)]
    pub traces: crate::telemetry::TraceArgs,
}

/// A cache TTL flag: a duration, or zero (upstream's way to turn the cache off), which
/// [`parse_duration`] refuses elsewhere.
fn parse_cache_ttl(text: &str) -> Result<Duration, String> {
    if matches!(text.trim(), "0" | "0s" | "0ms" | "0m" | "0h") {
        return Ok(Duration::ZERO);
    }
    parse_duration(text)
}

/// The settings a driver for the controllers is loaded with (whatever its source).
pub struct DriverSpec<'a> {
    /// The configuration handed to `init` (`--cloud-config`'s bytes).
    pub config: Vec<u8>,
    /// The URL prefixes the driver may reach (`--allow-egress`); empty means its declared ones.
    pub egress: Vec<String>,
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

/// Facts about the cluster a driver's `init` receives in its context.
#[derive(Debug, Clone, Default)]
pub struct ClusterFacts {
    /// The API server's `gitVersion`, e.g. `v1.31.2`.
    pub kubernetes_version: String,
    /// The UID of the `kube-system` namespace.
    pub cluster_id: String,
}

/// How long start-up keeps asking an API server that does not answer for the cluster facts.
const FACTS_PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

/// Reads the API server's version and the `kube-system` UID. Drivers use the version for
/// features such as `ipMode` (Kubernetes ≥ 1.30) and the UID to tag what they create
/// (PhoenixNAP's IP blocks). An API server that does not answer (a broken connection, 5xx, 429)
/// is asked again with backoff for up to a minute, then start-up fails: a driver started
/// without the cluster ID would fail every call until a restart (found by the soak: a replica
/// restarted during an apiserver restart). A definite refusal (e.g. 403) is logged and leaves
/// the fact empty, as before.
pub async fn cluster_facts(client: &kube::Client) -> anyhow::Result<ClusterFacts> {
    cluster_facts_within(client, FACTS_PATIENCE).await
}

/// [`cluster_facts`] with its patience as a parameter (tests).
pub async fn cluster_facts_within(
    client: &kube::Client,
    patience: std::time::Duration,
) -> anyhow::Result<ClusterFacts> {
    let deadline = tokio::time::Instant::now() + patience;
    let kubernetes_version = match ask_until(deadline, || client.apiserver_version()).await {
        Ok(info) => info.git_version,
        Err(e) if answered_for_good(&e) => {
            tracing::warn!(error = %e, "cannot read the API server version; the driver gets none");
            String::new()
        }
        Err(e) => anyhow::bail!(
            "the API server did not answer /version within {patience:?}: {e}; check that it is reachable (--kubeconfig, --master) and start again"
        ),
    };
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
        kube::Api::all(client.clone());
    let cluster_id = match ask_until(deadline, || namespaces.get_opt("kube-system")).await {
        Ok(ns) => ns.and_then(|ns| ns.metadata.uid).unwrap_or_default(),
        Err(e) if answered_for_good(&e) => {
            tracing::warn!(error = %e, "cannot read the kube-system namespace; the driver gets no cluster ID");
            String::new()
        }
        Err(e) => anyhow::bail!(
            "the API server did not answer for the kube-system namespace (the cluster ID) within {patience:?}: {e}; check that it is reachable and start again"
        ),
    };
    Ok(ClusterFacts {
        kubernetes_version,
        cluster_id,
    })
}

/// The start-up check of the API server's version against the supported Kubernetes minors
/// ([`wasm_ccm_controllers::kubernetes_version`]): outside them, one warning naming the
/// server's version, the supported range and what to do. It never refuses to start: a cluster
/// mid-upgrade, or one a release ahead of this wasm-ccm, may well work, and a CCM that stops
/// would take node initialisation and load balancers down with it; operators alert on
/// `wasm_ccm_kubernetes_version_supported` instead, which `run` sets from the same version.
pub fn announce_kubernetes_version(git_version: &str) {
    let support = kubernetes_version::Support::of(git_version);
    if let Some(warning) = support.warning(git_version) {
        tracing::warn!(
            server_version = %git_version,
            supported = %kubernetes_version::supported_range(),
            "{warning}"
        );
    }
}

/// A refusal asking again will not change: any 4xx but 429.
fn answered_for_good(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if (400..500).contains(&s.code) && s.code != 429)
}

/// Runs `ask` until it answers, fails for good, or `deadline` passes (0.5 s doubling to 8 s
/// between attempts); the last error when time is up.
async fn ask_until<T, F, Fut>(deadline: tokio::time::Instant, mut ask: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut wait = std::time::Duration::from_millis(500);
    loop {
        let e = match tokio::time::timeout_at(deadline, ask()).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) => e,
            Err(_) => {
                return Err(kube::Error::Service(
                    "no answer before the start-up deadline".into(),
                ));
            }
        };
        if answered_for_good(&e) || tokio::time::Instant::now() + wait >= deadline {
            return Err(e);
        }
        tracing::warn!(error = %e, retry_in = ?wait, "the API server did not answer; asking again");
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(std::time::Duration::from_secs(8));
    }
}

/// The Lease upstream CCMs hold (`--leader-elect-resource-name`'s default).
const UPSTREAM_LEASE: &str = "cloud-controller-manager";
/// The Lease of a shadow run with leader election.
const SHADOW_LEASE: &str = "wasm-ccm-shadow";

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
        trace_propagation: spec.trace_propagation,
        secrets: spec.secrets,
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
    for warning in wasm_ccm_runtime::egress::broad_grant_warnings(&driver.egress()) {
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

/// `NAME=URL` of `--secret-origin`.
fn parse_secret_origin(text: &str) -> Result<(String, String), String> {
    let Some((name, url)) = text.split_once('=') else {
        return Err(format!(
            "{text:?} is not NAME=URL, e.g. access-token=https://api.cloudscale.ch"
        ));
    };
    let parsed = url::Url::parse(url).map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(format!("{url:?} is not an http(s):// URL"));
    }
    Ok((name.to_string(), url.to_string()))
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
                opts.config = tokio::fs::read(path).await.map_err(|e| Refusal {
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

/// A client for the reviews of the serving port, from the kubeconfig of `flag`.
async fn review_client(path: &std::path::Path, flag: &str) -> anyhow::Result<kube::Client> {
    let file = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("cannot read {flag} {}", path.display()))?;
    let config =
        kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
            .await
            .with_context(|| format!("{flag} {} is not usable", path.display()))?;
    kube::Client::try_from(config)
        .map(|c| {
            use wasm_ccm_controllers::user_agent::{user_agent, with_user_agent};
            with_user_agent(c, Arc::new(|| user_agent(None)))
        })
        .with_context(|| format!("cannot build the Kubernetes client of {flag}"))
}

impl RunArgs {
    /// The operator's credential options for every driver.
    fn secret_options(&self) -> wasm_ccm_runtime::secrets::SecretOptions {
        wasm_ccm_runtime::secrets::SecretOptions {
            origins: self.secret_origins.clone(),
            allow_plain_http: self.allow_plain_http_secrets,
        }
    }

    /// Checks every flag that names a file, a directory or a URL before any work is done.
    fn preflight(&self, global: &GlobalArgs, source: Option<&DriverSource>) -> anyhow::Result<()> {
        use crate::preflight::{PathFlag, directory, master_url, readable_files, tls_pair};
        let driver_file = match source {
            Some(DriverSource::File(path)) => Some(path.as_path()),
            _ => None,
        };
        let kubeconfig_hint = "give the path of a kubeconfig file, or leave the flag out";
        readable_files(&[
            PathFlag {
                flag: "--kubeconfig",
                path: self.kubeconfig.as_deref(),
                what: "a kubeconfig",
                hint: "give the path of a kubeconfig file, or leave --kubeconfig out to use the in-cluster configuration",
            },
            PathFlag {
                flag: "--driver",
                path: driver_file,
                what: "the driver's .wasm",
                hint: "give the path of the driver component (a mounted ConfigMap key) or an oci:// reference",
            },
            PathFlag {
                flag: "--cloud-config",
                path: self.cloud_config.as_deref(),
                what: "the driver's configuration",
                hint: "give the path of the cloud config file (the mounted Secret's key), or leave the flag out",
            },
            PathFlag {
                flag: "--tls-cert-file",
                path: self.tls_cert_file.as_deref(),
                what: "a PEM certificate",
                hint: "give the serving certificate's PEM file, or leave the flag out to use --cert-dir",
            },
            PathFlag {
                flag: "--tls-private-key-file",
                path: self.tls_private_key_file.as_deref(),
                what: "a PEM private key",
                hint: "give the serving key's PEM file, or leave the flag out to use --cert-dir",
            },
            PathFlag {
                flag: "--authentication-kubeconfig",
                path: self.authentication_kubeconfig.as_deref(),
                what: "a kubeconfig",
                hint: kubeconfig_hint,
            },
            PathFlag {
                flag: "--authorization-kubeconfig",
                path: self.authorization_kubeconfig.as_deref(),
                what: "a kubeconfig",
                hint: kubeconfig_hint,
            },
        ])?;
        if let Some(source) = source {
            self.verify.preflight(source)?;
        }
        // Only when it exists: the Deployment mounts an optional Secret (absent: anonymous).
        readable_files(&[PathFlag {
            flag: "--registry-config",
            path: self.registry.existing_config(),
            what: "a dockerconfigjson file",
            hint: "give the mounted imagePullSecret's .dockerconfigjson file, or leave the flag out for anonymous pulls",
        }])?;
        tls_pair(
            self.tls_cert_file.as_deref(),
            self.tls_private_key_file.as_deref(),
        )?;
        directory(
            "--cert-dir",
            self.cert_dir.as_deref(),
            "the serving certificate",
        )?;
        directory(
            "--cache-dir",
            global.cache_dir.as_deref(),
            "compiled drivers",
        )?;
        if !self.allow_egress.is_empty() {
            wasm_ccm_runtime::egress::EgressPolicy::parse(&self.allow_egress)
                .map_err(|e| anyhow::anyhow!("--allow-egress: {e}"))?;
        }
        master_url(self.master.as_deref())
    }

    /// `--controllers`: which loops run (checked right after [`Self::controller_config`]).
    fn enabled_controllers(&self) -> anyhow::Result<EnabledControllers> {
        EnabledControllers::parse(&self.controllers).map_err(anyhow::Error::msg)
    }

    fn controller_config(&self) -> anyhow::Result<ControllerConfig> {
        if self.shadow_events && !self.shadow {
            bail!("--shadow-events only applies with --shadow; add --shadow or drop the flag");
        }
        if self.shadow_validate != "none" && !self.shadow {
            bail!(
                "--shadow-validate={} only applies with --shadow; add --shadow or drop the flag",
                self.shadow_validate
            );
        }
        if self.concurrent_node_syncs == 0 {
            bail!("--concurrent-node-syncs must be greater than 0");
        }
        Ok(ControllerConfig {
            cluster_name: self.cluster_name.clone(),
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
            shadow: self.shadow.then(|| ShadowOptions {
                grace: self.shadow_grace,
                validate_on_server: self.shadow_validate == "server",
                events: self.shadow_events,
            }),
        })
    }

    /// Leader election's settings (`None` with --leader-elect=false).
    fn leader(&self, identity: &str, lease_name: String) -> Option<LeaderConfig> {
        self.leader_elect.then(|| LeaderConfig {
            namespace: self.leader_elect_resource_namespace.clone(),
            name: lease_name,
            identity: identity.to_string(),
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
        })
    }

    /// The Lease's name; a shadow gets its own, so it never competes with the CCM in charge.
    fn lease_name(&self) -> anyhow::Result<String> {
        match (&self.leader_elect_resource_name, self.shadow) {
            (Some(name), true) if name == UPSTREAM_LEASE => bail!(
                "--shadow with --leader-elect-resource-name={UPSTREAM_LEASE}: a shadow must never hold the lease of the CCM in charge; drop the flag (a shadow uses {SHADOW_LEASE:?}) or name another lease"
            ),
            (Some(name), _) => Ok(name.clone()),
            (None, true) => Ok(SHADOW_LEASE.to_string()),
            (None, false) => Ok(UPSTREAM_LEASE.to_string()),
        }
    }

    /// The TLS configuration of --secure-port (`None` when serving is off), from the given
    /// files, --cert-dir or a generated in-memory pair.
    fn serving_tls(&self) -> anyhow::Result<Option<Arc<rustls::ServerConfig>>> {
        if self.secure_port == 0 {
            return Ok(None);
        }
        let opts = TlsOptions {
            cert_file: self.tls_cert_file.clone(),
            key_file: self.tls_private_key_file.clone(),
            cert_dir: self.cert_dir.clone(),
            bind_address: Some(self.bind_address),
        };
        let cert = opts
            .serving_cert()
            .context("cannot set up the serving certificate of --secure-port")?;
        match (&cert.files, cert.generated) {
            (Some((crt, key)), true) => tracing::info!(
                cert = %crt.display(), key = %key.display(),
                "generated a self-signed serving certificate"
            ),
            (Some((crt, key)), false) => tracing::info!(
                cert = %crt.display(), key = %key.display(),
                "serving certificate loaded"
            ),
            (None, _) => tracing::info!(
                "generated a self-signed serving certificate in memory (pass --cert-dir to keep it, or --tls-cert-file and --tls-private-key-file)"
            ),
        }
        let min_version = MinTlsVersion::parse(self.tls_min_version.as_deref().unwrap_or(""))
            .map_err(anyhow::Error::msg)?;
        let config = server_config(cert, min_version)
            .context("cannot set up the serving certificate of --secure-port")?;
        Ok(Some(config))
    }

    /// Serving on --secure-port with delegated authentication and authorization through
    /// --authentication-kubeconfig/--authorization-kubeconfig, else the controllers' client.
    async fn serving(&self, tls: Arc<rustls::ServerConfig>) -> anyhow::Result<Serving> {
        let paths: Vec<String> = self
            .authorization_always_allow_paths
            .iter()
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect();
        let always_allow_paths = AlwaysAllowPaths::new(&paths).map_err(anyhow::Error::msg)?;
        // Without a kubeconfig of their own the reviews use the controllers' client.
        let authentication = match &self.authentication_kubeconfig {
            Some(path) => Some(review_client(path, "--authentication-kubeconfig").await?),
            None => None,
        };
        let authorization = match &self.authorization_kubeconfig {
            Some(path) => Some(review_client(path, "--authorization-kubeconfig").await?),
            None => None,
        };
        Ok(Serving {
            addr: SocketAddr::new(self.bind_address, self.secure_port),
            tls,
            auth: Some(DelegatedAuthOptions {
                authentication,
                authorization,
                always_allow_paths,
                token_cache_ttl: self.authentication_token_webhook_cache_ttl,
                allow_cache_ttl: self.authorization_webhook_cache_authorized_ttl,
                deny_cache_ttl: self.authorization_webhook_cache_unauthorized_ttl,
            }),
            limits: ConnectionLimits::default(),
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
            (
                self.enable_leader_migration.is_some(),
                "--enable-leader-migration",
            ),
            (
                self.leader_migration_config.is_some(),
                "--leader-migration-config",
            ),
            (
                self.tls_cipher_suites.is_some(),
                "--tls-cipher-suites (rustls's safe defaults are used)",
            ),
            (
                self.client_ca_file.is_some(),
                "--client-ca-file (client certificates are not authenticated)",
            ),
            (
                self.requestheader_client_ca_file.is_some(),
                "--requestheader-client-ca-file (request-header authentication is not supported)",
            ),
            (
                self.requestheader_allowed_names.is_some(),
                "--requestheader-allowed-names",
            ),
            (
                self.requestheader_extra_headers_prefix.is_some(),
                "--requestheader-extra-headers-prefix",
            ),
            (
                self.requestheader_group_headers.is_some(),
                "--requestheader-group-headers",
            ),
            (
                self.requestheader_username_headers.is_some(),
                "--requestheader-username-headers",
            ),
            (
                self.authentication_skip_lookup.is_some(),
                "--authentication-skip-lookup (extension-apiserver-authentication is never read)",
            ),
            (
                self.authentication_tolerate_lookup_failure.is_some(),
                "--authentication-tolerate-lookup-failure",
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
    if args.leader_elect_resource_lock != "leases" {
        bail!(
            "--leader-elect-resource-lock={:?} is not supported: only `leases` is",
            args.leader_elect_resource_lock
        );
    }
    let config = args.controller_config()?;
    let controllers = args.enabled_controllers()?;
    let lease_name = args.lease_name()?;
    if let Some(path) = args.drivers_config.clone() {
        return run_driver_set(global, args, config, controllers, lease_name, &path).await;
    }
    let Some(provider) = args.cloud_provider.clone().filter(|p| !p.is_empty()) else {
        bail!(
            "--cloud-provider is required: the name of the cloud provider, which must match the driver's name"
        );
    };
    let Some(driver_flag) = args.driver.as_deref() else {
        bail!("--driver is required (or --drivers-config for several drivers)");
    };
    let source = DriverSource::parse(driver_flag)?;
    args.preflight(global, Some(&source))?;
    args.warn_about_ignored_flags();
    // The serving certificate next: a bad file is a startup error before anything else runs.
    let tls = args.serving_tls()?;
    let cloud_config = match &args.cloud_config {
        Some(p) => std::fs::read(p)
            .with_context(|| format!("cannot read --cloud-config {}", p.display()))?,
        None => Vec::new(),
    };
    // The driver is read or pulled, and its signature verified, before the cluster is
    // contacted: a refused driver never compiles, and the API server never sees its process.
    let fetching = std::time::Instant::now();
    let fetched = fetch_verified(
        global,
        &source,
        &args.registry,
        args.driver_sha256.as_deref(),
        &args.verify,
    )
    .await?;
    let fetch_time = fetching.elapsed();
    let client = kube_client(args.kubeconfig.as_deref(), args.master.as_deref()).await?;
    let serving = match tls {
        Some(tls) => Some(args.serving(tls).await?),
        None => None,
    };
    let facts = cluster_facts(&client).await?;
    announce_kubernetes_version(&facts.kubernetes_version);
    let kubernetes_version = facts.kubernetes_version.clone();
    let loading = std::time::Instant::now();
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
        trace_propagation: args.traces.propagation()?,
        secrets: args.secret_options(),
    });
    let opts = DriverOptions {
        shadow: args.shadow,
        ..opts
    };
    if args.shadow {
        tracing::info!(
            grace = ?args.shadow_grace,
            validate = %args.shadow_validate,
            "shadow mode: nothing is written to Kubernetes or the cloud; the report is at /shadow"
        );
    }
    let compiled = runtime.compile(&fetched.origin, fetched.bytes).await?;
    let driver = Arc::new(runtime.load(&compiled, opts.clone()).await?);
    let driver_load_time = fetch_time + loading.elapsed();
    if driver.name() != provider {
        bail!(
            "--cloud-provider={provider:?} but the driver {} is {:?}; pass --cloud-provider={:?} or the right --driver",
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
    announce_grants(&driver, args.cloud_config.as_deref(), &args, &opts.config);
    let reload = match &source {
        DriverSource::File(path) if !args.driver_watch_interval.is_zero() => {
            let regarding = own_pod();
            if regarding.is_none() {
                tracing::warn!(
                    "POD_NAME and POD_NAMESPACE are not set (the downward API): driver reloads are logged and counted but record no events"
                );
            }
            Some(ReloadOptions {
                path: path.clone(),
                interval: args.driver_watch_interval,
                pinned_sha256: args.driver_sha256.clone(),
                load: reload_loader(
                    runtime.clone(),
                    opts,
                    reload_check(&args.verify, path)?,
                    args.cloud_config.clone(),
                ),
                regarding,
            })
        }
        _ => None,
    };
    let identity = default_identity();
    let leader = args.leader(&identity, lease_name);
    let cancel = cancel_on_signal();
    let exit = wasm_ccm_controllers::run(
        client,
        driver,
        RunOptions {
            config,
            controllers,
            leader,
            serving,
            identity,
            reload,
            driver_load_time,
            kubernetes_version,
        },
        cancel,
    )
    .await
    .with_context(|| format!("cannot serve on {}:{}", args.bind_address, args.secure_port))?;
    Ok(exit_code(exit))
}

/// `run --drivers-config`: the same start-up as one driver's, per driver of the set (see
/// `driver_set.rs`): the file and every file it names are checked, and every driver is fetched
/// (and its signature verified), compiled and checked against its roles by what its `info`
/// declares, before the cluster is contacted; then each is initialised and checked again. Any
/// failure stops the start naming the driver.
async fn run_driver_set(
    global: &GlobalArgs,
    args: RunArgs,
    config: ControllerConfig,
    controllers: EnabledControllers,
    lease_name: String,
    path: &std::path::Path,
) -> anyhow::Result<ExitCode> {
    let set = crate::driver_set::read(
        path,
        crate::driver_set::LimitDefaults {
            call_timeout: args.call_timeout,
            init_timeout: args.init_timeout,
            memory_limit: args.memory_limit,
        },
    )?;
    if set.routing.drivers().iter().any(|d| d.routes) && !args.configure_cloud_routes {
        bail!(
            "--drivers-config gives a driver `routes: true` but --configure-cloud-routes=false; drop the role or the flag"
        );
    }
    args.preflight(global, None)?;
    set.preflight(&args.verify)?;
    args.warn_about_ignored_flags();
    let tls = args.serving_tls()?;
    let mut fetched = Vec::with_capacity(set.drivers.len());
    for d in &set.drivers {
        let started = std::time::Instant::now();
        let f = fetch_verified(
            global,
            &d.source,
            &args.registry,
            d.sha256.as_deref(),
            &args.verify,
        )
        .await
        .with_context(|| format!("--drivers-config: driver {:?}", d.name))?;
        fetched.push((f, started.elapsed()));
    }
    // Compiled, and asked what they declare (`info` in a throw-away instance: no `init`, no
    // egress), before the cluster is contacted: a DriverSet that does not match its drivers
    // is refused without a request to the apiserver.
    let runtime = global.runtime()?;
    let mut compiled_set = Vec::with_capacity(fetched.len());
    let mut declared: Vec<(String, wasm_ccm_runtime::types::ProviderInfo)> = Vec::new();
    for ((d, roles), (f, fetch_time)) in set.drivers.iter().zip(set.routing.drivers()).zip(fetched)
    {
        let compiling = std::time::Instant::now();
        let compiled = runtime
            .compile(&f.origin, f.bytes)
            .await
            .with_context(|| format!("driver {:?}", d.name))?;
        let info = runtime
            .info(&compiled)
            .await
            .with_context(|| format!("driver {:?}", d.name))?;
        crate::driver_set::check_declared(roles, &info, &compiled.surface.exports, &declared)?;
        declared.push((d.name.clone(), info));
        compiled_set.push((f.origin, compiled, fetch_time + compiling.elapsed()));
    }
    let client = kube_client(args.kubeconfig.as_deref(), args.master.as_deref()).await?;
    let serving = match tls {
        Some(tls) => Some(args.serving(tls).await?),
        None => None,
    };
    let facts = cluster_facts(&client).await?;
    announce_kubernetes_version(&facts.kubernetes_version);
    let regarding = own_pod();
    let mut loaded: Vec<(String, Arc<Driver>)> = Vec::new();
    let mut entries = Vec::with_capacity(set.drivers.len());
    for ((d, roles), (origin, compiled, fetch_time)) in set
        .drivers
        .iter()
        .zip(set.routing.drivers())
        .zip(compiled_set)
    {
        let loading = std::time::Instant::now();
        let config = match &d.cloud_config {
            Some(p) => std::fs::read(p).with_context(|| {
                format!(
                    "driver {:?}: cannot read cloudConfig {}",
                    d.name,
                    p.display()
                )
            })?,
            None => Vec::new(),
        };
        let opts = driver_options(DriverSpec {
            config,
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
        let driver = Arc::new(
            runtime
                .load(&compiled, opts.clone())
                .await
                .with_context(|| format!("driver {:?}", d.name))?,
        );
        crate::driver_set::check_loaded(roles, &driver, &loaded)?;
        tracing::info!(
            driver = %d.name,
            provider = %driver.name(),
            version = %driver.info().version,
            sha256 = %driver.compiled().sha256,
            origin = %origin,
            egress = %driver.egress().join(", "),
            env_prefixes = %driver.info().env_prefixes.join(", "),
            "driver loaded"
        );
        announce_grants(&driver, d.cloud_config.as_deref(), &args, &opts.config);
        let reload = match &d.source {
            DriverSource::File(path) if !args.driver_watch_interval.is_zero() => {
                Some(ReloadOptions {
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
                })
            }
            _ => None,
        };
        entries.push(DriverEntry {
            driver: Arc::clone(&driver),
            reload,
            load_time: fetch_time + loading.elapsed(),
        });
        loaded.push((d.name.clone(), driver));
    }
    tracing::info!(
        drivers = %set.routing.drivers().iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", "),
        "several drivers: nodes by owner, load balancers by class"
    );
    let identity = default_identity();
    let leader = args.leader(&identity, lease_name);
    let cancel = cancel_on_signal();
    let exit = wasm_ccm_controllers::run_set(
        client,
        entries,
        set.routing,
        RunOptions {
            config,
            controllers,
            leader,
            serving,
            identity,
            reload: None,
            driver_load_time: Duration::ZERO,
            kubernetes_version: facts.kubernetes_version,
        },
        cancel,
    )
    .await
    .with_context(|| format!("cannot serve on {}:{}", args.bind_address, args.secure_port))?;
    Ok(exit_code(exit))
}

/// A token cancelled on SIGTERM or Ctrl-C.
fn cancel_on_signal() -> CancellationToken {
    let cancel = CancellationToken::new();
    let on_signal = cancel.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutting down");
        on_signal.cancel();
    });
    cancel
}

/// The process's exit code for why the controllers stopped.
fn exit_code(exit: Exit) -> ExitCode {
    match exit {
        Exit::Stopped => ExitCode::SUCCESS,
        Exit::LostLeadership => {
            eprintln!(
                "wasm-ccm: lost the leader lease; exiting so the process restarts as a candidate"
            );
            ExitCode::from(1)
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// `wasm-ccm run`'s flags alone, parsed as the binary parses them.
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    /// The controllers' settings from `run` with `flags` (and a driver, which is required).
    fn config(flags: &[&str]) -> ControllerConfig {
        let args = ["wasm-ccm", "--driver", "d.wasm"].iter().chain(flags);
        Cli::try_parse_from(args)
            .expect("flags parse")
            .run
            .controller_config()
            .expect("a valid configuration")
    }

    #[test]
    fn node_status_update_workers_fall_back_to_node_syncs() {
        // (flags, --concurrent-node-syncs, periodic address update workers)
        let cases: &[(&[&str], usize, usize)] = &[
            (&[], 1, 1),
            (&["--concurrent-node-syncs=4"], 4, 4),
            (
                &[
                    "--concurrent-node-syncs=4",
                    "--concurrent-node-status-updates=9",
                ],
                4,
                9,
            ),
            (&["--concurrent-node-status-updates=2"], 1, 2),
            // Upstream: 0 means unspecified.
            (
                &[
                    "--concurrent-node-syncs=3",
                    "--concurrent-node-status-updates=0",
                ],
                3,
                3,
            ),
        ];
        for (flags, syncs, status) in cases {
            let c = config(flags);
            assert_eq!(c.concurrent_node_syncs, *syncs, "{flags:?}");
            assert_eq!(c.address_workers(), *status, "{flags:?}");
        }
        assert!(
            Cli::try_parse_from([
                "wasm-ccm",
                "--driver=d",
                "--concurrent-node-status-updates=-1"
            ])
            .is_err(),
            "a negative count is refused, as upstream"
        );
    }

    #[test]
    fn cache_ttls_may_be_zero() {
        assert_eq!(parse_cache_ttl("0"), Ok(Duration::ZERO));
        assert_eq!(parse_cache_ttl("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_cache_ttl("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_cache_ttl("1m30s"), Ok(Duration::from_secs(90)));
        assert!(parse_cache_ttl("-1s").is_err());
        assert!(parse_cache_ttl("soon").is_err());
    }

    async fn facts_sim() -> (wasm_ccm_sim::kube::KubeSim, kube::Client) {
        let sim = wasm_ccm_sim::kube::KubeSim::start("127.0.0.1:0".parse().expect("loopback"))
            .await
            .expect("simulator");
        let client = kube::Client::try_from(kube::Config::new(sim.url().parse().expect("url")))
            .expect("client");
        (sim, client)
    }

    #[tokio::test]
    async fn cluster_facts_wait_for_an_api_server_that_does_not_answer_yet() {
        use wasm_ccm_sim::kube::RequestMatcher;
        let (sim, client) = facts_sim().await;
        // Two 503s, then the answer: the cluster ID is read, not left empty.
        sim.faults()
            .fail_next(2, 503, RequestMatcher::resource("namespaces"));
        let facts = cluster_facts_within(&client, std::time::Duration::from_secs(20))
            .await
            .expect("facts");
        assert!(!facts.cluster_id.is_empty(), "{facts:?}");
        assert!(!facts.kubernetes_version.is_empty(), "{facts:?}");
        assert_eq!(sim.faults().pending(), 0, "both faults fired");

        // An API server that keeps failing ends start-up with a message, never an empty ID.
        sim.faults()
            .fail_next(1_000, 500, RequestMatcher::resource("namespaces"));
        let err = cluster_facts_within(&client, std::time::Duration::from_secs(2))
            .await
            .expect_err("no cluster ID");
        assert!(
            err.to_string()
                .contains("did not answer for the kube-system namespace"),
            "{err}"
        );
        sim.faults().clear();

        // A definite refusal (403) is not retried: the fact stays empty, start-up goes on.
        sim.faults()
            .fail_next(1, 403, RequestMatcher::resource("namespaces"));
        let facts = cluster_facts_within(&client, std::time::Duration::from_secs(20))
            .await
            .expect("facts");
        assert!(facts.cluster_id.is_empty(), "{facts:?}");
        assert_eq!(sim.faults().pending(), 0);
    }
}
