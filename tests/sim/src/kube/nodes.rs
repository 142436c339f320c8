//! Node validation a cloud-controller-manager can trip over: immutable providerID and pod CIDRs,
//! well-formed taints.

use serde_json::Value;

const EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// Checks a Node being created (`old` is `None`) or updated; the error is the field error text.
pub(crate) fn validate(old: Option<&Value>, new: &Value) -> Result<(), String> {
    let spec_str = |obj: &Value, field: &str| {
        obj.get("spec")
            .and_then(|s| s.get(field))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    if let Some(old) = old {
        for field in ["providerID", "podCIDR"] {
            let before = spec_str(old, field);
            if !before.is_empty() && before != spec_str(new, field) {
                return Err(format!(
                    "spec.{field}: Forbidden: node updates may not change {field} except from \"\" to valid"
                ));
            }
        }
        let cidrs = |obj: &Value| obj.get("spec").and_then(|s| s.get("podCIDRs")).cloned();
        let before = cidrs(old);
        if before
            .as_ref()
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
            && before != cidrs(new)
        {
            return Err(
                "spec.podCIDRs: Forbidden: node updates may not change podCIDR except from \"\" to valid"
                    .into(),
            );
        }
    }
    let taints = new
        .get("spec")
        .and_then(|s| s.get("taints"))
        .and_then(Value::as_array);
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (i, taint) in taints.into_iter().flatten().enumerate() {
        let key = taint.get("key").and_then(Value::as_str).unwrap_or("");
        let effect = taint.get("effect").and_then(Value::as_str).unwrap_or("");
        if key.is_empty() {
            return Err(format!("spec.taints[{i}].key: Required value"));
        }
        if !EFFECTS.contains(&effect) {
            return Err(format!(
                "spec.taints[{i}].effect: Unsupported value: \"{effect}\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""
            ));
        }
        if seen.contains(&(key, effect)) {
            return Err(format!(
                "spec.taints[{i}]: Duplicate value: \"{key}:{effect}\": taints must be unique by key and effect pair"
            ));
        }
        seen.push((key, effect));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn provider_id_is_set_once() {
        let unset = json!({"spec": {}});
        let set = json!({"spec": {"providerID": "sim://a"}});
        assert_eq!(validate(Some(&unset), &set), Ok(()));
        assert_eq!(validate(Some(&set), &set), Ok(()));
        assert!(validate(Some(&set), &json!({"spec": {"providerID": "sim://b"}})).is_err());
        assert!(validate(Some(&set), &unset).is_err());
        let cidrs = json!({"spec": {"podCIDRs": ["10.0.0.0/24"]}});
        assert!(validate(Some(&cidrs), &unset).is_err());
        assert_eq!(validate(Some(&unset), &cidrs), Ok(()));
    }

    #[test]
    fn taints_are_checked() {
        let ok = json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoExecute"}]}});
        assert_eq!(validate(None, &ok), Ok(()));
        let dup = json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoSchedule"}]}});
        assert!(validate(None, &dup).is_err());
        assert!(
            validate(
                None,
                &json!({"spec": {"taints": [{"key": "a", "effect": "Sometimes"}]}})
            )
            .is_err()
        );
        assert!(
            validate(
                None,
                &json!({"spec": {"taints": [{"effect": "NoSchedule"}]}})
            )
            .is_err()
        );
    }
}
