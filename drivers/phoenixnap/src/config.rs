//! The configuration: upstream's `cloud-sa.json` (the `--cloud-config` file) and the `PNAP_*`
//! environment variables, the environment winning for every setting, as upstream does.

use serde::Deserialize;
use wasm_ccm_sdk::selector::Selector;
use wasm_ccm_sdk::types::{
    Oauth2Seal, ProviderError, SecretDecl, SecretLocation, SecretOrigin, SecretUse,
};

/// The API host upstream's SDK always uses.
pub const DEFAULT_BASE_URL: &str = "https://api.phoenixnap.com";
/// The OAuth2 server upstream's SDK always uses.
pub const DEFAULT_AUTH_URL: &str = "https://auth.phoenixnap.com";
/// The client ID's variable; it wins over [`CLIENT_ID_POINTER`].
pub const CLIENT_ID_VAR: &str = "PNAP_CLIENT_ID";
/// The client secret's variable; it wins over [`CLIENT_SECRET_POINTER`].
pub const CLIENT_SECRET_VAR: &str = "PNAP_CLIENT_SECRET";
/// The API base URL's variable; it wins over [`BASE_URL_POINTER`].
pub const BASE_URL_VAR: &str = "PNAP_BASE_URL";
/// The auth server URL's variable; it wins over [`AUTH_URL_POINTER`].
pub const AUTH_URL_VAR: &str = "PNAP_AUTH_URL";
/// The region (`location` in the file).
pub const LOCATION_VAR: &str = "PNAP_LOCATION";
/// The kube-vip public network (`loadbalancer` in the file).
pub const LOAD_BALANCER_VAR: &str = "PNAP_LOAD_BALANCER";
/// The API server's port, checked for upstream compatibility.
pub const API_SERVER_PORT_VAR: &str = "PNAP_API_SERVER_PORT";
/// The annotation naming a Service's IP location.
pub const IP_LOCATION_ANNOTATION_VAR: &str = "PNAP_ANNOTATION_IP_LOCATION";
/// Every plain (non-secret) variable the driver reads (`plain_env`).
pub const PLAIN_VARS: [&str; 4] = [
    LOCATION_VAR,
    LOAD_BALANCER_VAR,
    API_SERVER_PORT_VAR,
    IP_LOCATION_ANNOTATION_VAR,
];
/// The client ID in `cloud-sa.json` (a JSON Pointer).
pub const CLIENT_ID_POINTER: &str = "/clientID";
/// The client secret in `cloud-sa.json`.
pub const CLIENT_SECRET_POINTER: &str = "/clientSecret";
/// The API base URL in `cloud-sa.json`.
pub const BASE_URL_POINTER: &str = "/base-url";
/// The auth server URL in `cloud-sa.json`.
pub const AUTH_URL_POINTER: &str = "/auth-url";

/// The credentials `info()` declares, so the host can keep them out of the guest. Both go to the
/// auth server only, as the token request's Basic credentials or form fields; the client secret
/// also lets the host seal the access token that the token endpoint answers, which it then sends
/// as a bearer token to the API only. Each setting lists the variable before the file key: the
/// environment wins in [`Config::parse`].
pub fn secrets() -> Vec<SecretDecl> {
    let auth = SecretOrigin::new(
        vec![
            SecretLocation::env(AUTH_URL_VAR),
            SecretLocation::json(AUTH_URL_POINTER),
        ],
        DEFAULT_AUTH_URL,
    );
    let api = SecretOrigin::new(
        vec![
            SecretLocation::env(BASE_URL_VAR),
            SecretLocation::json(BASE_URL_POINTER),
        ],
        DEFAULT_BASE_URL,
    );
    vec![
        SecretDecl::new(
            "client-id",
            vec![
                SecretLocation::env(CLIENT_ID_VAR),
                SecretLocation::json(CLIENT_ID_POINTER),
            ],
            auth.clone(),
            vec![SecretUse::BasicUser, SecretUse::Param("client_id".into())],
        ),
        SecretDecl::new(
            "client-secret",
            vec![
                SecretLocation::env(CLIENT_SECRET_VAR),
                SecretLocation::json(CLIENT_SECRET_POINTER),
            ],
            auth,
            vec![
                SecretUse::BasicPassword,
                SecretUse::Param("client_secret".into()),
                SecretUse::Oauth2Client(Oauth2Seal {
                    token_path: crate::api::TOKEN_PATH.into(),
                    token_origins: vec![api],
                }),
            ],
        ),
    ]
}

