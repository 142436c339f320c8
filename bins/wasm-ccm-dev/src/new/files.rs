//! The files `wasm-ccm-dev new` writes: the templates of `templates/<lang>/` (with the driver's
//! name substituted) and the vendored contract and SDK, all embedded at build time so an
//! installed kit generates projects anywhere.

use std::collections::BTreeMap;

use super::lang::Lang;

/// A file of the generated project.
#[derive(Debug)]
pub(super) struct File {
    /// Its path in the project, `/`-separated.
    pub(super) path: String,
    /// Its content.
    pub(super) text: String,
    /// Whether it is a script the author runs (`build.sh`).
    pub(super) executable: bool,
}

/// `(path in the repository, content)` of a file of this repository, embedded.
macro_rules! repo_file {
    ($path:literal) => {
        ($path, include_str!(concat!("../../../../", $path)))
    };
}

/// `(path in the project, content)` of a template, embedded from `templates/`.
macro_rules! template {
    ($project_path:literal, $template:literal) => {
        (
            $project_path,
            include_str!(concat!("../../templates/", $template)),
        )
    };
}

/// The WIT contract, vendored into every project as `wasm-ccm/wit/`.
pub(super) const WIT: &[(&str, &str)] = &[repo_file!("wit/provider.wit")];

/// The Rust SDK's sources, vendored as `wasm-ccm/sdk/rust/src/` (its manifest is rewritten, see
/// [`standalone_sdk_manifest`]).
pub(super) const SDK_RUST: &[(&str, &str)] = &[
    repo_file!("sdk/rust/src/cluster.rs"),
    repo_file!("sdk/rust/src/error.rs"),
    repo_file!("sdk/rust/src/export.rs"),
    repo_file!("sdk/rust/src/http.rs"),
    repo_file!("sdk/rust/src/lib.rs"),
    repo_file!("sdk/rust/src/listing.rs"),
    repo_file!("sdk/rust/src/log.rs"),
    repo_file!("sdk/rust/src/selector.rs"),
    repo_file!("sdk/rust/src/traits.rs"),
    repo_file!("sdk/rust/src/types.rs"),
];

/// The Python SDK, vendored as `wasm-ccm/sdk/python/`, with the pinned build tool.
pub(super) const SDK_PYTHON: &[(&str, &str)] = &[
    repo_file!("sdk/python/requirements-build.txt"),
    repo_file!("sdk/python/wasm_ccm_sdk/__init__.py"),
    repo_file!("sdk/python/wasm_ccm_sdk/cluster.py"),
    repo_file!("sdk/python/wasm_ccm_sdk/environment.py"),
    repo_file!("sdk/python/wasm_ccm_sdk/errors.py"),
    repo_file!("sdk/python/wasm_ccm_sdk/export.py"),
    repo_file!("sdk/python/wasm_ccm_sdk/http.py"),
    repo_file!("sdk/python/wasm_ccm_sdk/listing.py"),
    repo_file!("sdk/python/wasm_ccm_sdk/log.py"),
    repo_file!("sdk/python/wasm_ccm_sdk/secrets.py"),
];

/// The JavaScript SDK with its typings, vendored as `wasm-ccm/sdk/js/`.
pub(super) const SDK_JS: &[(&str, &str)] = &[
    repo_file!("sdk/js/bundle.config.mjs"),
    repo_file!("sdk/js/index.d.ts"),
    repo_file!("sdk/js/index.js"),
    repo_file!("sdk/js/package.json"),
    repo_file!("sdk/js/utf8.js"),
    repo_file!("sdk/js/types/full-driver.d.ts"),
    repo_file!("sdk/js/types/interfaces/wasm-ccm-provider-cluster.d.ts"),
    repo_file!("sdk/js/types/interfaces/wasm-ccm-provider-environment.d.ts"),
    repo_file!("sdk/js/types/interfaces/wasm-ccm-provider-http.d.ts"),
    repo_file!("sdk/js/types/interfaces/wasm-ccm-provider-instance-listing.d.ts"),
    repo_file!("sdk/js/types/interfaces/wasm-ccm-provider-instances.d.ts"),
    repo_file!("sdk/js/types/interfaces/wasm-ccm-provider-load-balancer.d.ts"),
    repo_file!("sdk/js/types/interfaces/wasm-ccm-provider-log.d.ts"),
    repo_file!("sdk/js/types/interfaces/wasm-ccm-provider-provider.d.ts"),
    repo_file!("sdk/js/types/interfaces/wasm-ccm-provider-routes.d.ts"),
    repo_file!("sdk/js/types/interfaces/wasm-ccm-provider-types.d.ts"),
];

