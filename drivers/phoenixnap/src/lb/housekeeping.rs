//! Housekeeping (upstream's background reaper): unassigns and deletes the blocks that `delete`
//! marked, each one.

use wasm_ccm_sdk::http::encode_path_segment;
use wasm_ccm_sdk::log;
use wasm_ccm_sdk::types::ProviderError;

use super::{Lb, TAG_CLUSTER, TAG_DELETE, TAG_USAGE, USAGE, on_public_network, tag_filter};
use crate::model::IpBlock;

impl Lb<'_> {
    /// Unassigns and deletes every block of this cluster marked for deletion, each one (upstream
    /// acted on the first block of the list only). Returns the first failure after trying all.
    pub fn housekeeping(&self) -> Result<usize, ProviderError> {
        self.require_cluster()?;
        let wanted = [
            (TAG_CLUSTER, self.cluster_id),
            (TAG_USAGE, USAGE),
            (TAG_DELETE, "true"),
        ];
        let query = tag_filter(&wanted);
        let blocks: Vec<IpBlock> = self.api.get(&format!("/ips/v1/ip-blocks?{query}"))?;
        let mut first_error = None;
        let mut acted = 0;
        // The answer is checked against the filter: a block that does not carry this
        // cluster's `usage`, `cluster` and `delete=true` is never released, whatever the
        // server's filtering did.
        for block in blocks
            .iter()
            .filter(|b| !b.id.is_empty() && b.carries(&wanted))
        {
            let step = match (block.status.as_str(), on_public_network(block)) {
                ("unassigned", _) => self.api.delete(&format!(
                    "/ips/v1/ip-blocks/{}",
                    encode_path_segment(&block.id)
                )),
                ("unassigning" | "assigning", _) => continue,
                // Only a block assigned to a public network is unassigned from it (review
                // finding D5: a block on a server is not ours to detach).
                (_, Some(network)) => self.api.delete(&format!(
                    "/networks/v1/public-networks/{}/ip-blocks/{}",
                    encode_path_segment(network),
                    encode_path_segment(&block.id)
                )),
                (status, None) => {
                    log::warn(
                        "an IP block marked for deletion is not assigned to a public network; left alone",
                        &[
                            ("block", &block.id),
                            ("status", status),
                            (
                                "assigned-to",
                                block.assigned_resource_type.as_deref().unwrap_or("nothing"),
                            ),
                        ],
                    );
                    continue;
                }
            };
            match step {
                Ok(()) => acted += 1,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(acted),
        }
    }
}
