//! Assigning a Service's block to the public network, and what a refusal means. A 409 is most
//! often a race (another client assigned the block since the driver read it), so it is a reason
//! to re-read, never a verdict by itself; a block is released only when its own tags and state
//! say it is this Service's and unassigned, and the network cannot take it.

use wasm_ccm_sdk::http::encode_path_segment;
use wasm_ccm_sdk::log;
use wasm_ccm_sdk::types::{ProviderError, Service};

use super::network::{Readiness, readiness};
use super::{Lb, on_public_network, service_tags};
use crate::model::{IpBlock, PublicNetwork};

/// Seconds before the next ensure while a block is in a passing state (neither unassigned nor
/// assigned nor failed, e.g. `unassigning`): it is assigned once it is unassigned.
pub(super) const CONFLICT_RETRY_SECS: u32 = 5;

/// Where a block stands with respect to the configured network.
#[derive(Debug, PartialEq, Eq)]
enum Standing {
    /// Assigned, or being assigned, to the configured network: nothing to do.
    Done,
    /// Unassigned, or its assignment failed (`error assigning`): assign it.
    Needed,
}

impl Lb<'_> {
    /// Where `block` stands; an error when it is assigned to something else (named, for the
    /// operator) or in a state that must pass first.
    fn standing(&self, block: &IpBlock) -> Result<Standing, ProviderError> {
        // `error assigning` (a documented IpBlock status) is not routed anywhere; upstream
        // re-assigned blocks without an assigned resource (review finding D5).
        if block.status == "error assigning" {
            return Ok(Standing::Needed);
        }
        match block.assigned_resource_type.as_deref() {
            Some(_) if on_public_network(block) == Some(self.network) => Ok(Standing::Done),
            Some(kind) => Err(ProviderError::Permanent(format!(
                "IP block {} ({}) is assigned to {kind} {}, not to the public network {}; unassign it or delete the Service's tags from it",
                block.id,
                block.cidr,
                block.assigned_resource_id.as_deref().unwrap_or("?"),
                self.network
            ))),
            // Whether `assignedResource*` shows while `assigning` is undocumented: either way
            // the assignment is under way.
            None if block.status == "assigning" => Ok(Standing::Done),
            None if block.status == "unassigned" => Ok(Standing::Needed),
            None if block.status.starts_with("error") => Err(ProviderError::Transient(format!(
                "IP block {} is in state {:?}; it is tried again",
                block.id, block.status
            ))),
            None => Err(ProviderError::retry_after(
                CONFLICT_RETRY_SECS,
                format!(
                    "IP block {} is {:?}; it is assigned once it is unassigned",
                    block.id, block.status
                ),
            )),
        }
    }

    /// Makes `block` assigned (or being assigned) to the configured network. `network` is the
    /// network as read in this call, if it was.
    pub(super) fn ensure_assigned(
        &self,
        service: &Service,
        block: &IpBlock,
        network: Option<PublicNetwork>,
    ) -> Result<(), ProviderError> {
        if self.standing(block)? == Standing::Done {
            return Ok(());
        }
        let network = match network {
            Some(n) => n,
            None => self.read_network()?,
        };
        self.check_network_takes(service, block, &network)?;
        let path = format!(
            "/networks/v1/public-networks/{}/ip-blocks",
            encode_path_segment(self.network)
        );
        match self
            .api
            .post_or_status(&path, &serde_json::json!({"id": block.id}))?
        {
            Ok(()) => Ok(()),
            Err(status) => self.after_refusal(service, block, status),
        }
    }

    /// Everything checkable before the assignment: the network takes blocks (a broken one
    /// releases this Service's unassigned block) and the block is in its location (one in
    /// another location can never be assigned to it, so it is released too).
    fn check_network_takes(
        &self,
        service: &Service,
        block: &IpBlock,
        network: &PublicNetwork,
    ) -> Result<(), ProviderError> {
        match readiness(network) {
            Readiness::Ready => {}
            Readiness::NotYet(status) => return Err(self.not_yet(&status)),
            Readiness::Broken(status) => {
                let done = self.release(service, block);
                return Err(self.broken(&status, &done));
            }
        }
        let network_location = network.location.trim();
        if !block.location.is_empty() && !block.location.eq_ignore_ascii_case(network_location) {
            let done = self.release(service, block);
            return Err(ProviderError::InvalidConfig(format!(
                "the Service's IP block {} is in {}, but the public network {} is in {network_location}, and a block can only be assigned in its own location; {done}",
                block.id, block.location, self.network
            )));
        }
        Ok(())
    }

    /// The assignment answered `status` (400 or 409): re-read the block and the network and
    /// decide from what they say now.
    fn after_refusal(
        &self,
        service: &Service,
        block: &IpBlock,
        status: u16,
    ) -> Result<(), ProviderError> {
        let fresh = self.reread(block, status)?;
        // Another client may have assigned it meanwhile: to our network is convergence, to
        // anything else a named refusal.
        if self.standing(&fresh)? == Standing::Done {
            log::info(
                "an IP block assignment conflicted, and a re-read shows the block on the public network",
                &[("block", &fresh.id), ("status", &status.to_string())],
            );
            return Ok(());
        }
        let network = self.read_network()?;
        self.check_network_takes(service, &fresh, &network)?;
        if status == 409 {
            // Transient, not retry-after: the first retry comes as soon (the controllers' backoff
            // starts at 5 s), but a conflict that lasts is no race, so it must back off and be
            // seen (a Warning event each time) while a billed block waits unassigned.
            return Err(ProviderError::Transient(format!(
                "assigning IP block {} to the public network {} answered 409 (conflict), and a re-read finds the block {} and the network READY; the assignment is tried again with backoff (if this repeats, check the network's IP block limit and overlapping blocks in the PhoenixNAP portal)",
                fresh.id, self.network, fresh.status
            )));
        }
        Err(ProviderError::Permanent(format!(
            "assigning IP block {} to the public network {} answered {status}, although the block is {} in {} and the network is READY in {}; the block is kept: check both in the PhoenixNAP portal",
            fresh.id, self.network, fresh.status, fresh.location, network.location
        )))
    }

    /// `GET /ips/v1/ip-blocks/{id}` after a refused assignment.
    fn reread(&self, block: &IpBlock, status: u16) -> Result<IpBlock, ProviderError> {
        let path = format!("/ips/v1/ip-blocks/{}", encode_path_segment(&block.id));
        match self.api.get_or_status::<IpBlock>(&path)? {
            Ok(fresh) if fresh.id == block.id => Ok(fresh),
            Ok(other) => Err(ProviderError::Transient(format!(
                "re-reading IP block {} answered block {:?}; the assignment is tried again",
                block.id, other.id
            ))),
            Err(read) => Err(ProviderError::Transient(format!(
                "assigning IP block {} answered {status}, and re-reading it answered {read}; whether it still exists is not decided, so nothing was changed",
                block.id
            ))),
        }
    }

    /// Deletes `block` when a re-read shows it still carries this Service's tags and is
    /// unassigned (the API refuses deleting an assigned block too). Never fails: the text says
    /// what happened, for the caller's error.
    fn release(&self, service: &Service, block: &IpBlock) -> String {
        let path = format!("/ips/v1/ip-blocks/{}", encode_path_segment(&block.id));
        let fresh = match self.api.get_or_status::<IpBlock>(&path) {
            Ok(Ok(fresh)) if fresh.id == block.id => fresh,
            Ok(Ok(_)) | Ok(Err(_)) | Err(_) => {
                return format!(
                    "the IP block {} was kept: re-reading it failed, so whether it may be released is not decided",
                    block.id
                );
            }
        };
        let ours = fresh.carries(&service_tags(self.cluster_id, service));
        let unassigned = fresh.status == "unassigned" && fresh.assigned_resource_type.is_none();
        if !ours || !unassigned {
            return format!(
                "the IP block {} was kept: it is {}{}",
                fresh.id,
                fresh.status,
                if ours {
                    ""
                } else {
                    ", and no longer carries this Service's tags"
                }
            );
        }
        match self.api.delete(&path) {
            Ok(()) => {
                log::info(
                    "released an unassigned IP block the public network cannot take",
                    &[("block", &fresh.id), ("cidr", &fresh.cidr)],
                );
                format!(
                    "the Service's unassigned IP block {} ({}) was released",
                    fresh.id, fresh.cidr
                )
            }
            Err(e) => format!(
                "releasing the Service's unassigned IP block {} failed ({e}); the next ensure tries again",
                fresh.id
            ),
        }
    }
}
