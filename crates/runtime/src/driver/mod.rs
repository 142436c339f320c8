//! A loaded driver: its compiled component, a warm pool of initialised instances, and the call
//! machinery that enforces deadlines and memory limits and replaces broken instances.
//!
//! - [`load`]: the [`Runtime`] (engine, linker, compile cache), compiling ([`Compiled`]) and
//!   loading (`info`, the capabilities' per-driver state, `init`);
//! - [`pool`]: the instance pool (`Slot`, `DriverInner`: semaphore, idle instances, recycling)
//!   and `invoke`, which runs one call in one instance;
//! - [`call`]: the typed calls (`typed_call!`, `node_set_call!`), converting at the WIT
//!   boundary (`crate::wit`), and the classification of traps;
//! - [`dynamic`]: the dynamic JSON call, a table from function name to typed call;
//! - [`compile`]: the compile a load waits for (cache first, Winch on a miss, Cranelift when
//!   Winch cannot), and [`tier_up`]: the background Cranelift build and the swap to it.
//!
//! - `handle`: [`Driver`], the handle, and its counters; `options`: [`DriverOptions`];
//!   `compiled`: [`Compiled`]; `failure`: what a stopped guest's trap, deadline or memory
//!   exhaustion was.
//!
//! This file only declares and re-exports: the parts depend on each other in one direction
//! (handle → pool → compiled → tier-up; call → handle, pool; load → all), with no circle.

mod call;
mod compile;
mod compiled;
mod dynamic;
mod failure;
mod handle;
mod load;
mod options;
mod pool;
mod stats;
mod tier_up;

pub use compiled::Compiled;
pub use handle::Driver;
pub use load::{Declarations, Runtime, RuntimeOptions};
pub use options::{DriverOptions, InitInput, InstanceMode, PoolOptions};
pub use stats::DriverStats;
