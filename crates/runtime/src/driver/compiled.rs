//! [`Compiled`]: a driver's component, checked and compiled, before anything of it runs.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::Component;

use super::tier_up::TierUp;
use crate::cache::CacheOutcome;
use crate::engine::Tier;
use crate::surface::Surface;

/// A compiled, inspected, not yet instantiated driver.
#[derive(Clone)]
pub struct Compiled {
    /// The code. `None` in a loaded driver's own copy ([`Driver::compiled`]): the driver's
    /// instances hold what they run, and a copy here would keep Winch code alive after the swap.
    pub(super) component: Option<Component>,
    /// Where it came from (a path or an OCI reference), for messages.
    pub origin: String,
    /// sha256 of the `.wasm`, hex.
    pub sha256: String,
    /// Size of the `.wasm` in bytes.
    pub size: usize,
    /// What it exports and imports.
    pub surface: Surface,
    /// Time to compile, or to load from the cache.
    pub load_time: Duration,
    /// Whether the cache was used.
    pub cache: CacheOutcome,
    /// Which compiler made the code (a driver loaded from it may move on to Cranelift code
    /// later: [`Driver::tier`]).
    pub tier: Tier,
    /// The Cranelift build on its way, for Winch code with [`Compiler::Tiered`].
    pub(super) tier_up: Option<Arc<TierUp>>,
}
