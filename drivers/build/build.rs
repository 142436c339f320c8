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

/// One guest component the workspace builds.
struct Guest {
    /// Its short name: the key of `all()`, and of `SHIPPED` for a shipped driver (the name of
    /// its cloud in the kit's list, `crates/sim/src/kit`).
    name: &'static str,
    /// Its cargo package; the artifact is the package name with `_` for `-`.
    package: &'static str,
    /// Its source directory, watched for changes.
    dir: &'static str,
    /// Whether it ships: its bytes are embedded in `SHIPPED` (the developer kit's playground).
    shipped: bool,
}

/// Every guest, the one table: adding a driver to the workspace's builds is a line here.
const GUESTS: &[Guest] = &[
    guest("static", "static-driver", "drivers/static", true),
    guest(
        "cloudscale",
        "cloudscale-driver",
        "drivers/cloudscale",
        true,
    ),
    guest(
        "phoenixnap",
        "phoenixnap-driver",
        "drivers/phoenixnap",
        true,
    ),
    guest(
        "cloudstack",
        "cloudstack-driver",
        "drivers/cloudstack",
        true,
    ),
    guest("hostile", "hostile-driver", "tests/drivers/hostile", false),
    guest(
        "future-major",
        "future-major-driver",
        "tests/drivers/future-major",
        false,
    ),
    guest("broken", "broken-driver", "tests/drivers/broken", false),
    guest(
        "hostile-lb",
        "hostile-lb-driver",
        "tests/drivers/hostile-lb",
        false,
    ),
    guest("template", "template-driver", "sdk/rust/template", false),
];

const fn guest(
    name: &'static str,
    package: &'static str,
    dir: &'static str,
    shipped: bool,
) -> Guest {
    Guest {
        name,
        package,
        dir,
        shipped,
    }
}

impl Guest {
    /// `WASM_CCM_<NAME>_DRIVER`, the variable `lib.rs`'s named constants read.
    fn env_var(&self) -> String {
        format!(
            "WASM_CCM_{}_DRIVER",
            self.name.to_uppercase().replace('-', "_")
        )
    }
}

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
    let shared = [
        "wit",
        "sdk/rust/src",
        "sdk/rust/Cargo.toml",
        "Cargo.lock",
        "Cargo.toml",
    ];
    for path in shared.into_iter().chain(GUESTS.iter().map(|g| g.dir)) {
        println!("cargo:rerun-if-changed={}", workspace.join(path).display());
    }

    let target_dir = workspace.join("target").join("guest");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));

    let mut table = String::new();
    for guest in GUESTS {
        build(&cargo, &workspace, &target_dir, guest.package);
        let artifact = target_dir
            .join(TARGET)
            .join(PROFILE)
            .join(format!("{}.wasm", guest.package.replace('-', "_")));
        check_component(&artifact, guest.package);
        println!("cargo:rustc-env={}={}", guest.env_var(), artifact.display());
        table.push_str(&format!(
            "    ({:?}, {:?}, {}),\n",
            guest.name,
            artifact.display().to_string(),
            guest.shipped
        ));
    }
    write_table(&table);

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

/// Writes `$OUT_DIR/guests.rs`, which `lib.rs` includes: every guest as (name, absolute path,
/// shipped), and the shipped drivers' bytes.
fn write_table(rows: &str) {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    let shipped: String = GUESTS
        .iter()
        .filter(|g| g.shipped)
        .map(|g| {
            format!(
                "    ({:?}, include_bytes!(env!({:?}))),\n",
                g.name,
                g.env_var()
            )
        })
        .collect();
    let text = format!(
        "/// Every guest: (name, absolute path, shipped). Generated from build.rs's `GUESTS`.\n\
         const GUESTS: &[(&str, &str, bool)] = &[\n{rows}];\n\n\
         /// The shipped drivers' bytes. Generated from build.rs's `GUESTS`.\n\
         const SHIPPED_BYTES: &[(&str, &[u8])] = &[\n{shipped}];\n"
    );
    let path = out_dir.join("guests.rs");
    if let Err(e) = std::fs::write(&path, text) {
        stop(&format!("cannot write {}: {e}", path.display()));
    }
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
