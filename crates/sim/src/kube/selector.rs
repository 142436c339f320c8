//! Label and field selectors for list and watch.

use serde_json::Value;

/// One label requirement.
#[derive(Debug, Clone, PartialEq)]
enum LabelReq {
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Gt(String, i64),
    Lt(String, i64),
}

/// A parsed `labelSelector`: every requirement must hold (comma means AND).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LabelSelector(Vec<LabelReq>);

/// A parsed `fieldSelector`: field labels compared as strings (`=`, `==`, `!=`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldSelector(Vec<FieldTerm>);

/// One `label=value` or `label!=value` term of a field selector.
#[derive(Debug, Clone, PartialEq)]
struct FieldTerm {
    /// The field label as sent (`regarding.name`).
    label: String,
    /// The object paths the label reads, in order: the first that holds a non-empty value is
    /// the label's value (one path unless [`FieldSelector::alias`] gave it fallbacks).
    paths: Vec<Vec<String>>,
    equal: bool,
    value: String,
}

/// What a list or watch selects: namespace plus both selectors.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter {
    pub namespace: Option<String>,
    /// Set when a single object is watched by its path.
    pub name: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    /// Whether `obj` is selected.
    pub(super) fn matches(&self, obj: &Value) -> bool {
        if let Some(ns) = &self.namespace
            && obj
                .get("metadata")
                .and_then(|m| m.get("namespace"))
                .and_then(Value::as_str)
                != Some(ns.as_str())
        {
            return false;
        }
        if let Some(name) = &self.name
            && obj
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Value::as_str)
                != Some(name.as_str())
        {
            return false;
        }
        self.labels.matches(obj) && self.fields.matches(obj)
    }
}

/// Splits on commas that are not inside parentheses (`a in (x,y),b`).
fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')
}

impl LabelSelector {
    /// Parses the label selector grammar of `k8s.io/apimachinery/pkg/labels`.
    pub(super) fn parse(s: &str) -> Result<LabelSelector, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector(reqs));
        }
        for part in split_top_level(s) {
            let part = part.trim();
            if let Some(key) = part.strip_prefix('!') {
                let key = key.trim();
                check_key(key)?;
                reqs.push(LabelReq::NotExists(key.to_string()));
                continue;
            }
            let key_end = part.find(|c| !is_key_char(c)).unwrap_or(part.len());
            let key = &part[..key_end];
            check_key(key)?;
            let key = key.to_string();
            let rest = part[key_end..].trim_start();
            let req = if rest.is_empty() {
                LabelReq::Exists(key)
            } else if let Some(v) = rest.strip_prefix("==").or_else(|| rest.strip_prefix('=')) {
                LabelReq::In(key, vec![v.trim().to_string()])
            } else if let Some(v) = rest.strip_prefix("!=") {
                LabelReq::NotIn(key, vec![v.trim().to_string()])
            } else if let Some(v) = rest.strip_prefix('>') {
                LabelReq::Gt(key, parse_int(v)?)
            } else if let Some(v) = rest.strip_prefix('<') {
                LabelReq::Lt(key, parse_int(v)?)
            } else if let Some(set) = rest.strip_prefix("notin") {
                LabelReq::NotIn(key, parse_set(set)?)
            } else if let Some(set) = rest.strip_prefix("in") {
                LabelReq::In(key, parse_set(set)?)
            } else {
                return Err(format!("unable to parse requirement: {part:?}"));
            };
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether the object's labels satisfy every requirement.
    pub(super) fn matches(&self, obj: &Value) -> bool {
        if self.0.is_empty() {
            return true;
        }
        let labels = obj
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object);
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|req| match req {
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
            LabelReq::In(k, vs) => get(k).is_some_and(|v| vs.iter().any(|x| x == v)),
            // `k!=v` and `notin` also select objects without the label, like the apiserver.
            LabelReq::NotIn(k, vs) => !get(k).is_some_and(|v| vs.iter().any(|x| x == v)),
            LabelReq::Gt(k, n) => get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            LabelReq::Lt(k, n) => get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        })
    }
}

fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() || !key.chars().all(is_key_char) {
        return Err(format!("invalid label key {key:?}"));
    }
    Ok(())
}

fn parse_int(v: &str) -> Result<i64, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("invalid integer value {:?}", v.trim()))
}

