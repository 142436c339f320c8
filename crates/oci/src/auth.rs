//! Registry credentials: a dockerconfigjson file (what an `imagePullSecrets` Secret holds) and
//! the `WWW-Authenticate` challenges of the distribution spec (Basic, and Bearer tokens).

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;

/// A username and password for one registry.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Credentials {
    /// The user name, as in a dockerconfigjson `auths` entry.
    pub(crate) username: String,
    /// The password or token; `Debug` never prints it.
    pub(crate) password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the password, not even in debug output.
        write!(f, "Credentials({:?}, <redacted>)", self.username)
    }
}

impl Credentials {
    /// The `Authorization: Basic …` value.
    pub(crate) fn basic_header(&self) -> String {
        format!(
            "Basic {}",
            STANDARD.encode(format!("{}:{}", self.username, self.password))
        )
    }
}

/// Credentials per registry, from a `.dockerconfigjson` (or `~/.docker/config.json`) file.
#[derive(Debug, Clone, Default)]
pub struct DockerConfig {
    by_registry: BTreeMap<String, Credentials>,
    /// Entries that hold no usable credentials, with why: `docker login` with a credential
    /// helper writes `{}`, cloud CLIs write identity tokens. They fail only the registry they
    /// name, not the whole file.
    unusable: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    auths: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
}

impl DockerConfig {
    /// Reads a dockerconfigjson file. Errors name the file and the entry, never a secret.
    pub fn read(path: &Path) -> Result<DockerConfig, String> {
        let bytes = std::fs::read(path).map_err(|e| {
            format!(
                "cannot read the registry credentials {}: {e}",
                path.display()
            )
        })?;
        DockerConfig::parse(&bytes).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses dockerconfigjson bytes: `{"auths": {"registry": {"auth": base64("user:pass")}}}`
    /// or `username`/`password` fields.
    pub fn parse(bytes: &[u8]) -> Result<DockerConfig, String> {
        let file: File = serde_json::from_slice(bytes).map_err(|e| {
            format!(
                "not a dockerconfigjson file ({e}); expected {{\"auths\": {{\"REGISTRY\": {{\"auth\": \"base64(user:password)\"}}}}}}"
            )
        })?;
        let mut config = DockerConfig::default();
        for (key, entry) in file.auths {
            match DockerConfig::entry(&key, &entry) {
                Ok(creds) => {
                    config.by_registry.insert(normalize_registry(&key), creds);
                }
                Err(why) => {
                    config.unusable.insert(normalize_registry(&key), why);
                }
            }
        }
        Ok(config)
    }

    fn entry(key: &str, entry: &Entry) -> Result<Credentials, String> {
        Ok(match (&entry.auth, &entry.username, &entry.password) {
            (Some(auth), _, _) if !auth.is_empty() => {
                let decoded = STANDARD
                    .decode(auth.trim())
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
                    .ok_or_else(|| {
                        format!("the \"auth\" of {key:?} is not base64 of \"user:password\"")
                    })?;
                let (username, password) = decoded.split_once(':').ok_or_else(|| {
                    format!("the \"auth\" of {key:?} decodes to no \"user:password\" pair")
                })?;
                Credentials {
                    username: username.to_string(),
                    password: password.to_string(),
                }
            }
            (_, Some(username), Some(password)) => Credentials {
                username: username.clone(),
                password: password.clone(),
            },
            _ if entry.identitytoken.is_some() => {
                return Err(format!(
                    "the entry for {key:?} holds only an identity token, which wasm-ccm does not support; use a username and password (or a registry token as the password)"
                ));
            }
            _ => {
                return Err(format!(
                    "the entry for {key:?} has neither \"auth\" nor \"username\" and \"password\" (a credential helper's entry is not usable here)"
                ));
            }
        })
    }

    /// Why the file's entry for `registry` is not usable, if it has such an entry.
    pub(crate) fn unusable(&self, registry: &str) -> Option<&str> {
        self.unusable
            .get(&normalize_registry(registry))
            .map(String::as_str)
    }

    /// The credentials for `registry` (`host[:port]`), if the file has them.
    pub(crate) fn for_registry(&self, registry: &str) -> Option<&Credentials> {
        self.by_registry.get(&normalize_registry(registry))
    }

    /// The registries the file has credentials for, for messages.
    pub(crate) fn registries(&self) -> Vec<&str> {
        self.by_registry.keys().map(String::as_str).collect()
    }
}

/// Docker writes keys as `host`, `https://host` or `https://host/v1/`; all mean `host`.
fn normalize_registry(key: &str) -> String {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = key.split('/').next().unwrap_or(key).to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" => "docker.io".to_string(),
        _ => host,
    }
}

