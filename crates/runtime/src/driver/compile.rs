//! The compile a load waits for: which tier a driver starts on, through the compile cache, and
//! the fallback to Cranelift for a driver Winch cannot compile.

use wasmtime::component::Component;

use crate::cache::{AotCache, CacheOutcome, Lookup, PendingWrite};
use crate::engine::{Compiler, Tier, WasmEngine};

/// A component and how it was obtained.
pub(super) struct Built {
    pub(super) component: Component,
    /// The compiler that made its code.
    pub(super) tier: Tier,
    pub(super) cache: CacheOutcome,
    /// The write of a Winch artifact to the cache, registered but not done: a tiered host does
    /// it on another thread, off the load's path (for a Python or JavaScript driver it is about
    /// 50 MiB to hash and write). Until it is done, a look-up of the entry waits for it.
    pub(super) unstored: Option<PendingWrite>,
}

/// Compiles `wasm` (or loads it from `cache`) for the first tier the host serves with. CPU-heavy:
/// call it on a blocking thread.
///
/// The cache is asked for the final tier first (a Cranelift build there means no compile and no
/// swap), then for the other, then for the final tier once more: a background Cranelift build
/// stores its entry before it removes the Winch one, so when both look-ups missed because that
/// happened between them, the second look-up finds the Cranelift entry. On a miss the first
/// tier compiles (Winch unless the host is Cranelift-only). Winch leaves out some proposals (GC,
/// tail calls, exceptions): a driver that uses one does not compile there, and Cranelift
/// compiles it instead — if Cranelift refuses it too, its error is the answer.
pub(super) fn first_build(
    engine: &WasmEngine,
    cache: Option<&AotCache>,
    origin: &str,
    wasm: &[u8],
    wasm_sha256: &str,
) -> wasmtime::Result<Built> {
    let mut outcome = match cache {
        Some(_) => CacheOutcome::Miss,
        None => CacheOutcome::Disabled,
    };
    if let Some(cache) = cache {
        let look = |tier: Tier| match engine.engine_for(tier) {
            Some(e) => cache.get(e, tier, &engine.compatibility_key_for(tier), wasm_sha256),
            None => Lookup::Absent,
        };
        let hit = |component, tier| Built {
            component,
            tier,
            cache: CacheOutcome::Hit,
            unstored: None,
        };
        let mut absent = Vec::new();
        for tier in engine.tiers() {
            match look(tier) {
                Lookup::Hit(component) => return Ok(hit(component, tier)),
                Lookup::Refused => outcome = CacheOutcome::Replaced,
                Lookup::Absent => absent.push(tier),
            }
        }
        // The final tier again, if it was absent and the other tier was too (see above).
        if absent.len() > 1
            && let Some(&last) = absent.first()
            && let Lookup::Hit(component) = look(last)
        {
            return Ok(hit(component, last));
        }
    }
    let first = engine.first_tier();
    // A tiered host's Winch build is written to the cache on another thread (`put_later`).
    let defer = first == Tier::Winch && engine.compiler() == Compiler::Tiered;
    let fast = if let (true, Some(cache)) = (defer, cache) {
        compile_unstored(engine, first, wasm).map(|(c, artifact)| {
            let key = engine.compatibility_key_for(first);
            (c, Some(cache.put_later(wasm_sha256, first, &key, artifact)))
        })
    } else {
        compile(engine, cache, first, wasm, wasm_sha256).map(|c| (c, None))
    };
    let (component, tier, unstored) = match fast {
        Ok((c, a)) => (c, first, a),
        Err(why) if first == Tier::Winch && engine.engine_for(Tier::Cranelift).is_some() => {
            let c = compile(engine, cache, Tier::Cranelift, wasm, wasm_sha256)?;
            // Only now: had Cranelift refused it too, the wasm was bad, not Winch short of a
            // feature, and the error says so.
            tracing::warn!(
                driver = origin,
                "Winch cannot compile this driver ({why:#}); it was compiled with Cranelift, so its cold loads are slower"
            );
            (c, Tier::Cranelift, None)
        }
        Err(e) => return Err(e),
    };
    Ok(Built {
        component,
        tier,
        cache: outcome,
        unstored,
    })
}

/// Compiles `wasm` with `tier`'s engine and returns the artifact with the component, for the
/// caller to store later.
fn compile_unstored(
    engine: &WasmEngine,
    tier: Tier,
    wasm: &[u8],
) -> wasmtime::Result<(Component, Vec<u8>)> {
    let Some(e) = engine.engine_for(tier) else {
        wasmtime::bail!("the host has no {tier} engine");
    };
    let artifact = e.precompile_component(wasm)?;
    // SAFETY: the bytes were produced by this engine a moment ago and never left memory.
    let component = unsafe { Component::deserialize(e, &artifact)? };
    Ok((component, artifact))
}

