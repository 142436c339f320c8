//! Where the workspace's guest components are.
//!
//! The build script compiles every driver and test plugin to `wasm32-wasip2` (profile `guest`,
//! into `target/guest`) whenever their sources change, checks that each output is a component,
//! and bakes the absolute paths in here. Host tests and the CLI depend on this crate instead of
//! building `.wasm` files themselves, so `cargo test` from a fresh clone needs no manual step.

/// The reference driver (`drivers/static`, world `full-driver`).
pub const STATIC_DRIVER: &str = env!("WASM_CCM_STATIC_DRIVER");

/// The cloudscale.ch driver (`drivers/cloudscale`, world `load-balancer-driver`).
pub const CLOUDSCALE_DRIVER: &str = env!("WASM_CCM_CLOUDSCALE_DRIVER");

/// The PhoenixNAP driver (`drivers/phoenixnap`, world `load-balancer-driver`).
pub const PHOENIXNAP_DRIVER: &str = env!("WASM_CCM_PHOENIXNAP_DRIVER");

/// The Apache CloudStack driver (`drivers/cloudstack`, world `load-balancer-driver`).
pub const CLOUDSTACK_DRIVER: &str = env!("WASM_CCM_CLOUDSTACK_DRIVER");

/// The hostile test driver (`tests/drivers/hostile`, world `instances-driver`): loops, memory
/// bombs, traps, egress, log floods and leaks chosen by `node.name`.
pub const HOSTILE_DRIVER: &str = env!("WASM_CCM_HOSTILE_DRIVER");

/// A component exporting `wasm-ccm:provider@9.0.0` (`tests/drivers/future-major`), which the
/// host must refuse by its major version.
pub const FUTURE_MAJOR_DRIVER: &str = env!("WASM_CCM_FUTURE_MAJOR_DRIVER");

/// A driver with one switchable bug (`tests/drivers/broken`, world `load-balancer-driver`):
/// conformance must fail exactly the checks each bug breaks.
pub const BROKEN_DRIVER: &str = env!("WASM_CCM_BROKEN_DRIVER");

/// A driver whose answers break every rule of what may be written to Kubernetes
/// (`tests/drivers/hostile-lb`, world `load-balancer-driver`): provider IDs, addresses, labels,
/// annotations, ingress and events chosen by the node's or Service's name.
pub const HOSTILE_LB_DRIVER: &str = env!("WASM_CCM_HOSTILE_LB_DRIVER");

/// The SDK's template driver (`sdk/rust/template`, world `instances-driver`), which passes
/// conformance as it is.
pub const TEMPLATE_DRIVER: &str = env!("WASM_CCM_TEMPLATE_DRIVER");

/// A hand-written component (`drivers/build/multi_memory.rs`, world `instances-driver`) with
/// eight linear memories whose `instance-exists` grows each extra one by 63 MiB: under a 64 MiB
/// limit only the sum of all memories stops it. Not in [`all`]: it is an attack, not a driver.
pub const MULTI_MEMORY_DRIVER: &str = env!("WASM_CCM_MULTI_MEMORY_DRIVER");

/// The hostile driver's bytes with its `info` answer switched to `mode` (`INFO_MODE` in
/// `tests/drivers/hostile`: `env-letters`, `huge-version`, `other-scheme`, …). `info` has no
/// input, so tests patch the marker in the data section (same length) to pick the attack.
pub fn hostile_with_info(mode: &str) -> Vec<u8> {
    const MARKER: &[u8] = b"WASM-CCM-HOSTILE-INFO mode=normal...............";
    let mut bytes = std::fs::read(HOSTILE_DRIVER)
        .unwrap_or_else(|e| panic!("cannot read the hostile driver {HOSTILE_DRIVER}: {e}"));
    let at = bytes
        .windows(MARKER.len())
        .position(|w| w == MARKER)
        .expect("the INFO_MODE marker is in the hostile driver");
    let mut patched = format!("WASM-CCM-HOSTILE-INFO mode={mode}.").into_bytes();
    assert!(patched.len() <= MARKER.len(), "mode name too long: {mode}");
    patched.resize(MARKER.len(), b'.');
    bytes[at..at + MARKER.len()].copy_from_slice(&patched);
    bytes
}

include!(concat!(env!("OUT_DIR"), "/guests.rs"));

/// Every guest component as (short name, absolute path): `static`, `cloudscale`, `phoenixnap`,
/// `cloudstack`, `hostile`, `future-major`, `broken`, `hostile-lb`, `template` (the build
/// script's table, `GUESTS` in `build.rs`).
pub fn all() -> Vec<(&'static str, &'static str)> {
    GUESTS
        .iter()
        .map(|(name, path, _)| (*name, *path))
        .collect()
}

/// The drivers that ship (`static`, `cloudscale`, `phoenixnap`, `cloudstack`), as bytes built
/// into the binary that uses this: `wasm-ccm-dev` embeds them so its playground runs from an
/// installed copy in any directory, not only in the checkout that built it. Test drivers are
/// not here: tests read them from [`all`]'s paths.
pub const SHIPPED: &[(&str, &[u8])] = SHIPPED_BYTES;

