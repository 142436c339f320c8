//! [`Vault`]: one driver's declared credentials, their placeholders and grants, built at load
//! ([`Vault::seal`]) and rotated in place.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use url::Url;

use crate::model::types::{SecretDecl, SecretLocation, SecretUse};

use super::locate;
use super::misuse::MisuseCounters;
use super::outcome::Refusal;
use super::placeholder::mint;
use super::scrub;
use super::tokens::Tokens;

/// The operator's choices about credentials, from the driver's options.
#[derive(Debug, Clone, Default)]
pub struct SecretOptions {
    /// `--secret-origin NAME=URL`: replaces a secret's declared origin.
    pub origins: Vec<(String, String)>,
    /// `--allow-plain-http-secrets`: bearer, header, parameter and Basic credentials may go to
    /// `http://` origins that are not loopback (signatures never need it: the key does not
    /// travel).
    pub allow_plain_http: bool,
}

/// One declared secret: where it may go and how.
#[derive(Debug)]
pub(crate) struct Grant {
    pub name: String,
    pub origin: url::Origin,
    pub origin_text: String,
    pub uses: Vec<SecretUse>,
    /// For an `oauth2-client` use: the token path and where its tokens may go.
    pub token: Option<TokenGrant>,
}

/// The token endpoint of a grant and the origins of its sealed tokens.
#[derive(Debug)]
pub(crate) struct TokenGrant {
    pub path: String,
    pub origins: Vec<url::Origin>,
}

/// What a placeholder stands for.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// Index of the declared secret in [`Vault::grants`].
    pub grant: usize,
    /// The real value.
    pub value: String,
    /// Where it was found.
    pub at: SecretLocation,
    /// Which of the values at `at` it is, in file order (a rotated file pairs by it).
    pub ordinal: usize,
}

/// The table both paths read: declared values by placeholder, sealed tokens, and the scrubber
/// built from both.
pub(crate) struct Table {
    pub entries: HashMap<String, Entry>,
    pub tokens: Tokens,
    pub scrubber: Arc<scrub::Scrubber>,
}

impl Table {
    pub(super) fn rebuild_scrubber(&mut self) {
        let pairs: Vec<(&str, &str)> = self
            .entries
            .iter()
            .map(|(p, e)| (e.value.as_str(), p.as_str()))
            .chain(self.tokens.values())
            .collect();
        self.scrubber = Arc::new(scrub::Scrubber::new(pairs));
    }
}

/// A driver's credentials, held by the host (see the module doc).
pub struct Vault {
    pub(super) driver: String,
    pub(super) grants: Vec<Grant>,
    pub(super) table: RwLock<Table>,
    pub(super) options: SecretOptions,
    pub(super) misuse: MisuseCounters,
    /// Held while a token request is on the network: instances that ask at the same time wait
    /// for the first answer and are served from the cache, so a driver sends one token request
    /// per token lifetime however many instances it runs.
    pub(super) token_gate: tokio::sync::Mutex<()>,
}

/// A loaded driver's `init` input after the host took its credentials out.
pub struct Sealed {
    /// The host's table, `None` when the driver declares no secrets.
    pub vault: Option<Arc<Vault>>,
    /// The cloud config with placeholders in place of the values.
    pub config: Vec<u8>,
    /// The environment with placeholders in place of the values, and only the variables the
    /// driver may see (`crate::plain_env`).
    pub env: Vec<(String, String)>,
}

impl Vault {
    /// `Vault::seal_declared` for a driver that does not declare its plain variables (built
    /// against contract 0.2.0).
    pub fn seal(
        driver: &str,
        decls: &[SecretDecl],
        config: &[u8],
        env: &[(String, String)],
        options: &SecretOptions,
    ) -> Result<Sealed, String> {
        Self::seal_declared(driver, decls, None, config, env, options)
    }

