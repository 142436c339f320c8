//! The configuration: upstream's `cloud-config` (the `cloudstack-secret` Secret's key), a gcfg
//! INI file with one `[Global]` section, read unchanged; plus our one optional variable,
//! `CLOUDSTACK_JOB_BUDGET`, kept out of the file so that the file still loads in upstream's CCM
//! after a roll-back.

use std::time::Duration;

use wasm_ccm_sdk::types::{ProviderError, SecretDecl, SecretLocation, SecretOrigin, SecretUse};

/// How long one call may wait for CloudStack's asynchronous jobs before it answers
/// `retry-after`: a third of the host's default 30 s call deadline, leaving room for the
/// requests themselves.
pub const DEFAULT_JOB_BUDGET: Duration = Duration::from_secs(10);
/// The variable that overrides [`DEFAULT_JOB_BUDGET`] (seconds).
pub const JOB_BUDGET_VAR: &str = "CLOUDSTACK_JOB_BUDGET";

/// The one section of upstream's file.
pub const SECTION: &str = "Global";
/// The API endpoint's key.
pub const API_URL_KEY: &str = "api-url";
/// The API key's key.
pub const API_KEY_KEY: &str = "api-key";
/// The secret key's key.
pub const SECRET_KEY_KEY: &str = "secret-key";
/// The query parameter that carries the API key in every request.
pub const API_KEY_PARAM: &str = "apiKey";

/// The keys of upstream's `[Global]` section.
const KEYS: &[&str] = &[
    API_URL_KEY,
    API_KEY_KEY,
    SECRET_KEY_KEY,
    "ssl-no-verify",
    "project-id",
    "zone",
    "region",
];

/// The credentials `info()` declares, so the host can keep them out of the guest: the API key,
/// sent as the `apiKey` parameter, and the secret key, the key of the request signature
/// (`cloudstack-signature`: the host computes it; the driver never holds the key). Both go only
/// to the file's `api-url`: every CloudStack has its own, so there is no default.
pub fn secrets() -> Vec<SecretDecl> {
    let origin = SecretOrigin::new(vec![SecretLocation::ini(SECTION, API_URL_KEY)], "");
    vec![
        SecretDecl::new(
            API_KEY_KEY,
            vec![SecretLocation::ini(SECTION, API_KEY_KEY)],
            origin.clone(),
            vec![SecretUse::Param(API_KEY_PARAM.into())],
        ),
        SecretDecl::new(
            SECRET_KEY_KEY,
            vec![SecretLocation::ini(SECTION, SECRET_KEY_KEY)],
            origin,
            vec![SecretUse::CloudstackSignature],
        ),
    ]
}

/// The validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The API endpoint, e.g. `https://cloud.example/client/api`.
    pub api_url: String,
    /// `api-key`: the API key requests are signed for; redacted from logs.
    pub api_key: String,
    /// `secret-key`: the key requests are signed with; redacted from logs.
    pub secret_key: String,
    /// Upstream's TLS switch. The host always verifies TLS, so `true` is only warned about.
    pub ssl_no_verify: bool,
    /// A project UUID or name; every lookup and creation is scoped to it.
    pub project: Option<String>,
    /// Upstream's legacy `Zones` setting; read and unused (InstancesV2 reads the VM's zone).
    pub zone: Option<String>,
    /// The region label for every node; empty means the VM's zone name, as upstream.
    pub region: Option<String>,
    /// How long one call may wait for asynchronous jobs.
    pub job_budget: Duration,
}

fn invalid(message: impl Into<String>) -> ProviderError {
    ProviderError::InvalidConfig(message.into())
}

