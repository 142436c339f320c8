//! The configured public network: its location and status, read whenever a block is about to be
//! created or assigned.

use wasm_ccm_sdk::http::encode_path_segment;
use wasm_ccm_sdk::types::ProviderError;

use super::Lb;
use crate::model::PublicNetwork;

/// Seconds to wait before asking again while the network is `BUSY` (an operation on it is under
/// way; networkapi.spec.yaml documents no duration).
pub const BUSY_RETRY_SECS: u32 = 15;

/// What the network's status means for a block about to be created or assigned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// `READY`: it takes blocks.
    Ready,
    /// `BUSY` (or a status the spec does not list): not now; ask again later and keep what
    /// exists.
    NotYet(String),
    /// `ERROR` or `DELETING`: an assignment cannot succeed until someone acts, so nothing
    /// billed should wait for it.
    Broken(String),
}

/// networkapi.spec.yaml `PublicNetwork.status`: "`BUSY`, `READY`, `DELETING` or `ERROR`". An
/// absent status (required in the spec) or an unknown one is not ready, never ready.
pub fn readiness(network: &PublicNetwork) -> Readiness {
    match network.status.trim().to_ascii_uppercase().as_str() {
        "READY" => Readiness::Ready,
        "ERROR" | "DELETING" => Readiness::Broken(network.status.clone()),
        "" => Readiness::NotYet("no status".into()),
        _ => Readiness::NotYet(network.status.clone()),
    }
}

impl Lb<'_> {
    /// `GET /networks/v1/public-networks/{id}` (networkapi.spec.yaml
    /// `publicNetworksNetworkIdGet`), read whenever a block is about to be created or assigned
    /// (its status changes; the steady state, a block already assigned, reads nothing). The
    /// spec lists 401, 403 and 500 and no 404, so a 403 is "does not exist or cannot be read":
    /// both are the operator's to fix, and nothing is created.
    pub(super) fn read_network(&self) -> Result<PublicNetwork, ProviderError> {
        let path = format!(
            "/networks/v1/public-networks/{}",
            encode_path_segment(self.network)
        );
        match self.api.get_or_status(&path)? {
            Ok(n) => Ok(n),
            Err(status) => Err(ProviderError::InvalidConfig(format!(
                "reading the public network {} (PNAP_LOAD_BALANCER or loadbalancer kube-vip://<id>) answered {status}: it does not exist, or these credentials cannot read it (they need the bmc.read scope); nothing was created",
                self.network
            ))),
        }
    }

    /// Ok when `network` takes blocks; else the error saying why not: retry-after while `BUSY`,
    /// permanent for `ERROR`/`DELETING` (`done` says what happened to blocks).
    pub(super) fn require_ready(
        &self,
        network: &PublicNetwork,
        done: &str,
    ) -> Result<(), ProviderError> {
        match readiness(network) {
            Readiness::Ready => Ok(()),
            Readiness::NotYet(status) => Err(self.not_yet(&status)),
            Readiness::Broken(status) => Err(self.broken(&status, done)),
        }
    }

    /// The retry-after error for a network that is not ready yet.
    pub(super) fn not_yet(&self, status: &str) -> ProviderError {
        ProviderError::retry_after(
            BUSY_RETRY_SECS,
            format!(
                "the public network {} is {status}, not READY; IP blocks are assigned once it is READY",
                self.network
            ),
        )
    }

    /// The error for a network in `ERROR`/`DELETING`; `done` says what happened to blocks.
    pub(super) fn broken(&self, status: &str, done: &str) -> ProviderError {
        ProviderError::Permanent(format!(
            "the public network {} is {status}, so it cannot take IP blocks; {done}. Repair the network (PhoenixNAP support) or set PNAP_LOAD_BALANCER (loadbalancer) to kube-vip://<a READY public network>",
            self.network
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(status: &str) -> PublicNetwork {
        PublicNetwork {
            location: "PHX".into(),
            status: status.into(),
        }
    }

    #[test]
    fn only_ready_is_ready() {
        assert_eq!(readiness(&net("READY")), Readiness::Ready);
        assert_eq!(readiness(&net("ready")), Readiness::Ready);
        assert!(matches!(readiness(&net("BUSY")), Readiness::NotYet(_)));
        assert!(matches!(readiness(&net("")), Readiness::NotYet(_)));
        assert!(matches!(readiness(&net("MIGRATING")), Readiness::NotYet(_)));
        assert!(matches!(readiness(&net("ERROR")), Readiness::Broken(_)));
        assert!(matches!(readiness(&net("DELETING")), Readiness::Broken(_)));
    }
}