/// A `WWW-Authenticate` challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Challenge {
    /// Send the credentials with HTTP Basic.
    Basic,
    /// Fetch a token from `realm` for `service` and `scope`.
    Bearer {
        /// The token endpoint's URL.
        realm: String,
        /// The `service` parameter of the token request, when the registry names one.
        service: Option<String>,
        /// The `scope` parameter, e.g. `repository:drivers/static:pull`.
        scope: Option<String>,
    },
}

/// Parses `Basic realm="…"` or `Bearer realm="…",service="…",scope="…"`.
pub(crate) fn parse_challenge(header: &str) -> Option<Challenge> {
    let (scheme, params) = header.trim().split_once(' ').unwrap_or((header.trim(), ""));
    let params = parse_params(params);
    if scheme.eq_ignore_ascii_case("basic") {
        Some(Challenge::Basic)
    } else if scheme.eq_ignore_ascii_case("bearer") {
        Some(Challenge::Bearer {
            realm: params.get("realm")?.clone(),
            service: params.get("service").cloned(),
            scope: params.get("scope").cloned(),
        })
    } else {
        None
    }
}

/// `key="value",key2="v,with,commas"` (values may be quoted and contain commas).
fn parse_params(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once('=') else {
            break;
        };
        let key = key
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let (value, after) = if let Some(quoted) = after.strip_prefix('"') {
            match quoted.find('"') {
                Some(end) => (&quoted[..end], &quoted[end + 1..]),
                None => (quoted, ""),
            }
        } else {
            match after.find(',') {
                Some(end) => (&after[..end], &after[end..]),
                None => (after, ""),
            }
        };
        out.insert(key, value.to_string());
        rest = after.trim_start().trim_start_matches(',').trim_start();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dockerconfigjson_entries_in_both_forms_and_any_key_spelling() {
        let auth = STANDARD.encode("robot:s3cr:et");
        let json = format!(
            r#"{{"auths": {{"https://Registry.Example:5000/v1/": {{"auth": "{auth}"}},
                "ghcr.io": {{"username": "u", "password": "p"}},
                "https://index.docker.io/v1/": {{"auth": "{auth}"}}}}}}"#
        );
        let config = DockerConfig::parse(json.as_bytes()).unwrap();
        let c = config.for_registry("registry.example:5000").unwrap();
        assert_eq!(
            (c.username.as_str(), c.password.as_str()),
            ("robot", "s3cr:et")
        );
        assert_eq!(config.for_registry("ghcr.io").unwrap().password, "p");
        assert!(config.for_registry("docker.io").is_some());
        assert!(config.for_registry("quay.io").is_none());
        assert!(
            !format!("{c:?}").contains("s3cr"),
            "Debug never shows the password"
        );
    }

    #[test]
    fn unusable_entries_fail_only_their_registry_and_never_leak_secrets() {
        for (entry, says) in [
            (r#"{"auth": "%%%"}"#, "not base64"),
            (r#"{}"#, "credential helper"),
            (r#"{"identitytoken": "tok"}"#, "identity token"),
        ] {
            let json = format!(
                r#"{{"auths": {{"r.example": {entry}, "ok.example": {{"username": "u", "password": "p"}}}}}}"#
            );
            let config = DockerConfig::parse(json.as_bytes()).unwrap();
            assert!(config.for_registry("r.example").is_none());
            let why = config.unusable("r.example").unwrap();
            assert!(why.contains(says), "{entry}: {why}");
            assert!(!why.contains("tok\""), "{why}");
            assert!(
                config.for_registry("ok.example").is_some(),
                "other entries still work"
            );
        }
        let no_colon = format!(
            r#"{{"auths": {{"r.example": {{"auth": "{}"}}}}}}"#,
            STANDARD.encode("secretwithoutcolon")
        );
        let config = DockerConfig::parse(no_colon.as_bytes()).unwrap();
        let why = config.unusable("r.example").unwrap();
        assert!(why.contains("no \"user:password\""), "{why}");
        assert!(!why.contains("secretwithoutcolon"), "{why}");
        let err = DockerConfig::parse(b"[1, 2]").unwrap_err();
        assert!(err.contains("not a dockerconfigjson"), "{err}");
    }

    #[test]
    fn challenges_parse_with_quoted_commas() {
        assert_eq!(
            parse_challenge(r#"Basic realm="Registry Realm""#),
            Some(Challenge::Basic)
        );
        assert_eq!(
            parse_challenge(
                r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#
            ),
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into()),
                scope: Some("repository:a/b:pull,push".into()),
            })
        );
        assert_eq!(parse_challenge("Negotiate abc"), None);
        assert_eq!(parse_challenge("Bearer service=\"x\""), None, "no realm");
    }
}
