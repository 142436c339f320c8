//! `wasm-ccm-dev new <name> --lang rust|python|js [--dir PATH]`: a driver project that builds
//! with one command and passes `wasm-ccm-dev conformance` as generated, with its scenario, its
//! unit tests (Rust) and a CI workflow.
//!
//! The project vendors the WIT contract and the SDK of its language under `wasm-ccm/`, copied
//! from the sources this binary was built from: the SDKs are not published to a registry, and a
//! vendored copy makes the project build anywhere (CI included) with its language's tools alone,
//! exactly against the contract this kit's conformance checks. `files.rs` has the file list.

mod files;
mod lang;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use wasm_ccm_runtime::types::ProviderInfo;

pub(crate) use lang::Lang;

/// Arguments of `wasm-ccm-dev new`.
#[derive(clap::Args, Debug)]
pub(crate) struct NewArgs {
    /// The driver's name: 2-63 lowercase letters, digits and '-', starting with a letter. It
    /// becomes the provider name (`--cloud-provider`), the provider-ID scheme (`<name>://…`) and
    /// the environment prefix (`MY_CLOUD_` for `my-cloud`).
    name: String,
    /// The language of the project.
    #[arg(long, value_enum)]
    lang: Lang,
    /// The project's directory: absent or empty (default: `./<name>`).
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// Longest name: a DNS label, as the host requires of provider names and schemes.
const MAX_NAME: usize = 63;

/// Names cargo refuses as a package (Rust keywords and the built-in crates). Refused in every
/// language so a name means the same project whatever the language.
const RUST_RESERVED: &[&str] = &[
    "as",
    "async",
    "await",
    "box",
    "break",
    "const",
    "continue",
    "crate",
    "dyn",
    "else",
    "enum",
    "extern",
    "false",
    "final",
    "fn",
    "for",
    "gen",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "macro",
    "match",
    "mod",
    "move",
    "mut",
    "override",
    "priv",
    "pub",
    "ref",
    "return",
    "self",
    "static",
    "struct",
    "super",
    "trait",
    "true",
    "try",
    "type",
    "typeof",
    "unsafe",
    "unsized",
    "use",
    "virtual",
    "where",
    "while",
    "yield",
    "abstract",
    "become",
    "do",
    "alloc",
    "core",
    "std",
    "test",
    "proc_macro",
];

/// Generates the project; prints where it is and the commands to build and check it.
pub(crate) fn run(args: NewArgs) -> anyhow::Result<ExitCode> {
    check_name(&args.name)?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    check_target(&dir)?;
    let files = files::project(args.lang, &args.name).map_err(anyhow::Error::msg)?;
    write_project(&dir, &files)?;

    let krate = args.name.replace('-', "_");
    let build = files::build(args.lang, &krate);
    println!(
        "created the {} driver {} in {} ({} files)",
        args.lang.title(),
        args.name,
        dir.display(),
        files.len()
    );
    println!("next:");
    println!("  cd {}", dir.display());
    println!("  {}", build.command);
    if args.lang == Lang::Rust {
        println!("  cargo test");
    }
    println!(
        "  wasm-ccm-dev conformance {} --scenario conformance.yaml",
        build.wasm
    );
    Ok(ExitCode::SUCCESS)
}

/// Refuses a name the host, cargo or the generated files could not use, saying which rule it
/// breaks and what a valid name looks like.
fn check_name(name: &str) -> anyhow::Result<()> {
    let rule = format!(
        "a driver name is 2-{MAX_NAME} characters of lowercase letters, digits and '-', starts \
         with a letter and does not end with '-' (e.g. `my-cloud`): it becomes the provider name, \
         the provider-ID scheme `<name>://` and the environment prefix (`MY_CLOUD_`)"
    );
    let problem = if name.len() < 2 {
        Some("it is shorter than 2 characters".to_string())
    } else if name.len() > MAX_NAME {
        Some(format!("it is {} characters long", name.len()))
    } else if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        Some(format!("it contains {c:?}"))
    } else if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        Some("it does not start with a letter".to_string())
    } else if name.ends_with('-') {
        Some("it ends with '-'".to_string())
    } else {
        None
    };
    if let Some(problem) = problem {
        bail!("invalid driver name {name:?}: {problem}; {rule}");
    }
    if RUST_RESERVED.contains(&name) {
        bail!(
            "invalid driver name {name:?}: it is a Rust keyword or built-in crate, which cargo \
             refuses as a package name; choose another name (e.g. `{name}-cloud`)"
        );
    }
    // The host's own rules for what `info()` returns, so the generated driver is never refused
    // at load time (e.g. a name whose environment prefix is reserved, such as `path`).
    let stem = files::env_stem(name);
    let info = ProviderInfo {
        name: name.to_string(),
        version: "0.1.0".into(),
        provider_id_scheme: name.to_string(),
        default_egress: vec!["https://api.example.com".into()],
        env_prefixes: vec![format!("{stem}_")],
        annotation_prefixes: vec![format!("{name}.example.com/")],
        secrets: Vec::new(),
    };
    if let Err(e) = wasm_ccm_runtime::validate_info(&info) {
        bail!(
            "invalid driver name {name:?}: the driver it generates would be refused by the host \
             ({e}); choose another name"
        );
    }
    Ok(())
}

