//! ServiceAccount tokens: the `token` subresource of a ServiceAccount (a TokenRequest,
//! `POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token`) and the authentication of the
//! tokens it issues.
//!
//! The rules, each from the apiserver:
//! - `TokenREST.Create` (kubernetes pkg/registry/core/serviceaccount/storage/token.go): a
//!   `metadata.name`/`namespace` in the body must match the URL (422 naming the account), the
//!   ServiceAccount must exist (its 404), a `metadata.uid` must be the account's (409), the
//!   expiration defaults to an hour (`SetDefaults_TokenRequestSpec`, pkg/apis/authentication/v1
//!   defaults.go) and is validated by `ValidateTokenRequest`
//!   (pkg/apis/authentication/validation/validation.go: at least 10 minutes, at most 2^32
//!   seconds; a 422 of `TokenRequest.authentication.k8s.io ""`), unset audiences become the
//!   apiserver's (`--api-audiences`, defaulting to the issuer), and the answer carries the
//!   token and `expirationTimestamp` = now + expirationSeconds. Bound object references are
//!   refused: the simulator keeps no Pods' or Secrets' lifecycles to bind to (the apiserver
//!   would accept a Pod, Secret or Node).
//! - Authorization: the request is `create` of `serviceaccounts/token` (the RequestInfo of the
//!   path), checked like any other by RBAC before this module sees it.
//! - Authentication (pkg/serviceaccount/claims.go `validator.Validate`): a token authenticates
//!   as `system:serviceaccount:{ns}:{name}` in the groups `system:serviceaccounts`,
//!   `system:serviceaccounts:{ns}` and `system:authenticated`
//!   (k8s.io/apiserver pkg/authentication/serviceaccount/util.go `UserInfo`), only while it has
//!   not expired (go-jose's `Claims.Validate`, with its default leeway of one minute past `exp`)
//!   and while its ServiceAccount exists, is not being deleted and has the UID the token was
//!   issued for; otherwise the request is a 401.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use rand::Rng as _;
use serde_json::{Value, json};

use super::error::ApiError;
use super::meta::meta_str;
use super::resources::{RESOURCES, ResourceType, SERVICEACCOUNTS};
use super::store::{ObjKey, Store};
use super::user::UserInfo;
use super::validation::decode_error;

/// `TokenRequest` of `authentication.k8s.io`, for the wording of its errors (it is not a
/// stored resource).
static TOKEN_REQUEST: ResourceType = ResourceType {
    index: usize::MAX,
    group: "authentication.k8s.io",
    version: "v1",
    plural: "tokenrequests",
    singular: "tokenrequest",
    kind: "TokenRequest",
    namespaced: true,
    status: false,
    clear_status_on_create: false,
    generation: false,
    short_names: &[],
};

/// `SetDefaults_TokenRequestSpec`: an hour.
const DEFAULT_EXPIRATION_SECONDS: i64 = 60 * 60;
/// `ValidateTokenRequest`: "may not specify a duration less than 10 minutes".
const MIN_EXPIRATION_SECONDS: i64 = 10 * 60;
/// `ValidateTokenRequest`: "may not specify a duration larger than 2^32 seconds".
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
/// go-jose's `DefaultLeeway` (`jwt.Claims.Validate`): a token is still accepted this long
/// after its `exp`.
pub const EXPIRY_LEEWAY: Duration = Duration::from_secs(60);
/// The apiserver's audiences when `--api-audiences` is unset: the issuer's
/// (`--service-account-issuer`, kubeadm's default).
const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// The groups of a ServiceAccount's user (`serviceaccount.MakeGroupNames` plus
/// `system:authenticated`, which the authenticator adds).
pub fn service_account_groups(namespace: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".to_string(),
        format!("system:serviceaccounts:{namespace}"),
        "system:authenticated".to_string(),
    ]
}

/// One issued token.
#[derive(Debug, Clone)]
struct Issued {
    namespace: String,
    name: String,
    uid: String,
    expires: SystemTime,
}

/// The tokens this apiserver issued, and its clock for them.
#[derive(Default)]
pub(crate) struct Tokens {
    issued: Mutex<HashMap<String, Issued>>,
    /// Added to the wall clock when tokens are issued and judged
    /// ([`super::KubeSim::advance_token_clock`]), so a test can let tokens expire.
    skew: Mutex<Duration>,
}

