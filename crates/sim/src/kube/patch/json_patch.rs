//! RFC 6902 JSON Patch with RFC 6901 pointers.

use serde_json::Value;

use super::PatchError;

/// Applies a JSON Patch (an array of operations) in order; on any error `target` may be
/// partially patched, so callers patch a copy.
pub fn json_patch(target: &mut Value, ops: &Value) -> Result<(), PatchError> {
    let ops = ops
        .as_array()
        .ok_or_else(|| PatchError::Malformed("a JSON patch must be an array".into()))?;
    for op in ops {
        apply_op(target, op)?;
    }
    Ok(())
}

fn field<'a>(op: &'a Value, name: &str) -> Result<&'a str, PatchError> {
    op.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| PatchError::Malformed(format!("operation missing {name:?} string: {op}")))
}

fn apply_op(target: &mut Value, op: &Value) -> Result<(), PatchError> {
    let kind = field(op, "op")?;
    let path = parse_pointer(field(op, "path")?)?;
    let value = || {
        op.get("value")
            .cloned()
            .ok_or_else(|| PatchError::Malformed(format!("operation missing \"value\": {op}")))
    };
    match kind {
        "add" => add(target, &path, value()?),
        "remove" => remove(target, &path).map(drop),
        "replace" => {
            let slot = get_mut(target, &path).ok_or_else(|| missing("replace", &path))?;
            *slot = value()?;
            Ok(())
        }
        "move" => {
            let from = parse_pointer(field(op, "from")?)?;
            if path.len() > from.len() && path[..from.len()] == from[..] {
                return Err(PatchError::Unapplicable(
                    "move operation cannot move a value into one of its children".into(),
                ));
            }
            let v = remove(target, &from)?;
            add(target, &path, v)
        }
        "copy" => {
            let from = parse_pointer(field(op, "from")?)?;
            let v = get_mut(target, &from)
                .map(|v| v.clone())
                .ok_or_else(|| missing("copy from", &from))?;
            add(target, &path, v)
        }
        "test" => {
            let want = value()?;
            match get_mut(target, &path) {
                Some(got) if *got == want => Ok(()),
                _ => Err(PatchError::Unapplicable(format!(
                    "testing value {} failed: test failed",
                    render(&path)
                ))),
            }
        }
        other => Err(PatchError::Malformed(format!(
            "unexpected kind of operation: {other:?}"
        ))),
    }
}

fn render(path: &[String]) -> String {
    path.iter()
        .map(|s| format!("/{}", s.replace('~', "~0").replace('/', "~1")))
        .collect()
}

fn missing(what: &str, path: &[String]) -> PatchError {
    PatchError::Unapplicable(format!(
        "{what} operation does not apply: doc is missing path: \"{}\": missing value",
        render(path)
    ))
}

/// Splits an RFC 6901 pointer into unescaped reference tokens.
fn parse_pointer(p: &str) -> Result<Vec<String>, PatchError> {
    if p.is_empty() {
        return Ok(Vec::new());
    }
    let rest = p
        .strip_prefix('/')
        .ok_or_else(|| PatchError::Malformed(format!("JSON pointer must start with '/': {p:?}")))?;
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn index(token: &str, len: usize, allow_end: bool) -> Option<usize> {
    if token.len() > 1 && token.starts_with('0') {
        return None;
    }
    let i: usize = token.parse().ok()?;
    (i < len || (allow_end && i == len)).then_some(i)
}

fn get_mut<'a>(target: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    let mut cur = target;
    for token in path {
        cur = match cur {
            Value::Object(m) => m.get_mut(token)?,
            Value::Array(a) => {
                let i = index(token, a.len(), false)?;
                a.get_mut(i)?
            }
            _ => return None,
        };
    }
    Some(cur)
}

fn add(target: &mut Value, path: &[String], value: Value) -> Result<(), PatchError> {
    let Some((last, parent_path)) = path.split_last() else {
        *target = value;
        return Ok(());
    };
    let parent = get_mut(target, parent_path).ok_or_else(|| missing("add", path))?;
    match parent {
        Value::Object(m) => {
            m.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(a) => {
            let i = if last == "-" {
                a.len()
            } else {
                index(last, a.len(), true).ok_or_else(|| missing("add", path))?
            };
            a.insert(i, value);
            Ok(())
        }
        _ => Err(missing("add", path)),
    }
}

fn remove(target: &mut Value, path: &[String]) -> Result<Value, PatchError> {
    let (last, parent_path) = path
        .split_last()
        .ok_or_else(|| PatchError::Unapplicable("cannot remove the whole document".into()))?;
    let parent = get_mut(target, parent_path).ok_or_else(|| missing("remove", path))?;
    match parent {
        Value::Object(m) => m.remove(last).ok_or_else(|| missing("remove", path)),
        Value::Array(a) => {
            let i = index(last, a.len(), false).ok_or_else(|| missing("remove", path))?;
            Ok(a.remove(i))
        }
        _ => Err(missing("remove", path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(doc: Value, ops: Value) -> Result<Value, PatchError> {
        let mut d = doc;
        json_patch(&mut d, &ops).map(|()| d)
    }

    #[test]
    fn operations() {
        let doc =
            json!({"metadata": {"finalizers": ["a"], "labels": {"x/y": "1"}}, "l": [1, 2, 3]});
        let out = run(
            doc,
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": ["a"]},
                {"op": "add", "path": "/metadata/finalizers/-", "value": "b"},
                {"op": "add", "path": "/l/0", "value": 0},
                {"op": "remove", "path": "/l/3"},
                {"op": "replace", "path": "/metadata/labels/x~1y", "value": "2"},
                {"op": "copy", "from": "/l/0", "path": "/c"},
                {"op": "move", "from": "/c", "path": "/m"}
            ]),
        );
        assert_eq!(
            out,
            Ok(
                json!({"metadata": {"finalizers": ["a", "b"], "labels": {"x/y": "2"}}, "l": [0, 1, 2], "m": 0})
            )
        );
    }

    #[test]
    fn failures() {
        let doc = json!({"a": 1, "l": []});
        assert!(matches!(
            run(doc.clone(), json!([{"op": "test", "path": "/a", "value": 2}])),
            Err(PatchError::Unapplicable(m)) if m.contains("test failed")
        ));
        assert!(matches!(
            run(
                doc.clone(),
                json!([{"op": "replace", "path": "/b", "value": 2}])
            ),
            Err(PatchError::Unapplicable(_))
        ));
        assert!(matches!(
            run(doc.clone(), json!([{"op": "remove", "path": "/l/0"}])),
            Err(PatchError::Unapplicable(_))
        ));
        assert!(matches!(
            run(doc.clone(), json!([{"op": "frobnicate", "path": "/a"}])),
            Err(PatchError::Malformed(_))
        ));
        assert!(matches!(
            run(doc, json!({"op": "add"})),
            Err(PatchError::Malformed(_))
        ));
    }
}
