//! Delegated authentication and authorization of the serving port, as upstream's
//! controller-manager does (`k8s.io/controller-manager/app/serve.go` `BuildHandlerChain`:
//! `WithAuthorization` inside `WithAuthentication`), written anew from `k8s.io/apiserver`:
//!
//! - Authentication (`pkg/server/options/authentication.go` `DelegatingAuthenticationOptions`,
//!   `pkg/authentication/authenticatorfactory/delegating.go`): a bearer token
//!   (`pkg/authentication/request/bearertoken`) is checked with a TokenReview and the answer is
//!   cached for `CacheTTL` (`--authentication-token-webhook-cache-ttl`, 10 s) under the token's
//!   sha256: an accepted token, and a rejected one whose review carries no `status.error`. A
//!   rejection with `status.error` is an error to the webhook authenticator, and errors are not
//!   cached (`cache.New(tokenAuth, false, …)`), so such a token is reviewed again on every
//!   request, as is one whose review failed. No token, a non-bearer scheme or an empty token is
//!   anonymous (`system:anonymous`, group `system:unauthenticated`); a rejected token or a failed
//!   review is an error, never anonymous (`union.NewFailOnError`), and answers 401 on every path.
//!   Authenticated users get `system:authenticated` unless they are anonymous or unauthenticated
//!   already (`group.NewAuthenticatedGroupAdder`).
//! - Authorization (`pkg/server/options/authorization.go` `DelegatingAuthorizationOptions`): a
//!   union of `system:masters` (`AlwaysAllowGroups`), the always-allowed paths
//!   (`pkg/authorization/path`: exact, or a prefix with a trailing `*`, the leading `/`
//!   optional) and a SubjectAccessReview (`plugin/pkg/authorizer/webhook`) for a non-resource
//!   request (`verb` = the lower-case method, `path`), cached 10 s when allowed
//!   (`AllowCacheTTL`, `--authorization-webhook-cache-authorized-ttl`) and 10 s when not
//!   (`DenyCacheTTL`, `--authorization-webhook-cache-unauthorized-ttl`) under the sha256 of the
//!   review's spec, except when the caller-controlled attributes (verb and path) reach 10000
//!   bytes (`maxControlledAttrCacheSize`). Not allowed → 403 worded like
//!   `responsewriters.Forbidden`; a failed review, or one answering both allowed and denied →
//!   500 like `responsewriters.InternalError` (`pkg/endpoints/filters/authorization.go`).
//! - Both caches hold at most 8192 entries (the webhook authorizer's LRU size), evicting the
//!   oldest and dropping expired ones as they insert, so neither distinct tokens nor distinct
//!   paths can grow memory without bound.
//! - Reviews are throttled like upstream's review clients (QPS 200, burst 400) and at most 32 of
//!   each kind are in flight; concurrent requests with one token (or one review spec) share one
//!   review. A request that cannot get its review within the review timeout (10 s, upstream's
//!   too) fails closed: 401 for a token, 500 for an authorization. Failed reviews are not retried.
//!
//! Without `--authentication-kubeconfig`/`--authorization-kubeconfig` upstream uses the in-cluster
//! configuration (and, outside a cluster, no token review and no SubjectAccessReview); here the
//! reviews then go through the client the controllers use (in a cluster, the same in-cluster
//! identity; outside one, the --kubeconfig/--master connection).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::FutureExt as _;
use futures::future::{BoxFuture, Shared};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use sha2::{Digest as _, Sha256};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use wasm_ccm_controllers::Metrics;
use wasm_ccm_runtime::TokenBucket;

/// Upstream's `DelegatingAuthenticationOptions.CacheTTL` (`--authentication-token-webhook-cache-ttl`).
#[cfg(test)]
pub(crate) const TOKEN_CACHE_TTL: Duration = Duration::from_secs(10);
/// Upstream's `DelegatingAuthorizationOptions.AllowCacheTTL`
/// (`--authorization-webhook-cache-authorized-ttl`).
#[cfg(test)]
pub(crate) const ALLOW_CACHE_TTL: Duration = Duration::from_secs(10);
/// Upstream's `DelegatingAuthorizationOptions.DenyCacheTTL`
/// (`--authorization-webhook-cache-unauthorized-ttl`).
#[cfg(test)]
pub(crate) const DENY_CACHE_TTL: Duration = Duration::from_secs(10);
/// Upstream's `TokenRequestTimeout` and the SubjectAccessReview `ClientTimeout`; here also the
/// most a request waits for its turn to be reviewed.
pub(crate) const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// Entries kept per cache: the webhook authorizer's `authorizerLRUCacheSize`. With sha256 keys
/// and values written by the apiserver, a full cache is a few megabytes.
const CACHE_CAPACITY: usize = 8192;
/// Upstream's `maxControlledAttrCacheSize`: a decision about attributes this large (the
/// caller's verb and path) is not cached, so a caller cannot fill the cache with its own bytes.
const MAX_CONTROLLED_ATTR_CACHE_SIZE: usize = 10_000;
/// Upstream's review clients (`DelegatingAuthenticationOptions`/`DelegatingAuthorizationOptions`
/// `ClientQPS`/`ClientBurst`, each kind its own client).
const REVIEW_QPS: f64 = 200.0;
const REVIEW_BURST: u32 = 400;
/// Reviews of one kind sent at once; more wait for a slot (within [`REVIEW_TIMEOUT`]).
const MAX_IN_FLIGHT_REVIEWS: usize = 32;
/// Distinct reviews of one kind waiting or in flight. Each holds the caller's token or path (up
/// to the header limit of the port) until it ends, so their number is capped; beyond it a
/// request fails at once (401/500) rather than queueing.
const MAX_PENDING_REVIEWS: usize = 256;

