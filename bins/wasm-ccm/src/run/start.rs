//! Starting the controller manager over loaded drivers: the Kubernetes clients, the serving
//! port's TLS and delegated authentication, leader election, and the signals that stop it.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;
use wasm_ccm_controllers::{ControllerConfig, EnabledControllers, account_of};
use wasm_ccm_manager::server::delegated_auth::AlwaysAllowPaths;
use wasm_ccm_manager::server::tls::server_config;
use wasm_ccm_manager::server::{
    ConnectionLimits, DelegatedAuthOptions, MinTlsVersion, Serving, TlsOptions,
};
use wasm_ccm_manager::service_accounts::ServiceAccountOptions;
use wasm_ccm_manager::{Exit, RunOptions, default_identity};

use super::args::RunArgs;
use super::load::Loaded;

/// Runs the controllers over `loaded` until a signal or the loss of leadership; the exit code
/// says which.
#[allow(clippy::too_many_arguments)] // the parts of one start, each named at the call
pub(super) async fn start(
    args: &RunArgs,
    kube: &kube::Config,
    client: kube::Client,
    serving: Option<Serving>,
    loaded: Loaded,
    config: ControllerConfig,
    controllers: EnabledControllers,
    lease_name: String,
    kubernetes_version: String,
) -> anyhow::Result<ExitCode> {
    let identity = default_identity();
    let leader = args.leader(&identity, lease_name);
    let service_account_credentials = args.service_account_credentials(&controllers, kube)?;
    let cancel = cancel_on_signal();
    let exit = wasm_ccm_manager::run(
        client,
        loaded.entries,
        loaded.routing,
        RunOptions {
            config,
            controllers,
            leader,
            serving,
            identity,
            kubernetes_version,
            service_account_credentials,
            api_host: api_host(kube),
        },
        cancel,
    )
    .await
    .with_context(|| format!("cannot serve on {}:{}", args.bind_address, args.secure_port))?;
    Ok(exit_code(exit))
}

/// A Kubernetes client of the process's configuration ([`kube_config`]: `--kubeconfig`/
/// `--master`, in-cluster config, or the default kubeconfig, in that order).
pub(super) fn client_from(config: kube::Config) -> anyhow::Result<kube::Client> {
    kube::Client::try_from(config)
        .map(|c| {
            use wasm_ccm_manager::user_agent::{user_agent, with_user_agent};
            with_user_agent(c, std::sync::Arc::new(|| user_agent(None)))
        })
        .context("cannot build the Kubernetes client")
}

/// The process's Kubernetes configuration, read once: the client is built from it, and so are
/// the controllers' own clients (`--use-service-account-credentials`) and the `host` label of
/// the REST client metrics.
pub(super) async fn kube_config(
    kubeconfig: Option<&std::path::Path>,
    master: Option<&str>,
) -> anyhow::Result<kube::Config> {
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
    Ok(config)
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
            use wasm_ccm_manager::user_agent::{user_agent, with_user_agent};
            with_user_agent(c, Arc::new(|| user_agent(None)))
        })
        .with_context(|| format!("cannot build the Kubernetes client of {flag}"))
}

impl RunArgs {
    /// With `--use-service-account-credentials` (and not `--shadow`, which writes nothing and
    /// runs as its own read-only account): the process's configuration, whose server and CA the
    /// controllers' clients keep, and the accounts of the enabled controllers (upstream's
    /// client names: node-controller, service-controller, route-controller).
    pub(super) fn service_account_credentials(
        &self,
        controllers: &EnabledControllers,
        config: &kube::Config,
    ) -> anyhow::Result<Option<ServiceAccountOptions>> {
        if !self.use_service_account_credentials || self.shadow {
            return Ok(None);
        }
        let config = config.clone();
        let mut accounts: Vec<&'static str> = Vec::new();
        for name in controllers.names() {
            // As upstream's startRouteController, which returns before asking for its client
            // when routes are not configured.
            if name == "node-route-controller" && !self.configure_cloud_routes {
                continue;
            }
            let account = account_of(name).with_context(|| {
                format!(
                    "--use-service-account-credentials: the controller {name} has no ServiceAccount"
                )
            })?;
            if !accounts.contains(&account) {
                accounts.push(account);
            }
        }
        Ok(Some(ServiceAccountOptions { config, accounts }))
    }

    /// The TLS configuration of --secure-port (`None` when serving is off), from the given
    /// files, --cert-dir or a generated in-memory pair.
    pub(super) fn serving_tls(&self) -> anyhow::Result<Option<Arc<rustls::ServerConfig>>> {
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
    pub(super) async fn serving(&self, tls: Arc<rustls::ServerConfig>) -> anyhow::Result<Serving> {
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

/// The API server's `host[:port]` as the process's configuration names it (the `host` label of
/// client-go's REST client metrics).
fn api_host(config: &kube::Config) -> String {
    config
        .cluster_url
        .authority()
        .map(|a| a.as_str().to_string())
        .unwrap_or_default()
}
