//! Helpers for the tests of `deploy/`: the repository's paths and the rendering of overlays.

use std::path::{Path, PathBuf};

/// The repository's `deploy/` directory.
pub fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}