/// Upstream's `AlwaysAllowGroups` (not a flag).
const ALWAYS_ALLOW_GROUPS: &[&str] = &["system:masters"];
/// `user.AllAuthenticated`.
const ALL_AUTHENTICATED: &str = "system:authenticated";
/// `user.AllUnauthenticated`.
const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
/// `user.Anonymous`.
const ANONYMOUS: &str = "system:anonymous";

/// The identity of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct User {
    /// The user name.
    pub(crate) name: String,
    /// The UID (may be empty).
    pub(crate) uid: String,
    /// The groups.
    pub(crate) groups: Vec<String>,
    /// Extra attributes from the authenticator.
    pub(crate) extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl User {
    /// `user.Anonymous` with `user.AllUnauthenticated` (`pkg/authentication/request/anonymous`).
    pub(crate) fn anonymous() -> User {
        User {
            name: ANONYMOUS.into(),
            uid: String::new(),
            groups: vec![ALL_UNAUTHENTICATED.into()],
            extra: Default::default(),
        }
    }

    /// `group.NewAuthenticatedGroupAdder`: adds `system:authenticated` unless the user is
    /// anonymous or already in `system:authenticated` or `system:unauthenticated`.
    fn with_authenticated_group(mut self) -> User {
        let unchanged = self.name == ANONYMOUS
            || self
                .groups
                .iter()
                .any(|g| g == ALL_AUTHENTICATED || g == ALL_UNAUTHENTICATED);
        if !unchanged {
            self.groups.push(ALL_AUTHENTICATED.into());
        }
        self
    }
}

/// Why a request could not be authenticated (all answer 401).
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum AuthnError {
    /// The TokenReview said the token is not valid (`invalid bearer token` upstream).
    #[error("invalid bearer token{}", if .0.is_empty() { String::new() } else { format!(": {}", .0) })]
    Rejected(String),
    /// The TokenReview could not be made.
    #[error("TokenReview failed: {0}")]
    Review(String),
}

/// An authorization decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Allowed.
    Allow,
    /// Denied or no opinion, with the reviewer's reason (maybe empty).
    Forbid(String),
}

/// The settings of delegated authentication and authorization on the serving port: who reviews
/// tokens and access, which paths need neither, and how long answers are cached.
pub struct DelegatedAuthOptions {
    /// Creates TokenReviews (`--authentication-kubeconfig`); `None`: the controllers' client.
    pub authentication: Option<kube::Client>,
    /// Creates SubjectAccessReviews (`--authorization-kubeconfig`); `None`: the controllers'
    /// client.
    pub authorization: Option<kube::Client>,
    /// `--authorization-always-allow-paths` ([`AlwaysAllowPaths::new`]; upstream's default is
    /// `/healthz`, `/readyz`, `/livez`).
    pub always_allow_paths: AlwaysAllowPaths,
    /// `--authentication-token-webhook-cache-ttl` (upstream's default 10 s; zero: no cache).
    pub token_cache_ttl: Duration,
    /// `--authorization-webhook-cache-authorized-ttl` (upstream's default 10 s; zero: no cache).
    pub allow_cache_ttl: Duration,
    /// `--authorization-webhook-cache-unauthorized-ttl` (upstream's default 10 s; zero: no cache).
    pub deny_cache_ttl: Duration,
}

/// `pkg/authorization/path.NewAuthorizer`: exact paths and prefixes (a trailing `*`), compared
/// without the leading `/`.
#[derive(Debug, Clone, Default)]
pub struct AlwaysAllowPaths {
    exact: Vec<String>,
    prefixes: Vec<String>,
}

impl AlwaysAllowPaths {
    /// Fails, as upstream, on a `*` anywhere but at the end.
    pub fn new(paths: &[String]) -> Result<AlwaysAllowPaths, String> {
        let mut out = AlwaysAllowPaths::default();
        for p in paths {
            let p = p.strip_prefix('/').unwrap_or(p);
            if p.is_empty() {
                // Matches "/".
                out.exact.push(String::new());
                continue;
            }
            let (body, prefix) = match p.strip_suffix('*') {
                Some(body) => (body, true),
                None => (p, false),
            };
            if body.contains('*') {
                return Err(format!(
                    "--authorization-always-allow-paths: only trailing * allowed in {p:?}"
                ));
            }
            if prefix {
                out.prefixes.push(body.to_string());
            } else {
                out.exact.push(body.to_string());
            }
        }
        Ok(out)
    }

    /// Whether `path` skips authorization.
    pub(crate) fn allows(&self, path: &str) -> bool {
        let p = path.strip_prefix('/').unwrap_or(path);
        self.exact.iter().any(|e| e == p) || self.prefixes.iter().any(|x| p.starts_with(x.as_str()))
    }
}

/// A cache key: the sha256 of what is looked up (a token, a review spec), so an entry's size does
/// not depend on what the caller sent.
type Key = [u8; 32];

fn key_of(bytes: &[u8]) -> Key {
    Sha256::digest(bytes).into()
}

struct Entry<V> {
    value: V,
    expires: Instant,
    /// Which record of `TtlCache::order` belongs to this entry.
    seq: u64,
}

/// A TTL cache of at most `capacity` entries that evicts in insertion order: each insert first
/// drops the expired entries at the front, then the oldest ones while full. With one TTL per
/// kind of answer, insertion order is expiry order, so this is what an LRU with expiry keeps.
struct TtlCache<V> {
    entries: HashMap<Key, Entry<V>>,
    /// (seq, key) by insertion; a record whose seq no longer matches its entry is stale (the key
    /// was inserted again or dropped) and is skipped.
    order: VecDeque<(u64, Key)>,
    next_seq: u64,
    capacity: usize,
}

