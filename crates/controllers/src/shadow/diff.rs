//! Whether an object already is what a would-be write asks for, and if not, which fields differ.
//!
//! The shadow compares its would-be patches with the objects the watch delivers, so the CCM in
//! charge doing the same write turns a pending difference into an agreement. The comparison is
//! a "contains" check, not equality, because the apiserver adds what we never send: defaults
//! (`ipMode: VIP` on a load-balancer ingress since 1.30), managed fields, other controllers'
//! labels. A patch value is satisfied by an object value when:
//! - `null` (remove): the field is absent or null;
//! - an object: every key of the patch is satisfied by the object's (other keys are not ours);
//! - a list: same length and each element satisfied by the element at the same position (a merge
//!   patch replaces lists whole, so order is part of what we would write); a `conditions` list
//!   (the route controller's strategic patch, merged by `type`) instead needs each condition to
//!   be satisfied by the object's condition of that type;
//! - a scalar: equality;
//! - an empty list or map: also an absent field (the apiserver omits empty ones).
//!
//! Heartbeat and transition times are never compared: they are "now" in every patch.

use serde_json::Value;

use super::report::FieldChange;

/// Keys whose values are the time of writing, different in every patch.
const TIMES: &[&str] = &["lastHeartbeatTime", "lastTransitionTime"];

/// The fields of `patch` that `object` does not satisfy, as paths with the current and the
/// would-be value; empty when the object already is what the patch asks for.
pub(crate) fn unsatisfied(patch: &Value, object: &Value) -> Vec<FieldChange> {
    let mut changes = Vec::new();
    walk(patch, Some(object), &mut String::new(), &mut changes);
    changes
}

fn walk(patch: &Value, object: Option<&Value>, path: &mut String, out: &mut Vec<FieldChange>) {
    match patch {
        Value::Object(fields) => {
            for (key, want) in fields {
                if TIMES.contains(&key.as_str()) {
                    continue;
                }
                let have = object.and_then(|o| o.get(key));
                let len = path.len();
                push_segment(path, key);
                if key == "conditions"
                    && let (Value::Array(want), Some(Value::Array(have))) = (want, have)
                {
                    conditions(want, have, path, out);
                } else {
                    walk(want, have, path, out);
                }
                path.truncate(len);
            }
        }
        _ => {
            if !satisfied(patch, object) {
                out.push(FieldChange {
                    path: path.clone(),
                    from: object.filter(|v| !v.is_null()).cloned(),
                    to: patch.clone(),
                });
            }
        }
    }
}

/// Conditions merged by `type` (the strategic merge key of `NodeCondition`).
fn conditions(want: &[Value], have: &[Value], path: &mut String, out: &mut Vec<FieldChange>) {
    for condition in want {
        let kind = condition.get("type").and_then(Value::as_str).unwrap_or("");
        let current = have
            .iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(kind));
        let len = path.len();
        path.push_str(&format!("[type={kind}]"));
        walk(condition, current, path, out);
        path.truncate(len);
    }
}

/// Whether `have` satisfies `want` (see the module's rules).
fn satisfied(want: &Value, have: Option<&Value>) -> bool {
    match (want, have) {
        (Value::Null, None | Some(Value::Null)) => true,
        // The apiserver omits empty lists and maps: `taints: []` is what an absent field is.
        (Value::Array(w), None | Some(Value::Null)) if w.is_empty() => true,
        (Value::Object(w), None | Some(Value::Null)) if w.is_empty() => true,
        (Value::Null, Some(_)) => false,
        (_, None) => false,
        (Value::Object(fields), Some(Value::Object(_))) => fields
            .iter()
            .all(|(k, w)| TIMES.contains(&k.as_str()) || satisfied(w, have.and_then(|h| h.get(k)))),
        (Value::Array(want), Some(Value::Array(have))) => {
            want.len() == have.len() && want.iter().zip(have).all(|(w, h)| satisfied(w, Some(h)))
        }
        (w, Some(h)) => w == h,
    }
}

/// `metadata.labels["topology.kubernetes.io/zone"]`: plain keys joined by dots, keys with dots
/// or slashes quoted.
fn push_segment(path: &mut String, key: &str) {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
    } else {
        path.push_str(&format!("[{}]", Value::String(key.to_string())));
    }
}

