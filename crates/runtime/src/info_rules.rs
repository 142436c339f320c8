//! Rules for what a driver's `info()` may declare, checked at load before anything uses it.
//!
//! `info` feeds log lines, metric labels (`wasm_ccm_driver_info{driver,version}`), the egress
//! policy, the environment handed to `init` and the annotation keys the controllers let the driver
//! write. A hostile driver could otherwise put megabytes into every `/metrics` scrape, or declare
//! `env-prefixes: ["A", …, "Z"]` and receive the whole process environment (other tools'
//! credentials, `KUBERNETES_*`). Each rule below says why it exists.

use crate::model::types::{ProviderInfo, SecretDecl, SecretLocation, SecretOrigin, SecretUse};
use crate::result_caps::Capped;
use crate::text::shown;

/// Longest driver name and provider-ID scheme (a DNS label: they end up in metric labels and
/// provider IDs).
pub(crate) const MAX_NAME_BYTES: usize = 63;
/// Longest version string (semver with pre-release and build metadata fits easily).
pub(crate) const MAX_VERSION_BYTES: usize = 64;
/// Longest `default-egress` pattern: `https://`, a 253-byte DNS name, `:65535`.
pub(crate) const MAX_EGRESS_PATTERN_BYTES: usize = 272;
/// Most `default-egress` patterns a driver may declare.
pub(crate) const MAX_DEFAULT_EGRESS: usize = 16;
/// Most environment prefixes.
pub(crate) const MAX_ENV_PREFIXES: usize = 8;
/// Most annotation prefixes.
pub(crate) const MAX_ANNOTATION_PREFIXES: usize = 16;
/// Shortest environment prefix, `_` included (`AB_`).
pub(crate) const MIN_ENV_PREFIX_BYTES: usize = 3;
/// Longest environment prefix or annotation prefix.
pub(crate) const MAX_PREFIX_BYTES: usize = 253;

/// Longest secret name (a DNS-label-sized metric label and message part).
pub(crate) const MAX_SECRET_NAME_BYTES: usize = 63;
/// Longest INI section or key of a `secret-location`.
pub(crate) const MAX_INI_NAME_BYTES: usize = 128;
/// Longest JSON Pointer of a `secret-location`.
pub(crate) const MAX_JSON_POINTER_BYTES: usize = 256;
/// Longest `default-url` of a `secret-origin` (a scheme, a host, a port and an ignored path).
pub(crate) const MAX_URL_BYTES: usize = 2048;
/// Longest header name of a `header` use.
pub(crate) const MAX_HEADER_NAME_BYTES: usize = 128;
/// Longest parameter name of a `param` use.
pub(crate) const MAX_PARAM_BYTES: usize = 64;
/// Longest `token-path` of an `oauth2-client` use.
pub(crate) const MAX_TOKEN_PATH_BYTES: usize = 256;
/// Headers the host's HTTP client owns (framing, the connection, the target, the session): a
/// credential placed there would change what the request is, not who sends it.
pub(crate) const FORBIDDEN_SECRET_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "cookie",
];

/// Environment names and prefixes of the process, the container runtime, Kubernetes and common
/// tooling that a driver must never receive: neither a declared prefix that these start with
/// (`KUBE_` would not match `KUBERNETES_`, but `KUBERNETES_` or `LC_` would), nor a prefix that
/// starts with one of them (`KUBERNETES_SERVICE_`).
pub(crate) const RESERVED_ENV_PREFIXES: &[&str] = &[
    // Kubernetes' service links and our own downward-API variables.
    "KUBERNETES_",
    "POD_",
    "NODE_NAME",
    // wasm-ccm's own settings.
    "WASM_CCM_",
    // The process environment of any Unix program.
    "HOME",
    "PATH",
    "HOSTNAME",
    "USER",
    "SHELL",
    "PWD",
    "OLDPWD",
    "TERM",
    "TMPDIR",
    "TZ",
    "LANG",
    "LC_",
    "LD_",
    // Proxies and TLS trust: a driver reading these could learn the network's layout.
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "SSL_",
    // Toolchains and observability agents that share pods.
    "RUST_",
    "CARGO_",
    "OTEL_",
];

/// Checks every field of `info`; the error names the field, the value's problem and the rule.
pub fn validate(info: &ProviderInfo) -> Result<(), String> {
    check_dns_label("name", &info.name)?;
    check_scheme(&info.provider_id_scheme)?;
    check_version(&info.version)?;
    if info.default_egress.len() > MAX_DEFAULT_EGRESS {
        return Err(format!(
            "default-egress: {} patterns, at most {MAX_DEFAULT_EGRESS}",
            info.default_egress.len()
        ));
    }
    // Checked before the patterns are parsed, so no message echoes a huge one.
    if let Some(long) = info
        .default_egress
        .iter()
        .find(|p| p.len() > MAX_EGRESS_PATTERN_BYTES)
    {
        return Err(format!(
            "default-egress {}: longer than {MAX_EGRESS_PATTERN_BYTES} bytes (a scheme, a DNS name of at most 253 bytes and a port)",
            shown(long)
        ));
    }
    // Special addresses (loopback, private ranges, metadata endpoints) are the operator's to
    // grant: a driver's defaults name DNS host patterns only.
    crate::egress::validate_default_egress(&info.default_egress)
        .map_err(|e| format!("default-egress: {e}"))?;
    if info.env_prefixes.len() > MAX_ENV_PREFIXES {
        return Err(format!(
            "env-prefixes: {} prefixes, at most {MAX_ENV_PREFIXES}",
            info.env_prefixes.len()
        ));
    }
    for p in &info.env_prefixes {
        check_env_prefix(p)?;
    }
    if info.annotation_prefixes.len() > MAX_ANNOTATION_PREFIXES {
        return Err(format!(
            "annotation-prefixes: {} prefixes, at most {MAX_ANNOTATION_PREFIXES}",
            info.annotation_prefixes.len()
        ));
    }
    for p in &info.annotation_prefixes {
        check_annotation_prefix(p)?;
    }
    check_secrets(info)
}

