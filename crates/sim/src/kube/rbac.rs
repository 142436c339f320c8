//! Optional authentication (bearer tokens) and RBAC authorization, off by default.
//!
//! The evaluation follows the apiserver's RBAC authorizer, written anew from
//! kubernetes/kubernetes `plugin/pkg/auth/authorizer/rbac/rbac.go` (`RBACAuthorizer.Authorize`,
//! `appliesTo`/`appliesToUser`, `RuleAllows`), `pkg/registry/rbac/validation/rule.go`
//! (`DefaultRuleResolver.VisitRulesFor`) and `pkg/apis/rbac/v1/evaluation_helpers.go`
//! (`VerbMatches`, `APIGroupMatches`, `ResourceMatches`, `ResourceNameMatches`,
//! `NonResourceURLMatches`). Request attributes come from [`request_info`], after
//! `k8s.io/apiserver/pkg/endpoints/request.RequestInfoFactory.NewRequestInfo`. The 403 is
//! worded like `responsewriters.Forbidden`/`forbiddenMessage` and `apierrors.NewForbidden`.
//!
//! RBAC objects (Role, ClusterRole, RoleBinding, ClusterRoleBinding) are kept by this module,
//! loaded through [`super::KubeSim::load_rbac`]; they are not served over REST.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;
use serde_json::{Value, json};

use super::error::ApiError;
use super::store::Store;
use super::tokens::Tokens;
pub use super::user::UserInfo;

/// The attributes of a request (`authorizer.AttributesRecord`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Attributes {
    /// get, list, watch, create, update, patch, delete, deletecollection, proxy; for
    /// non-resource requests the lower-case method.
    pub verb: String,
    /// Whether the path is under `/api` or `/apis/{group}` (a resource request).
    pub resource_request: bool,
    /// API group (`""` for core).
    pub api_group: String,
    /// API version.
    pub api_version: String,
    /// Plural resource.
    pub resource: String,
    /// Subresource (`status`), or empty.
    pub subresource: String,
    /// Namespace, empty at the cluster scope.
    pub namespace: String,
    /// Object name, empty for collections.
    pub name: String,
    /// The URL path (for non-resource requests).
    pub path: String,
}

impl Attributes {
    /// A resource request's attributes.
    pub fn resource(
        verb: &str,
        api_group: &str,
        resource: &str,
        subresource: &str,
        namespace: &str,
        name: &str,
    ) -> Attributes {
        Attributes {
            verb: verb.into(),
            resource_request: true,
            api_group: api_group.into(),
            api_version: "v1".into(),
            resource: resource.into(),
            subresource: subresource.into(),
            namespace: namespace.into(),
            name: name.into(),
            path: String::new(),
        }
    }

    /// A non-resource request's attributes.
    pub fn non_resource(verb: &str, path: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            path: path.into(),
            ..Attributes::default()
        }
    }

    /// `resource` or `resource/subresource`.
    pub fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// Which rule of which role allowed a request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct RuleRef {
    /// `ClusterRole` or `Role`.
    pub role_kind: String,
    /// Namespace of a Role, empty for a ClusterRole.
    pub role_namespace: String,
    /// Role name.
    pub role_name: String,
    /// Index of the rule in `rules`.
    pub rule_index: usize,
}

/// The binding through which a rule applied, and the subject of it that matched the user.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct BindingRef {
    /// `ClusterRoleBinding` or `RoleBinding`.
    pub kind: String,
    /// Namespace of a RoleBinding, empty for a ClusterRoleBinding.
    pub namespace: String,
    /// Binding name.
    pub name: String,
    /// `roleRef.kind` (a RoleBinding may name a ClusterRole).
    pub role_kind: String,
    /// `roleRef.name`.
    pub role_name: String,
    /// `kind` of the first subject that applies to the user (`appliesTo`).
    pub subject_kind: String,
    /// `name` of that subject.
    pub subject_name: String,
    /// `namespace` of that subject as written (ServiceAccounts default to the binding's).
    pub subject_namespace: String,
}

impl BindingRef {
    /// `clusterRoleBindingDescriber.String` / `roleBindingDescriber.String` with
    /// `describeSubject` (kubernetes/kubernetes pkg/registry/rbac/validation/rule.go):
    /// `ClusterRoleBinding "crb" of ClusterRole "r" to User "u"`,
    /// `RoleBinding "rb/ns" of Role "r" to ServiceAccount "sa/ns"` (a ServiceAccount is
    /// `name/namespace`, the namespace defaulting to the binding's).
    pub fn describe(&self) -> String {
        let subject = if self.subject_kind == "ServiceAccount" {
            let ns = if self.subject_namespace.is_empty() {
                &self.namespace
            } else {
                &self.subject_namespace
            };
            format!(
                "{} {:?}",
                self.subject_kind,
                format!("{}/{ns}", self.subject_name)
            )
        } else {
            format!("{} {:?}", self.subject_kind, self.subject_name)
        };
        let binding = if self.kind == "RoleBinding" {
            format!("{}/{}", self.name, self.namespace)
        } else {
            self.name.clone()
        };
        format!(
            "{} {binding:?} of {} {:?} to {subject}",
            self.kind, self.role_kind, self.role_name
        )
    }
}

