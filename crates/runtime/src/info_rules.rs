//! Rules for what a driver's `info()` may declare, checked at load before anything uses it.
//!
//! `info` feeds log lines, metric labels (`wasm_ccm_driver_info{driver,version}`), the egress
//! policy, the environment handed to `init` and the annotation keys the controllers let the driver
//! write. A hostile driver could otherwise put megabytes into every `/metrics` scrape, or declare
//! `env-prefixes: ["A", …, "Z"]` and receive the whole process environment (other tools'
//! credentials, `KUBERNETES_*`). Each rule below says why it exists.

use crate::log::shown;
use crate::model::types::ProviderInfo;

/// Longest driver name and provider-ID scheme (a DNS label: they end up in metric labels and
/// provider IDs).
pub const MAX_NAME_BYTES: usize = 63;
/// Longest version string (semver with pre-release and build metadata fits easily).
pub const MAX_VERSION_BYTES: usize = 64;
/// Longest `default-egress` pattern: `https://`, a 253-byte DNS name, `:65535`.
pub const MAX_EGRESS_PATTERN_BYTES: usize = 272;
/// Most `default-egress` patterns a driver may declare.
pub const MAX_DEFAULT_EGRESS: usize = 16;
/// Most environment prefixes.
pub const MAX_ENV_PREFIXES: usize = 8;
/// Most annotation prefixes.
pub const MAX_ANNOTATION_PREFIXES: usize = 16;
/// Shortest environment prefix, `_` included (`AB_`).
pub const MIN_ENV_PREFIX_BYTES: usize = 3;
/// Longest environment prefix or annotation prefix.
pub const MAX_PREFIX_BYTES: usize = 253;

/// Environment names and prefixes of the process, the container runtime, Kubernetes and common
/// tooling that a driver must never receive: neither a declared prefix that these start with
/// (`KUBE_` would not match `KUBERNETES_`, but `KUBERNETES_` or `LC_` would), nor a prefix that
/// starts with one of them (`KUBERNETES_SERVICE_`).
pub const RESERVED_ENV_PREFIXES: &[&str] = &[
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
    Ok(())
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
pub fn check_env_prefix(prefix: &str) -> Result<(), String> {
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
        }
    }

    #[test]
    fn the_shipped_shapes_pass() {
        assert_eq!(validate(&info()), Ok(()));
        let mut i = info();
        i.name = "external-cloudstack".into();
        i.env_prefixes = vec!["CLOUDSTACK_".into(), "PNAP_".into()];
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
}
