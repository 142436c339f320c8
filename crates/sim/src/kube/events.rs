//! Events: one storage, two views. The apiserver stores `core/v1` Events and serves
//! `events.k8s.io/v1` as a conversion of the same objects (pkg/apis/events/v1/conversion.go,
//! `Convert_v1_Event_To_core_Event` and back), so an event written through either API is listed,
//! watched and read through both with the same uid and resourceVersion. The store keeps both
//! forms and commits them together; this module converts and validates.

use serde_json::{Map, Value};

use super::validation::{Errors, dns1123_subdomain, qualified_name};

/// (events.k8s.io/v1 field, core/v1 field) pairs that are renamed; every other field (metadata,
/// eventTime, series, reportingInstance, action, reason, related, type) keeps its name.
const RENAMED: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// `ReportingInstanceLengthLimit`, `ActionLengthLimit`, `ReasonLengthLimit`,
/// `NoteLengthLimit` (pkg/apis/core/validation/events.go). Go's `len` counts bytes.
const REPORTING_INSTANCE_LIMIT: usize = 128;
const ACTION_LIMIT: usize = 128;
const REASON_LIMIT: usize = 128;
const NOTE_LIMIT: usize = 1024;

fn rename(obj: &Value, to_core: bool, api_version: &str) -> Value {
    let Some(map) = obj.as_object() else {
        return obj.clone();
    };
    let mut out = Map::new();
    for (k, v) in map {
        let renamed = RENAMED.iter().find_map(|(events, core)| {
            if to_core {
                (k == events).then_some(*core)
            } else {
                (k == core).then_some(*events)
            }
        });
        // A field of the other form that has no counterpart here (say `message` sent to
        // events.k8s.io) is dropped, as the typed decoder drops unknown fields.
        let foreign = RENAMED.iter().any(
            |(events, core)| {
                if to_core { k == core } else { k == events }
            },
        );
        match renamed {
            Some(name) => {
                out.insert(name.to_string(), v.clone());
            }
            None if !foreign => {
                out.insert(k.clone(), v.clone());
            }
            None => {}
        }
    }
    out.insert("apiVersion".into(), Value::from(api_version));
    out.insert("kind".into(), Value::from("Event"));
    Value::Object(out)
}

/// The core/v1 form of an events.k8s.io/v1 Event.
pub(crate) fn to_core(obj: &Value) -> Value {
    rename(obj, true, "v1")
}

/// The events.k8s.io/v1 form of a core/v1 Event.
pub(crate) fn to_events(obj: &Value) -> Value {
    rename(obj, false, "events.k8s.io/v1")
}

fn s<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get(field).and_then(Value::as_str).unwrap_or("")
}

fn set(obj: &Value, field: &str) -> bool {
    obj.get(field).is_some_and(|v| match v {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Number(n) => n.as_i64() != Some(0),
        Value::Object(o) => o.values().any(|v| !v.is_null() && v != ""),
        _ => true,
    })
}

/// `legacyValidateEvent` (pkg/apis/core/validation/events.go) on the core form: namespaces
/// agree with `involvedObject`; events with an `eventTime` need reportingController (a
/// qualified name), reportingInstance, action and reason, each bounded in bytes, and a
/// message of at most 1024 bytes.
fn legacy(core: &Value, errs: &mut Errors) {
    let namespace = core
        .get("metadata")
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let involved_ns = core
        .get("involvedObject")
        .and_then(|o| o.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let mismatch = |errs: &mut Errors| {
        errs.invalid(
            "involvedObject.namespace",
            &format!("{involved_ns:?}"),
            "does not match event.namespace",
        );
    };
    if !set(core, "eventTime") {
        if involved_ns.is_empty() {
            if !namespace.is_empty() && namespace != "default" {
                mismatch(errs);
            }
        } else if namespace != involved_ns {
            mismatch(errs);
        }
    } else {
        if involved_ns.is_empty() && namespace != "default" && namespace != "kube-system" {
            mismatch(errs);
        }
        let controller = s(core, "reportingComponent");
        if controller.is_empty() {
            errs.required("reportingController", "");
        }
        for msg in qualified_name(controller) {
            errs.invalid("reportingController", &format!("{controller:?}"), &msg);
        }
        let instance = s(core, "reportingInstance");
        if instance.is_empty() {
            errs.required("reportingInstance", "");
        }
        if instance.len() > REPORTING_INSTANCE_LIMIT {
            errs.invalid(
                "reportingInstance",
                "\"\"",
                &format!("can have at most {REPORTING_INSTANCE_LIMIT} characters"),
            );
        }
        for (field, limit) in [("action", ACTION_LIMIT), ("reason", REASON_LIMIT)] {
            let v = s(core, field);
            if v.is_empty() {
                errs.required(field, "");
            }
            if v.len() > limit {
                errs.invalid(
                    field,
                    "\"\"",
                    &format!("can have at most {limit} characters"),
                );
            }
        }
        if s(core, "message").len() > NOTE_LIMIT {
            errs.invalid(
                "message",
                "\"\"",
                &format!("can have at most {NOTE_LIMIT} characters"),
            );
        }
    }
    for msg in dns1123_subdomain(namespace) {
        errs.invalid("namespace", &format!("{namespace:?}"), &msg);
    }
}

/// `validateV1EventSeries` (same file).
fn series(core: &Value, errs: &mut Errors) {
    let Some(series) = core.get("series").filter(|s| !s.is_null()) else {
        return;
    };
    if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
        errs.invalid("series.count", "\"\"", "should be at least 2");
    }
    if !set(series, "lastObservedTime") {
        errs.required("series.lastObservedTime", "");
    }
}