impl<V: Clone> TtlCache<V> {
    fn new(capacity: usize) -> Self {
        TtlCache {
            entries: HashMap::new(),
            order: VecDeque::new(),
            next_seq: 0,
            capacity: capacity.max(1),
        }
    }

    fn get(&mut self, key: &Key) -> Option<V> {
        match self.entries.get(key) {
            Some(e) if e.expires > Instant::now() => Some(e.value.clone()),
            Some(_) => {
                self.entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Drops the front record of `order` and its entry when it still belongs to it.
    fn pop_front(&mut self) {
        if let Some((seq, key)) = self.order.pop_front()
            && self.entries.get(&key).is_some_and(|e| e.seq == seq)
        {
            self.entries.remove(&key);
        }
    }

    fn insert(&mut self, key: Key, value: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let now = Instant::now();
        // Expired (or stale) records at the front go first, so a burst of answers that expired
        // long ago does not sit in memory until the cache is full.
        while let Some((seq, front)) = self.order.front() {
            let live = self
                .entries
                .get(front)
                .is_some_and(|e| e.seq == *seq && e.expires > now);
            if live {
                break;
            }
            self.pop_front();
        }
        while self.order.len() >= self.capacity {
            self.pop_front();
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.order.push_back((seq, key));
        self.entries.insert(
            key,
            Entry {
                value,
                expires: now + ttl,
                seq,
            },
        );
    }
}

/// What one kind of review may send: a slot among [`MAX_IN_FLIGHT_REVIEWS`] and a token of the
/// bucket.
struct Throttle {
    slots: Arc<Semaphore>,
    bucket: TokenBucket,
}

impl Throttle {
    fn new(in_flight: usize, qps: f64, burst: u32) -> Throttle {
        Throttle {
            slots: Arc::new(Semaphore::new(in_flight.max(1))),
            bucket: TokenBucket::new(qps, burst),
        }
    }

    /// Waits for a slot and a token until `deadline`; the slot is held while the review runs.
    async fn admit(&self, deadline: Instant) -> Result<OwnedSemaphorePermit, String> {
        let throttled = || format!("throttled: no review could be sent within {REVIEW_TIMEOUT:?}");
        let slot = tokio::time::timeout_at(deadline, Arc::clone(&self.slots).acquire_owned())
            .await
            .map_err(|_| throttled())?
            .map_err(|_| throttled())?;
        let at = self.bucket.reserve_before(deadline).ok_or_else(throttled)?;
        tokio::time::sleep_until(at).await;
        Ok(slot)
    }
}

/// A review shared by every request that needs it while it runs.
type Flight<V, E> = Shared<BoxFuture<'static, Result<V, E>>>;

/// The reviews under way of one kind, by cache key.
struct Flights<V, E> {
    pending: Mutex<HashMap<Key, Flight<V, E>>>,
}

impl<V: Clone + Send + Sync + 'static, E: Clone + Send + Sync + 'static> Flights<V, E> {
    fn new() -> Self {
        Flights {
            pending: Mutex::new(HashMap::new()),
        }
    }

    /// Joins the review under way for `key`, or spawns `review` as a task of its own (it runs to
    /// its end, bounded by the review timeout, even when every request waiting for it is gone,
    /// so a later request never joins an abandoned one). `busy` is the error when
    /// [`MAX_PENDING_REVIEWS`] are under way already, `failed` the one when the task panicked.
    fn join(
        self: &Arc<Self>,
        key: Key,
        busy: E,
        failed: E,
        review: impl Future<Output = Result<V, E>> + Send + 'static,
    ) -> Result<Flight<V, E>, E> {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(flight) = pending.get(&key) {
            return Ok(flight.clone());
        }
        if pending.len() >= MAX_PENDING_REVIEWS {
            return Err(busy);
        }
        let flights = Arc::clone(self);
        let task = tokio::spawn(async move {
            let result = review.await;
            flights
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&key);
            result
        });
        let flight = async move { task.await.unwrap_or(Err(failed)) }
            .boxed()
            .shared();
        pending.insert(key, flight.clone());
        Ok(flight)
    }
}

/// What the review tasks share with the middleware.
struct Inner {
    authentication: kube::Client,
    authorization: kube::Client,
    token_ttl: Duration,
    allow_ttl: Duration,
    deny_ttl: Duration,
    /// sha256(token) → the user, or `None` for a rejected token.
    tokens: Mutex<TtlCache<Option<User>>>,
    /// sha256(SubjectAccessReview spec as JSON) → the decision.
    decisions: Mutex<TtlCache<Decision>>,
    authn_throttle: Throttle,
    authz_throttle: Throttle,
    metrics: Arc<Metrics>,
}

/// The authenticator and authorizer of the serving port.
pub(crate) struct DelegatedAuth {
    inner: Arc<Inner>,
    paths: AlwaysAllowPaths,
    token_flights: Arc<Flights<Option<User>, AuthnError>>,
    decision_flights: Arc<Flights<Decision, String>>,
}

impl DelegatedAuth {
    /// Reviews through `client` where `opts` names no client of its own; counts the reviews
    /// in `metrics`.
    pub(crate) fn new(
        opts: DelegatedAuthOptions,
        client: &kube::Client,
        metrics: Arc<Metrics>,
    ) -> DelegatedAuth {
        DelegatedAuth::with_throttles(
            opts,
            client,
            metrics,
            Throttle::new(MAX_IN_FLIGHT_REVIEWS, REVIEW_QPS, REVIEW_BURST),
            Throttle::new(MAX_IN_FLIGHT_REVIEWS, REVIEW_QPS, REVIEW_BURST),
        )
    }

    fn with_throttles(
        opts: DelegatedAuthOptions,
        client: &kube::Client,
        metrics: Arc<Metrics>,
        authn_throttle: Throttle,
        authz_throttle: Throttle,
    ) -> DelegatedAuth {
        DelegatedAuth {
            inner: Arc::new(Inner {
                authentication: opts.authentication.unwrap_or_else(|| client.clone()),
                authorization: opts.authorization.unwrap_or_else(|| client.clone()),
                token_ttl: opts.token_cache_ttl,
                allow_ttl: opts.allow_cache_ttl,
                deny_ttl: opts.deny_cache_ttl,
                tokens: Mutex::new(TtlCache::new(CACHE_CAPACITY)),
                decisions: Mutex::new(TtlCache::new(CACHE_CAPACITY)),
                authn_throttle,
                authz_throttle,
                metrics,
            }),
            paths: opts.always_allow_paths,
            token_flights: Arc::new(Flights::new()),
            decision_flights: Arc::new(Flights::new()),
        }
    }

    /// The user of a request with this `Authorization` header value.
    pub(crate) async fn authenticate(
        &self,
        authorization: Option<&str>,
    ) -> Result<User, AuthnError> {
        let Some(token) = bearer_token(authorization) else {
            return Ok(User::anonymous());
        };
        let key = key_of(token.as_bytes());
        let cached = self
            .inner
            .tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key);
        let user = match cached {
            Some(user) => user,
            None => {
                let inner = Arc::clone(&self.inner);
                let token = token.to_string();
                let flight = self.token_flights.join(
                    key,
                    AuthnError::Review("too many token reviews under way".into()),
                    AuthnError::Review("the token review task failed".into()),
                    async move { inner.review_token(key, token).await },
                )?;
                flight.await?
            }
        };
        let user = user.ok_or_else(|| AuthnError::Rejected(String::new()))?;
        Ok(user.with_authenticated_group())
    }

    /// Authorizes a non-resource request: `verb` (lower-case method) on `path`.
    pub(crate) async fn authorize(
        &self,
        user: &User,
        verb: &str,
        path: &str,
    ) -> Result<Decision, String> {
        if user
            .groups
            .iter()
            .any(|g| ALWAYS_ALLOW_GROUPS.contains(&g.as_str()))
        {
            return Ok(Decision::Allow);
        }
        if self.paths.allows(path) {
            return Ok(Decision::Allow);
        }
        let spec = SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
            groups: Some(user.groups.clone()),
            extra: (!user.extra.is_empty()).then(|| user.extra.clone().into_iter().collect()),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.to_string()),
                verb: Some(verb.to_string()),
            }),
            resource_attributes: None,
        };
        let key = key_of(&serde_json::to_vec(&spec).map_err(|e| e.to_string())?);
        if let Some(d) = self
            .inner
            .decisions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Ok(d);
        }
        // `shouldCache`: the attributes a caller controls (a non-resource request has no
        // namespace, group, resource or name).
        let cache = verb.len() + path.len() < MAX_CONTROLLED_ATTR_CACHE_SIZE;
        let inner = Arc::clone(&self.inner);
        let flight = self.decision_flights.join(
            key,
            "too many SubjectAccessReviews under way".to_string(),
            "the SubjectAccessReview task failed".to_string(),
            async move { inner.review_access(key, spec, cache).await },
        )?;
        flight.await
    }
}

