//! Where the seam finds its provider for one call: [`CloudSource`]. In production that is the
//! [`DriverSlot`], the driver in service, swapped whole by a hot reload (`reload.rs` swaps it;
//! this module owns it); the crate's tests hand a fixed fake ([`Fixed`]).

use std::sync::{Arc, RwLock};

use wasm_ccm_runtime::Driver;

use super::{CloudProvider, SharedCloud};

/// The provider that serves the next call. Each call takes it once and holds it to the end, so
/// a reload never cuts a call in flight.
pub(crate) trait CloudSource: Send + Sync {
    /// The provider in service now.
    fn current(&self) -> SharedCloud;
}

/// A source of one provider that never changes (the crate's tests).
#[cfg(test)]
pub(crate) struct Fixed(pub(crate) SharedCloud);

#[cfg(test)]
impl CloudSource for Fixed {
    fn current(&self) -> SharedCloud {
        Arc::clone(&self.0)
    }
}

/// The driver in service; swapped whole by a reload.
pub struct DriverSlot {
    current: RwLock<Arc<Driver>>,
}

impl DriverSlot {
    /// A slot holding `driver`.
    pub fn new(driver: Arc<Driver>) -> Self {
        DriverSlot {
            current: RwLock::new(driver),
        }
    }

    /// The driver in service now. Callers hold the `Arc` for one call, so a swap never
    /// interrupts a call in flight.
    pub fn get(&self) -> Arc<Driver> {
        Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Puts `driver` in service; returns the one it replaced.
    pub fn swap(&self, driver: Arc<Driver>) -> Arc<Driver> {
        std::mem::replace(
            &mut *self.current.write().unwrap_or_else(|p| p.into_inner()),
            driver,
        )
    }
}

impl CloudSource for DriverSlot {
    fn current(&self) -> SharedCloud {
        self.get() as Arc<dyn CloudProvider>
    }
}
