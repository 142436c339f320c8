//! What `/metrics` exports and what PromQL reads: the metric families registered in
//! `crates/controllers/src/metrics.rs` (read from its source, as that crate's own name test
//! reads its call sites), and the metric names a PromQL expression selects.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The kind of a registered metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A counter.
    Counter,
    /// A gauge.
    Gauge,
    /// A histogram: exported as `<name>_bucket`, `<name>_sum` and `<name>_count`.
    Histogram,
}

/// The source file holding the registry (`FAMILIES`).
pub fn metrics_source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crates/controllers/src/metrics.rs")
}

/// Every family of `FAMILIES` in [`metrics_source`], by name.
pub fn exported_families() -> Result<BTreeMap<String, Kind>, String> {
    let path = metrics_source();
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    families_in(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The families of a `const FAMILIES: &[(&str, Kind, &str)] = &[ ("name", Kind::X, "help"), … ];`
/// in `text`: each tuple's kind and the string literal just before it.
pub fn families_in(text: &str) -> Result<BTreeMap<String, Kind>, String> {
    let start = text
        .find("const FAMILIES")
        .ok_or("no `const FAMILIES` (the registry moved? update tests/deploy/src/promql.rs)")?;
    let body = &text[start..];
    let open = body.find("= &[").ok_or("`const FAMILIES` has no `= &[`")?;
    let end = body
        .find("\n];")
        .ok_or("`const FAMILIES` has no closing `];`")?;
    let block = &body[open..end];
    let mut out = BTreeMap::new();
    for (i, _) in block.match_indices("Kind::") {
        let rest = &block[i + "Kind::".len()..];
        let kind = if rest.starts_with("Counter") {
            Kind::Counter
        } else if rest.starts_with("Gauge") {
            Kind::Gauge
        } else if rest.starts_with("Histogram") {
            Kind::Histogram
        } else {
            return Err(format!(
                "unknown kind at `Kind::{}`",
                &rest[..rest.len().min(20)]
            ));
        };
        let before = &block[..i];
        let close = before.rfind('"').ok_or("a kind without a name before it")?;
        let open = before[..close]
            .rfind('"')
            .ok_or("a kind without a name before it")?;
        let name = &before[open + 1..close];
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            return Err(format!("{name:?} before Kind:: is not a metric name"));
        }
        if out.insert(name.to_string(), kind).is_some() {
            return Err(format!("{name} is registered twice"));
        }
    }
    if out.is_empty() {
        return Err("`const FAMILIES` holds no family".into());
    }
    Ok(out)
}

/// Whether `name` is a series `/metrics` renders: a family, or a histogram's `_bucket`, `_sum`
/// or `_count`.
pub fn is_exported(families: &BTreeMap<String, Kind>, name: &str) -> bool {
    families.contains_key(name)
        || ["_bucket", "_sum", "_count"].iter().any(|suffix| {
            name.strip_suffix(suffix)
                .is_some_and(|base| families.get(base) == Some(&Kind::Histogram))
        })
}

/// Words of PromQL that are not metric names when no `(` follows them.
const KEYWORDS: &[&str] = &[
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "inf",
    "nan",
];

/// Keywords whose parenthesised list holds label names, not expressions.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// One vector selector of a PromQL expression: the metric name and the text of its label
/// matchers (between `{` and `}`, empty without).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// The metric name.
    pub name: String,
    /// The label matchers, as written (`job="wasm-ccm",result!="ok"`).
    pub matchers: String,
}

/// The metric names a PromQL expression selects (see [`selectors`]).
pub fn metric_names(expr: &str) -> Result<BTreeSet<String>, String> {
    Ok(selectors(expr)?.into_iter().map(|s| s.name).collect())
}

