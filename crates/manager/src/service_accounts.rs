//! `--use-service-account-credentials`: each controller talks to Kubernetes as its own
//! ServiceAccount in kube-system, as upstream's `DynamicControllerClientBuilder` arranges
//! (k8s.io/controller-manager pkg/clientbuilder/client_builder_dynamic.go, chosen in
//! k8s.io/cloud-provider options/options.go).
//!
//! What upstream does and this does too:
//! - The account is got, or created when it is missing (`getOrCreateServiceAccount`; a create
//!   that loses a race re-reads), through the process's own client, which also makes every
//!   TokenRequest (`POST serviceaccounts/{name}/token`, `expirationSeconds` 3600).
//! - The controller's client starts from the process's configuration without its credentials
//!   (`restclient.AnonymousClientConfig`: same server and CA, no token, client certificate or
//!   exec plugin) and carries the account's token as a bearer token; its User-Agent ends with
//!   `/system:serviceaccount:kube-system:<name>` (`constructClient`'s `AddUserAgent`).
//! - A token is renewed when 20% of its lifetime is left (`defaultLeewayPercent`), the lifetime
//!   read from the answer's `expirationTimestamp` and taken as at least ten minutes ("possible
//!   clock skew"). A renewal that fails keeps the old token in use (client-go's
//!   `cachingTokenSource` returns the old token on error) and is retried with upstream's
//!   backoff (500 ms, doubling); a 401 answered to a controller's request renews at once
//!   (`ResettableTokenSourceWrapTransport`).
//!
//! Where this differs, and why:
//! - Upstream fetches the first token lazily, at a controller's first request; this fetches it
//!   before the controllers start, so a missing RBAC rule is one start-up error naming the rule
//!   instead of 401s in every controller. (Upstream's get-or-create at start is fatal too.)
//! - Renewal runs on a timer, not on the next request after the deadline, and its retries do
//!   not stop after four attempts: a controller that is idle when its token is due still has a
//!   valid one when it wakes.
//! - Upstream creates the namespace when it cannot find it; kube-system exists on every
//!   cluster, and deploy/'s RBAC grants no namespace creation, so this does not try.
//! - Failures are logged, and an event (`ServiceAccountTokenFailed`) is published on the
//!   ServiceAccount through the process's own client, once per run of failures, so
//!   `kubectl describe serviceaccount -n kube-system <name>` shows it; upstream only logs.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use http::header::{AUTHORIZATION, HeaderValue};
use http::{Request, Response};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ObjectReference, ServiceAccount};
use kube::api::{Api, PostParams};
use kube::client::Body;
use kube::{Client, Config};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use wasm_ccm_controllers::{ControllerClients, Events, Metrics};

use crate::request_metrics::RequestMetrics;
use crate::user_agent::{AgentFn, with_user_agent};

/// The namespace of the controllers' accounts (upstream's `metav1.NamespaceSystem`).
pub const NAMESPACE: &str = "kube-system";
/// The lifetime asked for (`defaultExpirationSeconds`).
pub const EXPIRATION_SECONDS: i64 = 3600;
/// The share of a token's lifetime left when it is renewed (`defaultLeewayPercent`).
const LEEWAY_PERCENT: u32 = 20;
/// The shortest lifetime a token is taken to have, whatever its timestamp says.
const MIN_LIFETIME: Duration = Duration::from_secs(10 * 60);
/// The first retry delay after a failure (upstream's backoff `Duration`), doubled each time.
const FIRST_RETRY: Duration = Duration::from_millis(500);
/// The longest retry delay (upstream stops after four steps and tries again on the next
/// request; a timer needs a ceiling instead).
const MAX_RETRY: Duration = Duration::from_secs(30);
/// Attempts at start-up before giving up (upstream's four backoff steps).
const START_ATTEMPTS: u32 = 4;
/// The reason of the event published when a token cannot be had.
pub const FAILED_REASON: &str = "ServiceAccountTokenFailed";

/// The user a ServiceAccount authenticates as.
pub fn username(account: &str) -> String {
    format!("system:serviceaccount:{NAMESPACE}:{account}")
}

/// A token and when to renew it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    /// The bearer token.
    pub token: String,
    /// How long it is valid from now (at least [`MIN_LIFETIME`]).
    pub lifetime: Duration,
}

/// When a token valid for `lifetime` is renewed: with [`LEEWAY_PERCENT`] of it left.
pub fn renew_after(lifetime: Duration) -> Duration {
    lifetime.max(MIN_LIFETIME) * (100 - LEEWAY_PERCENT) / 100
}

/// Where tokens come from: the apiserver in production, a script in tests.
pub trait TokenSource: Send + Sync + 'static {
    /// Gets (or creates) the account and requests a token for it.
    fn fetch(&self) -> Pin<Box<dyn Future<Output = Result<Issued, String>> + Send + '_>>;
}

/// The apiserver, through the process's own client.
struct ApiTokens {
    root: Client,
    account: String,
}

