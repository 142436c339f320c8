//! What `--version` says, for both binaries: the wasm-ccm release, the driver contract it was
//! built with and the contract versions it loads, e.g.
//! `wasm-ccm 0.1.0 (driver contract wasm-ccm:provider@0.2.2; loads 0.2.x drivers)`.
//! An operator matching a driver to a host needs the second and third as much as the first.

use std::sync::OnceLock;

use clap::Parser;
use wasm_ccm_runtime::{PACKAGE, SUPPORTED_VERSIONS};

/// The version clap prints after the binary's name:
/// `0.1.0 (driver contract wasm-ccm:provider@0.2.2; loads 0.2.x drivers)`. The release is the
/// workspace version; the contract is `wit/provider.wit`'s package version
/// ([`wasm_ccm_runtime::CONTRACT_VERSION`]); the loadable versions are
/// [`SUPPORTED_VERSIONS`], each as `X.Y.x`.
pub fn version() -> &'static str {
    // clap takes a `&'static str` (without its `string` feature); built once per process.
    static LINE: OnceLock<String> = OnceLock::new();
    LINE.get_or_init(|| {
        format!(
            "{} (driver contract {PACKAGE}@{}; loads {} drivers)",
            env!("CARGO_PKG_VERSION"),
            wasm_ccm_runtime::CONTRACT_VERSION,
            loadable(SUPPORTED_VERSIONS)
        )
    })
}

/// `["0.1", "0.2"]` as `0.1.x and 0.2.x`.
fn loadable(versions: &[&str]) -> String {
    let each: Vec<String> = versions.iter().map(|v| format!("{v}.x")).collect();
    match each.split_last() {
        None => "no".to_string(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// Parses the command line into `C` as `C::parse()` does, with [`version`] as the version
/// (`--version` and `-V`, on every subcommand when `C` propagates it).
pub fn parse<C: Parser>() -> C {
    let matches = C::command().version(version()).get_matches();
    C::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loadable_versions_read_as_a_list() {
        assert_eq!(loadable(&["0.2"]), "0.2.x");
        assert_eq!(loadable(&["0.1", "0.2"]), "0.1.x and 0.2.x");
        assert_eq!(loadable(&["0.1", "0.2", "1.0"]), "0.1.x, 0.2.x and 1.0.x");
        assert_eq!(loadable(&[]), "no");
    }

    #[test]
    fn the_version_names_release_contract_and_loadable_versions() {
        let v = version();
        assert!(
            v.starts_with(concat!(env!("CARGO_PKG_VERSION"), " (")),
            "{v}"
        );
        assert!(
            v.contains(&format!(
                "driver contract wasm-ccm:provider@{}",
                wasm_ccm_runtime::CONTRACT_VERSION
            )),
            "{v}"
        );
    }
}
