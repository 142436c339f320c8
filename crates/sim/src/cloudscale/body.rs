//! Request bodies: JSON objects read field by field with Django REST framework's validation
//! messages. Every getter records its error and returns a placeholder, so a handler reads all
//! fields, calls [`Fields::finish`] (400 with every field error at once, like DRF) and only then
//! uses the values.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::ops::RangeInclusive;

use serde_json::{Map, Value};

use super::error::ApiError;
use super::model::Tags;
use super::net::Cidr;

/// The fields of one request body.
pub(crate) struct Fields {
    map: Map<String, Value>,
    errors: BTreeMap<String, String>,
}

/// DRF's name of a JSON type, for "expected ... but got type" messages.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

impl Fields {
    /// Parses a body: empty means no fields; malformed JSON and non-objects are 400.
    pub(crate) fn parse(body: &[u8]) -> Result<Fields, ApiError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Fields::from_map(Map::new()));
        }
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::detail(400, format!("JSON parse error - {e}")))?;
        match value {
            Value::Object(map) => Ok(Fields::from_map(map)),
            other => Err(ApiError::field(
                "non_field_errors",
                format!(
                    "Invalid data. Expected a dictionary, but got {}.",
                    type_name(&other)
                ),
            )),
        }
    }

    /// Fields of an already parsed object (nested blocks such as a monitor's `http`).
    pub(crate) fn from_map(map: Map<String, Value>) -> Fields {
        Fields {
            map,
            errors: BTreeMap::new(),
        }
    }

    /// Records an error for `key` (the first one per key wins).
    pub(crate) fn fail(&mut self, key: &str, message: impl Into<String>) {
        self.errors
            .entry(key.to_string())
            .or_insert_with(|| message.into());
    }

    /// Whether the body has `key` (also when null).
    pub(crate) fn has(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    /// The raw value of `key`.
    pub(crate) fn raw(&self, key: &str) -> Option<&Value> {
        self.map.get(key)
    }

    /// Whether every field read so far was valid.
    pub(crate) fn ok(&self) -> bool {
        self.errors.is_empty()
    }

    /// The recorded errors, by field.
    pub(crate) fn into_errors(self) -> BTreeMap<String, String> {
        self.errors
    }

    /// 400 with every recorded error, or Ok.
    pub(crate) fn finish(self) -> Result<(), ApiError> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(ApiError::fields(self.errors))
        }
    }

    /// A required field's value, or None after recording "required" / "may not be null".
    fn present(&mut self, key: &str) -> Option<Value> {
        match self.map.get(key) {
            None => {
                self.fail(key, "This field is required.");
                None
            }
            Some(Value::Null) => {
                self.fail(key, "This field may not be null.");
                None
            }
            Some(v) => Some(v.clone()),
        }
    }

    /// A required non-blank string.
    pub(crate) fn string(&mut self, key: &str) -> String {
        let Some(v) = self.present(key) else {
            return String::new();
        };
        match v {
            Value::String(s) if s.trim().is_empty() => {
                self.fail(key, "This field may not be blank.");
                String::new()
            }
            Value::String(s) => s,
            _ => {
                self.fail(key, "Not a valid string.");
                String::new()
            }
        }
    }

    /// A non-blank string if the field is present.
    pub(crate) fn opt_string(&mut self, key: &str) -> Option<String> {
        self.has(key).then(|| self.string(key))
    }

    /// A string, null or absent (None for both).
    pub(crate) fn nullable_string(&mut self, key: &str) -> Option<String> {
        match self.map.get(key) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                self.fail(key, "Not a valid string.");
                None
            }
        }
    }

    /// One of `choices`; `default` when absent (required when there is none).
    pub(crate) fn choice(&mut self, key: &str, choices: &[&str], default: Option<&str>) -> String {
        if let (false, Some(d)) = (self.has(key), default) {
            return d.to_string();
        }
        let Some(v) = self.present(key) else {
            return String::new();
        };
        match v.as_str() {
            Some(s) if choices.contains(&s) => s.to_string(),
            Some(s) => {
                self.fail(key, format!("\"{s}\" is not a valid choice."));
                String::new()
            }
            None => {
                self.fail(key, format!("\"{v}\" is not a valid choice."));
                String::new()
            }
        }
    }

    /// An integer in `range` (DRF also accepts integer strings); `default` when absent
    /// (required when there is none).
    pub(crate) fn int(
        &mut self,
        key: &str,
        range: RangeInclusive<i64>,
        default: Option<i64>,
    ) -> i64 {
        if let (false, Some(d)) = (self.has(key), default) {
            return d;
        }
        let Some(v) = self.present(key) else {
            return 0;
        };
        let n = match &v {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        };
        match n {
            Some(n) if n < *range.start() => {
                self.fail(
                    key,
                    format!(
                        "Ensure this value is greater than or equal to {}.",
                        range.start()
                    ),
                );
                0
            }
            Some(n) if n > *range.end() => {
                self.fail(
                    key,
                    format!(
                        "Ensure this value is less than or equal to {}.",
                        range.end()
                    ),
                );
                0
            }
            Some(n) => n,
            None => {
                self.fail(key, "A valid integer is required.");
                0
            }
        }
    }

    /// An integer in `range` if the field is present.
    pub(crate) fn opt_int(&mut self, key: &str, range: RangeInclusive<i64>) -> Option<i64> {
        self.has(key).then(|| self.int(key, range, None))
    }

    /// A boolean; `default` when absent.
    pub(crate) fn bool(&mut self, key: &str, default: bool) -> bool {
        if !self.has(key) {
            return default;
        }
        match self.present(key) {
            Some(Value::Bool(b)) => b,
            Some(_) => {
                self.fail(key, "Must be a valid boolean.");
                default
            }
            None => default,
        }
    }

    /// A boolean if the field is present.
    pub(crate) fn opt_bool(&mut self, key: &str) -> Option<bool> {
        self.has(key).then(|| self.bool(key, false))
    }

    /// A required IP address.
    pub(crate) fn ip(&mut self, key: &str) -> Option<IpAddr> {
        let s = self.string(key);
        if s.is_empty() {
            return None;
        }
        let parsed = s.parse().ok();
        if parsed.is_none() {
            self.fail(key, "Enter a valid IPv4 or IPv6 address.");
        }
        parsed
    }

    /// A list of strings if the field is present.
    pub(crate) fn opt_strings(&mut self, key: &str) -> Option<Vec<String>> {
        let v = self.raw(key)?.clone();
        let Value::Array(items) = v else {
            let msg = if v.is_null() {
                "This field may not be null.".to_string()
            } else {
                format!(
                    "Expected a list of items but got type \"{}\".",
                    type_name(&v)
                )
            };
            self.fail(key, msg);
            return Some(Vec::new());
        };
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Value::String(s) => out.push(s),
                _ => {
                    self.fail(key, "Not a valid string.");
                    break;
                }
            }
        }
        Some(out)
    }

    /// A list of CIDR strings if the field is present (each must parse).
    pub(crate) fn opt_cidrs(&mut self, key: &str) -> Option<Vec<String>> {
        let list = self.opt_strings(key)?;
        if let Some(bad) = list.iter().find(|c| Cidr::parse(c).is_err()) {
            self.fail(key, format!("\"{bad}\" is not a valid CIDR."));
        }
        Some(list)
    }

    /// The `tags` field if present: an object of string values.
    pub(crate) fn opt_tags(&mut self) -> Option<Tags> {
        let v = self.raw("tags")?.clone();
        let Value::Object(map) = v else {
            self.fail(
                "tags",
                format!(
                    "Expected a dictionary of items but got type \"{}\".",
                    type_name(&v)
                ),
            );
            return Some(Tags::new());
        };
        let mut tags = Tags::new();
        for (k, v) in map {
            match v {
                Value::String(s) => {
                    tags.insert(k, s);
                }
                _ => {
                    self.fail("tags", format!("Tag \"{k}\": Not a valid string."));
                }
            }
        }
        Some(tags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(json: &str) -> Fields {
        Fields::parse(json.as_bytes()).expect("test body is an object")
    }

    #[test]
    fn required_blank_and_choices() {
        let mut f = fields(r#"{"name": " ", "algorithm": "foo", "port": "80", "big": 70000}"#);
        assert_eq!(f.string("name"), "");
        assert_eq!(f.choice("algorithm", &["round_robin"], None), "");
        assert_eq!(f.int("port", 1..=65535, None), 80);
        assert_eq!(f.int("big", 1..=65535, None), 0);
        assert_eq!(f.string("missing"), "");
        let errors = f.into_errors();
        assert_eq!(errors["name"], "This field may not be blank.");
        assert_eq!(errors["algorithm"], "\"foo\" is not a valid choice.");
        assert_eq!(
            errors["big"],
            "Ensure this value is less than or equal to 65535."
        );
        assert_eq!(errors["missing"], "This field is required.");
    }

    #[test]
    fn malformed_and_non_object_bodies() {
        let e = Fields::parse(b"{").err().expect("malformed");
        assert!(e.body["detail"].starts_with("JSON parse error - "));
        let e = Fields::parse(b"[]").err().expect("a list");
        assert_eq!(
            e.body["non_field_errors"],
            "Invalid data. Expected a dictionary, but got list."
        );
        assert!(Fields::parse(b"").is_ok());
    }
}
