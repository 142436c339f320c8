//! Server-side printing (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`) for the columns
//! `kubectl get` shows for the served kinds, so a person sees node status and Service external
//! IPs rather than just names.

use std::sync::Arc;

use serde_json::{Value, json};

use super::meta::meta_str;
use super::resources::ResourceType;

/// Whether the `Accept` header asks for a Table.
pub(crate) fn wanted(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| {
        a.split(',')
            .next()
            .is_some_and(|first| first.contains("as=Table") && first.contains("g=meta.k8s.io"))
    })
}

/// A `meta.k8s.io/v1` Table of `items`; row objects are full objects when `include_object` is
/// `Object`, partial metadata otherwise (the apiserver's default).
pub(crate) fn table(
    rt: &ResourceType,
    items: &[Arc<Value>],
    resource_version: u64,
    continue_token: Option<&str>,
    include_object: Option<&str>,
) -> Value {
    let now = jiff::Timestamp::now();
    let columns: Vec<Value> = columns(rt)
        .iter()
        .map(|(name, priority)| {
            json!({
                "name": name,
                "type": "string",
                "format": if *name == "Name" { "name" } else { "" },
                "description": "",
                "priority": priority,
            })
        })
        .collect();
    let rows: Vec<Value> = items
        .iter()
        .map(|obj| {
            let object = match include_object {
                Some("None") => Value::Null,
                Some("Object") => (**obj).clone(),
                _ => json!({
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
                }),
            };
            json!({"cells": cells(rt, obj, now), "object": object})
        })
        .collect();
    let mut metadata = json!({"resourceVersion": resource_version.to_string()});
    if let Some(token) = continue_token {
        metadata["continue"] = json!(token);
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

fn columns(rt: &ResourceType) -> &'static [(&'static str, u8)] {
    match (rt.group, rt.kind) {
        ("", "Node") => &[
            ("Name", 0),
            ("Status", 0),
            ("Roles", 0),
            ("Age", 0),
            ("Version", 0),
            ("Internal-IP", 1),
            ("External-IP", 1),
        ],
        ("", "Service") => &[
            ("Name", 0),
            ("Type", 0),
            ("Cluster-IP", 0),
            ("External-IP", 0),
            ("Port(s)", 0),
            ("Age", 0),
            ("Selector", 1),
        ],
        ("", "Namespace") => &[("Name", 0), ("Status", 0), ("Age", 0)],
        ("", "Event") => &[
            ("Last Seen", 0),
            ("Type", 0),
            ("Reason", 0),
            ("Object", 0),
            ("Message", 0),
        ],
        ("events.k8s.io", "Event") => &[
            ("Name", 0),
            ("Type", 0),
            ("Reason", 0),
            ("Object", 0),
            ("Note", 0),
            ("Age", 0),
        ],
        ("coordination.k8s.io", "Lease") => &[("Name", 0), ("Holder", 0), ("Age", 0)],
        _ => &[("Name", 0), ("Age", 0)],
    }
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        match cur.get(p) {
            Some(next) => cur = next,
            None => return "",
        }
    }
    cur.as_str().unwrap_or("")
}

fn or_none(s: String) -> String {
    if s.is_empty() { "<none>".into() } else { s }
}

fn cells(rt: &ResourceType, obj: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let name = meta_str(obj, "name").unwrap_or("").to_string();
    let age = age(meta_str(obj, "creationTimestamp"), now);
    let cells: Vec<String> = match (rt.group, rt.kind) {
        ("", "Node") => {
            let address = |ty: &str| {
                obj.pointer("/status/addresses")
                    .and_then(Value::as_array)
                    .and_then(|a| a.iter().find(|x| str_at(x, &["type"]) == ty))
                    .map(|x| str_at(x, &["address"]).to_string())
                    .unwrap_or_default()
            };
            vec![
                name,
                node_status(obj),
                node_roles(obj),
                age,
                or_none(str_at(obj, &["status", "nodeInfo", "kubeletVersion"]).to_string()),
                or_none(address("InternalIP")),
                or_none(address("ExternalIP")),
            ]
        }
        ("", "Service") => vec![
            name,
            str_at(obj, &["spec", "type"]).to_string(),
            or_none(str_at(obj, &["spec", "clusterIP"]).to_string()),
            service_external(obj),
            service_ports(obj),
            age,
            or_none(
                obj.pointer("/spec/selector")
                    .and_then(Value::as_object)
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                    .unwrap_or_default(),
            ),
        ],
        ("", "Namespace") => vec![name, str_at(obj, &["status", "phase"]).to_string(), age],
        ("", "Event") => {
            let last = [
                str_at(obj, &["lastTimestamp"]),
                str_at(obj, &["eventTime"]),
                meta_str(obj, "creationTimestamp").unwrap_or(""),
            ]
            .into_iter()
            .find(|s| !s.is_empty());
            vec![
                self::age(last, now),
                str_at(obj, &["type"]).to_string(),
                str_at(obj, &["reason"]).to_string(),
                object_ref(obj.get("involvedObject")),
                str_at(obj, &["message"]).to_string(),
            ]
        }
        ("events.k8s.io", "Event") => vec![
            name,
            str_at(obj, &["type"]).to_string(),
            str_at(obj, &["reason"]).to_string(),
            object_ref(obj.get("regarding")),
            str_at(obj, &["note"]).to_string(),
            age,
        ],
        ("coordination.k8s.io", "Lease") => vec![
            name,
            or_none(str_at(obj, &["spec", "holderIdentity"]).to_string()),
            age,
        ],
        _ => vec![name, age],
    };
    cells.into_iter().map(Value::String).collect()
}

