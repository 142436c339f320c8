//! Legacy discovery documents (`/api`, `/apis`, resource lists) and `/version`.
//!
//! Aggregated discovery (`apidiscovery.k8s.io/v2`) is not offered: the plain documents come back
//! as `application/json`, which kubectl and kube-rs take as "use legacy discovery".

use std::net::SocketAddr;

use serde_json::{Value, json};

use super::resources::{RESOURCES, groups, verbs};

/// `/version`.
pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-wasm-ccm-sim",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-04-23T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `/api`.
pub(crate) fn core_versions(addr: SocketAddr) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr.to_string()}]
    })
}

fn group_doc(group: &str, version: &str) -> Value {
    let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
    json!({"name": group, "versions": [gv.clone()], "preferredVersion": gv})
}

/// `/apis`.
pub(crate) fn group_list() -> Value {
    let groups: Vec<Value> = groups().iter().map(|(g, v)| group_doc(g, v)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`.
pub(crate) fn group(group: &str, version: &str) -> Value {
    let mut doc = group_doc(group, version);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    doc
}

/// `/api/v1` and `/apis/{group}/{version}`: every resource and status subresource.
pub(crate) fn resource_list(group: &str, version: &str) -> Value {
    let mut resources = Vec::new();
    for rt in RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let mut entry = json!({
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": verbs(),
        });
        if !rt.short_names.is_empty() {
            entry["shortNames"] = json!(rt.short_names);
        }
        // The `all` category (`kubectl get all`): pods and services among the served kinds, as
        // their registries' `Categories()` declare.
        if matches!(rt.plural, "pods" | "services") && rt.group.is_empty() {
            entry["categories"] = json!(["all"]);
        }
        resources.push(entry);
        if rt.status {
            resources.push(json!({
                "name": format!("{}/status", rt.plural),
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    })
}

/// `/`: the served path prefixes.
pub(crate) fn root() -> Value {
    let mut paths = vec![
        "/api".to_string(),
        "/api/v1".to_string(),
        "/apis".to_string(),
    ];
    for (g, v) in groups() {
        paths.push(format!("/apis/{g}"));
        paths.push(format!("/apis/{g}/{v}"));
    }
    paths.extend(["/healthz", "/livez", "/readyz", "/version"].map(String::from));
    json!({ "paths": paths })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_list_has_status_subresources() {
        let doc = resource_list("", "v1");
        let names: Vec<&str> = doc["resources"]
            .as_array()
            .map(|a| a.iter().filter_map(|r| r["name"].as_str()).collect())
            .unwrap_or_default();
        for n in [
            "nodes",
            "nodes/status",
            "services",
            "services/status",
            "namespaces",
            "events",
        ] {
            assert!(names.contains(&n), "{n} missing from {names:?}");
        }
        assert_eq!(group_list()["groups"].as_array().map(Vec::len), Some(2));
        assert_eq!(
            group("coordination.k8s.io", "v1")["preferredVersion"]["groupVersion"],
            "coordination.k8s.io/v1"
        );
    }
}
