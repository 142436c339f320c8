//! The model as JSON values, in the encoding of `crate::model`: serde does the work; this
//! adds what serde alone does not say, `null` as a missing field and errors that name the
//! input and the field (`service.ports[0].port: invalid value: integer `70000`, expected u16`).

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Reads a `T` from `value`. `what` names the input in errors (`service`, `nodes`,
/// `--cluster-services[2]`), followed by the path of the field that was wrong. `null` is the
/// zero value, at the top as in any field.
pub fn from_value<T: DeserializeOwned + Default>(value: &Value, what: &str) -> Result<T, String> {
    if value.is_null() {
        return Ok(T::default());
    }
    let mut value = value.clone();
    drop_nulls(&mut value);
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        match path.as_str() {
            // The root: the error is about the input itself.
            "." => format!("{what}: {inner}"),
            p if p.starts_with('[') => format!("{what}{p}: {inner}"),
            p => format!("{what}.{p}: {inner}"),
        }
    })
}

/// Writes `value` as JSON. The model serialises only strings, numbers, lists and objects keyed
/// by strings, so this cannot fail; a failure would be a bug in the model and is reported as
/// text rather than a panic.
pub fn to_value<T: Serialize + ?Sized>(value: &T) -> Value {
    serde_json::to_value(value)
        .unwrap_or_else(|e| Value::String(format!("(cannot be shown as JSON: {e})")))
}

/// Removes the object members whose value is `null`, at every depth, so that serde's
/// `default` gives them their zero value (an `option` field is `None` either way).
fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}
