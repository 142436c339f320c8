//! What a driver sees of the process environment in `init`.
//!
//! The host first keeps only the variables with one of the driver's `env-prefixes` (`load`).
//! Then:
//! - a driver that declares its plain variables (`environment.plain-variables`, contract 0.2.1)
//!   gets an **allow-list**: the names it declared, the places of its declared secrets (as
//!   placeholders) and the variables its secrets' origins are read from. Nothing else under its
//!   prefix reaches it, whatever the name: a credential the operator keeps there as
//!   `ACME_DB_PASS`, `ACME_PWD` or `ACME_X` stays out.
//! - a driver that does not (built against 0.2.0, or answering `none`) keeps 0.2.0's behaviour,
//!   which the compatibility promise fixes: every prefixed variable, minus, when it declares
//!   secrets, those whose names look like credentials (`is_secret_env_name`, a heuristic;
//!   `load` warns about such a driver).

use crate::model::types::{ProviderInfo, SecretDecl, SecretLocation, SecretUse};
use crate::text::shown;

/// Most plain variables a driver may declare: more than any cloud's SDK reads, few enough that
/// `inspect` lists them on a screen.
pub(crate) const MAX_PLAIN_VARIABLES: usize = 64;
/// Longest variable name (the bound `env` secret locations have, `info_rules`).
pub(crate) const MAX_PLAIN_VARIABLE_BYTES: usize = 253;

/// Checks a driver's declared plain variables against its `info`: each an exact name of
/// `A-Z`, `0-9` and `_` under one of the `env-prefixes`, none twice, none a place a secret is
/// read from (a value cannot be both sealed and handed over in clear). The error names the
/// variable and the rule.
pub fn validate(info: &ProviderInfo, names: &[String]) -> Result<(), String> {
    if names.len() > MAX_PLAIN_VARIABLES {
        return Err(format!(
            "environment.plain-variables: {} names, at most {MAX_PLAIN_VARIABLES}",
            names.len()
        ));
    }
    for (i, name) in names.iter().enumerate() {
        let plain = !name.is_empty()
            && name.len() <= MAX_PLAIN_VARIABLE_BYTES
            && name
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
        if !plain {
            return Err(format!(
                "environment.plain-variables {}: a variable name is 1-{MAX_PLAIN_VARIABLE_BYTES} bytes of A-Z, 0-9 and _; name it exactly",
                shown(name)
            ));
        }
        if !info
            .env_prefixes
            .iter()
            .any(|p| !p.is_empty() && name.starts_with(p.as_str()))
        {
            return Err(format!(
                "environment.plain-variables {name}: not under one of the env-prefixes {:?}; only those variables reach a driver",
                info.env_prefixes
            ));
        }
        if names[..i].contains(name) {
            return Err(format!(
                "environment.plain-variables {name}: named twice; name each variable once"
            ));
        }
        if let Some(decl) = info
            .secrets
            .iter()
            .find(|d| d.at.iter().any(|at| is_env(at, name)))
        {
            return Err(format!(
                "environment.plain-variables {name}: it is where secret {:?} is read from, so the host seals it; remove it from the plain variables",
                decl.name
            ));
        }
    }
    Ok(())
}

/// Whether the variable `name` (already under one of the driver's prefixes) reaches `init`.
/// `plain` is the driver's declared plain variables, `None` when it declares none.
pub(crate) fn admitted(decls: &[SecretDecl], plain: Option<&[String]>, name: &str) -> bool {
    match plain {
        Some(names) => names.iter().any(|n| n == name) || read_by_host(decls, name),
        // 0.2.0's rule (see the module doc).
        None if decls.is_empty() => true,
        None => read_by_host(decls, name) || !crate::config_secrets::is_secret_env_name(name),
    }
}

/// Whether a declaration names `name`: as a secret's place (the guest gets its placeholder) or
/// as a setting of an origin (a URL the driver also needs to build its requests).
fn read_by_host(decls: &[SecretDecl], name: &str) -> bool {
    decls.iter().any(|d| {
        let token_origins = d.uses.iter().flat_map(|u| match u {
            SecretUse::Oauth2Client(seal) => seal.token_origins.as_slice(),
            _ => &[],
        });
        d.at.iter()
            .chain(&d.origin.settings)
            .chain(token_origins.flat_map(|o| &o.settings))
            .any(|at| is_env(at, name))
    })
}

