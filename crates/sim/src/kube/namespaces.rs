//! Namespace lifecycle: the registry's strategy (pkg/registry/core/namespace/strategy.go and
//! storage/storage.go), the `NamespaceLifecycle` admission plugin
//! (k8s.io/apiserver pkg/admission/plugin/namespace/lifecycle/admission.go) and what the
//! namespace controller (pkg/controller/namespace/deletion/) writes while a namespace
//! terminates. The store ([`super::store`]) applies them; the controller's work is done at once,
//! as a controller with no delay would.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::error::ApiError;
use super::meta::{self, is_terminating, meta_mut};

/// The finalizer every namespace gets on create and the namespace controller removes once the
/// namespace is empty (`api.FinalizerKubernetes`).
pub(crate) const KUBERNETES_FINALIZER: &str = "kubernetes";

/// `namespaceStrategy.PrepareForCreate`: phase `Active`, the `kubernetes` finalizer added to
/// `spec.finalizers`; and the `kubernetes.io/metadata.name` label the defaulting sets.
pub(crate) fn prepare_for_create(name: &str, obj: &mut Value) {
    let m = meta_mut(obj);
    let labels = m
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(l) = labels.as_object_mut() {
        l.insert("kubernetes.io/metadata.name".into(), json!(name));
    }
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    let spec = o.entry("spec").or_insert_with(|| json!({}));
    if let Some(s) = spec.as_object_mut() {
        let finalizers = s.entry("finalizers").or_insert_with(|| json!([]));
        if let Some(list) = finalizers.as_array_mut()
            && !list.iter().any(|f| f == KUBERNETES_FINALIZER)
        {
            list.push(json!(KUBERNETES_FINALIZER));
        }
    }
    o.insert("status".into(), json!({"phase": "Active"}));
}

/// `namespaceStrategy.PrepareForUpdate`: a write of the main resource keeps `spec.finalizers`
/// (only the `finalize` subresource changes them) and the status.
pub(crate) fn prepare_for_update(old: &Value, new: &mut Value) {
    let finalizers = old.pointer("/spec/finalizers").cloned();
    let Some(o) = new.as_object_mut() else {
        return;
    };
    let spec = o.entry("spec").or_insert_with(|| json!({}));
    if let Some(s) = spec.as_object_mut() {
        match finalizers {
            Some(f) => s.insert("finalizers".into(), f),
            None => s.remove("finalizers"),
        };
    }
}

/// `ValidateNamespaceStatusUpdate` (pkg/apis/core/validation/validation.go): the phase follows
/// `deletionTimestamp`.
pub(crate) fn validate_status(new: &Value) -> Vec<String> {
    let phase = new
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    let (want, rule) = if is_terminating(new) {
        (
            "Terminating",
            "may only be 'Terminating' if `deletionTimestamp` is not empty",
        )
    } else {
        (
            "Active",
            "may only be 'Active' if `deletionTimestamp` is empty",
        )
    };
    if phase == want {
        Vec::new()
    } else {
        vec![format!("status.Phase: Invalid value: {phase:?}: {rule}")]
    }
}

/// `spec.finalizers` of a namespace.
pub(crate) fn spec_finalizers(ns: &Value) -> Vec<&str> {
    ns.pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The first DELETE of a namespace (`REST.Delete`, storage.go): `deletionTimestamp` and phase
/// `Terminating`; the namespace stays until its content is gone and it is finalized.
pub(crate) fn mark_terminating(ns: &mut Value) {
    meta_mut(ns).insert("deletionTimestamp".into(), json!(meta::now()));
    if let Some(o) = ns.as_object_mut() {
        let status = o.entry("status").or_insert_with(|| json!({}));
        if let Some(s) = status.as_object_mut() {
            s.insert("phase".into(), json!("Terminating"));
        }
    }
}

/// The 403 of a create in a terminating namespace (`NamespaceLifecycle.Admit`, worded by
/// `admission.NewForbidden`): the object is named by its name, else its `generateName`, else
/// `Unknown` (`extractResourceName`), and a `NamespaceTerminating` cause names the namespace.
pub(crate) fn terminating_create_error(
    qualified: &str,
    group: &str,
    plural: &str,
    namespace: &str,
    obj: &Value,
) -> ApiError {
    let name = meta::meta_str(obj, "name")
        .filter(|n| !n.is_empty())
        .or_else(|| meta::meta_str(obj, "generateName").filter(|n| !n.is_empty()))
        .unwrap_or("Unknown");
    let mut details = Map::new();
    details.insert("name".into(), json!(name));
    if !group.is_empty() {
        details.insert("group".into(), json!(group));
    }
    details.insert("kind".into(), json!(plural));
    details.insert(
        "causes".into(),
        json!([{
            "reason": "NamespaceTerminating",
            "message": format!("namespace {namespace} is being terminated"),
            "field": "metadata.namespace",
        }]),
    );
    ApiError {
        details: Some(Value::Object(details)),
        ..ApiError::new(
            403,
            format!(
                "{qualified} {name:?} is forbidden: unable to create new content in namespace {namespace} because it is being terminated"
            ),
        )
    }
}

/// What is left in a terminating namespace after the controller's deletes: objects per
/// resource (`<plural>.<group>`) and objects per finalizer (`allGVRDeletionMetadata`).
#[derive(Debug, Default)]
pub(crate) struct Remaining {
    pub by_resource: BTreeMap<String, usize>,
    pub by_finalizer: BTreeMap<String, usize>,
}

impl Remaining {
    /// Whether nothing is left.
    pub(crate) fn is_empty(&self) -> bool {
        self.by_resource.is_empty()
    }
}

/// The condition types the namespace controller maintains, in its order, with their reason
/// and message when nothing is wrong (`conditionTypes`, `okReasons`, `okMessages` in
/// pkg/controller/namespace/deletion/status_condition_utils.go).
const CONDITIONS: &[(&str, &str, &str)] = &[
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "ContentHasNoFinalizers",
        "All content-preserving finalizers finished",
    ),
];

