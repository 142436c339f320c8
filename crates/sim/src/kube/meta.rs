//! Small helpers over `metadata` of JSON objects, and generated identifiers.

use rand::Rng;
use serde_json::{Map, Value};

/// RFC 3339 "now" with second precision, the format of `metav1.Time`.
pub(crate) fn now() -> String {
    time(jiff::Timestamp::now())
}

/// `t` as `metav1.Time`: RFC 3339 in UTC, whole seconds.
pub(crate) fn time(t: jiff::Timestamp) -> String {
    // metav1.Time serialises whole seconds; clients compare these strings, so match the format.
    jiff::Timestamp::from_second(t.as_second())
        .unwrap_or(t)
        .to_string()
}

/// A random version-4 UUID string, the format of `metadata.uid`.
pub(crate) use crate::serving::new_uuid as new_uid;

/// The five characters `generateName` appends, from the apiserver's alphabet (no vowels, no
/// look-alikes).
pub(crate) fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

/// `metadata` of an object, if it is a map.
pub(crate) fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata")?.as_object()
}

/// `metadata` of an object, created (and replacing a non-map) when needed.
pub(crate) fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let Value::Object(map) = obj else {
        unreachable!("made an object above")
    };
    let entry = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(m) => m,
        _ => unreachable!("made an object above"),
    }
}

/// A string field of `metadata`.
pub(crate) fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    meta(obj)?.get(field)?.as_str()
}

/// `metadata.finalizers` as strings (non-strings are ignored).
pub(crate) fn finalizers(obj: &Value) -> Vec<&str> {
    meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Whether `metadata.deletionTimestamp` is set.
pub(crate) fn is_terminating(obj: &Value) -> bool {
    meta(obj).is_some_and(|m| m.get("deletionTimestamp").is_some_and(|v| !v.is_null()))
}

/// Checks a name with `rule` (`IsDNS1123Subdomain`, `IsDNS1123Label`, `IsDNS1035Label`), one
/// `metadata.name: Invalid value` error per message, joined like an aggregate.
pub(crate) fn validate_name_with(
    name: &str,
    rule: fn(&str) -> Vec<String>,
) -> Result<(), Vec<String>> {
    let errs = rule(name);
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs
            .iter()
            .map(|m| format!("metadata.name: Invalid value: {name:?}: {m}"))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn uid_looks_like_a_uuid() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(u.as_bytes()[14], b'4');
        assert_ne!(u, new_uid());
    }

    #[test]
    fn timestamp_has_second_precision() {
        let t = now();
        assert!(t.ends_with('Z') && !t.contains('.'), "{t}");
    }

    #[test]
    fn names_are_checked() {
        let subdomain = crate::kube::validation::dns1123_subdomain;
        assert!(validate_name_with("node-a.example", subdomain).is_ok());
        assert!(validate_name_with("Node", subdomain).is_err());
        assert!(validate_name_with("-a", subdomain).is_err());
        assert!(validate_name_with("", subdomain).is_err());
        let dns1035 = crate::kube::validation::dns1035_label;
        assert!(validate_name_with("web", dns1035).is_ok());
        assert!(validate_name_with("1web", dns1035).is_err());
        assert!(validate_name_with("a.b", dns1035).is_err());
    }

    #[test]
    fn meta_helpers() {
        let mut v = json!({"metadata": {"finalizers": ["a", "b"], "deletionTimestamp": null}});
        assert_eq!(finalizers(&v), vec!["a", "b"]);
        assert!(!is_terminating(&v));
        meta_mut(&mut v).insert("name".into(), json!("x"));
        assert_eq!(meta_str(&v, "name"), Some("x"));
        let mut not_obj = json!(3);
        meta_mut(&mut not_obj);
        assert!(not_obj["metadata"].is_object());
    }
}
