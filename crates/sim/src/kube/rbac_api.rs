//! The `rbac.authorization.k8s.io/v1` API, advertised but not served.
//!
//! The simulator's RBAC objects are loaded with [`super::KubeSim::load_rbac`] and evaluated by
//! [`super::rbac`]; they are not stored as API objects, and writing them over REST would need
//! the apiserver's escalation checks (`ConfirmNoEscalation`, pkg/registry/rbac/). The group is
//! still in discovery, as on every apiserver, so a request for its objects is authorized like
//! any other (a user who may not make it gets the apiserver's 403, not a "the server doesn't
//! have a resource type" from kubectl); an allowed one is refused with a 405 that says why.

use serde_json::{Value, json};

use super::error::ApiError;

/// The group.
pub(crate) const GROUP: &str = "rbac.authorization.k8s.io";
/// Its one served version.
pub(crate) const VERSION: &str = "v1";

/// `(plural, singular, kind, namespaced)` of the group's resources.
const RESOURCES: &[(&str, &str, &str, bool)] = &[
    (
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        false,
    ),
    ("clusterroles", "clusterrole", "ClusterRole", false),
    ("rolebindings", "rolebinding", "RoleBinding", true),
    ("roles", "role", "Role", true),
];

/// The verbs the apiserver's RBAC storage advertises.
const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The discovery entries of `/apis/rbac.authorization.k8s.io/v1`.
pub(crate) fn discovery_resources() -> Vec<Value> {
    RESOURCES
        .iter()
        .map(|(plural, singular, kind, namespaced)| {
            json!({
                "name": plural,
                "singularName": singular,
                "namespaced": namespaced,
                "kind": kind,
                "verbs": VERBS,
            })
        })
        .collect()
}

/// The answer to an authorized request under `/apis/rbac.authorization.k8s.io/v1/`: a 405
/// naming what the simulator does instead.
pub(crate) fn refusal() -> ApiError {
    ApiError::new(
        405,
        "wasm-ccm-sim does not serve RBAC objects (rbac.authorization.k8s.io) over REST: load Roles, ClusterRoles and their bindings with KubeSim::load_rbac; requests are authorized against what was loaded (see crates/sim/README.md, Authentication and RBAC)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_names_the_four_kinds() {
        let kinds: Vec<String> = discovery_resources()
            .iter()
            .filter_map(|r| r["kind"].as_str().map(str::to_string))
            .collect();
        assert_eq!(
            kinds,
            ["ClusterRoleBinding", "ClusterRole", "RoleBinding", "Role"]
        );
        assert_eq!(refusal().code, 405);
    }
}
