//! OpenAPI documents for the served kinds: `/openapi/v2` (JSON) and `/openapi/v3` (the index)
//! with one document per group-version (`/openapi/v3/api/v1`, `/openapi/v3/apis/{g}/{v}`), as
//! kubectl reads them for `explain` and to decide how to validate `create`/`apply`.
//!
//! The schemas are a hand-written, reduced description of the kinds (openapi_v2.json, written
//! after the API reference; Pod `spec`/`status` are free-form objects); the v3 documents are
//! derived from it: `#/definitions/` becomes `#/components/schemas/`, a `$ref` with a
//! description becomes `allOf: [{$ref}]` as kube-openapi writes it, and each document carries
//! only the schemas its kinds reach. Paths carry the `x-kubernetes-group-version-kind` and
//! `x-kubernetes-action` extensions and the query parameters kubectl checks for (`dryRun`,
//! `fieldManager`, `fieldValidation`).

use std::collections::BTreeSet;
use std::sync::OnceLock;

use serde_json::{Map, Value, json};

use super::resources::{RESOURCES, ResourceType, groups};

static V2: &str = include_str!("openapi_v2.json");

/// `/openapi/v2`.
pub(crate) fn v2() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut doc: Value = serde_json::from_str(V2).expect("openapi_v2.json is JSON");
        doc["paths"] = Value::Object(paths(RESOURCES.iter(), false));
        doc
    })
}

/// The path of a group-version below `/openapi/v3/`: `api/v1` or `apis/{group}/{version}`.
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn all_gvs() -> Vec<(&'static str, &'static str)> {
    let mut gvs = vec![("", "v1")];
    gvs.extend(groups());
    gvs
}

/// A stable content hash (FNV-1a) for the `?hash=` of `serverRelativeURL`.
fn hash(v: &Value) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in serde_json::to_vec(v).unwrap_or_default() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016X}")
}

/// `/openapi/v3`: the index of group-version documents.
pub(crate) fn v3_index() -> Value {
    let mut paths = Map::new();
    for (g, v) in all_gvs() {
        let p = gv_path(g, v);
        let doc = v3(&p).unwrap_or(Value::Null);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={}", hash(&doc))}),
        );
    }
    json!({"paths": paths})
}

/// `/openapi/v3/{api/v1 | apis/g/v}`, or `None` for a group-version not served.
pub(crate) fn v3(gv: &str) -> Option<Value> {
    let (g, v) = all_gvs().into_iter().find(|(g, v)| gv_path(g, v) == gv)?;
    let rts: Vec<&ResourceType> = RESOURCES
        .iter()
        .filter(|r| r.group == g && r.version == v)
        .collect();
    let defs = v2()["definitions"].as_object()?;
    // The definitions of the kinds (and their lists), then everything they reach.
    let mut wanted: BTreeSet<String> = BTreeSet::new();
    let mut todo: Vec<String> = defs
        .iter()
        .filter(|(_, d)| {
            d["x-kubernetes-group-version-kind"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|gvk| {
                    gvk["group"] == g
                        && gvk["version"] == v
                        && rts.iter().any(|r| {
                            let k = gvk["kind"].as_str().unwrap_or("");
                            k == r.kind || k.strip_suffix("List") == Some(r.kind)
                        })
                })
        })
        .map(|(name, _)| name.clone())
        .collect();
    todo.push("io.k8s.apimachinery.pkg.apis.meta.v1.Status".to_string());
    while let Some(name) = todo.pop() {
        if !wanted.insert(name.clone()) {
            continue;
        }
        if let Some(d) = defs.get(&name) {
            refs(d, &mut todo);
        }
    }
    let schemas: Map<String, Value> = wanted
        .iter()
        .filter_map(|n| defs.get(n).map(|d| (n.clone(), to_v3(d))))
        .collect();
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": v2()["info"]["version"]},
        "paths": paths(rts.into_iter(), true),
        "components": {"schemas": schemas},
    }))
}

fn refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("$ref", Value::String(r)) => {
                        if let Some(n) = r.strip_prefix("#/definitions/") {
                            out.push(n.to_string());
                        }
                    }
                    _ => refs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

/// A v2 schema as kube-openapi writes it in v3.
fn to_v3(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                let r = r.replace("#/definitions/", "#/components/schemas/");
                if m.len() == 1 {
                    return json!({"$ref": r});
                }
                let mut out: Map<String, Value> = m
                    .iter()
                    .filter(|(k, _)| k.as_str() != "$ref")
                    .map(|(k, x)| (k.clone(), to_v3(x)))
                    .collect();
                out.insert("allOf".into(), json!([{"$ref": r}]));
                return Value::Object(out);
            }
            Value::Object(m.iter().map(|(k, x)| (k.clone(), to_v3(x))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(to_v3).collect()),
        other => other.clone(),
    }
}