/// Sources the pins and the toolchain are read from (never written to a project as they are).
const RUST_TOOLCHAIN: &str = include_str!("../../../../rust-toolchain.toml");
const WORKSPACE_MANIFEST: &str = include_str!("../../../../Cargo.toml");
const SDK_RUST_MANIFEST: &str = include_str!("../../../../sdk/rust/Cargo.toml");
const JS_TOOLS: &str = include_str!("../../../../sdk/js/tools/package.json");
/// The workspace's lock: a Rust project starts from the dependency versions wasm-ccm is tested
/// with (cargo drops the entries the project does not use on its first build).
const WORKSPACE_LOCK: &str = include_str!("../../../../Cargo.lock");

/// Templates every language shares.
const COMMON: &[(&str, &str)] = &[
    template!("conformance.yaml", "common/conformance.yaml"),
    template!("wasm-ccm/README.md", "common/vendor-README.md"),
];

const RUST: &[(&str, &str)] = &[
    template!("Cargo.toml", "rust/Cargo.toml"),
    template!("rust-toolchain.toml", "rust/rust-toolchain.toml"),
    template!("src/lib.rs", "rust/src/lib.rs"),
    template!("README.md", "rust/README.md"),
    template!(".gitignore", "rust/gitignore"),
    template!(".github/workflows/ci.yml", "rust/ci.yml"),
];

const PYTHON: &[(&str, &str)] = &[
    template!("src/app.py", "python/src/app.py"),
    template!("build.sh", "python/build.sh"),
    template!("requirements.txt", "python/requirements.txt"),
    template!("README.md", "python/README.md"),
    template!(".gitignore", "python/gitignore"),
    template!(".github/workflows/ci.yml", "python/ci.yml"),
];

const JS: &[(&str, &str)] = &[
    template!("src/driver.js", "js/src/driver.js"),
    template!("build.sh", "js/build.sh"),
    template!("package.json", "js/package.json"),
    template!("README.md", "js/README.md"),
    template!(".gitignore", "js/gitignore"),
    template!(".github/workflows/ci.yml", "js/ci.yml"),
];

/// What a language's project is built with, and where the component lands.
pub(super) struct Build {
    /// The one command that builds the component, run in the project directory.
    pub(super) command: &'static str,
    /// The component, relative to the project directory.
    pub(super) wasm: String,
}

/// The build command and the component of a `lang` project whose crate-style name is `krate`.
pub(super) fn build(lang: Lang, krate: &str) -> Build {
    match lang {
        Lang::Rust => Build {
            command: "cargo build --release --target wasm32-wasip2",
            wasm: format!("target/wasm32-wasip2/release/{krate}.wasm"),
        },
        Lang::Python | Lang::Js => Build {
            command: "./build.sh",
            wasm: format!("build/{krate}.wasm"),
        },
    }
}