impl Inner {
    /// Reviews `token` and caches the answer; `None`: the token is not valid. Errors are the
    /// review's own failures and rejections that carry an error, neither cached.
    async fn review_token(&self, key: Key, token: String) -> Result<Option<User>, AuthnError> {
        let deadline = Instant::now() + REVIEW_TIMEOUT;
        let _slot = self
            .authn_throttle
            .admit(deadline)
            .await
            .map_err(AuthnError::Review)?;
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token),
                audiences: None,
            },
            ..Default::default()
        };
        let api = kube::Api::<TokenReview>::all(self.authentication.clone());
        let result = with_retries(deadline, || async {
            let started = Instant::now();
            let result = api.create(&PostParams::default(), &review).await;
            let code = status_code(&result, "201");
            self.count("apiserver_delegated_authn_request_total", &code);
            self.metrics.observe(
                "apiserver_delegated_authn_request_duration_seconds",
                &[("code", &code)],
                started.elapsed().as_secs_f64(),
            );
            result
        })
        .await;
        let Some(result) = result else {
            self.count("apiserver_delegated_authn_request_total", "<error>");
            return Err(AuthnError::Review(format!(
                "no answer within {REVIEW_TIMEOUT:?}"
            )));
        };
        let answered = result.map_err(|e| AuthnError::Review(e.to_string()))?;
        let user = match answered.status {
            None => None,
            Some(status) if status.authenticated != Some(true) => {
                // The webhook authenticator returns the review's error, else "invalid bearer
                // token"; only the latter is an answer the cache keeps.
                if let Some(e) = status.error.filter(|e| !e.is_empty()) {
                    return Err(AuthnError::Rejected(e));
                }
                None
            }
            Some(status) => {
                let info = status.user.unwrap_or_default();
                Some(User {
                    name: info.username.unwrap_or_default(),
                    uid: info.uid.unwrap_or_default(),
                    groups: info.groups.unwrap_or_default(),
                    extra: info.extra.unwrap_or_default().into_iter().collect(),
                })
            }
        };
        self.tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, user.clone(), self.token_ttl);
        Ok(user)
    }

    /// Sends the SubjectAccessReview `spec` and caches the decision when `cache`.
    async fn review_access(
        &self,
        key: Key,
        spec: SubjectAccessReviewSpec,
        cache: bool,
    ) -> Result<Decision, String> {
        let deadline = Instant::now() + REVIEW_TIMEOUT;
        let _slot = self
            .authz_throttle
            .admit(deadline)
            .await
            .map_err(|e| format!("SubjectAccessReview {e}"))?;
        let api = kube::Api::<SubjectAccessReview>::all(self.authorization.clone());
        let review = SubjectAccessReview {
            spec,
            ..Default::default()
        };
        let result = with_retries(deadline, || async {
            let started = Instant::now();
            let result = api.create(&PostParams::default(), &review).await;
            let code = status_code(&result, "201");
            self.count("apiserver_delegated_authz_request_total", &code);
            self.metrics.observe(
                "apiserver_delegated_authz_request_duration_seconds",
                &[("code", &code)],
                started.elapsed().as_secs_f64(),
            );
            result
        })
        .await;
        let Some(result) = result else {
            self.count("apiserver_delegated_authz_request_total", "<error>");
            return Err(format!(
                "SubjectAccessReview: no answer within {REVIEW_TIMEOUT:?}"
            ));
        };
        let answered = result.map_err(|e| format!("SubjectAccessReview failed: {e}"))?;
        let status = answered.status.unwrap_or_default();
        let denied = status.denied == Some(true);
        let (decision, ttl) = match (status.allowed, denied) {
            // As the webhook authorizer: contradictory answers are an error, never an allow.
            (true, true) => {
                return Err(
                    "webhook subject access review returned both allow and deny response"
                        .to_string(),
                );
            }
            (true, false) => (Decision::Allow, self.allow_ttl),
            (false, _) => (
                Decision::Forbid(status.reason.unwrap_or_default()),
                self.deny_ttl,
            ),
        };
        if cache {
            self.decisions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(key, decision.clone(), ttl);
        }
        Ok(decision)
    }

    fn count(&self, name: &str, code: &str) {
        self.metrics.inc(name, &[("code", code)]);
    }
}

