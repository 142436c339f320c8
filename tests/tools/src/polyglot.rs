//! Builds the Python and JavaScript example drivers with pinned tools from PyPI and npm,
//! installed once into `target/tools/` (keyed by the pinned versions) and reused; outputs go to
//! `target/polyglot/` keyed by a hash of every input, so an unchanged driver is not rebuilt
//! (neither componentize-py nor jco builds byte for byte reproducibly, and a new hash would also
//! miss the host's compile cache).
//!
//! Needs `python3` (with `venv`) and `node`/`npm` ≥ 20.19, and the registries once.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::tools_dir;

/// The repository root.
pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn output_dir() -> PathBuf {
    repo().join("target/polyglot")
}

/// A lock held while tools are installed or a driver is built: test processes run in parallel.
pub(crate) fn lock() -> Result<File, String> {
    std::fs::create_dir_all(tools_dir())
        .map_err(|e| format!("cannot create {}: {e}", tools_dir().display()))?;
    let path = tools_dir().join(".polyglot.lock");
    let file = File::create(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    file.lock()
        .map_err(|e| format!("cannot lock {}: {e}", path.display()))?;
    Ok(file)
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// sha256 over the names and contents of `files` and the `extra` strings; 16 hex digits.
pub(crate) fn key(files: &[PathBuf], extra: &[&str]) -> Result<String, String> {
    let mut hash = Sha256::new();
    for file in files {
        hash.update(
            file.strip_prefix(repo())
                .unwrap_or(file)
                .to_string_lossy()
                .as_bytes(),
        );
        hash.update([0]);
        hash.update(read(file)?);
        hash.update([0]);
    }
    for s in extra {
        hash.update(s.as_bytes());
        hash.update([0]);
    }
    Ok(hex::encode(hash.finalize())[..16].to_string())
}

/// The files of `dir` with extension `ext`, sorted.
fn files_in(dir: &Path, ext: &str) -> Result<Vec<PathBuf>, String> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    out.sort();
    Ok(out)
}

/// Runs a build tool quietly (no bytecode files, no npm notices).
pub(crate) fn run(command: &mut Command) -> Result<(), String> {
    crate::run(
        command
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("NPM_CONFIG_UPDATE_NOTIFIER", "false")
            .env("NPM_CONFIG_FUND", "false")
            .env("NPM_CONFIG_AUDIT", "false"),
    )
}

/// Copies `files` into `dir` (created).
fn stage(dir: &Path, files: &[PathBuf]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for file in files {
        let name = file.file_name().expect("a file name");
        std::fs::copy(file, dir.join(name))
            .map_err(|e| format!("cannot copy {} to {}: {e}", file.display(), dir.display()))?;
    }
    Ok(())
}

/// Builds `out` with `build(tmp)` unless it exists; `tmp` is renamed to `out` when complete.
fn build_once(out: &Path, build: impl FnOnce(&Path) -> Result<(), String>) -> Result<(), String> {
    if out.is_file() {
        return Ok(());
    }
    let tmp = out.with_extension("partial.wasm");
    let _ = std::fs::remove_file(&tmp);
    build(&tmp)?;
    std::fs::rename(&tmp, out).map_err(|e| format!("cannot move {}: {e}", tmp.display()))
}

/// Creates `dir` with `fill(tmp)` unless it exists; `tmp` is renamed to `dir` when complete.
fn install_once(dir: &Path, fill: impl FnOnce(&Path) -> Result<(), String>) -> Result<(), String> {
    if dir.is_dir() {
        return Ok(());
    }
    let tmp = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
    fill(&tmp)?;
    std::fs::rename(&tmp, dir).map_err(|e| format!("cannot move {}: {e}", tmp.display()))
}

/// `componentize-py` at the version `requirements` (repository-relative) pins.
/// Called with the tools lock held (by [`python_driver`]).
fn componentize_py(requirements: &str) -> Result<PathBuf, String> {
    let venv = crate::pypi::venv_while_locked("componentize-py", requirements)?;
    Ok(venv.join("bin/componentize-py"))
}

/// Where a Python driver's sources are.
struct PythonSources {
    /// The directory with `app.py` and `requirements.txt` (the driver's own dependencies).
    app: PathBuf,
    /// The `wasm_ccm_sdk` package directory.
    sdk: PathBuf,
    /// The WIT directory the driver is built against.
    wit: PathBuf,
    /// The componentize-py pin, relative to the repository.
    build_requirements: String,
}

/// The Python example driver (`drivers/examples/python-static`), built with componentize-py.
pub fn python_static() -> Result<PathBuf, String> {
    python_driver(
        "python_static",
        &PythonSources {
            app: repo().join("drivers/examples/python-static"),
            sdk: repo().join("sdk/python/wasm_ccm_sdk"),
            wit: repo().join("wit"),
            build_requirements: "sdk/python/requirements-build.txt".into(),
        },
    )
}

/// The Python static driver released with contract `version`, from its committed sources
/// (`tests/golden/<version>/python-static`: the driver, the SDK as it was, the componentize-py
/// pin) and the frozen WIT (`wit/released/<version>`).
pub fn golden_python_static(version: &str) -> Result<PathBuf, String> {
    let golden = format!("tests/golden/{version}/python-static");
    python_driver(
        &format!("golden-{version}-python_static"),
        &PythonSources {
            app: repo().join(&golden),
            sdk: repo().join(&golden).join("wasm_ccm_sdk"),
            wit: repo().join("wit/released").join(version),
            build_requirements: format!("{golden}/requirements-build.txt"),
        },
    )
}

/// Builds the Python driver of `sources` into `target/polyglot/<name>-<key>.wasm`.
fn python_driver(name: &str, sources: &PythonSources) -> Result<PathBuf, String> {
    let _lock = lock()?;
    let requirements = sources.app.join("requirements.txt");
    let mut inputs = vec![sources.app.join("app.py"), requirements.clone()];
    inputs.extend(files_in(&sources.sdk, "py")?);
    inputs.extend(files_in(&sources.wit, "wit")?);
    inputs.push(repo().join(&sources.build_requirements));
    let out = output_dir().join(format!("{name}-{}.wasm", key(&inputs, &[])?));
    let tool = componentize_py(&sources.build_requirements)?;
    // Dependencies as pure Python: componentize-py cannot load C extensions, and PyYAML falls
    // back to its pure-Python parser without one.
    let deps = tools_dir().join(format!(
        "pydeps-{}",
        key(std::slice::from_ref(&requirements), &[])?
    ));
    install_once(&deps, |tmp| {
        run(Command::new(tool.with_file_name("pip"))
            .args([
                "install",
                "-q",
                "--disable-pip-version-check",
                "--no-compile",
                "--target",
            ])
            .arg(tmp)
            .arg("-r")
            .arg(&requirements))
        .map_err(|e| {
            crate::cannot_install(
                &format!(
                    "the Python driver's dependencies ({})",
                    requirements.display()
                ),
                "PyPI (pip install --target)",
                &format!("pip install --target <dir> -r {}", requirements.display()),
                &e,
            )
        })?;
        remove_native_extensions(tmp)
    })?;
    build_once(&out, |tmp| {
        // componentize-py writes bytecode next to the sources: build from a copy.
        let stage_dir = output_dir().join(format!("stage-{name}"));
        let _ = std::fs::remove_dir_all(&stage_dir);
        stage(&stage_dir.join("app"), &[sources.app.join("app.py")])?;
        stage(
            &stage_dir.join("sdk/wasm_ccm_sdk"),
            &files_in(&sources.sdk, "py")?,
        )?;
        run(Command::new(&tool)
            .current_dir(stage_dir.join("app"))
            .arg("-q")
            .arg("-d")
            .arg(&sources.wit)
            .args(["-w", "full-driver", "componentize", "app", "-p", "."])
            .arg("-p")
            .arg(stage_dir.join("sdk"))
            .arg("-p")
            .arg(&deps)
            .arg("-o")
            .arg(tmp))
    })?;
    Ok(out)
}

fn remove_native_extensions(dir: &Path) -> Result<(), String> {
    for entry in
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?
    {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_dir() {
            remove_native_extensions(&path)?;
        } else if path.extension().is_some_and(|x| x == "so") {
            std::fs::remove_file(&path)
                .map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// A program of the pinned JavaScript tools (`jco`, `tsc`), installed if needed.
pub fn js_tool(name: &str) -> Result<PathBuf, String> {
    let _lock = lock()?;
    Ok(jco(&repo().join("sdk/js/tools"))?.with_file_name(name))
}

/// `jco` at the versions `tools/package-lock.json` pins.
fn jco(tools: &Path) -> Result<PathBuf, String> {
    let manifest = [tools.join("package.json"), tools.join("package-lock.json")];
    let dir = tools_dir().join(format!("jco-{}", key(&manifest, &[])?));
    install_once(&dir, |tmp| {
        stage(tmp, &manifest)?;
        // Not `npm ci`: the lock names optional platform packages (other OSes) the registry
        // may not serve, which `npm ci` refuses; `npm install` keeps the lock as it is.
        run(Command::new("npm").current_dir(tmp).args([
            "install",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
        ]))
        .map_err(|e| {
            crate::cannot_install(
                &format!(
                    "the npm packages pinned in {} (jco, typescript)",
                    manifest[1].display()
                ),
                "the npm registry (npm install; needs node/npm >= 20.19)",
                &format!("`npm install` in a copy of {}", tools.display()),
                &e,
            )
        })
    })?;
    Ok(dir.join("node_modules/.bin/jco"))
}

/// Where a JavaScript driver's sources are.
struct JsSources {
    /// The directory with `driver.js`, `package.json` and `package-lock.json`; the package
    /// depends on the SDK as `file:../../../sdk/js`.
    example: PathBuf,
    /// The SDK's directory (`index.js`, `utf8.js`, `package.json`, `bundle.config.mjs`).
    sdk: PathBuf,
    /// The WIT directory the driver is built against.
    wit: PathBuf,
    /// The directory with the jco and TypeScript pins (`package.json`, `package-lock.json`).
    tools: PathBuf,
}

/// The JavaScript example driver (`drivers/examples/js-static`), built with `jco componentize`
/// (componentize-js, StarlingMonkey).
pub fn js_static() -> Result<PathBuf, String> {
    js_driver(
        "js_static",
        &JsSources {
            example: repo().join("drivers/examples/js-static"),
            sdk: repo().join("sdk/js"),
            wit: repo().join("wit"),
            tools: repo().join("sdk/js/tools"),
        },
    )
}

/// The JavaScript static driver released with contract `version`, from its committed sources
/// (`tests/golden/<version>/js-static`, `js-sdk`, `js-tools`) and the frozen WIT
/// (`wit/released/<version>`).
pub fn golden_js_static(version: &str) -> Result<PathBuf, String> {
    let golden = repo().join("tests/golden").join(version);
    js_driver(
        &format!("golden-{version}-js_static"),
        &JsSources {
            example: golden.join("js-static"),
            sdk: golden.join("js-sdk"),
            wit: repo().join("wit/released").join(version),
            tools: golden.join("js-tools"),
        },
    )
}

/// Builds the JavaScript driver of `sources` into `target/polyglot/<name>-<key>.wasm`.
fn js_driver(name: &str, sources: &JsSources) -> Result<PathBuf, String> {
    let _lock = lock()?;
    let example_files = vec![
        sources.example.join("driver.js"),
        sources.example.join("package.json"),
        sources.example.join("package-lock.json"),
    ];
    let sdk_files = vec![
        sources.sdk.join("index.js"),
        sources.sdk.join("utf8.js"),
        sources.sdk.join("package.json"),
        sources.sdk.join("bundle.config.mjs"),
    ];
    let mut inputs = example_files.clone();
    inputs.extend(sdk_files.iter().cloned());
    inputs.extend(files_in(&sources.wit, "wit")?);
    inputs.push(sources.tools.join("package-lock.json"));
    let out = output_dir().join(format!("{name}-{}.wasm", key(&inputs, &[])?));
    let jco = jco(&sources.tools)?;
    build_once(&out, |tmp| {
        // The example depends on the SDK by a relative path: stage both where it expects them.
        let stage_dir = output_dir().join(format!("stage-{name}"));
        let _ = std::fs::remove_dir_all(&stage_dir);
        let staged_example = stage_dir.join("drivers/examples/js-static");
        stage(&staged_example, &example_files)?;
        stage(&stage_dir.join("sdk/js"), &sdk_files)?;
        run(Command::new("npm").current_dir(&staged_example).args([
            "install",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
        ]))
        .map_err(|e| {
            crate::cannot_install(
                &format!(
                    "the npm packages pinned in {}",
                    sources.example.join("package-lock.json").display()
                ),
                "the npm registry (npm install; needs node/npm >= 20.19)",
                &format!("`npm install` in {}", sources.example.display()),
                &e,
            )
        })?;
        run(Command::new(&jco)
            .current_dir(&staged_example)
            .args(["componentize", "driver.js", "--wit"])
            .arg(&sources.wit)
            .args([
                "-n",
                "full-driver",
                "--disable",
                "http",
                "fetch-event",
                "--bundle",
            ])
            .args([
                "--bundle-config",
                "node_modules/wasm-ccm-sdk/bundle.config.mjs",
                "-o",
            ])
            .arg(tmp))
    })?;
    Ok(out)
}