/// `ValidateEventCreate` (pkg/apis/core/validation/events.go) for the core form `core`;
/// `strict` for writes through events.k8s.io/v1 (eventTime required, type Normal or Warning,
/// the deprecated fields unset).
pub(crate) fn validate_create(core: &Value, strict: bool) -> Vec<String> {
    let mut errs = Errors::default();
    legacy(core, &mut errs);
    if strict {
        series(core, &mut errs);
        if !set(core, "eventTime") {
            errs.required("eventTime", "");
        }
        let ty = s(core, "type");
        if ty != "Normal" && ty != "Warning" {
            errs.invalid("type", "\"\"", &format!("has invalid value: {ty}"));
        }
        for field in ["firstTimestamp", "lastTimestamp", "count", "source"] {
            if set(core, field) {
                errs.invalid(field, "\"\"", "needs to be unset");
            }
        }
    }
    errs.0
}

/// `ValidateEventUpdate` (same file): legacy rules, and through events.k8s.io/v1 every field
/// but `series` (and metadata) is immutable.
pub(crate) fn validate_update(old: &Value, core: &Value, strict: bool) -> Vec<String> {
    let mut errs = Errors::default();
    legacy(core, &mut errs);
    if strict {
        if core.get("series") != old.get("series") {
            series(core, &mut errs);
        }
        for field in [
            "involvedObject",
            "reason",
            "message",
            "source",
            "firstTimestamp",
            "lastTimestamp",
            "count",
            "type",
            "eventTime",
            "action",
            "related",
            "reportingComponent",
            "reportingInstance",
        ] {
            let norm = |v: Option<&Value>| v.filter(|v| !v.is_null() && *v != "").cloned();
            if norm(core.get(field)) != norm(old.get(field)) {
                let path = match field {
                    "reportingComponent" => "reportingController",
                    f => f,
                };
                errs.invalid(path, "\"\"", "field is immutable");
            }
        }
    }
    errs.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v1_event() -> Value {
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "wasm-ccm",
            "reportingInstance": "wasm-ccm-a", "action": "Sync", "reason": "Synced",
            "regarding": {"kind": "Node", "name": "n1"}, "note": "ok", "type": "Normal"})
    }

    #[test]
    fn converts_both_ways() {
        let core = to_core(&v1_event());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["message"], "ok");
        assert_eq!(core["involvedObject"]["name"], "n1");
        assert_eq!(core["reportingComponent"], "wasm-ccm");
        assert!(core.get("note").is_none());
        assert_eq!(to_events(&core), v1_event());
    }

    #[test]
    fn strict_rules() {
        assert!(validate_create(&to_core(&v1_event()), true).is_empty());
        let mut bad = v1_event();
        bad["action"] = json!("");
        bad["reason"] = json!("r".repeat(129));
        bad["type"] = json!("Sometimes");
        bad["note"] = json!("é".repeat(600));
        let errs = validate_create(&to_core(&bad), true);
        assert_eq!(errs.len(), 4, "{errs:?}");
        assert!(errs.contains(
            &"message: Invalid value: \"\": can have at most 1024 characters".to_string()
        ));
        let mut legacy_ok = to_core(&bad);
        legacy_ok.as_object_mut().map(|o| o.remove("eventTime"));
        assert!(validate_create(&legacy_ok, false).is_empty());
        let mut changed = to_core(&v1_event());
        changed["message"] = json!("other");
        assert_eq!(
            validate_update(&to_core(&v1_event()), &changed, true).len(),
            1
        );
    }
}