/// Attempts of one review, as upstream's `DefaultAuthWebhookRetryBackoff` (500 ms, factor 1.5,
/// jitter 0.2, 5 steps, `k8s.io/apiserver/pkg/server/options/authentication.go`).
const REVIEW_ATTEMPTS: u32 = 5;
const REVIEW_RETRY_FIRST: Duration = Duration::from_millis(500);

/// Whether a failed review is worth another attempt, as upstream's `webhook.DefaultShouldRetry`:
/// a broken connection, a 500 or 504, a 429, or any answer that asks for a delay. A 4xx
/// answer is final (a retry would get the same).
fn should_retry(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(status) => {
            matches!(status.code, 429 | 500 | 504)
                || status
                    .details
                    .as_ref()
                    .is_some_and(|d| d.retry_after_seconds > 0)
        }
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// Runs `attempt` until it succeeds, fails for good, or the attempts or the deadline run out;
/// `None` when the deadline passed with no answer. The waits grow by 1.5 with up to 20% jitter
/// (so replicas restarted together do not retry in step), and a wait that would end past the
/// deadline is not started: the last error is returned instead.
async fn with_retries<T, F, Fut>(
    deadline: Instant,
    mut attempt: F,
) -> Option<Result<T, kube::Error>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut wait = REVIEW_RETRY_FIRST;
    for n in 1..=REVIEW_ATTEMPTS {
        let result = tokio::time::timeout_at(deadline, attempt()).await.ok()?;
        match result {
            Err(e) if n < REVIEW_ATTEMPTS && should_retry(&e) => {
                let jittered = wait.mul_f64(1.0 + 0.2 * jitter());
                if Instant::now() + jittered >= deadline {
                    return Some(Err(e));
                }
                tracing::debug!(error = %e, retry_in = ?jittered, "delegated review failed; retrying");
                tokio::time::sleep(jittered).await;
                wait = wait.mul_f64(1.5);
            }
            other => return Some(other),
        }
    }
    None
}

/// A number in [0, 1) from the clock's sub-second part: enough to spread retries, no RNG needed.
fn jitter() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    f64::from(nanos % 1_000) / 1_000.0
}

/// The HTTP status of a review call, for the `code` label.
fn status_code<T>(result: &Result<T, kube::Error>, ok: &str) -> String {
    match result {
        Ok(_) => ok.to_string(),
        Err(kube::Error::Api(status)) => status.code.to_string(),
        Err(_) => "<error>".to_string(),
    }
}

/// The token of an `Authorization: Bearer` header, as `bearertoken.Authenticator` reads it:
/// the scheme is case-insensitive and separated by one space; an empty token (two spaces) or
/// another scheme is no token at all.
pub(crate) fn bearer_token(authorization: Option<&str>) -> Option<&str> {
    let auth = authorization?.trim();
    let mut parts = auth.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// A `metav1.Status` failure, as the apiserver's response writers send it.
fn status_response(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {},
        "code": code.as_u16(),
    });
    (
        code,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body.to_string(),
    )
        .into_response()
}

