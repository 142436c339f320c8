//! The HTTP front: one fallback handler that parses the path, applies faults, serves the request
//! and logs it.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, Uri, header};
use axum::response::Response;
use serde_json::Value;

use super::api;
use super::control;
use super::error::ApiError;
use super::faults::FaultAction;
use super::log::{RequestRecord, body_text};
use super::protobuf;
use super::rbac;
use super::request::{self, ApiRequest};
use super::respond::{error_response, json_response, value_response};
use super::reviews;
use super::shared::Shared;

/// SelfSubjectAccessReviews (authorization.k8s.io/v1), answered from the RBAC policy.
const SSAR_PATH: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";

/// SelfSubjectRulesReviews (`kubectl auth can-i --list`), answered from the RBAC policy.
const SSRR_PATH: &str = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";

/// The router serving everything through [`handle`].
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(handle).with_state(shared)
}

async fn handle(
    State(sim): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    if crate::request_core::is_control_path(&path) {
        return control::handle(&sim, &method, &path, &body);
    }
    let arrival = sim.log.arrive();
    let query = match Query::<HashMap<String, String>>::try_from_uri(&uri) {
        Ok(Query(q)) => q,
        Err(e) => return error_response(&ApiError::bad_request(format!("invalid query: {e}"))),
    };
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    // Impersonation comes after authentication and before authorization on the apiserver
    // (`WithImpersonation` in `DefaultBuildHandlerChain`): an unauthenticated request is still
    // 401, an authenticated one is refused instead of being served as its own user.
    let check = match impersonation(&headers) {
        Some(refusal) => match sim.rbac.authenticate_request(authorization, &sim.store) {
            Err(unauthenticated) => rbac::Check::Denied(unauthenticated),
            Ok(_) => rbac::Check::Denied(refusal),
        },
        None => sim
            .rbac
            .check(method.as_str(), &path, &query, authorization, &sim.store),
    };
    let req = request::parse(&method, &path, query);
    let mut faulted = false;
    let mut delay = std::time::Duration::ZERO;
    let mut response = match check {
        rbac::Check::Denied(e) => error_response(&e),
        // Faults (latency first, then the first matching rule) apply to every allowed request,
        // the reviews included.
        rbac::Check::Allowed(user) => {
            let outcome = sim.faults.check(method.as_str(), &path, &req);
            if !outcome.delay.is_zero() {
                delay = outcome.delay;
                tokio::time::sleep(outcome.delay).await;
            }
            faulted = outcome.action.is_some();
            match outcome.action {
                Some(action) => fault_response(&req, &action),
                None => serve_review(&sim, user.as_ref(), &path, &method, &headers, &body)
                    .unwrap_or_else(|| {
                        api::serve(&sim, &req, &method, &headers, &body, outcome.expire_watch)
                    }),
            }
        }
    };
    // `bearertoken.AuthenticateRequest` (k8s.io/apiserver pkg/authentication/request/
    // bearertoken/bearertoken.go) warns about `Bearer  <token>` (an empty token before a second
    // space) through the warning recorder, which wraps authentication in
    // `DefaultBuildHandlerChain`, so the warning reaches the 401 too.
    if sim.rbac.enabled() && rbac::bearer_token(authorization) == rbac::Bearer::EmptyBeforeSpace {
        let text = format!("299 - {:?}", rbac::EXTRA_SPACE_WARNING);
        if let Ok(v) = HeaderValue::from_str(&text) {
            response.headers_mut().append(header::WARNING, v);
        }
    }
    let status = response.status().as_u16();
    tracing::debug!(%method, %uri, status, faulted, "kube-sim request");
    let header_text = |name: header::HeaderName| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let rt = req.resource();
    sim.log.record(
        rt.map(|r| r.index),
        RequestRecord {
            seq: 0,
            method: method.to_string(),
            path,
            query: uri.query().unwrap_or("").to_string(),
            verb: req.verb,
            resource: rt.map(|r| r.qualified()),
            namespace: req.namespace().map(str::to_string),
            name: req.name().map(str::to_string),
            subresource: req.subresource().map(str::to_string),
            status,
            content_type: header_text(header::CONTENT_TYPE),
            body: req
                .verb
                .is_some_and(|v| v.is_mutating())
                .then(|| body_text(&body)),
            authorization: header_text(header::AUTHORIZATION),
            user_agent: header_text(header::USER_AGENT),
            faulted,
            arrival,
            delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
        },
    );
    response
}

/// The refusal of a request that asks to act as another user (`Impersonate-User`,
/// `Impersonate-Group`, `Impersonate-Uid`, `Impersonate-Extra-*`: k8s.io/apiserver
/// pkg/endpoints/filters/impersonation.go), which the simulator does not model: served, it would
/// run as the requesting user and hide every denial the impersonated one would get.
fn impersonation(headers: &HeaderMap) -> Option<ApiError> {
    let asked: Vec<String> = headers
        .iter()
        .filter(|(name, _)| name.as_str().starts_with("impersonate-"))
        .map(|(name, value)| format!("{name}: {}", value.to_str().unwrap_or("<not text>")))
        .collect();
    if asked.is_empty() {
        return None;
    }
    Some(ApiError::bad_request(format!(
        "wasm-ccm-sim does not support impersonation ({}): register a token for that user with KubeSim::add_token and use it (KubeSim::kubeconfig_for_token) instead of --as/--as-group",
        asked.join(", ")
    )))
}

