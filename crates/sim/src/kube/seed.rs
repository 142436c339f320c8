//! Loading seed objects from YAML or JSON text: one object, a `List`, or several YAML documents.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

/// Why seed text could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A document is not valid YAML/JSON.
    #[error("document {index}: {message}")]
    Parse {
        /// 1-based document number.
        index: usize,
        /// The parser's message.
        message: String,
    },
    /// A document is not an object with `apiVersion`, `kind` and `metadata.name`.
    #[error("document {index}: {message}")]
    Shape {
        /// 1-based document number.
        index: usize,
        /// What is wrong.
        message: String,
    },
}

/// Reads and parses a seed file.
pub fn load_file(path: &Path) -> Result<Vec<Value>, SeedError> {
    let text = std::fs::read_to_string(path).map_err(|source| SeedError::Read {
        path: path.display().to_string(),
        source,
    })?;
    parse(&text)
}

/// Parses seed text: JSON or YAML, multi-document YAML separated by `---`, and `kind: List` (or
/// any `*List` with `items`) flattened. Empty documents are skipped.
///
/// A JSON document is read as JSON: the YAML reader first holds every event of the text with
/// its position, several times the size of the objects, and is slower by as much (a seed of
/// 15,000 nodes is 7 MB of JSON).
pub fn parse(text: &str) -> Result<Vec<Value>, SeedError> {
    let mut out = Vec::new();
    if let Some(value) = json_document(text) {
        add(&mut out, 1, value)?;
        return Ok(out);
    }
    for (i, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
        let index = i + 1;
        let value = Value::deserialize(doc).map_err(|e| SeedError::Parse {
            index,
            message: e.to_string(),
        })?;
        add(&mut out, index, value)?;
    }
    Ok(out)
}

/// The text as one JSON object, when it is one; `None` sends it to the YAML reader (which also
/// reads `{a: 1}`, a YAML flow mapping, and reports what is wrong with text that is neither).
fn json_document(text: &str) -> Option<Value> {
    if !text.trim_start().starts_with('{') {
        return None;
    }
    serde_json::from_str(text).ok()
}

/// Adds document `index` to `out`: nothing for an empty one, the items of a list (moved, not
/// copied), or the object itself.
fn add(out: &mut Vec<Value>, index: usize, mut value: Value) -> Result<(), SeedError> {
    if value.is_null() {
        return Ok(());
    }
    let is_list = value
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"))
        && value.get("items").is_some();
    if !is_list {
        check(index, &value)?;
        out.push(value);
        return Ok(());
    }
    let Some(Value::Array(items)) = value.get_mut("items").map(Value::take) else {
        return Err(SeedError::Shape {
            index,
            message: "`items` of a List must be a list".into(),
        });
    };
    out.reserve(items.len());
    for item in items {
        check(index, &item)?;
        out.push(item);
    }
    Ok(())
}

fn check(index: usize, obj: &Value) -> Result<(), SeedError> {
    let shape = |message: &str| SeedError::Shape {
        index,
        message: message.to_string(),
    };
    if !obj.is_object() {
        return Err(shape("not an object"));
    }
    for field in ["apiVersion", "kind"] {
        if obj
            .get(field)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(shape(&format!("missing `{field}`")));
        }
    }
    if obj
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err(shape("missing `metadata.name`"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_documents_and_lists() {
        let text = "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: a\n---\n\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: b}\n";
        let objs = parse(text).unwrap_or_default();
        assert_eq!(objs.len(), 2);
        assert_eq!(objs[1]["metadata"]["name"], "b");
        let json = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"c"}}"#;
        assert_eq!(parse(json).map(|v| v.len()).ok(), Some(1));
    }

    /// JSON is read as JSON and gives what the YAML reader gives; a YAML flow mapping, which
    /// also starts with `{`, is still read as YAML; a JSON list without a list of items is
    /// refused either way.
    #[test]
    fn json_and_flow_yaml_read_alike() {
        let json = r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"a","labels":{"x":"1"}}}]}"#;
        let as_json = parse(json).expect("JSON");
        assert!(json_document(json).is_some());
        let mut as_yaml = Vec::new();
        for doc in serde_norway::Deserializer::from_str(json) {
            let value = Value::deserialize(doc).expect("YAML");
            add(&mut as_yaml, 1, value).expect("shape");
        }
        assert_eq!(as_json, as_yaml);
        let flow = "{apiVersion: v1, kind: Node, metadata: {name: b}}";
        assert!(json_document(flow).is_none());
        assert_eq!(parse(flow).map(|v| v.len()).ok(), Some(1));
        assert!(matches!(
            parse(r#"{"apiVersion":"v1","kind":"List","items":{}}"#),
            Err(SeedError::Shape { .. })
        ));
    }

    #[test]
    fn bad_documents_are_reported() {
        assert!(matches!(
            parse("a: [1"),
            Err(SeedError::Parse { index: 1, .. })
        ));
        assert!(matches!(
            parse("apiVersion: v1\nkind: Node\n"),
            Err(SeedError::Shape { .. })
        ));
        assert!(matches!(parse("- 1\n"), Err(SeedError::Shape { .. })));
    }
}