/// Refuses a target that exists and is not an empty directory; nothing is changed then.
fn check_target(dir: &Path) -> anyhow::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => bail!(
            "cannot inspect {}: {e}; choose another --dir",
            dir.display()
        ),
        Ok(meta) if !meta.is_dir() => bail!(
            "{} exists and is not a directory; nothing was changed: choose another --dir",
            dir.display()
        ),
        Ok(_) => {
            let mut entries = std::fs::read_dir(dir)
                .with_context(|| format!("cannot read {}; choose another --dir", dir.display()))?;
            if entries.next().is_some() {
                bail!(
                    "{} is not empty; nothing was changed: `new` writes only into a new or empty \
                     directory, so choose another --dir (or move its files away)",
                    dir.display()
                );
            }
            Ok(())
        }
    }
}

/// Writes the project into a staging directory beside `dir` and moves it into place whole, so a
/// failure leaves no half-written project (and an empty `dir` as it was).
fn write_project(dir: &Path, files: &[files::File]) -> anyhow::Result<()> {
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).with_context(|| {
        format!(
            "cannot create {}; create it or choose another --dir",
            parent.display()
        )
    })?;
    let base = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{} does not name a directory; give --dir a path ending in the project's name",
                dir.display()
            )
        })?;
    let stage = parent.join(format!(".{base}.new-{}", std::process::id()));
    let result = fill(&stage, files).and_then(|()| place(&stage, dir));
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&stage);
    }
    result
}

/// Writes `files` under `stage` (created).
fn fill(stage: &Path, files: &[files::File]) -> anyhow::Result<()> {
    for file in files {
        let path = stage.join(&file.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, &file.text)
            .with_context(|| format!("cannot write {}", path.display()))?;
        #[cfg(unix)]
        if file.executable {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("cannot make {} executable", path.display()))?;
        }
    }
    Ok(())
}

/// Moves the finished `stage` to `dir`, which is absent or an empty directory.
fn place(stage: &Path, dir: &Path) -> anyhow::Result<()> {
    if dir.is_dir() {
        // Checked empty before anything was written; `remove_dir` refuses a directory someone
        // filled since, which is then left as it is.
        std::fs::remove_dir(dir).with_context(|| {
            format!(
                "cannot replace the empty directory {}; nothing was written there",
                dir.display()
            )
        })?;
    }
    std::fs::rename(stage, dir).with_context(|| {
        format!(
            "cannot move the generated project from {} to {}",
            stage.display(),
            dir.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_rules_of_provider_names() {
        for good in ["my-cloud", "ab", "acme2", "a-b-c"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for (bad, why) in [
            ("", "shorter than 2"),
            ("a", "shorter than 2"),
            ("MyCloud", "contains 'M'"),
            ("my_cloud", "contains '_'"),
            ("my cloud", "contains ' '"),
            ("2cloud", "does not start with a letter"),
            ("-cloud", "does not start with a letter"),
            ("cloud-", "ends with '-'"),
            ("test", "Rust keyword"),
            ("kubernetes", "refused by the host"),
            ("path", "refused by the host"),
        ] {
            let e = check_name(bad).expect_err(bad).to_string();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(
                e.contains("choose another name") || e.contains("e.g. `my-cloud`"),
                "{e}"
            );
        }
        let long = "a".repeat(MAX_NAME + 1);
        assert!(check_name(&long).is_err());
    }
}
