//! Per request: where the guest put placeholders, whether each one's grant allows that place and
//! origin, and the request as it goes on the wire, with the real values (and CloudStack's
//! signature). A known placeholder anywhere else refuses the whole request; nothing is sent.

use std::hash::{Hash, Hasher};

use base64::Engine as _;
use memchr::memmem;
use url::Url;

use super::outcome::{Applied, Refusal};
use super::placeholder::{PLACEHOLDER_PREFIX, placeholder_at};
use super::tokens::TokenAsk;
use super::vault::{Table, Vault};
use crate::model::http::{Method, Request};
use crate::model::types::SecretUse;

/// Where in a request a placeholder was found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Place {
    Bearer,
    BasicUser,
    BasicPassword,
    Header(String),
    Query(String),
    Form(String),
}

impl Place {
    fn describe(&self) -> String {
        match self {
            Place::Bearer => "the Authorization header as a bearer token".into(),
            Place::BasicUser => "the user of Authorization: Basic".into(),
            Place::BasicPassword => "the password of Authorization: Basic".into(),
            Place::Header(n) => format!("header {}", crate::text::cut(n, 64)),
            Place::Query(n) => format!("query parameter {}", crate::text::cut(n, 64)),
            Place::Form(n) => format!("form field {}", crate::text::cut(n, 64)),
        }
    }

    fn allowed_by(&self, u: &SecretUse) -> bool {
        match (self, u) {
            (Place::Bearer, SecretUse::Bearer)
            | (Place::BasicUser, SecretUse::BasicUser)
            | (Place::BasicPassword, SecretUse::BasicPassword) => true,
            (Place::Header(n), SecretUse::Header(m)) => n.eq_ignore_ascii_case(m),
            (Place::Query(n) | Place::Form(n), SecretUse::Param(m)) => n == m,
            _ => false,
        }
    }
}

/// A use as an operator reads it.
fn describe_use(u: &SecretUse) -> String {
    match u {
        SecretUse::Bearer => "a bearer token".into(),
        SecretUse::Header(n) => format!("header {n}"),
        SecretUse::Param(n) => format!("parameter {n}"),
        SecretUse::BasicUser => "the Basic user".into(),
        SecretUse::BasicPassword => "the Basic password".into(),
        SecretUse::CloudstackSignature => "the key of the host's CloudStack signature".into(),
        SecretUse::Oauth2Client(s) => format!("the token endpoint {}", s.token_path),
    }
}

/// Whether `url`'s host is a loopback address or `localhost` (simulators): the only `http://`
/// origins a credential goes to without `--allow-plain-http-secrets`.
pub(crate) fn is_loopback_origin(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// The placeholder prefix's searcher, built once: every request of a driver with secrets runs it.
static PREFIX: std::sync::LazyLock<memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memmem::Finder::new(PLACEHOLDER_PREFIX.as_bytes()));

/// Whether any part of `req` contains the placeholder prefix: the one check every request of a
/// driver with secrets pays.
fn mentions_placeholder(req: &Request) -> bool {
    let finder = &*PREFIX;
    finder.find(req.url.as_bytes()).is_some()
        || finder.find(&req.body).is_some()
        || req.headers.iter().any(|(k, v)| {
            finder.find(k.as_bytes()).is_some()
                || finder.find(v.as_bytes()).is_some()
                || k.eq_ignore_ascii_case("authorization")
        })
}

/// The known placeholders in `text`.
fn known_in<'t>(table: &Table, text: &'t [u8]) -> Vec<&'t str> {
    PREFIX
        .find_iter(text)
        .filter_map(|at| placeholder_at(text, at))
        .filter(|p| table.knows(p))
        .collect()
}

/// `name=value` pairs of a query or form body, raw (not decoded), with their byte spans.
fn raw_pairs(text: &str) -> Vec<(&str, &str)> {
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect()
}

fn decode(text: &str) -> String {
    url::form_urlencoded::parse(format!("{text}=").as_bytes())
        .next()
        .map(|(k, _)| k.into_owned())
        .unwrap_or_default()
}

fn form_encode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

fn is_form(req: &Request) -> bool {
    req.headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("content-type")
            && v.trim()
                .to_ascii_lowercase()
                .starts_with("application/x-www-form-urlencoded")
    })
}