/// The middleware: authentication, then authorization, then the route.
pub(super) async fn filter(
    State(auth): State<Arc<DelegatedAuth>>,
    req: Request,
    next: Next,
) -> Response {
    let header_value = req
        .headers()
        .get(header::AUTHORIZATION)
        // Not UTF-8: still a token to review (and reject), never a reason to be anonymous.
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let user = match auth.authenticate(header_value.as_deref()).await {
        Ok(u) => u,
        Err(e) => {
            // `WithAuthentication`: logged, then `Unauthorized` (a plain "Unauthorized" Status).
            tracing::info!(error = %e, path = %req.uri().path(), "unable to authenticate the request");
            return status_response(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
        }
    };
    let verb = req.method().as_str().to_ascii_lowercase();
    let path = req.uri().path().to_string();
    match auth.authorize(&user, &verb, &path).await {
        Ok(Decision::Allow) => {
            let mut req = req;
            // Like bearertoken after a success: the token goes no further.
            req.headers_mut().remove(header::AUTHORIZATION);
            next.run(req).await
        }
        Ok(Decision::Forbid(reason)) => {
            tracing::debug!(user = %user.name, %verb, %path, %reason, "forbidden");
            let mut message = format!(
                "forbidden: User {:?} cannot {verb} path {path:?}",
                user.name
            );
            if !reason.is_empty() {
                message.push_str(": ");
                message.push_str(&reason);
            }
            status_response(StatusCode::FORBIDDEN, "Forbidden", &message)
        }
        Err(e) => {
            tracing::warn!(error = %e, user = %user.name, %path, "authorization failed");
            let uri = req
                .uri()
                .path_and_query()
                .map(|p| p.as_str().to_string())
                .unwrap_or(path);
            let mut resp = (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Internal Server Error: {uri:?}: {e}\n"),
            )
                .into_response();
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            resp.headers_mut().insert(
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            );
            resp
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_like_upstream() {
        assert_eq!(bearer_token(None), None);
        assert_eq!(bearer_token(Some("")), None);
        assert_eq!(bearer_token(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(Some("bearer abc")), Some("abc"));
        assert_eq!(bearer_token(Some("  BEARER abc  ")), Some("abc"));
        assert_eq!(bearer_token(Some("Bearer abc def")), Some("abc"));
        // Two spaces: an empty token, i.e. none (anonymous), as upstream.
        assert_eq!(bearer_token(Some("Bearer  abc")), None);
        assert_eq!(bearer_token(Some("Basic abc")), None);
        assert_eq!(bearer_token(Some("Bearer")), None);
    }

    #[test]
    fn always_allowed_paths_match_like_path_new_authorizer() {
        let paths: Vec<String> = ["/healthz", "readyz", "/debug/*", "/"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let a = AlwaysAllowPaths::new(&paths).expect("valid");
        assert!(a.allows("/healthz"));
        assert!(a.allows("/readyz"));
        assert!(a.allows("/debug/pprof"));
        assert!(a.allows("/"));
        assert!(!a.allows("/healthz/ping"));
        assert!(!a.allows("/metrics"));
        let bad = vec!["/a*b".to_string()];
        assert!(AlwaysAllowPaths::new(&bad).is_err());
    }

    fn key(i: usize) -> Key {
        key_of(format!("k{i}").as_bytes())
    }

    #[tokio::test(start_paused = true)]
    async fn cache_is_bounded_and_expires() {
        let mut c = TtlCache::new(CACHE_CAPACITY);
        c.insert(key(0), 1, Duration::from_secs(60));
        assert_eq!(c.get(&key(0)), Some(1));
        c.insert(key(1), 2, Duration::ZERO);
        assert_eq!(c.get(&key(1)), None);
        for i in 0..(CACHE_CAPACITY + 10) {
            c.insert(key(i), i, Duration::from_secs(60));
        }
        assert!(c.entries.len() <= CACHE_CAPACITY);
        assert!(c.order.len() <= CACHE_CAPACITY);
        // The oldest went first; the newest stayed.
        assert_eq!(c.get(&key(0)), None);
        assert_eq!(c.get(&key(CACHE_CAPACITY + 9)), Some(CACHE_CAPACITY + 9));
    }

    #[tokio::test(start_paused = true)]
    async fn expired_entries_are_swept_when_inserting_below_the_cap() {
        let mut c = TtlCache::new(CACHE_CAPACITY);
        for i in 0..100 {
            c.insert(key(i), i, Duration::from_secs(10));
        }
        tokio::time::advance(Duration::from_secs(11)).await;
        c.insert(key(1000), 1000, Duration::from_secs(10));
        assert_eq!(c.entries.len(), 1, "expired answers are dropped at once");
        assert_eq!(c.order.len(), 1);
        // A key inserted again leaves one live entry and no stale record behind for long.
        c.insert(key(1000), 1001, Duration::from_secs(10));
        assert_eq!(c.get(&key(1000)), Some(1001));
        tokio::time::advance(Duration::from_secs(11)).await;
        c.insert(key(7), 7, Duration::from_secs(10));
        assert_eq!((c.entries.len(), c.order.len()), (1, 1));
    }

    #[test]
    fn authenticated_group_is_added_like_the_group_adder() {
        let user = |name: &str, groups: &[&str]| User {
            name: name.into(),
            uid: String::new(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            extra: Default::default(),
        };
        assert_eq!(
            user("jane", &["dev"]).with_authenticated_group().groups,
            ["dev", ALL_AUTHENTICATED]
        );
        // Unchanged: the anonymous user, and members of either all-group.
        assert_eq!(
            user(ANONYMOUS, &[]).with_authenticated_group().groups,
            Vec::<String>::new()
        );
        assert_eq!(
            user("x", &[ALL_UNAUTHENTICATED])
                .with_authenticated_group()
                .groups,
            [ALL_UNAUTHENTICATED]
        );
        assert_eq!(
            user("x", &[ALL_AUTHENTICATED])
                .with_authenticated_group()
                .groups,
            [ALL_AUTHENTICATED]
        );
    }

    /// An apiserver answering TokenReviews and SubjectAccessReviews with `answer`, each call held
    /// until `gate` has a permit.
    #[derive(Clone)]
    struct FakeApi {
        calls: Arc<Mutex<Vec<String>>>,
        gate: Arc<Semaphore>,
        answer: Arc<Answer>,
        /// HTTP codes answered (as `Status` failures) before the next normal answers.
        failures: Arc<Mutex<VecDeque<u16>>>,
    }

    /// The status a fake review gets, from the request path and the review sent.
    type Answer = dyn Fn(&str, &serde_json::Value) -> serde_json::Value + Send + Sync;

    impl FakeApi {
        fn new(
            answer: impl Fn(&str, &serde_json::Value) -> serde_json::Value + Send + Sync + 'static,
        ) -> FakeApi {
            FakeApi {
                calls: Arc::default(),
                gate: Arc::new(Semaphore::new(Semaphore::MAX_PERMITS)),
                answer: Arc::new(answer),
                failures: Arc::default(),
            }
        }

        /// Answers the next calls with these failure codes, in order.
        fn failing(self, codes: &[u16]) -> FakeApi {
            self.failures
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(codes);
            self
        }

        /// Holds every call until [`FakeApi::release`].
        fn gated(self) -> FakeApi {
            FakeApi {
                gate: Arc::new(Semaphore::new(0)),
                ..self
            }
        }

        fn release(&self, calls: usize) {
            self.gate.add_permits(calls);
        }

        fn calls(&self, kind: &str) -> usize {
            self.calls
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .filter(|p| p.ends_with(kind))
                .count()
        }
    }

    impl tower_service::Service<http::Request<kube::client::Body>> for FakeApi {
        type Response = http::Response<axum::body::Body>;
        type Error = std::convert::Infallible;
        type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

        fn poll_ready(
            &mut self,
            _cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: http::Request<kube::client::Body>) -> Self::Future {
            let this = self.clone();
            async move {
                let path = req.uri().path().to_string();
                let body = axum::body::to_bytes(axum::body::Body::new(req.into_body()), 1 << 20)
                    .await
                    .unwrap_or_default();
                let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                this.calls
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(path.clone());
                if let Ok(permit) = this.gate.acquire().await {
                    permit.forget();
                }
                let failure = this
                    .failures
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .pop_front();
                if let Some(code) = failure {
                    let status = serde_json::json!({
                        "kind": "Status", "apiVersion": "v1", "metadata": {},
                        "status": "Failure", "message": "injected", "reason": "InternalError",
                        "code": code,
                    });
                    return Ok(http::Response::builder()
                        .status(code)
                        .header("content-type", "application/json")
                        .body(axum::body::Body::from(status.to_string()))
                        .expect("a response"));
                }
                let mut answer = body;
                answer["status"] = (this.answer)(&path, &answer);
                Ok(http::Response::builder()
                    .status(201)
                    .header("content-type", "application/json")
                    .body(axum::body::Body::from(answer.to_string()))
                    .expect("a response"))
            }
            .boxed()
        }
    }

    /// Accepts the token `good` as `jane`; denies every access with reason "no".
    fn plain_answers(path: &str, review: &serde_json::Value) -> serde_json::Value {
        if path.ends_with("/tokenreviews") {
            if review["spec"]["token"] == "good" {
                serde_json::json!({"authenticated": true, "user": {"username": "jane"}})
            } else {
                serde_json::json!({"authenticated": false})
            }
        } else {
            serde_json::json!({"allowed": false, "reason": "no"})
        }
    }

    fn auth_with(api: &FakeApi, throttle: (usize, f64, u32)) -> DelegatedAuth {
        let client = kube::Client::new(api.clone(), "default");
        let (slots, qps, burst) = throttle;
        DelegatedAuth::with_throttles(
            DelegatedAuthOptions {
                authentication: None,
                authorization: None,
                always_allow_paths: AlwaysAllowPaths::new(&["/healthz".to_string()])
                    .expect("paths"),
                token_cache_ttl: TOKEN_CACHE_TTL,
                allow_cache_ttl: ALLOW_CACHE_TTL,
                deny_cache_ttl: DENY_CACHE_TTL,
            },
            &client,
            Arc::new(Metrics::default()),
            Throttle::new(slots, qps, burst),
            Throttle::new(slots, qps, burst),
        )
    }

    const UPSTREAM: (usize, f64, u32) = (MAX_IN_FLIGHT_REVIEWS, REVIEW_QPS, REVIEW_BURST);

    #[tokio::test]
    async fn decisions_about_long_paths_are_not_cached() {
        let api = FakeApi::new(plain_answers);
        let auth = auth_with(&api, UPSTREAM);
        let anonymous = User::anonymous();
        for _ in 0..2 {
            let d = auth.authorize(&anonymous, "get", "/metrics").await;
            assert_eq!(d, Ok(Decision::Forbid("no".into())));
        }
        assert_eq!(
            api.calls("/subjectaccessreviews"),
            1,
            "a short path is cached"
        );
        let long = format!("/{}", "a".repeat(MAX_CONTROLLED_ATTR_CACHE_SIZE));
        for _ in 0..2 {
            let d = auth.authorize(&anonymous, "get", &long).await;
            assert_eq!(d, Ok(Decision::Forbid("no".into())));
        }
        assert_eq!(
            api.calls("/subjectaccessreviews"),
            3,
            "a path of 10000 bytes or more is never cached"
        );
        let cached = auth
            .inner
            .decisions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entries
            .len();
        assert_eq!(cached, 1);
    }

    #[tokio::test]
    async fn both_allowed_and_denied_is_an_error() {
        let api = FakeApi::new(|_, _| serde_json::json!({"allowed": true, "denied": true}));
        let auth = auth_with(&api, UPSTREAM);
        let err = auth
            .authorize(&User::anonymous(), "get", "/metrics")
            .await
            .expect_err("contradictory");
        assert!(err.contains("both allow and deny"), "{err}");
    }

    #[tokio::test]
    async fn a_token_review_naming_an_unauthenticated_user_adds_no_group() {
        let api = FakeApi::new(|_, _| {
            serde_json::json!({"authenticated": true, "user": {"username": "system:anonymous",
                "groups": ["system:unauthenticated"]}})
        });
        let auth = auth_with(&api, UPSTREAM);
        let user = auth.authenticate(Some("Bearer t")).await.expect("a user");
        assert_eq!(user.groups, [ALL_UNAUTHENTICATED]);
    }

    #[tokio::test]
    async fn rejections_with_an_error_are_not_cached() {
        let api = FakeApi::new(|_, review| {
            if review["spec"]["token"] == "expired" {
                serde_json::json!({"authenticated": false, "error": "token expired"})
            } else {
                serde_json::json!({"authenticated": false})
            }
        });
        let auth = auth_with(&api, UPSTREAM);
        for _ in 0..2 {
            let err = auth.authenticate(Some("Bearer expired")).await;
            assert!(
                matches!(&err, Err(AuthnError::Rejected(e)) if e == "token expired"),
                "{err:?}"
            );
            let err = auth.authenticate(Some("Bearer unknown")).await;
            assert!(
                matches!(&err, Err(AuthnError::Rejected(e)) if e.is_empty()),
                "{err:?}"
            );
        }
        assert_eq!(
            api.calls("/tokenreviews"),
            3,
            "only the plain rejection is cached"
        );
    }

    #[tokio::test]
    async fn concurrent_requests_with_one_token_share_one_review() {
        let api = FakeApi::new(plain_answers).gated();
        let auth = Arc::new(auth_with(&api, UPSTREAM));
        let waiting: Vec<_> = (0..5)
            .map(|_| {
                let auth = Arc::clone(&auth);
                tokio::spawn(async move { auth.authenticate(Some("Bearer good")).await })
            })
            .collect();
        // Bounded polling: the review is sent once every request joined it.
        let started = std::time::Instant::now();
        while api.calls("/tokenreviews") == 0 {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "no review sent"
            );
            tokio::task::yield_now().await;
        }
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        api.release(1);
        for w in waiting {
            let user = w.await.expect("task").expect("a user");
            assert_eq!(user.name, "jane");
        }
        assert_eq!(api.calls("/tokenreviews"), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn throttled_reviews_fail_closed() {
        // One review in flight at a time, and one token per 100 s after the first.
        let api = FakeApi::new(plain_answers).gated();
        let auth = Arc::new(auth_with(&api, (1, 0.01, 1)));
        let first = {
            let auth = Arc::clone(&auth);
            tokio::spawn(async move { auth.authenticate(Some("Bearer good")).await })
        };
        while api.calls("/tokenreviews") == 0 {
            tokio::task::yield_now().await;
        }
        // The only slot is taken: another token waits, then gives up at the review timeout.
        let started = Instant::now();
        let err = auth
            .authenticate(Some("Bearer other"))
            .await
            .expect_err("no slot");
        assert!(
            matches!(&err, AuthnError::Review(e) if e.contains("throttled")),
            "{err:?}"
        );
        assert_eq!(started.elapsed(), REVIEW_TIMEOUT);
        api.release(usize::MAX >> 4);
        let _ = first.await;
        // The bucket is empty now and refills too late: an immediate failure, never an allow.
        let err = auth
            .authenticate(Some("Bearer third"))
            .await
            .expect_err("no token");
        assert!(
            matches!(&err, AuthnError::Review(e) if e.contains("throttled")),
            "{err:?}"
        );
        // Authorization has a bucket of its own: one review, then a 500-worthy error.
        let anonymous = User::anonymous();
        let first = auth.authorize(&anonymous, "get", "/metrics").await;
        assert_eq!(first, Ok(Decision::Forbid("no".into())));
        let err = auth
            .authorize(&anonymous, "get", "/other")
            .await
            .expect_err("throttled");
        assert!(err.contains("throttled"), "{err}");
        assert_eq!(api.calls("/tokenreviews"), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn failed_reviews_are_retried_with_backoff_and_client_errors_are_not() {
        // Two 500s, then an answer: one authentication, three calls, ~0.5 s + ~0.75 s apart.
        let api = FakeApi::new(plain_answers).failing(&[500, 500]);
        let auth = auth_with(&api, UPSTREAM);
        let started = Instant::now();
        let user = auth
            .authenticate(Some("Bearer good"))
            .await
            .expect("a user");
        assert_eq!(user.name, "jane");
        assert_eq!(api.calls("/tokenreviews"), 3);
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(1_250) && waited <= Duration::from_millis(1_500),
            "{waited:?}"
        );
        // A 403 is final: one call, the error, nothing cached.
        let api = FakeApi::new(plain_answers).failing(&[403]);
        let auth = auth_with(&api, UPSTREAM);
        let err = auth
            .authenticate(Some("Bearer good"))
            .await
            .expect_err("403");
        assert!(
            matches!(&err, AuthnError::Review(e) if e.contains("injected")),
            "{err:?}"
        );
        assert_eq!(api.calls("/tokenreviews"), 1);
        // Lasting 500s: five attempts (upstream's steps), then the error; never an allow.
        let api = FakeApi::new(plain_answers).failing(&[500; 10]);
        let auth = auth_with(&api, UPSTREAM);
        let anonymous = User::anonymous();
        let err = auth
            .authorize(&anonymous, "get", "/metrics")
            .await
            .expect_err("lasting 500");
        assert!(err.contains("SubjectAccessReview failed"), "{err}");
        assert_eq!(api.calls("/subjectaccessreviews"), 5);
        // A 429 is retried too, and the next answer counts.
        let api = FakeApi::new(plain_answers).failing(&[429]);
        let auth = auth_with(&api, UPSTREAM);
        let decision = auth.authorize(&anonymous, "get", "/metrics").await;
        assert_eq!(decision, Ok(Decision::Forbid("no".into())));
        assert_eq!(api.calls("/subjectaccessreviews"), 2);
    }
}
