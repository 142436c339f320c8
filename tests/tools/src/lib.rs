//! The real programs tests run beside ours (Debian's `docker-registry`, `kubectl` for
//! `kubectl kustomize`), found or fetched with no manual step.
//!
//! A program on `PATH` is used as it is. Otherwise its Debian package is downloaded with
//! `apt-get download` (no root needed) and unpacked with `dpkg-deb -x` into `target/tools/`,
//! where later runs find it: the test command installs what it needs, once, project-locally, and
//! never touches the system. Concurrent test processes serialise on a lock file.
//!
//! Beside them, [`guest_memory`] lets a runtime test read its drivers' linear memories, and
//! [`contract`] reads the driver contract's version from `wit/provider.wit`; [`import_graph`]
//! finds the file-level import circles of a crate (`tests/import_circles.rs` runs it over the
//! product crates).

pub mod configmap;
pub mod contract;
pub mod guest_memory;
pub mod import_graph;
pub mod kubectl;
pub mod kubernetes_validate;
pub mod polyglot;
pub mod ports;
pub mod product;
pub mod pypi;
pub mod registry;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where fetched packages are unpacked: `target/tools/<package>/` of this workspace.
pub fn tools_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools")
}

/// The path of `program` from Debian's `package`: on `PATH`, or unpacked under
/// [`tools_dir`], fetching the package first if needed.
///
/// The error says which command failed and how to install the package by hand.
pub fn debian_program(package: &str, program: &str) -> Result<PathBuf, String> {
    if let Some(found) = on_path(program) {
        return Ok(found);
    }
    fetched_debian_program(package, program)
}

/// Like [`debian_program`] but never takes the program from `PATH`: the Debian build of it,
/// fetched into [`tools_dir`] if needed (tests that must run against one known version).
pub fn fetched_debian_program(package: &str, program: &str) -> Result<PathBuf, String> {
    fetch_debian(package, program).map_err(|e| {
        cannot_install(
            &format!("Debian package `{package}` (for `{program}`)"),
            "the Debian archive (apt-get download)",
            &format!("`apt-get install {package}`, or put `{program}` on PATH"),
            &e,
        )
    })
}

/// The message of a fixture that could not install what a test needs: which package, from
/// where, how to provide it by hand, and the underlying error. Tests install their real
/// programs from the registries once, by design; offline, they fail with this instead of an
/// unexplained panic.
pub(crate) fn cannot_install(package: &str, registry: &str, by_hand: &str, cause: &str) -> String {
    format!(
        "could not install {package} from {registry} into {}: the tests install it there once \
         and need the registry for that first run; offline, install it by hand ({by_hand}). \
         Cause: {cause}",
        tools_dir().display()
    )
}

/// The file at `path` (relative to `/`, e.g. `usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1`)
/// of Debian's `package`, unpacked under [`tools_dir`] (fetched first if needed): for what a
/// test needs that is no program on `PATH`, such as a library to preload.
pub fn debian_file(package: &str, path: &str) -> Result<PathBuf, String> {
    fetch_debian_path(package, path).map_err(|e| {
        cannot_install(
            &format!("Debian package `{package}` (for `/{path}`)"),
            "the Debian archive (apt-get download)",
            &format!("`apt-get install {package}`"),
            &e,
        )
    })
}

fn fetch_debian(package: &str, program: &str) -> Result<PathBuf, String> {
    fetch_debian_path(package, &format!("usr/bin/{program}"))
}

fn fetch_debian_path(package: &str, path: &str) -> Result<PathBuf, String> {
    let root = tools_dir().join(package);
    let unpacked = root.join(path);
    if unpacked.is_file() {
        return Ok(unpacked);
    }
    std::fs::create_dir_all(tools_dir())
        .map_err(|e| format!("cannot create {}: {e}", tools_dir().display()))?;
    let lock_path = tools_dir().join(".fetch.lock");
    let lock = File::create(&lock_path)
        .map_err(|e| format!("cannot create {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    // Another process may have fetched it while this one waited for the lock.
    if unpacked.is_file() {
        return Ok(unpacked);
    }
    let download = tools_dir().join(format!(".download-{package}"));
    let _ = std::fs::remove_dir_all(&download);
    std::fs::create_dir_all(&download)
        .map_err(|e| format!("cannot create {}: {e}", download.display()))?;
    if apt_get_download(package, &download).is_err() {
        // A fresh machine may have no package lists yet; refreshing them needs root.
        let _ = Command::new("apt-get").args(["update", "-qq"]).status();
        apt_get_download(package, &download)?;
    }
    let deb = std::fs::read_dir(&download)
        .map_err(|e| format!("cannot read {}: {e}", download.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|p| p.extension().is_some_and(|ext| ext == "deb"))
        .ok_or_else(|| {
            format!(
                "apt-get download {package} left no .deb in {}",
                download.display()
            )
        })?;
    let staging = tools_dir().join(format!(".unpack-{package}"));
    let _ = std::fs::remove_dir_all(&staging);
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&staging))?;
    // Move into place only when complete, so an interrupted unpack is never mistaken for one.
    let _ = std::fs::remove_dir_all(&root);
    std::fs::rename(&staging, &root).map_err(|e| {
        format!(
            "cannot move {} to {}: {e}",
            staging.display(),
            root.display()
        )
    })?;
    let _ = std::fs::remove_dir_all(&download);
    if unpacked.is_file() {
        Ok(unpacked)
    } else {
        Err(format!(
            "Debian's {package} package has no /{path}; install it by hand"
        ))
    }
}

fn apt_get_download(package: &str, into: &Path) -> Result<(), String> {
    run(Command::new("apt-get")
        .args(["download", "-qq", package])
        .current_dir(into))
    .map_err(|e| {
        format!("{e}; install it with `apt-get install {package}` or put its program on PATH")
    })
}

/// Runs `command`; an error names it and carries its output.
pub(crate) fn run(command: &mut Command) -> Result<(), String> {
    let shown = format!("{command:?}");
    let out = command
        .output()
        .map_err(|e| format!("cannot run {shown}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{shown} failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// `program` on `PATH`, if it is there.
pub fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
    })
}