fn is_env(at: &SecretLocation, name: &str) -> bool {
    matches!(at, SecretLocation::Env(n) if n == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::types::{Oauth2Seal, SecretOrigin};

    fn decls() -> Vec<SecretDecl> {
        vec![SecretDecl {
            name: "client".into(),
            at: vec![SecretLocation::Env("ACME_CLIENT_SECRET".into())],
            origin: SecretOrigin {
                settings: vec![SecretLocation::Env("ACME_AUTH_URL".into())],
                default_url: String::new(),
            },
            uses: vec![SecretUse::Oauth2Client(Oauth2Seal {
                token_path: "/token".into(),
                token_origins: vec![SecretOrigin {
                    settings: vec![SecretLocation::Env("ACME_API_URL".into())],
                    default_url: String::new(),
                }],
            })],
        }]
    }

    fn info() -> ProviderInfo {
        ProviderInfo {
            name: "acme".into(),
            env_prefixes: vec!["ACME_".into()],
            secrets: decls(),
            ..ProviderInfo::default()
        }
    }

    #[test]
    fn an_allow_list_admits_the_declared_names_and_the_declarations_places_only() {
        let plain = ["ACME_REGION".to_string()];
        let admitted = |n: &str| admitted(&decls(), Some(&plain), n);
        for name in [
            "ACME_REGION",
            "ACME_CLIENT_SECRET",
            "ACME_AUTH_URL",
            "ACME_API_URL",
        ] {
            assert!(admitted(name), "{name}");
        }
        // Credentials under names the heuristic misses, and ordinary names alike.
        for name in [
            "ACME_DB_PASS",
            "ACME_PWD",
            "ACME_CREDS",
            "ACME_X",
            "ACME_REGION2",
        ] {
            assert!(!admitted(name), "{name}");
        }
    }

    #[test]
    fn without_an_allow_list_the_0_2_0_rule_holds() {
        // Control for the test above: the same names pass the heuristic.
        assert!(admitted(&decls(), None, "ACME_DB_PASS"));
        assert!(admitted(&decls(), None, "ACME_X"));
        assert!(!admitted(&decls(), None, "ACME_API_TOKEN"));
        // A driver without secrets gets its whole prefix, credential names included.
        assert!(admitted(&[], None, "ACME_API_TOKEN"));
        // …unless it declares its plain variables.
        assert!(!admitted(&[], Some(&[]), "ACME_API_TOKEN"));
    }

    #[test]
    fn declared_names_are_exact_prefixed_unique_and_never_a_secret() {
        let ok = |names: &[&str]| {
            validate(
                &info(),
                &names.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
        };
        ok(&["ACME_REGION", "ACME_TIMEOUT_SECONDS"]).unwrap();
        ok(&[]).unwrap();
        for (names, says) in [
            (vec!["ACME_*"], "A-Z, 0-9 and _"),
            (vec!["acme_region"], "A-Z, 0-9 and _"),
            (vec![""], "A-Z, 0-9 and _"),
            (vec!["OTHER_REGION"], "env-prefixes"),
            (vec!["ACME_A", "ACME_A"], "named twice"),
            (vec!["ACME_CLIENT_SECRET"], "secret \"client\""),
        ] {
            let e = ok(&names).unwrap_err();
            assert!(e.contains(says), "{names:?}: {e}");
        }
        let long = "ACME_".to_string() + &"A".repeat(MAX_PLAIN_VARIABLE_BYTES);
        assert!(ok(&[&long]).unwrap_err().contains("1-253 bytes"));
        let many: Vec<String> = (0..=MAX_PLAIN_VARIABLES)
            .map(|i| format!("ACME_V{i}"))
            .collect();
        assert!(validate(&info(), &many).unwrap_err().contains("at most 64"));
    }
}
