//! JSON for dynamic calls (`wasm-ccm-dev call`, the conformance runner): arguments are converted to
//! component values by the function's WIT types, results back, with WIT's own names.
//!
//! Encoding: records are objects with the WIT field names (`provider-id`); a missing field takes
//! its zero value (empty string, 0, false, empty list, none), an unknown one is an error;
//! `list<tuple<string, string>>` (labels, annotations) is an object `{"key": "value"}` (an array
//! of pairs is accepted too); enums are their case name (`"internal-ip"`); variants are
//! `{"case": payload}` or `"case"` without payload; options are `null` or the value; results are
//! `{"ok": v}` / `{"err": e}`. A function with one parameter takes its value directly, one with
//! several an object keyed by parameter name or an array in order.

use serde_json::{Map, Value, json};
use wasmtime::Store;
use wasmtime::component::{Instance, Type, Val};

use crate::bindings::types::{ProviderError, Retry};
use crate::state::InstanceState;

pub(crate) async fn call(
    store: &mut Store<InstanceState>,
    instance: &Instance,
    export: &str,
    function: &str,
    target: &str,
    input: Value,
) -> wasmtime::Result<Result<Value, ProviderError>> {
    let Some(iface) = instance.get_export_index(&mut *store, None, export) else {
        return Ok(Err(ProviderError::Permanent(format!(
            "the driver does not export {export}"
        ))));
    };
    let func = instance
        .get_export_index(&mut *store, Some(&iface), function)
        .and_then(|idx| instance.get_func(&mut *store, idx));
    let Some(func) = func else {
        return Err(wasmtime::Error::msg(format!(
            "{export} has no function `{function}`"
        )))
        .map_err(|e| {
            e.context(crate::error::HostError::UnknownFunction(format!(
                "no function {target}"
            )))
        });
    };
    let ty = func.ty(&*store);
    let params: Vec<(String, Type)> = ty.params().map(|(n, t)| (n.to_string(), t)).collect();
    let args = match arguments(&params, input) {
        Ok(a) => a,
        Err(msg) => {
            return Err(wasmtime::Error::new(crate::error::HostError::BadArguments(
                format!("{target}: {msg}"),
            )));
        }
    };
    let result_types: Vec<Type> = ty.results().collect();
    let mut results = vec![Val::Bool(false); result_types.len()];
    func.call_async(&mut *store, &args, &mut results).await?;
    let (Some(val), Some(ty)) = (results.pop(), result_types.last()) else {
        return Ok(Ok(Value::Null));
    };
    // `result<T, provider-error>` becomes the value or the typed error; anything else is the value.
    if let (Val::Result(r), Type::Result(rt)) = (&val, ty) {
        return Ok(match r {
            Ok(v) => Ok(match (v, rt.ok()) {
                (Some(v), Some(t)) => to_json(v, &t),
                _ => Value::Null,
            }),
            Err(e) => Err(provider_error(e.as_deref())),
        });
    }
    Ok(Ok(to_json(&val, ty)))
}

fn arguments(params: &[(String, Type)], input: Value) -> Result<Vec<Val>, String> {
    match (params.len(), input) {
        (0, Value::Null) => Ok(Vec::new()),
        (0, Value::Object(m)) if m.is_empty() => Ok(Vec::new()),
        (0, Value::Array(a)) if a.is_empty() => Ok(Vec::new()),
        (0, _) => Err("takes no arguments; pass null or {}".into()),
        (1, v) => Ok(vec![from_json(&v, &params[0].1, &params[0].0)?]),
        (_, Value::Array(items)) => {
            if items.len() != params.len() {
                return Err(format!(
                    "takes {} arguments ({}), got {}",
                    params.len(),
                    names(params),
                    items.len()
                ));
            }
            params
                .iter()
                .zip(items.iter())
                .map(|((n, t), v)| from_json(v, t, n))
                .collect()
        }
        (_, Value::Object(mut m)) => {
            let out = params
                .iter()
                .map(|(n, t)| from_json(&m.remove(n).unwrap_or(Value::Null), t, n))
                .collect::<Result<Vec<_>, _>>()?;
            if let Some(k) = m.keys().next() {
                return Err(format!(
                    "has no parameter `{k}`; its parameters are {}",
                    names(params)
                ));
            }
            Ok(out)
        }
        (_, _) => Err(format!(
            "takes several arguments: pass an object with {} or an array",
            names(params)
        )),
    }
}

