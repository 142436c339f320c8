//! Node validation a cloud-controller-manager can trip over: immutable providerID and pod CIDRs,
//! well-formed taints.

use serde_json::Value;

use super::validation::{Errors, label_value, parse_cidr_sloppy, qualified_name};

const EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// Checks a Node being created (`old` is `None`) or updated; the errors are `field.Error` texts.
///
/// Rules: `ValidateNodeUpdate` (pkg/apis/core/validation/validation.go) for the set-once
/// providerID and pod CIDRs and the duplicate `status.addresses` check (update only, as
/// upstream); `ValidateNode` for the pod CIDRs' format; `validateNodeTaints` (same file) for
/// taints. Upstream checks nothing else of `status.addresses` (neither type nor format).
pub(crate) fn validate(old: Option<&Value>, new: &Value) -> Result<(), Vec<String>> {
    let mut errs = Errors::default();
    let spec_str = |obj: &Value, field: &str| {
        obj.get("spec")
            .and_then(|s| s.get(field))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    if let Some(old) = old {
        // ValidateNodeUpdate: "node updates may not change providerID/podCIDR except from
        // \"\" to valid".
        for field in ["providerID", "podCIDR"] {
            let before = spec_str(old, field);
            if !before.is_empty() && before != spec_str(new, field) {
                errs.forbidden(
                    &format!("spec.{field}"),
                    &format!("node updates may not change {field} except from \"\" to valid"),
                );
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
            errs.forbidden(
                "spec.podCIDRs",
                "node updates may not change podCIDR except from \"\" to valid",
            );
        }
        // ValidateNodeUpdate: "Validate no duplicate addresses in node status."
        let addresses = new
            .get("status")
            .and_then(|s| s.get("addresses"))
            .and_then(Value::as_array);
        let mut seen: Vec<(&str, &str)> = Vec::new();
        for (i, a) in addresses.into_iter().flatten().enumerate() {
            let ty = a.get("type").and_then(Value::as_str).unwrap_or("");
            let address = a.get("address").and_then(Value::as_str).unwrap_or("");
            if seen.contains(&(ty, address)) {
                errs.duplicate(
                    &format!("status.addresses[{i}]"),
                    &format!("core.NodeAddress{{Type:{ty:?}, Address:{address:?}}}"),
                );
            }
            seen.push((ty, address));
        }
    }
    // ValidateNode: the pod CIDRs are CIDRs.
    let spec = new.get("spec");
    if let Some(cidr) = spec.and_then(|s| s.get("podCIDR")).and_then(Value::as_str)
        && !cidr.is_empty()
        && !parse_cidr_sloppy(cidr)
    {
        errs.invalid("spec.podCIDR", &format!("{cidr:?}"), "not a valid CIDR");
    }
    let cidrs = spec
        .and_then(|s| s.get("podCIDRs"))
        .and_then(Value::as_array);
    for (i, cidr) in cidrs.into_iter().flatten().enumerate() {
        let text = cidr.as_str().unwrap_or("");
        if !parse_cidr_sloppy(text) {
            errs.invalid(
                &format!("spec.podCIDRs[{i}]"),
                &format!("{text:?}"),
                "must be a valid CIDR",
            );
        }
    }
    // ValidateNode (pkg/apis/core/validation/validation.go): more than one pod CIDR must be a
    // dual-stack pair (one IPv4, one IPv6), and none may repeat.
    let texts: Vec<&str> = cidrs
        .into_iter()
        .flatten()
        .map(|c| c.as_str().unwrap_or(""))
        .collect();
    if texts.len() > 1 {
        let family = |t: &str| parse_cidr_sloppy(t).then(|| t.contains(':'));
        let dual_stack = texts.len() == 2
            && matches!((family(texts[0]), family(texts[1])), (Some(a), Some(b)) if a != b);
        if !dual_stack {
            let shown: Vec<String> = texts.iter().map(|t| format!("{t:?}")).collect();
            errs.invalid(
                "spec.podCIDRs",
                &format!("[]string{{{}}}", shown.join(", ")),
                "may specify no more than one CIDR for each IP family",
            );
        }
        for (i, text) in texts.iter().enumerate() {
            if texts[..i].contains(text) {
                errs.duplicate(&format!("spec.podCIDRs[{i}]"), &format!("{text:?}"));
            }
        }
    }
    let taints = new
        .get("spec")
        .and_then(|s| s.get("taints"))
        .and_then(Value::as_array);
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (i, taint) in taints.into_iter().flatten().enumerate() {
        let key = taint.get("key").and_then(Value::as_str).unwrap_or("");
        let value = taint.get("value").and_then(Value::as_str).unwrap_or("");
        let effect = taint.get("effect").and_then(Value::as_str).unwrap_or("");
        // ValidateLabelName on the key, IsValidLabelValue on the value.
        for msg in qualified_name(key) {
            errs.invalid(&format!("spec.taints[{i}].key"), &format!("{key:?}"), &msg);
        }
        let value_errs = label_value(value);
        if !value_errs.is_empty() {
            errs.invalid(
                &format!("spec.taints[{i}].value"),
                &format!("{value:?}"),
                &value_errs.join(";"),
            );
        }
        // validateTaintEffect (allowEmpty false).
        if effect.is_empty() {
            errs.required(&format!("spec.taints[{i}].effect"), "");
        } else if !EFFECTS.contains(&effect) {
            errs.not_supported(
                &format!("spec.taints[{i}].effect"),
                &format!("{effect:?}"),
                EFFECTS,
            );
        }
        if seen.contains(&(key, effect)) {
            errs.push_raw(format!(
                "spec.taints[{i}]: Duplicate value: core.Taint{{Key:{key:?}, Value:{value:?}, Effect:{effect:?}, TimeAdded:<nil>}}: taints must be unique by key and effect pair"
            ));
            continue;
        }
        seen.push((key, effect));
    }
    if errs.is_empty() { Ok(()) } else { Err(errs.0) }
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
    fn duplicate_addresses_are_refused_on_update() {
        let old = json!({"spec": {}});
        let dup = json!({"status": {"addresses": [
            {"type": "InternalIP", "address": "10.0.0.15"},
            {"type": "InternalIP", "address": "10.0.0.15"}]}});
        let errs = validate(Some(&old), &dup).err().unwrap_or_default();
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0].starts_with("status.addresses[1]: Duplicate value: "),
            "{errs:?}"
        );
        let other_type = json!({"status": {"addresses": [
            {"type": "InternalIP", "address": "10.0.0.15"},
            {"type": "ExternalIP", "address": "10.0.0.15"}]}});
        assert_eq!(validate(Some(&old), &other_type), Ok(()));
    }

    #[test]
    fn more_than_one_pod_cidr_is_a_dual_stack_pair_without_repeats() {
        let with = |cidrs: serde_json::Value| json!({"spec": {"podCIDRs": cidrs}});
        assert_eq!(
            validate(None, &with(json!(["10.0.0.0/24", "fd00::/64"]))),
            Ok(())
        );
        let errs = validate(None, &with(json!(["10.0.0.0/24", "10.0.0.0/24"])))
            .err()
            .unwrap_or_default();
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(
            errs[0].starts_with("spec.podCIDRs: Invalid value: ")
                && errs[0].ends_with("may specify no more than one CIDR for each IP family"),
            "{errs:?}"
        );
        assert!(
            errs[1].starts_with("spec.podCIDRs[1]: Duplicate value: "),
            "{errs:?}"
        );
        assert!(validate(None, &with(json!(["10.0.0.0/24", "10.1.0.0/24"]))).is_err());
        assert!(
            validate(
                None,
                &with(json!(["10.0.0.0/24", "fd00::/64", "10.1.0.0/24"]))
            )
            .is_err()
        );
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
        assert!(
            validate(
                None,
                &json!({"spec": {"taints": [{"key": "a b", "effect": "NoSchedule"}]}})
            )
            .is_err()
        );
        assert!(
            validate(
                None,
                &json!({"spec": {"taints": [{"key": "a", "value": "x y", "effect": "NoSchedule"}]}})
            )
            .is_err()
        );
    }
}
