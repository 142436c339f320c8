//! Which scenario a conformance run uses when `--scenario` is not given: the driver project's
//! own `conformance.yaml` (`wasm-ccm-dev new` puts one at the project's root), found from the
//! current directory upward, the way cargo finds `Cargo.toml`. The author runs
//! `wasm-ccm-dev conformance target/…/mydriver.wasm` from anywhere in the project.

use std::path::{Path, PathBuf};

use anyhow::bail;

/// The file name a project's scenario has.
pub(super) const SCENARIO_FILE: &str = "conformance.yaml";

/// The nearest [`SCENARIO_FILE`] in `cwd` or a directory above it, for a run without
/// `--scenario`; said on stderr (the report may be on stdout). When there is none, the error
/// names what to pass.
pub(super) fn project_scenario(cwd: &Path) -> anyhow::Result<PathBuf> {
    match nearest(cwd) {
        Some(found) => {
            eprintln!(
                "wasm-ccm-dev: using the scenario {} (the nearest {SCENARIO_FILE} from the \
                 current directory; --scenario FILE chooses another)",
                found.display()
            );
            Ok(found)
        }
        None => bail!(
            "no scenario: --scenario was not given and there is no {SCENARIO_FILE} in {} or any \
             directory above it; pass --scenario FILE (a scenario file: see sdk/README.md, \
             \"Conformance scenarios\"), or run from inside a project made by `wasm-ccm-dev new`, \
             which has one at its root",
            cwd.display()
        ),
    }
}

/// The nearest regular file named [`SCENARIO_FILE`] in `start` or its ancestors.
fn nearest(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|dir| dir.join(SCENARIO_FILE))
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_file_upward_wins() {
        let root = tempfile::tempdir().expect("tempdir");
        let project = root.path().join("project");
        let deep = project.join("target/wasm32-wasip2/release");
        std::fs::create_dir_all(&deep).expect("dirs");
        std::fs::write(project.join(SCENARIO_FILE), "a").expect("write");
        assert_eq!(
            project_scenario(&deep).expect("found"),
            project.join(SCENARIO_FILE)
        );
        // A nearer one (a nested project) is taken first.
        std::fs::create_dir_all(deep.join(SCENARIO_FILE)).expect("a directory of that name");
        std::fs::write(project.join("target").join(SCENARIO_FILE), "b").expect("write");
        assert_eq!(
            project_scenario(&deep).expect("found"),
            project.join("target").join(SCENARIO_FILE),
            "a directory named like the file is not a scenario"
        );
    }

    #[test]
    fn without_one_the_error_says_what_to_pass() {
        let root = tempfile::tempdir().expect("tempdir");
        // The machine's own directories above the temp dir must not hold one, or this test
        // cannot tell "not found" from "found elsewhere".
        if let Some(stray) = nearest(root.path()) {
            panic!("{} exists; remove it to run this test", stray.display());
        }
        let message = project_scenario(root.path())
            .expect_err("nothing to find")
            .to_string();
        assert!(message.contains("--scenario FILE"), "{message}");
        assert!(
            message.contains(&root.path().display().to_string()),
            "{message}"
        );
    }
}
