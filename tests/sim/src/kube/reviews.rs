//! TokenReview (authentication.k8s.io/v1) and SubjectAccessReview (authorization.k8s.io/v1),
//! what a delegating server (a cloud-controller-manager's `/metrics`) asks the apiserver.
//!
//! The caller must be allowed to `create` the review (the request goes through [`super::rbac`]'s
//! check before it gets here, as every apiserver request does). Written anew from
//! kubernetes/kubernetes:
//!
//! - `pkg/registry/authentication/tokenreview/storage.go` (`REST.Create`): an empty
//!   `spec.token` is a 400 (`token is required for TokenReview in authentication`); the token
//!   is authenticated as a request's bearer token would be (the simulator's registered tokens,
//!   [`super::KubeSim::add_token`]) and the answer is `status.authenticated`, `status.user`,
//!   and `status.error` when not authenticated (`bearertoken`'s `invalid bearer token`).
//! - `pkg/registry/authorization/subjectaccessreview/rest.go` (`REST.Create`) and
//!   `pkg/apis/authorization/validation/validation.go` (`ValidateSubjectAccessReview`,
//!   `ValidateSubjectAccessReviewSpec`): exactly one of `resourceAttributes` and
//!   `nonResourceAttributes`, a user or a group, empty `metadata`, else a 422 whose kind is
//!   empty (the internal object has no `Kind`: `.authorization.k8s.io "" is invalid: …`).
//!   The answer is the authorizer's: with RBAC on, the simulator's policy (`system:masters`
//!   first, like the privileged-group authorizer); with RBAC off, allowed (`AlwaysAllow`).

use serde_json::{Map, Value, json};

use super::Shared;
use super::error::ApiError;
use super::rbac::{Attributes, UserInfo, access_review_status};

/// `POST` here creates a TokenReview.
pub(crate) const TOKEN_REVIEW_PATH: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
/// `POST` here creates a SubjectAccessReview.
pub(crate) const SUBJECT_ACCESS_REVIEW_PATH: &str =
    "/apis/authorization.k8s.io/v1/subjectaccessreviews";

/// Whether `path` is a review this module answers (for `POST`).
pub(crate) fn handles(path: &str) -> bool {
    path == TOKEN_REVIEW_PATH || path == SUBJECT_ACCESS_REVIEW_PATH
}

/// Answers a review `POST`ed to `path` (one of [`handles`]) with the created object (201).
pub(crate) fn create(sim: &Shared, path: &str, body: &[u8]) -> Result<Value, ApiError> {
    if path == TOKEN_REVIEW_PATH {
        token_review(sim, body)
    } else {
        subject_access_review(sim, body)
    }
}

fn decode(kind: &str, body: &[u8]) -> Result<Value, ApiError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("the body of the {kind} is not valid JSON: {e}"))
    })?;
    if !v.is_object() {
        return Err(ApiError::bad_request(format!(
            "the body of the {kind} is not a JSON object"
        )));
    }
    Ok(v)
}

fn token_review(sim: &Shared, body: &[u8]) -> Result<Value, ApiError> {
    let mut review = decode("TokenReview", body)?;
    let token = review["spec"]["token"].as_str().unwrap_or("").to_string();
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let user = sim.rbac.authenticate(Some(&format!("Bearer {token}")));
    let status = match user {
        Some(u) => json!({
            "authenticated": true,
            "user": {"username": u.name, "groups": u.groups},
        }),
        // The bearer-token authenticator's error for a token nobody recognises.
        None => json!({"authenticated": false, "error": "invalid bearer token"}),
    };
    review["apiVersion"] = json!("authentication.k8s.io/v1");
    review["kind"] = json!("TokenReview");
    set_creation_timestamp(&mut review);
    review["status"] = status;
    Ok(review)
}

/// A field error as `field.Invalid(...).Error()` renders it.
fn invalid(field: &str, value: &Value, detail: &str) -> String {
    let shown = match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    };
    format!("{field}: Invalid value: {shown}: {detail}")
}