/// Compiles `wasm` with `tier`'s engine, storing the artifact when there is a cache.
pub(super) fn compile(
    engine: &WasmEngine,
    cache: Option<&AotCache>,
    tier: Tier,
    wasm: &[u8],
    wasm_sha256: &str,
) -> wasmtime::Result<Component> {
    let Some(e) = engine.engine_for(tier) else {
        wasmtime::bail!("the host has no {tier} engine");
    };
    match cache {
        Some(cache) => cache.compile_and_put(
            e,
            tier,
            &engine.compatibility_key_for(tier),
            wasm,
            wasm_sha256,
        ),
        None => Component::new(e, wasm),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Allocation, EngineOptions};

    fn engine(compiler: Compiler) -> WasmEngine {
        WasmEngine::new(EngineOptions {
            compiler,
            allocation: Allocation::OnDemand,
            ..Default::default()
        })
        .expect("engine")
    }

    /// A component whose core module uses `return_call` (tail calls): valid wasm that Cranelift
    /// compiles and Winch 48 does not support.
    fn tail_calling() -> Vec<u8> {
        wat::parse_str(
            r#"(component
                 (core module
                   (func $f (param i32) (result i32)
                     local.get 0
                     i32.eqz
                     if (result i32)
                       i32.const 0
                     else
                       local.get 0
                       i32.const 1
                       i32.sub
                       return_call $f
                     end)
                   (export "f" (func $f))))"#,
        )
        .expect("valid wat")
    }

    fn plain() -> Vec<u8> {
        wat::parse_str(r#"(component (core module (func (export "f"))))"#).expect("valid wat")
    }

    #[test]
    fn winch_compiles_what_it_can_and_cranelift_takes_the_rest() {
        for compiler in [Compiler::Tiered, Compiler::Winch] {
            let e = engine(compiler);
            let built = first_build(&e, None, "plain", &plain(), "00").expect("compiles");
            assert_eq!(built.tier, Tier::Winch, "{compiler:?}");
            assert_eq!(built.cache, CacheOutcome::Disabled);

            let built = first_build(&e, None, "tail", &tail_calling(), "01").expect("falls back");
            assert_eq!(built.tier, Tier::Cranelift, "{compiler:?}");
            // Winch really refuses it: the fallback is not taken for nothing.
            let winch = e.engine_for(Tier::Winch).expect("winch engine");
            assert!(Component::new(winch, tail_calling()).is_err());
        }
    }

    #[test]
    fn bad_wasm_fails_with_cranelifts_error() {
        let e = engine(Compiler::Tiered);
        let mut bytes = plain();
        // Truncated: invalid for every compiler, so the fallback cannot hide it.
        bytes.truncate(bytes.len() - 3);
        assert!(first_build(&e, None, "bad", &bytes, "02").is_err());
    }

    #[test]
    fn a_cranelift_only_host_never_uses_winch() {
        let e = engine(Compiler::Cranelift);
        assert!(e.engine_for(Tier::Winch).is_none());
        let built = first_build(&e, None, "plain", &plain(), "03").expect("compiles");
        assert_eq!(built.tier, Tier::Cranelift);
    }

    #[test]
    fn the_cache_serves_the_final_tier_first_and_keeps_tiers_apart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = AotCache::new(dir.path());
        let e = engine(Compiler::Tiered);
        let wasm = plain();
        let first = first_build(&e, Some(&cache), "plain", &wasm, "04").expect("compiles");
        assert_eq!((first.tier, first.cache), (Tier::Winch, CacheOutcome::Miss));
        // A tiered host leaves the write to another thread; here, this one.
        first
            .unstored
            .expect("the Winch write, registered, not yet done")
            .run();
        let again = first_build(&e, Some(&cache), "plain", &wasm, "04").expect("cached");
        assert_eq!((again.tier, again.cache), (Tier::Winch, CacheOutcome::Hit));

        // The Winch entry copied to the Cranelift entry's path is refused, not run as Cranelift.
        let winch_entry =
            cache.entry_path("04", Tier::Winch, &e.compatibility_key_for(Tier::Winch));
        let cranelift_entry = cache.entry_path(
            "04",
            Tier::Cranelift,
            &e.compatibility_key_for(Tier::Cranelift),
        );
        std::fs::copy(&winch_entry, &cranelift_entry).expect("copy");
        let refused = first_build(&e, Some(&cache), "plain", &wasm, "04").expect("cached");
        assert_eq!(
            (refused.tier, refused.cache),
            (Tier::Winch, CacheOutcome::Hit)
        );
        let cranelift = e.engine_for(Tier::Cranelift).expect("engine");
        let key = e.compatibility_key_for(Tier::Cranelift);
        assert!(matches!(
            cache.get(cranelift, Tier::Cranelift, &key, "04"),
            Lookup::Refused
        ));

        // A Cranelift build, once stored, is preferred.
        compile(&e, Some(&cache), Tier::Cranelift, &wasm, "04").expect("compiles");
        let best = first_build(&e, Some(&cache), "plain", &wasm, "04").expect("cached");
        assert_eq!(
            (best.tier, best.cache),
            (Tier::Cranelift, CacheOutcome::Hit)
        );
    }
}
