//! Parsing a request path into what it addresses (discovery document, collection or object).

use std::collections::HashMap;

use axum::http::Method;
use serde::{Deserialize, Serialize};

use super::rbac_api;
use super::resources::{self, ResourceType};

/// The Kubernetes verb of a resource request (deletecollection is not served).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET with `watch=true`.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE of one object.
    Delete,
}

impl Verb {
    /// Whether the verb writes (create, update, patch, delete).
    pub fn is_mutating(self) -> bool {
        matches!(
            self,
            Verb::Create | Verb::Update | Verb::Patch | Verb::Delete
        )
    }
}

/// What a path addresses.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// `/`: the list of served paths.
    Root,
    /// `/healthz`, `/readyz`, `/livez` and their sub-checks.
    Health,
    /// `/version`.
    Version,
    /// `/openapi/v2`.
    OpenApiV2,
    /// `/openapi/v3`.
    OpenApiV3Index,
    /// `/openapi/v3/{api/v1 | apis/g/v}` (the part after `/openapi/v3/`).
    OpenApiV3(String),
    /// `/api`.
    CoreVersions,
    /// `/apis`.
    Groups,
    /// `/apis/{group}`.
    Group(&'static str),
    /// `/api/v1`, `/apis/{group}/{version}`.
    ResourceList(&'static str, &'static str),
    /// Objects of `rbac.authorization.k8s.io/v1`: advertised, authorized, then refused
    /// ([`super::rbac_api`]).
    RbacObjects,
    /// A collection (all namespaces when `namespace` is `None` for a namespaced resource).
    Collection {
        rt: &'static ResourceType,
        namespace: Option<String>,
    },
    /// One object or its `status` subresource.
    Object {
        rt: &'static ResourceType,
        namespace: Option<String>,
        name: String,
        status: bool,
    },
    /// `namespaces/{ns}/serviceaccounts/{name}/token`: a TokenRequest (`POST` only, the
    /// subresource's one verb; `tokens.rs`).
    Token {
        rt: &'static ResourceType,
        namespace: String,
        name: String,
    },
    /// Anything else.
    Unknown,
}

/// A parsed request: target, verb and query parameters.
#[derive(Debug, Clone)]
pub(crate) struct ApiRequest {
    pub target: Target,
    /// `None` for discovery, health and unknown paths, or a method the target does not allow.
    pub verb: Option<Verb>,
    pub query: HashMap<String, String>,
}

impl ApiRequest {
    /// The resource addressed, if any.
    pub(crate) fn resource(&self) -> Option<&'static ResourceType> {
        match &self.target {
            Target::Collection { rt, .. }
            | Target::Object { rt, .. }
            | Target::Token { rt, .. } => Some(rt),
            _ => None,
        }
    }

    /// The namespace addressed, if any.
    pub(crate) fn namespace(&self) -> Option<&str> {
        match &self.target {
            Target::Collection { namespace, .. } | Target::Object { namespace, .. } => {
                namespace.as_deref()
            }
            Target::Token { namespace, .. } => Some(namespace),
            _ => None,
        }
    }

    /// The object name addressed, if any.
    pub(crate) fn name(&self) -> Option<&str> {
        match &self.target {
            Target::Object { name, .. } | Target::Token { name, .. } => Some(name),
            _ => None,
        }
    }

    /// `Some("status")` for the status subresource, `Some("token")` for a TokenRequest.
    pub(crate) fn subresource(&self) -> Option<&'static str> {
        match &self.target {
            Target::Object { status: true, .. } => Some("status"),
            Target::Token { .. } => Some("token"),
            _ => None,
        }
    }

    /// Whether the query asks for a watch (`watch=true` or `watch=1`).
    pub(crate) fn wants_watch(query: &HashMap<String, String>) -> bool {
        query.get("watch").is_some_and(|v| v == "true" || v == "1")
    }
}

