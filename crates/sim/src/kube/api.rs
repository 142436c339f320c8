//! Serving one parsed request: discovery documents and the resource verbs.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, Method, header};
use axum::response::{IntoResponse, Response};
use rand::Rng;
use serde_json::{Value, json};

use super::discovery;
use super::error::{self, ApiError};
use super::meta::{finalizers, meta_str};
use super::openapi;
use super::patch::PatchKind;
use super::protobuf;
use super::rbac_api;
use super::request::{ApiRequest, Target, Verb};
use super::resources::{EVENTS, EVENTS_V1, NAMESPACES, NODES, PODS, ResourceType, SERVICES};
use super::respond::{error_response, json_response, value_response};
use super::selector::{FieldSelector, Filter, LabelSelector};
use super::store::{ListPage, ObjKey, Preconditions, Scope, WatchFrom, decode_continue};
use super::table;
use super::validation;
use super::watch::{self, WatchParams};
use super::{Shared, WatchList};

/// Answers a request that no fault intercepted.
pub(crate) fn serve(
    sim: &Shared,
    req: &ApiRequest,
    method: &Method,
    headers: &HeaderMap,
    body: &[u8],
    expire_watch: bool,
) -> Response {
    let discovery = |doc: Value| {
        if method == Method::GET {
            value_response(200, &doc)
        } else {
            error_response(&method_not_allowed())
        }
    };
    if !matches!(req.target, Target::Health)
        && let Err(e) = negotiate(headers)
    {
        return error_response(&e);
    }
    match &req.target {
        Target::Root => discovery(discovery::root()),
        Target::Health => {
            ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "ok").into_response()
        }
        Target::Version => discovery(discovery::version(&sim.server_version)),
        Target::OpenApiV2 => discovery(openapi::v2().clone()),
        Target::OpenApiV3Index => discovery(openapi::v3_index()),
        Target::OpenApiV3(gv) => match openapi::v3(gv) {
            Some(doc) => discovery(doc),
            None => error_response(&unknown_path()),
        },
        Target::CoreVersions => discovery(discovery::core_versions(sim.addr)),
        Target::Groups => discovery(discovery::group_list()),
        Target::RbacObjects => error_response(&rbac_api::refusal()),
        Target::Group(g) => match discovery::groups().into_iter().find(|(x, _)| x == g) {
            Some((g, v)) => discovery(discovery::group(g, v)),
            None => error_response(&unknown_path()),
        },
        Target::ResourceList(g, v) => discovery(discovery::resource_list(g, v)),
        Target::Unknown => error_response(&unknown_path()),
        // DELETE of a collection (`deletecollection`): the apiserver serves it for these kinds.
        Target::Collection { .. } if method == Method::DELETE => error_response(&ApiError::new(
            405,
            "wasm-ccm-sim does not serve deletecollection (DELETE of a collection): delete the objects one by one",
        )),
        Target::Token {
            namespace, name, ..
        } => match token_request(sim, req, headers, body, namespace, name) {
            Ok(v) => value_response(201, &v),
            Err(e) => error_response(&e),
        },
        Target::Collection { .. } | Target::Object { .. } => {
            match resource_request(sim, req, headers, body, expire_watch) {
                Ok(response) => response,
                Err(e) => error_response(&e),
            }
        }
    }
}

/// Response content negotiation, as the apiserver's `negotiation.NegotiateOutputMediaType` does
/// for a type it cannot encode in the wanted media type: only JSON (and YAML, answered as JSON)
/// is offered, so client-go's `Accept: application/vnd.kubernetes.protobuf, application/json`
/// gets JSON (the response `Content-Type` tells client-go how to decode), while an `Accept` that
/// lists only protobuf or CBOR is 406 `NotAcceptable` (`errors.NewNotAcceptableError`).
fn negotiate(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(accept) = headers.get(header::ACCEPT) else {
        return Ok(());
    };
    let accept = accept.to_str().unwrap_or("");
    let mut ranges = accept
        .split(',')
        .map(|r| {
            r.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|r| !r.is_empty())
        .peekable();
    if ranges.peek().is_none() {
        return Ok(());
    }
    let acceptable = |r: &str| {
        matches!(
            r,
            "*/*" | "application/*" | "application/json" | "application/yaml"
        )
    };
    if ranges.any(|r| acceptable(&r)) {
        return Ok(());
    }
    Err(ApiError::new(
        406,
        "only the following media types are accepted: application/json, application/yaml, application/json;stream=watch",
    ))
}

/// A TokenRequest for the ServiceAccount `namespace/name` (`tokens.rs`), its body JSON or
/// protobuf (kubectl's typed client sends protobuf).
fn token_request(
    sim: &Shared,
    req: &ApiRequest,
    headers: &HeaderMap,
    body: &[u8],
    namespace: &str,
    name: &str,
) -> Result<Value, ApiError> {
    if req.verb.is_none() {
        return Err(method_not_allowed());
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let request = if protobuf::is_protobuf(content_type) {
        protobuf::decode(body)?
    } else {
        let v: Value = serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type TokenRequest): couldn't get version/kind; json parse error: {e}"
            ))
        })?;
        if !v.is_object() {
            return Err(ApiError::bad_request(
                "the object provided is unrecognized (must be of type TokenRequest): couldn't get version/kind; json parse error: not a JSON object",
            ));
        }
        v
    };
    sim.rbac.issued.create(&sim.store, namespace, name, request)
}