/// One authorization decision the simulator made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// The user.
    pub user: String,
    /// The request.
    pub attributes: Attributes,
    /// Allowed (by a rule, or by `system:masters`).
    pub allowed: bool,
    /// The rule that allowed it (`None` when denied or for `system:masters`).
    pub rule: Option<RuleRef>,
    /// The binding (and its matching subject) that granted [`Decision::rule`].
    pub binding: Option<BindingRef>,
    /// The RBAC authorizer's reason (plugin/pkg/auth/authorizer/rbac/rbac.go `Authorize`):
    /// `RBAC: allowed by <binding>` when a rule allowed it, `RBAC: <errors>` for a denial with
    /// missing roles, else empty.
    pub reason: String,
}

/// A set of RBAC objects and the evaluation over them.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    cluster_roles: HashMap<String, Value>,
    roles: HashMap<(String, String), Value>,
    cluster_role_bindings: Vec<Value>,
    role_bindings: Vec<Value>,
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        cur = match cur.get(p) {
            Some(c) => c,
            None => return "",
        };
    }
    cur.as_str().unwrap_or("")
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// `VerbMatches` (evaluation_helpers.go).
fn verb_matches(rule: &Value, verb: &str) -> bool {
    strings(rule, "verbs").iter().any(|v| v == "*" || v == verb)
}

/// `APIGroupMatches`.
fn api_group_matches(rule: &Value, group: &str) -> bool {
    strings(rule, "apiGroups")
        .iter()
        .any(|g| g == "*" || g == group)
}

/// `ResourceMatches`: `*`, the combined `resource/subresource`, or `*/subresource`.
fn resource_matches(rule: &Value, combined: &str, subresource: &str) -> bool {
    strings(rule, "resources").iter().any(|r| {
        r == "*"
            || r == combined
            || (!subresource.is_empty()
                && r.len() == subresource.len() + 2
                && r.starts_with("*/")
                && r.ends_with(subresource))
    })
}

/// `ResourceNameMatches`: no names allow every name.
fn resource_name_matches(rule: &Value, name: &str) -> bool {
    let names = strings(rule, "resourceNames");
    names.is_empty() || names.iter().any(|n| n == name)
}

/// `NonResourceURLMatches`: `*`, the path, or a prefix ending in `*`.
fn non_resource_url_matches(rule: &Value, path: &str) -> bool {
    strings(rule, "nonResourceURLs").iter().any(|u| {
        u == "*"
            || u == path
            || u.strip_suffix('*')
                .is_some_and(|prefix| path.starts_with(prefix))
    })
}

/// `RuleAllows` (rbac.go).
pub fn rule_allows(attrs: &Attributes, rule: &Value) -> bool {
    if attrs.resource_request {
        verb_matches(rule, &attrs.verb)
            && api_group_matches(rule, &attrs.api_group)
            && resource_matches(rule, &attrs.combined_resource(), &attrs.subresource)
            && resource_name_matches(rule, &attrs.name)
    } else {
        verb_matches(rule, &attrs.verb) && non_resource_url_matches(rule, &attrs.path)
    }
}

