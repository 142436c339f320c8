//! The subset of strategic merge patch the built-in types served here need.
//!
//! Maps merge like a merge patch. Lists follow the `patchStrategy`/`patchMergeKey` of the Go
//! types, looked up by the dotted field path from the object root: a list with a merge key merges
//! element by element (`$patch: delete` removes one, `$patch: replace` replaces the list); a
//! primitive list with strategy `merge` (`metadata.finalizers`) is a set union, shrunk by
//! `$deleteFromPrimitiveList/<field>`; every other list is replaced. `$setElementOrder/...` and
//! `$retainKeys` are accepted and ignored.

use serde_json::{Map, Value};

use super::PatchError;

/// How a list at a given path is patched.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ListStrategy {
    Replace,
    /// Union of primitive values.
    MergePrimitive,
    /// Merge elements by the named key.
    MergeKey(&'static str),
}

/// The schema knowledge: field path → list strategy, from the Go struct tags of the served types.
fn list_strategy(path: &[String]) -> ListStrategy {
    match path.join(".").as_str() {
        "metadata.finalizers" | "spec.podCIDRs" => ListStrategy::MergePrimitive,
        "metadata.ownerReferences" => ListStrategy::MergeKey("uid"),
        // NodeAddress is declared merge-by-type although several addresses share a type; the
        // apiserver really merges this way, and controllers work around it, so keep it.
        "status.conditions" | "status.addresses" => ListStrategy::MergeKey("type"),
        "spec.ports" => ListStrategy::MergeKey("port"),
        "spec.containers" | "spec.initContainers" | "spec.volumes" => {
            ListStrategy::MergeKey("name")
        }
        // Node taints and LoadBalancer ingress have no patch strategy upstream: replaced.
        _ => ListStrategy::Replace,
    }
}

const PATCH: &str = "$patch";
const DELETE_FROM: &str = "$deleteFromPrimitiveList/";
const SET_ORDER: &str = "$setElementOrder/";
const RETAIN_KEYS: &str = "$retainKeys";

/// Applies a strategic merge patch to `target` (which must be, and stays, a JSON object).
pub fn strategic_merge_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let patch = patch.as_object().ok_or_else(|| {
        PatchError::Malformed("a strategic merge patch must be a JSON object".into())
    })?;
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let mut path = Vec::new();
    if let Value::Object(t) = target {
        merge_map(t, patch, &mut path)?;
    }
    Ok(())
}

fn directive(map: &Map<String, Value>) -> Result<Option<&str>, PatchError> {
    match map.get(PATCH) {
        None => Ok(None),
        Some(Value::String(s)) if matches!(s.as_str(), "replace" | "delete" | "merge") => {
            Ok(Some(s.as_str()))
        }
        Some(other) => Err(PatchError::Malformed(format!(
            "Unknown patch type: {other} in map"
        ))),
    }
}

fn merge_map(
    target: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    path: &mut Vec<String>,
) -> Result<(), PatchError> {
    if directive(patch)? == Some("replace") {
        let mut fresh = Map::new();
        let mut without = patch.clone();
        without.remove(PATCH);
        merge_map(&mut fresh, &without, path)?;
        *target = fresh;
        return Ok(());
    }
    let mut deletions = Vec::new();
    for (key, value) in patch {
        if key == PATCH || key == RETAIN_KEYS || key.starts_with(SET_ORDER) {
            continue;
        }
        if let Some(field) = key.strip_prefix(DELETE_FROM) {
            deletions.push((field, value));
            continue;
        }
        if value.is_null() {
            target.remove(key);
            continue;
        }
        path.push(key.clone());
        let result = merge_field(target, key, value, path);
        path.pop();
        result?;
    }
    // Applied after additions so a patch that both adds and deletes is deterministic.
    for (field, value) in deletions {
        let remove = value.as_array().ok_or_else(|| {
            PatchError::Malformed(format!("{DELETE_FROM}{field} must hold a list"))
        })?;
        if let Some(Value::Array(list)) = target.get_mut(field) {
            list.retain(|v| !remove.contains(v));
        }
    }
    Ok(())
}

fn merge_field(
    target: &mut Map<String, Value>,
    key: &str,
    value: &Value,
    path: &mut Vec<String>,
) -> Result<(), PatchError> {
    match value {
        Value::Object(p) => {
            if directive(p)? == Some("delete") {
                target.remove(key);
                return Ok(());
            }
            let slot = target
                .entry(key.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            if !slot.is_object() {
                *slot = Value::Object(Map::new());
            }
            if let Value::Object(t) = slot {
                merge_map(t, p, path)?;
            }
        }
        Value::Array(p) => {
            let slot = target
                .entry(key.to_string())
                .or_insert_with(|| Value::Array(Vec::new()));
            if !slot.is_array() {
                *slot = Value::Array(Vec::new());
            }
            if let Value::Array(t) = slot {
                merge_list(t, p, path)?;
            }
        }
        other => {
            target.insert(key.to_string(), other.clone());
        }
    }
    Ok(())
}

fn is_replace_marker(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|m| m.len() == 1 && m.get(PATCH).and_then(Value::as_str) == Some("replace"))
}

/// A list element with its directives processed away (used when it is inserted, not merged).
fn fresh(v: &Value, path: &mut Vec<String>) -> Result<Value, PatchError> {
    match v {
        Value::Object(p) => {
            let mut out = Map::new();
            merge_map(&mut out, p, path)?;
            Ok(Value::Object(out))
        }
        other => Ok(other.clone()),
    }
}