    /// Takes the declared secrets out of `config` and `env` (already filtered to the driver's
    /// prefixes) and keeps of `env` only what the driver may see: with `plain` (its declared
    /// plain variables, [`crate::plain_env`]) an allow-list. A driver that declares no secrets
    /// gets the config unchanged. An error names the secret and says what to fix.
    pub(crate) fn seal_declared(
        driver: &str,
        decls: &[SecretDecl],
        plain: Option<&[String]>,
        config: &[u8],
        env: &[(String, String)],
        options: &SecretOptions,
    ) -> Result<Sealed, String> {
        if decls.is_empty() {
            return Ok(Sealed {
                vault: None,
                config: config.to_vec(),
                env: env
                    .iter()
                    .filter(|(k, _)| crate::plain_env::admitted(decls, plain, k))
                    .cloned()
                    .collect(),
            });
        }
        let mut grants = Vec::with_capacity(decls.len());
        for decl in decls {
            grants.push(grant(decl, config, env, options)?);
        }
        let (entries, config_spans, env_values) = collect(decls, config, env)?;
        refuse_aliases(&entries, &grants)?;
        let new_config = locate::rewrite(
            config,
            config_spans
                .iter()
                .map(|(span, p)| (span.clone(), p.as_str()))
                .collect(),
        );
        let new_env = env
            .iter()
            .enumerate()
            .filter(|(_, (k, _))| crate::plain_env::admitted(decls, plain, k))
            .map(|(i, (k, v))| {
                let v = env_values.get(&i).cloned().unwrap_or_else(|| v.clone());
                (k.clone(), v)
            })
            .collect();
        let mut table = Table {
            entries,
            tokens: Tokens::default(),
            scrubber: Arc::new(scrub::Scrubber::new([])),
        };
        table.rebuild_scrubber();
        Ok(Sealed {
            vault: Some(Arc::new(Vault {
                driver: driver.to_string(),
                grants,
                table: RwLock::new(table),
                options: options.clone(),
                misuse: MisuseCounters::default(),
                token_gate: tokio::sync::Mutex::new(()),
            })),
            config: new_config,
            env: new_env,
        })
    }

    /// Takes new values from a changed `config` and `env` (a rotated Secret): each placeholder
    /// keeps its place and now stands for the value at the same location; sealed tokens minted
    /// with the old values are dropped. The driver is not re-initialised. Refused, keeping the
    /// old values, when a location now holds a different number of values. Environment values
    /// keep theirs (`env` is read only for the config's settings).
    pub(crate) fn rotate(&self, config: &[u8], env: &[(String, String)]) -> Result<usize, String> {
        let mut table = self
            .table
            .write()
            .map_err(|_| "the secret table is poisoned".to_string())?;
        let mut by_location: HashMap<SecretLocation, Vec<String>> = HashMap::new();
        for entry in table.entries.values() {
            // The environment of a running process never changes (the kubelet does not update
            // it): environment values keep theirs.
            if matches!(entry.at, SecretLocation::Env(_)) {
                by_location
                    .entry(entry.at.clone())
                    .or_default()
                    .push(entry.value.clone());
                continue;
            }
            if !by_location.contains_key(&entry.at) {
                let found = locate::find(&entry.at, config, env)
                    .map_err(|e| format!("cannot rotate driver {}'s secrets: {e}", self.driver))?;
                by_location.insert(
                    entry.at.clone(),
                    found.iter().map(|f| f.value().to_string()).collect(),
                );
            }
        }
        for entry in table.entries.values() {
            let held = by_location.get(&entry.at).map_or(0, Vec::len);
            let at_load = table.entries.values().filter(|e| e.at == entry.at).count();
            if held != at_load {
                return Err(format!(
                    "cannot rotate driver {}'s secrets: {} now holds {held} values, it held {at_load} at load; restart to take the new layout",
                    self.driver,
                    describe(&entry.at),
                ));
            }
        }
        let mut changed = 0;
        for entry in table.entries.values_mut() {
            if let Some(value) = by_location
                .get(&entry.at)
                .and_then(|values| values.get(entry.ordinal))
                && &entry.value != value
            {
                entry.value = value.clone();
                changed += 1;
            }
        }
        if changed > 0 {
            table.tokens.clear();
            table.rebuild_scrubber();
        }
        Ok(changed)
    }