/// `appliesToUser` (rbac.go): users by name, groups by membership, service accounts by their
/// user name (`serviceaccount.MakeUsername`), the namespace defaulting to the binding's.
fn applies_to_user(user: &UserInfo, subject: &Value, binding_namespace: &str) -> bool {
    let name = str_at(subject, &["name"]);
    match str_at(subject, &["kind"]) {
        "User" => user.name == name,
        "Group" => user.groups.iter().any(|g| g == name),
        "ServiceAccount" => {
            let ns = match str_at(subject, &["namespace"]) {
                "" => binding_namespace,
                ns => ns,
            };
            !ns.is_empty() && user.name == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

fn labels_match(obj: &Value, selector: &Value) -> bool {
    let labels = obj.pointer("/metadata/labels");
    let Some(want) = selector.get("matchLabels").and_then(Value::as_object) else {
        return false;
    };
    !want.is_empty()
        && want
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

impl Policy {
    /// An empty policy.
    pub fn new() -> Policy {
        Policy::default()
    }

    /// Adds or replaces one RBAC object (any other kind is an error).
    pub fn apply(&mut self, obj: Value) -> anyhow::Result<()> {
        let api_version = str_at(&obj, &["apiVersion"]);
        anyhow::ensure!(
            api_version == "rbac.authorization.k8s.io/v1",
            "not an RBAC object: apiVersion {api_version:?}"
        );
        let name = str_at(&obj, &["metadata", "name"]).to_string();
        anyhow::ensure!(!name.is_empty(), "metadata.name is required");
        let ns = match str_at(&obj, &["metadata", "namespace"]) {
            "" => "default".to_string(),
            ns => ns.to_string(),
        };
        let same = |b: &Value| {
            str_at(b, &["metadata", "name"]) == name
                && (str_at(b, &["kind"]) == "ClusterRoleBinding"
                    || str_at(b, &["metadata", "namespace"]) == ns)
        };
        match str_at(&obj, &["kind"]) {
            "ClusterRole" => {
                self.cluster_roles.insert(name, obj);
            }
            "Role" => {
                let mut obj = obj;
                obj["metadata"]["namespace"] = json!(ns);
                self.roles.insert((ns, name), obj);
            }
            "ClusterRoleBinding" => {
                self.cluster_role_bindings.retain(|b| !same(b));
                self.cluster_role_bindings.push(obj);
            }
            "RoleBinding" => {
                let mut obj = obj;
                obj["metadata"]["namespace"] = json!(ns);
                self.role_bindings.retain(|b| !same(b));
                self.role_bindings.push(obj);
            }
            kind => anyhow::bail!("not an RBAC kind: {kind:?}"),
        }
        Ok(())
    }

    /// The rules of a ClusterRole; an `aggregationRule` adds the rules of every ClusterRole
    /// its `matchLabels` selectors select (what the clusterrole-aggregation controller
    /// writes into `rules`), each rule named by the role it came from.
    fn cluster_role_rules(&self, name: &str) -> Option<Vec<(RuleRef, Value)>> {
        let role = self.cluster_roles.get(name)?;
        let mut out = Vec::new();
        let mut push = |role_name: &str, role: &Value| {
            if let Some(rules) = role.get("rules").and_then(Value::as_array) {
                for (i, r) in rules.iter().enumerate() {
                    out.push((
                        RuleRef {
                            role_kind: "ClusterRole".into(),
                            role_namespace: String::new(),
                            role_name: role_name.to_string(),
                            rule_index: i,
                        },
                        r.clone(),
                    ));
                }
            }
        };
        push(name, role);
        if let Some(selectors) = role
            .pointer("/aggregationRule/clusterRoleSelectors")
            .and_then(Value::as_array)
        {
            let mut names: Vec<&String> = self.cluster_roles.keys().collect();
            names.sort();
            for other in names {
                let o = &self.cluster_roles[other];
                if other != name && selectors.iter().any(|s| labels_match(o, s)) {
                    push(other, o);
                }
            }
        }
        Some(out)
    }

    /// The rules a binding's `roleRef` names, or the error `VisitRulesFor` reports.
    fn role_ref_rules(
        &self,
        role_ref: &Value,
        binding_namespace: &str,
    ) -> Result<Vec<(RuleRef, Value)>, String> {
        let name = str_at(role_ref, &["name"]);
        match str_at(role_ref, &["kind"]) {
            "ClusterRole" => self.cluster_role_rules(name).ok_or_else(|| {
                format!("clusterrole.rbac.authorization.k8s.io \"{name}\" not found")
            }),
            "Role" => {
                let role = self
                    .roles
                    .get(&(binding_namespace.to_string(), name.to_string()))
                    .ok_or_else(|| {
                        format!("role.rbac.authorization.k8s.io \"{name}\" not found")
                    })?;
                Ok(role
                    .get("rules")
                    .and_then(Value::as_array)
                    .map(|rules| {
                        rules
                            .iter()
                            .enumerate()
                            .map(|(i, r)| {
                                (
                                    RuleRef {
                                        role_kind: "Role".into(),
                                        role_namespace: binding_namespace.to_string(),
                                        role_name: name.to_string(),
                                        rule_index: i,
                                    },
                                    r.clone(),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default())
            }
            kind => Err(format!("unsupported role reference kind: {kind:?}")),
        }
    }

    /// `RBACAuthorizer.Authorize`: ClusterRoleBindings first, then the RoleBindings of the
    /// request's namespace (`VisitRulesFor`); the first rule that allows wins. Denials carry
    /// `RBAC: <errors>` when a referenced role is missing. `system:masters` is allowed
    /// before RBAC, like the apiserver's privileged-group authorizer.
    pub fn authorize(&self, user: &UserInfo, attrs: &Attributes) -> Decision {
        let decision = |allowed, rule, binding, reason| Decision {
            user: user.name.clone(),
            attributes: attrs.clone(),
            allowed,
            rule,
            binding,
            reason,
        };
        if user.groups.iter().any(|g| g == "system:masters") {
            return decision(true, None, None, String::new());
        }
        let mut errors: Vec<String> = Vec::new();
        let mut visit = |binding: &Value, binding_ns: &str| -> Option<(RuleRef, BindingRef)> {
            let subjects = binding.get("subjects").and_then(Value::as_array)?;
            // `appliesTo`: the first subject that applies is the one described.
            let subject = subjects
                .iter()
                .find(|s| applies_to_user(user, s, binding_ns))?;
            let role_ref = binding.get("roleRef").cloned().unwrap_or(Value::Null);
            match self.role_ref_rules(&role_ref, binding_ns) {
                Ok(rules) => {
                    rules
                        .into_iter()
                        .find(|(_, r)| rule_allows(attrs, r))
                        .map(|(rr, _)| {
                            let s = |v: &Value, k: &str| str_at(v, &[k]).to_string();
                            let by = BindingRef {
                                kind: s(binding, "kind"),
                                namespace: binding_ns.to_string(),
                                name: str_at(binding, &["metadata", "name"]).to_string(),
                                role_kind: s(&role_ref, "kind"),
                                role_name: s(&role_ref, "name"),
                                subject_kind: s(subject, "kind"),
                                subject_name: s(subject, "name"),
                                subject_namespace: s(subject, "namespace"),
                            };
                            (rr, by)
                        })
                }
                Err(e) => {
                    errors.push(e);
                    None
                }
            }
        };
        // `authorizingVisitor.visit`: `RBAC: allowed by <source>`.
        let allowed = |(rr, by): (RuleRef, BindingRef)| {
            let reason = format!("RBAC: allowed by {}", by.describe());
            decision(true, Some(rr), Some(by), reason)
        };
        for b in &self.cluster_role_bindings {
            if let Some(found) = visit(b, "") {
                return allowed(found);
            }
        }
        if !attrs.namespace.is_empty() {
            for b in &self.role_bindings {
                if str_at(b, &["metadata", "namespace"]) == attrs.namespace
                    && let Some(found) = visit(b, &attrs.namespace)
                {
                    return allowed(found);
                }
            }
        }
        let reason = if errors.is_empty() {
            String::new()
        } else if errors.len() == 1 {
            format!("RBAC: {}", errors[0])
        } else {
            format!("RBAC: [{}]", errors.join(", "))
        };
        decision(false, None, None, reason)
    }

    /// `DefaultRuleResolver.RulesFor` (rule.go): every rule of the roles bound to `user` by
    /// ClusterRoleBindings and by the RoleBindings of `namespace`, in that order, and the
    /// errors of bindings whose role is missing (the walk goes on past them).
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<Value>, Vec<String>) {
        let mut rules = Vec::new();
        let mut errors = Vec::new();
        let mut visit = |binding: &Value, binding_ns: &str| {
            let bound = binding
                .get("subjects")
                .and_then(Value::as_array)
                .is_some_and(|subjects| {
                    subjects
                        .iter()
                        .any(|s| applies_to_user(user, s, binding_ns))
                });
            if !bound {
                return;
            }
            let role_ref = binding.get("roleRef").cloned().unwrap_or(Value::Null);
            match self.role_ref_rules(&role_ref, binding_ns) {
                Ok(found) => rules.extend(found.into_iter().map(|(_, r)| r)),
                Err(e) => errors.push(e),
            }
        };
        for b in &self.cluster_role_bindings {
            visit(b, "");
        }
        if !namespace.is_empty() {
            for b in &self.role_bindings {
                if str_at(b, &["metadata", "namespace"]) == namespace {
                    visit(b, namespace);
                }
            }
        }
        (rules, errors)
    }

    /// Every rule of every role, as [`RuleRef`]s with the rule (for coverage reports).
    pub fn rules(&self) -> Vec<(RuleRef, Value)> {
        let mut out = Vec::new();
        let mut names: Vec<&String> = self.cluster_roles.keys().collect();
        names.sort();
        for n in names {
            if let Some(rules) = self.cluster_roles[n].get("rules").and_then(Value::as_array) {
                for (i, r) in rules.iter().enumerate() {
                    out.push((
                        RuleRef {
                            role_kind: "ClusterRole".into(),
                            role_namespace: String::new(),
                            role_name: n.clone(),
                            rule_index: i,
                        },
                        r.clone(),
                    ));
                }
            }
        }
        let mut keys: Vec<&(String, String)> = self.roles.keys().collect();
        keys.sort();
        for k in keys {
            if let Some(rules) = self.roles[k].get("rules").and_then(Value::as_array) {
                for (i, r) in rules.iter().enumerate() {
                    out.push((
                        RuleRef {
                            role_kind: "Role".into(),
                            role_namespace: k.0.clone(),
                            role_name: k.1.clone(),
                            rule_index: i,
                        },
                        r.clone(),
                    ));
                }
            }
        }
        out
    }
}

/// The bootstrap policy every authenticated user gets on a real cluster
/// (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go): `system:discovery`,
/// `system:public-info-viewer`, `system:basic-user`, and the Role
/// `extension-apiserver-authentication-reader` in kube-system (bound to nobody).
pub fn bootstrap_objects() -> Vec<Value> {
    let crb = |name: &str, group: &str| {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
        })
    };
    let group = |name: &str| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": name});
    vec![
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "system:discovery"},
            "rules": [{"verbs": ["get"], "nonResourceURLs": [
                "/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", "/version", "/version/"]}],
        }),
        crb("system:discovery", "system:authenticated"),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "system:public-info-viewer"},
            "rules": [{"verbs": ["get"], "nonResourceURLs": [
                "/healthz", "/livez", "/readyz", "/version", "/version/"]}],
        }),
        // Anonymous requests may read these too (the bootstrap binding names both groups).
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "system:public-info-viewer"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:public-info-viewer"},
            "subjects": [group("system:authenticated"), group("system:unauthenticated")],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "system:basic-user"},
            "rules": [{"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
                "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]}],
        }),
        crb("system:basic-user", "system:authenticated"),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "extension-apiserver-authentication-reader", "namespace": "kube-system"},
            "rules": [{"verbs": ["get", "list", "watch"], "apiGroups": [""],
                "resources": ["configmaps"], "resourceNames": ["extension-apiserver-authentication"]}],
        }),
    ]
}