/// The vector selectors of a PromQL expression, in order. String literals, ranges and
/// subqueries (`[…]`), label lists (`by (…)`, `on (…)`, `group_left (…)`, …), numbers and
/// durations, function names (an identifier before `(`), keywords and Grafana variables
/// (`$__rate_interval`, `${datasource}`) are skipped; every other identifier is a metric name,
/// with the matchers in braces after it. A selector without a name (`{__name__="x"}`) is an
/// error: its metric could not be checked.
pub fn selectors(expr: &str) -> Result<Vec<Selector>, String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    // Whether the token before the current position was a label-list keyword.
    let mut after_label_keyword = false;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let label_keyword = std::mem::take(&mut after_label_keyword);
        match c {
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '"' | '\'' | '`' => i = skip_string(&chars, i)?,
            '{' => {
                return Err(format!(
                    "{expr:?} has a selector without a metric name at {i}; name the metric so it can be checked"
                ));
            }
            '[' => i = skip_group(&chars, i, '[', ']')?,
            '(' if label_keyword => i = skip_group(&chars, i, '(', ')')?,
            '$' => {
                i += 1;
                if chars.get(i) == Some(&'{') {
                    i = skip_group(&chars, i, '{', '}')?;
                } else {
                    while i < chars.len() && is_ident(chars[i]) {
                        i += 1;
                    }
                }
            }
            c if c.is_ascii_digit()
                || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) =>
            {
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '.' | '_'))
                {
                    i += 1;
                }
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let start = i;
                while i < chars.len() && is_ident(chars[i]) {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let mut next = i;
                while next < chars.len() && chars[next].is_whitespace() {
                    next += 1;
                }
                let lower = word.to_ascii_lowercase();
                // `sum by (le) (…)`: an aggregation whose grouping comes first.
                let following: String = chars[next..]
                    .iter()
                    .take_while(|c| is_ident(**c))
                    .collect::<String>()
                    .to_ascii_lowercase();
                let grouped_aggregation = following == "by" || following == "without";
                if LABEL_LISTS.contains(&lower.as_str()) {
                    after_label_keyword = true;
                } else if chars.get(next) == Some(&'(')
                    || grouped_aggregation
                    || KEYWORDS.contains(&lower.as_str())
                {
                    // A function or aggregation, or a keyword.
                } else {
                    let mut matchers = String::new();
                    if chars.get(next) == Some(&'{') {
                        let end = skip_group(&chars, next, '{', '}')?;
                        matchers = chars[next + 1..end - 1].iter().collect();
                        i = end;
                    }
                    if matchers.contains("__name__") {
                        return Err(format!(
                            "{expr:?} matches __name__; name the metric instead so it can be checked"
                        ));
                    }
                    found.push(Selector {
                        name: word,
                        matchers,
                    });
                }
            }
            _ => i += 1,
        }
    }
    Ok(found)
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// The index after the string literal starting at `start`.
fn skip_string(chars: &[char], start: usize) -> Result<usize, String> {
    let quote = chars[start];
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' if quote != '`' => i += 2,
            c if c == quote => return Ok(i + 1),
            _ => i += 1,
        }
    }
    Err(format!("unterminated string starting at {start}"))
}

/// The index after the group opened by `open` at `start`, strings inside skipped.
fn skip_group(chars: &[char], start: usize, open: char, close: char) -> Result<usize, String> {
    let mut depth = 0usize;
    let mut i = start;
    while i < chars.len() {
        match chars[i] {
            '"' | '\'' | '`' => {
                i = skip_string(chars, i)?;
                continue;
            }
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return Ok(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    Err(format!("`{open}` at {start} is never closed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(expr: &str) -> Vec<String> {
        metric_names(expr).unwrap().into_iter().collect()
    }

    #[test]
    fn metric_names_skip_functions_labels_ranges_and_keywords() {
        let expr = r#"
            histogram_quantile(0.99, sum by (le, function) (rate(a_bucket{job="x",re=~"b{|c"}[5m])))
            / on (job) group_left (driver) b offset 30m
            and c unless absent(d == 1) or sum(e) without (pod) > bool 0.5
            # f is a comment
        "#;
        assert_eq!(names(expr), ["a_bucket", "b", "c", "d", "e"]);
    }

    #[test]
    fn metric_names_skip_grafana_variables_strings_and_subqueries() {
        let expr = r#"label_replace(max_over_time(g{l="$var"}[$__rate_interval:1m]), "dst", "$1", "src", "(.*)") * ${factor} + Inf"#;
        assert_eq!(names(expr), ["g"]);
        assert_eq!(names("sum(x) by (le)"), ["x"]);
        assert_eq!(names("topk(5, y)"), ["y"]);
    }

    #[test]
    fn a_selector_by_name_is_refused() {
        assert!(metric_names(r#"{__name__="x"}"#).is_err());
        assert!(metric_names(r#"rate({__name__=~"wasm_ccm_.*"}[5m])"#).is_err());
        assert!(
            metric_names("sum(x").is_ok(),
            "an open paren is not a group here"
        );
        assert!(metric_names("x{a=\"b\"").is_err());
        assert!(metric_names(r#"x{__name__="y"}"#).is_err());
    }

    #[test]
    fn selectors_carry_their_matchers() {
        let found = selectors(r#"a{job="j", l=~"x}"} / ignoring(l) b"#).unwrap();
        assert_eq!(
            found,
            [
                Selector {
                    name: "a".into(),
                    matchers: r#"job="j", l=~"x}""#.into()
                },
                Selector {
                    name: "b".into(),
                    matchers: String::new()
                }
            ]
        );
    }

    #[test]
    fn families_are_read_from_a_registry_source() {
        let text = r#"
const CALL_BUCKETS: &[f64] = &[0.1];
const FAMILIES: &[(&str, Kind, &str)] = &[
    (
        "a_total",
        Kind::Counter,
        "Help with \"quotes\" and Kind:: words.",
    ),
    ("b_seconds", Kind::Histogram(CALL_BUCKETS), "Help."),
    ("c", Kind::Gauge, "Help."),
];
"#;
        let found = families_in(text);
        // The help text of a_total names `Kind::` too: a scan that trips over it must fail
        // loudly, not invent a family.
        assert!(found.is_err(), "{found:?}");
        let text = text.replace(" and Kind:: words", "");
        let found = families_in(&text).unwrap();
        assert_eq!(found.len(), 3);
        assert_eq!(found["b_seconds"], Kind::Histogram);
        assert!(is_exported(&found, "b_seconds_bucket"));
        assert!(is_exported(&found, "b_seconds_count"));
        assert!(!is_exported(&found, "a_total_bucket"));
        assert!(!is_exported(&found, "a"));
    }
}
