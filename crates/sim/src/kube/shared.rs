//! [`Shared`]: the state the server task and every [`super::KubeSim`] handle share, and the
//! streaming-list mode it serves ([`WatchList`]). A leaf: the HTTP front, the control API and
//! the handle all read it, and it names none of them.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::faults::Faults;
use super::store::Store;
use super::{log, rbac, restart};

/// State shared by the server task and every [`super::KubeSim`] handle.
pub(crate) struct Shared {
    pub(super) store: Store,
    pub(super) faults: Faults,
    pub(super) log: log::RequestLog,
    pub(super) rbac: rbac::Rbac,
    pub(super) addr: SocketAddr,
    /// The CA certificate (PEM) in TLS mode ([`super::KubeSim::start_tls`]).
    pub(super) ca_pem: Option<String>,
    /// Whether streaming lists are served ([`super::KubeSim::set_watch_list`]).
    pub(super) watch_list: Mutex<WatchList>,
    /// Simulated restarts ([`super::KubeSim::restart`]).
    pub(super) gate: Arc<restart::Gate>,
    /// Watch requests answered with a 410 Expired ERROR event.
    pub(super) expired_watches: std::sync::atomic::AtomicU64,
    /// The `gitVersion` of `/version` ([`super::KubeSimOptions::server_version`]).
    pub(super) server_version: String,
}

impl Shared {
    /// The apiserver's support for streaming lists now.
    pub(crate) fn watch_list(&self) -> WatchList {
        *self
            .watch_list
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A simulated restart (see [`super::KubeSim::restart`]): unavailable for `down`, then
    /// back with its history compacted and every watch dropped.
    pub(crate) fn restart(&self, down: Duration) {
        self.gate.restart(down);
        self.store.compact();
        self.gate.set_floor(self.store.resource_version());
        self.store.drop_watches();
    }

    /// See [`super::KubeSim::set_watch_list`].
    pub(crate) fn set_watch_list(&self, watch_list: WatchList) {
        *self
            .watch_list
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = watch_list;
    }
}

/// How the simulated apiserver answers a streaming list (KEP-3157 WatchList: a watch with
/// `sendInitialEvents=true`, `resourceVersionMatch=NotOlderThan` and `allowWatchBookmarks=true`
/// that ends its initial events with a bookmark annotated `k8s.io/initial-events-end`). Each
/// variant answers as that kube-apiserver's `ValidateListOptions`
/// (k8s.io/apimachinery pkg/apis/meta/internalversion/validation/validation.go, called by
/// `ListResource` in k8s.io/apiserver pkg/endpoints/handlers/get.go, which wraps the field
/// errors in a 422 `Invalid` of `ListOptions.meta.k8s.io`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WatchList {
    /// A kube-apiserver with the `WatchList` feature gate on: streaming lists are served.
    #[default]
    Enabled,
    /// A kube-apiserver 1.27 or later with the `WatchList` feature gate off
    /// (`ValidateListOptions(opts, false)`): a watch with `sendInitialEvents` is a 422 whose
    /// cause is `sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless
    /// the WatchList feature gate is enabled`.
    GateDisabled,
    /// A kube-apiserver 1.19 to 1.26, before `sendInitialEvents` existed (the validation of
    /// apimachinery commit e4014e39, replaced in 1.27 by d27c2084): the parameter decoder drops
    /// the unknown `sendInitialEvents`, and `resourceVersionMatch` on a watch is a 422 whose
    /// cause is `resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch`.
    Unsupported,
}