impl Config {
    /// Reads the `cloud-config` file and the environment; every mistake is an `invalid-config`
    /// naming the line or key and what to write instead.
    pub fn parse(file: &[u8], env: &[(String, String)]) -> Result<Config, ProviderError> {
        let text = std::str::from_utf8(file)
            .map_err(|_| invalid("cloud-config is not UTF-8 text; it must be upstream's INI file with a [Global] section"))?;
        let values = parse_ini(text)?;
        let get = |key: &str| {
            values
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let (Some(api_url), Some(api_key), Some(secret_key)) =
            (get("api-url"), get("api-key"), get("secret-key"))
        else {
            let missing: Vec<&str> = ["api-url", "api-key", "secret-key"]
                .into_iter()
                .filter(|k| get(k).is_none())
                .collect();
            return Err(invalid(format!(
                "no cloud provider config given: [Global] lacks {}; mount the cloudstack-secret Secret's cloud-config key as --cloud-config",
                missing.join(", ")
            )));
        };
        let api_url = api_url.trim_end_matches('/').to_string();
        if !(api_url.starts_with("https://") || api_url.starts_with("http://"))
            || api_url.contains('?')
        {
            return Err(invalid(format!(
                "api-url {api_url:?} is not an http(s):// URL without a query, e.g. https://cloud.example/client/api"
            )));
        }
        let ssl_no_verify = match get("ssl-no-verify") {
            None => false,
            Some(v) => parse_bool(&v)
                .ok_or_else(|| invalid(format!("ssl-no-verify = {v:?} is not true or false")))?,
        };
        let job_budget = match env.iter().find(|(k, _)| k == JOB_BUDGET_VAR) {
            None => DEFAULT_JOB_BUDGET,
            Some((_, v)) => parse_duration(v).ok_or_else(|| {
                invalid(format!(
                    "CLOUDSTACK_JOB_BUDGET={v:?} is not a duration such as 10s, 2500ms or 0s"
                ))
            })?,
        };
        Ok(Config {
            api_url,
            api_key,
            secret_key,
            ssl_no_verify,
            project: get("project-id"),
            zone: get("zone"),
            region: get("region"),
            job_budget,
        })
    }
}

/// gcfg's booleans.
fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" => Some(true),
        "false" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// `10s`, `2500ms`, `1m` or plain seconds.
fn parse_duration(v: &str) -> Option<Duration> {
    let v = v.trim();
    let (number, unit) = match v.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => v.split_at(i),
        None => (v, "s"),
    };
    let n: u64 = number.parse().ok()?;
    match unit {
        "ms" => Some(Duration::from_millis(n)),
        "s" => Some(Duration::from_secs(n)),
        "m" => Some(Duration::from_secs(n.checked_mul(60)?)),
        _ => None,
    }
}

/// The `(key, value)` pairs of the `[Global]` section, keys lower-cased, in file order. Follows
/// gcfg: `;` and `#` comments, case-insensitive names, double-quoted values with `\"`, `\\`,
/// `\n` and `\t` escapes, a bare name meaning `true`; an unknown section or key is an error, as
/// upstream reports it.
fn parse_ini(text: &str) -> Result<Vec<(String, String)>, ProviderError> {
    let mut in_global = false;
    let mut values = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line_no = index + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let name = rest
                .split(']')
                .next()
                .filter(|_| rest.contains(']'))
                .ok_or_else(|| {
                    invalid(format!(
                        "cloud-config line {line_no}: {raw:?} is not a [section] header"
                    ))
                })?;
            if !name.trim().eq_ignore_ascii_case("global") {
                return Err(invalid(format!(
                    "cloud-config line {line_no}: unknown section [{}]; upstream's file has only [Global]",
                    name.trim()
                )));
            }
            in_global = true;
            continue;
        }
        if !in_global {
            return Err(invalid(format!(
                "cloud-config line {line_no}: {raw:?} is outside a section; put it under [Global]"
            )));
        }
        let (name, value) = match line.split_once('=') {
            Some((n, v)) => (n.trim(), unquote(v.trim(), line_no)?),
            None => (line, "true".to_string()),
        };
        let name = name.to_ascii_lowercase();
        if !KEYS.contains(&name.as_str()) {
            return Err(invalid(format!(
                "cloud-config line {line_no}: unknown key {name:?} in [Global]; known keys: {}",
                KEYS.join(", ")
            )));
        }
        values.push((name, value));
    }
    Ok(values)
}

