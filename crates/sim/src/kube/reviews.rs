//! TokenReview (authentication.k8s.io/v1) and SubjectAccessReview (authorization.k8s.io/v1),
//! what a delegating server (a cloud-controller-manager's `/metrics`) asks the apiserver.
//!
//! The caller must be allowed to `create` the review (the request goes through [`super::rbac`]'s
//! check before it gets here, as every apiserver request does). Written anew from
//! kubernetes/kubernetes:
//!
//! - `pkg/registry/authentication/tokenreview/storage.go` (`REST.Create`): an empty
//!   `spec.token` is a 400 (`token is required for TokenReview in authentication`); the token
//!   goes into a fake request's `Authorization: Bearer <token>` header and is authenticated as
//!   a request's would be ([`super::rbac::bearer_token`]'s parsing, the simulator's registered
//!   tokens, [`super::KubeSim::add_token`]); the answer is `status.authenticated`,
//!   `status.user`, and `status.error` when a token was not recognised (`bearertoken`'s
//!   `invalid bearer token`). See [`token_review`].
//! - `pkg/registry/authorization/subjectaccessreview/rest.go` (`REST.Create`) and
//!   `pkg/apis/authorization/validation/validation.go` (`ValidateSubjectAccessReview`,
//!   `ValidateSubjectAccessReviewSpec`): exactly one of `resourceAttributes` and
//!   `nonResourceAttributes`, a user or a group, empty `metadata`, else a 422 whose kind is
//!   empty (the internal object has no `Kind`: `.authorization.k8s.io "" is invalid: …`).
//!   The answer is the authorizer's: with RBAC on, the simulator's policy (`system:masters`
//!   first, like the privileged-group authorizer) and its reason (`RBAC: allowed by …`); with
//!   RBAC off, allowed (`AlwaysAllow`).
//!
//! The body arrives decoded (JSON, or protobuf turned into JSON) and of the endpoint's kind:
//! the server's `review_json` (server.rs) refuses other kinds as the apiserver's decoder does.

use serde_json::{Map, Value, json};

use super::error::ApiError;
use super::rbac::{Attributes, Bearer, UserInfo, access_review_status, bearer_token};
use super::shared::Shared;

/// `POST` here creates a TokenReview.
pub(crate) const TOKEN_REVIEW_PATH: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
/// `POST` here creates a SubjectAccessReview.
pub(crate) const SUBJECT_ACCESS_REVIEW_PATH: &str =
    "/apis/authorization.k8s.io/v1/subjectaccessreviews";

/// Whether `path` is a review this module answers (for `POST`).
pub(crate) fn handles(path: &str) -> bool {
    path == TOKEN_REVIEW_PATH || path == SUBJECT_ACCESS_REVIEW_PATH
}

/// The internal API package and kind of the review `path` (one of [`handles`]) creates.
pub(crate) fn kind(path: &str) -> (&'static str, &'static str) {
    if path == TOKEN_REVIEW_PATH {
        ("authentication", "TokenReview")
    } else {
        ("authorization", "SubjectAccessReview")
    }
}

/// Answers a review `POST`ed to `path` (one of [`handles`]) with the created object (201).
/// `review` is the decoded body (JSON, or protobuf decoded into JSON) of the endpoint's kind.
pub(crate) fn create(sim: &Shared, path: &str, review: Value) -> Result<Value, ApiError> {
    if path == TOKEN_REVIEW_PATH {
        token_review(sim, review)
    } else {
        subject_access_review(sim, review)
    }
}

/// `REST.Create` of pkg/registry/authentication/tokenreview/storage.go: the token goes into a
/// fake request's header, `"Bearer " + spec.token`, and through the request authenticator
/// (so the bearer-token authenticator's parsing applies: `"a b"` authenticates as `a`, and
/// `" a"` carries no token at all). The answer is the review as sent, with
/// `status.authenticated` (`omitempty`: absent when false), `status.user` (a struct, so `{}`
/// when nobody was authenticated) and `status.error` when the authenticator failed
/// (`invalid bearer token` for a token nobody recognises). A token that yields no credentials
/// is neither authenticated nor an error (the union authenticator's empty aggregate); a real
/// apiserver with anonymous auth on would answer `system:anonymous` there, the simulator has
/// no anonymous user.
fn token_review(sim: &Shared, mut review: Value) -> Result<Value, ApiError> {
    let token = review["spec"]["token"].as_str().unwrap_or("").to_string();
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let header = format!("Bearer {token}");
    let status = match sim.rbac.authenticate(Some(&header), &sim.store) {
        Some(u) => json!({
            "authenticated": true,
            "user": {"username": u.name, "groups": u.groups},
        }),
        None if matches!(bearer_token(Some(&header)), Bearer::Token(_)) => {
            json!({"user": {}, "error": "invalid bearer token"})
        }
        None => json!({"user": {}}),
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

/// `ValidateSubjectAccessReview` and `ValidateSubjectAccessReviewSpec`
/// (pkg/apis/authorization/validation/validation.go): the field errors of a review.
///
/// Both attribute kinds set: `spec.nonResourceAttributes` "cannot be specified in combination
/// with resourceAttributes", its value the internal `NonResourceAttributes` (no `json` tags,
/// so `field.Error` renders it by its Go field names, `{"Path":…,"Verb":…}`). Neither:
/// `spec.resourceAttributes` "exactly one of nonResourceAttributes or resourceAttributes must
/// be specified", its value the nil `spec.NonResourceAttributes` (`null`).
fn validate_subject_access_review(review: &Value) -> Vec<String> {
    let spec = &review["spec"];
    let ra = spec.get("resourceAttributes").filter(|v| !v.is_null());
    let nra = spec.get("nonResourceAttributes").filter(|v| !v.is_null());
    let mut errs = Vec::new();
    match (ra, nra) {
        (Some(_), Some(n)) => {
            let text = |k: &str| n[k].as_str().unwrap_or("").to_string();
            let internal = json!({"Path": text("path"), "Verb": text("verb")});
            errs.push(invalid(
                "spec.nonResourceAttributes",
                &internal,
                "cannot be specified in combination with resourceAttributes",
            ));
        }
        (None, None) => errs.push(invalid(
            "spec.resourceAttributes",
            &Value::Null,
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
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

fn subject_access_review(sim: &Shared, mut review: Value) -> Result<Value, ApiError> {
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
        let e = invalid_error(errs);
        assert_eq!(
            e.message,
            ".authorization.k8s.io \"\" is invalid: [spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified, spec.user: Invalid value: \"\": at least one of user or group must be specified]"
        );
        let causes = &e.details.expect("details")["causes"];
        assert_eq!(causes[0]["field"], "spec.resourceAttributes");
        assert_eq!(causes[1]["field"], "spec.user");
        let both = json!({"spec": {
            "user": "u",
            "resourceAttributes": {"verb": "get"},
            "nonResourceAttributes": {"verb": "get", "path": "/metrics"},
        }});
        assert_eq!(
            validate_subject_access_review(&both),
            vec![
                "spec.nonResourceAttributes: Invalid value: {\"Path\":\"/metrics\",\"Verb\":\"get\"}: cannot be specified in combination with resourceAttributes"
                    .to_string()
            ]
        );
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