/// The secret declarations: the host reads the values at the declared places, hands `init`
/// placeholders, and applies a value only to requests for its origin, in its uses; a loose
/// declaration (an origin without a host, a `host` header, an undeclared variable) would let
/// the driver steer a credential elsewhere. Every message names the secret.
fn check_secrets(info: &ProviderInfo) -> Result<(), String> {
    // The list lengths first, so nothing below walks an unbounded list.
    info.check_caps()?;
    let mut names: Vec<&str> = Vec::with_capacity(info.secrets.len());
    let (mut signatures, mut oauth2) = (0, 0);
    for s in &info.secrets {
        check_secret_name(&s.name)?;
        if names.contains(&s.name.as_str()) {
            return Err(format!(
                "secrets {}: declared twice; each secret has one declaration with every place its value may be",
                shown(&s.name)
            ));
        }
        names.push(&s.name);
        check_secret(s, &info.env_prefixes)?;
        signatures += s
            .uses
            .iter()
            .filter(|u| matches!(u, SecretUse::CloudstackSignature))
            .count();
        oauth2 += s
            .uses
            .iter()
            .filter(|u| matches!(u, SecretUse::Oauth2Client(_)))
            .count();
        // One signing key and one token endpoint per driver: with two, the host could not
        // tell which one a request means.
        if signatures > 1 {
            return Err(format!(
                "secrets {}: a second cloudstack-signature use; a driver has at most one signing key",
                shown(&s.name)
            ));
        }
        if oauth2 > 1 {
            return Err(format!(
                "secrets {}: a second oauth2-client use; a driver has at most one token endpoint",
                shown(&s.name)
            ));
        }
    }
    check_locations_declared_once(info)
}

/// A location as the host reads it: INI sections and keys match without regard to case (see
/// `secrets::locate`), variables and JSON Pointers exactly.
fn location_key(at: &SecretLocation) -> (u8, String, String) {
    match at {
        SecretLocation::Env(n) => (0, n.clone(), String::new()),
        SecretLocation::Ini((s, k)) => (1, s.to_ascii_lowercase(), k.to_ascii_lowercase()),
        SecretLocation::Json(p) => (2, p.clone(), String::new()),
    }
}

/// Each credential's location is declared once, by one secret: a second name for the same
/// value could carry another origin (the operator's `--secret-origin` pins one name, the other
/// would send the value elsewhere), and a location that is also an origin setting would make
/// the host read a credential as a URL (and quote it in a message). Values that are equal at
/// different locations are refused when the host reads them (`Vault::seal`).
fn check_locations_declared_once(info: &ProviderInfo) -> Result<(), String> {
    let mut seen: Vec<((u8, String, String), &str)> = Vec::new();
    for s in &info.secrets {
        for at in &s.at {
            let key = location_key(at);
            if let Some((_, first)) = seen.iter().find(|(k, _)| *k == key) {
                return Err(format!(
                    "secrets {}: {} is already declared by secret {}; a location is declared once, by one secret, so that one name (and one origin) governs its value",
                    shown(&s.name),
                    crate::secrets::describe(at),
                    shown(first)
                ));
            }
            seen.push((key, &s.name));
        }
    }
    for s in &info.secrets {
        let token_settings = s.uses.iter().flat_map(|u| match u {
            SecretUse::Oauth2Client(seal) => seal
                .token_origins
                .iter()
                .flat_map(|o| o.settings.iter())
                .collect::<Vec<_>>(),
            _ => Vec::new(),
        });
        for setting in s.origin.settings.iter().chain(token_settings) {
            let key = location_key(setting);
            if let Some((_, holder)) = seen.iter().find(|(k, _)| *k == key) {
                return Err(format!(
                    "secrets {}: its origin setting {} is where secret {} is declared; a credential is never read as a URL",
                    shown(&s.name),
                    crate::secrets::describe(setting),
                    shown(holder)
                ));
            }
        }
    }
    Ok(())
}

/// `[a-z0-9-]`, 1-63 bytes: messages and metric labels name the secret by it.
fn check_secret_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_SECRET_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "secrets {}: a name must be 1-{MAX_SECRET_NAME_BYTES} lowercase letters, digits and '-' (e.g. \"access-token\")",
            shown(name)
        ))
    }
}