/// A gcfg value: quoted parts lose their quotes and keep their spaces, an unquoted `;` or `#`
/// starts a comment.
fn unquote(value: &str, line_no: usize) -> Result<String, ProviderError> {
    let mut out = String::with_capacity(value.len());
    let mut quoted = false;
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => match chars.next() {
                Some('"') => out.push('"'),
                Some('\\') => out.push('\\'),
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                other => {
                    return Err(invalid(format!(
                        "cloud-config line {line_no}: unknown escape \\{} in a value",
                        other.map(String::from).unwrap_or_default()
                    )));
                }
            },
            ';' | '#' if !quoted => break,
            c => out.push(c),
        }
    }
    if quoted {
        return Err(invalid(format!(
            "cloud-config line {line_no}: a value's double quote is not closed"
        )));
    }
    Ok(out.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "[Global]\napi-url = https://cloud.example/client/api\napi-key = KEY\nsecret-key = \"se;cret\" ; a comment\nproject-id = 6a3d7c2e-0000-4000-8000-000000000001\n# zone\nzone = zone1\nssl-no-verify = false\n";

    #[test]
    fn both_keys_are_declared_at_the_keys_parse_reads() {
        let decls = secrets();
        let origin = SecretOrigin {
            settings: vec![SecretLocation::Ini(("Global".into(), "api-url".into()))],
            default_url: String::new(),
        };
        assert_eq!(decls.len(), 2);
        assert_eq!(decls[0].name, "api-key");
        assert_eq!(
            decls[0].at,
            vec![SecretLocation::Ini(("Global".into(), "api-key".into()))]
        );
        assert_eq!(decls[0].uses, vec![SecretUse::Param("apiKey".into())]);
        assert_eq!(decls[0].origin, origin);
        assert_eq!(decls[1].name, "secret-key");
        assert_eq!(
            decls[1].at,
            vec![SecretLocation::Ini(("Global".into(), "secret-key".into()))]
        );
        assert_eq!(decls[1].uses, vec![SecretUse::CloudstackSignature]);
        assert_eq!(decls[1].origin, origin);
        // The keys the declaration names are the ones `parse` reads.
        let c = Config::parse(FILE.as_bytes(), &[]).unwrap();
        assert_eq!(
            (c.api_key.as_str(), c.secret_key.as_str()),
            ("KEY", "se;cret")
        );
    }

    #[test]
    fn upstream_file() {
        let c = Config::parse(FILE.as_bytes(), &[]).unwrap();
        assert_eq!(c.api_url, "https://cloud.example/client/api");
        assert_eq!(c.api_key, "KEY");
        assert_eq!(c.secret_key, "se;cret");
        assert_eq!(
            c.project.as_deref(),
            Some("6a3d7c2e-0000-4000-8000-000000000001")
        );
        assert_eq!(c.zone.as_deref(), Some("zone1"));
        assert_eq!(c.region, None);
        assert!(!c.ssl_no_verify);
        assert_eq!(c.job_budget, DEFAULT_JOB_BUDGET);
    }

    #[test]
    fn case_and_budget() {
        let file = "[global]\nAPI-URL=http://127.0.0.1:1/client/api/\nApi-Key=k\nSecret-Key=s\nssl-no-verify\n";
        let env = [("CLOUDSTACK_JOB_BUDGET".to_string(), "2500ms".to_string())];
        let c = Config::parse(file.as_bytes(), &env).unwrap();
        assert_eq!(c.api_url, "http://127.0.0.1:1/client/api");
        assert!(c.ssl_no_verify);
        assert_eq!(c.job_budget, Duration::from_millis(2500));
    }

    #[test]
    fn mistakes_are_named() {
        let err = |file: &str| match Config::parse(file.as_bytes(), &[]) {
            Err(ProviderError::InvalidConfig(m)) => m,
            other => panic!("expected invalid-config, got {other:?}"),
        };
        assert!(err("").contains("no cloud provider config given"));
        assert!(err("[Global]\napi-url=https://x/client/api\napi-key=k\n").contains("secret-key"));
        assert!(err("api-url=x\n").contains("outside a section"));
        assert!(err("[Other]\n").contains("unknown section"));
        assert!(
            err("[Global]\napi-url=https://x\napi-key=k\nsecret-key=s\napi-token=t\n")
                .contains("unknown key \"api-token\"")
        );
        assert!(err("[Global]\napi-url=ftp://x\napi-key=k\nsecret-key=s\n").contains("http(s)://"));
        assert!(
            err("[Global]\napi-url=https://x\napi-key=k\nsecret-key=\"s\n").contains("not closed")
        );
        assert!(
            err("[Global]\napi-url=https://x\napi-key=k\nsecret-key=s\nssl-no-verify=maybe\n")
                .contains("ssl-no-verify")
        );
        let env = [("CLOUDSTACK_JOB_BUDGET".to_string(), "soon".to_string())];
        assert!(matches!(
            Config::parse(b"[Global]\napi-url=https://x\napi-key=k\nsecret-key=s\n", &env),
            Err(ProviderError::InvalidConfig(m)) if m.contains("CLOUDSTACK_JOB_BUDGET")
        ));
    }
}
