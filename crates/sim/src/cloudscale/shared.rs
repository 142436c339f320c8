//! [`Shared`]: the state the server task and every handle share (a leaf: the HTTP front, the
//! control API and the handle all read it, and it names none of them).

use super::faults::Faults;
use super::log::RequestLog;
use super::model::State;
use crate::request_core::StateCell;

/// State shared by the server task and every [`CloudscaleSim`] handle.
pub(crate) struct Shared {
    pub(super) state: StateCell<State>,
    pub(super) faults: Faults,
    pub(super) log: RequestLog,
    pub(super) token: String,
    /// `http://127.0.0.1:PORT`.
    pub(super) url: String,
}
