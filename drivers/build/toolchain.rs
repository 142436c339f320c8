//! Makes sure the compiler that builds the guests has the `wasm32-wasip2` standard library.
//!
//! rustup installs a `rust-toolchain.toml`'s `targets` only when it installs the toolchain itself;
//! a toolchain that was already there (from another project, or linked) keeps the targets it had.
//! Without this check the first guest build then fails with a wall of `E0463: can't find crate for
//! std`. Shared by `build.rs` and the crate's unit tests (`#[path]`), so it is plain std.

use std::path::{Path, PathBuf};

/// The guest target every driver compiles to.
pub(crate) const GUEST_TARGET: &str = "wasm32-wasip2";

/// Whether `sysroot` (what `rustc --print sysroot` prints) holds the standard library of `target`.
pub(crate) fn sysroot_has_target(sysroot: &Path, target: &str) -> bool {
    sysroot
        .join("lib")
        .join("rustlib")
        .join(target)
        .join("lib")
        .is_dir()
}

/// The rustup toolchain a sysroot belongs to: `RUSTUP_TOOLCHAIN` when rustup's proxy set it
/// (a name such as `1.95.0-x86_64-unknown-linux-gnu`, or a path for a custom toolchain), otherwise
/// the sysroot's directory name when it lies in `$RUSTUP_HOME/toolchains/`.
pub(crate) fn toolchain_name(rustup_toolchain: Option<&str>, sysroot: &Path) -> Option<String> {
    if let Some(name) = rustup_toolchain.filter(|n| !n.is_empty()) {
        return Some(name.to_string());
    }
    let parent = sysroot.parent()?;
    if parent.file_name()? != "toolchains" {
        return None;
    }
    Some(sysroot.file_name()?.to_str()?.to_string())
}

/// What the build does about the guest target.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// The target's standard library is there: build.
    Ready,
    /// Missing, and rustup can add it to this toolchain: run `rustup` with these arguments.
    Add { rustup: PathBuf, args: Vec<String> },
    /// Missing, and nothing here can add it: stop with this one line.
    Stop(String),
}

/// Decides what to do for `sysroot`, given where rustup is (if anywhere) and the toolchain name.
pub(crate) fn plan(sysroot: &Path, rustup: Option<PathBuf>, toolchain: Option<String>) -> Plan {
    if sysroot_has_target(sysroot, GUEST_TARGET) {
        return Plan::Ready;
    }
    match (rustup, toolchain) {
        (Some(rustup), Some(toolchain)) => Plan::Add {
            rustup,
            args: add_args(&toolchain),
        },
        (_, toolchain) => Plan::Stop(missing_message(sysroot, toolchain.as_deref(), None)),
    }
}

/// `target add wasm32-wasip2 --toolchain NAME`.
pub(crate) fn add_args(toolchain: &str) -> Vec<String> {
    ["target", "add", GUEST_TARGET, "--toolchain", toolchain]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// One line: what is missing, why it matters, and the command that fixes it.
pub(crate) fn missing_message(
    sysroot: &Path,
    toolchain: Option<&str>,
    tried: Option<&str>,
) -> String {
    let command = match toolchain {
        Some(t) => format!("rustup target add {GUEST_TARGET} --toolchain {t}"),
        None => format!(
            "rustup target add {GUEST_TARGET} (or install the {GUEST_TARGET} standard library for the compiler at {})",
            sysroot.display()
        ),
    };
    let why = match tried {
        Some(reason) => format!(" and adding it failed ({reason})"),
        None => String::new(),
    };
    format!(
        "the Rust toolchain at {} has no {GUEST_TARGET} standard library, which every driver is compiled for{why}; run `{command}` and build again",
        sysroot.display()
    )
}

/// Finds `rustup`: on `PATH`, else in `$CARGO_HOME/bin` or `~/.cargo/bin` (rustup's proxies put
/// the toolchain's own `bin` first on `PATH`, not always rustup's).
pub(crate) fn find_rustup(
    path: Option<&std::ffi::OsStr>,
    cargo_home: Option<&Path>,
    home: Option<&Path>,
) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = path
        .map(|p| std::env::split_paths(p).collect())
        .unwrap_or_default();
    if let Some(cargo_home) = cargo_home {
        dirs.push(cargo_home.join("bin"));
    }
    if let Some(home) = home {
        dirs.push(home.join(".cargo").join("bin"));
    }
    dirs.into_iter()
        .map(|d| d.join("rustup"))
        .find(|candidate| candidate.is_file())
}
