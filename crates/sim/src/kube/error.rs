//! API errors, rendered as the `Status` objects the real apiserver returns.

use serde_json::{Map, Value, json};

use super::resources::ResourceType;

/// The machine-readable `reason` of a failed request, spelled as the apiserver spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// 400.
    BadRequest,
    /// 401.
    Unauthorized,
    /// 403.
    Forbidden,
    /// 404.
    NotFound,
    /// 405.
    MethodNotAllowed,
    /// 406.
    NotAcceptable,
    /// 409 on create.
    AlreadyExists,
    /// 409 on update, patch or a failed precondition.
    Conflict,
    /// 410 (watch from a compacted resourceVersion).
    Expired,
    /// 415.
    UnsupportedMediaType,
    /// 422.
    Invalid,
    /// 429.
    TooManyRequests,
    /// 500.
    InternalError,
    /// 503.
    ServiceUnavailable,
    /// 504.
    Timeout,
    /// Any other code; rendered with an empty reason.
    Unknown,
}

impl Reason {
    /// The `reason` string of a Status object.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::BadRequest => "BadRequest",
            Reason::Unauthorized => "Unauthorized",
            Reason::Forbidden => "Forbidden",
            Reason::NotFound => "NotFound",
            Reason::MethodNotAllowed => "MethodNotAllowed",
            Reason::NotAcceptable => "NotAcceptable",
            Reason::AlreadyExists => "AlreadyExists",
            Reason::Conflict => "Conflict",
            Reason::Expired => "Expired",
            Reason::UnsupportedMediaType => "UnsupportedMediaType",
            Reason::Invalid => "Invalid",
            Reason::TooManyRequests => "TooManyRequests",
            Reason::InternalError => "InternalError",
            Reason::ServiceUnavailable => "ServiceUnavailable",
            Reason::Timeout => "Timeout",
            Reason::Unknown => "",
        }
    }

    /// The reason the apiserver pairs with an HTTP status code.
    pub fn for_code(code: u16) -> Reason {
        match code {
            400 => Reason::BadRequest,
            401 => Reason::Unauthorized,
            403 => Reason::Forbidden,
            404 => Reason::NotFound,
            405 => Reason::MethodNotAllowed,
            406 => Reason::NotAcceptable,
            409 => Reason::Conflict,
            410 => Reason::Expired,
            415 => Reason::UnsupportedMediaType,
            422 => Reason::Invalid,
            429 => Reason::TooManyRequests,
            500 => Reason::InternalError,
            503 => Reason::ServiceUnavailable,
            504 => Reason::Timeout,
            _ => Reason::Unknown,
        }
    }
}

/// A failed API request: HTTP code, reason, message and optional details.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {}: {message}", reason.as_str())]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Status reason.
    pub reason: Reason,
    /// Human-readable message, worded like the real apiserver's where it matters.
    pub message: String,
    /// `details` of the Status (`name`, `group`, `kind`, `causes`, `retryAfterSeconds`).
    pub details: Option<Value>,
    /// Seconds for a `Retry-After` header (429).
    pub retry_after: Option<u64>,
    /// `metadata.continue` of the Status: the token a 410 for an expired `continue` hands out
    /// to go on listing at the latest version.
    pub continue_token: Option<String>,
}

