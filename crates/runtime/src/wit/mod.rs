//! The boundary between the host model ([`crate::model`]) and the bindings `bindgen!` generates
//! ([`crate::bindings`]): one module per WIT version, each converting that version's types to
//! the model and back. Nothing outside the runtime names a generated type; the typed calls
//! (`driver/call.rs`), `info` and `init` (`driver/`) and the capabilities' `Host` impls
//! (`capability/`) convert here as values cross.
//!
//! When a new WIT version arrives, its bindings get a module beside the old ones and a
//! conversion module here; what the older version lacks is filled in (or refused) in its own
//! module, and the model changes only where the host needs the new meaning.

pub(crate) mod v0_2;

pub(crate) use v0_2::Convert;