fn merge_list(
    target: &mut Vec<Value>,
    patch: &[Value],
    path: &mut Vec<String>,
) -> Result<(), PatchError> {
    let strategy = list_strategy(path);
    // `{"$patch": "replace"}` as an element replaces the list with the other elements.
    if strategy == ListStrategy::Replace || patch.iter().any(is_replace_marker) {
        let mut out = Vec::with_capacity(patch.len());
        for v in patch.iter().filter(|v| !is_replace_marker(v)) {
            out.push(fresh(v, path)?);
        }
        *target = out;
        return Ok(());
    }
    match strategy {
        ListStrategy::MergePrimitive => {
            for v in patch {
                if !target.contains(v) {
                    target.push(v.clone());
                }
            }
        }
        ListStrategy::MergeKey(key) => {
            for element in patch {
                let p = element.as_object().ok_or_else(|| {
                    PatchError::Unapplicable(format!(
                        "{}: list element is not a map: {element}",
                        path.join(".")
                    ))
                })?;
                let id = p.get(key).ok_or_else(|| {
                    PatchError::Unapplicable(format!(
                        "map: {element} does not contain declared merge key: {key}"
                    ))
                })?;
                let position = target.iter().position(|t| t.get(key) == Some(id));
                if directive(p)? == Some("delete") {
                    target.retain(|t| t.get(key) != Some(id));
                    continue;
                }
                match position.and_then(|i| target.get_mut(i)) {
                    Some(Value::Object(existing)) => merge_map(existing, p, path)?,
                    _ => target.push(fresh(element, path)?),
                }
            }
        }
        ListStrategy::Replace => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn smp(doc: Value, patch: Value) -> Result<Value, PatchError> {
        let mut d = doc;
        strategic_merge_patch(&mut d, &patch).map(|()| d)
    }

    #[test]
    fn finalizers_are_a_set() {
        let doc = json!({"metadata": {"finalizers": ["a", "b"]}});
        assert_eq!(
            smp(
                doc.clone(),
                json!({"metadata": {"finalizers": ["c"], "$setElementOrder/finalizers": ["a", "b", "c"]}})
            ),
            Ok(json!({"metadata": {"finalizers": ["a", "b", "c"]}}))
        );
        assert_eq!(
            smp(
                doc,
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}})
            ),
            Ok(json!({"metadata": {"finalizers": ["b"]}}))
        );
    }

    #[test]
    fn conditions_merge_by_type() {
        let doc = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "NetworkUnavailable", "status": "True", "reason": "NoRoute"}
        ]}});
        let out = smp(
            doc,
            json!({"status": {"conditions": [
                {"type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated"},
                {"type": "MemoryPressure", "status": "False"}
            ]}}),
        );
        assert_eq!(
            out,
            Ok(json!({"status": {"conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated"},
                {"type": "MemoryPressure", "status": "False"}
            ]}}))
        );
    }

    #[test]
    fn addresses_merge_by_type_unless_replaced() {
        let doc = json!({"status": {"addresses": [
            {"type": "InternalIP", "address": "10.0.0.1"},
            {"type": "Hostname", "address": "n1"}
        ]}});
        // The buggy upstream behaviour: same-type entries collapse into one.
        assert_eq!(
            smp(
                doc.clone(),
                json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}]}})
            ),
            Ok(json!({"status": {"addresses": [
                {"type": "InternalIP", "address": "10.0.0.2"},
                {"type": "Hostname", "address": "n1"}
            ]}}))
        );
        assert_eq!(
            smp(
                doc,
                json!({"status": {"addresses": [
                    {"$patch": "replace"},
                    {"type": "InternalIP", "address": "10.0.0.2"},
                    {"type": "InternalIP", "address": "10.0.0.3"}
                ]}})
            ),
            Ok(json!({"status": {"addresses": [
                {"type": "InternalIP", "address": "10.0.0.2"},
                {"type": "InternalIP", "address": "10.0.0.3"}
            ]}}))
        );
    }

    #[test]
    fn delete_and_replace_directives() {
        let doc = json!({"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443}], "taints": [{"key": "a"}], "x": {"y": 1, "z": 2}}});
        let out = smp(
            doc,
            json!({"spec": {
                "ports": [{"port": 443, "$patch": "delete"}, {"port": 80, "nodePort": 30080}],
                "taints": [{"key": "b"}],
                "x": {"$patch": "replace", "w": 3},
                "$retainKeys": ["ports"]
            }}),
        );
        assert_eq!(
            out,
            Ok(json!({"spec": {
                "ports": [{"port": 80, "name": "http", "nodePort": 30080}],
                "taints": [{"key": "b"}],
                "x": {"w": 3}
            }}))
        );
        assert_eq!(
            smp(
                json!({"a": {"b": 1}, "c": 1}),
                json!({"a": {"$patch": "delete"}, "c": null})
            ),
            Ok(json!({}))
        );
    }

    #[test]
    fn errors() {
        assert!(matches!(
            smp(
                json!({}),
                json!({"status": {"conditions": [{"status": "True"}]}})
            ),
            Err(PatchError::Unapplicable(_))
        ));
        assert!(matches!(
            smp(json!({}), json!({"a": {"$patch": "explode"}})),
            Err(PatchError::Malformed(_))
        ));
        assert!(matches!(
            smp(json!({}), json!([])),
            Err(PatchError::Malformed(_))
        ));
    }
}
