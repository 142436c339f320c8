//! The on-disk cache of compiled drivers.
//!
//! Key: the wasm's sha256 plus the engine's compatibility key, so a new wasmtime, a different
//! engine config or another host build never loads a foreign artifact. `deserialize` trusts its
//! input (it is `unsafe`), so every entry carries the sha256 of its own bytes, checked before
//! use; a corrupt, truncated or foreign entry is recompiled and replaced, never trusted.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::{Engine, Precompiled};

/// How a component was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheOutcome {
    /// No cache configured: compiled.
    Disabled,
    /// Not in the cache: compiled and stored.
    Miss,
    /// Loaded from the cache.
    Hit,
    /// An entry was there but failed verification: compiled and replaced.
    Replaced,
}

/// A directory of compiled components.
#[derive(Debug, Clone)]
pub struct AotCache {
    dir: PathBuf,
}

impl AotCache {
    /// A cache in `dir` (created when first written).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        AotCache { dir: dir.into() }
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of the entry for `wasm_sha256` under `engine_key`.
    pub fn entry_path(&self, wasm_sha256: &str, engine_key: &str) -> PathBuf {
        self.dir.join(format!("{wasm_sha256}-{engine_key}.cwasm"))
    }

    /// Loads the compiled form of `wasm`, compiling and storing it on a miss. Cache write
    /// failures are logged, not fatal: the driver still runs.
    pub fn load(
        &self,
        engine: &Engine,
        engine_key: &str,
        wasm: &[u8],
        wasm_sha256: &str,
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let path = self.entry_path(wasm_sha256, engine_key);
        let mut outcome = CacheOutcome::Miss;
        if let Ok(bytes) = std::fs::read(&path) {
            match verify_and_deserialize(engine, &bytes) {
                Ok(component) => return Ok((component, CacheOutcome::Hit)),
                Err(why) => {
                    tracing::warn!(path = %path.display(), "ignoring cache entry ({why}); recompiling");
                    outcome = CacheOutcome::Replaced;
                }
            }
        }
        let compiled = engine.precompile_component(wasm)?;
        if let Err(e) = self.store(&path, &compiled) {
            tracing::warn!(path = %path.display(), "could not write the compile cache: {e}");
        }
        // SAFETY: the bytes were produced by this engine a moment ago and never left memory.
        let component = unsafe { Component::deserialize(engine, &compiled)? };
        Ok((component, outcome))
    }

    fn store(&self, path: &Path, compiled: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let mut entry = Vec::with_capacity(compiled.len() + 64);
        entry.extend_from_slice(hex::encode(Sha256::digest(compiled)).as_bytes());
        entry.extend_from_slice(compiled);
        // Write then rename, so a crash or a concurrent reader never sees half an entry.
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, &entry)?;
        std::fs::rename(&tmp, path)
    }
}

/// Entry layout: 64 hex digits of the sha256 of the rest, then the `.cwasm` bytes.
fn verify_and_deserialize(engine: &Engine, entry: &[u8]) -> Result<Component, String> {
    if entry.len() < 64 {
        return Err("entry is truncated".into());
    }
    let (digest, compiled) = entry.split_at(64);
    if digest != hex::encode(Sha256::digest(compiled)).as_bytes() {
        return Err("checksum mismatch".into());
    }
    if Engine::detect_precompiled(compiled) != Some(Precompiled::Component) {
        return Err("not a precompiled component".into());
    }
    // SAFETY: the checksum proves these are the bytes this cache wrote, and the file name binds
    // them to this engine's compatibility key; wasmtime re-checks the engine config on load.
    unsafe { Component::deserialize(engine, compiled) }.map_err(|e| format!("{e:#}"))
}