fn unknown_path() -> ApiError {
    ApiError::new(404, "the server could not find the requested resource")
}

fn method_not_allowed() -> ApiError {
    ApiError::new(
        405,
        "the server does not allow this method on the requested resource",
    )
}

fn resource_request(
    sim: &Shared,
    req: &ApiRequest,
    headers: &HeaderMap,
    body: &[u8],
    expire_watch: bool,
) -> Result<Response, ApiError> {
    let (rt, namespace, name, status) = match &req.target {
        Target::Collection { rt, namespace } => (*rt, namespace.as_deref(), None, false),
        Target::Object {
            rt,
            namespace,
            name,
            status,
        } => (*rt, namespace.as_deref(), Some(name.as_str()), *status),
        _ => return Err(unknown_path()),
    };
    let verb = req.verb.ok_or_else(method_not_allowed)?;
    let key = |name: &str| ObjKey::new(rt, namespace, name);
    let scope = if status { Scope::Status } else { Scope::Main };
    let store = &sim.store;
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let include_object = req.query.get("includeObject").map(String::as_str);
    match (verb, name) {
        (Verb::Get, Some(name)) => {
            let obj = store.get(rt, &key(name))?;
            if table::wanted(accept) {
                let rv = store.resource_version();
                let t = table::table(rt, &[obj], rv, None, include_object);
                return Ok(value_response(200, &t));
            }
            Ok(object_response(200, &obj))
        }
        (Verb::List, _) => {
            let filter = filter(req, rt, namespace, None)?;
            validate_list_options(req, false, sim.watch_list())?;
            let limit = match req.query.get("limit").map(|l| l.parse::<usize>()) {
                Some(Ok(0)) | None => None,
                Some(Ok(n)) => Some(n),
                Some(Err(_)) => return Err(ApiError::bad_request("invalid limit")),
            };
            let token =
                match req.query.get("continue").filter(|c| !c.is_empty()) {
                    Some(token) => Some(decode_continue(rt, namespace, token).map_err(|e| {
                        ApiError::bad_request(format!("invalid continue token: {e}"))
                    })?),
                    None => None,
                };
            let page = match (token, list_version(req, limit)?) {
                // k8s.io/apiserver pkg/storage/etcd3/store.go `GetList`: a token carries its own
                // version, so a list version beside it (other than "0") is refused.
                (Some(_), ListAt::Exact(_) | ListAt::NotOlderThan(_)) => {
                    return Err(ApiError::bad_request(
                        "specifying resource version is not allowed when using continue",
                    ));
                }
                (Some(token), ListAt::Any) => store.list_continue(rt, &filter, limit, &token)?,
                (None, ListAt::Exact(rv)) => match store.list_exact(rt, &filter, limit, rv) {
                    Ok(Some(page)) => page,
                    Ok(None) => return Err(too_large(rv, store.resource_version())),
                    Err(oldest) => {
                        return Err(ApiError::new(
                            410,
                            format!("too old resource version: {rv} ({oldest})"),
                        ));
                    }
                },
                (None, ListAt::NotOlderThan(rv)) if rv > store.resource_version() => {
                    return Err(too_large(rv, store.resource_version()));
                }
                (None, _) => store.list(rt, &filter, limit),
            };
            if table::wanted(accept) {
                let token = page.continue_token.as_deref();
                let t = table::table(
                    rt,
                    &page.items,
                    page.resource_version,
                    token,
                    include_object,
                );
                return Ok(value_response(200, &t));
            }
            Ok(json_response(200, list_body(rt, &page)))
        }
        (Verb::Watch, name) => {
            let table = table::wanted(accept).then(|| include_object.map(str::to_string));
            watch(sim, req, rt, namespace, name, expire_watch, table)
        }
        (Verb::Create, None) => {
            let dry = dry_run(req, "CreateOptions", None)?;
            let (obj, warnings) = body_object(req, rt, headers, body)?;
            Ok(with_warnings(
                object_response(201, &store.create(rt, namespace, obj, dry)?),
                &warnings,
            ))
        }
        (Verb::Update, Some(name)) => {
            let dry = dry_run(req, "UpdateOptions", None)?;
            let (obj, warnings) = body_object(req, rt, headers, body)?;
            Ok(with_warnings(
                object_response(200, &store.update(rt, &key(name), obj, scope, dry)?),
                &warnings,
            ))
        }
        (Verb::Patch, Some(name)) => {
            let content_type = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let kind = PatchKind::from_content_type(content_type).ok_or_else(|| {
                ApiError::new(
                    415,
                    format!(
                        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {content_type:?})"
                    ),
                )
            })?;
            if kind == PatchKind::Apply {
                return Err(ApiError::apply_unsupported());
            }
            let dry = dry_run(req, "PatchOptions", None)?;
            // Unknown fields of a merge-style patch body (a JSON patch names paths instead).
            let warnings = match kind {
                PatchKind::Json => Vec::new(),
                _ => match serde_json::from_slice::<Value>(body)
                    .or_else(|_| serde_norway::from_slice::<Value>(body))
                {
                    Ok(patch) if patch.is_object() => field_validation(req, rt, &patch)?,
                    _ => Vec::new(),
                },
            };
            Ok(with_warnings(
                object_response(200, &store.patch(rt, &key(name), kind, body, scope, dry)?),
                &warnings,
            ))
        }
        (Verb::Delete, Some(name)) => {
            let (pre, body_dry_run) = preconditions(body)?;
            let dry = dry_run(req, "DeleteOptions", body_dry_run)?;
            let obj = store.delete(rt, &key(name), &pre, dry)?;
            // ReturnDeletedObject (pkg/registry/core/service/storage/storage.go,
            // pkg/registry/core/pod/storage/storage.go): Services and Pods answer with the
            // deleted object; the generic registry answers a Success Status for the others.
            // Namespaces answer with the object (their REST Delete).
            let returns_object = matches!(rt.index, SERVICES | PODS | NAMESPACES);
            if returns_object {
                Ok(object_response(200, &obj))
            } else if finalizers(&obj).is_empty() {
                // Deleted now: the generic registry answers with a Success Status.
                let mut details = error::details(rt, name);
                details["uid"] = json!(meta_str(&obj, "uid").unwrap_or(""));
                Ok(value_response(
                    200,
                    &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}),
                ))
            } else {
                // Waiting for finalizers: the object, now carrying deletionTimestamp.
                Ok(object_response(200, &obj))
            }
        }
        _ => Err(method_not_allowed()),
    }
}

