//! A directory laid out like a mounted ConfigMap volume, updated the way the kubelet updates it,
//! and new versions of a component that differ only in bytes: for hot-reload tests and benches.

use std::os::unix::fs::symlink;
use std::path::PathBuf;

/// A ConfigMap volume with the key `plugin.wasm`: `plugin.wasm` → `..data/plugin.wasm`,
/// `..data` → a timestamped directory holding the content.
pub struct ConfigMapVolume {
    dir: tempfile::TempDir,
    generation: u32,
}

impl ConfigMapVolume {
    /// A volume holding `first`.
    pub fn new(first: &[u8]) -> ConfigMapVolume {
        let mut volume = ConfigMapVolume {
            dir: tempfile::tempdir().expect("tempdir"),
            generation: 0,
        };
        volume.update(first);
        symlink("..data/plugin.wasm", volume.plugin()).expect("key symlink");
        volume
    }

    /// The path a pod would be given: `<volume>/plugin.wasm`.
    pub fn plugin(&self) -> PathBuf {
        self.dir.path().join("plugin.wasm")
    }

    /// What the kubelet does: write a new timestamped directory, point `..data_tmp` at it and
    /// rename it over `..data` (one atomic swap).
    pub fn update(&mut self, bytes: &[u8]) {
        self.generation += 1;
        let name = format!(
            "..2026_11_21_00_00_{:02}.{}",
            self.generation, self.generation
        );
        let fresh = self.dir.path().join(&name);
        std::fs::create_dir(&fresh).expect("data dir");
        std::fs::write(fresh.join("plugin.wasm"), bytes).expect("write");
        let tmp = self.dir.path().join("..data_tmp");
        symlink(&name, &tmp).expect("tmp symlink");
        std::fs::rename(&tmp, self.dir.path().join("..data")).expect("swap");
    }
}

/// `wasm` with a custom section `name` holding `payload` appended: the same component, other
/// bytes (another sha256). Both must be shorter than 64 bytes together.
pub fn with_custom_section(wasm: &[u8], name: &str, payload: &[u8]) -> Vec<u8> {
    let size = 1 + name.len() + payload.len();
    assert!(size < 128, "one-byte LEB128 sizes only");
    let mut out = wasm.to_vec();
    out.push(0); // custom section
    out.push(size as u8);
    out.push(name.len() as u8);
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(payload);
    out
}