impl TokenSource for ApiTokens {
    fn fetch(&self) -> Pin<Box<dyn Future<Output = Result<Issued, String>> + Send + '_>> {
        Box::pin(async move {
            get_or_create(&self.root, &self.account).await?;
            request_token(&self.root, &self.account).await
        })
    }
}

/// `getOrCreateServiceAccount`: the account, created when missing; a create that finds it
/// created meanwhile is fine.
async fn get_or_create(root: &Client, account: &str) -> Result<(), String> {
    let api: Api<ServiceAccount> = Api::namespaced(root.clone(), NAMESPACE);
    match api.get(account).await {
        Ok(_) => return Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => {
            return Err(format!(
                "cannot read the ServiceAccount {NAMESPACE}/{account}: {e}; this process's account needs `get` on serviceaccounts in {NAMESPACE}"
            ));
        }
    }
    let mut sa = ServiceAccount::default();
    sa.metadata.name = Some(account.to_string());
    sa.metadata.namespace = Some(NAMESPACE.to_string());
    match api.create(&PostParams::default(), &sa).await {
        Ok(_) => {
            tracing::info!(
                account,
                namespace = NAMESPACE,
                "created the controller's ServiceAccount"
            );
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(format!(
            "cannot create the ServiceAccount {NAMESPACE}/{account}: {e}; this process's account needs `create` on serviceaccounts in {NAMESPACE}, or create the account yourself"
        )),
    }
}

/// One TokenRequest for `account`.
async fn request_token(root: &Client, account: &str) -> Result<Issued, String> {
    let api: Api<ServiceAccount> = Api::namespaced(root.clone(), NAMESPACE);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(EXPIRATION_SECONDS),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer: TokenRequest = api
        .create_subresource("token", account, &PostParams::default(), &request)
        .await
        .map_err(|e| {
            format!(
                "cannot get a token for the ServiceAccount {NAMESPACE}/{account}: {e}; this process's account needs `create` on serviceaccounts/token in {NAMESPACE}"
            )
        })?;
    let status = answer.status.ok_or_else(|| {
        format!("the TokenRequest for {NAMESPACE}/{account} was answered without a status")
    })?;
    if status.token.is_empty() {
        return Err(format!(
            "the TokenRequest for {NAMESPACE}/{account} was answered without a token"
        ));
    }
    let expires = status.expiration_timestamp.0;
    let left = expires.duration_since(jiff::Timestamp::now());
    let lifetime = Duration::try_from(left).unwrap_or(Duration::ZERO);
    Ok(Issued {
        token: status.token,
        lifetime: lifetime.max(MIN_LIFETIME),
    })
}

/// The current token of one account, shared by its client and its renewer.
#[derive(Default)]
struct Current {
    token: RwLock<String>,
    /// Woken by a 401: renew now.
    renew_now: Notify,
}

impl Current {
    fn get(&self) -> String {
        self.token.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, token: String) {
        *self.token.write().unwrap_or_else(|p| p.into_inner()) = token;
    }
}

/// A client whose requests carry the account's current token.
#[derive(Clone)]
struct WithToken {
    inner: Client,
    current: Arc<Current>,
}

impl tower_service::Service<Request<Body>> for WithToken {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, kube::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        if let Ok(value) = HeaderValue::from_str(&format!("Bearer {}", self.current.get())) {
            request.headers_mut().insert(AUTHORIZATION, value);
        }
        let inner = self.inner.clone();
        let current = Arc::clone(&self.current);
        Box::pin(async move {
            let response = inner.send(request).await?;
            if response.status() == http::StatusCode::UNAUTHORIZED {
                // The token was refused (revoked, or the account re-created): renew now.
                current.renew_now.notify_one();
            }
            Ok(response)
        })
    }
}

/// How the controllers' clients are made.
pub struct ServiceAccountOptions {
    /// The process's configuration (server, CA); its credentials are dropped.
    pub config: Config,
    /// The accounts to make clients for (see `wasm_ccm_controllers::CONTROLLER_ACCOUNTS`).
    pub accounts: Vec<&'static str>,
}

/// `config` without its credentials (`restclient.AnonymousClientConfig`).
pub fn anonymous(config: &Config) -> Config {
    let mut config = config.clone();
    config.auth_info = Default::default();
    config
}