/// The placeholders of the templates (`{{name}}`, …) and their values for one project.
pub(super) fn values(lang: Lang, name: &str) -> Result<BTreeMap<&'static str, String>, String> {
    let krate = name.replace('-', "_");
    let build = build(lang, &krate);
    let (jco, preview2_shim) = js_pins()?;
    Ok(BTreeMap::from([
        ("name", name.to_string()),
        ("crate", krate),
        ("ENV", env_stem(name)),
        ("lang", lang.dir().to_string()),
        ("lang_title", lang.title().to_string()),
        ("build", build.command.to_string()),
        ("wasm", build.wasm),
        ("kit_version", env!("CARGO_PKG_VERSION").to_string()),
        ("repository", env!("CARGO_PKG_REPOSITORY").to_string()),
        ("toolchain", toolchain()?),
        ("componentize_py", componentize_py()?),
        ("jco", jco),
        ("preview2_shim", preview2_shim),
    ]))
}

/// The environment variable stem of a driver name: `my-cloud` → `MY_CLOUD` (its prefix is
/// `MY_CLOUD_`).
pub(super) fn env_stem(name: &str) -> String {
    name.to_ascii_uppercase().replace('-', "_")
}

/// Every file of a `lang` project named `name`.
pub(super) fn project(lang: Lang, name: &str) -> Result<Vec<File>, String> {
    let values = values(lang, name)?;
    let templates = match lang {
        Lang::Rust => RUST,
        Lang::Python => PYTHON,
        Lang::Js => JS,
    };
    let mut files = Vec::new();
    for (path, text) in COMMON.iter().chain(templates) {
        files.push(File {
            path: path.to_string(),
            text: substitute(path, text, &values)?,
            executable: path.ends_with(".sh"),
        });
    }
    let (sdk, vendored_at): (&[(&str, &str)], &str) = match lang {
        Lang::Rust => (SDK_RUST, "sdk/rust/"),
        Lang::Python => (SDK_PYTHON, "sdk/python/"),
        Lang::Js => (SDK_JS, "sdk/js/"),
    };
    for (path, text) in WIT.iter().chain(sdk) {
        debug_assert!(path.starts_with("wit/") || path.starts_with(vendored_at));
        files.push(vendored(path, text.to_string()));
    }
    if lang == Lang::Rust {
        files.push(vendored("sdk/rust/Cargo.toml", standalone_sdk_manifest()?));
        files.push(File {
            path: "Cargo.lock".to_string(),
            text: WORKSPACE_LOCK.to_string(),
            executable: false,
        });
    }
    Ok(files)
}

/// A file of this repository, vendored under `wasm-ccm/` at the same relative path (so the Rust
/// SDK finds the WIT at `../../wit`, as in the repository).
fn vendored(repo_path: &'static str, text: String) -> File {
    File {
        path: format!("wasm-ccm/{repo_path}"),
        text,
        executable: false,
    }
}

/// Replaces every `{{key}}` of `text`; a placeholder without a value is an error (a template
/// names a value this code does not provide). `${{ … }}` of GitHub workflows, with spaces, is not
/// a placeholder.
pub(super) fn substitute(
    path: &str,
    text: &str,
    values: &BTreeMap<&'static str, String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let key_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        if key_len > 0 && after[key_len..].starts_with("}}") {
            let key = &after[..key_len];
            let value = values.get(key).ok_or_else(|| {
                format!(
                    "the template {path} names {{{{{key}}}}}, which has no value: this \
                     wasm-ccm-dev build is broken; report it"
                )
            })?;
            out.push_str(value);
            rest = &after[key_len + 2..];
        } else {
            out.push_str("{{");
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The compiler this repository pins (`channel` of `rust-toolchain.toml`).
fn toolchain() -> Result<String, String> {
    quoted_value(RUST_TOOLCHAIN, "channel")
        .ok_or_else(|| broken("rust-toolchain.toml has no `channel = \"…\"`"))
}

/// The componentize-py version `sdk/python/requirements-build.txt` pins.
fn componentize_py() -> Result<String, String> {
    SDK_PYTHON
        .iter()
        .find(|(path, _)| path.ends_with("requirements-build.txt"))
        .and_then(|(_, text)| {
            text.lines()
                .find_map(|l| l.trim().strip_prefix("componentize-py=="))
                .map(str::to_string)
        })
        .ok_or_else(|| broken("sdk/python/requirements-build.txt pins no componentize-py"))
}

/// The jco and preview2-shim versions `sdk/js/tools/package.json` pins.
fn js_pins() -> Result<(String, String), String> {
    let tools: serde_json::Value = serde_json::from_str(JS_TOOLS)
        .map_err(|e| broken(&format!("sdk/js/tools/package.json is not JSON: {e}")))?;
    let pin = |section: &str, package: &str| {
        tools[section][package]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| {
                broken(&format!(
                    "sdk/js/tools/package.json has no {section}.{package}"
                ))
            })
    };
    Ok((
        pin("devDependencies", "@bytecodealliance/jco")?,
        pin("overrides", "@bytecodealliance/preview2-shim")?,
    ))
}