/// The user and password of an `Authorization: Basic` value.
fn basic_parts(value: &str) -> Option<(String, String)> {
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

impl Table {
    pub(crate) fn knows(&self, placeholder: &str) -> bool {
        self.entries.contains_key(placeholder) || self.tokens.is_sealed(placeholder)
    }
}

impl Vault {
    /// The request with credentials applied, `None` when it carries none of this driver's
    /// placeholders (it then goes as the driver made it), or why it is refused.
    pub(crate) fn apply(&self, req: &Request, url: &Url) -> Result<Option<Applied>, Refusal> {
        if !mentions_placeholder(req) {
            return Ok(None);
        }
        let table = self
            .table
            .read()
            .map_err(|_| Refusal::Denied("the host's secret table is unusable".into()))?;
        let mut found: Vec<(Place, String)> = Vec::new();
        let mut expected_in_url = 0usize;
        let mut expected_in_body = 0usize;

        let query = url.query().unwrap_or_default();
        for (name, value) in raw_pairs(query) {
            if table.knows(value) {
                found.push((Place::Query(decode(name)), value.to_string()));
                expected_in_url += 1;
            }
        }
        let mut basic: Option<(usize, String, String)> = None;
        for (i, (name, value)) in req.headers.iter().enumerate() {
            if !known_in(&table, name.as_bytes()).is_empty() {
                return Err(self.refuse(&table, name.as_bytes(), "a header name", url));
            }
            let authorization = name.eq_ignore_ascii_case("authorization");
            let trimmed = value.trim();
            if authorization
                && let Some((scheme, token)) = trimmed.split_once(' ')
                && scheme.eq_ignore_ascii_case("bearer")
                && table.knows(token.trim())
            {
                found.push((Place::Bearer, token.trim().to_string()));
                continue;
            }
            if authorization && let Some((user, password)) = basic_parts(trimmed) {
                let mut any = false;
                if table.knows(&user) {
                    found.push((Place::BasicUser, user.clone()));
                    any = true;
                }
                if table.knows(&password) {
                    found.push((Place::BasicPassword, password.clone()));
                    any = true;
                }
                let inside = format!("{user}:{password}");
                if known_in(&table, inside.as_bytes()).len()
                    > usize::from(table.knows(&user)) + usize::from(table.knows(&password))
                {
                    return Err(self.refuse(
                        &table,
                        inside.as_bytes(),
                        "part of Authorization: Basic",
                        url,
                    ));
                }
                if any {
                    basic = Some((i, user, password));
                }
                continue;
            }
            if table.knows(trimmed) {
                found.push((
                    Place::Header(name.to_ascii_lowercase()),
                    trimmed.to_string(),
                ));
                continue;
            }
            if !known_in(&table, value.as_bytes()).is_empty() {
                return Err(self.refuse(
                    &table,
                    value.as_bytes(),
                    &format!("part of header {}", crate::text::cut(name, 64)),
                    url,
                ));
            }
        }
        let form = is_form(req) && !req.body.is_empty();
        let body_text = std::str::from_utf8(&req.body).ok();
        if form && let Some(text) = body_text {
            for (name, value) in raw_pairs(text) {
                if table.knows(value) {
                    found.push((Place::Form(decode(name)), value.to_string()));
                    expected_in_body += 1;
                }
            }
        }
        // Every known placeholder must be one of those found in a recognised place.
        if known_in(&table, req.url.as_bytes()).len() > expected_in_url {
            return Err(self.refuse(
                &table,
                req.url.as_bytes(),
                "the URL outside a query parameter's value",
                url,
            ));
        }
        if known_in(&table, &req.body).len() > expected_in_body {
            return Err(self.refuse(
                &table,
                &req.body,
                "the body outside a form field's value",
                url,
            ));
        }
        if found.is_empty() {
            return Ok(None);
        }

        // Each placement must be granted for this origin.
        let origin = url.origin();
        let mut values: Vec<(Place, String, String)> = Vec::with_capacity(found.len());
        let mut sealed = Vec::new();
        let mut signed_grants = Vec::new();
        for (place, placeholder) in found {
            if let Some(entry) = table.entries.get(&placeholder) {
                let grant = &self.grants[entry.grant];
                let allowed = grant.uses.iter().any(|u| place.allowed_by(u));
                let reason = if grant.origin != origin {
                    Some("origin")
                } else if !allowed {
                    Some("position")
                } else if self.plain_http_refused(url) {
                    Some("plain-http")
                } else {
                    None
                };
                if let Some(reason) = reason {
                    self.misuse.count(&grant.name, reason);
                    let uses: Vec<String> = grant.uses.iter().map(describe_use).collect();
                    return Err(Refusal::Denied(format!(
                        "secret {} may go only to {} as {}; it was placed in {} for {}{}",
                        grant.name,
                        grant.origin_text,
                        uses.join(" or "),
                        place.describe(),
                        origin.ascii_serialization(),
                        if reason == "plain-http" {
                            " over plain http, which needs --allow-plain-http-secrets"
                        } else {
                            ""
                        }
                    )));
                }
                signed_grants.push(entry.grant);
                values.push((place, placeholder, entry.value.clone()));
            } else if let Some(token) = table.tokens.get(&placeholder) {
                let reason = if place != Place::Bearer {
                    Some("position")
                } else if !token.origins.contains(&origin) {
                    Some("origin")
                } else if self.plain_http_refused(url) {
                    Some("plain-http")
                } else {
                    None
                };
                if let Some(reason) = reason {
                    self.misuse.count("oauth2-token", reason);
                    return Err(Refusal::Denied(format!(
                        "a sealed OAuth2 token may go only as a bearer token to the origins its grant names; it was placed in {} for {}",
                        place.describe(),
                        origin.ascii_serialization()
                    )));
                }
                values.push((place, placeholder.clone(), token.value.clone()));
                sealed.push(placeholder);
            }
        }

        let mut wire = req.clone();
        let mut wire_url = url.clone();
        if expected_in_url > 0 {
            let q = substitute_pairs(query, &values, |p| match p {
                Place::Query(n) => Some(n),
                _ => None,
            });
            wire_url.set_query(Some(&q));
        }
        if expected_in_body > 0
            && let Some(text) = body_text
        {
            wire.body = substitute_pairs(text, &values, |p| match p {
                Place::Form(n) => Some(n),
                _ => None,
            })
            .into_bytes();
        }
        for (i, (name, value)) in wire.headers.iter_mut().enumerate() {
            if let Some((bi, user, password)) = &basic
                && *bi == i
            {
                let real = |part: &String, place: Place| {
                    values
                        .iter()
                        .find(|(p, ph, _)| *p == place && ph == part)
                        .map(|(_, _, v)| form_encode(v))
                        .unwrap_or_else(|| part.clone())
                };
                let text = format!(
                    "{}:{}",
                    real(user, Place::BasicUser),
                    real(password, Place::BasicPassword)
                );
                *value = format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(text)
                );
                continue;
            }
            let trimmed = value.trim().to_string();
            let bearer = trimmed
                .split_once(' ')
                .filter(|(s, _)| {
                    name.eq_ignore_ascii_case("authorization") && s.eq_ignore_ascii_case("bearer")
                })
                .map(|(_, t)| t.trim().to_string());
            if let Some(token) = bearer
                && let Some((_, _, real)) = values
                    .iter()
                    .find(|(p, ph, _)| *p == Place::Bearer && *ph == token)
            {
                *value = format!("Bearer {real}");
                continue;
            }
            if let Some((_, _, real)) = values.iter().find(|(p, ph, _)| {
                matches!(p, Place::Header(n) if n.eq_ignore_ascii_case(name)) && *ph == trimmed
            }) {
                *value = real.clone();
            }
        }

        // CloudStack: a request carrying a credential toward a signing grant's origin is signed.
        let signer =
            self.grants.iter().enumerate().find(|(_, g)| {
                g.origin == origin && g.uses.contains(&SecretUse::CloudstackSignature)
            });
        let mut host_values = Vec::new();
        if let Some((signer_index, _)) = signer
            && !signed_grants.is_empty()
        {
            let key = table
                .entries
                .values()
                .filter(|e| e.grant == signer_index)
                .min_by_key(|e| e.ordinal)
                .map(|e| e.value.clone())
                .ok_or_else(|| {
                    Refusal::Invalid(format!(
                        "secret {} signs requests to {} but has no value; set it in the cloud-config",
                        self.grants[signer_index].name, self.grants[signer_index].origin_text
                    ))
                })?;
            host_values.push(sign_cloudstack(&mut wire, &mut wire_url, &key)?);
        }

        // OAuth2: a request carrying a client credential is a token request, whatever it asks.
        let token = self.token_exchange(req, url, &signed_grants)?;
        wire.url = wire_url.to_string();
        Ok(Some(Applied {
            wire,
            url: wire_url,
            token,
            sealed,
            host_values,
        }))
    }

    fn plain_http_refused(&self, url: &Url) -> bool {
        url.scheme() == "http" && !self.options.allow_plain_http && !is_loopback_origin(url)
    }

    /// The refusal of a placeholder found where no grant can allow it, counted under the
    /// secret it stands for.
    fn refuse(&self, table: &Table, text: &[u8], place: &str, url: &Url) -> Refusal {
        let name = known_in(table, text)
            .first()
            .and_then(|p| table.entries.get(*p))
            .map(|e| self.grants[e.grant].name.clone())
            .unwrap_or_else(|| "oauth2-token".to_string());
        self.misuse.count(&name, "position");
        Refusal::Denied(format!(
            "secret {name} was placed in {place} for {}; a secret goes only where its declaration's uses say",
            url.origin().ascii_serialization()
        ))
    }

    /// The token request `req` is, when it carries the credential of a grant with an
    /// `oauth2-client` use: recognised by what it sends, not by where, so that no spelling of
    /// the path, method or answer format can make a token answer pass unsealed. Such a request
    /// must be a POST (RFC 6749 §3.2) to the grant's token path (compared after RFC 3986 §6.2.2
    /// normalisation); any other is refused before it leaves.
    fn token_exchange(
        &self,
        req: &Request,
        url: &Url,
        used: &[usize],
    ) -> Result<Option<TokenAsk>, Refusal> {
        let Some((grant, token)) = used
            .iter()
            .find_map(|&i| self.grants[i].token.as_ref().map(|t| (i, t)))
        else {
            return Ok(None);
        };
        let name = &self.grants[grant].name;
        if req.method != Method::Post || normalised_path(url.path()) != normalised_path(&token.path)
        {
            self.misuse.count(name, "position");
            return Err(Refusal::Denied(format!(
                "secret {name} is an OAuth2 client credential: it goes only in a POST to the token endpoint {}; this request was a {} to {}",
                token.path,
                crate::model::http::method_name(req.method),
                crate::text::cut(url.path(), 128)
            )));
        }
        // The same driver asking the same way gets the same token: the guest's request (with
        // placeholders, so no secret is hashed) is the key.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        req.url.hash(&mut h);
        req.body.hash(&mut h);
        for (k, v) in &req.headers {
            if k.eq_ignore_ascii_case("authorization") || k.eq_ignore_ascii_case("accept") {
                k.to_ascii_lowercase().hash(&mut h);
                v.hash(&mut h);
            }
        }
        Ok(Some(TokenAsk {
            grant,
            key: h.finish(),
        }))
    }
}

