//! Delegated authentication and authorization of the serving port, as upstream's
//! controller-manager does (`k8s.io/controller-manager/app/serve.go` `BuildHandlerChain`:
//! `WithAuthorization` inside `WithAuthentication`), written anew from `k8s.io/apiserver`:
//!
//! - Authentication (`pkg/server/options/authentication.go` `DelegatingAuthenticationOptions`,
//!   `pkg/authentication/authenticatorfactory/delegating.go`): a bearer token
//!   (`pkg/authentication/request/bearertoken`) is checked with a TokenReview, cached for
//!   `CacheTTL` (10 s) whether accepted or rejected (`cache.New(tokenAuth, false, CacheTTL,
//!   CacheTTL)`; review errors are not cached). No token, a non-bearer scheme or an empty token is
//!   anonymous (`system:anonymous`, group `system:unauthenticated`); a rejected token or a failed
//!   review is an error, never anonymous (`union.NewFailOnError`), and answers 401 on every path.
//!   Authenticated users get `system:authenticated` (`group.NewAuthenticatedGroupAdder`).
//! - Authorization (`pkg/server/options/authorization.go` `DelegatingAuthorizationOptions`): a
//!   union of `system:masters` (`AlwaysAllowGroups`), the always-allowed paths
//!   (`pkg/authorization/path`: exact, or a prefix with a trailing `*`, the leading `/`
//!   optional) and a SubjectAccessReview (`plugin/pkg/authorizer/webhook`) for a non-resource
//!   request (`verb` = the lower-case method, `path`), cached 10 s when allowed
//!   (`AllowCacheTTL`) and 10 s when not (`DenyCacheTTL`). Not allowed → 403 worded like
//!   `responsewriters.Forbidden`; a failed review → 500 like `responsewriters.InternalError`
//!   (`pkg/endpoints/filters/authorization.go`).
//!
//! Without `--authentication-kubeconfig`/`--authorization-kubeconfig` upstream uses the in-cluster
//! configuration (and, outside a cluster, no token review and no SubjectAccessReview); here the
//! reviews then go through the client the controllers use (in a cluster, the same in-cluster
//! identity; outside one, the --kubeconfig/--master connection).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use sha2::{Digest as _, Sha256};

use crate::metrics::Metrics;

/// Upstream's `DelegatingAuthenticationOptions.CacheTTL`.
pub const TOKEN_CACHE_TTL: Duration = Duration::from_secs(10);
/// Upstream's `DelegatingAuthorizationOptions.AllowCacheTTL`.
pub const ALLOW_CACHE_TTL: Duration = Duration::from_secs(10);
/// Upstream's `DelegatingAuthorizationOptions.DenyCacheTTL`.
pub const DENY_CACHE_TTL: Duration = Duration::from_secs(10);
/// Upstream's `TokenRequestTimeout` and the SubjectAccessReview `ClientTimeout`.
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// Entries kept per cache; a full cache drops expired entries, then everything (a scrape storm
/// of distinct tokens must not grow memory without bound).
const CACHE_CAPACITY: usize = 4096;

/// Upstream's default `--authorization-always-allow-paths`.
pub const DEFAULT_ALWAYS_ALLOW_PATHS: &[&str] = &["/healthz", "/readyz", "/livez"];
/// Upstream's `AlwaysAllowGroups` (not a flag).
const ALWAYS_ALLOW_GROUPS: &[&str] = &["system:masters"];

/// The identity of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl User {
    /// `user.Anonymous` with `user.AllUnauthenticated` (`pkg/authentication/request/anonymous`).
    pub fn anonymous() -> User {
        User {
            name: "system:anonymous".into(),
            uid: String::new(),
            groups: vec!["system:unauthenticated".into()],
            extra: Default::default(),
        }
    }
}

/// Why a request could not be authenticated (all answer 401).
#[derive(Debug, thiserror::Error)]
pub enum AuthnError {
    /// The TokenReview said the token is not valid (`invalid bearer token` upstream).
    #[error("invalid bearer token{}", if .0.is_empty() { String::new() } else { format!(": {}", .0) })]
    Rejected(String),
    /// The TokenReview could not be made.
    #[error("TokenReview failed: {0}")]
    Review(String),
}

/// An authorization decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Denied or no opinion, with the reviewer's reason (maybe empty).
    Forbid(String),
}

/// The settings of [`DelegatedAuth`].
pub struct DelegatedAuthOptions {
    /// Creates TokenReviews (`--authentication-kubeconfig`); `None`: the controllers' client.
    pub authentication: Option<kube::Client>,
    /// Creates SubjectAccessReviews (`--authorization-kubeconfig`); `None`: the controllers'
    /// client.
    pub authorization: Option<kube::Client>,
    /// `--authorization-always-allow-paths` ([`AlwaysAllowPaths::new`]).
    pub always_allow_paths: AlwaysAllowPaths,
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
    pub fn allows(&self, path: &str) -> bool {
        let p = path.strip_prefix('/').unwrap_or(path);
        self.exact.iter().any(|e| e == p) || self.prefixes.iter().any(|x| p.starts_with(x.as_str()))
    }
}

/// A small TTL cache with a bound on its size.
struct TtlCache<V> {
    entries: HashMap<String, (V, Instant)>,
}

impl<V: Clone> TtlCache<V> {
    fn new() -> Self {
        TtlCache {
            entries: HashMap::new(),
        }
    }

    fn get(&mut self, key: &str) -> Option<V> {
        match self.entries.get(key) {
            Some((v, expires)) if *expires > Instant::now() => Some(v.clone()),
            Some(_) => {
                self.entries.remove(key);
                None
            }
            None => None,
        }
    }

