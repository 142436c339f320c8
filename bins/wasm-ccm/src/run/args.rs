//! `wasm-ccm run`'s flags, with upstream's names and defaults (`checks.rs` reads them).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;
use wasm_ccm_runtime::Grant;

use clap::{ArgAction, Args};

use crate::signing::VerifyArgs;
use crate::source::RegistryArgs;
use crate::units::{parse_duration, parse_duration_or_zero, parse_size};

/// optional value).
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The cloud provider's name; must be the driver's name (`wasm-ccm inspect` shows it).
    #[arg(long)]
    pub(super) cloud_provider: Option<String>,
    /// The driver's configuration file, handed to its `init`.
    #[arg(long)]
    pub(super) cloud_config: Option<PathBuf>,
    /// The driver: a `.wasm` path (a mounted ConfigMap; watched and hot-reloaded) or
    /// `oci://REGISTRY/REPO@sha256:DIGEST` (a tag is resolved to a digest and logged).
    /// (`--plugin` is the same flag, kept for manifests written for earlier releases.)
    #[arg(
        long,
        alias = "plugin",
        value_name = "PATH|oci://…",
        required_unless_present = "drivers_config"
    )]
    pub(super) driver: Option<String>,
    /// Several drivers in one process: a DriverSet file (`apiVersion: wasm-ccm.io/v1alpha1`)
    /// naming each driver's source, settings and roles (nodes by owner, load balancers by
    /// class, routes). Replaces --driver and the per-driver flags (see deploy/README.md).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["driver", "cloud_provider", "cloud_config", "driver_sha256", "allow_egress"]
    )]
    pub(super) drivers_config: Option<PathBuf>,
    /// Only a driver with this sha256 may run, at startup or on reload.
    #[arg(long, alias = "plugin-sha256", value_name = "HEX", value_parser = crate::source::parse_sha256)]
    pub(super) driver_sha256: Option<String>,
    /// How often a file `--driver` is checked for a new version (0: never).
    #[arg(long, alias = "plugin-watch-interval", default_value = "2s", value_parser = parse_duration)]
    pub(super) driver_watch_interval: Duration,
    #[command(flatten)]
    pub(super) registry: RegistryArgs,
    #[command(flatten)]
    pub(super) verify: VerifyArgs,
    /// Path to a kubeconfig (default: in-cluster, then $KUBECONFIG / ~/.kube/config).
    #[arg(long)]
    pub(super) kubeconfig: Option<PathBuf>,
    /// The API server's address; overrides the kubeconfig's.
    #[arg(long)]
    pub(super) master: Option<String>,
    /// Controllers to run: `*` (all), `name` to enable, `-name` to disable; comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "*")]
    pub(super) controllers: Vec<String>,
    /// Nodes initialised concurrently; also the workers of the periodic node address update
    /// when --concurrent-node-status-updates is not given.
    #[arg(long, default_value_t = 1)]
    pub(super) concurrent_node_syncs: usize,
    /// Workers concurrently updating node statuses (the periodic address refresh every
    /// --node-status-update-frequency). If unspecified or 0, --concurrent-node-syncs is used
    /// instead (upstream's flag and fallback since 1.36).
    #[arg(long, default_value_t = 0)]
    pub(super) concurrent_node_status_updates: usize,
    /// Services synced concurrently.
    #[arg(long, default_value_t = 1)]
    pub(super) concurrent_service_syncs: usize,
    /// Period of the node lifecycle check.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub(super) node_monitor_period: Duration,
    /// Period of the node address update.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub(super) node_status_update_frequency: Duration,
    /// How long one listing of a driver's instances (a driver exporting instance-listing,
    /// contract 0.2.2) answers node initialisation and the address update (never longer than
    /// --node-status-update-frequency for the update; the lifecycle check only reads one younger
    /// than --node-monitor-period), so a pass costs one cloud request per page instead of one
    /// per node. A node the listing does not name is asked about alone. 0 (the default) asks
    /// about every node alone, as upstream does; e.g. 30s turns it on.
    #[arg(long, default_value = "0s", value_parser = parse_duration_or_zero)]
    pub(super) instance_listing_max_age: Duration,
    /// Period of the route reconciliation.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub(super) route_reconciliation_period: Duration,
    /// Whether routes are configured (needs a driver exporting `routes` and --cluster-cidr).
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub(super) configure_cloud_routes: bool,
    /// Accepted for compatibility; not used by a cloud-controller-manager.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub(super) allocate_node_cidrs: bool,
    /// The cluster's pod CIDR(s), for the route controller.
    #[arg(long, default_value = "")]
    pub(super) cluster_cidr: String,
    /// Accepted for compatibility; not used.
    #[arg(long, default_value = "RangeAllocator")]
    pub(super) cidr_allocator_type: String,
    /// The cluster's name, handed to the driver.
    #[arg(long, default_value = "kubernetes")]
    pub(super) cluster_name: String,
    /// Run only while holding the lease.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub(super) leader_elect: bool,
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub(super) leader_elect_lease_duration: Duration,
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub(super) leader_elect_renew_deadline: Duration,
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub(super) leader_elect_retry_period: Duration,
    /// Only `leases` is supported, as upstream today.
    #[arg(long, default_value = "leases")]
    pub(super) leader_elect_resource_lock: String,
    /// The Lease's name: `cloud-controller-manager` (upstream's), or `wasm-ccm-shadow` with
    /// --shadow, which must never hold the lease of the CCM in charge.
    #[arg(long)]
    pub(super) leader_elect_resource_name: Option<String>,
    #[arg(long, default_value = "kube-system")]
    pub(super) leader_elect_resource_namespace: String,
    /// Run beside the CCM in charge and change nothing: Kubernetes writes are recorded, not
    /// sent; the driver's requests that would change the cloud are refused before they leave;
    /// no events. What it would have done is served at /shadow (see `wasm-ccm shadow report`);
    /// with --drivers-config, every driver's.
    #[arg(long)]
    pub(super) shadow: bool,
    /// With --shadow: how long the CCM in charge has to reach a would-be state by itself before
    /// the difference counts as diverged.
    #[arg(long, default_value = "10m", value_parser = parse_duration_or_zero)]
    pub(super) shadow_grace: Duration,
    /// With --shadow: `server` sends each would-be Kubernetes write with dryRun=All so the
    /// apiserver judges it (needs the write RBAC); `none` sends nothing.
    #[arg(long, default_value = "none", value_parser = ["none", "server"])]
    pub(super) shadow_validate: String,
    /// With --shadow: publish one `ShadowDiverged` event per diverged object (needs `create` on
    /// events, which the read-only role does not grant).
    #[arg(long)]
    pub(super) shadow_events: bool,
    /// Address of /healthz, /livez, /readyz and /metrics.
    #[arg(long, default_value = "0.0.0.0")]
    pub(super) bind_address: IpAddr,
    /// HTTPS port of /healthz, /livez, /readyz and /metrics (0 disables serving).
    #[arg(long, default_value_t = 10258)]
    pub(super) secure_port: u16,
    /// Directory of the serving certificate: `cloud-controller-manager.crt` and `.key` there are
    /// served, or generated (self-signed) and written there when absent. Ignored with
    /// --tls-cert-file and --tls-private-key-file. Default: a self-signed pair in memory.
    #[arg(long, value_name = "DIR")]
    pub(super) cert_dir: Option<PathBuf>,
    /// PEM certificate(s) served on --secure-port (the serving certificate first, then any
    /// intermediates); with --tls-private-key-file.
    #[arg(long, value_name = "FILE")]
    pub(super) tls_cert_file: Option<PathBuf>,
    /// PEM private key of --tls-cert-file.
    #[arg(long, value_name = "FILE")]
    pub(super) tls_private_key_file: Option<PathBuf>,
    /// Kubeconfig allowed to create tokenreviews.authentication.k8s.io, which check the bearer
    /// tokens sent to --secure-port (default: the controllers' own connection).
    #[arg(long, value_name = "FILE")]
    pub(super) authentication_kubeconfig: Option<PathBuf>,
    /// Kubeconfig allowed to create subjectaccessreviews.authorization.k8s.io, which decide who
    /// may read /metrics (default: the controllers' own connection).
    #[arg(long, value_name = "FILE")]
    pub(super) authorization_kubeconfig: Option<PathBuf>,
    /// Paths served without authorization (exact, or a prefix ending in `*`); comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "/healthz,/readyz,/livez",
        value_name = "PATHS"
    )]
    pub(super) authorization_always_allow_paths: Vec<String>,
    /// Oldest TLS version served on --secure-port: VersionTLS12 (default) or VersionTLS13
    /// (VersionTLS10 and VersionTLS11 are refused: not implemented by rustls).
    #[arg(long, value_name = "VERSION")]
    pub(super) tls_min_version: Option<String>,
    /// How long a TokenReview's answer is cached (0: not cached).
    #[arg(long, default_value = "10s", value_parser = parse_cache_ttl)]
    pub(super) authentication_token_webhook_cache_ttl: Duration,
    /// How long an allowing SubjectAccessReview's answer is cached (0: not cached).
    #[arg(long, default_value = "10s", value_parser = parse_cache_ttl)]
    pub(super) authorization_webhook_cache_authorized_ttl: Duration,
    /// How long a denying SubjectAccessReview's answer is cached (0: not cached).
    #[arg(long, default_value = "10s", value_parser = parse_cache_ttl)]
    pub(super) authorization_webhook_cache_unauthorized_ttl: Duration,
    /// Upstream's serving flags for client certificates, request-header authentication, the
    /// cipher suites and the lookup of `extension-apiserver-authentication`: accepted so an
    /// upstream manifest starts, without effect (a warning says so).
    #[arg(long, hide = true, value_delimiter = ',')]
    pub(super) tls_cipher_suites: Option<Vec<String>>,
    #[arg(long, hide = true)]
    pub(super) client_ca_file: Option<String>,
    #[arg(long, hide = true)]
    pub(super) requestheader_client_ca_file: Option<String>,
    #[arg(long, hide = true, value_delimiter = ',')]
    pub(super) requestheader_allowed_names: Option<Vec<String>>,
    #[arg(long, hide = true, value_delimiter = ',')]
    pub(super) requestheader_extra_headers_prefix: Option<Vec<String>>,
    #[arg(long, hide = true, value_delimiter = ',')]
    pub(super) requestheader_group_headers: Option<Vec<String>>,
    #[arg(long, hide = true, value_delimiter = ',')]
    pub(super) requestheader_username_headers: Option<Vec<String>>,
    #[arg(long, num_args = 0..=1, default_missing_value = "true", hide = true)]
    pub(super) authentication_skip_lookup: Option<String>,
    #[arg(long, num_args = 0..=1, default_missing_value = "true", hide = true)]
    pub(super) authentication_tolerate_lookup_failure: Option<String>,
    /// Kubernetes API requests per second.
    #[arg(long, default_value_t = 20.0)]
    pub(super) kube_api_qps: f32,
    /// Kubernetes API request burst.
    #[arg(long, default_value_t = 30)]
    pub(super) kube_api_burst: u32,
    /// Accepted for compatibility (JSON is always used).
    #[arg(long, default_value = "application/vnd.kubernetes.protobuf")]
    pub(super) kube_api_content_type: String,
    /// With the watch-based route gate on, the route controller's periodic full reconcile comes
    /// once in a random interval between this and twice this (upstream's informer resync);
    /// otherwise unused (the watch is never resynced from a stale cache).
    #[arg(long, default_value = "12h", value_parser = parse_duration)]
    pub(super) min_resync_period: Duration,
    /// If true, use individual service account credentials for each controller (upstream's
    /// node-controller, service-controller and route-controller in kube-system, each with a
    /// token from a TokenRequest, renewed before it expires).
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub(super) use_service_account_credentials: bool,
    /// Accepted for compatibility.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub(super) profiling: bool,
    /// Deprecated upstream; accepted and ignored.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", hide = true)]
    pub(super) allow_untagged_cloud: Option<String>,
    /// Deprecated upstream; accepted and ignored.
    #[arg(long, hide = true)]
    pub(super) node_sync_period: Option<String>,
    /// Deprecated upstream; accepted and ignored.
    #[arg(long, hide = true)]
    pub(super) external_cloud_volume_plugin: Option<String>,
    /// Upstream's feature gates, `NAME=true|false,…`; repeatable. The one with an effect:
    /// CloudControllerManagerWatchBasedRoutesReconciliation (KEP-5237, default off). Other gates
    /// upstream's CCM knows are accepted with a warning; unknown names are refused.
    #[arg(long, value_name = "NAME=BOOL,...", value_parser = super::feature_gates::parse_feature_gates)]
    pub(super) feature_gates: Vec<super::feature_gates::GateSettings>,
    /// Accepted for compatibility with upstream manifests, without effect (a warning says so):
    /// klog verbosity (use --log), the start interval and the leader-migration lock.
    #[arg(long = "v", hide = true)]
    pub(super) verbosity: Option<String>,
    #[arg(long, hide = true)]
    pub(super) controller_start_interval: Option<String>,
    #[arg(long, num_args = 0..=1, default_missing_value = "true", hide = true)]
    pub(super) enable_leader_migration: Option<String>,
    #[arg(long, hide = true)]
    pub(super) leader_migration_config: Option<String>,
    /// Grant the driver egress to PATTERN (`https://api.example.com`, `*.example.com`, a CIDR);
    /// repeatable. Default: what the driver declares.
    #[arg(long = "allow-egress", value_name = "PATTERN", value_parser = wasm_ccm_runtime::parse_grant)]
    pub(super) allow_egress: Vec<Grant>,
    /// Send the declared secret NAME only to URL's origin (scheme, host, port) instead of the
    /// origin the driver declares; repeatable. The origin must also be an egress grant.
    #[arg(long = "secret-origin", value_name = "NAME=URL", value_parser = parse_secret_origin)]
    pub(super) secret_origins: Vec<(String, String)>,
    /// Let the host put bearer, header, parameter and Basic credentials into plain `http://`
    /// requests to hosts other than loopback (CloudStack signatures never need it: the key does
    /// not travel).
    #[arg(long)]
    pub(super) allow_plain_http_secrets: bool,
    /// How often the `--cloud-config` file is read again for rotated credentials (the kubelet
    /// updates a mounted Secret in place); 0 turns it off. The driver is not re-initialised.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub(super) secret_rotation_interval: Duration,
    /// Deadline of one driver call.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub(super) call_timeout: Duration,
    /// Deadline of the driver's `init` (and of instantiation), which may do first-call work.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub(super) init_timeout: Duration,
    /// Cloud requests a second the driver may make over all its instances (its request
    /// budget); a request that cannot leave before its call's deadline fails unsent. A 429 (or
    /// a 503 with Retry-After) from the cloud pauses all the driver's requests (at most 60 s).
    /// 0: no pacing, the pause only. Unset: neither. With --drivers-config, the default of each
    /// driver's `limits.cloudRequestRate`.
    #[arg(long, value_name = "REQUESTS/S", value_parser = parse_request_rate)]
    pub(super) cloud_request_rate: Option<f64>,
    /// Requests of the budget that may leave at once (default: the rate rounded up, at least 1).
    #[arg(long, value_name = "N", requires = "cloud_request_rate", value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) cloud_request_burst: Option<u32>,
    /// Memory limit of one driver instance.
    #[arg(long, default_value = "64Mi", value_parser = parse_size)]
    pub(super) memory_limit: usize,
    /// How often the driver's `housekeeping` runs.
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    pub(super) housekeeping_period: Duration,
    /// OpenTelemetry traces (`--otlp-endpoint`, `--trace-propagation-origins`); read by `main`
    /// before logging starts, and here for the drivers' propagation.
    #[command(flatten)]
    pub traces: crate::telemetry::TraceArgs,
}