    /// The request `req` as the host sends it: `None` when it carries no placeholder of this
    /// driver, else the wire request with credentials applied (and signed); an error is the
    /// host's refusal. For tools and benchmarks: the HTTP capability does the same per request.
    pub fn wire_request(
        &self,
        req: &crate::model::http::Request,
    ) -> Result<Option<crate::model::http::Request>, String> {
        let url = Url::parse(&req.url).map_err(|e| format!("not a URL: {e}"))?;
        match self.apply(req, &url) {
            Ok(applied) => Ok(applied.map(|a| a.wire)),
            Err(Refusal::Denied(m) | Refusal::Invalid(m)) => Err(m),
        }
    }

    /// `body` with every value this vault holds (in any encoding the scanner undoes) replaced
    /// by its placeholder, as the host scrubs each response; `Ok(None)` when nothing was found,
    /// an error when the body cannot be checked (the host then refuses the response).
    pub fn scrub(&self, body: &[u8]) -> Result<Option<Vec<u8>>, scrub::Unscrubbable> {
        self.scrubber().scrub(body)
    }

    /// The placeholders of the declared values: the redactor hides them too, so a driver that
    /// quotes one (in an error, an event, a log line or an answer the host writes to
    /// Kubernetes) shows `[redacted]`, and an answer field with rules (a label value, a zone) is
    /// refused rather than written with an opaque token in it.
    pub fn placeholders(&self) -> Vec<String> {
        match self.table.read() {
            Ok(t) => t.entries.keys().cloned().collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Gives `logger`'s redactor every value the vault holds now, in each of its encodings, and
    /// every placeholder: at load and after a rotation.
    pub(crate) fn teach_redactor(&self, logger: &crate::capability::log::DriverLogger) {
        for value in self.values() {
            for form in scrub::encodings(&value) {
                logger.add_secret(&form);
            }
        }
        for placeholder in self.placeholders() {
            logger.add_secret(&placeholder);
        }
    }

    /// Each declared secret's name and the origin it may go to (`scheme://host[:port]`).
    pub fn origins(&self) -> Vec<(&str, &str)> {
        self.grants
            .iter()
            .map(|g| (g.name.as_str(), g.origin_text.as_str()))
            .collect()
    }

    /// The driver's declared secret names, in declaration order.
    pub fn names(&self) -> Vec<&str> {
        self.grants.iter().map(|g| g.name.as_str()).collect()
    }

    /// Every real value the host holds now (declared and sealed tokens): for the redactor.
    pub fn values(&self) -> Vec<String> {
        match self.table.read() {
            Ok(t) => t
                .entries
                .values()
                .map(|e| e.value.clone())
                .chain(t.tokens.values().map(|(v, _)| v.to_string()))
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// The scrubber of the current table.
    pub(crate) fn scrubber(&self) -> Arc<scrub::Scrubber> {
        match self.table.read() {
            Ok(t) => t.scrubber.clone(),
            Err(_) => Arc::new(scrub::Scrubber::new([])),
        }
    }

    /// Refused placements so far, by secret and reason.
    pub fn misuse(&self) -> Vec<((String, &'static str), u64)> {
        self.misuse.snapshot()
    }
}

/// The grant of `decl`: its origin (the operator's `--secret-origin`, else the first present
/// setting, else the default) and uses.
fn grant(
    decl: &SecretDecl,
    config: &[u8],
    env: &[(String, String)],
    options: &SecretOptions,
) -> Result<Grant, String> {
    let override_url = options
        .origins
        .iter()
        .find(|(n, _)| n == &decl.name)
        .map(|(_, u)| u.clone());
    let url_text = match override_url {
        Some(u) => u,
        None => origin_url(&decl.origin, config, env)
            .map_err(|e| format!("secret {}: {e}", decl.name))?,
    };
    let (origin, origin_text) =
        parse_origin(&url_text).map_err(|e| format!("secret {}: its origin {e}", decl.name))?;
    let mut token = None;
    for u in &decl.uses {
        if let SecretUse::Oauth2Client(seal) = u {
            let mut origins = Vec::new();
            for o in &seal.token_origins {
                let text = origin_url(o, config, env)
                    .map_err(|e| format!("secret {}'s token origin: {e}", decl.name))?;
                origins.push(
                    parse_origin(&text)
                        .map_err(|e| format!("secret {}'s token origin {e}", decl.name))?
                        .0,
                );
            }
            token = Some(TokenGrant {
                path: seal.token_path.clone(),
                origins,
            });
        }
    }
    Ok(Grant {
        name: decl.name.clone(),
        origin,
        origin_text,
        uses: decl.uses.clone(),
        token,
    })
}

/// The URL an origin declaration names: the first present setting, else its default.
fn origin_url(
    origin: &crate::model::types::SecretOrigin,
    config: &[u8],
    env: &[(String, String)],
) -> Result<String, String> {
    for setting in &origin.settings {
        if let Some(found) = locate::find(setting, config, env)?.into_iter().last() {
            return Ok(found.value().trim().to_string());
        }
    }
    if origin.default_url.is_empty() {
        let names: Vec<String> = origin.settings.iter().map(describe).collect();
        return Err(format!(
            "none of the settings naming where it may be sent is set ({}); set one",
            names.join(", ")
        ));
    }
    Ok(origin.default_url.clone())
}

/// A URL's origin (scheme, host, port), and its text.
fn parse_origin(url: &str) -> Result<(url::Origin, String), String> {
    let parsed = Url::parse(url)
        .map_err(|e| format!("{:?} is not a URL: {e}", crate::text::cut(url, 256)))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(format!(
            "{:?} is not an http(s):// URL",
            crate::text::cut(url, 256)
        ));
    }
    let origin = parsed.origin();
    let text = origin.ascii_serialization();
    Ok((origin, text))
}

/// A location as an operator reads it.
pub(crate) fn describe(at: &SecretLocation) -> String {
    match at {
        SecretLocation::Env(n) => format!("environment variable {n}"),
        SecretLocation::Ini((s, k)) => format!("cloud-config [{s}] {k}"),
        SecretLocation::Json(p) => format!("cloud-config JSON {p}"),
    }
}

/// One value under two declared secrets with different origins is refused: the operator's
/// `--secret-origin` pins one name, and the other would send the same value elsewhere.
fn refuse_aliases(entries: &HashMap<String, Entry>, grants: &[Grant]) -> Result<(), String> {
    let mut by_value: HashMap<&str, &Entry> = HashMap::new();
    for entry in entries.values() {
        if entry.value.is_empty() {
            continue;
        }
        if let Some(other) = by_value.insert(&entry.value, entry) {
            let (a, b) = (&grants[other.grant], &grants[entry.grant]);
            if a.origin != b.origin {
                let (first, second) = if a.name <= b.name { (a, b) } else { (b, a) };
                return Err(format!(
                    "secrets {} and {} hold the same value ({} and {}) but may go to different origins ({} and {}); one credential has one declaration: give each its own value or fix the configuration",
                    first.name,
                    second.name,
                    describe(if a.name <= b.name {
                        &other.at
                    } else {
                        &entry.at
                    }),
                    describe(if a.name <= b.name {
                        &entry.at
                    } else {
                        &other.at
                    }),
                    first.origin_text,
                    second.origin_text,
                ));
            }
        }
    }
    Ok(())
}

type Collected = (
    HashMap<String, Entry>,
    Vec<(std::ops::Range<usize>, String)>,
    HashMap<usize, String>,
);

/// A placeholder for every value every declaration finds, and where each goes.
fn collect(
    decls: &[SecretDecl],
    config: &[u8],
    env: &[(String, String)],
) -> Result<Collected, String> {
    let mut entries = HashMap::new();
    let mut spans = Vec::new();
    let mut env_values = HashMap::new();
    for (grant, decl) in decls.iter().enumerate() {
        for at in &decl.at {
            let found = locate::find(at, config, env).map_err(|e| {
                format!(
                    "secret {} at {}: {e}; fix the file or the declaration",
                    decl.name,
                    describe(at)
                )
            })?;
            for (ordinal, f) in found.into_iter().enumerate() {
                let placeholder = mint();
                match &f {
                    locate::Found::Env { index, .. } => {
                        env_values.insert(*index, placeholder.clone());
                    }
                    locate::Found::Config { span, .. } => {
                        spans.push((span.clone(), placeholder.clone()));
                    }
                }
                entries.insert(
                    placeholder,
                    Entry {
                        grant,
                        value: f.value().to_string(),
                        at: at.clone(),
                        ordinal,
                    },
                );
            }
        }
    }
    Ok((entries, spans, env_values))
}
