//! The on-disk cache of compiled drivers.
//!
//! Key: the wasm's sha256, the compiler tier ([`Tier`]) and the engine's compatibility key for
//! that tier, so a new wasmtime, a different engine config, another host build or the other
//! compiler never loads a foreign artifact. `deserialize` trusts its input (it is `unsafe`), so
//! every entry carries the sha256 of its own bytes and the tier that wrote it, both checked
//! before use; a corrupt, truncated, foreign or other-tier entry is recompiled and replaced,
//! never trusted.
//!
//! An entry can be written in the background ([`AotCache::put_later`]: a tiered host's Winch
//! build, so that hashing and writing it stays off the load's path). Such a write is registered
//! process-wide before the compile returns, and a look-up or removal of that entry waits for it:
//! a second load of the same driver is a cache hit however soon it comes, never a second compile.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::{Engine, Precompiled};

use crate::engine::Tier;

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

/// What a look-up found.
pub(crate) enum Lookup {
    /// A verified entry, deserialized.
    Hit(Component),
    /// No entry.
    Absent,
    /// An entry that failed verification (logged); compiling will replace it.
    Refused,
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

    /// The path of the entry for `wasm_sha256` compiled by `tier` under `engine_key` (the
    /// engine's key for that tier, `WasmEngine::compatibility_key_for`).
    pub fn entry_path(&self, wasm_sha256: &str, tier: Tier, engine_key: &str) -> PathBuf {
        self.dir
            .join(format!("{wasm_sha256}-{}-{engine_key}.cwasm", tier.name()))
    }

    /// Loads the compiled form of `wasm` for `tier`, compiling and storing it on a miss. Cache
    /// write failures are logged, not fatal: the driver still runs.
    pub fn load(
        &self,
        engine: &Engine,
        tier: Tier,
        engine_key: &str,
        wasm: &[u8],
        wasm_sha256: &str,
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let outcome = match self.get(engine, tier, engine_key, wasm_sha256) {
            Lookup::Hit(component) => return Ok((component, CacheOutcome::Hit)),
            Lookup::Absent => CacheOutcome::Miss,
            Lookup::Refused => CacheOutcome::Replaced,
        };
        let component = self.compile_and_put(engine, tier, engine_key, wasm, wasm_sha256)?;
        Ok((component, outcome))
    }

    /// The verified entry for `wasm_sha256` and `tier`, if there is one. An entry being written
    /// in the background is waited for.
    pub(crate) fn get(
        &self,
        engine: &Engine,
        tier: Tier,
        engine_key: &str,
        wasm_sha256: &str,
    ) -> Lookup {
        let path = self.entry_path(wasm_sha256, tier, engine_key);
        wait_for_write(&path);
        let Ok(bytes) = std::fs::read(&path) else {
            return Lookup::Absent;
        };
        match verify_and_deserialize(engine, tier, &bytes) {
            Ok(component) => Lookup::Hit(component),
            Err(why) => {
                tracing::warn!(path = %path.display(), "ignoring cache entry ({why}); recompiling");
                Lookup::Refused
            }
        }
    }

    /// Compiles `wasm` with `engine` (whose compiler is `tier`), stores the artifact and returns
    /// the component.
    pub(crate) fn compile_and_put(
        &self,
        engine: &Engine,
        tier: Tier,
        engine_key: &str,
        wasm: &[u8],
        wasm_sha256: &str,
    ) -> wasmtime::Result<Component> {
        let compiled = engine.precompile_component(wasm)?;
        self.put(wasm_sha256, tier, engine_key, &compiled);
        // SAFETY: the bytes were produced by this engine a moment ago and never left memory.
        unsafe { Component::deserialize(engine, &compiled) }
    }

    /// Stores an artifact `tier`'s engine compiled; a failure is logged, not fatal.
    pub(crate) fn put(&self, wasm_sha256: &str, tier: Tier, engine_key: &str, compiled: &[u8]) {
        let path = self.entry_path(wasm_sha256, tier, engine_key);
        if let Err(e) = self.store(&path, tier, compiled) {
            tracing::warn!(path = %path.display(), "could not write the compile cache: {e}");
        }
    }

    /// Registers a write of `compiled` (an artifact `tier`'s engine compiled) as the entry for
    /// `wasm_sha256`, to be done by [`PendingWrite::run`] on another thread. From now until it
    /// is done, [`AotCache::get`] and [`AotCache::remove`] of that entry wait for it.
    pub(crate) fn put_later(
        &self,
        wasm_sha256: &str,
        tier: Tier,
        engine_key: &str,
        compiled: Vec<u8>,
    ) -> PendingWrite {
        let path = self.entry_path(wasm_sha256, tier, engine_key);
        let written = Arc::new(Written::default());
        writing().insert(path.clone(), written.clone());
        PendingWrite {
            cache: self.clone(),
            path,
            tier,
            compiled,
            written,
        }
    }

