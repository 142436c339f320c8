//! [`DriverStats`]: the counters of a loaded driver, a leaf the pool and the handle share.

use std::sync::atomic::AtomicU64;

/// Counters an operator can act on.
#[derive(Debug, Default)]
pub struct DriverStats {
    /// Export calls made.
    pub calls: AtomicU64,
    /// Calls running now (past the concurrency limit, in an instance or being given one): a
    /// gauge. A call that stays here for long is a hung driver's.
    pub in_flight: AtomicU64,
    /// Instances created (each ran `init`).
    pub instances_created: AtomicU64,
    /// Instances thrown away after a trap, deadline or memory exhaustion.
    pub instances_discarded: AtomicU64,
    /// Healthy instances retired by age, call count or memory watermark (or fresh mode), or
    /// because their Winch code was swapped for the Cranelift build.
    pub instances_recycled: AtomicU64,
    /// Calls stopped at their deadline.
    pub deadlines: AtomicU64,
    /// Calls that trapped.
    pub traps: AtomicU64,
    /// Calls that ran out of memory.
    pub out_of_memory: AtomicU64,
}