fn names(params: &[(String, Type)]) -> String {
    params
        .iter()
        .map(|(n, _)| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn is_string_pairs(ty: &Type) -> bool {
    if let Type::List(l) = ty
        && let Type::Tuple(t) = l.ty()
    {
        let types: Vec<Type> = t.types().collect();
        return types.len() == 2 && types.iter().all(|t| matches!(t, Type::String));
    }
    false
}

/// Converts JSON to a component value of type `ty`; `path` names the spot in error messages.
pub fn from_json(v: &Value, ty: &Type, path: &str) -> Result<Val, String> {
    let wrong = |expected: &str| format!("{path}: expected {expected}, got {v}");
    if v.is_null() && !matches!(ty, Type::Option(_)) {
        return zero(ty, path);
    }
    Ok(match ty {
        Type::Bool => Val::Bool(v.as_bool().ok_or_else(|| wrong("true or false"))?),
        Type::String => Val::String(v.as_str().ok_or_else(|| wrong("a string"))?.to_string()),
        Type::Char => {
            let s = v.as_str().ok_or_else(|| wrong("a one-character string"))?;
            let mut cs = s.chars();
            match (cs.next(), cs.next()) {
                (Some(c), None) => Val::Char(c),
                _ => return Err(wrong("a one-character string")),
            }
        }
        Type::U8 => Val::U8(int(v, path)?),
        Type::U16 => Val::U16(int(v, path)?),
        Type::U32 => Val::U32(int(v, path)?),
        Type::U64 => Val::U64(int(v, path)?),
        Type::S8 => Val::S8(int(v, path)?),
        Type::S16 => Val::S16(int(v, path)?),
        Type::S32 => Val::S32(int(v, path)?),
        Type::S64 => Val::S64(int(v, path)?),
        Type::Float32 => Val::Float32(v.as_f64().ok_or_else(|| wrong("a number"))? as f32),
        Type::Float64 => Val::Float64(v.as_f64().ok_or_else(|| wrong("a number"))?),
        Type::List(l) if is_string_pairs(ty) && v.is_object() => {
            let m = v.as_object().ok_or_else(|| wrong("an object"))?;
            let _ = l;
            Val::List(
                m.iter()
                    .map(|(k, val)| {
                        let s = val
                            .as_str()
                            .ok_or_else(|| format!("{path}.{k}: expected a string, got {val}"))?;
                        Ok(Val::Tuple(vec![
                            Val::String(k.clone()),
                            Val::String(s.to_string()),
                        ]))
                    })
                    .collect::<Result<_, String>>()?,
            )
        }
        Type::List(l) => {
            if let (Type::U8, Some(s)) = (l.ty(), v.as_str()) {
                return Ok(Val::List(s.bytes().map(Val::U8).collect()));
            }
            let items = v.as_array().ok_or_else(|| wrong("an array"))?;
            let et = l.ty();
            Val::List(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| from_json(x, &et, &format!("{path}[{i}]")))
                    .collect::<Result<_, _>>()?,
            )
        }
        Type::Tuple(t) => {
            let items = v.as_array().ok_or_else(|| wrong("an array"))?;
            let types: Vec<Type> = t.types().collect();
            if items.len() != types.len() {
                return Err(wrong(&format!("an array of {}", types.len())));
            }
            Val::Tuple(
                items
                    .iter()
                    .zip(types.iter())
                    .enumerate()
                    .map(|(i, (x, t))| from_json(x, t, &format!("{path}[{i}]")))
                    .collect::<Result<_, _>>()?,
            )
        }
        Type::Record(r) => {
            let obj = v.as_object().ok_or_else(|| wrong("an object"))?;
            let fields: Vec<(String, Type)> =
                r.fields().map(|f| (f.name.to_string(), f.ty)).collect();
            if let Some(k) = obj.keys().find(|k| !fields.iter().any(|(n, _)| n == *k)) {
                let known = fields
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(format!("{path}: unknown field `{k}` (fields: {known})"));
            }
            Val::Record(
                fields
                    .iter()
                    .map(|(n, t)| {
                        Ok((
                            n.clone(),
                            from_json(
                                obj.get(n).unwrap_or(&Value::Null),
                                t,
                                &format!("{path}.{n}"),
                            )?,
                        ))
                    })
                    .collect::<Result<_, String>>()?,
            )
        }
        Type::Enum(e) => {
            let s = v.as_str().ok_or_else(|| wrong("a string"))?;
            let cases: Vec<&str> = e.names().collect();
            if !cases.contains(&s) {
                return Err(format!("{path}: `{s}` is not one of {}", cases.join(", ")));
            }
            Val::Enum(s.to_string())
        }
        Type::Variant(var) => {
            let cases: Vec<(String, Option<Type>)> =
                var.cases().map(|c| (c.name.to_string(), c.ty)).collect();
            let (name, payload) = match v {
                Value::String(s) => (s.clone(), Value::Null),
                Value::Object(m) if m.len() == 1 => m
                    .iter()
                    .next()
                    .map(|(k, p)| (k.clone(), p.clone()))
                    .unwrap_or_default(),
                _ => return Err(wrong("a case name or {\"case\": payload}")),
            };
            let Some((_, case_ty)) = cases.iter().find(|(n, _)| *n == name) else {
                let known = cases
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(format!("{path}: `{name}` is not one of {known}"));
            };
            let payload = match case_ty {
                Some(t) => Some(Box::new(from_json(&payload, t, &format!("{path}.{name}"))?)),
                None => None,
            };
            Val::Variant(name, payload)
        }
        Type::Option(o) => match v {
            Value::Null => Val::Option(None),
            x => Val::Option(Some(Box::new(from_json(x, &o.ty(), path)?))),
        },
        Type::Result(r) => {
            let m = v
                .as_object()
                .ok_or_else(|| wrong("{\"ok\": …} or {\"err\": …}"))?;
            if let Some(x) = m.get("ok") {
                Val::Result(Ok(r
                    .ok()
                    .map(|t| from_json(x, &t, path).map(Box::new))
                    .transpose()?))
            } else if let Some(x) = m.get("err") {
                Val::Result(Err(r
                    .err()
                    .map(|t| from_json(x, &t, path).map(Box::new))
                    .transpose()?))
            } else {
                return Err(wrong("{\"ok\": …} or {\"err\": …}"));
            }
        }
        Type::Flags(f) => {
            let items = v
                .as_array()
                .ok_or_else(|| wrong("an array of flag names"))?;
            let known: Vec<&str> = f.names().collect();
            let mut out = Vec::new();
            for i in items {
                let s = i.as_str().ok_or_else(|| wrong("flag names"))?;
                if !known.contains(&s) {
                    return Err(format!("{path}: unknown flag `{s}`"));
                }
                out.push(s.to_string());
            }
            Val::Flags(out)
        }
        _ => return Err(format!("{path}: this WIT type cannot be given as JSON")),
    })
}

fn int<T: TryFrom<i64> + TryFrom<u64>>(v: &Value, path: &str) -> Result<T, String> {
    let bad = || format!("{path}: expected an integer in range, got {v}");
    if let Some(u) = v.as_u64() {
        return T::try_from(u).map_err(|_| bad());
    }
    let i = v.as_i64().ok_or_else(bad)?;
    T::try_from(i).map_err(|_| bad())
}

fn zero(ty: &Type, path: &str) -> Result<Val, String> {
    Ok(match ty {
        Type::Bool => Val::Bool(false),
        Type::String => Val::String(String::new()),
        Type::U8 => Val::U8(0),
        Type::U16 => Val::U16(0),
        Type::U32 => Val::U32(0),
        Type::U64 => Val::U64(0),
        Type::S8 => Val::S8(0),
        Type::S16 => Val::S16(0),
        Type::S32 => Val::S32(0),
        Type::S64 => Val::S64(0),
        Type::Float32 => Val::Float32(0.0),
        Type::Float64 => Val::Float64(0.0),
        Type::List(_) => Val::List(Vec::new()),
        Type::Option(_) => Val::Option(None),
        Type::Flags(_) => Val::Flags(Vec::new()),
        Type::Record(r) => Val::Record(
            r.fields()
                .map(|f| {
                    Ok((
                        f.name.to_string(),
                        zero(&f.ty, &format!("{path}.{}", f.name))?,
                    ))
                })
                .collect::<Result<_, String>>()?,
        ),
        Type::Enum(e) => Val::Enum(e.names().next().unwrap_or_default().to_string()),
        _ => return Err(format!("{path} is required")),
    })
}

/// Converts a component value of type `ty` to JSON.
pub fn to_json(v: &Val, ty: &Type) -> Value {
    match (v, ty) {
        (Val::Bool(b), _) => json!(b),
        (Val::U8(n), _) => json!(n),
        (Val::U16(n), _) => json!(n),
        (Val::U32(n), _) => json!(n),
        (Val::U64(n), _) => json!(n),
        (Val::S8(n), _) => json!(n),
        (Val::S16(n), _) => json!(n),
        (Val::S32(n), _) => json!(n),
        (Val::S64(n), _) => json!(n),
        (Val::Float32(n), _) => json!(n),
        (Val::Float64(n), _) => json!(n),
        (Val::Char(c), _) => json!(c.to_string()),
        (Val::String(s), _) => json!(s),
        (Val::List(items), t) if is_string_pairs(t) => {
            let mut m = Map::new();
            for item in items {
                if let Val::Tuple(kv) = item
                    && let [Val::String(k), Val::String(v)] = kv.as_slice()
                {
                    m.insert(k.clone(), json!(v));
                }
            }
            Value::Object(m)
        }
        (Val::List(items), Type::List(l)) => {
            let et = l.ty();
            Value::Array(items.iter().map(|x| to_json(x, &et)).collect())
        }
        (Val::Tuple(items), Type::Tuple(t)) => Value::Array(
            items
                .iter()
                .zip(t.types())
                .map(|(x, t)| to_json(x, &t))
                .collect(),
        ),
        (Val::Record(fields), Type::Record(r)) => Value::Object(
            fields
                .iter()
                .zip(r.fields())
                .map(|((n, x), f)| (n.clone(), to_json(x, &f.ty)))
                .collect(),
        ),
        (Val::Enum(s), _) => json!(s),
        (Val::Variant(name, payload), Type::Variant(var)) => {
            let case_ty = var.cases().find(|c| c.name == name).and_then(|c| c.ty);
            match (payload, case_ty) {
                (Some(p), Some(t)) => json!({ name.clone(): to_json(p, &t) }),
                _ => json!(name),
            }
        }
        (Val::Option(None), _) => Value::Null,
        (Val::Option(Some(x)), Type::Option(o)) => to_json(x, &o.ty()),
        (Val::Result(r), Type::Result(rt)) => match r {
            Ok(x) => json!({ "ok": x.as_deref().zip(rt.ok()).map(|(x, t)| to_json(x, &t)) }),
            Err(x) => json!({ "err": x.as_deref().zip(rt.err()).map(|(x, t)| to_json(x, &t)) }),
        },
        (Val::Flags(f), _) => json!(f),
        _ => Value::Null,
    }
}

/// Converts a `provider-error` value into the typed error.
fn provider_error(v: Option<&Val>) -> ProviderError {
    let text = |p: &Option<Box<Val>>| match p.as_deref() {
        Some(Val::String(s)) => s.clone(),
        _ => String::new(),
    };
    match v {
        Some(Val::Variant(name, payload)) => match name.as_str() {
            "not-found" => ProviderError::NotFound(text(payload)),
            "not-implemented" => ProviderError::NotImplemented,
            "implemented-elsewhere" => ProviderError::ImplementedElsewhere,
            "invalid-config" => ProviderError::InvalidConfig(text(payload)),
            "unauthorized" => ProviderError::Unauthorized(text(payload)),
            "rate-limited" => ProviderError::RateLimited(match payload.as_deref() {
                Some(Val::Option(Some(s))) => match **s {
                    Val::U32(n) => Some(n),
                    _ => None,
                },
                _ => None,
            }),
            "retry-after" => {
                let mut retry = Retry {
                    seconds: 0,
                    reason: String::new(),
                };
                if let Some(Val::Record(fields)) = payload.as_deref() {
                    for (n, x) in fields {
                        match (n.as_str(), x) {
                            ("seconds", Val::U32(s)) => retry.seconds = *s,
                            ("reason", Val::String(r)) => retry.reason = r.clone(),
                            _ => {}
                        }
                    }
                }
                ProviderError::RetryAfter(retry)
            }
            "transient" => ProviderError::Transient(text(payload)),
            _ => ProviderError::Permanent(text(payload)),
        },
        _ => ProviderError::Permanent("the driver returned an error the host cannot read".into()),
    }
}

/// The JSON form of a provider error, as the CLI prints it.
pub fn provider_error_json(e: &ProviderError) -> Value {
    match e {
        ProviderError::NotFound(m) => json!({ "not-found": m }),
        ProviderError::NotImplemented => json!("not-implemented"),
        ProviderError::ImplementedElsewhere => json!("implemented-elsewhere"),
        ProviderError::InvalidConfig(m) => json!({ "invalid-config": m }),
        ProviderError::Unauthorized(m) => json!({ "unauthorized": m }),
        ProviderError::RateLimited(s) => json!({ "rate-limited": s }),
        ProviderError::RetryAfter(r) => {
            json!({ "retry-after": { "seconds": r.seconds, "reason": r.reason } })
        }
        ProviderError::Transient(m) => json!({ "transient": m }),
        ProviderError::Permanent(m) => json!({ "permanent": m }),
    }
}

/// A typed [`Service`](crate::types::Service) from the same JSON a dynamic call takes (WIT field
/// names, zero values for missing fields, label maps as objects). For `--cluster-services` and
/// scenario files.
pub fn service_from_json(v: &Value) -> Result<crate::types::Service, String> {
    use crate::types::{
        Ingress, IpFamily, IpMode, Protocol, Service, ServicePort, SessionAffinity, TrafficPolicy,
    };
    let o = Fields::new(
        v,
        "service",
        &[
            "namespace",
            "name",
            "uid",
            "labels",
            "annotations",
            "ports",
            "external-traffic-policy",
            "health-check-node-port",
            "load-balancer-ip",
            "load-balancer-source-ranges",
            "session-affinity",
            "session-affinity-timeout",
            "ip-families",
            "load-balancer-class",
            "ingress",
        ],
    )?;
    let ports = o
        .list("ports")?
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let p = Fields::new(
                p,
                &format!("service.ports[{i}]"),
                &["name", "protocol", "port", "node-port"],
            )?;
            Ok(ServicePort {
                name: p.string("name")?,
                protocol: match p.string("protocol")?.as_str() {
                    "" | "tcp" => Protocol::Tcp,
                    "udp" => Protocol::Udp,
                    "sctp" => Protocol::Sctp,
                    other => {
                        return Err(format!(
                            "{}.protocol: `{other}` is not one of tcp, udp, sctp",
                            p.path
                        ));
                    }
                },
                port: p.int("port")?,
                node_port: p.int("node-port")?,
            })
        })
        .collect::<Result<_, String>>()?;
    let ingress = o
        .list("ingress")?
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let g = Fields::new(
                g,
                &format!("service.ingress[{i}]"),
                &["ip", "hostname", "ip-mode"],
            )?;
            Ok(Ingress {
                ip: g.opt_string("ip")?,
                hostname: g.opt_string("hostname")?,
                ip_mode: match g.opt_string("ip-mode")?.as_deref() {
                    None => None,
                    Some("vip") => Some(IpMode::Vip),
                    Some("proxy") => Some(IpMode::Proxy),
                    Some(other) => {
                        return Err(format!("{}.ip-mode: `{other}` is not vip or proxy", g.path));
                    }
                },
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(Service {
        namespace: o.string("namespace")?,
        name: o.string("name")?,
        uid: o.string("uid")?,
        labels: o.pairs("labels")?,
        annotations: o.pairs("annotations")?,
        ports,
        external_traffic_policy: match o.string("external-traffic-policy")?.as_str() {
            "" | "cluster" => TrafficPolicy::Cluster,
            "local" => TrafficPolicy::Local,
            other => {
                return Err(format!(
                    "service.external-traffic-policy: `{other}` is not cluster or local"
                ));
            }
        },
        health_check_node_port: o.int("health-check-node-port")?,
        load_balancer_ip: o.opt_string("load-balancer-ip")?,
        load_balancer_source_ranges: o.strings("load-balancer-source-ranges")?,
        session_affinity: match o.string("session-affinity")?.as_str() {
            "" | "none" => SessionAffinity::None,
            "client-ip" => SessionAffinity::ClientIp,
            other => {
                return Err(format!(
                    "service.session-affinity: `{other}` is not none or client-ip"
                ));
            }
        },
        session_affinity_timeout: match o.get("session-affinity-timeout") {
            None | Some(Value::Null) => None,
            Some(_) => Some(o.int("session-affinity-timeout")?),
        },
        ip_families: o
            .strings("ip-families")?
            .iter()
            .map(|f| match f.as_str() {
                "ipv4" => Ok(IpFamily::Ipv4),
                "ipv6" => Ok(IpFamily::Ipv6),
                other => Err(format!(
                    "service.ip-families: `{other}` is not ipv4 or ipv6"
                )),
            })
            .collect::<Result<_, String>>()?,
        load_balancer_class: o.opt_string("load-balancer-class")?,
        ingress,
    })
}

/// The arguments of `load-balancer.ensure`/`update` as a caller writes them (`{"service": …,
/// "nodes": [node, …]}` or `[service, [node, …]]`) turned into the WIT's (`nodes` becomes the
/// `node-set` record) and the node set the call hands out through `cluster.nodes`.
pub(crate) fn node_set_argument(input: Value) -> Result<(Value, crate::call::SharedNodes), String> {
    let list = |v: &Value| -> Result<Vec<crate::types::Node>, String> {
        match v {
            Value::Null => Ok(Vec::new()),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, n)| node_from_json(n).map_err(|e| format!("nodes[{i}]: {e}")))
                .collect(),
            _ => Err("`nodes` must be an array of nodes".to_string()),
        }
    };
    let record = |set: &crate::call::SharedNodes| json!({"generation": set.generation(), "count": set.nodes().len()});
    match input {
        Value::Object(mut m) => {
            let nodes =
                crate::call::SharedNodes::new(list(m.get("nodes").unwrap_or(&Value::Null))?);
            m.insert("nodes".to_string(), record(&nodes));
            Ok((Value::Object(m), nodes))
        }
        Value::Array(mut a) if a.len() == 2 => {
            let nodes = crate::call::SharedNodes::new(list(&a[1])?);
            a[1] = record(&nodes);
            Ok((Value::Array(a), nodes))
        }
        _ => Err("pass {\"service\": …, \"nodes\": [ … ]} or [service, [nodes]]".to_string()),
    }
}