fn parse_bool(v: &str) -> bool {
    matches!(v, "1" | "t" | "T" | "true" | "TRUE" | "True")
}

/// The attributes of a request, like `RequestInfoFactory.NewRequestInfo`
/// (k8s.io/apiserver/pkg/endpoints/request/requestinfo.go).
pub fn request_info(method: &str, path: &str, query: &HashMap<String, String>) -> Attributes {
    let mut info = Attributes::non_resource(&method.to_ascii_lowercase(), path);
    let trimmed = path.trim_matches('/');
    let mut parts: Vec<&str> = if trimmed.is_empty() {
        Vec::new()
    } else {
        trimmed.split('/').collect()
    };
    if parts.len() < 3 || !(parts[0] == "api" || parts[0] == "apis") {
        return info;
    }
    let prefix = parts.remove(0);
    if prefix != "api" {
        // `/apis/{group}/{version}` (a discovery document) is a non-resource request: after
        // the prefix, a resource request has a group, a version and at least one more part.
        if parts.len() < 3 {
            return info;
        }
        info.api_group = parts.remove(0).to_string();
    }
    info.api_version = parts.remove(0).to_string();
    info.resource_request = true;
    info.verb = match method {
        "POST" => "create",
        "GET" | "HEAD" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    }
    .to_string();
    // Special verbs (`watch`, `proxy`) as the first segment.
    if let Some(first) = parts.first()
        && (*first == "watch" || *first == "proxy")
    {
        if parts.len() < 2 {
            return info;
        }
        info.verb = first.to_string();
        parts.remove(0);
    }
    if parts.first() == Some(&"namespaces") && parts.len() > 1 {
        info.namespace = parts[1].to_string();
        // `namespaces/{name}/status|finalize` address the Namespace itself.
        if parts.len() > 2 && !matches!(parts[2], "status" | "finalize") {
            parts.drain(..2);
        }
    }
    if parts.len() >= 3 && info.verb != "proxy" {
        info.subresource = parts[2].to_string();
    }
    if parts.len() >= 2 {
        info.name = parts[1].to_string();
    }
    if let Some(r) = parts.first() {
        info.resource = r.to_string();
    }
    if info.name.is_empty() && info.verb == "get" {
        let watch = query.get("watch").is_some_and(|v| parse_bool(v));
        info.verb = if watch { "watch" } else { "list" }.into();
        // A `metadata.name=` field selector names the object (`RequiresExactMatch`).
        if let Some(sel) = query.get("fieldSelector") {
            for term in sel.split(',') {
                let term = term.trim();
                let value = term
                    .strip_prefix("metadata.name==")
                    .or_else(|| term.strip_prefix("metadata.name="));
                if let Some(v) = value
                    && !v.is_empty()
                    && !v.contains('/')
                    && v != "."
                    && v != ".."
                {
                    info.name = v.to_string();
                }
            }
        }
    }
    if info.name.is_empty() && info.verb == "delete" {
        info.verb = "deletecollection".into();
    }
    info
}