    /// Deletes the entry for `wasm_sha256` and `tier` (a Winch build once the Cranelift build is
    /// stored: nothing loads it again, and it is half again as big). A background write of it
    /// is waited for first, so that it cannot land after the removal.
    pub(crate) fn remove(&self, wasm_sha256: &str, tier: Tier, engine_key: &str) {
        let path = self.entry_path(wasm_sha256, tier, engine_key);
        wait_for_write(&path);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(path = %path.display(), "could not remove a cache entry: {e}"),
        }
    }

    fn store(&self, path: &Path, tier: Tier, compiled: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let tag = tag(tier);
        let mut digest = Sha256::new();
        digest.update(tag.as_bytes());
        digest.update(compiled);
        let mut entry = Vec::with_capacity(64 + tag.len() + compiled.len());
        entry.extend_from_slice(hex::encode(digest.finalize()).as_bytes());
        entry.extend_from_slice(tag.as_bytes());
        entry.extend_from_slice(compiled);
        // Write then rename, so a crash or a concurrent reader never sees half an entry. The
        // temporary name is this write's own: two writes of one entry (two compiles racing on
        // a miss) must not write into each other's file.
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let tmp = path.with_extension(format!(
            "tmp{}-{}",
            std::process::id(),
            WRITES.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&tmp, &entry)?;
        std::fs::rename(&tmp, path)
    }
}

/// Entries being written in the background, by path, process-wide: several runtimes of one
/// process may share a cache directory (the developer kit makes one per command step).
static WRITING: LazyLock<Mutex<HashMap<PathBuf, Arc<Written>>>> = LazyLock::new(Default::default);

fn writing() -> MutexGuard<'static, HashMap<PathBuf, Arc<Written>>> {
    // The map holds no invariant a panic could break halfway.
    WRITING.lock().unwrap_or_else(|p| p.into_inner())
}

/// Waits until no background write of `path` is in progress.
fn wait_for_write(path: &Path) {
    let pending = writing().get(path).cloned();
    if let Some(written) = pending {
        written.wait();
    }
}

/// Whether one background write is over.
#[derive(Default)]
struct Written {
    done: Mutex<bool>,
    over: Condvar,
}

impl Written {
    fn wait(&self) {
        let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        while !*done {
            done = self.over.wait(done).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn finish(&self) {
        *self.done.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.over.notify_all();
    }
}

/// A cache write registered by [`AotCache::put_later`]. Running it stores the entry; dropping
/// it (run or not, e.g. when the thread meant to run it never started) releases whoever waits.
pub(crate) struct PendingWrite {
    cache: AotCache,
    path: PathBuf,
    tier: Tier,
    compiled: Vec<u8>,
    written: Arc<Written>,
}

impl PendingWrite {
    /// Stores the entry (a failure is logged, not fatal). Blocking: hashing and writing tens of
    /// MiB (a Python or JavaScript driver's Winch build) takes 0.1 s.
    pub(crate) fn run(self) {
        if let Err(e) = self.cache.store(&self.path, self.tier, &self.compiled) {
            tracing::warn!(path = %self.path.display(), "could not write the compile cache: {e}");
        }
    }
}

impl Drop for PendingWrite {
    fn drop(&mut self) {
        {
            let mut map = writing();
            // A later registration of the same entry (two compiles racing on one miss) is that
            // write's to remove.
            if map
                .get(&self.path)
                .is_some_and(|w| Arc::ptr_eq(w, &self.written))
            {
                map.remove(&self.path);
            }
        }
        self.written.finish();
    }
}

/// The line after the checksum that names the compiler, e.g. `tier=winch\n`.
fn tag(tier: Tier) -> String {
    format!("tier={}\n", tier.name())
}

/// Entry layout: 64 hex digits of the sha256 of the rest, then the tier tag (`tier=cranelift\n`),
/// then the `.cwasm` bytes. The checksum covers the tag, so an entry of one tier renamed to
/// another's path fails here, before wasmtime ever sees it.
fn verify_and_deserialize(engine: &Engine, tier: Tier, entry: &[u8]) -> Result<Component, String> {
    if entry.len() < 64 {
        return Err("entry is truncated".into());
    }
    let (digest, rest) = entry.split_at(64);
    if digest != hex::encode(Sha256::digest(rest)).as_bytes() {
        return Err("checksum mismatch".into());
    }
    let want = tag(tier);
    let Some(compiled) = rest.strip_prefix(want.as_bytes()) else {
        let found = rest
            .split(|b| *b == b'\n')
            .next()
            .map(|line| String::from_utf8_lossy(&line[..line.len().min(32)]).into_owned())
            .unwrap_or_default();
        return Err(format!(
            "written for another compiler ({found:?}, wanted {:?})",
            want.trim_end()
        ));
    };
    if Engine::detect_precompiled(compiled) != Some(Precompiled::Component) {
        return Err("not a precompiled component".into());
    }
    // SAFETY: the checksum proves these are the bytes this cache wrote for this tier, and the
    // file name binds them to this engine's compatibility key; wasmtime re-checks the engine
    // config (the compiler's calling convention included) on load.
    unsafe { Component::deserialize(engine, compiled) }.map_err(|e| format!("{e:#}"))
}