/// A typed [`Node`](crate::types::Node) from the same JSON a dynamic call takes (WIT field names,
/// label maps as objects, `ready` defaulting to true). For scenario files.
pub fn node_from_json(v: &Value) -> Result<crate::types::Node, String> {
    use crate::types::{Node, Taint};
    let o = Fields::new(
        v,
        "node",
        &[
            "name",
            "uid",
            "provider-id",
            "labels",
            "annotations",
            "addresses",
            "taints",
            "ready",
        ],
    )?;
    let addresses = o
        .list("addresses")?
        .iter()
        .enumerate()
        .map(|(i, a)| address_from_json(a, &format!("node.addresses[{i}]")))
        .collect::<Result<_, String>>()?;
    let taints = o
        .list("taints")?
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let t = Fields::new(t, &format!("node.taints[{i}]"), &["key", "value", "effect"])?;
            Ok(Taint {
                key: t.string("key")?,
                value: t.string("value")?,
                effect: t.string("effect")?,
            })
        })
        .collect::<Result<_, String>>()?;
    let ready = match o.get("ready") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(other) => return Err(format!("node.ready: expected true or false, got {other}")),
    };
    Ok(Node {
        name: o.string("name")?,
        uid: o.string("uid")?,
        provider_id: o.string("provider-id")?,
        labels: o.pairs("labels")?,
        annotations: o.pairs("annotations")?,
        addresses,
        taints,
        ready,
    })
}