/// One declaration whose name is already checked.
fn check_secret(s: &SecretDecl, env_prefixes: &[String]) -> Result<(), String> {
    let name = &s.name;
    if s.at.is_empty() {
        return Err(format!(
            "secrets {name:?}: at is empty; list every place the value may be"
        ));
    }
    for at in &s.at {
        check_location(name, "at", at, env_prefixes)?;
    }
    check_origin(name, "origin", &s.origin, env_prefixes)?;
    if s.uses.is_empty() {
        return Err(format!(
            "secrets {name:?}: uses is empty; a secret the host may put nowhere cannot be used"
        ));
    }
    for u in &s.uses {
        check_use(name, u, env_prefixes)?;
    }
    Ok(())
}

/// A place of a value or of an origin's URL; `what` names the list (`at`, `origin settings`).
fn check_location(
    name: &str,
    what: &str,
    at: &SecretLocation,
    env_prefixes: &[String],
) -> Result<(), String> {
    match at {
        SecretLocation::Env(var) => {
            // Only these variables reach the host's reading at all (`load`).
            if var.len() > MAX_PREFIX_BYTES
                || !env_prefixes
                    .iter()
                    .any(|p| !p.is_empty() && var.starts_with(p.as_str()))
            {
                return Err(format!(
                    "secrets {name:?}: {what} env({}): the variable must start with one of the env-prefixes {env_prefixes:?} and be at most {MAX_PREFIX_BYTES} bytes",
                    shown(var)
                ));
            }
        }
        SecretLocation::Ini((section, key)) => {
            for (part, value) in [("section", section), ("key", key)] {
                let ok = !value.is_empty()
                    && value.len() <= MAX_INI_NAME_BYTES
                    && !value.contains(['=', '[', ']', '\n', '\r']);
                if !ok {
                    return Err(format!(
                        "secrets {name:?}: {what} ini({}, {}): the {part} must be 1-{MAX_INI_NAME_BYTES} bytes without '=', '[', ']' or line breaks",
                        shown(section),
                        shown(key)
                    ));
                }
            }
        }
        SecretLocation::Json(pointer) => check_json_pointer(name, what, pointer)?,
    }
    Ok(())
}

/// An RFC 6901 JSON Pointer: `/`-separated reference tokens, `~` only as `~0` or `~1`.
fn check_json_pointer(name: &str, what: &str, pointer: &str) -> Result<(), String> {
    let bad = |why: &str| {
        Err(format!(
            "secrets {name:?}: {what} json({}): {why}",
            shown(pointer)
        ))
    };
    if !pointer.starts_with('/') || pointer.len() > MAX_JSON_POINTER_BYTES {
        return bad(&format!(
            "a JSON Pointer must start with '/' and be at most {MAX_JSON_POINTER_BYTES} bytes (e.g. \"/clientSecret\")"
        ));
    }
    let mut bytes = pointer.bytes();
    while let Some(b) = bytes.next() {
        if b == b'~' && !matches!(bytes.next(), Some(b'0' | b'1')) {
            return bad("'~' must be escaped as \"~0\" ('/' as \"~1\"), as RFC 6901 says");
        }
    }
    Ok(())
}

/// Where a credential may go: declared settings and a default URL, at least one of them.
fn check_origin(
    name: &str,
    what: &str,
    origin: &SecretOrigin,
    env_prefixes: &[String],
) -> Result<(), String> {
    for at in &origin.settings {
        check_location(name, &format!("{what} settings"), at, env_prefixes)?;
    }
    if origin.default_url.is_empty() {
        if origin.settings.is_empty() {
            return Err(format!(
                "secrets {name:?}: {what} has neither settings nor a default-url; the host would not know where the secret may go"
            ));
        }
        return Ok(());
    }
    check_origin_url(&origin.default_url).map_err(|why| {
        format!(
            "secrets {name:?}: {what} default-url {}: {why}",
            shown(&origin.default_url)
        )
    })
}

/// `http(s)://host[:port]`, a path allowed (only the origin counts), nothing else: no user, no
/// query, no fragment, nothing the URL parser would have to repair.
pub(crate) fn check_origin_url(url: &str) -> Result<(), String> {
    const FORM: &str = "must be an http(s)://host[:port] URL (a path is allowed and ignored)";
    if url.len() > MAX_URL_BYTES {
        return Err(format!("longer than {MAX_URL_BYTES} bytes"));
    }
    if !(url.starts_with("https://") || url.starts_with("http://"))
        || !url.bytes().all(|b| b.is_ascii_graphic() && b != b'\\')
    {
        return Err(FORM.into());
    }
    let parsed = url::Url::parse(url).map_err(|e| format!("{FORM} ({e})"))?;
    if parsed.host_str().is_none_or(str::is_empty)
        || !parsed.username().is_empty()
        || parsed.password().is_some()
        || parsed.query().is_some()
        || parsed.fragment().is_some()
    {
        return Err(format!("{FORM}, without user, query or fragment"));
    }
    Ok(())
}