/// Gets a first token for every account (failing, after upstream's four attempts each, with
/// what the process's account lacks), then starts each one's renewer (until `cancel`) and
/// returns the clients: the process's own `root` for the informers, one per account for the
/// controllers.
pub async fn controller_clients(
    root: &Client,
    opts: ServiceAccountOptions,
    agent: AgentFn,
    counted: RequestMetrics,
    events: Arc<Events>,
    cancel: &CancellationToken,
) -> Result<ControllerClients, String> {
    let mut clients = HashMap::new();
    for account in opts.accounts {
        if clients.contains_key(account) {
            continue;
        }
        let source: Arc<dyn TokenSource> = Arc::new(ApiTokens {
            root: root.clone(),
            account: account.to_string(),
        });
        let first = first_token(&*source, account).await?;
        let current = Arc::new(Current::default());
        current.set(first.token.clone());
        let base = Client::try_from(anonymous(&opts.config)).map_err(|e| {
            format!("cannot build the Kubernetes client of the ServiceAccount {account}: {e}")
        })?;
        let default_namespace = base.default_namespace().to_string();
        let with_token = Client::new(
            WithToken {
                inner: base,
                current: Arc::clone(&current),
            },
            default_namespace,
        );
        let user = username(account);
        let agent = Arc::clone(&agent);
        let client = with_user_agent(with_token, Arc::new(move || format!("{}/{user}", agent())));
        let client = counted.wrap(client);
        tokio::spawn(renew(
            account,
            source,
            current,
            first.lifetime,
            Failures::new(account, Some(Arc::clone(&events)))
                .with_metrics(Arc::clone(counted.registry())),
            cancel.clone(),
        ));
        tracing::info!(
            account,
            user = %username(account),
            "controllers of this account use its own token (--use-service-account-credentials)"
        );
        clients.insert(account, client);
    }
    Ok(ControllerClients::with_accounts(root.clone(), clients))
}

/// The first token, with upstream's backoff (0.5, 1, 2 s between four attempts).
async fn first_token(source: &dyn TokenSource, account: &str) -> Result<Issued, String> {
    let mut delay = FIRST_RETRY;
    let mut last = String::new();
    for attempt in 1..=START_ATTEMPTS {
        match source.fetch().await {
            Ok(issued) => return Ok(issued),
            Err(e) => {
                tracing::warn!(account, attempt, error = %e, "cannot get the controller's token yet");
                last = e;
            }
        }
        if attempt < START_ATTEMPTS {
            tokio::time::sleep(delay).await;
            delay *= 2;
        }
    }
    Err(format!(
        "--use-service-account-credentials: no token for the controllers' ServiceAccount {NAMESPACE}/{account} after {START_ATTEMPTS} attempts: {last}"
    ))
}

/// What the operator is told about failed renewals: a log line and a count
/// (`wasm_ccm_service_account_token_failures_total{account}`, for an alert) each, and one event
/// per run of failures.
struct Failures {
    account: &'static str,
    /// `None` in tests.
    events: Option<Arc<Events>>,
    /// `None` in tests that do not look.
    metrics: Option<Arc<Metrics>>,
    reported: bool,
}

impl Failures {
    fn new(account: &'static str, events: Option<Arc<Events>>) -> Self {
        Failures {
            account,
            events,
            metrics: None,
            reported: false,
        }
    }

    fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    async fn failed(&mut self, error: &str, expired: bool) {
        if let Some(m) = &self.metrics {
            m.inc(
                "wasm_ccm_service_account_token_failures_total",
                &[("account", self.account)],
            );
        }
        if expired {
            tracing::error!(
                account = self.account,
                error,
                "the controller's token has expired and cannot be renewed: its requests are refused until it is"
            );
        } else {
            tracing::warn!(
                account = self.account,
                error,
                "cannot renew the controller's token; the current one is still valid and stays in use"
            );
        }
        if self.reported {
            return;
        }
        self.reported = true;
        let Some(events) = &self.events else {
            return;
        };
        let regarding = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("ServiceAccount".into()),
            namespace: Some(NAMESPACE.into()),
            name: Some(self.account.into()),
            ..Default::default()
        };
        events
            .publish(
                "cloud-controller-manager",
                &regarding,
                true,
                FAILED_REASON,
                &format!("Cannot get a token for the controllers of this ServiceAccount: {error}"),
                "RequestToken",
            )
            .await;
    }

    fn recovered(&mut self) {
        if self.reported {
            tracing::info!(
                account = self.account,
                "the controller's token was renewed again"
            );
        }
        self.reported = false;
    }
}

/// Renews `current` when 20% of its lifetime is left, or at once after a 401, until `cancel`.
/// A failure keeps the old token and retries with a doubling delay (at most [`MAX_RETRY`]).
async fn renew(
    account: &'static str,
    source: Arc<dyn TokenSource>,
    current: Arc<Current>,
    lifetime: Duration,
    mut failures: Failures,
    cancel: CancellationToken,
) {
    let mut issued_at = Instant::now();
    let mut lifetime = lifetime;
    loop {
        let due = issued_at + renew_after(lifetime);
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep_until(due) => {}
            _ = current.renew_now.notified() => {
                tracing::info!(account, "a request with the controller's token was refused (401): renewing it");
            }
        }
        let mut delay = FIRST_RETRY;
        loop {
            match source.fetch().await {
                Ok(issued) => {
                    current.set(issued.token);
                    issued_at = Instant::now();
                    lifetime = issued.lifetime;
                    failures.recovered();
                    tracing::debug!(account, ?lifetime, "renewed the controller's token");
                    break;
                }
                Err(e) => {
                    let expired = Instant::now() >= issued_at + lifetime;
                    failures.failed(&e, expired).await;
                }
            }
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(MAX_RETRY);
        }
    }
}

#[cfg(test)]
mod tests;