fn object_ref(r: Option<&Value>) -> String {
    r.map(|r| {
        format!(
            "{}/{}",
            str_at(r, &["kind"]).to_ascii_lowercase(),
            str_at(r, &["name"])
        )
    })
    .unwrap_or_default()
}

fn node_status(obj: &Value) -> String {
    let ready = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|x| str_at(x, &["type"]) == "Ready"))
        .map(|c| str_at(c, &["status"]));
    let mut status = match ready {
        Some("True") => "Ready",
        Some("False") => "NotReady",
        _ => "Unknown",
    }
    .to_string();
    if obj.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
        status.push_str(",SchedulingDisabled");
    }
    status
}

fn node_roles(obj: &Value) -> String {
    let mut roles: Vec<String> = obj
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| match k.strip_prefix("node-role.kubernetes.io/") {
                    Some(role) if !role.is_empty() => Some(role.to_string()),
                    _ if k == "kubernetes.io/role" => v.as_str().map(str::to_string),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    or_none(roles.join(","))
}

fn service_external(obj: &Value) -> String {
    let mut out: Vec<String> = Vec::new();
    if str_at(obj, &["spec", "type"]) == "ExternalName" {
        return str_at(obj, &["spec", "externalName"]).to_string();
    }
    if let Some(ingress) = obj
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
    {
        for i in ingress {
            let ip = str_at(i, &["ip"]);
            out.push(
                if ip.is_empty() {
                    str_at(i, &["hostname"])
                } else {
                    ip
                }
                .to_string(),
            );
        }
    }
    if let Some(ips) = obj.pointer("/spec/externalIPs").and_then(Value::as_array) {
        out.extend(ips.iter().filter_map(Value::as_str).map(str::to_string));
    }
    out.retain(|s| !s.is_empty());
    if out.is_empty() {
        return if str_at(obj, &["spec", "type"]) == "LoadBalancer" {
            "<pending>".into()
        } else {
            "<none>".into()
        };
    }
    out.join(",")
}

fn service_ports(obj: &Value) -> String {
    let ports = obj
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ports| {
            ports
                .iter()
                .map(|p| {
                    let port = p.get("port").and_then(Value::as_u64).unwrap_or(0);
                    let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
                    match p.get("nodePort").and_then(Value::as_u64) {
                        Some(np) => format!("{port}:{np}/{proto}"),
                        None => format!("{port}/{proto}"),
                    }
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    or_none(ports)
}

/// kubectl's human duration ("5s", "3m12s", "4h", "12d").
fn age(created: Option<&str>, now: jiff::Timestamp) -> String {
    let Some(t) = created.and_then(|c| c.parse::<jiff::Timestamp>().ok()) else {
        return "<unknown>".into();
    };
    let secs = now.as_second() - t.as_second();
    if secs < -1 {
        return "<invalid>".into();
    }
    let s = secs.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    match () {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 && s % 60 != 0 => format!("{m}m{}s", s % 60),
        _ if m < 180 => format!("{m}m"),
        _ if h < 8 && m % 60 != 0 => format!("{h}h{}m", m % 60),
        _ if h < 48 => format!("{h}h"),
        _ if h < 24 * 8 && h % 24 != 0 => format!("{d}d{}h", h % 24),
        _ if d < 365 * 2 => format!("{d}d"),
        _ if d < 365 * 8 && d % 365 != 0 => format!("{}y{}d", d / 365, d % 365),
        _ => format!("{}y", d / 365),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::resources::RESOURCES;

    #[test]
    fn accept_header() {
        assert!(wanted(Some(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        )));
        assert!(!wanted(Some("application/json")));
        assert!(!wanted(None));
    }

    #[test]
    fn ages() {
        let now = jiff::Timestamp::from_second(1_000_000).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        let at = |ago: i64| {
            jiff::Timestamp::from_second(1_000_000 - ago)
                .map(|t| t.to_string())
                .unwrap_or_default()
        };
        assert_eq!(age(Some(&at(5)), now), "5s");
        assert_eq!(age(Some(&at(192)), now), "3m12s");
        assert_eq!(age(Some(&at(3600 * 5)), now), "5h");
        assert_eq!(age(Some(&at(86400 * 3 + 3600)), now), "3d1h");
        assert_eq!(age(None, now), "<unknown>");
    }

    #[test]
    fn service_and_node_cells() {
        let svc = Arc::new(json!({
            "metadata": {"name": "web"},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.9", "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}]},
            "status": {"loadBalancer": {}}
        }));
        let t = table(&RESOURCES[2], &[svc], 7, None, None);
        assert_eq!(t["rows"][0]["cells"][3], "<pending>");
        assert_eq!(t["rows"][0]["cells"][4], "80:30080/TCP");
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        let node = Arc::new(json!({
            "metadata": {"name": "n", "labels": {"node-role.kubernetes.io/control-plane": ""}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        }));
        let t = table(&RESOURCES[1], &[node], 7, None, Some("Object"));
        assert_eq!(t["rows"][0]["cells"][1], "Ready,SchedulingDisabled");
        assert_eq!(t["rows"][0]["cells"][2], "control-plane");
        assert_eq!(t["rows"][0]["object"]["spec"]["unschedulable"], true);
    }
}