/// The vendored Rust SDK's manifest: `sdk/rust/Cargo.toml` with every `x.workspace = true`
/// replaced by the workspace's value, and without `[lints]` (the workspace's lint policy is not
/// the driver author's).
pub(super) fn standalone_sdk_manifest() -> Result<String, String> {
    let package = section(WORKSPACE_MANIFEST, "workspace.package");
    let dependencies = section(WORKSPACE_MANIFEST, "workspace.dependencies");
    let mut out = String::new();
    let mut current = String::new();
    for line in SDK_RUST_MANIFEST.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            current = trimmed.trim_matches(['[', ']']).to_string();
        }
        if current == "lints" {
            continue;
        }
        match trimmed.strip_suffix(".workspace = true") {
            Some(key) => {
                let table = if current == "package" {
                    &package
                } else {
                    &dependencies
                };
                let value = table.get(key).ok_or_else(|| {
                    broken(&format!(
                        "sdk/rust/Cargo.toml inherits `{key}`, which the workspace's Cargo.toml \
                         does not define on one line"
                    ))
                })?;
                out.push_str(&format!("{key} = {value}\n"));
            }
            None => {
                if trimmed.contains("workspace") {
                    return Err(broken(&format!(
                        "sdk/rust/Cargo.toml line `{trimmed}` inherits from the workspace in a \
                         form `new` cannot rewrite"
                    )));
                }
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    Ok(out.trim_end().to_string() + "\n")
}

/// The one-line `key = value` entries of `[name]` in a TOML text (comments skipped).
fn section(toml: &str, name: &str) -> BTreeMap<String, String> {
    let header = format!("[{name}]");
    toml.lines()
        .skip_while(|l| l.trim() != header)
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with('['))
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// The value of `key = "value"` in a TOML text.
fn quoted_value(toml: &str, key: &str) -> Option<String> {
    toml.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
    })
}