/// How a credential may be put into a request.
fn check_use(name: &str, u: &SecretUse, env_prefixes: &[String]) -> Result<(), String> {
    match u {
        SecretUse::Bearer
        | SecretUse::BasicUser
        | SecretUse::BasicPassword
        | SecretUse::CloudstackSignature => Ok(()),
        SecretUse::Header(header) => {
            // RFC 9110 §5.6.2 `token`.
            let token = !header.is_empty()
                && header.len() <= MAX_HEADER_NAME_BYTES
                && header
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !token {
                return Err(format!(
                    "secrets {name:?}: header({}): must be a header name (1-{MAX_HEADER_NAME_BYTES} letters, digits and !#$%&'*+-.^_`|~)",
                    shown(header)
                ));
            }
            if let Some(owned) = FORBIDDEN_SECRET_HEADERS
                .iter()
                .find(|h| header.eq_ignore_ascii_case(h))
            {
                return Err(format!(
                    "secrets {name:?}: header({header:?}): {owned} belongs to the host's HTTP client; a credential never goes there"
                ));
            }
            Ok(())
        }
        SecretUse::Param(param) => {
            let ok = !param.is_empty()
                && param.len() <= MAX_PARAM_BYTES
                && param
                    .bytes()
                    .all(|b| b.is_ascii_graphic() && !matches!(b, b'&' | b'=' | b'#'));
            if ok {
                Ok(())
            } else {
                Err(format!(
                    "secrets {name:?}: param({}): must be 1-{MAX_PARAM_BYTES} bytes of visible ASCII without '&', '=' or '#'",
                    shown(param)
                ))
            }
        }
        SecretUse::Oauth2Client(seal) => {
            let path = &seal.token_path;
            if !path.starts_with('/')
                || path.len() > MAX_TOKEN_PATH_BYTES
                || !path.bytes().all(|b| b.is_ascii_graphic())
            {
                return Err(format!(
                    "secrets {name:?}: oauth2-client token-path {}: must start with '/' and be at most {MAX_TOKEN_PATH_BYTES} bytes of visible ASCII",
                    shown(path)
                ));
            }
            // The sealed token is usable only where it may go.
            if seal.token_origins.is_empty() {
                return Err(format!(
                    "secrets {name:?}: oauth2-client token-origins is empty; list where the sealed token may be sent"
                ));
            }
            for o in &seal.token_origins {
                check_origin(name, "oauth2-client token-origins", o, env_prefixes)?;
            }
            Ok(())
        }
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 bytes: the `--cloud-provider` value and a metric
/// label.
fn check_dns_label(field: &str, value: &str) -> Result<(), String> {
    let ok = !value.is_empty()
        && value.len() <= MAX_NAME_BYTES
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{field} {}: must be 1-{MAX_NAME_BYTES} lowercase letters, digits and inner '-'",
            shown(value)
        ))
    }
}

/// A URI scheme (RFC 3986 §3.1) in lowercase, at most 63 bytes: `<scheme>://<id>` provider IDs.
fn check_scheme(value: &str) -> Result<(), String> {
    let mut bytes = value.bytes();
    let ok = value.len() <= MAX_NAME_BYTES
        && bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'+' || b == b'-' || b == b'.'
        });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "provider-id-scheme {}: must be a lowercase URI scheme (a letter, then letters, digits, '+', '-', '.'), at most {MAX_NAME_BYTES} bytes",
            shown(value)
        ))
    }
}

/// Printable ASCII of semver's alphabet (digits, letters, `.`, `-`, `+`), at most 64 bytes.
fn check_version(value: &str) -> Result<(), String> {
    let ok = !value.is_empty()
        && value.len() <= MAX_VERSION_BYTES
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'+');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "version {}: must be a semver string (letters, digits, '.', '-', '+'), 1-{MAX_VERSION_BYTES} bytes",
            shown(value)
        ))
    }
}

/// At least `AB_`: upper-case letters, digits and `_`, ending in `_`, and clear of
/// [`RESERVED_ENV_PREFIXES`] in both directions.
pub(crate) fn check_env_prefix(prefix: &str) -> Result<(), String> {
    let syntax = prefix.len() >= MIN_ENV_PREFIX_BYTES
        && prefix.len() <= MAX_PREFIX_BYTES
        && prefix.ends_with('_')
        && prefix
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_uppercase())
        && prefix
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    if !syntax {
        return Err(format!(
            "env-prefixes {}: a prefix must be at least {MIN_ENV_PREFIX_BYTES} characters of A-Z, 0-9 and '_', start with a letter and end in '_' (e.g. \"MYCLOUD_\"), so the driver receives only its own variables",
            shown(prefix)
        ));
    }
    if let Some(reserved) = RESERVED_ENV_PREFIXES
        .iter()
        .find(|r| r.starts_with(prefix) || prefix.starts_with(*r))
    {
        return Err(format!(
            "env-prefixes {}: overlaps the process variables {reserved}*, which are not the driver's; use a prefix named after the cloud (e.g. \"MYCLOUD_\")",
            shown(prefix)
        ));
    }
    Ok(())
}

