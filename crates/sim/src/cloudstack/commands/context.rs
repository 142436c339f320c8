//! What every command handler works with: the [`Ctx`] of one request (the state, its
//! arguments, the time) and the helpers all handlers share (references, paging, CIDR lists). A
//! leaf: the handlers and the command table name it, and it names none of them.

use std::time::Instant;

use serde_json::{Map, Value};

use super::super::error::CsError;
use super::super::model::{Kind, Scope, State};
use super::super::params::{Args, Page};

/// What a command handler works with.
pub(crate) struct Ctx<'a> {
    pub state: &'a mut State,
    pub args: Args<'a>,
    pub now: Instant,
}

/// How a UUID parameter resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Ref {
    /// Not given.
    Absent,
    /// A live entity.
    Live(String),
    /// An entity that was removed: lists answer empty, as CloudStack resolves removed UUIDs.
    Removed,
}

impl Ctx<'_> {
    /// The UUID parameter `name` naming an entity of `kind`; an unknown one is 431.
    pub(crate) fn reference(&self, name: &str, kind: Kind) -> Result<Ref, CsError> {
        let Some(id) = self.args.opt(name) else {
            return Ok(Ref::Absent);
        };
        if self.state.exists(kind, id) {
            Ok(Ref::Live(id.to_string()))
        } else if self.state.removed.get(id) == Some(&kind) {
            Ok(Ref::Removed)
        } else {
            Err(CsError::unknown_id(name, id))
        }
    }

    /// An optional UUID parameter that must name a live entity.
    pub(crate) fn opt_live(&self, name: &str, kind: Kind) -> Result<Option<String>, CsError> {
        match self.reference(name, kind)? {
            Ref::Absent => Ok(None),
            Ref::Live(id) => Ok(Some(id)),
            Ref::Removed => Err(CsError::unknown_id(name, self.args.opt(name).unwrap_or(""))),
        }
    }

    /// A required UUID parameter that must name a live entity.
    pub(crate) fn live(&self, name: &str, kind: Kind) -> Result<String, CsError> {
        self.args.required(name)?;
        self.opt_live(name, kind)?
            .ok_or_else(|| CsError::missing(self.args.command, name))
    }

    /// The project scope of a list, as CloudStack's `buildACLSearchParameters` sets it for a
    /// caller that owns everything here: without `projectid` the account's own entities (a
    /// user looking up an `id` too; a root admin's `id` lookup sees every owner);
    /// `projectid=<uuid>` that project's; `projectid=-1` every project's, plus the account's own
    /// with `listall=true`.
    pub(crate) fn scope(&self) -> Result<Scope, CsError> {
        match self.args.opt("projectid") {
            None if self.state.settings.admin && self.args.opt("id").is_some() => Ok(Scope::Any),
            None => Ok(Scope::Own),
            Some("-1") if self.args.flag("listall", false) => Ok(Scope::Any),
            Some("-1") => Ok(Scope::AllProjects),
            Some(_) => match self.opt_live("projectid", Kind::Project)? {
                Some(id) => Ok(Scope::Project(id)),
                None => Ok(Scope::Own),
            },
        }
    }

    /// The requested page; checks `page` and `pagesize`.
    pub(crate) fn page(&self) -> Result<Page, CsError> {
        Page::from_args(&self.args, self.state.settings.page_size_limit)
    }
}

/// A list answer: `count` (the number of matches, not the page's length) unless zero, and the
/// page's items under `key` unless there are none — so an empty list is `{}`.
pub(crate) fn list_body(key: &str, total: usize, items: Vec<Value>) -> Value {
    let mut map = Map::new();
    if total > 0 {
        map.insert("count".into(), total.into());
    }
    if !items.is_empty() {
        map.insert(key.into(), Value::Array(items));
    }
    Value::Object(map)
}

/// Renders the `page` of `matches` as a list answer.
pub(crate) fn paged<T>(
    page: Page,
    key: &str,
    matches: Vec<T>,
    render: impl FnMut(T) -> Value,
) -> Value {
    let total = matches.len();
    let items = page.apply(matches).into_iter().map(render).collect();
    list_body(key, total, items)
}

/// Case-insensitive substring match, like SQL `LIKE '%needle%'` on a case-insensitive
/// collation.
pub(crate) fn contains_ci(haystack: &str, needle: &str) -> bool {
    haystack.to_lowercase().contains(&needle.to_lowercase())
}

/// Whether `text` is an IPv4 or IPv6 CIDR (host bits allowed, as CloudStack checks syntax only).
pub(crate) fn valid_cidr(text: &str) -> bool {
    let Some((addr, prefix)) = text.split_once('/') else {
        return false;
    };
    let Ok(prefix) = prefix.parse::<u8>() else {
        return false;
    };
    match addr.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => prefix <= 32,
        Ok(std::net::IpAddr::V6(_)) => prefix <= 128,
        Err(_) => false,
    }
}

/// The `cidrlist` parameter: absent → `0.0.0.0/0`; present but empty → no CIDRs; every item
/// must be a CIDR.
pub(crate) fn cidr_list(args: &Args<'_>) -> Result<Vec<String>, CsError> {
    let Some(cidrs) = args.list("cidrlist") else {
        return Ok(vec!["0.0.0.0/0".to_string()]);
    };
    if let Some(bad) = cidrs.iter().find(|c| !valid_cidr(c)) {
        return Err(CsError::param(format!(
            "Source cidrs formatting error {bad}"
        )));
    }
    Ok(cidrs)
}
