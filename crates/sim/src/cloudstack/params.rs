//! Request parameters: the query string merged with a form body, decoded, looked up by name
//! case-insensitively; typed accessors that fail with CloudStack's parameter errors; pagination.

use super::error::CsError;

/// A request's parameters in the order received (query first, then the form body). A name given
/// twice keeps its first value, as the management server reads `value[0]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// Parses and merges `application/x-www-form-urlencoded` texts (a query, a body).
    pub(crate) fn parse(texts: &[&str]) -> Params {
        let mut params = Params::default();
        for text in texts {
            for (k, v) in parse_form(text) {
                params.push(k, v);
            }
        }
        params
    }

    /// Adds a pair unless the name is already there (any case).
    pub(crate) fn push(&mut self, name: String, value: String) {
        if !self
            .pairs
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case(&name))
        {
            self.pairs.push((name, value));
        }
    }

    /// The value of `name` (case-insensitive), empty values included.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every pair, names as sent.
    pub(crate) fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// `application/x-www-form-urlencoded` pairs (also a URL query), decoded.
pub(crate) fn parse_form(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => (form_decode(k), form_decode(v)),
            None => (form_decode(pair), String::new()),
        })
        .collect()
}

/// Decodes `+` and `%XX` (invalid escapes stay as they are; invalid UTF-8 is replaced).
pub(crate) fn form_decode(text: &str) -> String {
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
                        // Two hex digits make one byte.
                        out.push((h * 16 + l) as u8);
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

/// The parameters of one command, with accessors whose errors name the command.
pub(crate) struct Args<'a> {
    /// The command as sent (for error texts).
    pub command: &'a str,
    pub params: &'a Params,
}

impl<'a> Args<'a> {
    /// A non-empty value; an empty one counts as absent, as CloudStack skips empty parameters.
    pub(crate) fn opt(&self, name: &str) -> Option<&'a str> {
        self.params.get(name).filter(|v| !v.is_empty())
    }

    /// A required value.
    pub(crate) fn required(&self, name: &str) -> Result<&'a str, CsError> {
        self.opt(name)
            .ok_or_else(|| CsError::missing(self.command, name))
    }

    /// A boolean: `true` in any case is true, any other value false, absent `default`.
    pub(crate) fn flag(&self, name: &str, default: bool) -> bool {
        self.opt(name)
            .map_or(default, |v| v.eq_ignore_ascii_case("true"))
    }

    /// An integer.
    pub(crate) fn int(&self, name: &str) -> Result<Option<i64>, CsError> {
        self.opt(name)
            .map(|v| {
                v.trim()
                    .parse::<i64>()
                    .map_err(|_| CsError::bad_value(self.command, name, v))
            })
            .transpose()
    }

    /// A Java `int` (`CommandType.INTEGER`: `Integer.valueOf`, so no spaces and nothing
    /// outside 32 bits).
    pub(crate) fn java_int(&self, name: &str) -> Result<Option<i64>, CsError> {
        self.opt(name)
            .map(|v| {
                v.parse::<i32>()
                    .map(i64::from)
                    .map_err(|_| CsError::bad_value(self.command, name, v))
            })
            .transpose()
    }

    /// A port number (1–65535; CloudStack's `Invalid port` check is on the value's range).
    pub(crate) fn port(&self, name: &str) -> Result<Option<u16>, CsError> {
        match self.int(name)? {
            None => Ok(None),
            Some(n) => u16::try_from(n)
                .ok()
                .filter(|p| *p > 0)
                .map(Some)
                .ok_or_else(|| CsError::param(format!("Invalid port {n} for {name}"))),
        }
    }

    /// A comma-separated list (items trimmed, empty items dropped); None when the parameter
    /// is absent, an empty list when it is present but empty.
    pub(crate) fn list(&self, name: &str) -> Option<Vec<String>> {
        self.params.get(name).map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
    }
}