    fn insert(&mut self, key: String, value: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        if self.entries.len() >= CACHE_CAPACITY {
            let now = Instant::now();
            self.entries.retain(|_, (_, expires)| *expires > now);
            if self.entries.len() >= CACHE_CAPACITY {
                self.entries.clear();
            }
        }
        self.entries.insert(key, (value, Instant::now() + ttl));
    }
}

/// The authenticator and authorizer of the serving port.
pub struct DelegatedAuth {
    authentication: kube::Client,
    authorization: kube::Client,
    paths: AlwaysAllowPaths,
    /// sha256(token) → the user, or `None` for a rejected token.
    tokens: Mutex<TtlCache<Option<User>>>,
    /// The SubjectAccessReview spec as JSON → the decision.
    decisions: Mutex<TtlCache<Decision>>,
    metrics: Arc<Metrics>,
}

impl DelegatedAuth {
    /// Reviews through `client` where `opts` names no client of its own; counts the reviews
    /// in `metrics`.
    pub fn new(
        opts: DelegatedAuthOptions,
        client: &kube::Client,
        metrics: Arc<Metrics>,
    ) -> DelegatedAuth {
        DelegatedAuth {
            authentication: opts.authentication.unwrap_or_else(|| client.clone()),
            authorization: opts.authorization.unwrap_or_else(|| client.clone()),
            paths: opts.always_allow_paths,
            tokens: Mutex::new(TtlCache::new()),
            decisions: Mutex::new(TtlCache::new()),
            metrics,
        }
    }

    /// The user of a request with this `Authorization` header value.
    pub async fn authenticate(&self, authorization: Option<&str>) -> Result<User, AuthnError> {
        let Some(token) = bearer_token(authorization) else {
            return Ok(User::anonymous());
        };
        let key = hex::encode(Sha256::digest(token.as_bytes()));
        let cached = self
            .tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key);
        let user = match cached {
            Some(user) => user,
            None => {
                let user = self.review_token(token).await?;
                self.tokens
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key, user.clone(), TOKEN_CACHE_TTL);
                user
            }
        };
        let mut user = user.ok_or_else(|| AuthnError::Rejected(String::new()))?;
        if !user.groups.iter().any(|g| g == "system:authenticated") {
            user.groups.push("system:authenticated".into());
        }
        Ok(user)
    }

    /// `None`: the token is not valid. Errors are the review's own failures.
    async fn review_token(&self, token: &str) -> Result<Option<User>, AuthnError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: None,
            },
            ..Default::default()
        };
        let api = kube::Api::<TokenReview>::all(self.authentication.clone());
        let result =
            tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &review)).await;
        let result = match result {
            Ok(r) => r,
            Err(_) => {
                self.count("apiserver_delegated_authn_request_total", "<error>");
                return Err(AuthnError::Review(format!(
                    "no answer within {REVIEW_TIMEOUT:?}"
                )));
            }
        };
        self.count(
            "apiserver_delegated_authn_request_total",
            &status_code(&result, "201"),
        );
        let answered = result.map_err(|e| AuthnError::Review(e.to_string()))?;
        let Some(status) = answered.status else {
            return Ok(None);
        };
        if status.authenticated != Some(true) {
            // The webhook authenticator returns the review's error, else "invalid bearer token".
            return match status.error.filter(|e| !e.is_empty()) {
                Some(e) => Err(AuthnError::Rejected(e)),
                None => Ok(None),
            };
        }
        let info = status.user.unwrap_or_default();
        Ok(Some(User {
            name: info.username.unwrap_or_default(),
            uid: info.uid.unwrap_or_default(),
            groups: info.groups.unwrap_or_default(),
            extra: info.extra.unwrap_or_default().into_iter().collect(),
        }))
    }

    /// Authorizes a non-resource request: `verb` (lower-case method) on `path`.
    pub async fn authorize(&self, user: &User, verb: &str, path: &str) -> Result<Decision, String> {
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
        let key = serde_json::to_string(&spec).map_err(|e| e.to_string())?;
        if let Some(d) = self
            .decisions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Ok(d);
        }
        let api = kube::Api::<SubjectAccessReview>::all(self.authorization.clone());
        let review = SubjectAccessReview {
            spec,
            ..Default::default()
        };
        let result =
            tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &review)).await;
        let Ok(result) = result else {
            self.count("apiserver_delegated_authz_request_total", "<error>");
            return Err(format!(
                "SubjectAccessReview: no answer within {REVIEW_TIMEOUT:?}"
            ));
        };
        self.count(
            "apiserver_delegated_authz_request_total",
            &status_code(&result, "201"),
        );
        let answered = result.map_err(|e| format!("SubjectAccessReview failed: {e}"))?;
        let status = answered.status.unwrap_or_default();
        let (decision, ttl) = if status.allowed {
            (Decision::Allow, ALLOW_CACHE_TTL)
        } else {
            (
                Decision::Forbid(status.reason.unwrap_or_default()),
                DENY_CACHE_TTL,
            )
        };
        self.decisions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, decision.clone(), ttl);
        Ok(decision)
    }

    fn count(&self, name: &str, code: &str) {
        self.metrics.inc(name, &[("code", code)]);
    }
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
pub fn bearer_token(authorization: Option<&str>) -> Option<&str> {
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

    #[test]
    fn cache_is_bounded_and_expires() {
        let mut c = TtlCache::new();
        c.insert("a".into(), 1, Duration::from_secs(60));
        assert_eq!(c.get("a"), Some(1));
        c.insert("b".into(), 2, Duration::ZERO);
        assert_eq!(c.get("b"), None);
        for i in 0..(CACHE_CAPACITY + 10) {
            c.insert(format!("k{i}"), i, Duration::from_secs(60));
        }
        assert!(c.entries.len() <= CACHE_CAPACITY);
    }
}
