//! Compiles every guest crate of the workspace to a wasm32-wasip2 component.
//!
//! One nested `cargo build` per guest package: the SDK selects its WIT world with Cargo features,
//! and features unify within one cargo invocation, so building the drivers together would give
//! the instances-only hostile driver the full world. The nested builds use their own target
//! directory (`target/guest`), so they never wait on the outer build's lock.

use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

mod multi_memory;
mod toolchain;

/// (package, artifact file stem, env var exported to lib.rs).
const GUESTS: &[(&str, &str, &str)] = &[
    ("static-driver", "static_driver", "WASM_CCM_STATIC_DRIVER"),
    (
        "cloudscale-driver",
        "cloudscale_driver",
        "WASM_CCM_CLOUDSCALE_DRIVER",
    ),
    (
        "phoenixnap-driver",
        "phoenixnap_driver",
        "WASM_CCM_PHOENIXNAP_DRIVER",
    ),
    (
        "cloudstack-driver",
        "cloudstack_driver",
        "WASM_CCM_CLOUDSTACK_DRIVER",
    ),
    (
        "hostile-driver",
        "hostile_driver",
        "WASM_CCM_HOSTILE_DRIVER",
    ),
    (
        "future-major-driver",
        "future_major_driver",
        "WASM_CCM_FUTURE_MAJOR_DRIVER",
    ),
    ("broken-driver", "broken_driver", "WASM_CCM_BROKEN_DRIVER"),
    (
        "hostile-lb-driver",
        "hostile_lb_driver",
        "WASM_CCM_HOSTILE_LB_DRIVER",
    ),
    (
        "template-driver",
        "template_driver",
        "WASM_CCM_TEMPLATE_DRIVER",
    ),
];

const TARGET: &str = "wasm32-wasip2";
const PROFILE: &str = "guest";

/// `\0asm`, then version 0x0d and layer 1: a component, not a core module.
const COMPONENT_PREAMBLE: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

fn main() {
    // First, before anything is printed: a missing target must end the build with one line.
    ensure_guest_target();
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let workspace = manifest_dir
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|e| panic!("cannot resolve the workspace root from {manifest_dir:?}: {e}"));

    // Directories are watched recursively by cargo (mtime comparison), which keeps the no-op
    // case to a stat walk of the guest sources.
    for path in [
        "wit",
        "sdk/rust/src",
        "sdk/rust/Cargo.toml",
        "drivers/static",
        "drivers/cloudscale",
        "drivers/phoenixnap",
        "drivers/cloudstack",
        "tests/drivers",
        "sdk/rust/template",
        "Cargo.lock",
        "Cargo.toml",
    ] {
        println!("cargo:rerun-if-changed={}", workspace.join(path).display());
    }

    let target_dir = workspace.join("target").join("guest");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));

    for (package, stem, env_var) in GUESTS {
        build(&cargo, &workspace, &target_dir, package);
        let artifact = target_dir
            .join(TARGET)
            .join(PROFILE)
            .join(format!("{stem}.wasm"));
        check_component(&artifact, package);
        println!("cargo:rustc-env={env_var}={}", artifact.display());
    }

    let bomb = target_dir.join("multi_memory_driver.wasm");
    if let Err(e) = multi_memory::build(&workspace, &bomb) {
        stop(&format!(
            "cannot build the multi-memory test component: {e}"
        ));
    }
    println!(
        "cargo:rustc-env=WASM_CCM_MULTI_MEMORY_DRIVER={}",
        bomb.display()
    );
}

/// Stops the build with one line (cargo shows a failed build script's stderr).
fn stop(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1);
}

/// Adds `wasm32-wasip2` to the compiler's toolchain when it is missing (rustup adds a toolchain
/// file's targets only when it installs the toolchain), or stops with the command to run.
fn ensure_guest_target() {
    // Cargo gives build scripts the compiler it uses; the nested cargo inherits it.
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| OsString::from("rustc"));
    let output = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .unwrap_or_else(|e| stop(&format!("cannot run {rustc:?} --print sysroot: {e}")));
    let sysroot = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    if !output.status.success() || sysroot.as_os_str().is_empty() {
        stop(&format!(
            "{rustc:?} --print sysroot failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let rustup = toolchain::find_rustup(
        std::env::var_os("PATH").as_deref(),
        std::env::var_os("CARGO_HOME").map(PathBuf::from).as_deref(),
        std::env::var_os("HOME").map(PathBuf::from).as_deref(),
    );
    let name =
        toolchain::toolchain_name(std::env::var("RUSTUP_TOOLCHAIN").ok().as_deref(), &sysroot);
    match toolchain::plan(&sysroot, rustup, name.clone()) {
        toolchain::Plan::Ready => {}
        toolchain::Plan::Stop(message) => stop(&message),
        toolchain::Plan::Add { rustup, args } => {
            let failure = match Command::new(&rustup).args(&args).output() {
                Err(e) => Some(format!("cannot run {}: {e}", rustup.display())),
                Ok(out) if !out.status.success() => {
                    let stderr = String::from_utf8_lossy(&out.stderr);
                    let last = stderr
                        .lines()
                        .rev()
                        .find(|l| !l.trim().is_empty())
                        .unwrap_or("");
                    Some(format!("{}: {}", out.status, last.trim()))
                }
                Ok(_) => None,
            };
            let failure = failure.or_else(|| {
                (!toolchain::sysroot_has_target(&sysroot, toolchain::GUEST_TARGET))
                    .then(|| "rustup reported success but the target is still missing".to_string())
            });
            if let Some(reason) = failure {
                stop(&toolchain::missing_message(
                    &sysroot,
                    name.as_deref(),
                    Some(&reason),
                ));
            }
            // Past tense: cargo replays this line on later builds until the script runs again.
            println!(
                "cargo:warning=added the {} target to the toolchain {} (`rustup {}`), which lacked it",
                toolchain::GUEST_TARGET,
                name.as_deref().unwrap_or("?"),
                args.join(" ")
            );
        }
    }
}

fn build(cargo: &OsString, workspace: &Path, target_dir: &Path, package: &str) {
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace)
        .args([
            "build",
            "--package",
            package,
            "--profile",
            PROFILE,
            "--target",
            TARGET,
        ])
        .arg("--target-dir")
        .arg(target_dir);

    // The outer cargo's settings for *this* crate must not leak into the guests: flags for the
    // host target, the outer target dir, clippy's wrapper, this package's cfgs and features.
    // CARGO_MAKEFLAGS stays so the nested cargo shares the outer jobserver and the machine is not
    // oversubscribed.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "RUSTC_WORKSPACE_WRAPPER",
        "CLIPPY_ARGS",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        cmd.env_remove(var);
    }
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        if key.starts_with("CARGO_CFG_") || key.starts_with("CARGO_FEATURE_") {
            cmd.env_remove(key);
        }
    }

    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cargo:?} to build guest {package}: {e}"));
    if !output.status.success() {
        panic!(
            "building guest {package} for {TARGET} failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

fn check_component(artifact: &Path, package: &str) {
    let mut head = [0u8; 8];
    let read = File::open(artifact).and_then(|mut f| f.read_exact(&mut head));
    if let Err(e) = read {
        panic!("guest {package} built but {artifact:?} cannot be read: {e}");
    }
    if head != COMPONENT_PREAMBLE {
        panic!(
            "guest {package}: {artifact:?} is not a WebAssembly component (first bytes {head:02x?}, \
             expected {COMPONENT_PREAMBLE:02x?}); is the target {TARGET} installed and the crate a cdylib?"
        );
    }
}