/// The 403 of a denied request (`responsewriters.Forbidden` + `apierrors.NewForbidden`).
pub fn forbidden(user: &str, attrs: &Attributes, reason: &str) -> ApiError {
    let msg = if !attrs.resource_request {
        format!(
            "User \"{user}\" cannot {} path \"{}\"",
            attrs.verb, attrs.path
        )
    } else if !attrs.namespace.is_empty() {
        format!(
            "User \"{user}\" cannot {} resource \"{}\" in API group \"{}\" in the namespace \"{}\"",
            attrs.verb,
            attrs.combined_resource(),
            attrs.api_group,
            attrs.namespace
        )
    } else {
        format!(
            "User \"{user}\" cannot {} resource \"{}\" in API group \"{}\" at the cluster scope",
            attrs.verb,
            attrs.combined_resource(),
            attrs.api_group
        )
    };
    let msg = if reason.is_empty() {
        msg
    } else {
        format!("{msg}: {reason}")
    };
    let (group, resource) = if attrs.resource_request {
        (attrs.api_group.as_str(), attrs.resource.as_str())
    } else {
        ("", "")
    };
    let qualified = if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    };
    let message = if qualified.is_empty() {
        format!("forbidden: {msg}")
    } else if attrs.name.is_empty() {
        format!("{qualified} is forbidden: {msg}")
    } else {
        format!("{qualified} \"{}\" is forbidden: {msg}", attrs.name)
    };
    let mut details = serde_json::Map::new();
    if !attrs.name.is_empty() {
        details.insert("name".into(), json!(attrs.name));
    }
    if !group.is_empty() {
        details.insert("group".into(), json!(group));
    }
    if !resource.is_empty() {
        details.insert("kind".into(), json!(resource));
    }
    ApiError {
        message,
        details: Some(Value::Object(details)),
        ..ApiError::new(403, "")
    }
}