/// The annotation naming a Service's IP location (upstream's default name).
pub const DEFAULT_IP_LOCATION_ANNOTATION: &str = "phoenixnap.com/ip-location";

/// Upstream's locations.
pub const LOCATIONS: &[&str] = &["PHX", "ASH", "SGP", "NLD", "CHI", "SEA", "AUS"];

/// The file as upstream reads it. Unknown keys are refused so a typo is not silently ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default, rename = "clientID")]
    client_id: Option<String>,
    #[serde(default, rename = "clientSecret")]
    client_secret: Option<String>,
    #[serde(default)]
    location: Option<String>,
    #[serde(default)]
    loadbalancer: Option<String>,
    #[serde(default, rename = "annotationIPLocation")]
    annotation_ip_location: Option<String>,
    #[serde(default, rename = "apiServerPort")]
    api_server_port: Option<u16>,
    #[serde(default, rename = "serviceNodeSelector")]
    service_node_selector: Option<String>,
    #[serde(default, rename = "base-url")]
    base_url: Option<String>,
    /// Ours: where the token endpoint lives (tests point it at the simulator).
    #[serde(default, rename = "auth-url")]
    auth_url: Option<String>,
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The OAuth2 client ID (`PNAP_CLIENT_ID` or `clientID`).
    pub client_id: String,
    /// The OAuth2 client secret (`PNAP_CLIENT_SECRET` or `clientSecret`); redacted from logs.
    pub client_secret: String,
    /// Where IP blocks are created (wins over a Service's annotation, as upstream); empty: the
    /// annotation, else the public network's location.
    pub location: String,
    /// The public network blocks are assigned to (`kube-vip://<id>`); `None`: no load balancers.
    pub public_network: Option<String>,
    /// The annotation naming a Service's IP location (`PNAP_ANNOTATION_IP_LOCATION` or
    /// `annotationIPLocation`, `phoenixnap.com/ip-location` by default).
    pub ip_location_annotation: String,
    /// `None`: every node.
    pub service_node_selector: Option<Selector>,
    /// The API base URL, scheme, host and port only (`https://api.phoenixnap.com` by default).
    pub base_url: String,
    /// The OAuth2 server's base URL (`https://auth.phoenixnap.com` by default).
    pub auth_url: String,
}

fn invalid(message: impl Into<String>) -> ProviderError {
    ProviderError::InvalidConfig(message.into())
}

/// An `http(s)://host[:port]` URL without a path, query or fragment: the API paths
/// (`/bmc/v1/...`, `/auth/realms/...`) are appended to it, so a path would double them and turn
/// every lookup into a 404 (review finding D2: e.g. `https://api.phoenixnap.com/bmc/v1`).
fn http_url(what: &str, value: &str) -> Result<String, ProviderError> {
    let v = value.trim().trim_end_matches('/');
    let rest = v
        .strip_prefix("https://")
        .or_else(|| v.strip_prefix("http://"));
    let Some(rest) = rest.filter(|r| !r.is_empty()) else {
        return Err(invalid(format!(
            "{what} {value:?} is not an http(s):// URL"
        )));
    };
    if rest.contains(['/', '?', '#']) {
        return Err(invalid(format!(
            "{what} {value:?} has a path; give only scheme, host and port (e.g. https://api.phoenixnap.com): the driver appends /bmc/v1, /ips/v1, /networks/v1 and /tag-manager/v1 itself"
        )));
    }
    Ok(v.to_string())
}