impl Args<'_> {
    /// A MAP parameter such as `tags`: `tags[0].key=k&tags[0].value=v&tags[1].key=…`, in index
    /// order, as the API servlet collects `name[i].field` pairs (names any case). Each entry is
    /// (key, value); a missing `value` is None. None when no `name[i].key` was sent.
    pub(crate) fn map(&self, name: &str) -> Option<Vec<(String, Option<String>)>> {
        let prefix = format!("{}[", name.to_ascii_lowercase());
        let mut entries: std::collections::BTreeMap<u64, (Option<String>, Option<String>)> =
            std::collections::BTreeMap::new();
        for (k, v) in self.params.pairs() {
            let lower = k.to_ascii_lowercase();
            let Some(rest) = lower.strip_prefix(&prefix) else {
                continue;
            };
            let Some((index, field)) = rest.split_once("].") else {
                continue;
            };
            let Ok(index) = index.parse::<u64>() else {
                continue;
            };
            let entry = entries.entry(index).or_default();
            match field {
                "key" => entry.0 = Some(v.to_string()),
                "value" => entry.1 = Some(v.to_string()),
                _ => {}
            }
        }
        let pairs: Vec<(String, Option<String>)> = entries
            .into_values()
            .filter_map(|(k, v)| Some((k?, v)))
            .collect();
        (!pairs.is_empty()).then_some(pairs)
    }
}

/// CloudStack's `pagesize=-1`: every item on one page (`BaseListCmd.s_pageSizeUnlimited`).
const UNLIMITED: i64 = -1;

/// Which slice of a list to answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Page {
    /// Items to skip.
    pub skip: usize,
    /// Items at most.
    pub take: usize,
}

impl Page {
    /// `page` and `pagesize` checked in the order CloudStack's dispatch chain checks them
    /// (`DispatchChainFactory`: `ParamProcessWorker`, then `SpecificCmdValidationWorker`, then the
    /// command's own `getPageSize` while it runs):
    ///
    /// 1. Both are `CommandType.INTEGER` parameters of `BaseListCmd`: a value that is not a
    ///    Java `int` is 431 "Unable to execute API command <cmd> due to invalid value <v> for
    ///    parameter <name>" (`ParamProcessWorker.processParameters`, `IllegalArgumentException`).
    /// 2. `BaseListCmd.validateSpecificParameters`: `pagesize` other than -1 without `page` is
    ///    431 (cserrorcode 9999) "\"page\" parameter is required when \"pagesize\" is
    ///    specified"; `page` without `pagesize` is 431 (9999) "\"pagesize\" parameter is required
    ///    when \"page\" is specified". A list without either answers the first page of the
    ///    server's `default.page.size`.
    /// 3. `BaseListCmd.getPageSize`: a `pagesize` above `default.page.size` (`limit` here) is
    ///    `InvalidParameterValueException` (431, 4350) "Page size can't exceed max allowed page
    ///    size value: N"; `pagesize=-1` with `page` is "Can't specify page parameter when
    ///    pagesize is -1 (Unlimited)"; `pagesize=-1` alone is every item.
    ///
    /// `page` 0 or below is the first page, as `BaseListCmd.getStartIndex` reads it (it only
    /// offsets for `pageNum > 0`). Stricter than CloudStack: `pagesize` 0 or below -1 is refused
    /// (431). CloudStack passes such a value to the SQL `LIMIT` (an empty page for 0, a database
    /// error for a negative one); no client has a reason to send it.
    pub(crate) fn from_args(args: &Args<'_>, limit: usize) -> Result<Page, CsError> {
        let page = args.java_int("page")?;
        let size = args.java_int("pagesize")?;
        match (page, size) {
            (None, Some(s)) if s != UNLIMITED => {
                return Err(CsError::server_param(
                    "\"page\" parameter is required when \"pagesize\" is specified",
                ));
            }
            (Some(_), None) => {
                return Err(CsError::server_param(
                    "\"pagesize\" parameter is required when \"page\" is specified",
                ));
            }
            _ => {}
        }
        let take = match size {
            None => limit,
            Some(s) if s > limit as i64 => {
                return Err(CsError::param(format!(
                    "Page size can't exceed max allowed page size value: {limit}"
                )));
            }
            Some(UNLIMITED) if page.is_some() => {
                return Err(CsError::param(
                    "Can't specify page parameter when pagesize is -1 (Unlimited)",
                ));
            }
            Some(UNLIMITED) => usize::MAX,
            Some(s) if s < 1 => {
                return Err(CsError::param(format!(
                    "Invalid page size value {s}: give a pagesize from 1 to {limit} (or -1 for \
                     every item, without page)"
                )));
            }
            Some(s) => s as usize,
        };
        let page = page.filter(|p| *p > 0).unwrap_or(1) as usize;
        Ok(Page {
            skip: (page - 1).saturating_mul(take),
            take,
        })
    }

    /// The page's items of `all`.
    pub(crate) fn apply<T>(self, all: Vec<T>) -> Vec<T> {
        all.into_iter().skip(self.skip).take(self.take).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(params: &Params) -> Args<'_> {
        Args {
            command: "listZones",
            params,
        }
    }