impl Tokens {
    fn now(&self) -> SystemTime {
        SystemTime::now() + *self.skew.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// See [`super::KubeSim::advance_token_clock`].
    pub(crate) fn advance(&self, by: Duration) {
        *self.skew.lock().unwrap_or_else(PoisonError::into_inner) += by;
    }

    /// The user of `token`, judged against the ServiceAccounts in `store` now; `None` for a
    /// token this apiserver did not issue, or one the claims validator refuses: expired, its
    /// account deleted or being deleted, or the account's UID not the claim's (the request is
    /// then unauthenticated, as the apiserver's 401 carries no reason).
    pub(crate) fn authenticate(&self, token: &str, store: &Store) -> Option<UserInfo> {
        let issued = self
            .issued
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(token)
            .cloned()?;
        if self.now() > issued.expires + EXPIRY_LEEWAY {
            return None;
        }
        let (ns, name) = (&issued.namespace, &issued.name);
        let key = ObjKey::new(&RESOURCES[SERVICEACCOUNTS], Some(ns), name);
        let account = store.get(&RESOURCES[SERVICEACCOUNTS], &key).ok()?;
        if !account["metadata"]["deletionTimestamp"].is_null() {
            return None;
        }
        if meta_str(&account, "uid").unwrap_or("") != issued.uid {
            return None;
        }
        let groups = service_account_groups(ns);
        Some(UserInfo {
            name: format!("system:serviceaccount:{ns}:{name}"),
            groups,
        })
    }

    /// `TokenREST.Create` for the ServiceAccount `namespace/name`, with `request` the decoded
    /// body (a JSON object). Returns the TokenRequest with its status.
    pub(crate) fn create(
        &self,
        store: &Store,
        namespace: &str,
        name: &str,
        mut request: Value,
    ) -> Result<Value, ApiError> {
        let sent = request["kind"].as_str().unwrap_or("");
        if !sent.is_empty() && sent != "TokenRequest" {
            let api_version = request["apiVersion"].as_str().unwrap_or("");
            let version = api_version.rsplit('/').next().unwrap_or("");
            return Err(ApiError::bad_request(format!(
                "{sent} in version {version:?} cannot be handled as a TokenRequest: converting ({version}.{sent}) to (authentication.TokenRequest): unknown conversion"
            )));
        }
        if !request["metadata"].is_object() && !request["metadata"].is_null() {
            return Err(decode_error(
                "TokenRequest",
                "metadata",
                &request["metadata"],
                "v1.ObjectMeta",
            ));
        }
        let body_name = request["metadata"]["name"].as_str().unwrap_or("");
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::invalid(
                &TOKEN_REQUEST,
                name,
                format!(
                    "metadata.name: Invalid value: {body_name:?}: must match the service account name if specified"
                ),
            ));
        }
        let body_ns = request["metadata"]["namespace"].as_str().unwrap_or("");
        if !body_ns.is_empty() && body_ns != namespace {
            return Err(ApiError::invalid(
                &TOKEN_REQUEST,
                name,
                format!(
                    "metadata.namespace: Invalid value: {body_ns:?}: must match the service account namespace if specified"
                ),
            ));
        }
        let rt = &RESOURCES[SERVICEACCOUNTS];
        let account = store.get(rt, &ObjKey::new(rt, Some(namespace), name))?;
        let uid = meta_str(&account, "uid").unwrap_or("").to_string();
        let body_uid = request["metadata"]["uid"].as_str().unwrap_or("");
        if !body_uid.is_empty() && body_uid != uid {
            // TokenRequestServiceAccountUIDValidation (on by default since 1.34).
            return Err(ApiError::new(
                409,
                format!(
                    "Operation cannot be fulfilled on TokenRequest.authentication.k8s.io {name:?}: the UID in the token request ({body_uid}) does not match the UID of the service account ({uid})"
                ),
            ));
        }
        let spec = &request["spec"];
        let seconds = match &spec["expirationSeconds"] {
            Value::Null => DEFAULT_EXPIRATION_SECONDS,
            v => v.as_i64().ok_or_else(|| {
                decode_error("TokenRequest", "spec.expirationSeconds", v, "int64")
            })?,
        };
        let mut errors = Vec::new();
        if seconds < MIN_EXPIRATION_SECONDS {
            errors.push(format!(
                "spec.expirationSeconds: Invalid value: {seconds}: may not specify a duration less than 10 minutes"
            ));
        }
        if seconds > MAX_EXPIRATION_SECONDS {
            errors.push(format!(
                "spec.expirationSeconds: Invalid value: {seconds}: may not specify a duration larger than 2^32 seconds"
            ));
        }
        if !errors.is_empty() {
            return Err(ApiError::invalid_all(&TOKEN_REQUEST, "", errors));
        }
        if !spec["boundObjectRef"].is_null() {
            return Err(ApiError::bad_request(format!(
                "wasm-ccm-sim does not bind tokens to objects (spec.boundObjectRef {}): request an unbound token",
                spec["boundObjectRef"]
            )));
        }
        let audiences = match &spec["audiences"] {
            Value::Array(a) if !a.is_empty() => Value::Array(a.clone()),
            _ => json!([API_AUDIENCE]),
        };
        let now = self.now();
        let expires = now + Duration::from_secs(seconds.unsigned_abs());
        let token = mint(namespace, name, &uid, now, expires);
        self.issued
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                token.clone(),
                Issued {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                    uid,
                    expires,
                },
            );
        request["apiVersion"] = json!("authentication.k8s.io/v1");
        request["kind"] = json!("TokenRequest");
        if !request["metadata"].is_object() {
            request["metadata"] = json!({});
        }
        request["metadata"]["name"] = json!(name);
        request["metadata"]["namespace"] = json!(namespace);
        request["metadata"]["creationTimestamp"] = json!(rfc3339(now));
        request["spec"] = json!({
            "audiences": audiences,
            "expirationSeconds": seconds,
            "boundObjectRef": null,
        });
        request["status"] = json!({
            "token": token,
            "expirationTimestamp": rfc3339(expires),
        });
        Ok(request)
    }
}

/// A token shaped like the apiserver's (a JWT: header, claims, signature, each base64url),
/// its signature random, so it cannot be guessed; it authenticates by lookup.
fn mint(namespace: &str, name: &str, uid: &str, now: SystemTime, expires: SystemTime) -> String {
    let b64 = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    let secs = |t: SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    };
    let header = json!({"alg": "RS256", "kid": "wasm-ccm-sim"});
    let claims = json!({
        "aud": [API_AUDIENCE],
        "exp": secs(expires),
        "iat": secs(now),
        "nbf": secs(now),
        "iss": API_AUDIENCE,
        "sub": format!("system:serviceaccount:{namespace}:{name}"),
        "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}},
    });
    let signature: [u8; 32] = rand::rng().random();
    format!(
        "{}.{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes()),
        b64(&signature)
    )
}

/// `metav1.Time` in JSON ([`super::meta::time`]).
fn rfc3339(t: SystemTime) -> String {
    jiff::Timestamp::try_from(t)
        .map(super::meta::time)
        .unwrap_or_default()
}