/// What an `Authorization` header carries for the bearer-token authenticator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bearer<'a> {
    /// No header, another scheme, or no token: no credentials.
    Absent,
    /// `Bearer  <token>`: the token is the empty string before the second space, so there are
    /// no credentials, and the apiserver warns ([`EXTRA_SPACE_WARNING`]).
    EmptyBeforeSpace,
    /// The token to look up.
    Token(&'a str),
}

/// The warning of the bearer-token authenticator for [`Bearer::EmptyBeforeSpace`]
/// (`invalidTokenWithSpaceWarning`).
pub(crate) const EXTRA_SPACE_WARNING: &str = "the provided Authorization header contains extra space before the bearer token, and is ignored";

/// The token of an `Authorization` header, parsed like `bearertoken.AuthenticateRequest`
/// (k8s.io/apiserver pkg/authentication/request/bearertoken/bearertoken.go): the header is
/// trimmed (`strings.TrimSpace`) and split on single spaces into at most three parts
/// (`strings.SplitN(auth, " ", 3)`); fewer than two parts or a scheme other than
/// (case-insensitively) `bearer` is no token; the token is the second part, as is: `Bearer a b`
/// looks up `a`, and `Bearer  a` (two spaces) has an empty token, which is no credentials: such
/// a request is anonymous, as one without the header ([`Rbac::authenticate_request`]).
pub(crate) fn bearer_token(authorization: Option<&str>) -> Bearer<'_> {
    let auth = authorization.unwrap_or("").trim();
    if auth.is_empty() {
        return Bearer::Absent;
    }
    let parts: Vec<&str> = auth.splitn(3, ' ').collect();
    if parts.len() < 2 || !parts[0].eq_ignore_ascii_case("bearer") {
        return Bearer::Absent;
    }
    match parts[1] {
        // After trimming, an empty second part always has a third part after it.
        "" if parts.len() == 3 => Bearer::EmptyBeforeSpace,
        "" => Bearer::Absent,
        token => Bearer::Token(token),
    }
}

/// The user of a request without credentials (`anonymous.NewAuthenticator`,
/// k8s.io/apiserver pkg/authentication/request/anonymous/anonymous.go).
pub fn anonymous_user() -> UserInfo {
    UserInfo::new("system:anonymous", &["system:unauthenticated"])
}

/// The simulator's authentication and authorization state.
#[derive(Default)]
pub(crate) struct Rbac {
    enabled: AtomicBool,
    /// `--anonymous-auth=false`: a request without credentials is 401 instead of
    /// `system:anonymous` (the apiserver's default is to allow anonymous requests).
    anonymous_off: AtomicBool,
    tokens: Mutex<HashMap<String, UserInfo>>,
    /// The ServiceAccount tokens issued through TokenRequests (`tokens.rs`).
    pub(crate) issued: Tokens,
    policy: Mutex<Policy>,
    decisions: Mutex<Vec<Decision>>,
}

/// The outcome of authenticating and authorizing a request.
pub(crate) enum Check {
    /// Allowed (or RBAC off); the user when authenticated.
    Allowed(Option<UserInfo>),
    /// 401 or 403.
    Denied(ApiError),
}

impl Rbac {
    pub(crate) fn enable(&self) {
        let mut policy = self.policy.lock().unwrap();
        for obj in bootstrap_objects() {
            // The bootstrap objects are valid RBAC objects.
            let _ = policy.apply(obj);
        }
        drop(policy);
        self.add_token("sim", "sim-admin", &["system:masters"]);
        self.enabled.store(true, Ordering::SeqCst);
    }

    pub(crate) fn enabled(&self) -> bool {
        self.enabled.load(Ordering::SeqCst)
    }

    /// See [`super::KubeSim::set_anonymous_auth`].
    pub(crate) fn set_anonymous(&self, allowed: bool) {
        self.anonymous_off.store(!allowed, Ordering::SeqCst);
    }

    pub(crate) fn add_token(&self, token: &str, user: &str, groups: &[&str]) {
        let mut u = UserInfo::new(user, groups);
        if !u.groups.iter().any(|g| g == "system:authenticated") {
            u.groups.push("system:authenticated".into());
        }
        self.tokens.lock().unwrap().insert(token.to_string(), u);
    }

    pub(crate) fn apply(&self, obj: Value) -> anyhow::Result<()> {
        self.policy.lock().unwrap().apply(obj)
    }

    pub(crate) fn policy(&self) -> Policy {
        self.policy.lock().unwrap().clone()
    }

    pub(crate) fn decisions(&self) -> Vec<Decision> {
        self.decisions.lock().unwrap().clone()
    }

    /// The user of an `Authorization: Bearer` header ([`bearer_token`]'s token): a token
    /// registered with [`Rbac::add_token`], else a ServiceAccount token this simulator issued
    /// (judged against the ServiceAccounts in `store` now, `tokens.rs`).
    pub(crate) fn authenticate(
        &self,
        authorization: Option<&str>,
        store: &Store,
    ) -> Option<UserInfo> {
        match bearer_token(authorization) {
            Bearer::Token(token) => {
                let registered = self.tokens.lock().unwrap().get(token).cloned();
                registered.or_else(|| self.issued.authenticate(token, store))
            }
            Bearer::Absent | Bearer::EmptyBeforeSpace => None,
        }
    }

