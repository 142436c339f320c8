//! Reads the contract's version from `wit/provider.wit` (`package wasm-ccm:provider@X.Y.Z;`) and
//! hands it to the crate as `WASM_CCM_CONTRACT_VERSION`, so `CONTRACT_VERSION` (lib.rs) is the
//! version of the `wit/` this host was built with and no second copy of it can drift.

use std::path::Path;
use std::process::ExitCode;

/// The package line's prefix; the version runs from here to the `;`.
const PACKAGE_PREFIX: &str = "package wasm-ccm:provider@";

/// The file as messages name it: relative to the repository, not to this crate.
const SHOWN: &str = "wit/provider.wit";

fn main() -> ExitCode {
    let wit = Path::new("../../wit/provider.wit");
    println!("cargo:rerun-if-changed={}", wit.display());
    match contract_version(wit) {
        Ok(version) => {
            println!("cargo:rustc-env=WASM_CCM_CONTRACT_VERSION={version}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            // Cargo shows a failing build script's stderr under "failed to run custom build
            // command", so the message is what the maintainer reads.
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The version of the one `package wasm-ccm:provider@…;` line of `wit`.
fn contract_version(wit: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(wit).map_err(|e| {
        format!(
            "cannot read {SHOWN} ({}: {e}): the driver contract's version comes from its \
             package line",
            wit.display()
        )
    })?;
    let mut found = text
        .lines()
        .map(str::trim)
        .filter_map(|l| l.strip_prefix(PACKAGE_PREFIX));
    let Some(rest) = found.next() else {
        return Err(format!(
            "{SHOWN} has no line `{PACKAGE_PREFIX}X.Y.Z;`: put the contract's package line back \
             (wit/README.md, \"Versioning\")"
        ));
    };
    if found.next().is_some() {
        return Err(format!(
            "{SHOWN} has more than one `{PACKAGE_PREFIX}…;` line: keep exactly one"
        ));
    }
    let version = rest.strip_suffix(';').map(str::trim_end).ok_or_else(|| {
        format!("{SHOWN}: the package line `{PACKAGE_PREFIX}{rest}` does not end with `;`")
    })?;
    if !is_semver(version) {
        return Err(format!(
            "{SHOWN}: the package version `{version}` is not semver (MAJOR.MINOR.PATCH, \
             e.g. 0.2.0)"
        ));
    }
    Ok(version.to_string())
}

/// Whether `v` is a semantic version: three numeric parts without leading zeros, optionally a
/// `-pre.release` and a `+build` of dot-separated `[0-9A-Za-z-]` identifiers.
fn is_semver(v: &str) -> bool {
    let (v, build) = match v.split_once('+') {
        Some((v, b)) => (v, Some(b)),
        None => (v, None),
    };
    let (core, pre) = match v.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (v, None),
    };
    let numeric = |s: &str| {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'))
    };
    let identifiers = |s: &str| {
        s.split('.')
            .all(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
    };
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| numeric(p))
        && pre.is_none_or(identifiers)
        && build.is_none_or(identifiers)
}