/// An annotation key prefix (`domain/`, matching every key of that domain) or one full key
/// (`domain/name`, matching that key only): a DNS subdomain, `/`, and an optional name. Declaring `kubectl.kubernetes.io` is refused outright: that
/// namespace belongs to kubectl (`last-applied-configuration`).
fn check_annotation_prefix(prefix: &str) -> Result<(), String> {
    let Some((domain, _name)) = prefix.split_once('/') else {
        return Err(format!(
            "annotation-prefixes {}: must be a domain followed by '/' (e.g. \"mycloud.example/\") or a full annotation key",
            shown(prefix)
        ));
    };
    let domain_ok = !domain.is_empty()
        && prefix.len() <= MAX_PREFIX_BYTES
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
        && domain.contains('.');
    if !domain_ok {
        return Err(format!(
            "annotation-prefixes {}: the part before '/' must be a lowercase DNS subdomain with at least one dot",
            shown(prefix)
        ));
    }
    let under = |zone: &str| domain == zone || domain.ends_with(&format!(".{zone}"));
    if under("kubectl.kubernetes.io") {
        return Err(format!(
            "annotation-prefixes {}: kubectl.kubernetes.io belongs to kubectl; a driver never writes there",
            shown(prefix)
        ));
    }
    // Keys under these steer kube-proxy and the endpoint controllers (`service-proxy-name`
    // makes kube-proxy ignore a Service): never a driver's.
    if [
        "service.kubernetes.io",
        "endpoints.kubernetes.io",
        "endpointslice.kubernetes.io",
    ]
    .iter()
    .any(|zone| under(zone))
    {
        return Err(format!(
            "annotation-prefixes {}: keys under {domain} steer kube-proxy and the endpoint controllers; a driver never writes there",
            shown(prefix)
        ));
    }
    // Kubernetes' own namespaces only key by key (an upstream CCM's state annotation such as
    // `service.beta.kubernetes.io/cloudstack-load-balancer-ip-associated-by-controller`), never
    // as a whole prefix.
    if (under("kubernetes.io") || under("k8s.io")) && prefix.ends_with('/') {
        return Err(format!(
            "annotation-prefixes {}: a driver may declare single keys under {domain}, not the whole prefix",
            shown(prefix)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::types::Oauth2Seal;

    fn info() -> ProviderInfo {
        ProviderInfo {
            name: "acme".into(),
            version: "1.2.3-rc.1+build.5".into(),
            provider_id_scheme: "acme".into(),
            default_egress: vec!["https://api.acme.example".into()],
            env_prefixes: vec!["ACME_".into()],
            annotation_prefixes: vec![
                "acme.example/".into(),
                "service.beta.kubernetes.io/acme-load-balancer-id".into(),
            ],
            secrets: vec![SecretDecl {
                name: "access-token".into(),
                at: vec![
                    SecretLocation::Env("ACME_TOKEN".into()),
                    SecretLocation::Json("/token".into()),
                ],
                origin: SecretOrigin {
                    settings: vec![SecretLocation::Env("ACME_API_URL".into())],
                    default_url: "https://api.acme.example".into(),
                },
                uses: vec![SecretUse::Bearer],
            }],
        }
    }

    /// `info()` with its one secret changed by `f`.
    fn with_secret(f: impl FnOnce(&mut SecretDecl)) -> ProviderInfo {
        let mut i = info();
        f(&mut i.secrets[0]);
        i
    }

    /// The error of `info()` with its one secret changed by `f`; it must name the secret.
    fn secret_error(f: impl FnOnce(&mut SecretDecl)) -> String {
        let i = with_secret(f);
        let e = validate(&i).expect_err("must be refused");
        let name = format!("secrets {}", shown(&i.secrets[0].name));
        assert!(e.starts_with(&name), "{e}");
        e
    }

    fn origin(url: &str) -> SecretOrigin {
        SecretOrigin {
            settings: Vec::new(),
            default_url: url.into(),
        }
    }

    #[test]
    fn a_location_is_declared_once_and_never_read_as_an_origin() {
        // The same variable under a second name with another origin.
        let mut i = info();
        let mut alias = i.secrets[0].clone();
        alias.name = "alias".into();
        alias.at = vec![SecretLocation::Env("ACME_TOKEN".into())];
        alias.origin = origin("https://exfil.example");
        i.secrets.push(alias);
        let e = validate(&i).expect_err("an alias");
        assert!(
            e.starts_with("secrets \"alias\"")
                && e.contains("already declared by secret \"access-token\""),
            "{e}"
        );
        // INI keys match without regard to case, as the host reads them.
        let mut i = info();
        i.secrets[0].at = vec![SecretLocation::Ini(("Global".into(), "Token".into()))];
        let mut alias = i.secrets[0].clone();
        alias.name = "alias".into();
        alias.at = vec![SecretLocation::Ini(("global".into(), "TOKEN".into()))];
        i.secrets.push(alias);
        assert!(validate(&i).is_err());
        // One declaration naming a place twice is the same mistake.
        let e = secret_error(|s| s.at = vec![SecretLocation::Json("/t".into()); 2]);
        assert!(e.contains("already declared"), "{e}");
        // A credential's location as another secret's origin setting.
        let mut i = info();
        let mut second = i.secrets[0].clone();
        second.name = "second".into();
        second.at = vec![SecretLocation::Env("ACME_OTHER".into())];
        second.origin.settings = vec![SecretLocation::Env("ACME_TOKEN".into())];
        i.secrets.push(second);
        let e = validate(&i).expect_err("read as a URL");
        assert!(e.contains("a credential is never read as a URL"), "{e}");
        // Control: distinct places load.
        let mut i = info();
        let mut other = i.secrets[0].clone();
        other.name = "other".into();
        other.at = vec![SecretLocation::Env("ACME_OTHER".into())];
        i.secrets.push(other);
        assert!(validate(&i).is_ok());
    }

    #[test]
    fn the_shipped_shapes_pass() {
        assert_eq!(validate(&info()), Ok(()));
        let mut i = info();
        i.name = "external-cloudstack".into();
        i.env_prefixes = vec!["ACME_".into(), "CLOUDSTACK_".into(), "PNAP_".into()];
        assert_eq!(validate(&i), Ok(()));
    }

    #[test]
    fn names_schemes_and_versions_are_bounded_and_plain() {
        for bad in ["", "Acme", "a b", "-a", &"a".repeat(64), "a\nb"] {
            let mut i = info();
            i.name = bad.into();
            assert!(validate(&i).unwrap_err().starts_with("name"), "{bad:?}");
        }
        for bad in ["", "1acme", "ac me", "ACME", &"a".repeat(64)] {
            let mut i = info();
            i.provider_id_scheme = bad.into();
            assert!(
                validate(&i).unwrap_err().starts_with("provider-id-scheme"),
                "{bad:?}"
            );
        }
        let mut i = info();
        i.version = "1".repeat(20 << 20);
        let e = validate(&i).unwrap_err();
        assert!(e.starts_with("version"), "{e}");
        assert!(e.len() < 400, "the error does not echo the 20 MiB value");
    }

    #[test]
    fn env_prefixes_that_would_reach_foreign_variables_are_refused() {
        for bad in [
            "",
            "A",
            "AB",
            "A_",
            "acme_",
            "ACME",
            "K",
            "KUBERNETES_",
            "KUBERNETES_SERVICE_",
            "POD_",
            "LC_",
            "WASM_CCM_",
            "WASM_",
            "HOME_",
            "PATH_",
            "RUST_",
            "_X_",
        ] {
            assert!(check_env_prefix(bad).is_err(), "{bad:?} must be refused");
        }
        for good in [
            "ACME_",
            "CLOUDSCALE_",
            "PNAP_",
            "STATIC_",
            "EXAMPLE_",
            "AB_",
        ] {
            assert_eq!(check_env_prefix(good), Ok(()), "{good}");
        }
        let mut i = info();
        i.env_prefixes = ('A'..='Z').map(|c| c.to_string()).collect();
        assert!(validate(&i).unwrap_err().starts_with("env-prefixes"));
    }

    #[test]
    fn annotation_prefixes_need_a_domain_and_never_name_kubectl() {
        for bad in [
            "",
            "acme",
            "/x",
            "acme/",
            "Acme.example/",
            "kubectl.kubernetes.io/",
            "kubectl.kubernetes.io/last-applied-configuration",
            "service.kubernetes.io/service-proxy-name",
            "service.beta.kubernetes.io/",
            "k8s.io/",
        ] {
            let mut i = info();
            i.annotation_prefixes = vec![bad.into()];
            assert!(
                validate(&i).unwrap_err().starts_with("annotation-prefixes"),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_huge_egress_pattern_is_refused_without_echoing_it() {
        let mut i = info();
        i.default_egress = vec![format!("https://{}example.com", "a.".repeat(1 << 20))];
        let e = validate(&i).unwrap_err();
        assert!(e.starts_with("default-egress"), "{e}");
        assert!(e.len() < 400, "{} bytes", e.len());
    }

    #[test]
    fn list_lengths_are_bounded() {
        let mut i = info();
        i.default_egress = vec!["https://a.example".into(); MAX_DEFAULT_EGRESS + 1];
        assert!(validate(&i).unwrap_err().starts_with("default-egress"));
        let mut i = info();
        i.annotation_prefixes = vec!["a.example/".into(); MAX_ANNOTATION_PREFIXES + 1];
        assert!(validate(&i).unwrap_err().starts_with("annotation-prefixes"));
    }

    #[test]
    fn the_shipped_secret_shapes_pass() {
        let mut i = info();
        i.env_prefixes = vec!["PNAP_".into()];
        let auth = SecretOrigin {
            settings: vec![
                SecretLocation::Env("PNAP_AUTH_URL".into()),
                SecretLocation::Json("/auth-url".into()),
            ],
            default_url: "https://auth.phoenixnap.com".into(),
        };
        i.secrets = vec![
            SecretDecl {
                name: "client-id".into(),
                at: vec![
                    SecretLocation::Env("PNAP_CLIENT_ID".into()),
                    SecretLocation::Json("/clientID".into()),
                ],
                origin: auth.clone(),
                uses: vec![SecretUse::BasicUser, SecretUse::Param("client_id".into())],
            },
            SecretDecl {
                name: "client-secret".into(),
                at: vec![SecretLocation::Json("/clientSecret".into())],
                origin: auth,
                uses: vec![
                    SecretUse::BasicPassword,
                    SecretUse::Oauth2Client(Oauth2Seal {
                        token_path: "/auth/realms/BMC/protocol/openid-connect/token".into(),
                        token_origins: vec![origin("https://api.phoenixnap.com")],
                    }),
                ],
            },
            SecretDecl {
                name: "secret-key".into(),
                at: vec![SecretLocation::Ini(("Global".into(), "secret-key".into()))],
                origin: SecretOrigin {
                    settings: vec![SecretLocation::Ini(("Global".into(), "api-url".into()))],
                    default_url: String::new(),
                },
                uses: vec![
                    SecretUse::CloudstackSignature,
                    SecretUse::Header("X-Api-Key".into()),
                ],
            },
        ];
        assert_eq!(validate(&i), Ok(()));
    }

    #[test]
    fn secret_names_are_plain_bounded_and_unique() {
        for bad in ["", "Access-Token", "access_token", "a b", &"a".repeat(64)] {
            let e = secret_error(|s| s.name = bad.into());
            assert!(e.contains("lowercase letters"), "{e}");
        }
        assert_eq!(validate(&with_secret(|s| s.name = "a".repeat(63))), Ok(()));
        let mut i = info();
        i.secrets.push(i.secrets[0].clone());
        let e = validate(&i).unwrap_err();
        assert!(
            e.starts_with("secrets \"access-token\"") && e.contains("twice"),
            "{e}"
        );
        let e = secret_error(|s| s.name = "x".repeat(1 << 20));
        assert!(e.len() < 400, "the error does not echo the 1 MiB name");
    }

    #[test]
    fn secret_lists_are_bounded_and_at_and_uses_not_empty() {
        let mut i = info();
        i.secrets = (0..=crate::result_caps::MAX_SECRETS)
            .map(|n| SecretDecl {
                name: format!("s{n}"),
                ..i.secrets[0].clone()
            })
            .collect();
        assert!(validate(&i).unwrap_err().starts_with("secrets: 17 entries"));
        let e = secret_error(|s| s.at = vec![SecretLocation::Env("ACME_T".into()); 9]);
        assert!(e.contains("at: 9 entries, at most 8"), "{e}");
        let e = secret_error(|s| s.origin.settings = vec![SecretLocation::Json("/u".into()); 9]);
        assert!(e.contains("origin settings: 9 entries"), "{e}");
        let e = secret_error(|s| s.uses = vec![SecretUse::Bearer; 17]);
        assert!(e.contains("uses: 17 entries"), "{e}");
        let e = secret_error(|s| {
            s.uses = vec![SecretUse::Oauth2Client(Oauth2Seal {
                token_path: "/token".into(),
                token_origins: vec![origin("https://api.acme.example"); 9],
            })]
        });
        assert!(e.contains("token-origins: 9 entries"), "{e}");
        assert!(secret_error(|s| s.at.clear()).contains("at is empty"));
        assert!(secret_error(|s| s.uses.clear()).contains("uses is empty"));
    }

    #[test]
    fn env_locations_need_a_declared_prefix() {
        for bad in ["TOKEN", "KUBERNETES_TOKEN", "ACME", "acme_token", ""] {
            let e = secret_error(|s| s.at = vec![SecretLocation::Env(bad.into())]);
            assert!(e.contains("env-prefixes"), "{e}");
        }
        let e = secret_error(|s| {
            s.origin.settings = vec![SecretLocation::Env("OTHER_URL".into())];
        });
        assert!(e.contains("origin settings env(\"OTHER_URL\")"), "{e}");
        let e = secret_error(|s| s.at = vec![SecretLocation::Env("ACME_".repeat(100))]);
        assert!(e.contains("at most"), "{e}");
    }

    #[test]
    fn ini_locations_are_plain_section_and_key() {
        let ini = |section: &str, key: &str| SecretLocation::Ini((section.into(), key.into()));
        for (section, key) in [
            ("", "k"),
            ("Global", ""),
            ("Glo]bal", "k"),
            ("[Global", "k"),
            ("Global", "a=b"),
            ("Global", "a\nb"),
            ("Global", "a\rb"),
            (&"s".repeat(129), "k"),
            ("Global", &"k".repeat(129)),
        ] {
            let e = secret_error(|s| s.at = vec![ini(section, key)]);
            assert!(e.contains("ini("), "{e}");
            assert!(e.len() < 500, "{e}");
        }
        let ok = with_secret(|s| s.at = vec![ini("Global", &"k".repeat(128))]);
        assert_eq!(validate(&ok), Ok(()));
    }

    #[test]
    fn json_locations_are_rfc_6901_pointers() {
        for bad in [
            "",
            "clientSecret",
            "/a~",
            "/a~2",
            "/~x",
            &format!("/{}", "a".repeat(256)),
        ] {
            let e = secret_error(|s| s.at = vec![SecretLocation::Json(bad.into())]);
            assert!(e.contains("json("), "{e}");
        }
        for good in ["/", "/clientSecret", "/a~0b/c~1d", "/auth/0", "/base-url"] {
            let ok = with_secret(|s| s.at = vec![SecretLocation::Json(good.into())]);
            assert_eq!(validate(&ok), Ok(()), "{good}");
        }
    }

    #[test]
    fn origins_are_http_origins_or_settings() {
        for bad in [
            "api.acme.example",
            "ftp://api.acme.example",
            "https://",
            "https:api.acme.example",
            "https://user:pw@api.acme.example",
            "https://api.acme.example/?q=1",
            "https://api.acme.example/#f",
            "https://api.acme.example:99999",
            "https://api acme.example",
            "https:\\\\api.acme.example",
            "HTTPS://api.acme.example",
        ] {
            let e = secret_error(|s| s.origin = origin(bad));
            assert!(e.contains("default-url"), "{bad}: {e}");
        }
        let e = secret_error(|s| s.origin = origin(&format!("https://{}", "a".repeat(4096))));
        assert!(e.contains("longer than") && e.len() < 500, "{e}");
        for good in [
            "https://api.acme.example",
            "http://127.0.0.1:8080",
            "https://api.acme.example/v1/",
            "http://[::1]:1",
        ] {
            assert_eq!(
                validate(&with_secret(|s| s.origin = origin(good))),
                Ok(()),
                "{good}"
            );
        }
        let e = secret_error(|s| s.origin = SecretOrigin::default());
        assert!(e.contains("neither settings nor a default-url"), "{e}");
        let settings_only = with_secret(|s| {
            s.origin = SecretOrigin {
                settings: vec![SecretLocation::Json("/url".into())],
                default_url: String::new(),
            }
        });
        assert_eq!(validate(&settings_only), Ok(()));
    }

    #[test]
    fn header_uses_are_token_names_the_client_does_not_own() {
        for bad in ["", "x api key", "x:y", "x\r\ny", "ä", &"x".repeat(129)] {
            let e = secret_error(|s| s.uses = vec![SecretUse::Header(bad.into())]);
            assert!(e.contains("header name"), "{bad:?}: {e}");
        }
        for owned in [
            "host",
            "Content-Length",
            "TRANSFER-ENCODING",
            "connection",
            "Upgrade",
            "cookie",
        ] {
            let e = secret_error(|s| s.uses = vec![SecretUse::Header(owned.into())]);
            assert!(e.contains("belongs to the host"), "{owned}: {e}");
        }
        for good in ["X-Auth-Token", "authorization", "x_api~key!"] {
            let ok = with_secret(|s| s.uses = vec![SecretUse::Header(good.into())]);
            assert_eq!(validate(&ok), Ok(()), "{good}");
        }
    }

    #[test]
    fn param_uses_are_short_visible_names() {
        for bad in ["", "a&b", "a=b", "a#b", "a b", "ä", &"p".repeat(65)] {
            let e = secret_error(|s| s.uses = vec![SecretUse::Param(bad.into())]);
            assert!(e.contains("param("), "{bad:?}: {e}");
        }
        for good in ["apiKey", "client_secret", &"p".repeat(64), "a[b]"] {
            let ok = with_secret(|s| s.uses = vec![SecretUse::Param(good.into())]);
            assert_eq!(validate(&ok), Ok(()), "{good}");
        }
    }

    #[test]
    fn oauth2_uses_need_a_token_path_and_origins() {
        let seal = |path: &str, origins: Vec<SecretOrigin>| {
            SecretUse::Oauth2Client(Oauth2Seal {
                token_path: path.into(),
                token_origins: origins,
            })
        };
        let api = || vec![origin("https://api.acme.example")];
        for bad in ["", "token", "/to ken", &format!("/{}", "t".repeat(256))] {
            let e = secret_error(|s| s.uses = vec![seal(bad, api())]);
            assert!(e.contains("token-path"), "{bad:?}: {e}");
        }
        let e = secret_error(|s| s.uses = vec![seal("/token", Vec::new())]);
        assert!(e.contains("token-origins is empty"), "{e}");
        let e = secret_error(|s| s.uses = vec![seal("/token", vec![origin("ftp://x")])]);
        assert!(e.contains("token-origins default-url"), "{e}");
        let e = secret_error(|s| {
            s.uses = vec![seal("/token", vec![SecretOrigin::default()])];
        });
        assert!(e.contains("token-origins has neither"), "{e}");
        assert_eq!(
            validate(&with_secret(|s| s.uses = vec![seal("/t", api())])),
            Ok(())
        );
    }

    #[test]
    fn one_signing_key_and_one_token_endpoint_per_driver() {
        let seal = SecretUse::Oauth2Client(Oauth2Seal {
            token_path: "/token".into(),
            token_origins: vec![origin("https://api.acme.example")],
        });
        for twice in [SecretUse::CloudstackSignature, seal] {
            let mut i = info();
            i.secrets[0].uses = vec![twice.clone()];
            let mut other = i.secrets[0].clone();
            other.name = "other".into();
            i.secrets.push(other);
            let e = validate(&i).unwrap_err();
            assert!(
                e.starts_with("secrets \"other\"") && e.contains("at most one"),
                "{e}"
            );
            // Twice within one secret as well.
            let e = secret_error(|s| s.uses = vec![twice.clone(), twice]);
            assert!(e.contains("at most one"), "{e}");
        }
    }
}
