//! Legacy discovery documents (`/api`, `/apis`, resource lists) and `/version`.
//!
//! Aggregated discovery (`apidiscovery.k8s.io/v2`) is not offered: the plain documents come back
//! as `application/json`, which kubectl and kube-rs take as "use legacy discovery".

use std::net::SocketAddr;

use serde_json::{Value, json};

use super::rbac_api;
use super::resources::{self, RESOURCES, verbs};

/// The `gitVersion` a simulator reports unless told otherwise ([`super::KubeSimOptions`]): the
/// newest Kubernetes minor wasm-ccm supports (`wasm_ccm_controllers::kubernetes_version`, which
/// this crate cannot depend on; `bins/wasm-ccm-dev/tests/version_policy.rs` holds the two
/// equal), marked as the simulator's build the way distributions mark theirs (`-eks-…`).
pub const DEFAULT_SERVER_VERSION: &str = "v1.37.0-wasm-ccm-sim";

/// The `major` and `minor` fields of `/version` for a `gitVersion` such as `v1.36.2` or
/// `v1.37.0-wasm-ccm-sim` (`v`, three decimal numbers, then nothing or a `-`/`+` suffix), as
/// kube-apiserver fills them from the same build (k8s.io/component-base/version, `Get`). The
/// error says what is wrong with the text.
pub(crate) fn major_minor(git_version: &str) -> Result<(String, String), String> {
    let hint = "give a Kubernetes gitVersion like v1.36.2 or v1.37.0-wasm-ccm-sim";
    let body = git_version
        .strip_prefix('v')
        .ok_or_else(|| format!("server version {git_version:?} does not start with `v`; {hint}"))?;
    let core = body.split(['-', '+']).next().unwrap_or_default();
    let suffix = &body[core.len()..];
    let numbers: Vec<&str> = core.split('.').collect();
    let numeric = |n: &&str| !n.is_empty() && n.len() <= 9 && n.bytes().all(|b| b.is_ascii_digit());
    if numbers.len() != 3 || !numbers.iter().all(numeric) || suffix.len() == 1 {
        return Err(format!(
            "server version {git_version:?} is not v<major>.<minor>.<patch> with an optional -/+ suffix; {hint}"
        ));
    }
    Ok((numbers[0].to_string(), numbers[1].to_string()))
}

/// `/version` for a simulator reporting `git_version` (checked by [`major_minor`] at start).
pub(crate) fn version(git_version: &str) -> Value {
    let (major, minor) = major_minor(git_version).unwrap_or_default();
    json!({
        "major": major,
        "minor": minor,
        "gitVersion": git_version,
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

/// The API groups besides core with their one version, in discovery order: the served ones,
/// then `rbac.authorization.k8s.io` (advertised, its objects refused: [`rbac_api`]).
pub(crate) fn groups() -> Vec<(&'static str, &'static str)> {
    let mut out = resources::groups();
    out.push((rbac_api::GROUP, rbac_api::VERSION));
    out
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
    if (group, version) == (rbac_api::GROUP, rbac_api::VERSION) {
        resources = rbac_api::discovery_resources();
    }
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
    fn version_fields_follow_the_git_version() {
        for (git, major, minor) in [
            (DEFAULT_SERVER_VERSION, "1", "37"),
            ("v1.35.4", "1", "35"),
            ("v1.36.0+build.7", "1", "36"),
        ] {
            let doc = version(git);
            assert_eq!(
                (&doc["major"], &doc["minor"], &doc["gitVersion"]),
                (&json!(major), &json!(minor), &json!(git)),
                "{git}"
            );
        }
        for bad in [
            "1.36.0",
            "v1.36",
            "v1.36.0.1",
            "v1.x.0",
            "v1.36.0-",
            "",
            "v1.36.0 ",
        ] {
            let e = major_minor(bad).expect_err(bad);
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }

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
        assert_eq!(group_list()["groups"].as_array().map(Vec::len), Some(3));
        let rbac = resource_list(rbac_api::GROUP, rbac_api::VERSION);
        assert_eq!(rbac["resources"].as_array().map(Vec::len), Some(4));
        assert_eq!(
            group("coordination.k8s.io", "v1")["preferredVersion"]["groupVersion"],
            "coordination.k8s.io/v1"
        );
    }
}