/// Writes the controller's conditions for `remaining` into `ns` (`ProcessContentTotals` and
/// `updateConditions`): `NamespaceContentRemaining` and `NamespaceFinalizersRemaining` are True
/// while content is left (`Some resources are remaining: services. has 1 resource instances`,
/// `Some content in the namespace has finalizers remaining: <f> in 1 resource instances`), the
/// others False; `lastTransitionTime` moves only when a status changes.
pub(crate) fn set_conditions(ns: &mut Value, remaining: &Remaining) {
    let now = meta::now();
    let wanted = |ty: &str, ok_reason: &str, ok_message: &str| -> (String, String, String) {
        let (status, reason, message) = match ty {
            "NamespaceContentRemaining" if !remaining.by_resource.is_empty() => {
                let parts: Vec<String> = remaining
                    .by_resource
                    .iter()
                    .map(|(r, n)| format!("{r} has {n} resource instances"))
                    .collect();
                (
                    "True",
                    "SomeResourcesRemain",
                    format!("Some resources are remaining: {}", parts.join(", ")),
                )
            }
            "NamespaceFinalizersRemaining" if !remaining.by_finalizer.is_empty() => {
                let parts: Vec<String> = remaining
                    .by_finalizer
                    .iter()
                    .map(|(f, n)| format!("{f} in {n} resource instances"))
                    .collect();
                (
                    "True",
                    "SomeFinalizersRemain",
                    format!(
                        "Some content in the namespace has finalizers remaining: {}",
                        parts.join(", ")
                    ),
                )
            }
            _ => ("False", ok_reason, ok_message.to_string()),
        };
        (status.to_string(), reason.to_string(), message)
    };
    let Some(o) = ns.as_object_mut() else {
        return;
    };
    let status = o.entry("status").or_insert_with(|| json!({}));
    let Some(s) = status.as_object_mut() else {
        return;
    };
    let conditions = s.entry("conditions").or_insert_with(|| json!([]));
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let Some(list) = conditions.as_array_mut() else {
        return;
    };
    for (ty, ok_reason, ok_message) in CONDITIONS {
        let (status, reason, message) = wanted(ty, ok_reason, ok_message);
        match list.iter_mut().find(|c| c["type"] == *ty) {
            None => list.push(json!({
                "type": ty, "status": status, "lastTransitionTime": now,
                "reason": reason, "message": message,
            })),
            Some(c) => {
                if c["status"] != status.as_str() {
                    c["lastTransitionTime"] = json!(now);
                }
                c["status"] = json!(status);
                c["reason"] = json!(reason);
                c["message"] = json!(message);
            }
        }
    }
}

/// The namespace controller's `finalizeNamespace`: the `kubernetes` finalizer goes (an empty
/// list is not kept: `omitempty`).
pub(crate) fn finalize(ns: &mut Value) {
    let Some(spec) = ns.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(list) = spec.get_mut("finalizers").and_then(Value::as_array_mut) {
        list.retain(|f| f != KUBERNETES_FINALIZER);
        if list.is_empty() {
            spec.remove("finalizers");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_adds_the_kubernetes_finalizer_once() {
        let mut ns = json!({"metadata": {"name": "a"}, "spec": {"finalizers": ["example.com/x"]}});
        prepare_for_create("a", &mut ns);
        assert_eq!(
            ns["spec"]["finalizers"],
            json!(["example.com/x", "kubernetes"])
        );
        assert_eq!(ns["status"], json!({"phase": "Active"}));
        prepare_for_create("a", &mut ns);
        assert_eq!(spec_finalizers(&ns), vec!["example.com/x", "kubernetes"]);
    }

    #[test]
    fn status_phase_follows_the_deletion_timestamp() {
        let mut ns = json!({"metadata": {"name": "a"}, "status": {"phase": "Active"}});
        assert!(validate_status(&ns).is_empty());
        mark_terminating(&mut ns);
        assert!(validate_status(&ns).is_empty());
        ns["status"]["phase"] = json!("Active");
        assert_eq!(
            validate_status(&ns),
            vec![
                "status.Phase: Invalid value: \"Active\": may only be 'Terminating' if `deletionTimestamp` is not empty"
            ]
        );
    }

    #[test]
    fn conditions_report_what_remains_and_then_clear() {
        let mut ns = json!({"metadata": {"name": "a"}, "status": {"phase": "Terminating"}});
        let mut remaining = Remaining::default();
        remaining.by_resource.insert("services.".into(), 1);
        remaining
            .by_finalizer
            .insert("service.kubernetes.io/load-balancer-cleanup".into(), 1);
        set_conditions(&mut ns, &remaining);
        let conditions = ns["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(conditions.len(), 5);
        assert_eq!(conditions[3]["type"], "NamespaceContentRemaining");
        assert_eq!(conditions[3]["status"], "True");
        assert_eq!(
            conditions[3]["message"],
            "Some resources are remaining: services. has 1 resource instances"
        );
        assert_eq!(
            conditions[4]["message"],
            "Some content in the namespace has finalizers remaining: service.kubernetes.io/load-balancer-cleanup in 1 resource instances"
        );
        set_conditions(&mut ns, &Remaining::default());
        assert_eq!(ns["status"]["conditions"][3]["status"], "False");
        assert_eq!(ns["status"]["conditions"][3]["reason"], "ContentRemoved");
        assert_eq!(ns["status"]["conditions"].as_array().map(Vec::len), Some(5));
    }
}