/// Server-side field validation (`fieldValidation`, k8s.io/apiserver/pkg/endpoints/handlers):
/// `Strict` refuses unknown fields with 400 `strict decoding error`; `Warn` (the default)
/// answers them as `Warning` headers; `Ignore` says nothing. The store drops them either way.
fn field_validation(
    req: &ApiRequest,
    rt: &ResourceType,
    obj: &Value,
) -> Result<Vec<String>, ApiError> {
    let mode = req
        .query
        .get("fieldValidation")
        .map_or("Warn", String::as_str);
    if !matches!(mode, "Ignore" | "Warn" | "Strict") {
        return Err(ApiError::bad_request(format!(
            "fieldValidation parameter unsupported: {mode}"
        )));
    }
    if mode == "Ignore" {
        return Ok(Vec::new());
    }
    let unknown: Vec<String> = validation::unknown_fields(rt.index, &mut obj.clone(), false)
        .into_iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect();
    if mode == "Strict" && !unknown.is_empty() {
        return Err(ApiError::bad_request(format!(
            "strict decoding error: {}",
            unknown.join(", ")
        )));
    }
    Ok(unknown)
}

/// Adds `Warning: 299 - "<text>"` headers, as the apiserver's warning recorder does.
fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let text = format!("299 - {:?}", w);
        if let Ok(v) = axum::http::HeaderValue::from_str(&text) {
            response.headers_mut().append(header::WARNING, v);
        }
    }
    response
}

