//! Writes `deploy/release/`: every overlay of `deploy/overlays/` and `deploy/monitoring/`
//! rendered by the pinned kubectl (`kubectl kustomize`) under a header with the version and the
//! driver contract (wit/provider.wit's package), one file each, and removes release files whose
//! kustomization is gone. `tests/release.rs` fails until the files equal a fresh render; run
//! this, then commit what it wrote:
//!
//! ```sh
//! cargo run -p wasm-ccm-deploy-tests --bin render-release
//! ```

use std::collections::BTreeSet;
use std::process::ExitCode;

use wasm_ccm_deploy_tests::release::{self, Source};
use wasm_ccm_deploy_tests::release_dir;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("render-release: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let kubectl = wasm_ccm_test_tools::kubectl::pinned()?;
    let version = wasm_ccm_test_tools::kubectl::VERSION;
    let dir = release_dir();
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let sources: Vec<Source> = release::sources()?;
    for source in &sources {
        let text = release::render(&kubectl, version, source)?;
        let path = source.path();
        let old = std::fs::read_to_string(&path).ok();
        if old.as_deref() == Some(text.as_str()) {
            println!("unchanged {}", release::shown_path(source));
        } else {
            std::fs::write(&path, text)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            println!("wrote     {}", release::shown_path(source));
        }
    }
    let wanted: BTreeSet<&str> = sources.iter().map(|s| s.file.as_str()).collect();
    for entry in
        std::fs::read_dir(&dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?
    {
        let path = entry
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
            .path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.ends_with(".yaml") && !wanted.contains(name.as_str()) {
            std::fs::remove_file(&path)
                .map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
            println!("removed   deploy/release/{name} (its kustomization is gone)");
        }
    }
    Ok(())
}
