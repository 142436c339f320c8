//! The four PATCH flavours of the apiserver, applied to JSON values.

mod json_patch;
mod strategic;

use serde_json::Value;

pub use json_patch::json_patch;
pub use strategic::strategic_merge_patch;

/// A PATCH content type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PatchKind {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/strategic-merge-patch+json` (the Kubernetes subset this simulator knows).
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply). Recognised only to be refused with
    /// 415: the simulator does not model field ownership (crates/sim/README.md).
    Apply,
}

impl PatchKind {
    /// The kind for a `Content-Type` header value (parameters such as `; charset=utf-8` ignored).
    pub fn from_content_type(content_type: &str) -> Option<PatchKind> {
        let essence = content_type.split(';').next().unwrap_or("").trim();
        match essence.to_ascii_lowercase().as_str() {
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/json-patch+json" => Some(PatchKind::Json),
            "application/strategic-merge-patch+json" => Some(PatchKind::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Some(PatchKind::Apply)
            }
            _ => None,
        }
    }

    /// The `Content-Type` this kind is sent with.
    pub fn content_type(self) -> &'static str {
        match self {
            PatchKind::Merge => "application/merge-patch+json",
            PatchKind::Json => "application/json-patch+json",
            PatchKind::Strategic => "application/strategic-merge-patch+json",
            PatchKind::Apply => "application/apply-patch+yaml",
        }
    }
}

/// Why a patch could not be applied; the store maps these to 400 and 422.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatchError {
    /// The patch document itself is malformed (400 BadRequest).
    #[error("{0}")]
    Malformed(String),
    /// The patch is well-formed but cannot be applied to this object (422 Invalid).
    #[error("{0}")]
    Unapplicable(String),
}

/// RFC 7386: maps merge recursively, `null` deletes, anything else (lists too) replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(target_map) = target {
        for (k, v) in patch_map {
            if v.is_null() {
                target_map.remove(k);
            } else {
                merge_patch(target_map.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// Parses a patch body of `kind` and applies it to a copy of `current`.
pub(super) fn apply(kind: PatchKind, current: &Value, body: &[u8]) -> Result<Value, PatchError> {
    if kind == PatchKind::Apply {
        // The store refuses apply patches before they get here (415).
        return Err(PatchError::Malformed(
            "server-side apply patches are not supported by wasm-ccm-sim".into(),
        ));
    }
    let patch: Value = serde_json::from_slice(body)
        .map_err(|e| PatchError::Malformed(format!("error decoding patch: {e}")))?;
    let mut out = current.clone();
    match kind {
        PatchKind::Merge => {
            if !patch.is_object() {
                return Err(PatchError::Malformed(
                    "a merge patch must be a JSON object".into(),
                ));
            }
            merge_patch(&mut out, &patch);
        }
        PatchKind::Json => json_patch(&mut out, &patch)?,
        PatchKind::Strategic | PatchKind::Apply => strategic_merge_patch(&mut out, &patch)?,
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rfc7386_examples() {
        let mut t = json!({"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]});
        merge_patch(&mut t, &json!({"a": "z", "c": {"f": null}, "l": [3]}));
        assert_eq!(t, json!({"a": "z", "c": {"d": "e"}, "l": [3]}));
        let mut t = json!({"a": "b"});
        merge_patch(&mut t, &json!({"n": {"x": null, "y": 1}}));
        assert_eq!(t, json!({"a": "b", "n": {"y": 1}}));
    }

    #[test]
    fn content_types() {
        assert_eq!(
            PatchKind::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchKind::Merge)
        );
        assert_eq!(PatchKind::from_content_type("application/json"), None);
        for k in [
            PatchKind::Merge,
            PatchKind::Json,
            PatchKind::Strategic,
            PatchKind::Apply,
        ] {
            assert_eq!(PatchKind::from_content_type(k.content_type()), Some(k));
        }
    }

    #[test]
    fn apply_patches_are_not_applied() {
        assert!(matches!(
            apply(
                PatchKind::Apply,
                &json!({"metadata": {"name": "a"}}),
                b"metadata:\n  labels:\n    x: y\n",
            ),
            Err(PatchError::Malformed(_))
        ));
        assert!(matches!(
            apply(PatchKind::Merge, &json!({}), b"[1]"),
            Err(PatchError::Malformed(_))
        ));
    }
}