/// Lays the merge patch `next` over `acc` (RFC 7386 composition): objects merge key by key, any
/// other value (a list, a scalar, `null` for removal) replaces what was there. The shadow's
/// would-be state of an object is the composition of every patch it would have sent.
pub(crate) fn compose(acc: &mut Value, next: &Value) {
    match (acc, next) {
        (Value::Object(acc), Value::Object(next)) => {
            for (k, v) in next {
                match acc.get_mut(k) {
                    Some(slot @ Value::Object(_)) if v.is_object() => compose(slot, v),
                    _ => {
                        acc.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (acc, next) => *acc = next.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn defaults_and_other_owners_fields_do_not_count_as_differences() {
        let object = json!({
            "metadata": {"labels": {"a": "1", "theirs": "x"}, "resourceVersion": "9"},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1", "ipMode": "VIP"}]}},
        });
        let patch = json!({
            "metadata": {"labels": {"a": "1"}},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}},
        });
        assert_eq!(unsatisfied(&patch, &object), vec![]);
    }

    #[test]
    fn a_difference_names_its_field_with_both_values() {
        let object = json!({"metadata": {"labels": {"topology.kubernetes.io/zone": "lpg1"}}});
        let patch = json!({"metadata": {"labels": {
            "topology.kubernetes.io/zone": "LPG1",
            "gone": null,
            "new": "x",
        }}});
        let changes = unsatisfied(&patch, &object);
        let paths: Vec<_> = changes.iter().map(|c| c.path.as_str()).collect();
        // Keys in order (serde_json's maps are sorted); `gone` is already absent.
        assert_eq!(
            paths,
            [
                "metadata.labels.new",
                r#"metadata.labels["topology.kubernetes.io/zone"]"#,
            ]
        );
        assert_eq!(changes[0].from, None);
        assert_eq!(changes[1].from, Some(json!("lpg1")));
        assert_eq!(changes[1].to, json!("LPG1"));
    }

    #[test]
    fn lists_compare_in_order_and_removals_need_absence() {
        let object = json!({"status": {"addresses": [
            {"type": "InternalIP", "address": "10.0.0.3"},
            {"type": "ExternalIP", "address": "5.1.2.3"},
        ]}, "metadata": {"annotations": {"x": "1"}}});
        let reordered = json!({"status": {"addresses": [
            {"type": "ExternalIP", "address": "5.1.2.3"},
            {"type": "InternalIP", "address": "10.0.0.3"},
        ]}});
        assert_eq!(unsatisfied(&reordered, &object).len(), 1);
        assert_eq!(
            unsatisfied(&json!({"metadata": {"annotations": {"x": null}}}), &object).len(),
            1
        );
        assert!(
            unsatisfied(&json!({"metadata": {"annotations": {"y": null}}}), &object).is_empty()
        );
    }

    #[test]
    fn conditions_match_by_type_and_ignore_times() {
        let object = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated",
             "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ]}});
        let same = json!({"status": {"conditions": [{"type": "NetworkUnavailable",
            "status": "False", "reason": "RouteCreated", "lastTransitionTime": "2026-11-26T00:00:00Z",
            "lastHeartbeatTime": "2026-11-26T00:00:00Z"}]}});
        assert!(unsatisfied(&same, &object).is_empty());
        let other = json!({"status": {"conditions": [{"type": "NetworkUnavailable",
            "status": "True", "reason": "NoRouteCreated"}]}});
        let changes = unsatisfied(&other, &object);
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert_eq!(
            changes[0].path,
            "status.conditions[type=NetworkUnavailable].reason"
        );
    }

    #[test]
    fn patches_compose_like_merge_patches() {
        let mut acc =
            json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"taints": [1]}});
        compose(
            &mut acc,
            &json!({"metadata": {"labels": {"b": null, "c": "3"}}, "spec": {"taints": []}}),
        );
        assert_eq!(
            acc,
            json!({"metadata": {"labels": {"a": "1", "b": null, "c": "3"}}, "spec": {"taints": []}})
        );
    }
}
