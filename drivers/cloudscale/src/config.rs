//! The driver's configuration: the upstream CCM's environment variables, nothing else.
//!
//! Upstream ignores `--cloud-config` and reads `CLOUDSCALE_ACCESS_TOKEN`, `CLOUDSCALE_API_URL`
//! and `CLOUDSCALE_API_TIMEOUT`; so does this driver, so the upstream Secret (`cloudscale`, key
//! `access-token`, mapped to `CLOUDSCALE_ACCESS_TOKEN`) works unchanged.

use wasm_ccm_sdk::types::{ProviderError, SecretDecl, SecretLocation, SecretOrigin, SecretUse};

/// The API the driver talks to unless `CLOUDSCALE_API_URL` says otherwise.
pub const DEFAULT_API_URL: &str = "https://api.cloudscale.ch";

/// Upstream's HTTP client timeout when `CLOUDSCALE_API_TIMEOUT` is unset or not positive.
pub const DEFAULT_TIMEOUT_SECONDS: u32 = 20;

/// The environment variables this driver reads.
pub const TOKEN_VAR: &str = "CLOUDSCALE_ACCESS_TOKEN";
/// The API base URL variable.
pub const URL_VAR: &str = "CLOUDSCALE_API_URL";
/// The per-request timeout variable (whole seconds).
pub const TIMEOUT_VAR: &str = "CLOUDSCALE_API_TIMEOUT";

/// The declared name of the API token (`info().secrets`).
pub const TOKEN_SECRET: &str = "access-token";

/// The credentials `info()` declares: the token in [`TOKEN_VAR`], sent by the host as a bearer
/// token to the API at [`URL_VAR`] (or [`DEFAULT_API_URL`]), so it never enters the guest.
pub fn secrets() -> Vec<SecretDecl> {
    vec![SecretDecl::new(
        TOKEN_SECRET,
        vec![SecretLocation::env(TOKEN_VAR)],
        SecretOrigin::new(vec![SecretLocation::env(URL_VAR)], DEFAULT_API_URL),
        vec![SecretUse::Bearer],
    )]
}

/// What `init` needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The bearer token.
    pub token: String,
    /// The API base URL without a trailing slash; paths are appended as `/v1/…`.
    pub api_url: String,
    /// Per-request timeout in milliseconds.
    pub timeout_ms: u32,
}

impl Config {
    /// Reads the configuration from the environment variables the host passed.
    pub fn from_env(env: &[(String, String)]) -> Result<Self, ProviderError> {
        let var = |name: &str| {
            env.iter()
                .rev()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.trim())
        };
        let token = var(TOKEN_VAR).unwrap_or_default();
        if token.is_empty() {
            return Err(ProviderError::invalid_config(format!(
                "{TOKEN_VAR} is not set: create the Secret `cloudscale` with key `access-token` (a \
                 read/write API token from control.cloudscale.ch) and pass it to wasm-ccm as \
                 {TOKEN_VAR}"
            )));
        }
        let api_url = match var(URL_VAR).filter(|v| !v.is_empty()) {
            Some(url) => normalise_url(url)?,
            None => DEFAULT_API_URL.to_string(),
        };
        // Upstream falls back to the default for anything that is not a positive integer.
        let seconds = var(TIMEOUT_VAR)
            .and_then(|v| v.parse::<i64>().ok())
            .filter(|s| *s > 0)
            .map(|s| u32::try_from(s).unwrap_or(u32::MAX))
            .unwrap_or(DEFAULT_TIMEOUT_SECONDS);
        Ok(Self {
            token: token.to_string(),
            api_url,
            timeout_ms: seconds.saturating_mul(1000),
        })
    }

    /// The token as upstream logs it: the first four characters, then `*` for the rest.
    pub fn masked_token(&self) -> String {
        mask(&self.token)
    }
}

/// `abcdefgh` → `abcd****`.
pub fn mask(token: &str) -> String {
    token
        .chars()
        .enumerate()
        .map(|(i, c)| if i < 4 { c } else { '*' })
        .collect()
}

/// Checks an API URL and drops trailing slashes: upstream requires one (the SDK joins relative
/// paths), this driver accepts both spellings.
fn normalise_url(url: &str) -> Result<String, ProviderError> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    let host = rest.map(|r| r.split('/').next().unwrap_or_default());
    if host.is_none_or(str::is_empty) || url.contains(['?', '#', ' ']) {
        return Err(ProviderError::invalid_config(format!(
            "{URL_VAR}={url:?} is not an http(s) URL such as {DEFAULT_API_URL}/"
        )));
    }
    let trimmed = url.trim_end_matches('/');
    // A URL ending in /v1 would give /v1/v1/… paths; upstream's SDK has the same rule.
    Ok(trimmed.strip_suffix("/v1").unwrap_or(trimmed).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_token_is_declared_where_from_env_reads_it() {
        let [decl] = secrets().try_into().expect("one secret");
        assert_eq!(decl.name, TOKEN_SECRET);
        assert_eq!(decl.at, vec![SecretLocation::Env(TOKEN_VAR.into())]);
        assert_eq!(
            decl.origin.settings,
            vec![SecretLocation::Env(URL_VAR.into())]
        );
        assert_eq!(decl.origin.default_url, DEFAULT_API_URL);
        assert_eq!(decl.uses, vec![SecretUse::Bearer]);
    }

    #[test]
    fn defaults_and_overrides() {
        let c = Config::from_env(&env(&[(TOKEN_VAR, " secret-token \n")])).unwrap();
        assert_eq!(c.token, "secret-token");
        assert_eq!(c.api_url, "https://api.cloudscale.ch");
        assert_eq!(c.timeout_ms, 20_000);

        let c = Config::from_env(&env(&[
            (TOKEN_VAR, "t"),
            (URL_VAR, "http://127.0.0.1:8480/"),
            (TIMEOUT_VAR, "5"),
        ]))
        .unwrap();
        assert_eq!(c.api_url, "http://127.0.0.1:8480");
        assert_eq!(c.timeout_ms, 5_000);
        let c = Config::from_env(&env(&[(TOKEN_VAR, "t"), (URL_VAR, "https://h/v1/")])).unwrap();
        assert_eq!(c.api_url, "https://h");
    }

    #[test]
    fn bad_timeouts_fall_back_like_upstream() {
        for bad in ["0", "-3", "ten", "1.5", ""] {
            let c = Config::from_env(&env(&[(TOKEN_VAR, "t"), (TIMEOUT_VAR, bad)])).unwrap();
            assert_eq!(c.timeout_ms, 20_000, "{bad:?}");
        }
    }

    #[test]
    fn missing_token_and_bad_urls_are_config_errors() {
        let e = Config::from_env(&[]).unwrap_err();
        assert!(
            matches!(&e, ProviderError::InvalidConfig(m) if m.contains("access-token")),
            "{e}"
        );
        for bad in [
            "api.cloudscale.ch",
            "ftp://x/",
            "https://",
            "https://h/?x=1",
        ] {
            let e = Config::from_env(&env(&[(TOKEN_VAR, "t"), (URL_VAR, bad)])).unwrap_err();
            assert!(
                matches!(&e, ProviderError::InvalidConfig(m) if m.contains(URL_VAR)),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn tokens_are_masked_like_upstream() {
        assert_eq!(mask("abcdefgh"), "abcd****");
        assert_eq!(mask("abc"), "abc");
    }
}