fn object_response(status: u16, obj: &Arc<Value>) -> Response {
    value_response(status, obj)
}

/// A create/update body and the warnings of its field validation. Protobuf bodies skip the
/// unknown-field check: a typed message cannot carry unknown fields (the decoder refuses field
/// numbers it does not know), and the apiserver's strict decoding applies to JSON and YAML only.
fn body_object(
    req: &ApiRequest,
    rt: &ResourceType,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(Value, Vec<String>), ApiError> {
    let (obj, from_protobuf) = parse_body(headers, body)?;
    let warnings = if from_protobuf {
        field_validation(req, rt, &json!({}))?
    } else {
        field_validation(req, rt, &obj)?
    };
    Ok((obj, warnings))
}

/// Decodes a create/update body: JSON, YAML like the apiserver also accepts, or protobuf (which
/// client-go's typed clients, and so kubectl's generator commands, send) for the kinds
/// [`protobuf`] has tables for; other kinds and CBOR get 415. The flag tells protobuf bodies.
fn parse_body(headers: &HeaderMap, body: &[u8]) -> Result<(Value, bool), ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if essence == protobuf::MEDIA_TYPE {
        return Ok((protobuf::decode(body)?, true));
    }
    let v: Value = match essence.as_str() {
        "application/json" | "" | "*/*" => serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?,
        "application/yaml" => serde_norway::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; yaml parse error: {e}"))
        })?,
        other => {
            return Err(ApiError::new(
                415,
                format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (got {other:?})"
                ),
            ));
        }
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    Ok((v, false))
}

/// `dryRun` of a write: `All` (from the query, or the DeleteOptions body) or nothing;
/// anything else is the 422 of `ValidateDryRun` (pkg/apis/meta/v1/validation/validation.go).
fn dry_run(req: &ApiRequest, options: &str, body: Option<Vec<String>>) -> Result<bool, ApiError> {
    let mut values: Vec<String> = req
        .query
        .get("dryRun")
        .filter(|v| !v.is_empty())
        .map(|v| vec![v.clone()])
        .unwrap_or_default();
    values.extend(body.unwrap_or_default());
    if values.iter().all(|v| v == "All") {
        return Ok(!values.is_empty());
    }
    let shown = values
        .iter()
        .map(|v| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(" ");
    Err(ApiError::invalid_options(
        options,
        vec![format!(
            "dryRun: Unsupported value: []string{{{shown}}}: supported values: \"All\""
        )],
    ))
}

/// The resourceVersion semantics of a list ("Semantics for get and list" in the API concepts
/// documentation; k8s.io/apiserver pkg/storage/cacher/delegator.go `ShouldDelegateList` and
/// etcd3 `GetList`): unset or "0" is any recent state, `Exact` that version, `NotOlderThan` at
/// least that version. Without `resourceVersionMatch` a version other than "0" is
/// `NotOlderThan`, except with a `limit`, where it is the legacy exact match.
enum ListAt {
    Any,
    Exact(u64),
    NotOlderThan(u64),
}

fn list_version(req: &ApiRequest, limit: Option<usize>) -> Result<ListAt, ApiError> {
    let rv = req
        .query
        .get("resourceVersion")
        .map(String::as_str)
        .unwrap_or("");
    let matching = req
        .query
        .get("resourceVersionMatch")
        .map(String::as_str)
        .unwrap_or("");
    if rv.is_empty() || (rv == "0" && matching != "Exact") {
        return Ok(ListAt::Any);
    }
    let n: u64 = rv
        .parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv:?}")))?;
    Ok(match matching {
        "Exact" => ListAt::Exact(n),
        "" if limit.is_some() => ListAt::Exact(n),
        _ => ListAt::NotOlderThan(n),
    })
}

/// The apiserver's answer to a version it has not reached (`storage.NewTooLargeResourceVersionError`:
/// 504 with a retry hint).
fn too_large(rv: u64, current: u64) -> ApiError {
    ApiError {
        details: Some(
            json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1}),
        ),
        ..ApiError::new(
            504,
            format!("Timeout: Too large resource version: {rv}, current: {current}"),
        )
    }
}