fn parse_set(s: &str) -> Result<Vec<String>, String> {
    let inner = s
        .trim()
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| format!("expected a parenthesised set, found {s:?}"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

impl FieldSelector {
    /// Parses `path=value`, `path==value` and `path!=value` terms joined by commas; `\,` and `\=`
    /// escape those characters in values.
    pub(super) fn parse(s: &str) -> Result<FieldSelector, String> {
        let mut terms = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector(terms));
        }
        for term in split_unescaped(s, ',') {
            let term = term.trim();
            let (path, equal, value) = if let Some((p, v)) = term.split_once("!=") {
                (p, false, v)
            } else if let Some((p, v)) = term.split_once("==") {
                (p, true, v)
            } else if let Some((p, v)) = term.split_once('=') {
                (p, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{term}'; can't understand '{term}'"
                ));
            };
            let label = path.trim().to_string();
            let path: Vec<String> = label.split('.').map(str::to_string).collect();
            if path.iter().any(String::is_empty) {
                return Err(format!("invalid field path in {term:?}"));
            }
            terms.push(FieldTerm {
                label,
                paths: vec![path],
                equal,
                value: unescape(value.trim()),
            });
        }
        Ok(FieldSelector(terms))
    }

    /// The field labels used, dotted (`metadata.name`).
    pub(super) fn labels(&self) -> Vec<String> {
        self.0.iter().map(|t| t.label.clone()).collect()
    }

    /// Makes `label` read `paths` of the stored object instead of its own path: the first path
    /// with a non-empty value gives the label's value, as a registry's `ToSelectableFields`
    /// computes it (core Events' `source` is `source.component`, else the reporting
    /// controller).
    pub(super) fn alias(&mut self, label: &str, paths: &[&[&str]]) {
        for t in self.0.iter_mut().filter(|t| t.label == label) {
            t.paths = paths
                .iter()
                .map(|p| p.iter().map(|s| s.to_string()).collect())
                .collect();
        }
    }

    /// Whether every term holds; a missing field compares as the empty string (so
    /// `spec.nodeName=` selects objects without one, as on the apiserver).
    pub(super) fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|t| {
            let got = t
                .paths
                .iter()
                .map(|path| field_value(obj, path))
                .find(|v| !v.is_empty())
                .unwrap_or_default();
            (got == t.value) == t.equal
        })
    }
}

/// The value at `path` as a field selector compares it: strings as they are, other values in
/// their JSON form, absent fields as the empty string.
fn field_value(obj: &Value, path: &[String]) -> String {
    let mut cur = Some(obj);
    for seg in path {
        cur = cur.and_then(|v| v.get(seg.as_str()));
    }
    match cur {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn split_unescaped(s: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            out.push(&s[start..i]);
            start = i + 1;
        }
    }
    out.push(&s[start..]);
    out
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(labels: Value) -> Value {
        json!({"metadata": {"name": "n1", "labels": labels}, "spec": {"type": "LoadBalancer"}})
    }

    #[test]
    fn label_operators() {
        let obj = node(json!({"zone": "a", "tier": "web", "n": "5"}));
        let ok = |s: &str| LabelSelector::parse(s).map(|sel| sel.matches(&obj));
        assert_eq!(ok("zone=a"), Ok(true));
        assert_eq!(ok("zone==a"), Ok(true));
        assert_eq!(ok("zone!=a"), Ok(false));
        assert_eq!(ok("missing!=a"), Ok(true));
        assert_eq!(ok("zone"), Ok(true));
        assert_eq!(ok("!zone"), Ok(false));
        assert_eq!(ok("!missing"), Ok(true));
        assert_eq!(ok("zone in (b, a)"), Ok(true));
        assert_eq!(ok("zone notin (a,b)"), Ok(false));
        assert_eq!(ok("zone in (a,b),tier=web"), Ok(true));
        assert_eq!(ok("zone in (a,b),tier=db"), Ok(false));
        assert_eq!(ok("n>4,n<6"), Ok(true));
        assert_eq!(ok(""), Ok(true));
        assert!(LabelSelector::parse("zone in a").is_err());
        assert!(LabelSelector::parse("=a").is_err());
    }

    #[test]
    fn field_paths() {
        let obj = node(json!({}));
        let ok = |s: &str| FieldSelector::parse(s).map(|sel| sel.matches(&obj));
        assert_eq!(ok("metadata.name=n1"), Ok(true));
        assert_eq!(ok("metadata.name!=n1"), Ok(false));
        assert_eq!(ok("spec.type==LoadBalancer,metadata.name=n1"), Ok(true));
        assert_eq!(ok("spec.nodeName="), Ok(true));
        assert!(FieldSelector::parse("nonsense").is_err());
    }

    #[test]
    fn filter_checks_namespace() {
        let f = Filter {
            namespace: Some("default".into()),
            ..Filter::default()
        };
        assert!(f.matches(&json!({"metadata": {"namespace": "default"}})));
        assert!(!f.matches(&json!({"metadata": {"namespace": "other"}})));
    }
}
