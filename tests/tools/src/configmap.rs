//! A directory laid out like a mounted ConfigMap volume, updated the way the kubelet updates it,
//! and new versions of a component that differ only in bytes: for hot-reload tests and benches.

use std::os::unix::fs::symlink;
use std::path::PathBuf;

/// The key a driver is mounted under.
const PLUGIN: &str = "plugin.wasm";

/// A ConfigMap volume with the key `plugin.wasm` (and any others, such as its signature
/// `plugin.wasm.sig`): `<key>` → `..data/<key>`, `..data` → a timestamped directory holding the
/// content of every key, so all keys change together.
pub struct ConfigMapVolume {
    dir: tempfile::TempDir,
    generation: u32,
}

impl ConfigMapVolume {
    /// A volume holding `first` as `plugin.wasm`.
    pub fn new(first: &[u8]) -> ConfigMapVolume {
        ConfigMapVolume::with_keys(&[(PLUGIN, first)])
    }

    /// A volume holding `keys` (name, content), each linked at the volume's top as the kubelet
    /// does.
    pub fn with_keys(keys: &[(&str, &[u8])]) -> ConfigMapVolume {
        let mut volume = ConfigMapVolume {
            dir: tempfile::tempdir().expect("tempdir"),
            generation: 0,
        };
        volume.update_keys(keys);
        for (name, _) in keys {
            symlink(format!("..data/{name}"), volume.key(name)).expect("key symlink");
        }
        volume
    }

    /// The path a pod would be given: `<volume>/plugin.wasm`.
    pub fn plugin(&self) -> PathBuf {
        self.key(PLUGIN)
    }

    /// The path of the key `name`: `<volume>/<name>`.
    pub fn key(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A new `plugin.wasm` (the only key changed).
    pub fn update(&mut self, bytes: &[u8]) {
        self.update_keys(&[(PLUGIN, bytes)]);
    }

    /// What the kubelet does: write a new timestamped directory with every key, point
    /// `..data_tmp` at it and rename it over `..data` (one atomic swap). Keys the volume was
    /// created with should all be given (a missing one disappears, as from a ConfigMap).
    pub fn update_keys(&mut self, keys: &[(&str, &[u8])]) {
        self.generation += 1;
        let name = format!(
            "..2026_11_21_00_00_{:02}.{}",
            self.generation, self.generation
        );
        let fresh = self.dir.path().join(&name);
        std::fs::create_dir(&fresh).expect("data dir");
        for (key, bytes) in keys {
            std::fs::write(fresh.join(key), bytes).expect("write");
        }
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