/// `ValidateListOptions` (k8s.io/apimachinery/pkg/apis/meta/internalversion/validation/
/// validation.go): list and watch parameters the apiserver refuses with 422, as the apiserver
/// `watch_list` says answers them ([`WatchList`]).
fn validate_list_options(
    req: &ApiRequest,
    watch: bool,
    watch_list: WatchList,
) -> Result<(), ApiError> {
    let q = |k: &str| req.query.get(k).map(String::as_str).unwrap_or("");
    let matching = q("resourceVersionMatch");
    // Before 1.27 `ListOptions` had no `sendInitialEvents`: the parameter decoder drops it.
    let send_initial =
        watch_list != WatchList::Unsupported && req.query.contains_key("sendInitialEvents");
    let bookmarks = matches!(q("allowWatchBookmarks"), "true" | "1");
    let mut errs = Vec::new();
    if watch && watch_list != WatchList::Unsupported {
        if send_initial {
            if matching != "NotOlderThan" {
                errs.push("resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan".to_string());
            }
            if !bookmarks {
                errs.push("allowWatchBookmarks: Forbidden: sendInitialEvents requires setting allowWatchBookmarks to true".to_string());
            }
            // `validateWatchOptions(options, isWatchListFeatureEnabled)` since 1.27.
            if watch_list == WatchList::GateDisabled {
                errs.push("sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled".to_string());
            }
        }
        if !matching.is_empty() {
            if !send_initial {
                errs.push("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided".to_string());
            }
            if matching != "NotOlderThan" {
                errs.push(format!("resourceVersionMatch: Unsupported value: {matching:?}: supported values: \"NotOlderThan\""));
            }
            if !q("continue").is_empty() {
                errs.push("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided".to_string());
            }
        }
    } else {
        // The list rules, which before 1.27 were the watch rules too, with one more first.
        if !matching.is_empty() {
            if watch {
                errs.push(
                    "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch"
                        .to_string(),
                );
            }
            if q("resourceVersion").is_empty() {
                errs.push("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided".to_string());
            }
            if !q("continue").is_empty() {
                errs.push("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided".to_string());
            }
            if matching != "Exact" && matching != "NotOlderThan" {
                errs.push(format!("resourceVersionMatch: Unsupported value: {matching:?}: supported values: \"Exact\", \"NotOlderThan\", \"\""));
            }
            if matching == "Exact" && q("resourceVersion") == "0" {
                errs.push("resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"".to_string());
            }
        }
        if send_initial {
            errs.push(
                "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list".to_string(),
            );
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_options("ListOptions", errs))
    }
}

/// The field labels each kind can select on: the `AddFieldLabelConversionFunc`s of
/// pkg/apis/core/v1/conversion.go (Pod, Node, Event, Namespace, Service) and
/// pkg/apis/events/v1/conversion.go (`AddFieldLabelConversionsForEvent`: events.k8s.io/v1
/// Events, whose labels map onto the core Event's selectable fields), and
/// `runtime.DefaultMetaV1FieldSelectorConversion` (metadata.name, metadata.namespace) for the
/// others (ConfigMap, Lease).
fn field_labels(rt: &ResourceType) -> &'static [&'static str] {
    match rt.index {
        PODS => &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        ],
        NODES => &["metadata.name", "spec.unschedulable"],
        EVENTS => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
            "metadata.namespace",
            "metadata.name",
        ],
        EVENTS_V1 => &[
            "reason",
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reportingController",
            "source",
            "type",
            "metadata.namespace",
            "metadata.name",
        ],
        NAMESPACES => &["status.phase", "metadata.name"],
        SERVICES => &[
            "metadata.namespace",
            "metadata.name",
            "spec.clusterIP",
            "spec.type",
        ],
        _ => &["metadata.name", "metadata.namespace"],
    }
}

/// DeleteOptions from the body: preconditions and `dryRun`.
fn preconditions(body: &[u8]) -> Result<(Preconditions, Option<Vec<String>>), ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok((Preconditions::default(), None));
    }
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?;
    let pre = v.get("preconditions");
    let field = |f: &str| {
        pre.and_then(|p| p.get(f))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let dry_run = v.get("dryRun").and_then(Value::as_array).map(|a| {
        a.iter()
            .map(|d| d.as_str().unwrap_or("").to_string())
            .collect()
    });
    Ok((
        Preconditions {
            uid: field("uid"),
            resource_version: field("resourceVersion"),
        },
        dry_run,
    ))
}

