//! The resource types the simulator serves: one static table drives routing, discovery and storage.

/// One served resource (a REST collection), e.g. core `v1` `nodes`.
#[derive(Debug)]
pub(crate) struct ResourceType {
    /// Position in [`RESOURCES`]; the store keeps one map per index.
    pub index: usize,
    /// API group, empty for the core group.
    pub group: &'static str,
    pub version: &'static str,
    /// Plural resource name as it appears in paths.
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// Whether a `/status` subresource exists (and the main resource then ignores `status`).
    pub status: bool,
    /// Whether the apiserver clears `status` on create (Services do, Nodes keep what kubelet sent).
    pub clear_status_on_create: bool,
    /// Whether `metadata.generation` is maintained (bumped on spec changes).
    pub generation: bool,
    pub short_names: &'static [&'static str],
}

impl ResourceType {
    /// `v1` or `group/version`.
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The name the apiserver uses in messages: `nodes` or `leases.coordination.k8s.io`.
    pub(crate) fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

const VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

/// The verbs advertised in discovery for every main resource.
pub(crate) fn verbs() -> &'static [&'static str] {
    VERBS
}

/// Every served resource. Core `events` and `events.k8s.io` events are two views of one
/// storage: the store commits every event write to both, converted, with one resourceVersion.
pub(crate) static RESOURCES: &[ResourceType] = &[
    ResourceType {
        index: 0,
        group: "",
        version: "v1",
        plural: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        status: true,
        clear_status_on_create: false,
        generation: false,
        short_names: &["ns"],
    },
    ResourceType {
        index: 1,
        group: "",
        version: "v1",
        plural: "nodes",
        singular: "node",
        kind: "Node",
        namespaced: false,
        status: true,
        clear_status_on_create: false,
        generation: false,
        short_names: &["no"],
    },
    ResourceType {
        index: 2,
        group: "",
        version: "v1",
        plural: "services",
        singular: "service",
        kind: "Service",
        namespaced: true,
        status: true,
        clear_status_on_create: true,
        // The service registry never sets metadata.generation (unlike Deployments or CRDs).
        generation: false,
        short_names: &["svc"],
    },
    ResourceType {
        index: 3,
        group: "",
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        status: false,
        clear_status_on_create: false,
        generation: false,
        short_names: &["ev"],
    },
    ResourceType {
        index: 4,
        group: "",
        version: "v1",
        plural: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        namespaced: true,
        status: false,
        clear_status_on_create: false,
        generation: false,
        short_names: &["cm"],
    },
    ResourceType {
        index: 5,
        group: "",
        version: "v1",
        plural: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        status: true,
        clear_status_on_create: false,
        generation: false,
        short_names: &["po"],
    },
    ResourceType {
        index: 6,
        group: "events.k8s.io",
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        status: false,
        clear_status_on_create: false,
        generation: false,
        short_names: &["ev"],
    },
    ResourceType {
        index: 7,
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        singular: "lease",
        kind: "Lease",
        namespaced: true,
        status: false,
        clear_status_on_create: false,
        generation: false,
        short_names: &[],
    },
    // ServiceAccounts, for their `token` subresource (TokenRequest, `tokens.rs`): a controller
    // manager with `--use-service-account-credentials` gets or creates one per controller.
    ResourceType {
        index: 8,
        group: "",
        version: "v1",
        plural: "serviceaccounts",
        singular: "serviceaccount",
        kind: "ServiceAccount",
        namespaced: true,
        status: false,
        clear_status_on_create: false,
        generation: false,
        short_names: &["sa"],
    },
];

/// Index of the `namespaces` resource (namespaced creates check it).
pub(crate) const NAMESPACES: usize = 0;
/// Index of the `nodes` resource (validated on write).
pub(crate) const NODES: usize = 1;
/// Index of the `services` resource (node-port and cluster-IP allocation scan it).
pub(crate) const SERVICES: usize = 2;
/// Index of core `events` (the storage form of both Event APIs).
pub(crate) const EVENTS: usize = 3;
/// Index of `configmaps`.
pub(crate) const CONFIGMAPS: usize = 4;
/// Index of `pods`.
pub(crate) const PODS: usize = 5;
/// Index of `events.k8s.io` events (a converted view of [`EVENTS`], kept in step).
pub(crate) const EVENTS_V1: usize = 6;
/// Index of `leases`.
pub(crate) const LEASES: usize = 7;
/// Index of `serviceaccounts` (their `token` subresource is `tokens.rs`).
pub(crate) const SERVICEACCOUNTS: usize = 8;

/// The resource served at `/api/v1/{plural}` (empty group) or `/apis/{group}/{version}/{plural}`.
pub(crate) fn by_path(group: &str, version: &str, plural: &str) -> Option<&'static ResourceType> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resource an object belongs to, from its `apiVersion` and `kind`.
pub(crate) fn by_kind(api_version: &str, kind: &str) -> Option<&'static ResourceType> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.kind == kind)
}

/// Resolves a name the way kubectl does: plural, singular, short name or kind, optionally
/// qualified with `.group` (`events.events.k8s.io`). Unqualified names prefer the core group.
pub(crate) fn by_name(name: &str) -> Option<&'static ResourceType> {
    let matches = |r: &ResourceType, n: &str| {
        r.plural == n
            || r.singular == n
            || r.kind.eq_ignore_ascii_case(n)
            || r.short_names.contains(&n)
    };
    // Table order puts the core group first, so the first unqualified match is the core one.
    if let Some(r) = RESOURCES.iter().find(|r| matches(r, name)) {
        return Some(r);
    }
    let (n, group) = name.split_once('.')?;
    RESOURCES.iter().find(|r| r.group == group && matches(r, n))
}

/// The API groups besides core, each with its one version, in discovery order.
pub(crate) fn groups() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in RESOURCES.iter().filter(|r| !r.group.is_empty()) {
        if !out.iter().any(|(g, _)| *g == r.group) {
            out.push((r.group, r.version));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_match_positions() {
        for (i, r) in RESOURCES.iter().enumerate() {
            assert_eq!(r.index, i, "{}", r.plural);
        }
        assert_eq!(RESOURCES[NAMESPACES].plural, "namespaces");
        assert_eq!(RESOURCES[SERVICES].plural, "services");
        assert_eq!(RESOURCES[NODES].plural, "nodes");
    }

    #[test]
    fn names_resolve_like_kubectl() {
        assert_eq!(by_name("svc").map(|r| r.plural), Some("services"));
        assert_eq!(by_name("events").map(|r| r.group), Some(""));
        assert_eq!(
            by_name("events.events.k8s.io").map(|r| r.group),
            Some("events.k8s.io")
        );
        assert_eq!(by_name("leases").map(|r| r.kind), Some("Lease"));
        assert!(by_name("widgets").is_none());
        assert_eq!(
            by_kind("coordination.k8s.io/v1", "Lease").map(|r| r.plural),
            Some("leases")
        );
    }
}
