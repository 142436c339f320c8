//! `wasm-ccm inspect`.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;
use wasm_ccm_runtime::types::{SecretDecl, SecretLocation, SecretOrigin, SecretUse};

use crate::GlobalArgs;

/// The line `inspect` prints when a driver declares no secret: the host cannot keep its
/// credentials out of the guest, so the operator should know.
pub const IN_GUEST_WARNING: &str =
    "credentials: in guest (the driver declares no secrets; it receives its credentials in clear)";

/// Arguments of `wasm-ccm inspect`.
#[derive(clap::Args, Debug)]
pub struct InspectArgs {
    /// The driver's `.wasm` file.
    driver: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// `wasm-ccm inspect`: compiles the driver and prints what it is.
pub async fn run(global: &GlobalArgs, args: InspectArgs) -> anyhow::Result<ExitCode> {
    let runtime = global.one_shot_runtime()?;
    let compiled = runtime.compile_file(&args.driver).await?;
    let declared = runtime.declarations(&compiled).await?;
    let mut info = declared.info;
    // Checked before anything is printed: a hostile `info` may hold megabytes.
    let verdict = wasm_ccm_runtime::validate_info(&info).and_then(|()| match &declared.plain_env {
        Some(names) => wasm_ccm_runtime::validate_plain_env(&info, names),
        None => Ok(()),
    });
    // Shown only when they passed the rules (bounded, plain names).
    let plain_env = declared.plain_env.filter(|_| verdict.is_ok());
    for field in [
        &mut info.name,
        &mut info.version,
        &mut info.provider_id_scheme,
    ] {
        *field = shown(field);
    }
    for list in [
        &mut info.default_egress,
        &mut info.env_prefixes,
        &mut info.annotation_prefixes,
    ] {
        list.truncate(32);
        list.iter_mut().for_each(|item| *item = shown(item));
    }
    shown_secrets(&mut info.secrets);
    let s = &compiled.surface;
    if args.json {
        let doc = json!({
            "file": compiled.origin,
            "sha256": compiled.sha256,
            "size": compiled.size,
            "wit-version": s.wit_version,
            "exports": s.exports.names(),
            "imports": s.imports,
            "load-time-ms": compiled.load_time.as_secs_f64() * 1000.0,
            "cache": compiled.cache,
            "info": {
                "name": info.name,
                "version": info.version,
                "provider-id-scheme": info.provider_id_scheme,
                "default-egress": info.default_egress,
                "env-prefixes": info.env_prefixes,
                "annotation-prefixes": info.annotation_prefixes,
                "secrets": info.secrets,
            },
            "info-problem": verdict.as_ref().err(),
            "egress-warnings": wasm_ccm_runtime::broad_grant_warnings(&info.default_egress),
            "credentials-in-guest": info.secrets.is_empty(),
            "plain-env": plain_env,
            "instance-listing": s.instance_listing,
        });
        crate::outln!("{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        crate::outln!("file:                {}", compiled.origin)?;
        crate::outln!("sha256:              {}", compiled.sha256)?;
        crate::outln!(
            "size:                {} bytes ({:.1} KiB)",
            compiled.size,
            compiled.size as f64 / 1024.0
        )?;
        crate::outln!("wit:                 wasm-ccm:provider@{}", s.wit_version)?;
        crate::outln!("exports:             {}", s.exports.names().join(", "))?;
        crate::outln!("imports:             {}", s.imports.join(", "))?;
        crate::outln!(
            "load:                {:.1} ms ({})",
            compiled.load_time.as_secs_f64() * 1000.0,
            format!("cache {:?}", compiled.cache).to_lowercase()
        )?;
        crate::outln!("name:                {}", info.name)?;
        crate::outln!("version:             {}", info.version)?;
        crate::outln!("provider-id scheme:  {}://", info.provider_id_scheme)?;
        crate::outln!(
            "default egress:      {}",
            if info.default_egress.is_empty() {
                "(none)".to_string()
            } else {
                info.default_egress.join(", ")
            }
        )?;
        crate::outln!(
            "env prefixes:        {}",
            if info.env_prefixes.is_empty() {
                "(none)".to_string()
            } else {
                info.env_prefixes.join(", ")
            }
        )?;
        crate::outln!(
            "annotation prefixes: {}",
            if info.annotation_prefixes.is_empty() {
                "(none)".to_string()
            } else {
                info.annotation_prefixes.join(", ")
            }
        )?;
        for line in secret_lines(&info.secrets) {
            crate::outln!("{line}")?;
        }
        crate::outln!(
            "environment:         {}",
            match &plain_env {
                Some(names) if names.is_empty() =>
                    "allow-list: no plain variable (and the secrets' places)".to_string(),
                Some(names) => format!("allow-list: {} (and the secrets' places)", names.join(", ")),
                None => "every variable with one of the env prefixes (the driver names none: contract 0.2.1 environment)".to_string(),
            }
        )?;
        crate::outln!(
            "instance listing:    {}",
            if s.instance_listing {
                "exported (contract 0.2.2): the host lists once per pass where the driver implements it (the SDKs' default answers not-implemented)"
            } else {
                "not exported: every node is asked about alone"
            }
        )?;
        for warning in wasm_ccm_runtime::broad_grant_warnings(&info.default_egress) {
            crate::outln!("warning:             default egress: {warning}")?;
        }
        if info.secrets.is_empty() {
            crate::outln!("warning:             {IN_GUEST_WARNING}")?;
        }
        match &verdict {
            Ok(()) => crate::outln!("info:                valid")?,
            Err(e) => {
                crate::outln!("info:                INVALID, the host will not load it: {e}")?
            }
        }
    }
    // A driver the host refuses to load is not fit to ship: fail scripts that inspect it.
    Ok(if verdict.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Cuts the secret declarations for printing as the other lists are: at most 32 entries per
/// list, every string through [`shown`] (an invalid `info` may hold anything).
fn shown_secrets(secrets: &mut Vec<SecretDecl>) {
    fn location(l: &mut SecretLocation) {
        match l {
            SecretLocation::Env(s) | SecretLocation::Json(s) => *s = shown(s),
            SecretLocation::Ini((section, key)) => {
                *section = shown(section);
                *key = shown(key);
            }
        }
    }
    fn origin(o: &mut SecretOrigin) {
        o.settings.truncate(32);
        o.settings.iter_mut().for_each(location);
        o.default_url = shown(&o.default_url);
    }
    secrets.truncate(32);
    for s in secrets {
        s.name = shown(&s.name);
        s.at.truncate(32);
        s.at.iter_mut().for_each(location);
        origin(&mut s.origin);
        s.uses.truncate(32);
        for u in &mut s.uses {
            match u {
                SecretUse::Header(n) | SecretUse::Param(n) => *n = shown(n),
                SecretUse::Oauth2Client(seal) => {
                    seal.token_path = shown(&seal.token_path);
                    seal.token_origins.truncate(32);
                    seal.token_origins.iter_mut().for_each(origin);
                }
                SecretUse::Bearer
                | SecretUse::BasicUser
                | SecretUse::BasicPassword
                | SecretUse::CloudstackSignature => {}
            }
        }
    }
}

/// `env(NAME)`, `ini(Section, key)`, `json(/pointer)`.
fn location_text(l: &SecretLocation) -> String {
    match l {
        SecretLocation::Env(name) => format!("env({name})"),
        SecretLocation::Ini((section, key)) => format!("ini({section}, {key})"),
        SecretLocation::Json(pointer) => format!("json({pointer})"),
    }
}

/// The settings in order, then the default URL (`env(X), json(/u), else https://…`).
fn origin_text(o: &SecretOrigin) -> String {
    let mut parts: Vec<String> = o.settings.iter().map(location_text).collect();
    if o.default_url.is_empty() {
        // No default: the operator must set one of the settings.
        parts.push("(required)".into());
        parts.join(", ")
    } else if parts.is_empty() {
        o.default_url.clone()
    } else {
        format!("{}, else {}", parts.join(", "), o.default_url)
    }
}

/// A use in the WIT's spelling, the token endpoint's with its path and token origins.
fn use_text(u: &SecretUse) -> String {
    match u {
        SecretUse::Bearer => "bearer".into(),
        SecretUse::Header(name) => format!("header({name})"),
        SecretUse::Param(name) => format!("param({name})"),
        SecretUse::BasicUser => "basic-user".into(),
        SecretUse::BasicPassword => "basic-password".into(),
        SecretUse::CloudstackSignature => "cloudstack-signature".into(),
        SecretUse::Oauth2Client(seal) => format!(
            "oauth2-client({}, token to {})",
            seal.token_path,
            seal.token_origins
                .iter()
                .map(|o| format!("[{}]", origin_text(o)))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    }
}

/// The human output's lines for the declared secrets: the name, then where it is, where it may
/// go and how.
fn secret_lines(secrets: &[SecretDecl]) -> Vec<String> {
    if secrets.is_empty() {
        return vec!["secrets:             (none)".into()];
    }
    let mut lines = Vec::with_capacity(secrets.len() * 4);
    for (i, s) in secrets.iter().enumerate() {
        let head = if i == 0 { "secrets:" } else { "" };
        lines.push(format!("{head:<21}{}", s.name));
        let join = |items: Vec<String>| items.join(", ");
        lines.push(format!(
            "{:<21}  at:     {}",
            "",
            join(s.at.iter().map(location_text).collect())
        ));
        lines.push(format!("{:<21}  origin: {}", "", origin_text(&s.origin)));
        lines.push(format!(
            "{:<21}  uses:   {}",
            "",
            join(s.uses.iter().map(use_text).collect())
        ));
    }
    lines
}

/// At most 128 characters of a driver-supplied string, escaped when it has control characters.
fn shown(value: &str) -> String {
    let head: String = value.chars().take(128).collect();
    let head = if head.chars().any(char::is_control) {
        format!("{head:?}")
    } else {
        head
    };
    if head.len() < value.len() {
        format!("{head}… ({} bytes)", value.len())
    } else {
        head
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_ccm_runtime::types::Oauth2Seal;

    #[test]
    fn secrets_are_listed_with_locations_origin_and_uses() {
        let auth = SecretOrigin {
            settings: vec![
                SecretLocation::Env("PNAP_AUTH_URL".into()),
                SecretLocation::Json("/auth-url".into()),
            ],
            default_url: "https://auth.phoenixnap.com".into(),
        };
        let secrets = vec![
            SecretDecl {
                name: "client-secret".into(),
                at: vec![
                    SecretLocation::Env("PNAP_CLIENT_SECRET".into()),
                    SecretLocation::Json("/clientSecret".into()),
                ],
                origin: auth,
                uses: vec![
                    SecretUse::BasicPassword,
                    SecretUse::Param("client_secret".into()),
                    SecretUse::Oauth2Client(Oauth2Seal {
                        token_path: "/token".into(),
                        token_origins: vec![SecretOrigin {
                            settings: Vec::new(),
                            default_url: "https://api.phoenixnap.com".into(),
                        }],
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
                uses: vec![SecretUse::CloudstackSignature],
            },
        ];
        let lines = secret_lines(&secrets);
        let expected = [
            "secrets:             client-secret",
            "                       at:     env(PNAP_CLIENT_SECRET), json(/clientSecret)",
            "                       origin: env(PNAP_AUTH_URL), json(/auth-url), else https://auth.phoenixnap.com",
            "                       uses:   basic-password, param(client_secret), oauth2-client(/token, token to [https://api.phoenixnap.com])",
            "                     secret-key",
            "                       at:     ini(Global, secret-key)",
            "                       origin: ini(Global, api-url), (required)",
            "                       uses:   cloudstack-signature",
        ];
        assert_eq!(lines, expected);
        assert_eq!(secret_lines(&[]), ["secrets:             (none)"]);
        // The JSON output is the model's serialisation, in the WIT's names.
        let v = serde_json::to_value(&secrets[1]).expect("serialises");
        assert_eq!(
            v,
            json!({
                "name": "secret-key",
                "at": [{"ini": ["Global", "secret-key"]}],
                "origin": {"settings": [{"ini": ["Global", "api-url"]}], "default-url": ""},
                "uses": ["cloudstack-signature"],
            })
        );
    }

    #[test]
    fn a_hostile_declaration_is_cut_before_it_is_printed() {
        let mut secrets = vec![
            SecretDecl {
                name: "n".repeat(4096),
                at: vec![SecretLocation::Env("X\u{1b}[2J".into()); 40],
                origin: SecretOrigin::default(),
                uses: vec![SecretUse::Header("h".repeat(4096)); 40],
            };
            40
        ];
        secrets[0].name = "n".repeat(1 << 20);
        shown_secrets(&mut secrets);
        assert_eq!(secrets.len(), 32);
        assert_eq!(secrets[0].at.len(), 32);
        assert_eq!(secrets[0].uses.len(), 32);
        let text = secret_lines(&secrets).join("\n");
        assert!(text.len() < 200_000, "{} bytes", text.len());
        assert!(!text.contains('\u{1b}'), "control characters are escaped");
    }
}
