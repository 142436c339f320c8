//! Kubernetes label selectors in their string form (annotations and config keys that select
//! nodes, such as cloudscale's `loadbalancer-node-selector`), as `labels.Parse` reads them:
//! `k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k>n`, `k<n`, joined by
//! commas (all must match).

/// One requirement of a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    /// The label's value is an integer greater (`true`) or less (`false`) than the bound.
    Compare(String, i64, bool),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector(Vec<Requirement>);

impl Selector {
    /// Parses the string form; the error says which part is wrong.
    pub fn parse(input: &str) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for part in split_top_level(input)? {
            let part = part.trim();
            if part.is_empty() {
                return Err(format!("empty requirement in {input:?}"));
            }
            requirements.push(parse_requirement(part)?);
        }
        Ok(Self(requirements))
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &[(String, String)]) -> bool {
        let get = |k: &str| labels.iter().find(|(key, _)| key == k).map(|(_, v)| v);
        self.0.iter().all(|r| match r {
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::NotExists(k) => get(k).is_none(),
            Requirement::In(k, vs) => get(k).is_some_and(|v| vs.contains(v)),
            // As in Kubernetes: a missing label satisfies `notin` and `!=`.
            Requirement::NotIn(k, vs) => get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Compare(k, bound, greater) => get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| if *greater { v > *bound } else { v < *bound }),
        })
    }
}

/// Splits on commas that are not inside `( … )`.
fn split_top_level(input: &str) -> Result<Vec<&str>, String> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(format!("unbalanced parentheses in {input:?}"));
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced parentheses in {input:?}"));
    }
    parts.push(&input[start..]);
    Ok(parts)
}

fn parse_requirement(part: &str) -> Result<Requirement, String> {
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement::NotExists(key_of(key.trim())?));
    }
    for (op, greater) in [(">", true), ("<", false)] {
        if let Some((k, v)) = part.split_once(op) {
            let bound = v
                .trim()
                .parse::<i64>()
                .map_err(|_| format!("{part:?}: `{op}` needs an integer"))?;
            return Ok(Requirement::Compare(key_of(k.trim())?, bound, greater));
        }
    }
    for (op, negated) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((k, v)) = part.split_once(op) {
            let (key, value) = (key_of(k.trim())?, value_of(v.trim())?);
            return Ok(if negated {
                Requirement::NotIn(key, vec![value])
            } else {
                Requirement::In(key, vec![value])
            });
        }
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if let [key, rest] = words[..] {
        let rest = rest.trim_start();
        for (op, negated) in [("notin", true), ("in", false)] {
            if let Some(list) = rest.strip_prefix(op) {
                let values = set_of(list.trim())?;
                let key = key_of(key)?;
                return Ok(if negated {
                    Requirement::NotIn(key, values)
                } else {
                    Requirement::In(key, values)
                });
            }
        }
        return Err(format!(
            "{part:?}: expected `=`, `==`, `!=`, `in` or `notin`"
        ));
    }
    Ok(Requirement::Exists(key_of(part)?))
}

fn set_of(list: &str) -> Result<Vec<String>, String> {
    let inner = list
        .strip_prefix('(')
        .and_then(|l| l.strip_suffix(')'))
        .ok_or_else(|| format!("{list:?}: expected a parenthesised list such as (a,b)"))?;
    let values = inner
        .split(',')
        .map(|v| value_of(v.trim()))
        .collect::<Result<Vec<_>, _>>()?;
    if values.iter().all(String::is_empty) {
        return Err(format!("{list:?}: the set must not be empty"));
    }
    Ok(values)
}

/// A label key: an optional DNS prefix and `/`, then a name of at most 63 characters.
fn key_of(key: &str) -> Result<String, String> {
    let name = key.rsplit_once('/').map_or(key, |(_, n)| n);
    if name.is_empty() || name.len() > 63 || !key.chars().all(label_char) {
        return Err(format!("{key:?} is not a valid label key"));
    }
    Ok(key.to_string())
}

fn value_of(value: &str) -> Result<String, String> {
    if value.len() > 63 || !value.chars().all(|c| label_char(c) && c != '/') {
        return Err(format!("{value:?} is not a valid label value"));
    }
    Ok(value.to_string())
}

fn label_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn matches_like_kubernetes() {
        let l = labels(&[("role", "lb"), ("zone", "rma1"), ("tier", "2")]);
        for (sel, want) in [
            ("role=lb", true),
            ("role==lb", true),
            ("role!=lb", false),
            ("role", true),
            ("!role", false),
            ("!gpu", true),
            ("gpu!=yes", true),
            ("zone in (rma1, lpg1)", true),
            ("zone notin (rma1)", false),
            ("role=lb,zone=lpg1", false),
            ("node-role.kubernetes.io/worker", false),
            ("tier>1", true),
            ("tier<2", false),
            ("zone>1", false),
        ] {
            assert_eq!(Selector::parse(sel).unwrap().matches(&l), want, "{sel}");
        }
    }

    #[test]
    fn refuses_malformed_selectors() {
        for bad in [
            "a in b", "a in ()", "=x", "a=(b", "a,,b", "a b", "role=l b", "(a",
        ] {
            assert!(Selector::parse(bad).is_err(), "{bad}");
        }
    }
}
