//! The query string of an API request: tag filters on lists, and nothing else.
//!
//! Sources for the form:
//! - cloudscale-go-sdk `tags.go` `WithTagFilter`: one `tag:<key>=<value>` parameter per tag
//!   (`tags_test.go`: `?tag%3Aa=b`, and `?tag%3Aa=` for an empty value).
//! - cloudscale-sdk 0.7.0 (Python) `CloudscaleBase.get_all(filter_tag=…)` and `http.py`
//!   `get_resources`: `--filter-tag key=value` sends `?tag%3Akey=value`, `--filter-tag key`
//!   sends the bare `?tag:key`.
//! - cloudscale-go-sdk `test/integration/tags_integration_test.go` (`TestIntegrationTags_*`,
//!   run against the real API): `tag:<key>=<value>` matches only that value, and an empty value
//!   (`tag:<key>=`, the SDK's "key only" filter) matches every value of the key.
//!
//! Stricter than what is documented (the simulator's choice, so no client relies on a filter the
//! simulator does not model): several tag filters must all match (the SDK sends one parameter
//! per map entry, which reads as "and"), a `tag:` without a key is refused, any other parameter
//! is refused, and so is a tag filter on a request that is not a list.

use super::error::ApiError;
use super::model::Tags;

/// What a list request asks for: the resources whose tags match every filter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ListFilter {
    /// `(key, value)`; `None` means "has the key, with any value".
    tags: Vec<(String, Option<String>)>,
}

impl ListFilter {
    /// Whether the request had no filter at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.tags.is_empty()
    }

    /// Whether `tags` satisfy every filter.
    pub(crate) fn matches(&self, tags: &Tags) -> bool {
        self.tags.iter().all(|(key, value)| match value {
            None => tags.contains_key(key),
            Some(v) => tags.get(key) == Some(v),
        })
    }
}

/// Parses a raw query (without `?`). Errors are 400 with the API's flat `detail` shape and say
/// what the simulator accepts.
pub(crate) fn parse(query: &str) -> Result<ListFilter, ApiError> {
    let mut filter = ListFilter::default();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (raw_key, value) = match pair.split_once('=') {
            Some((k, v)) => (decode(k), Some(decode(v))),
            None => (decode(pair), None),
        };
        let Some(key) = raw_key.strip_prefix("tag:") else {
            return Err(ApiError::detail(
                400,
                format!(
                    "Unsupported query parameter \"{raw_key}\": lists accept only tag filters \
                     (tag:<key>=<value>, or tag:<key> for any value)."
                ),
            ));
        };
        if key.is_empty() {
            return Err(ApiError::detail(
                400,
                "Tag filter without a key: use tag:<key>=<value> or tag:<key>.",
            ));
        }
        // `tag:key` and `tag:key=` both mean "has the key" (see the module doc).
        let value = value.filter(|v| !v.is_empty());
        filter.tags.push((key.to_string(), value));
    }
    Ok(filter)
}

/// Decodes `+` and `%XX` as `application/x-www-form-urlencoded` (what `urlencode` and Go's
/// `url.Values.Encode` produce); an invalid escape stays as it is.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    (Some(h), Some(l)) => {
                        // Two hex digits are one byte; both are below 16.
                        out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> Tags {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    #[test]
    fn the_clients_forms_parse() {
        // Python SDK: `?tag%3Aproject=apollo` and the bare `?tag:project`; Go SDK: `?tag%3Aa=`.
        let f = parse("tag%3Aproject=apollo").unwrap();
        assert!(f.matches(&tags(&[("project", "apollo")])));
        assert!(!f.matches(&tags(&[("project", "gemini")])));
        assert!(!f.matches(&tags(&[])));
        for presence in ["tag:project", "tag%3Aproject="] {
            let f = parse(presence).unwrap();
            assert!(f.matches(&tags(&[("project", "gemini")])), "{presence}");
            assert!(f.matches(&tags(&[("project", "")])), "{presence}");
            assert!(!f.matches(&tags(&[("other", "x")])), "{presence}");
        }
    }

    #[test]
    fn filters_combine_with_and_and_values_decode() {
        let f = parse("tag%3Aa=b&tag%3Ac=d+e%2Ff").unwrap();
        assert!(f.matches(&tags(&[("a", "b"), ("c", "d e/f")])));
        assert!(!f.matches(&tags(&[("a", "b")])));
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn other_parameters_and_empty_keys_are_refused() {
        for bad in ["name=x", "tag:=x", "tag%3A", "format=json&tag:a"] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.status, 400, "{bad}");
        }
        // A broken escape is kept literally, not dropped.
        assert_eq!(decode("a%zz%4"), "a%zz%4");
    }
}