/// Decodes `%XX` escapes in one path segment (names never need them, but clients may send them).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses a request.
pub(crate) fn parse(method: &Method, path: &str, query: HashMap<String, String>) -> ApiRequest {
    let segments: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let segs: Vec<&str> = segments.iter().map(String::as_str).collect();
    let mut watch_prefix = false;
    let target = match segs.as_slice() {
        [] => Target::Root,
        ["healthz" | "readyz" | "livez", ..] => Target::Health,
        ["version"] => Target::Version,
        ["openapi", "v2"] => Target::OpenApiV2,
        ["openapi", "v3"] => Target::OpenApiV3Index,
        ["openapi", "v3", rest @ ..] => Target::OpenApiV3(rest.join("/")),
        ["api"] => Target::CoreVersions,
        ["api", "v1"] => Target::ResourceList("", "v1"),
        ["api", "v1", rest @ ..] => resource_target("", "v1", rest, &mut watch_prefix),
        ["apis"] => Target::Groups,
        ["apis", rbac_api::GROUP] => Target::Group(rbac_api::GROUP),
        ["apis", rbac_api::GROUP, rbac_api::VERSION] => {
            Target::ResourceList(rbac_api::GROUP, rbac_api::VERSION)
        }
        ["apis", rbac_api::GROUP, rbac_api::VERSION, _, ..] => Target::RbacObjects,
        ["apis", group] => resources::groups()
            .into_iter()
            .find(|(g, _)| g == group)
            .map_or(Target::Unknown, |(g, _)| Target::Group(g)),
        ["apis", group, version] => resources::groups()
            .into_iter()
            .find(|(g, v)| g == group && v == version)
            .map_or(Target::Unknown, |(g, v)| Target::ResourceList(g, v)),
        ["apis", group, version, rest @ ..] => {
            resource_target(group, version, rest, &mut watch_prefix)
        }
        _ => Target::Unknown,
    };
    let watch = watch_prefix || ApiRequest::wants_watch(&query);
    let verb = match (&target, method.as_str()) {
        (Target::Collection { .. }, "GET") if watch => Some(Verb::Watch),
        (Target::Collection { .. }, "GET") => Some(Verb::List),
        // POST to the all-namespaces path of a namespaced resource is not allowed.
        (Target::Collection { rt, namespace }, "POST") if !rt.namespaced || namespace.is_some() => {
            Some(Verb::Create)
        }
        (Target::Object { .. }, "GET") if watch => Some(Verb::Watch),
        (Target::Object { .. }, "GET") => Some(Verb::Get),
        (Target::Object { .. }, "PUT") => Some(Verb::Update),
        (Target::Object { .. }, "PATCH") => Some(Verb::Patch),
        (Target::Object { status: false, .. }, "DELETE") => Some(Verb::Delete),
        // The token subresource serves `create` only (its REST storage is a `NamedCreater`).
        (Target::Token { .. }, "POST") => Some(Verb::Create),
        _ => None,
    };
    ApiRequest {
        target,
        verb,
        query,
    }
}