impl Config {
    /// Reads the file (may be empty) and the environment; every mistake is an `invalid-config`
    /// naming the key.
    pub fn parse(file: &[u8], env: &[(String, String)]) -> Result<Config, ProviderError> {
        let f: File = if file.iter().all(u8::is_ascii_whitespace) {
            File::default()
        } else {
            serde_json::from_slice(file).map_err(|e| {
                invalid(format!(
                    "the cloud-config (cloud-sa.json) is not valid: {e}; it is a JSON object like {{\"clientID\": \"…\", \"clientSecret\": \"…\", \"location\": \"PHX\", \"loadbalancer\": \"kube-vip://<public-network-id>\"}} (no trailing commas)"
                ))
            })?
        };
        let var = |name: &str| {
            env.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let pick = |env_name: &str, file_value: &Option<String>| {
            var(env_name).or_else(|| file_value.clone().filter(|v| !v.trim().is_empty()))
        };
        let client_id = pick(CLIENT_ID_VAR, &f.client_id).ok_or_else(|| {
            invalid("no client ID: set PNAP_CLIENT_ID or clientID in cloud-sa.json")
        })?;
        let client_secret = pick(CLIENT_SECRET_VAR, &f.client_secret).ok_or_else(|| {
            invalid("no client secret: set PNAP_CLIENT_SECRET or clientSecret in cloud-sa.json")
        })?;
        let location = pick(LOCATION_VAR, &f.location)
            .unwrap_or_default()
            .to_ascii_uppercase();
        let public_network = match pick(LOAD_BALANCER_VAR, &f.loadbalancer) {
            None => None,
            Some(lb) => Some(parse_load_balancer(&lb)?),
        };
        if !location.is_empty() && !LOCATIONS.contains(&location.as_str()) {
            return Err(invalid(format!(
                "location {location:?} (PNAP_LOCATION or location) is not one of {}",
                LOCATIONS.join(", ")
            )));
        }
        if let Some(port) = var(API_SERVER_PORT_VAR) {
            port.parse::<u16>().map_err(|_| {
                invalid(format!(
                    "PNAP_API_SERVER_PORT {port:?} is not a port number"
                ))
            })?;
        }
        let _ = f.api_server_port;
        let ip_location_annotation = var(IP_LOCATION_ANNOTATION_VAR)
            .or(f.annotation_ip_location.clone())
            .unwrap_or_else(|| DEFAULT_IP_LOCATION_ANNOTATION.into());
        let service_node_selector = match f.service_node_selector.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => Some(
                Selector::parse(text)
                    .map_err(|e| invalid(format!("serviceNodeSelector {text:?}: {e}")))?,
            ),
        };
        let base_url = match pick(BASE_URL_VAR, &f.base_url) {
            Some(u) => http_url("base-url", &u)?,
            None => DEFAULT_BASE_URL.into(),
        };
        let auth_url = match pick(AUTH_URL_VAR, &f.auth_url) {
            Some(u) => http_url("auth-url", &u)?,
            None => DEFAULT_AUTH_URL.into(),
        };
        Ok(Config {
            client_id,
            client_secret,
            location,
            public_network,
            ip_location_annotation,
            service_node_selector,
            base_url,
            auth_url,
        })
    }
}

