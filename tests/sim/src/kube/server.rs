//! The HTTP front: one fallback handler that parses the path, applies faults, serves the request
//! and logs it.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::Shared;
use super::api;
use super::control;
use super::error::ApiError;
use super::faults::FaultAction;
use super::log::{RequestRecord, body_text};
use super::protobuf;
use super::rbac;
use super::request::{self, ApiRequest};
use super::reviews;

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
    if path == "/sim" || path.starts_with("/sim/") {
        return control::handle(&sim, &method, &path, &body);
    }
    let query = match Query::<HashMap<String, String>>::try_from_uri(&uri) {
        Ok(Query(q)) => q,
        Err(e) => return error_response(&ApiError::bad_request(format!("invalid query: {e}"))),
    };
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let check = sim
        .rbac
        .check(method.as_str(), &path, &query, authorization);
    let req = request::parse(&method, &path, query);
    let mut faulted = false;
    let response = match check {
        rbac::Check::Denied(e) => error_response(&e),
        rbac::Check::Allowed(user) if method == Method::POST && path == SSAR_PATH => {
            let review = review_json(&headers, &body);
            match review
                .and_then(|b| rbac::self_subject_access_review(&sim.rbac, user.as_ref(), &b))
            {
                Ok(v) => value_response(201, &v),
                Err(e) => error_response(&e),
            }
        }
        rbac::Check::Allowed(user) if method == Method::POST && path == SSRR_PATH => {
            let review = review_json(&headers, &body);
            match review.and_then(|b| rbac::self_subject_rules_review(&sim.rbac, user.as_ref(), &b))
            {
                Ok(v) => value_response(201, &v),
                Err(e) => error_response(&e),
            }
        }
        // TokenReviews and SubjectAccessReviews (reviews.rs); faults apply as to any request.
        rbac::Check::Allowed(_) if method == Method::POST && reviews::handles(&path) => {
            let outcome = sim.faults.check(method.as_str(), &path, &req);
            faulted = outcome.action.is_some();
            match outcome.action {
                Some(action) => fault_response(&req, &action),
                None => match reviews::create(&sim, &path, &body) {
                    Ok(v) => value_response(201, &v),
                    Err(e) => error_response(&e),
                },
            }
        }
        rbac::Check::Allowed(_) => {
            let outcome = sim.faults.check(method.as_str(), &path, &req);
            if !outcome.delay.is_zero() {
                tokio::time::sleep(outcome.delay).await;
            }
            faulted = outcome.action.is_some();
            match outcome.action {
                Some(action) => fault_response(&req, &action),
                None => api::serve(&sim, &req, &method, &headers, &body, outcome.expire_watch),
            }
        }
    };
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
        },
    );
    response
}

/// The JSON body of a self-review: kubectl sends protobuf, which is decoded first.
fn review_json<'a>(
    headers: &HeaderMap,
    body: &'a Bytes,
) -> Result<std::borrow::Cow<'a, [u8]>, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    if protobuf::is_protobuf(content_type) {
        let review = protobuf::decode(body)?;
        Ok(serde_json::to_vec(&review).unwrap_or_default().into())
    } else {
        Ok(body.as_ref().into())
    }
}

/// A JSON response.
pub(crate) fn json_response(status: u16, body: impl Into<Body>) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        code,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.into(),
    )
        .into_response()
}

/// A JSON response of a value.
pub(crate) fn value_response(status: u16, value: &Value) -> Response {
    json_response(status, serde_json::to_vec(value).unwrap_or_default())
}

/// The Status response of an error (with `Retry-After` when it asks for one).
pub(crate) fn error_response(e: &ApiError) -> Response {
    let mut response = value_response(e.code, &e.status());
    if let Some(seconds) = e.retry_after
        && let Ok(v) = HeaderValue::from_str(&seconds.to_string())
    {
        response.headers_mut().insert(header::RETRY_AFTER, v);
    }
    response
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