/// `ValidateSubjectAccessReview`: the field errors of a review.
fn validate_subject_access_review(review: &Value) -> Vec<String> {
    let spec = &review["spec"];
    let ra = spec.get("resourceAttributes").filter(|v| !v.is_null());
    let nra = spec.get("nonResourceAttributes").filter(|v| !v.is_null());
    let union = "exactly one of nonResourceAttributes or resourceAttributes must be specified";
    let mut errs = Vec::new();
    match (ra, nra) {
        (Some(_), Some(n)) => errs.push(invalid("spec", n, union)),
        (None, None) => errs.push(invalid("spec", &Value::Null, union)),
        _ => {}
    }
    let user = spec["user"].as_str().unwrap_or("");
    let no_groups = spec["groups"].as_array().is_none_or(|g| g.is_empty());
    if user.is_empty() && no_groups {
        errs.push(invalid(
            "spec.user",
            &json!(user),
            "at least one of user or group must be specified",
        ));
    }
    // `metadata` must be empty (managedFields aside).
    if let Some(meta) = review.get("metadata").and_then(Value::as_object) {
        let set: Map<String, Value> = meta
            .iter()
            .filter(|(k, v)| k.as_str() != "managedFields" && !is_empty_value(v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !set.is_empty() {
            errs.push(invalid("metadata", &Value::Object(set), "must be empty"));
        }
    }
    errs
}

fn is_empty_value(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(n) => n.as_i64() == Some(0),
        Value::Bool(b) => !b,
    }
}

/// `apierrors.NewInvalid(authorizationapi.Kind(""), "", errs)`.
fn invalid_error(errs: Vec<String>) -> ApiError {
    let aggregate = if errs.len() == 1 {
        errs[0].clone()
    } else {
        format!("[{}]", errs.join(", "))
    };
    let causes: Vec<Value> = errs
        .iter()
        .map(|e| {
            let (field, message) = e.split_once(": ").unwrap_or(("", e));
            json!({"reason": "FieldValueInvalid", "message": message, "field": field})
        })
        .collect();
    ApiError {
        message: format!(".authorization.k8s.io \"\" is invalid: {aggregate}"),
        details: Some(json!({"group": "authorization.k8s.io", "causes": causes})),
        ..ApiError::new(422, "")
    }
}

/// `authorizationutil.AuthorizationAttributesFrom`.
fn attributes(spec: &Value) -> Attributes {
    let s = |v: &Value, k: &str| v[k].as_str().unwrap_or("").to_string();
    match spec.get("resourceAttributes").filter(|v| !v.is_null()) {
        Some(ra) => Attributes {
            verb: s(ra, "verb"),
            resource_request: true,
            api_group: s(ra, "group"),
            api_version: s(ra, "version"),
            resource: s(ra, "resource"),
            subresource: s(ra, "subresource"),
            namespace: s(ra, "namespace"),
            name: s(ra, "name"),
            path: String::new(),
        },
        None => {
            let nra = &spec["nonResourceAttributes"];
            Attributes::non_resource(
                nra["verb"].as_str().unwrap_or(""),
                nra["path"].as_str().unwrap_or(""),
            )
        }
    }
}

fn subject_access_review(sim: &Shared, body: &[u8]) -> Result<Value, ApiError> {
    let mut review = decode("SubjectAccessReview", body)?;
    let errs = validate_subject_access_review(&review);
    if !errs.is_empty() {
        return Err(invalid_error(errs));
    }
    let spec = review["spec"].clone();
    let attrs = attributes(&spec);
    let status = if sim.rbac.enabled() {
        let user = UserInfo {
            name: spec["user"].as_str().unwrap_or("").to_string(),
            groups: spec["groups"]
                .as_array()
                .map(|g| {
                    g.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
        };
        // Not recorded among the simulator's decisions: those are about the requests it serves.
        access_review_status(&sim.rbac.policy().authorize(&user, &attrs))
    } else {
        // `--authorization-mode=AlwaysAllow`.
        json!({"allowed": true})
    };
    review["apiVersion"] = json!("authorization.k8s.io/v1");
    review["kind"] = json!("SubjectAccessReview");
    set_creation_timestamp(&mut review);
    review["status"] = status;
    Ok(review)
}

/// The apiserver returns the review with `metadata.creationTimestamp: null`.
fn set_creation_timestamp(review: &mut Value) {
    if !review["metadata"].is_object() {
        review["metadata"] = json!({});
    }
    review["metadata"]["creationTimestamp"] = Value::Null;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subject_access_reviews_are_validated_like_the_apiserver() {
        let errs = validate_subject_access_review(&json!({"spec": {}}));
        assert_eq!(
            invalid_error(errs).message,
            ".authorization.k8s.io \"\" is invalid: [spec: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified, spec.user: Invalid value: \"\": at least one of user or group must be specified]"
        );
        let both = json!({"spec": {
            "user": "u",
            "resourceAttributes": {"verb": "get"},
            "nonResourceAttributes": {"verb": "get", "path": "/metrics"},
        }});
        assert_eq!(validate_subject_access_review(&both).len(), 1);
        let groups_only = json!({"spec": {
            "groups": ["g"],
            "nonResourceAttributes": {"verb": "get", "path": "/metrics"},
        }, "metadata": {}});
        assert!(validate_subject_access_review(&groups_only).is_empty());
        let named = json!({"spec": {
            "user": "u",
            "nonResourceAttributes": {"verb": "get", "path": "/metrics"},
        }, "metadata": {"name": "x"}});
        assert_eq!(
            validate_subject_access_review(&named),
            vec!["metadata: Invalid value: {\"name\":\"x\"}: must be empty".to_string()]
        );
    }
}