/// Serves an allowed, unfaulted review `POST` (`None` for any other request, which
/// [`api::serve`] serves).
fn serve_review(
    sim: &Shared,
    user: Option<&rbac::UserInfo>,
    path: &str,
    method: &Method,
    headers: &HeaderMap,
    body: &Bytes,
) -> Option<Response> {
    let created = |result: Result<Value, ApiError>| match result {
        Ok(v) => value_response(201, &v),
        Err(e) => error_response(&e),
    };
    if method != Method::POST {
        return None;
    }
    Some(if path == SSAR_PATH {
        created(
            review_json(headers, body, "authorization", "SelfSubjectAccessReview")
                .and_then(|r| rbac::self_subject_access_review(&sim.rbac, user, r)),
        )
    } else if path == SSRR_PATH {
        created(
            review_json(headers, body, "authorization", "SelfSubjectRulesReview")
                .and_then(|r| rbac::self_subject_rules_review(&sim.rbac, user, r)),
        )
    } else if reviews::handles(path) {
        // TokenReviews and SubjectAccessReviews (reviews.rs).
        let (package, kind) = reviews::kind(path);
        created(
            review_json(headers, body, package, kind).and_then(|r| reviews::create(sim, path, r)),
        )
    } else {
        return None;
    })
}

/// The body of a review `POST`ed to the endpoint of `kind` (internal API package `package`),
/// as a JSON object: kubectl and client-go's typed clients send protobuf, which is decoded
/// first ([`protobuf::decode`]).
///
/// A body of another kind is a 400 worded like the apiserver's: its decoder
/// (`versioning.codec.Decode`, k8s.io/apimachinery pkg/runtime/serializer/versioning) decodes
/// the body as the kind it names and converts that into the endpoint's internal type, which
/// fails (`converting (v1.TokenReview) to (authorization.SubjectAccessReview): unknown
/// conversion`, `conversion.Converter.Convert`), and the create handler's
/// `transformDecodeError` (k8s.io/apiserver pkg/endpoints/handlers/rest.go) wraps it as
/// `<kind> in version "<version>" cannot be handled as a <endpoint kind>: <error>`. A body
/// without `kind` takes the endpoint's (the decoder's default GVK).
fn review_json(
    headers: &HeaderMap,
    body: &Bytes,
    package: &str,
    kind: &str,
) -> Result<Value, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let review = if protobuf::is_protobuf(content_type) {
        protobuf::decode(body)?
    } else {
        // Undecodable JSON: `transformDecodeError` without a kind, with `summarizeData`.
        let unrecognized = |why: String| {
            ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {kind}): {why} ({})",
                summarize(body, 30)
            ))
        };
        let v: Value = serde_json::from_slice(body).map_err(|e| {
            unrecognized(format!("couldn't get version/kind; json parse error: {e}"))
        })?;
        if !v.is_object() {
            return Err(unrecognized(
                "couldn't get version/kind; json parse error: not a JSON object".into(),
            ));
        }
        v
    };
    let sent = review["kind"].as_str().unwrap_or("");
    if !sent.is_empty() && sent != kind {
        let api_version = review["apiVersion"].as_str().unwrap_or("");
        let version = api_version.rsplit('/').next().unwrap_or("");
        return Err(ApiError::bad_request(format!(
            "{sent} in version {version:?} cannot be handled as a {kind}: converting ({version}.{sent}) to ({package}.{kind}): unknown conversion"
        )));
    }
    Ok(review)
}

/// `summarizeData` (k8s.io/apiserver pkg/endpoints/handlers/rest.go): `<empty>`, the start of
/// a JSON object as text, or else the start of the bytes in hex; ` ...` when cut.
fn summarize(body: &[u8], max: usize) -> String {
    let cut = if body.len() > max { " ..." } else { "" };
    let head = &body[..body.len().min(max)];
    match body.first() {
        None => "<empty>".into(),
        Some(b'{') => format!("{}{cut}", String::from_utf8_lossy(head)),
        Some(_) => {
            let hex: String = head.iter().map(|b| format!("{b:02x}")).collect();
            format!("{hex}{cut}")
        }
    }
}

/// The response of an injected fault.
fn fault_response(req: &ApiRequest, action: &FaultAction) -> Response {
    match action {
        FaultAction::Status { code } => error_response(&injected_error(req, *code)),
        FaultAction::Disconnect => {
            // Headers go out, then the body fails: hyper aborts the connection mid-response.
            let failing = futures::stream::once(async {
                Err::<Bytes, std::io::Error>(std::io::Error::other("injected disconnect"))
            });
            json_response(200, Body::from_stream(failing))
        }
    }
}

/// The error an injected status code stands for, worded like the real one.
fn injected_error(req: &ApiRequest, code: u16) -> ApiError {
    let named = req.resource().zip(req.name());
    match (code, named) {
        (404, Some((rt, name))) => ApiError::not_found(rt, name),
        (409, Some((rt, name))) => ApiError::stale(rt, name),
        (409, None) => ApiError::new(
            409,
            "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again",
        ),
        (429, _) => ApiError {
            retry_after: Some(1),
            ..ApiError::new(429, "Too many requests, please try again later.")
        },
        (500, _) => ApiError::new(
            500,
            "Internal error occurred: injected fault (wasm-ccm-sim)",
        ),
        (410, _) => ApiError::new(410, "too old resource version: injected (wasm-ccm-sim)"),
        (code, _) => ApiError::new(code, format!("injected fault: HTTP {code} (wasm-ccm-sim)")),
    }
}