/// The embedded bytes of the shipped driver `name` ([`SHIPPED`]).
pub fn shipped(name: &str) -> Option<&'static [u8]> {
    SHIPPED
        .iter()
        .find(|(shipped, _)| *shipped == name)
        .map(|(_, bytes)| *bytes)
}

/// The most a ConfigMap may hold: the API server sums the lengths of every key and value (a
/// `binaryData` value counted as raw bytes) and refuses more than 1 MiB.
pub const CONFIGMAP_LIMIT: u64 = 1024 * 1024;

/// The key the deploy manifests mount the driver from (`deploy/overlays/*-configmap`).
pub const CONFIGMAP_KEY: &str = "plugin.wasm";

/// The size the API server counts for a ConfigMap holding a `wasm_len`-byte driver under
/// [`CONFIGMAP_KEY`], or an error naming the driver, the size and the limit.
pub fn check_fits_configmap(name: &str, wasm_len: u64) -> Result<u64, String> {
    let counted = CONFIGMAP_KEY.len() as u64 + wasm_len;
    if counted > CONFIGMAP_LIMIT {
        Err(format!(
            "the {name} driver ({wasm_len} bytes) would make a ConfigMap of {counted} bytes, over the API server's limit of {CONFIGMAP_LIMIT} bytes (1 MiB): shrink it (opt-level \"s\", strip, fewer dependencies) or ship it as an OCI artifact"
        ))
    } else {
        Ok(counted)
    }
}

/// The build script's toolchain check, compiled here too so its decisions are unit-tested.
#[cfg(test)]
#[path = "../toolchain.rs"]
mod toolchain;

#[cfg(test)]
mod toolchain_tests {
    use super::toolchain::{self, Plan};
    use std::path::PathBuf;

    fn sysroot(with_target: bool) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(dir.path().join("lib/rustlib/x86_64-unknown-linux-gnu/lib"))
            .unwrap();
        if with_target {
            std::fs::create_dir_all(dir.path().join("lib/rustlib/wasm32-wasip2/lib")).unwrap();
        }
        dir
    }

    #[test]
    fn a_sysroot_with_the_target_is_ready() {
        let root = sysroot(true);
        assert!(toolchain::sysroot_has_target(root.path(), "wasm32-wasip2"));
        let plan = toolchain::plan(root.path(), None, None);
        assert_eq!(plan, Plan::Ready);
    }

    #[test]
    fn a_missing_target_is_added_to_the_active_toolchain() {
        let root = sysroot(false);
        assert!(!toolchain::sysroot_has_target(root.path(), "wasm32-wasip2"));
        let plan = toolchain::plan(
            root.path(),
            Some(PathBuf::from("/opt/rustup")),
            Some("1.95.0-x86_64-unknown-linux-gnu".into()),
        );
        assert_eq!(
            plan,
            Plan::Add {
                rustup: PathBuf::from("/opt/rustup"),
                args: [
                    "target",
                    "add",
                    "wasm32-wasip2",
                    "--toolchain",
                    "1.95.0-x86_64-unknown-linux-gnu"
                ]
                .map(String::from)
                .to_vec(),
            }
        );
    }

    #[test]
    fn without_rustup_the_build_stops_with_the_command_to_run() {
        let root = sysroot(false);
        let Plan::Stop(message) = toolchain::plan(
            root.path(),
            None,
            Some("1.95.0-x86_64-unknown-linux-gnu".into()),
        ) else {
            panic!("expected a stop");
        };
        assert!(!message.contains('\n'), "one line: {message}");
        assert!(
            message.contains(
                "rustup target add wasm32-wasip2 --toolchain 1.95.0-x86_64-unknown-linux-gnu"
            ),
            "{message}"
        );
        // A sysroot outside rustup's tree still gets a command that names the target.
        let Plan::Stop(message) = toolchain::plan(root.path(), None, None) else {
            panic!("expected a stop");
        };
        assert!(message.contains("wasm32-wasip2"), "{message}");
    }

    #[test]
    fn the_toolchain_name_comes_from_rustup_or_the_sysroot_path() {
        let sysroot = PathBuf::from("/root/.rustup/toolchains/1.95.0-x86_64-unknown-linux-gnu");
        assert_eq!(
            toolchain::toolchain_name(Some("stable-x86_64-unknown-linux-gnu"), &sysroot).as_deref(),
            Some("stable-x86_64-unknown-linux-gnu")
        );
        assert_eq!(
            toolchain::toolchain_name(None, &sysroot).as_deref(),
            Some("1.95.0-x86_64-unknown-linux-gnu")
        );
        assert_eq!(
            toolchain::toolchain_name(None, &PathBuf::from("/usr")),
            None
        );
    }

    #[test]
    fn rustup_is_found_beside_cargo_when_not_on_path() {
        let home = tempfile::tempdir().expect("temp dir");
        let bin = home.path().join(".cargo/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("rustup"), b"").unwrap();
        let empty = tempfile::tempdir().expect("temp dir");
        let path = std::env::join_paths([empty.path()]).unwrap();
        assert_eq!(
            toolchain::find_rustup(Some(&path), None, Some(home.path())),
            Some(bin.join("rustup"))
        );
        assert_eq!(toolchain::find_rustup(Some(&path), None, None), None);
    }
}