    #[test]
    fn query_and_form_merge_first_wins() {
        let p = Params::parse(&["command=listZones&name=a+b", "NAME=c&id=%41%zz%"]);
        assert_eq!(p.get("name"), Some("a b"));
        assert_eq!(p.get("Id"), Some("A%zz%"));
        assert_eq!(p.pairs().count(), 3);
    }

    #[test]
    fn typed_values() {
        let p = Params::parse(&["a=1&b=x&c=&d=TRUE&e=0&l=x,+y,,&m="]);
        let a = args(&p);
        assert_eq!(a.int("a"), Ok(Some(1)));
        assert_eq!(a.int("b").map_err(|e| e.status), Err(431));
        assert_eq!(a.opt("c"), None);
        assert!(a.flag("d", false));
        assert!(a.flag("zz", true));
        assert_eq!(a.port("e").map_err(|e| e.status), Err(431));
        assert_eq!(a.list("l"), Some(vec!["x".to_string(), "y".to_string()]));
        assert_eq!(a.list("m"), Some(vec![]));
        assert_eq!(a.list("n"), None);
        assert_eq!(a.required("n").map_err(|e| e.status), Err(431));
    }

    #[test]
    fn map_parameters() {
        let p = Params::parse(&["tags%5B1%5D.key=b&TAGS[0].key=a&tags[0].value=1&tags[1].x=y"]);
        assert_eq!(
            args(&p).map("tags"),
            Some(vec![("a".into(), Some("1".into())), ("b".into(), None)])
        );
        assert_eq!(args(&p).map("other"), None);
    }

    #[test]
    fn pages() {
        let p = Params::parse(&["page=2&pagesize=3"]);
        let page = Page::from_args(&args(&p), 500).expect("page");
        assert_eq!(page.apply((0..10).collect()), vec![3, 4, 5]);
        let p = Params::parse(&["page=1&pagesize=501"]);
        let e = Page::from_args(&args(&p), 500).expect_err("too big");
        assert_eq!(
            (e.status, e.cs_code, e.text.as_str()),
            (
                431,
                4350,
                "Page size can't exceed max allowed page size value: 500"
            )
        );
        let p = Params::parse(&["pagesize=-1"]);
        assert_eq!(
            Page::from_args(&args(&p), 500).map(|p| p.take),
            Ok(usize::MAX)
        );
        let p = Params::parse(&["page=1&pagesize=-1"]);
        let e = Page::from_args(&args(&p), 500).expect_err("unlimited with page");
        assert_eq!(
            e.text,
            "Can't specify page parameter when pagesize is -1 (Unlimited)"
        );
        let p = Params::parse(&[""]);
        assert_eq!(
            Page::from_args(&args(&p), 500),
            Ok(Page { skip: 0, take: 500 })
        );
    }

    #[test]
    fn page_and_pagesize_go_together() {
        let refused = |q: &str| {
            let p = Params::parse(&[q]);
            let e = Page::from_args(&args(&p), 500).expect_err(q);
            (e.status, e.cs_code, e.text)
        };
        assert_eq!(
            refused("page=2"),
            (
                431,
                9999,
                "\"pagesize\" parameter is required when \"page\" is specified".to_string()
            )
        );
        assert_eq!(
            refused("pagesize=20"),
            (
                431,
                9999,
                "\"page\" parameter is required when \"pagesize\" is specified".to_string()
            )
        );
        // Checked before the size: a too large pagesize alone is refused for the missing page.
        assert_eq!(refused("pagesize=501").2, refused("pagesize=20").2);
        // Parsed first, as ParamProcessWorker does: not a Java int.
        assert_eq!(
            refused("page=x&pagesize=2").2,
            "Unable to execute API command listzones due to invalid value x for parameter page"
        );
        assert_eq!(refused("page=1&pagesize=4294967296").0, 431);
        assert_eq!(refused("page=1&pagesize=0").0, 431);
        assert_eq!(refused("page=1&pagesize=-2").0, 431);
        // Page 0 and below are the first page (BaseListCmd.getStartIndex).
        let p = Params::parse(&["page=0&pagesize=3"]);
        assert_eq!(
            Page::from_args(&args(&p), 500),
            Ok(Page { skip: 0, take: 3 })
        );
        let p = Params::parse(&["page=-4&pagesize=3"]);
        assert_eq!(
            Page::from_args(&args(&p), 500),
            Ok(Page { skip: 0, take: 3 })
        );
    }
}
