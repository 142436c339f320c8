//! Serving one parsed request: discovery documents and the resource verbs.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, Method, header};
use axum::response::{IntoResponse, Response};
use rand::Rng;
use serde_json::{Value, json};

use super::Shared;
use super::discovery;
use super::error::{self, ApiError};
use super::meta::{finalizers, meta_str};
use super::patch::PatchKind;
use super::request::{ApiRequest, Target, Verb};
use super::resources::{self, ResourceType};
use super::selector::{FieldSelector, Filter, LabelSelector};
use super::server::{error_response, json_response, value_response};
use super::store::{ListPage, ObjKey, Preconditions, Scope, WatchFrom, decode_continue};
use super::table;
use super::watch::{self, WatchParams};

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
    match &req.target {
        Target::Root => discovery(discovery::root()),
        Target::Health => {
            ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "ok").into_response()
        }
        Target::Version => discovery(discovery::version()),
        Target::CoreVersions => discovery(discovery::core_versions(sim.addr)),
        Target::Groups => discovery(discovery::group_list()),
        Target::Group(g) => match resources::groups().into_iter().find(|(x, _)| x == g) {
            Some((g, v)) => discovery(discovery::group(g, v)),
            None => error_response(&unknown_path()),
        },
        Target::ResourceList(g, v) => discovery(discovery::resource_list(g, v)),
        Target::Unknown => error_response(&unknown_path()),
        Target::Collection { .. } | Target::Object { .. } => {
            match resource_request(sim, req, headers, body, expire_watch) {
                Ok(response) => response,
                Err(e) => error_response(&e),
            }
        }
    }
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
            let filter = filter(req, namespace, None)?;
            let limit = match req.query.get("limit").map(|l| l.parse::<usize>()) {
                Some(Ok(0)) | None => None,
                Some(Ok(n)) => Some(n),
                Some(Err(_)) => return Err(ApiError::bad_request("invalid limit")),
            };
            let after = match req.query.get("continue").filter(|c| !c.is_empty()) {
                Some(token) => Some(decode_continue(token).ok_or_else(|| {
                    ApiError::bad_request("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
                })?),
                None => None,
            };
            let page = store.list(rt, &filter, limit, after);
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
            let obj = parse_body(headers, body)?;
            Ok(object_response(201, &store.create(rt, namespace, obj)?))
        }
        (Verb::Update, Some(name)) => {
            let obj = parse_body(headers, body)?;
            Ok(object_response(
                200,
                &store.update(rt, &key(name), obj, scope)?,
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
                        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {content_type:?})"
                    ),
                )
            })?;
            if kind == PatchKind::Apply
                && req.query.get("fieldManager").is_none_or(|m| m.is_empty())
            {
                return Err(ApiError::invalid(
                    rt,
                    name,
                    "fieldManager: Required value: is required for apply patch",
                ));
            }
            Ok(object_response(
                200,
                &store.patch(rt, &key(name), kind, body, scope)?,
            ))
        }
        (Verb::Delete, Some(name)) => {
            let pre = preconditions(body)?;
            let obj = store.delete(rt, &key(name), &pre)?;
            if finalizers(&obj).is_empty() {
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

fn object_response(status: u16, obj: &Arc<Value>) -> Response {
    value_response(status, obj)
}

/// Decodes a create/update body: JSON, or YAML like the apiserver also accepts. Protobuf (which
/// kubectl's generator commands prefer) gets 415, as from an apiserver without it.
fn parse_body(headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    let essence = content_type.split(';').next().unwrap_or("").trim();
    let v: Value = match essence {
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
                    "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {other:?})"
                ),
            ));
        }
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    Ok(v)
}

fn preconditions(body: &[u8]) -> Result<Preconditions, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Preconditions::default());
    }
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?;
    let pre = v.get("preconditions");
    let field = |f: &str| {
        pre.and_then(|p| p.get(f))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Ok(Preconditions {
        uid: field("uid"),
        resource_version: field("resourceVersion"),
    })
}

fn filter(
    req: &ApiRequest,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Result<Filter, ApiError> {
    let labels = LabelSelector::parse(req.query.get("labelSelector").map_or("", String::as_str))
        .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
    let fields = FieldSelector::parse(req.query.get("fieldSelector").map_or("", String::as_str))
        .map_err(ApiError::bad_request)?;
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
    let filter = filter(req, namespace, name)?;
    let rv = watch::parse_resource_version(req.query.get("resourceVersion").map(String::as_str))?;
    let flag = |k: &str| req.query.get(k).is_some_and(|v| v == "true" || v == "1");
    let send_initial = flag("sendInitialEvents");
    let bookmarks = flag("allowWatchBookmarks");
    let timeout = match req.query.get("timeoutSeconds").map(|t| t.parse::<u64>()) {
        Some(Ok(s)) if s > 0 => Duration::from_secs(s),
        Some(Err(_)) => return Err(ApiError::bad_request("invalid timeoutSeconds")),
        // The apiserver picks a random timeout between 1x and 2x its minimum request timeout.
        _ => Duration::from_secs(rand::rng().random_range(300..=600)),
    };
    if expire {
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
