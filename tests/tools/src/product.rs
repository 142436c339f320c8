//! The product binary `wasm-ccm`, for tests in other packages (the developer kit's end-to-end
//! tests run the real product binary). Cargo gives a test `CARGO_BIN_EXE_<name>` only for its
//! own package's binaries, so this asks cargo once per test process to bring the workspace's
//! test build up to date (`cargo test --no-run` from the workspace root, the README's test
//! command without running anything) with the same cargo, profile and target directory. That
//! builds `wasm-ccm` exactly as the README's `cargo test` does (the product package has its own
//! integration tests, so its binary is part of that build, with the same unified features): a
//! no-op after `cargo test`, and never a stale binary after a change to the product.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The path of an up-to-date `wasm-ccm` binary; `WASM_CCM_BIN` overrides it (then nothing is
/// built). Panics with cargo's output when the build fails: a test cannot run without it.
pub fn product_binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(build).clone()
}

fn build() -> PathBuf {
    if let Some(path) = std::env::var_os("WASM_CCM_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("the test executable's path");
    // A test runs as <target>/<profile dir>/deps/<test>-<hash>.
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test executable is in <target>/<profile>/deps");
    let target_dir = profile_dir
        .parent()
        .expect("the profile directory is in the target directory");
    // `cargo test` builds into `debug`; `cargo test --release` into `release`.
    let release = profile_dir.file_name().and_then(|n| n.to_str()) == Some("release");
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(&workspace)
        .args(["test", "--no-run", "--quiet"])
        .arg("--target-dir")
        .arg(target_dir);
    if release {
        command.arg("--release");
    }
    let output = command
        .output()
        .expect("running cargo to build the product binary");
    assert!(
        output.status.success(),
        "`cargo test --no-run` failed; the end-to-end tests need the product binary wasm-ccm:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let binary = profile_dir.join(format!("wasm-ccm{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.is_file(),
        "cargo built wasm-ccm but {} is missing",
        binary.display()
    );
    binary
}
