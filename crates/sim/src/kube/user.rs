//! Who a request is (`user.Info`): a leaf, so the token issuer and the RBAC authorizer can both
//! name it without naming each other.

use serde::Serialize;

/// An authenticated user (`user.Info`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UserInfo {
    /// `system:serviceaccount:kube-system:cloud-controller-manager`, ...
    pub name: String,
    /// Groups, including `system:authenticated` (added on authentication).
    pub groups: Vec<String>,
}

impl UserInfo {
    /// A user with groups.
    pub fn new(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.to_string(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }
}
