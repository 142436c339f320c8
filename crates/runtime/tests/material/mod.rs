//! Finds `shared/material`: public reference data (PhoenixNAP's OpenAPI specs, CloudStack's
//! recorded responses; `shared/material/README.md`) kept beside the repository, for the tests
//! that check drivers against it.
//!
//! Where: `$WASM_CCM_SHARED_MATERIAL` when it is set (the `material` directory itself), else
//! `shared/material` in the workspace's directory or the nearest one above it (CI keeps a copy of
//! `shared/` beside the clone: `<clone>/../shared/material`). Absent material fails the test,
//! naming where it looked and what to set, unless `WASM_CCM_ALLOW_MISSING_MATERIAL=1` says that
//! skipping those checks is intended.

use std::path::{Path, PathBuf};

/// Points at the `material` directory when it is not beside the clone.
pub(crate) const MATERIAL_VAR: &str = "WASM_CCM_SHARED_MATERIAL";
/// `1`: absent material skips the checks that need it (with a message) instead of failing.
pub(crate) const ALLOW_MISSING_VAR: &str = "WASM_CCM_ALLOW_MISSING_MATERIAL";

/// The material's directory `sub` (e.g. `go-sdk-bmc/specs`), holding `what`.
///
/// # Panics
///
/// When it is absent and [`ALLOW_MISSING_VAR`] is not `1`: the message names every place looked
/// at and both variables.
pub(crate) fn dir(sub: &str, what: &str) -> Option<PathBuf> {
    let looked = match locate(
        sub,
        std::env::var_os(MATERIAL_VAR).map(PathBuf::from),
        &workspace(),
    ) {
        Ok(dir) => return Some(dir),
        Err(looked) => looked,
    };
    let places = looked
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    if std::env::var(ALLOW_MISSING_VAR).is_ok_and(|v| v == "1") {
        println!("SKIP the checks against {what}: not found at {places} ({ALLOW_MISSING_VAR}=1)");
        return None;
    }
    panic!(
        "{what} ({sub} of shared/material) was not found at {places}: put a copy of shared/ \
         beside the clone, or set {MATERIAL_VAR} to its material directory; to skip these \
         checks on purpose, set {ALLOW_MISSING_VAR}=1"
    );
}

/// The first of [`candidates`] that exists; all of them when none does.
fn locate(sub: &str, root: Option<PathBuf>, workspace: &Path) -> Result<PathBuf, Vec<PathBuf>> {
    let candidates = candidates(sub, root, workspace);
    candidates
        .iter()
        .find(|dir| dir.is_dir())
        .cloned()
        .ok_or(candidates)
}

/// Where `sub` may be: below `root` when given (no fallback: a wrong variable must not pass
/// unnoticed), else below `shared/material` in `workspace` and then in each of its ancestors,
/// nearest first (CI's copy of `shared/` beside the clone is the second).
fn candidates(sub: &str, root: Option<PathBuf>, workspace: &Path) -> Vec<PathBuf> {
    match root {
        Some(root) => vec![root.join(sub)],
        None => workspace
            .ancestors()
            .map(|dir| dir.join("shared").join("material").join(sub))
            .collect(),
    }
}

/// The workspace's directory: this crate is `crates/runtime` in it.
fn workspace() -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    crate_dir
        .ancestors()
        .nth(2)
        .unwrap_or(crate_dir)
        .to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CI's layout (a clone with a copy of `shared/` beside it) is found from the clone; for a
    /// clone elsewhere (`/tmp/x` with `shared/` in `/work`) only the clone and its ancestors are
    /// looked at (so the test fails there, naming them, unless the variable points at the
    /// material); the variable is taken as given.
    #[test]
    fn material_is_found_beside_the_clone_or_where_the_variable_says() {
        assert!(
            workspace().join("Cargo.lock").is_file(),
            "{} is not the workspace",
            workspace().display()
        );
        let tmp = tempfile::tempdir().expect("a directory");
        let ci = tmp.path().join("ci");
        let clone = ci.join("wasm-ccm");
        let specs = ci.join("shared/material/go-sdk-bmc/specs");
        std::fs::create_dir_all(clone.join("crates/runtime")).expect("create");
        std::fs::create_dir_all(&specs).expect("create");
        assert_eq!(locate("go-sdk-bmc/specs", None, &clone), Ok(specs.clone()));

        // A clone at /tmp/x while shared/ is in /work: looked for in the clone and above it only.
        let elsewhere = Path::new("/tmp/x");
        let looked = candidates("go-sdk-bmc/specs", None, elsewhere);
        assert_eq!(
            looked,
            [
                "/tmp/x/shared/material/go-sdk-bmc/specs",
                "/tmp/shared/material/go-sdk-bmc/specs",
                "/shared/material/go-sdk-bmc/specs",
            ]
            .map(PathBuf::from)
        );

        let material = ci.join("shared/material");
        assert_eq!(
            locate("go-sdk-bmc/specs", Some(material.clone()), elsewhere),
            Ok(specs)
        );
        assert_eq!(
            locate("nothing-here", Some(material.clone()), &clone),
            Err(vec![material.join("nothing-here")])
        );
    }
}