fn resource_target(group: &str, version: &str, rest: &[&str], watch: &mut bool) -> Target {
    let rest = match rest {
        ["watch", tail @ ..] => {
            *watch = true;
            tail
        }
        _ => rest,
    };
    let lookup = |plural: &str| resources::by_path(group, version, plural);
    let object = |rt: &'static ResourceType, ns: Option<&str>, name: &str, sub: Option<&str>| {
        let status = match sub {
            None => false,
            Some("status") if rt.status => true,
            Some(_) => return Target::Unknown,
        };
        Target::Object {
            rt,
            namespace: ns.map(str::to_string),
            name: name.to_string(),
            status,
        }
    };
    match rest {
        // `namespaces/{ns}` and `namespaces/{ns}/status` address the Namespace object itself.
        ["namespaces", name] if group.is_empty() => {
            lookup("namespaces").map_or(Target::Unknown, |rt| object(rt, None, name, None))
        }
        ["namespaces", name, "status"] if group.is_empty() => lookup("namespaces")
            .map_or(Target::Unknown, |rt| object(rt, None, name, Some("status"))),
        ["namespaces", ns, plural, tail @ ..] => match lookup(plural) {
            Some(rt) if rt.namespaced => match tail {
                [] => Target::Collection {
                    rt,
                    namespace: Some(ns.to_string()),
                },
                [name] => object(rt, Some(ns), name, None),
                [name, "token"] if rt.plural == "serviceaccounts" => Target::Token {
                    rt,
                    namespace: ns.to_string(),
                    name: name.to_string(),
                },
                [name, sub] => object(rt, Some(ns), name, Some(sub)),
                _ => Target::Unknown,
            },
            _ => Target::Unknown,
        },
        [plural, tail @ ..] => match lookup(plural) {
            Some(rt) => match tail {
                [] => Target::Collection {
                    rt,
                    namespace: None,
                },
                [name] if !rt.namespaced => object(rt, None, name, None),
                [name, sub] if !rt.namespaced => object(rt, None, name, Some(sub)),
                _ => Target::Unknown,
            },
            None => Target::Unknown,
        },
        [] => Target::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(method: Method, path: &str, query: &[(&str, &str)]) -> ApiRequest {
        let q = query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        parse(&method, path, q)
    }

    #[test]
    fn core_paths() {
        let r = p(Method::GET, "/api/v1/nodes", &[]);
        assert_eq!(r.verb, Some(Verb::List));
        assert_eq!(r.resource().map(|r| r.plural), Some("nodes"));
        let r = p(Method::GET, "/api/v1/nodes", &[("watch", "1")]);
        assert_eq!(r.verb, Some(Verb::Watch));
        let r = p(Method::PATCH, "/api/v1/nodes/n1/status", &[]);
        assert_eq!(r.verb, Some(Verb::Patch));
        assert_eq!(r.subresource(), Some("status"));
        assert_eq!(r.name(), Some("n1"));
        let r = p(
            Method::PUT,
            "/api/v1/namespaces/default/services/web/status",
            &[],
        );
        assert_eq!(r.verb, Some(Verb::Update));
        assert_eq!(r.namespace(), Some("default"));
        let r = p(Method::GET, "/api/v1/namespaces/kube-system", &[]);
        assert_eq!(r.resource().map(|r| r.plural), Some("namespaces"));
        assert_eq!(r.name(), Some("kube-system"));
        let r = p(
            Method::GET,
            "/api/v1/watch/namespaces/default/services",
            &[],
        );
        assert_eq!(r.verb, Some(Verb::Watch));
    }

    #[test]
    fn group_paths_and_unknowns() {
        let r = p(
            Method::POST,
            "/apis/events.k8s.io/v1/namespaces/default/events",
            &[],
        );
        assert_eq!(r.verb, Some(Verb::Create));
        assert_eq!(r.resource().map(|r| r.group), Some("events.k8s.io"));
        let r = p(Method::POST, "/apis/events.k8s.io/v1/events", &[]);
        assert_eq!(r.verb, None);
        assert!(matches!(
            p(Method::GET, "/api/v1/services/x", &[]).target,
            Target::Unknown
        ));
        assert!(matches!(
            p(Method::GET, "/api/v1/namespaces/d/nodes", &[]).target,
            Target::Unknown
        ));
        assert!(matches!(
            p(Method::GET, "/api/v1/widgets", &[]).target,
            Target::Unknown
        ));
        assert!(matches!(
            p(Method::GET, "/api/v1/nodes/n/proxy", &[]).target,
            Target::Unknown
        ));
        assert!(matches!(
            p(Method::GET, "/apis/coordination.k8s.io", &[]).target,
            Target::Group(_)
        ));
        assert!(matches!(
            p(Method::GET, "/apis/example.com/v1", &[]).target,
            Target::Unknown
        ));
        assert!(
            matches!(p(Method::GET, "/api/v1/namespaces/a%2Db/services", &[]).target, Target::Collection { namespace: Some(ref n), .. } if n == "a-b")
        );
    }
}
