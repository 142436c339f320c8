//! Python programs from PyPI (a cloud's own CLI or SDK) installed once into a venv under
//! `target/tools/`, keyed by the pinned requirements file, so tests can let a real client judge
//! our simulators. Needs `python3` with `venv`, and PyPI once.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::polyglot::{key, lock, repo, run};
use crate::tools_dir;

/// A venv named `name` holding exactly what `requirements` (a path relative to the repository,
/// e.g. `crates/sim/clients/cloudstack.txt`, pins with `==`) lists; returns the venv directory.
/// Its programs are in `bin/` (`venv.join("bin/python")`, `venv.join("bin/cs")`).
pub fn venv(name: &str, requirements: &str) -> Result<PathBuf, String> {
    let _lock = lock()?;
    venv_while_locked(name, requirements)
}

/// [`venv`] for a caller that already holds the tools lock (a second `flock` from this process
/// would wait for itself).
pub(crate) fn venv_while_locked(name: &str, requirements: &str) -> Result<PathBuf, String> {
    let pins = repo().join(requirements);
    let venv = tools_dir().join(format!("{name}-{}", key(std::slice::from_ref(&pins), &[])?));
    // A venv records its own path, so it is built in place and marked complete at the end.
    let done = venv.join(".complete");
    if !done.is_file() {
        let _ = std::fs::remove_dir_all(&venv);
        run(Command::new("python3").arg("-m").arg("venv").arg(&venv)).map_err(|e| {
            format!("cannot create a Python venv for {requirements} (needs python3 with venv): {e}")
        })?;
        run(Command::new(venv.join("bin/pip"))
            .args(["install", "-q", "--disable-pip-version-check", "-r"])
            .arg(&pins))
        .map_err(|e| {
            let names = pinned_names(&pins);
            crate::cannot_install(
                &format!("the PyPI package(s) {names} pinned in {requirements}"),
                "PyPI (pip install)",
                &format!("`pip install -r {requirements}` into {}", venv.display()),
                &e,
            )
        })?;
        std::fs::File::create(&done)
            .map_err(|e| format!("cannot create {}: {e}", done.display()))?;
    }
    Ok(venv)
}

/// Runs `python` of `venv` on `script` (a path relative to the repository) with `args`, and
/// returns its stdout; a failure carries stdout and stderr.
pub fn run_script(venv: &Path, script: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(venv.join("bin/python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .arg(repo().join(script))
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {script}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "{script} failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The `name==version` pins of a requirements file, for messages (empty when unreadable).
fn pinned_names(pins: &Path) -> String {
    std::fs::read_to_string(pins)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| format!("`{l}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
