//! `kubernetes-validate`, pinned: the PyPI package (`tests/tools/pins/kubernetes-validate.txt`)
//! that validates Kubernetes objects offline against the OpenAPI schemas of the Kubernetes
//! releases it ships, installed once into a venv under `target/tools/` like the other pinned
//! clients.

use std::path::PathBuf;
use std::process::Command;

/// The pins file, relative to the repository.
pub const PINS: &str = "tests/tools/pins/kubernetes-validate.txt";

/// The package version the pin installs; [`pinned`] checks the program reports it.
pub const VERSION: &str = "1.37.0";

/// The pinned `kubernetes-validate` program, installing it first if needed. The error names the
/// package and how to provide it by hand.
pub fn pinned() -> Result<PathBuf, String> {
    let venv = crate::pypi::venv("kubernetes-validate", PINS)?;
    let program = venv.join("bin/kubernetes-validate");
    if !program.is_file() {
        return Err(format!(
            "the `kubernetes-validate` package pinned in {PINS} installed no {}; delete {} to reinstall it",
            program.display(),
            venv.display()
        ));
    }
    let out = Command::new(&program)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    let found = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if found != VERSION {
        return Err(format!(
            "{} reports version {found:?}, but {PINS} pins {VERSION}; update kubernetes_validate::VERSION with the pin",
            program.display()
        ));
    }
    Ok(program)
}