    /// Authorizes `attrs` for `user` and records the decision.
    pub(crate) fn authorize(&self, user: &UserInfo, attrs: &Attributes) -> Decision {
        let d = self.policy.lock().unwrap().authorize(user, attrs);
        self.decisions.lock().unwrap().push(d.clone());
        d
    }

    /// Authentication of a request (`None` when off), as the apiserver's union of a token
    /// authenticator and the anonymous one: a bearer token must be registered (an unknown one
    /// is 401, even where anonymous requests are allowed, as `unionAuthRequestHandler` fails
    /// on the token's error); a request without one is `system:anonymous` unless
    /// [`super::KubeSim::set_anonymous_auth`] turned that off (then 401).
    pub(crate) fn authenticate_request(
        &self,
        authorization: Option<&str>,
        store: &Store,
    ) -> Result<Option<UserInfo>, ApiError> {
        if !self.enabled() {
            return Ok(None);
        }
        let unauthorized = || ApiError::new(401, "Unauthorized");
        match bearer_token(authorization) {
            Bearer::Token(_) => self
                .authenticate(authorization, store)
                .map(Some)
                .ok_or_else(unauthorized),
            Bearer::Absent | Bearer::EmptyBeforeSpace => {
                if self.anonymous_off.load(Ordering::SeqCst) {
                    Err(unauthorized())
                } else {
                    Ok(Some(anonymous_user()))
                }
            }
        }
    }

    /// Authentication, then authorization of a request (always allowed when off).
    pub(crate) fn check(
        &self,
        method: &str,
        path: &str,
        query: &HashMap<String, String>,
        authorization: Option<&str>,
        store: &Store,
    ) -> Check {
        let user = match self.authenticate_request(authorization, store) {
            Ok(Some(user)) => user,
            Ok(None) => return Check::Allowed(None),
            Err(e) => return Check::Denied(e),
        };
        let attrs = request_info(method, path, query);
        let d = self.authorize(&user, &attrs);
        if d.allowed {
            Check::Allowed(Some(user))
        } else {
            Check::Denied(forbidden(&user.name, &attrs, &d.reason))
        }
    }
}

/// A SelfSubjectAccessReview (authorization.k8s.io/v1) for `user`, answered with `status`.
pub(crate) fn self_subject_access_review(
    rbac: &Rbac,
    user: Option<&UserInfo>,
    mut review: Value,
) -> Result<Value, ApiError> {
    let spec = review.get("spec").cloned().unwrap_or(Value::Null);
    let attrs = if let Some(ra) = spec.get("resourceAttributes") {
        let s = |k: &str| str_at(ra, &[k]).to_string();
        Attributes {
            verb: s("verb"),
            resource_request: true,
            api_group: s("group"),
            api_version: s("version"),
            resource: s("resource"),
            subresource: s("subresource"),
            namespace: s("namespace"),
            name: s("name"),
            path: String::new(),
        }
    } else if let Some(nra) = spec.get("nonResourceAttributes") {
        Attributes::non_resource(str_at(nra, &["verb"]), str_at(nra, &["path"]))
    } else {
        return Err(ApiError::new(
            422,
            "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    };
    let status = match user {
        // RBAC off: everything is allowed.
        None => json!({"allowed": true}),
        Some(u) => {
            let d = rbac.policy.lock().unwrap().authorize(u, &attrs);
            access_review_status(&d)
        }
    };
    review["apiVersion"] = json!("authorization.k8s.io/v1");
    review["kind"] = json!("SelfSubjectAccessReview");
    if review.get("metadata").is_none() {
        review["metadata"] = json!({});
    }
    review["status"] = status;
    Ok(review)
}

/// A SelfSubjectRulesReview (authorization.k8s.io/v1) for `user` in `spec.namespace`, like
/// `pkg/registry/authorization/selfsubjectrulesreview` over the RBAC authorizer's `RulesFor`:
/// each bound rule with resources becomes a resource rule, each with non-resource URLs a
/// non-resource rule; missing roles are reported in `evaluationError`. Without RBAC (and for
/// `system:masters`, which a real cluster's bootstrap `cluster-admin` binding covers) the
/// answer is everything, as the always-allow authorizer answers.
pub(crate) fn self_subject_rules_review(
    rbac: &Rbac,
    user: Option<&UserInfo>,
    review: Value,
) -> Result<Value, ApiError> {
    let namespace = review
        .pointer("/spec/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if namespace.is_empty() {
        return Err(ApiError::bad_request("no namespace on request"));
    }
    let everything = || {
        json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        })
    };
    let status = match user {
        None => everything(),
        Some(u) if u.groups.iter().any(|g| g == "system:masters") => everything(),
        Some(u) => {
            let (rules, errors) = rbac
                .policy
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .rules_for(u, &namespace);
            let mut resource_rules = Vec::new();
            let mut non_resource_rules = Vec::new();
            for rule in &rules {
                // Empty lists are omitted, as `omitempty` writes them.
                let list = |key: &str, out: &mut serde_json::Map<String, Value>| {
                    let items = strings(rule, key);
                    if !items.is_empty() {
                        out.insert(key.into(), json!(items));
                    }
                };
                if !strings(rule, "resources").is_empty() {
                    let mut r = serde_json::Map::new();
                    r.insert("verbs".into(), json!(strings(rule, "verbs")));
                    for key in ["apiGroups", "resources", "resourceNames"] {
                        list(key, &mut r);
                    }
                    resource_rules.push(Value::Object(r));
                }
                if !strings(rule, "nonResourceURLs").is_empty() {
                    let mut r = serde_json::Map::new();
                    r.insert("verbs".into(), json!(strings(rule, "verbs")));
                    list("nonResourceURLs", &mut r);
                    non_resource_rules.push(Value::Object(r));
                }
            }
            let mut st = json!({
                "resourceRules": resource_rules,
                "nonResourceRules": non_resource_rules,
                "incomplete": false,
            });
            // `utilerrors.NewAggregate(...).Error()`: one error as is, more in brackets.
            match errors.len() {
                0 => {}
                1 => st["evaluationError"] = json!(errors[0]),
                _ => st["evaluationError"] = json!(format!("[{}]", errors.join(", "))),
            }
            st
        }
    };
    // `REST.Create` (pkg/registry/authorization/selfsubjectrulesreview/rest.go) answers with a
    // new `SelfSubjectRulesReview` holding only `Status`: nothing of the request comes back.
    // Encoded, that is the type's `apiVersion`/`kind`, an empty `metadata` (whose zero
    // `creationTimestamp` is written as null), `spec` (no `omitempty`; its `namespace` is) and
    // the status.
    Ok(json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectRulesReview",
        "metadata": {"creationTimestamp": null},
        "spec": {},
        "status": status,
    }))
}