/// A cache TTL flag: a duration, or zero (upstream's way to turn the cache off), which
/// [`parse_duration`] refuses elsewhere.
pub(super) fn parse_cache_ttl(text: &str) -> Result<Duration, String> {
    if matches!(text.trim(), "0" | "0s" | "0ms" | "0m" | "0h") {
        return Ok(Duration::ZERO);
    }
    parse_duration(text)
}

/// `--cloud-request-rate`: requests a second, 0 or more.
pub(super) fn parse_request_rate(text: &str) -> Result<f64, String> {
    let rate: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of requests a second, e.g. 5 or 0.5"))?;
    crate::driver_set::CloudRequestLimit::new(rate, None).map(|l| l.rate)
}

/// `NAME=URL` of `--secret-origin`.
pub(super) fn parse_secret_origin(text: &str) -> Result<(String, String), String> {
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

/// The Lease upstream CCMs hold (`--leader-elect-resource-name`'s default).
pub(super) const UPSTREAM_LEASE: &str = "cloud-controller-manager";
/// The Lease of a shadow run with leader election.
pub(super) const SHADOW_LEASE: &str = "wasm-ccm-shadow";

impl RunArgs {
    /// `--cloud-request-rate` and `--cloud-request-burst` (checked by their parsers), when the
    /// rate is given.
    pub(super) fn cloud_request_limit(&self) -> Option<crate::driver_set::CloudRequestLimit> {
        self.cloud_request_rate
            .map(|rate| crate::driver_set::CloudRequestLimit {
                rate,
                burst: self.cloud_request_burst,
            })
    }
}