impl ApiError {
    /// An error with the given code and the reason that goes with it.
    pub fn new(code: u16, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason: Reason::for_code(code),
            message: message.into(),
            details: None,
            retry_after: None,
            continue_token: None,
        }
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, message)
    }

    /// 422 Invalid for `rt`/`name`, with the field error as the only cause.
    pub(crate) fn invalid(
        rt: &ResourceType,
        name: &str,
        field_error: impl Into<String>,
    ) -> ApiError {
        ApiError::invalid_all(rt, name, vec![field_error.into()])
    }

    /// 422 Invalid for `rt`/`name` with every field error as a cause, shaped like
    /// `errors.NewInvalid` (k8s.io/apimachinery/pkg/api/errors/errors.go): the message is
    /// `<Kind>[.<group>] "<name>" is invalid: <aggregate>`, `details.kind` the Kind and
    /// `details.causes` one `{reason, message, field}` per error, so kubectl prints them.
    pub(crate) fn invalid_all(
        rt: &ResourceType,
        name: &str,
        field_errors: Vec<String>,
    ) -> ApiError {
        let mut errs: Vec<String> = Vec::new();
        for e in field_errors {
            // utilerrors.NewAggregate de-duplicates messages.
            if !errs.contains(&e) {
                errs.push(e);
            }
        }
        let aggregate = if errs.len() == 1 {
            errs[0].clone()
        } else {
            format!("[{}]", errs.join(", "))
        };
        let qualified_kind = if rt.group.is_empty() {
            rt.kind.to_string()
        } else {
            format!("{}.{}", rt.kind, rt.group)
        };
        let mut d = Map::new();
        d.insert("name".into(), json!(name));
        if !rt.group.is_empty() {
            d.insert("group".into(), json!(rt.group));
        }
        d.insert("kind".into(), json!(rt.kind));
        d.insert(
            "causes".into(),
            Value::Array(errs.iter().map(|e| cause(e)).collect()),
        );
        ApiError {
            message: format!("{qualified_kind} \"{name}\" is invalid: {aggregate}"),
            details: Some(Value::Object(d)),
            ..ApiError::new(422, "")
        }
    }

    /// 422 Invalid for request options (`ListOptions`, `CreateOptions`, ...), which the
    /// apiserver reports with group `meta.k8s.io` and an empty name.
    pub(crate) fn invalid_options(kind: &str, field_errors: Vec<String>) -> ApiError {
        let aggregate = if field_errors.len() == 1 {
            field_errors[0].clone()
        } else {
            format!("[{}]", field_errors.join(", "))
        };
        ApiError {
            message: format!("{kind}.meta.k8s.io \"\" is invalid: {aggregate}"),
            details: Some(json!({
                "group": "meta.k8s.io",
                "kind": kind,
                "causes": field_errors.iter().map(|e| cause(e)).collect::<Vec<_>>(),
            })),
            ..ApiError::new(422, "")
        }
    }

    /// 404 NotFound for `rt`/`name`.
    pub(crate) fn not_found(rt: &ResourceType, name: &str) -> ApiError {
        ApiError {
            message: format!("{} \"{name}\" not found", rt.qualified()),
            details: Some(details(rt, name)),
            ..ApiError::new(404, "")
        }
    }

    /// 409 AlreadyExists for `rt`/`name`.
    pub(crate) fn already_exists(rt: &ResourceType, name: &str) -> ApiError {
        ApiError {
            code: 409,
            reason: Reason::AlreadyExists,
            message: format!("{} \"{name}\" already exists", rt.qualified()),
            details: Some(details(rt, name)),
            retry_after: None,
            continue_token: None,
        }
    }

    /// 409 Conflict: "Operation cannot be fulfilled on nodes "x": <why>".
    pub(crate) fn conflict(rt: &ResourceType, name: &str, why: &str) -> ApiError {
        ApiError {
            message: format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                rt.qualified()
            ),
            details: Some(details(rt, name)),
            ..ApiError::new(409, "")
        }
    }

    /// The refusal of a server-side apply patch (`application/apply-patch+yaml`): 415, the
    /// answer of an apiserver without server-side apply, which kubectl reports as
    /// `Server-side apply not available on the server` (`isIncompatibleServerError`,
    /// k8s.io/kubectl pkg/cmd/apply/apply.go). The simulator keeps no `managedFields`, so it
    /// could not give the apiserver's 409 for a conflicting apply; it refuses rather than let
    /// one succeed.
    pub(crate) fn apply_unsupported() -> ApiError {
        ApiError::new(
            415,
            "wasm-ccm-sim does not support server-side apply (application/apply-patch+yaml): it keeps no managedFields, so it cannot detect the field-ownership conflicts a real apiserver answers with 409; send a merge, JSON or strategic merge patch, or use client-side `kubectl apply` (see \"Not implemented\" in crates/sim/README.md)",
        )
    }

    /// The optimistic-concurrency conflict of a stale `resourceVersion`.
    pub(crate) fn stale(rt: &ResourceType, name: &str) -> ApiError {
        ApiError::conflict(
            rt,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// The `Status` object for this error.
    pub fn status(&self) -> Value {
        let mut status = Map::new();
        status.insert("kind".into(), json!("Status"));
        status.insert("apiVersion".into(), json!("v1"));
        let metadata = match &self.continue_token {
            Some(token) => json!({"continue": token}),
            None => json!({}),
        };
        status.insert("metadata".into(), metadata);
        status.insert("status".into(), json!("Failure"));
        status.insert("message".into(), json!(self.message));
        if self.reason != Reason::Unknown {
            status.insert("reason".into(), json!(self.reason.as_str()));
        }
        let mut details = self.details.clone();
        if let Some(seconds) = self.retry_after {
            let d = details.get_or_insert_with(|| json!({}));
            if let Some(map) = d.as_object_mut() {
                map.insert("retryAfterSeconds".into(), json!(seconds));
            }
        }
        if let Some(d) = details {
            status.insert("details".into(), d);
        }
        status.insert("code".into(), json!(self.code));
        Value::Object(status)
    }
}

/// One `StatusCause` from a rendered `field.Error` (`<field>: <type>: <body>`): the reason is the
/// `field.ErrorType` (`FieldValueInvalid`, ...), the message the error body.
fn cause(error: &str) -> Value {
    const TYPES: &[(&str, &str)] = &[
        ("Required value", "FieldValueRequired"),
        ("Invalid value", "FieldValueInvalid"),
        ("Duplicate value", "FieldValueDuplicate"),
        ("Unsupported value", "FieldValueNotSupported"),
        ("Forbidden", "FieldValueForbidden"),
        ("Too long", "FieldValueTooLong"),
        ("Too many", "FieldValueTooMany"),
        ("Not found", "FieldValueNotFound"),
        ("Internal error", "InternalError"),
    ];
    for (i, _) in error.match_indices(": ") {
        let (field, body) = (&error[..i], &error[i + 2..]);
        if let Some((_, reason)) = TYPES.iter().find(|(t, _)| body.starts_with(t)) {
            return json!({"reason": reason, "message": body, "field": field});
        }
    }
    json!({"reason": "FieldValueInvalid", "message": error, "field": ""})
}

/// `details` naming the object the way the apiserver does (`kind` holds the plural resource).
pub(crate) fn details(rt: &ResourceType, name: &str) -> Value {
    let mut d = Map::new();
    d.insert("name".into(), json!(name));
    if !rt.group.is_empty() {
        d.insert("group".into(), json!(rt.group));
    }
    d.insert("kind".into(), json!(rt.plural));
    Value::Object(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::resources::RESOURCES;

    #[test]
    fn not_found_status_matches_apiserver_shape() {
        let s = ApiError::not_found(&RESOURCES[1], "n1").status();
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["code"], 404);
        assert_eq!(s["message"], "nodes \"n1\" not found");
        assert_eq!(s["details"], json!({"name": "n1", "kind": "nodes"}));
    }

    #[test]
    fn invalid_status_has_kind_and_causes() {
        let e = ApiError::invalid_all(
            &RESOURCES[2],
            "lb",
            vec![
                "spec.type: Unsupported value: \"X\": supported values: \"ClusterIP\"".into(),
                "status.loadBalancer.ingress[0].ip: Invalid value: \"x\": must be a valid IP address".into(),
            ],
        );
        let s = e.status();
        assert_eq!(s["details"]["kind"], "Service");
        assert_eq!(
            s["details"]["causes"][0]["reason"],
            "FieldValueNotSupported"
        );
        assert_eq!(
            s["details"]["causes"][1]["field"],
            "status.loadBalancer.ingress[0].ip"
        );
        assert!(
            s["message"]
                .as_str()
                .unwrap_or("")
                .starts_with("Service \"lb\" is invalid: [spec.type")
        );
        let lease = ApiError::invalid(
            &RESOURCES[7],
            "l",
            "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
        );
        assert!(
            lease
                .message
                .starts_with("Lease.coordination.k8s.io \"l\" is invalid: spec.")
        );
    }

    #[test]
    fn retry_after_lands_in_details() {
        let e = ApiError {
            retry_after: Some(1),
            ..ApiError::new(429, "slow down")
        };
        assert_eq!(e.status()["details"]["retryAfterSeconds"], 1);
        assert_eq!(e.status()["reason"], "TooManyRequests");
    }
}