/// `kube-vip://<public-network-id>[/<opaque>]` → the network ID.
fn parse_load_balancer(value: &str) -> Result<String, ProviderError> {
    let rest = value.strip_prefix("kube-vip://").ok_or_else(|| {
        invalid(format!(
            "loadbalancer {value:?} is not supported: the only implementation is kube-vip, written kube-vip://<public-network-id>"
        ))
    })?;
    let network = rest.split('/').next().unwrap_or_default().trim();
    if network.is_empty() {
        return Err(invalid(format!(
            "loadbalancer {value:?} names no public network: write kube-vip://<public-network-id>"
        )));
    }
    Ok(network.to_string())
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

    const FILE: &str = r#"{"clientID": "id", "clientSecret": "secret", "location": "phx",
        "loadbalancer": "kube-vip://60473c2509268bc77fd06d29", "base-url": "http://127.0.0.1:1/"}"#;

    #[test]
    fn the_declared_locations_are_the_ones_parse_reads() {
        let decls = secrets();
        assert_eq!(decls.len(), 2);
        let (id, secret) = (&decls[0], &decls[1]);
        assert_eq!(id.name, "client-id");
        assert_eq!(secret.name, "client-secret");
        // The environment first: it wins in `parse`.
        assert_eq!(
            id.at,
            vec![
                SecretLocation::Env("PNAP_CLIENT_ID".into()),
                SecretLocation::Json("/clientID".into())
            ]
        );
        assert_eq!(
            secret.at,
            vec![
                SecretLocation::Env("PNAP_CLIENT_SECRET".into()),
                SecretLocation::Json("/clientSecret".into())
            ]
        );
        let auth = SecretOrigin {
            settings: vec![
                SecretLocation::Env("PNAP_AUTH_URL".into()),
                SecretLocation::Json("/auth-url".into()),
            ],
            default_url: DEFAULT_AUTH_URL.into(),
        };
        assert_eq!((&id.origin, &secret.origin), (&auth, &auth));
        assert_eq!(
            id.uses,
            vec![SecretUse::BasicUser, SecretUse::Param("client_id".into())]
        );
        let api = SecretOrigin {
            settings: vec![
                SecretLocation::Env("PNAP_BASE_URL".into()),
                SecretLocation::Json("/base-url".into()),
            ],
            default_url: DEFAULT_BASE_URL.into(),
        };
        assert_eq!(
            secret.uses,
            vec![
                SecretUse::BasicPassword,
                SecretUse::Param("client_secret".into()),
                SecretUse::Oauth2Client(Oauth2Seal {
                    token_path: crate::api::TOKEN_PATH.into(),
                    token_origins: vec![api],
                }),
            ]
        );
        // The pointers name the members `parse` reads, and the variables win over them.
        let c = Config::parse(
            br#"{"clientID": "file-id", "clientSecret": "file-secret", "auth-url": "https://a.example", "base-url": "https://b.example"}"#,
            &env(&[("PNAP_CLIENT_SECRET", "env-secret")]),
        )
        .unwrap();
        assert_eq!(c.client_id, "file-id");
        assert_eq!(c.client_secret, "env-secret");
        assert_eq!(c.auth_url, "https://a.example");
        assert_eq!(c.base_url, "https://b.example");
    }

    #[test]
    fn file_then_environment() {
        let c = Config::parse(FILE.as_bytes(), &[]).unwrap();
        assert_eq!(c.client_id, "id");
        assert_eq!(c.location, "PHX");
        assert_eq!(
            c.public_network.as_deref(),
            Some("60473c2509268bc77fd06d29")
        );
        assert_eq!(c.base_url, "http://127.0.0.1:1");
        assert_eq!(c.auth_url, DEFAULT_AUTH_URL);
        assert_eq!(c.ip_location_annotation, DEFAULT_IP_LOCATION_ANNOTATION);
        let c = Config::parse(
            FILE.as_bytes(),
            &env(&[("PNAP_CLIENT_ID", "env-id"), ("PNAP_LOCATION", "ASH")]),
        )
        .unwrap();
        assert_eq!(
            (c.client_id.as_str(), c.location.as_str()),
            ("env-id", "ASH")
        );
    }

    #[test]
    fn environment_alone_and_no_load_balancer() {
        let c = Config::parse(
            b"",
            &env(&[("PNAP_CLIENT_ID", "i"), ("PNAP_CLIENT_SECRET", "s")]),
        )
        .unwrap();
        assert!(c.public_network.is_none());
    }

    #[test]
    fn mistakes_are_invalid_config_naming_the_key() {
        let err = |file: &str, e: &[(&str, &str)]| match Config::parse(file.as_bytes(), &env(e)) {
            Err(ProviderError::InvalidConfig(m)) => m,
            other => panic!("expected invalid-config, got {other:?}"),
        };
        assert!(err(r#"{"clientID": "a",}"#, &[]).contains("trailing commas"));
        assert!(err("{}", &[]).contains("PNAP_CLIENT_ID"));
        assert!(err(r#"{"clientID": "a"}"#, &[]).contains("PNAP_CLIENT_SECRET"));
        let lb = r#"{"clientID": "a", "clientSecret": "b", "loadbalancer": "metallb://x"}"#;
        assert!(err(lb, &[]).contains("kube-vip"));
        let no_loc = r#"{"clientID": "a", "clientSecret": "b", "loadbalancer": "kube-vip://n"}"#;
        // No location: the annotation, else the public network's (read at the first ensure).
        assert_eq!(Config::parse(no_loc.as_bytes(), &[]).unwrap().location, "");
        assert!(err(no_loc, &[("PNAP_LOCATION", "MARS")]).contains("not one of"));
        assert!(err(r#"{"clientId": "a"}"#, &[]).contains("clientId"));
        let sel = r#"{"clientID": "a", "clientSecret": "b", "serviceNodeSelector": "a in (b"}"#;
        assert!(err(sel, &[]).contains("serviceNodeSelector"));
        let url = r#"{"clientID": "a", "clientSecret": "b", "base-url": "ftp://x"}"#;
        assert!(err(url, &[]).contains("base-url"), "{}", err(url, &[]));
        let path = r#"{"clientID": "a", "clientSecret": "b", "base-url": "https://api.phoenixnap.com/bmc/v1"}"#;
        assert!(err(path, &[]).contains("has a path"), "{}", err(path, &[]));
        assert!(
            err(
                "{}",
                &[
                    ("PNAP_CLIENT_ID", "a"),
                    ("PNAP_CLIENT_SECRET", "b"),
                    ("PNAP_BASE_URL", "http://h/x?y")
                ]
            )
            .contains("has a path")
        );
        // A trailing slash alone is not a path.
        let slash =
            r#"{"clientID": "a", "clientSecret": "b", "base-url": "https://api.phoenixnap.com/"}"#;
        assert_eq!(
            Config::parse(slash.as_bytes(), &[]).unwrap().base_url,
            "https://api.phoenixnap.com"
        );
    }
}