/// A URL path in RFC 3986 §6.2.2's normal form: percent-encoded unreserved characters decoded
/// (§6.2.2.2), other escapes' hex upper-cased (§6.2.2.1). Dot segments are already gone: the
/// `url` crate removes them when it parses.
pub(crate) fn normalised_path(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(path.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%'
            && let Some(hex) = path.get(at + 1..at + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                out.push(b as char);
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
            at += 3;
            continue;
        }
        out.push(bytes[at] as char);
        at += 1;
    }
    out
}

/// Signs a CloudStack request in place: any `signature` the driver sent is removed, the host's
/// is appended to the query (GET) or the form body (POST). Returns the signature, which the
/// guest never sees: a server that echoes the request must not hand it over.
fn sign_cloudstack(wire: &mut Request, url: &mut Url, key: &str) -> Result<String, Refusal> {
    let in_body = wire.method == Method::Post && is_form(wire);
    let raw = if in_body {
        String::from_utf8(wire.body.clone())
            .map_err(|_| Refusal::Invalid("a CloudStack form body must be UTF-8".into()))?
    } else {
        url.query().unwrap_or_default().to_string()
    };
    let kept: Vec<&str> = raw
        .split('&')
        .filter(|p| !p.is_empty())
        .filter(|p| {
            let name = p.split_once('=').map_or(*p, |(n, _)| n);
            !decode(name).eq_ignore_ascii_case("signature")
        })
        .collect();
    let unsigned = kept.join("&");
    let params: Vec<(String, String)> = url::form_urlencoded::parse(unsigned.as_bytes())
        .into_owned()
        .collect();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    super::cloudstack::check_expiry(&params, now).map_err(Refusal::Invalid)?;
    let signature = super::cloudstack::signature(&params, key.as_bytes());
    let signed = format!(
        "{unsigned}&signature={}",
        super::cloudstack::encode(&signature)
    );
    if in_body {
        wire.body = signed.into_bytes();
    } else {
        url.set_query(Some(&signed));
    }
    Ok(signature)
}

/// `text` (a query or form body) with each recognised placeholder value replaced by its real
/// value, form-encoded; every other byte as the driver wrote it.
fn substitute_pairs(
    text: &str,
    values: &[(Place, String, String)],
    kind: fn(&Place) -> Option<&String>,
) -> String {
    text.split('&')
        .map(|segment| {
            let Some((name, value)) = segment.split_once('=') else {
                return segment.to_string();
            };
            let decoded = decode(name);
            let real = values
                .iter()
                .find(|(p, ph, _)| kind(p).is_some_and(|n| *n == decoded) && ph == value);
            match real {
                Some((_, _, real)) => format!("{name}={}", form_encode(real)),
                None => segment.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("&")
}