/// A node address from `{"kind": "internal-ip", "address": "10.0.0.1"}`.
pub fn address_from_json(v: &Value, path: &str) -> Result<crate::types::NodeAddress, String> {
    use crate::types::NodeAddress;
    let a = Fields::new(v, path, &["kind", "address"])?;
    let kind = a.string("kind")?;
    Ok(NodeAddress {
        kind: address_type(&kind).ok_or_else(|| {
            format!(
                "{path}.kind: `{kind}` is not one of hostname, internal-ip, external-ip, internal-dns, external-dns"
            )
        })?,
        address: a.string("address")?,
    })
}

/// `internal-ip` → [`AddressType::InternalIp`](crate::types::AddressType), and so on.
pub fn address_type(kind: &str) -> Option<crate::types::AddressType> {
    use crate::types::AddressType;
    Some(match kind {
        "hostname" => AddressType::Hostname,
        "internal-ip" => AddressType::InternalIp,
        "external-ip" => AddressType::ExternalIp,
        "internal-dns" => AddressType::InternalDns,
        "external-dns" => AddressType::ExternalDns,
        _ => return None,
    })
}

/// The WIT name of an address type.
pub fn address_type_name(kind: crate::types::AddressType) -> &'static str {
    use crate::types::AddressType;
    match kind {
        AddressType::Hostname => "hostname",
        AddressType::InternalIp => "internal-ip",
        AddressType::ExternalIp => "external-ip",
        AddressType::InternalDns => "internal-dns",
        AddressType::ExternalDns => "external-dns",
    }
}