fn definition_name(rt: &ResourceType) -> String {
    let pkg = match rt.group {
        "" => "core",
        "events.k8s.io" => "events",
        "coordination.k8s.io" => "coordination",
        g => g,
    };
    format!("io.k8s.api.{pkg}.{}.{}", rt.version, rt.kind)
}

/// Collection and object paths of the resources, with their operations.
fn paths<'a>(rts: impl Iterator<Item = &'a ResourceType>, v3: bool) -> Map<String, Value> {
    let mut out = Map::new();
    let schema_ref = |name: &str| {
        if v3 {
            json!({"$ref": format!("#/components/schemas/{name}")})
        } else {
            json!({"$ref": format!("#/definitions/{name}")})
        }
    };
    let param = |name: &str, path: bool| {
        let description = match name {
            "name" => "name of the object",
            "namespace" => "object name and auth scope, such as for teams and projects",
            "dryRun" => {
                "When present, indicates that modifications should not be persisted. The only valid value is All."
            }
            "fieldManager" => {
                "fieldManager is a name associated with the actor or entity that is making these changes."
            }
            "fieldValidation" => {
                "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields: Ignore, Warn or Strict."
            }
            _ => "",
        };
        let place = if path { "path" } else { "query" };
        if v3 {
            json!({"name": name, "in": place, "description": description, "required": path,
                   "schema": {"type": "string", "uniqueItems": true}})
        } else {
            json!({"name": name, "in": place, "description": description, "required": path,
                   "type": "string", "uniqueItems": true})
        }
    };
    let write_params = || {
        json!([
            param("dryRun", false),
            param("fieldManager", false),
            param("fieldValidation", false)
        ])
    };
    for rt in rts {
        let def = definition_name(rt);
        let gvk = json!([{"group": rt.group, "version": rt.version, "kind": rt.kind}]);
        let body = |name: &str| {
            if v3 {
                json!({"content": {"application/json": {"schema": schema_ref(name)}}})
            } else {
                json!({"name": "body", "in": "body", "required": true, "schema": schema_ref(name)})
            }
        };
        let op = |id: String, action: &str, body_def: Option<&str>, params: Value| {
            let mut o = json!({
                "operationId": id,
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk[0],
                "responses": {"200": {"description": "OK"}},
            });
            let mut params = params.as_array().cloned().unwrap_or_default();
            if let Some(d) = body_def {
                if v3 {
                    o["requestBody"] = body(d);
                } else {
                    params.push(body(d));
                }
            }
            if !params.is_empty() {
                o["parameters"] = Value::Array(params);
            }
            o
        };
        let prefix = if rt.group.is_empty() {
            format!("/api/{}", rt.version)
        } else {
            format!("/apis/{}/{}", rt.group, rt.version)
        };
        let scope = if rt.namespaced {
            "/namespaces/{namespace}"
        } else {
            ""
        };
        let id = format!("{}{}", rt.group.split('.').next().unwrap_or(""), rt.version);
        let ns = if rt.namespaced { "Namespaced" } else { "" };
        let collection = format!("{prefix}{scope}/{}", rt.plural);
        let path_params = |named: bool| {
            let mut p = Vec::new();
            if named {
                p.push(param("name", true));
            }
            if rt.namespaced {
                p.push(param("namespace", true));
            }
            Value::Array(p)
        };
        out.insert(
            collection.clone(),
            json!({
                "get": op(format!("list{id}{ns}{}", rt.kind), "list", None, json!([])),
                "post": op(format!("create{id}{ns}{}", rt.kind), "post", Some(&def), write_params()),
                "parameters": path_params(false),
            }),
        );
        let mut object = json!({
            "get": op(format!("read{id}{ns}{}", rt.kind), "get", None, json!([])),
            "put": op(format!("replace{id}{ns}{}", rt.kind), "put", Some(&def), write_params()),
            "patch": op(format!("patch{id}{ns}{}", rt.kind), "patch", None, write_params()),
            "delete": op(format!("delete{id}{ns}{}", rt.kind), "delete", None, json!([param("dryRun", false)])),
            "parameters": path_params(true),
        });
        out.insert(format!("{collection}/{{name}}"), object.take());
        if rt.status {
            out.insert(
                format!("{collection}/{{name}}/status"),
                json!({
                    "get": op(format!("read{id}{ns}{}Status", rt.kind), "get", None, json!([])),
                    "put": op(format!("replace{id}{ns}{}Status", rt.kind), "put", Some(&def), write_params()),
                    "patch": op(format!("patch{id}{ns}{}Status", rt.kind), "patch", None, write_params()),
                    "parameters": path_params(true),
                }),
            );
        }
    }
    out
}
