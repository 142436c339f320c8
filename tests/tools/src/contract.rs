//! The driver contract's version as the tests read it: the package line of `wit/provider.wit`,
//! parsed here on its own (not through the runtime's build script), so a test comparing a
//! release artefact with it compares two independent readings of the one source.

use std::path::{Path, PathBuf};

/// `wit/provider.wit`, the contract's source of truth.
pub fn wit_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit/provider.wit")
}

/// The package name every driver implements.
pub const PACKAGE: &str = "wasm-ccm:provider";

/// The version of the `package wasm-ccm:provider@X.Y.Z;` line of `wit/provider.wit`
/// (`0.2.0`); an error names the file and what is wrong with it.
pub fn version() -> Result<String, String> {
    version_of(&wit_file())
}

/// The version of the one `package wasm-ccm:provider@X.Y.Z;` line of the WIT file at `path`
/// (a released copy under `wit/released/` too); an error names the file and what is wrong.
pub fn version_of(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let prefix = format!("package {PACKAGE}@");
    let versions: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix(prefix.as_str()))
        .map(|rest| rest.trim_end_matches(';').trim())
        .collect();
    match versions.as_slice() {
        [v] if is_semver(v) => Ok((*v).to_string()),
        [v] => Err(format!(
            "{}: the package version {v:?} is not MAJOR.MINOR.PATCH",
            path.display()
        )),
        [] => Err(format!("{} has no `{prefix}X.Y.Z;` line", path.display())),
        _ => Err(format!(
            "{} has {} `{prefix}…;` lines; it must have one",
            path.display(),
            versions.len()
        )),
    }
}

/// `wasm-ccm:provider@<version>`, as release artefacts name the contract.
pub fn qualified() -> Result<String, String> {
    Ok(format!("{PACKAGE}@{}", version()?))
}

/// Whether `v` is `MAJOR.MINOR.PATCH` with an optional `-pre` or `+build` (the numbers
/// without leading zeros).
fn is_semver(v: &str) -> bool {
    let core = v.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && (*p == "0" || !p.starts_with('0'))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wit_file_has_one_semver_package_line() {
        let v = version().unwrap_or_else(|e| panic!("{e}"));
        assert!(is_semver(&v), "{v}");
    }

    /// componentize-py's generated modules carry no version, so the Python SDK names its
    /// contract itself; a contract bump that forgets it fails here. (The Rust SDK's `with`
    /// mappings and the JS SDK's imports name the version and fail to build instead.)
    #[test]
    fn the_python_sdk_names_the_contract_of_wit() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk/python/wasm_ccm_sdk/__init__.py");
        let text = std::fs::read_to_string(&path).expect("the Python SDK");
        let named = text
            .lines()
            .find_map(|l| l.strip_prefix("CONTRACT_VERSION = \""))
            .and_then(|rest| rest.strip_suffix('"'))
            .expect("a line CONTRACT_VERSION = \"X.Y.Z\"");
        assert_eq!(named, version().unwrap_or_else(|e| panic!("{e}")));
    }

    #[test]
    fn semver_is_three_numbers() {
        assert!(is_semver("0.2.0"));
        assert!(is_semver("1.10.3-rc.1"));
        assert!(!is_semver("0.2"));
        assert!(!is_semver("0.02.0"));
        assert!(!is_semver("0.2.x"));
    }
}