fn filter(
    req: &ApiRequest,
    rt: &ResourceType,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Result<Filter, ApiError> {
    let labels = LabelSelector::parse(req.query.get("labelSelector").map_or("", String::as_str))
        .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
    let mut fields =
        FieldSelector::parse(req.query.get("fieldSelector").map_or("", String::as_str))
            .map_err(ApiError::bad_request)?;
    let allowed = field_labels(rt);
    if let Some(label) = fields
        .labels()
        .into_iter()
        .find(|l| !allowed.contains(&l.as_str()))
    {
        return Err(ApiError::bad_request(format!(
            "field label not supported: {label}"
        )));
    }
    // pkg/registry/core/event/strategy.go `ToSelectableFields`: `source` is
    // `source.component`, or the reporting controller when that is empty. The events.k8s.io
    // labels are the core ones converted; on the stored events.k8s.io view they read the
    // `deprecatedSource` and `reportingController` fields.
    match rt.index {
        EVENTS => fields.alias(
            "source",
            &[&["source", "component"], &["reportingComponent"]],
        ),
        EVENTS_V1 => fields.alias(
            "source",
            &[&["deprecatedSource", "component"], &["reportingController"]],
        ),
        _ => {}
    }
    Ok(Filter {
        namespace: namespace.map(str::to_string),
        name: name.map(str::to_string),
        labels,
        fields,
    })
}

/// Serialises a list without building one big JSON value: items are shared with the store.
fn list_body(rt: &ResourceType, page: &ListPage) -> Vec<u8> {
    let mut metadata = json!({"resourceVersion": page.resource_version.to_string()});
    if let Some(token) = &page.continue_token {
        metadata["continue"] = json!(token);
    }
    if let Some(n) = page.remaining {
        metadata["remainingItemCount"] = json!(n);
    }
    let head = json!({
        "apiVersion": rt.api_version(),
        "kind": format!("{}List", rt.kind),
        "metadata": metadata,
    });
    let mut buf = serde_json::to_vec(&head).unwrap_or_default();
    // Reopen the object to append `items`.
    buf.pop();
    buf.extend_from_slice(b",\"items\":[");
    for (i, item) in page.items.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        // Serialising a Value into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut buf, &**item);
    }
    buf.extend_from_slice(b"]}");
    buf
}

fn watch(
    sim: &Shared,
    req: &ApiRequest,
    rt: &'static ResourceType,
    namespace: Option<&str>,
    name: Option<&str>,
    expire: bool,
    table: Option<Option<String>>,
) -> Result<Response, ApiError> {
    let filter = filter(req, rt, namespace, name)?;
    let watch_list = sim.watch_list();
    validate_list_options(req, true, watch_list)?;
    let rv = watch::parse_resource_version(req.query.get("resourceVersion").map(String::as_str))?;
    let flag = |k: &str| req.query.get(k).is_some_and(|v| v == "true" || v == "1");
    // An apiserver before 1.27 never decoded `sendInitialEvents`: a plain watch.
    let send_initial = watch_list != WatchList::Unsupported && flag("sendInitialEvents");
    let bookmarks = flag("allowWatchBookmarks");
    let timeout = match req.query.get("timeoutSeconds").map(|t| t.parse::<u64>()) {
        Some(Ok(s)) if s > 0 => Duration::from_secs(s),
        Some(Err(_)) => return Err(ApiError::bad_request("invalid timeoutSeconds")),
        // The apiserver picks a random timeout between 1x and 2x its minimum request timeout.
        _ => Duration::from_secs(rand::rng().random_range(300..=600)),
    };
    if expire {
        sim.expired_watches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let current = sim.store.resource_version();
        return Ok(json_response(
            200,
            watch::expired_body(rv.unwrap_or(0), current),
        ));
    }
    let from = match rv {
        Some(n) => WatchFrom::After(n),
        None => WatchFrom::Current,
    };
    let epoch = sim.store.watch_epoch();
    let start = sim.store.start_watch(rt, &filter, from, send_initial);
    if let Some((requested, _)) = start.expired {
        sim.expired_watches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        sim.gate.expired_at(requested);
    }
    let params = WatchParams {
        rt,
        filter,
        after: if send_initial { 0 } else { rv.unwrap_or(0) },
        bookmarks,
        initial_events_end: send_initial && bookmarks,
        timeout,
        table,
    };
    Ok(json_response(200, watch::body(start, params, epoch)))
}