/// Instance metadata in the JSON form the CLI prints.
pub fn metadata_json(m: &crate::types::InstanceMetadata) -> Value {
    json!({
        "provider-id": m.provider_id,
        "instance-type": m.instance_type,
        "zone": m.zone,
        "region": m.region,
        "addresses": m.addresses.iter().map(|a| json!({
            "kind": address_type_name(a.kind),
            "address": a.address,
        })).collect::<Vec<_>>(),
        "additional-labels": m.additional_labels.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect::<Map<String, Value>>(),
    })
}

/// Ingress entries in the JSON form the CLI prints.
pub fn ingress_json(list: &[crate::types::Ingress]) -> Value {
    use crate::types::IpMode;
    Value::Array(
        list.iter()
            .map(|g| {
                json!({
                    "ip": g.ip,
                    "hostname": g.hostname,
                    "ip-mode": g.ip_mode.map(|m| match m {
                        IpMode::Vip => "vip",
                        IpMode::Proxy => "proxy",
                    }),
                })
            })
            .collect(),
    )
}

/// An object's fields, checked against the names a record has.
struct Fields<'a> {
    map: &'a Map<String, Value>,
    path: String,
}

impl<'a> Fields<'a> {
    fn new(v: &'a Value, path: &str, known: &[&str]) -> Result<Self, String> {
        let map = v
            .as_object()
            .ok_or_else(|| format!("{path}: expected an object, got {v}"))?;
        if let Some(k) = map.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(format!(
                "{path}: unknown field `{k}` (fields: {})",
                known.join(", ")
            ));
        }
        Ok(Fields {
            map,
            path: path.to_string(),
        })
    }

    fn get(&self, k: &str) -> Option<&'a Value> {
        self.map.get(k)
    }

    fn string(&self, k: &str) -> Result<String, String> {
        Ok(self.opt_string(k)?.unwrap_or_default())
    }

    fn opt_string(&self, k: &str) -> Result<Option<String>, String> {
        match self.map.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(format!("{}.{k}: expected a string, got {other}", self.path)),
        }
    }

    fn int<T: TryFrom<i64> + TryFrom<u64>>(&self, k: &str) -> Result<T, String> {
        match self.map.get(k) {
            None | Some(Value::Null) => int(&Value::from(0), &format!("{}.{k}", self.path)),
            Some(v) => int(v, &format!("{}.{k}", self.path)),
        }
    }

    fn list(&self, k: &str) -> Result<&'a [Value], String> {
        match self.map.get(k) {
            None | Some(Value::Null) => Ok(&[]),
            Some(Value::Array(a)) => Ok(a),
            Some(other) => Err(format!("{}.{k}: expected an array, got {other}", self.path)),
        }
    }

    fn strings(&self, k: &str) -> Result<Vec<String>, String> {
        self.list(k)?
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("{}.{k}: expected strings, got {v}", self.path))
            })
            .collect()
    }

    fn pairs(&self, k: &str) -> Result<Vec<(String, String)>, String> {
        match self.map.get(k) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(key, v)| {
                    let s = v.as_str().ok_or_else(|| {
                        format!("{}.{k}.{key}: expected a string, got {v}", self.path)
                    })?;
                    Ok((key.clone(), s.to_string()))
                })
                .collect(),
            Some(other) => Err(format!(
                "{}.{k}: expected an object of strings, got {other}",
                self.path
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_read_with_wit_names_and_zero_defaults() {
        let s = service_from_json(&json!({
            "namespace": "default", "name": "web", "uid": "u1",
            "annotations": {"static.wasm-ccm.io/load-balancer-ip": "192.0.2.10"},
            "ports": [{"port": 80, "node-port": 30080, "protocol": "udp"}],
            "ingress": [{"ip": "192.0.2.10", "ip-mode": "vip"}],
            "external-traffic-policy": "local"
        }))
        .expect("valid");
        assert_eq!(
            s.annotations,
            vec![(
                "static.wasm-ccm.io/load-balancer-ip".to_string(),
                "192.0.2.10".to_string()
            )]
        );
        assert_eq!(s.ports[0].port, 80);
        assert_eq!(s.ports[0].protocol, crate::types::Protocol::Udp);
        assert_eq!(s.ingress[0].ip.as_deref(), Some("192.0.2.10"));
        assert_eq!(
            s.external_traffic_policy,
            crate::types::TrafficPolicy::Local
        );
        assert_eq!(s.session_affinity, crate::types::SessionAffinity::None);
    }

    #[test]
    fn service_mistakes_name_the_field() {
        let e = service_from_json(&json!({"name": "web", "prots": []})).unwrap_err();
        assert!(e.contains("unknown field `prots`"), "{e}");
        let e = service_from_json(&json!({"ports": [{"port": 70000}]})).unwrap_err();
        assert!(e.contains("service.ports[0].port"), "{e}");
        let e = service_from_json(&json!({"session-affinity": "sticky"})).unwrap_err();
        assert!(e.contains("session-affinity"), "{e}");
    }
}