/// The message of an embedded source this code cannot read: a defect of the build, not of the
/// user's input.
fn broken(what: &str) -> String {
    format!("{what}: this wasm-ccm-dev build is broken; report it")
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;

    fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// Every file under `dir` of the repository (relative paths, sorted).
    fn files_under(dir: &str) -> Vec<String> {
        fn walk(root: &Path, at: &Path, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(at).expect("a directory of the repository") {
                let path = entry.expect("an entry").path();
                if path.is_dir() {
                    walk(root, &path, out);
                } else {
                    let rel = path.strip_prefix(root).expect("under the root");
                    out.push(rel.to_string_lossy().replace('\\', "/"));
                }
            }
        }
        let mut out = Vec::new();
        walk(&repo(), &repo().join(dir), &mut out);
        out.sort();
        out
    }

    fn embedded(list: &[(&str, &str)]) -> Vec<String> {
        let mut out: Vec<String> = list.iter().map(|(p, _)| p.to_string()).collect();
        out.sort();
        out
    }

    /// A file added to an SDK or the WIT must be vendored too, or generated projects miss it.
    #[test]
    fn every_sdk_and_wit_file_is_vendored() {
        // wit/released/ holds frozen copies of released versions for the host's golden tests;
        // a new project builds against the current contract only.
        let wit: Vec<String> = files_under("wit")
            .into_iter()
            .filter(|p| p.ends_with(".wit") && !p.starts_with("wit/released/"))
            .collect();
        assert_eq!(embedded(WIT), wit);
        assert_eq!(embedded(SDK_RUST), files_under("sdk/rust/src"));
        let python: Vec<String> = files_under("sdk/python")
            .into_iter()
            .filter(|p| !p.ends_with("README.md") && !p.contains("__pycache__"))
            .collect();
        assert_eq!(embedded(SDK_PYTHON), python);
        // The SDK's READMEs link into the repository, and tools/ pins the build for this
        // repository's tests; the project pins jco in its own package.json.
        let js: Vec<String> = files_under("sdk/js")
            .into_iter()
            .filter(|p| !p.ends_with("README.md") && !p.starts_with("sdk/js/tools/"))
            .collect();
        assert_eq!(embedded(SDK_JS), js);
    }

    #[test]
    fn every_placeholder_has_a_value_in_every_language() {
        for lang in [Lang::Rust, Lang::Python, Lang::Js] {
            let files = project(lang, "acme-cloud").expect("a project");
            for file in files.iter().filter(|f| !f.path.starts_with("wasm-ccm/sdk")) {
                if file.path == "Cargo.lock" || file.path.ends_with(".wit") {
                    continue;
                }
                assert!(
                    !file.text.contains("{{name}}") && !file.text.contains("{{ENV}}"),
                    "{}",
                    file.path
                );
            }
            let scenario = files
                .iter()
                .find(|f| f.path == "conformance.yaml")
                .expect("a scenario");
            assert!(
                scenario
                    .text
                    .contains("ACME_CLOUD_API_TOKEN: ${CLOUD_TOKEN}")
            );
            assert!(scenario.text.contains("acme-cloud://i-0a"));
        }
    }

    #[test]
    fn substitution_leaves_workflow_expressions_alone_and_refuses_unknown_keys() {
        let values = BTreeMap::from([("name", "x".to_string())]);
        assert_eq!(
            substitute("t", "a {{name}} ${{ env.X }} {{", &values).expect("substituted"),
            "a x ${{ env.X }} {{"
        );
        let e = substitute("t", "{{nope}}", &values).expect_err("unknown key");
        assert!(e.contains("{{nope}}") && e.contains("report it"), "{e}");
    }

    #[test]
    fn the_pins_are_those_the_repository_tests_with() {
        let values = values(Lang::Js, "acme").expect("values");
        assert!(!values["toolchain"].is_empty());
        assert!(RUST_TOOLCHAIN.contains(&format!("channel = \"{}\"", values["toolchain"])));
        let requirements =
            std::fs::read_to_string(repo().join("sdk/python/requirements-build.txt"))
                .expect("the pins");
        assert!(requirements.contains(&format!("componentize-py=={}", values["componentize_py"])));
        let tools =
            std::fs::read_to_string(repo().join("sdk/js/tools/package.json")).expect("the pins");
        assert!(tools.contains(&format!("\"@bytecodealliance/jco\": \"{}\"", values["jco"])));
    }

    #[test]
    fn the_vendored_sdk_manifest_stands_alone() {
        let manifest = standalone_sdk_manifest().expect("a manifest");
        assert!(!manifest.contains("workspace"), "{manifest}");
        assert!(!manifest.contains("[lints]"), "{manifest}");
        assert!(manifest.contains("name = \"wasm-ccm-sdk\""), "{manifest}");
        assert!(manifest.contains("wit-bindgen = {"), "{manifest}");
        assert!(manifest.contains("edition = \"2024\""), "{manifest}");
        assert!(manifest.contains("load-balancer = []"), "{manifest}");
    }
}