/// The `status` of an access review for a decision: `allowed`, and the authorizer's `reason`
/// (`RBAC: allowed by ClusterRoleBinding "b" of ClusterRole "r" to User "u"`, or why nothing
/// allowed it), as `SubjectAccessReview`'s `REST.Create`
/// (pkg/registry/authorization/subjectaccessreview/rest.go) copies it.
pub(crate) fn access_review_status(d: &Decision) -> Value {
    let mut st = json!({"allowed": d.allowed});
    if !d.reason.is_empty() {
        st["reason"] = json!(d.reason);
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_parsed_like_the_bearertoken_authenticator() {
        let t = |h: &'static str| bearer_token(Some(h));
        assert_eq!(t("Bearer abc"), Bearer::Token("abc"));
        assert_eq!(t("bEaReR abc"), Bearer::Token("abc"));
        assert_eq!(t("  Bearer abc \t"), Bearer::Token("abc"));
        // SplitN(auth, " ", 3): the token is the second part, a third is ignored.
        assert_eq!(t("Bearer a b"), Bearer::Token("a"));
        assert_eq!(t("Bearer  abc"), Bearer::EmptyBeforeSpace);
        assert_eq!(t("Bearer"), Bearer::Absent);
        assert_eq!(t("Bearer "), Bearer::Absent);
        assert_eq!(t("Bearer\tabc"), Bearer::Absent);
        assert_eq!(t("Basic abc"), Bearer::Absent);
        assert_eq!(t(""), Bearer::Absent);
        assert_eq!(bearer_token(None), Bearer::Absent);

        let rbac = Rbac::default();
        let store = Store::new(1, 1);
        rbac.add_token("a", "alice", &[]);
        assert_eq!(
            rbac.authenticate(Some("Bearer a b"), &store)
                .map(|u| u.name),
            Some("alice".to_string())
        );
        assert_eq!(rbac.authenticate(Some("Bearer  a"), &store), None);
    }

    #[test]
    fn bindings_are_described_like_the_rule_resolver() {
        let by = |kind: &str, ns: &str, subject: (&str, &str, &str)| BindingRef {
            kind: kind.into(),
            namespace: ns.into(),
            name: "b".into(),
            role_kind: "ClusterRole".into(),
            role_name: "r".into(),
            subject_kind: subject.0.into(),
            subject_name: subject.1.into(),
            subject_namespace: subject.2.into(),
        };
        assert_eq!(
            by("ClusterRoleBinding", "", ("User", "u", "")).describe(),
            "ClusterRoleBinding \"b\" of ClusterRole \"r\" to User \"u\""
        );
        assert_eq!(
            by(
                "ClusterRoleBinding",
                "",
                ("ServiceAccount", "sa", "kube-system")
            )
            .describe(),
            "ClusterRoleBinding \"b\" of ClusterRole \"r\" to ServiceAccount \"sa/kube-system\""
        );
        assert_eq!(
            by("RoleBinding", "ns", ("ServiceAccount", "sa", "")).describe(),
            "RoleBinding \"b/ns\" of ClusterRole \"r\" to ServiceAccount \"sa/ns\""
        );
        assert_eq!(
            by("RoleBinding", "ns", ("Group", "g", "")).describe(),
            "RoleBinding \"b/ns\" of ClusterRole \"r\" to Group \"g\""
        );
    }
}
