//! Load balancers (upstream `loadbalancers.go`): one tagged /29 IP block per Service, assigned to
//! the configured public network; the Service's address is the block's network address + 2 and
//! kube-vip announces it. Deleting marks the block with the `delete` tag; [`housekeeping`]
//! unassigns and deletes marked blocks (upstream's background reaper).

use std::cell::RefCell;
use std::net::Ipv4Addr;

use wasm_ccm_sdk::http::encode_path_segment;
use wasm_ccm_sdk::log;
use wasm_ccm_sdk::types::{EnsureResult, Ingress, ProviderError, Service};

use crate::api::Api;
use crate::model::{BlockTag, IpBlock, PublicNetwork, TagDefinition};

/// Tag names upstream uses, and the value of `usage`.
pub const TAG_USAGE: &str = "usage";
/// Tag `cluster`: the kube-system namespace UID, so clusters sharing an account never see each
/// other's blocks.
pub const TAG_CLUSTER: &str = "cluster";
/// Tag `serviceNamespace`: the Service's namespace.
pub const TAG_NAMESPACE: &str = "serviceNamespace";
/// Tag `serviceName`: the Service's name.
pub const TAG_NAME: &str = "serviceName";
/// Tag `delete` (`true`): the Service is gone; housekeeping unassigns and deletes the block.
pub const TAG_DELETE: &str = "delete";
/// The value of tag `usage` on every block the driver (or upstream) made.
pub const USAGE: &str = "cloud-provider-phoenixnap-auto";
/// The annotation kube-vip reads a Service's addresses from.
pub const KUBE_VIP_ANNOTATION: &str = "kube-vip.io/loadbalancerIPs";
/// The block size upstream asks for.
pub const BLOCK_SIZE: &str = "/29";
/// The spellings of `assignedResourceType` for a public network: upstream's primary constant
/// `"public network"` and its alternative `PUBLIC_NETWORK` (upstream commit 86fc6c9 "handle
/// different names for 'public network'").
pub const NETWORK_RESOURCE_TYPES: &[&str] = &["public network", "PUBLIC_NETWORK"];

/// Where a Service's block should be, and which setting said so (for error messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WantedLocation {
    /// The location, e.g. `PHX`.
    pub location: String,
    /// The setting it came from, e.g. "the annotation phoenixnap.com/ip-location".
    pub source: String,
}

/// Whether the block is assigned to a public network (either spelling).
fn on_public_network(block: &IpBlock) -> Option<&str> {
    match block.assigned_resource_type.as_deref() {
        Some(kind) if NETWORK_RESOURCE_TYPES.contains(&kind) => block
            .assigned_resource_id
            .as_deref()
            .filter(|id| !id.is_empty()),
        _ => None,
    }
}

/// What every load-balancer call needs.
pub struct Lb<'a> {
    /// The API client.
    pub api: &'a Api,
    /// The kube-system namespace UID.
    pub cluster_id: &'a str,
    /// The public network ID blocks are assigned to (from `kube-vip://<id>`).
    pub network: &'a str,
    /// The public network's location, once read (a network does not move).
    pub network_location: &'a RefCell<Option<String>>,
}

/// Upstream's informational name.
pub fn name(service: &Service, cluster_id: &str) -> String {
    format!(
        "usage={USAGE}:service={}/{}:cluster={cluster_id}",
        service.namespace, service.name
    )
}

/// The Service's address in a block: network address + 2 (the first is the network, the second
/// the gateway).
pub fn service_ip(block: &IpBlock) -> Result<Ipv4Addr, ProviderError> {
    let bad = || {
        ProviderError::Permanent(format!(
            "IP block {} has CIDR {:?}, not an IPv4 /29",
            block.id, block.cidr
        ))
    };
    let (addr, prefix) = block.cidr.split_once('/').ok_or_else(bad)?;
    let addr: Ipv4Addr = addr.parse().map_err(|_| bad())?;
    let prefix: u32 = prefix.parse().map_err(|_| bad())?;
    if !(1..=29).contains(&prefix) {
        return Err(bad());
    }
    let network = u32::from(addr) & (u32::MAX << (32 - prefix));
    Ok(Ipv4Addr::from(network + 2))
}

fn tag_filter(tags: &[(&str, &str)]) -> String {
    tags.iter()
        .map(|(k, v)| format!("tag={}.{}", encode_path_segment(k), encode_path_segment(v)))
        .collect::<Vec<_>>()
        .join("&")
}

impl Lb<'_> {
    fn require_cluster(&self) -> Result<(), ProviderError> {
        if self.cluster_id.is_empty() {
            return Err(ProviderError::Permanent(
                "no cluster ID (the kube-system namespace UID): IP blocks are tagged with it, so load balancers need it; the host passes it to init".into(),
            ));
        }
        Ok(())
    }

    /// The Service's blocks not marked for deletion.
    fn active_blocks(&self, service: &Service) -> Result<Vec<IpBlock>, ProviderError> {
        self.require_cluster()?;
        let query = tag_filter(&[
            (TAG_CLUSTER, self.cluster_id),
            (TAG_USAGE, USAGE),
            (TAG_NAME, &service.name),
            (TAG_NAMESPACE, &service.namespace),
        ]);
        let blocks: Vec<IpBlock> = self.api.get(&format!("/ips/v1/ip-blocks?{query}"))?;
        // `IpBlock.id` is optional in ipapi.spec.yaml (review finding D6): a block without one
        // cannot be acted on, so it is not ours to use.
        Ok(blocks
            .into_iter()
            .filter(|b| !b.has_tag(TAG_DELETE) && !b.id.is_empty())
            .collect())
    }

    /// The one active block, if any; several is an error an operator must resolve.
    fn active_block(&self, service: &Service) -> Result<Option<IpBlock>, ProviderError> {
        let mut blocks = self.active_blocks(service)?;
        match blocks.len() {
            0 => Ok(None),
            1 => Ok(blocks.pop()),
            _ => Err(ProviderError::Permanent(format!(
                "Service {}/{} has {} IP blocks ({}); delete all but one in the PhoenixNAP portal",
                service.namespace,
                service.name,
                blocks.len(),
                blocks
                    .iter()
                    .map(|b| b.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// The current ingress, or none.
    pub fn get(&self, service: &Service) -> Result<Option<Vec<Ingress>>, ProviderError> {
        match self.active_block(service)? {
            None => Ok(None),
            Some(block) => Ok(Some(vec![Ingress::vip(service_ip(&block)?.to_string())])),
        }
    }

    /// Creates the tag names upstream tags blocks with, when they do not exist yet.
    fn ensure_tag_names(&self) -> Result<(), ProviderError> {
        let existing: Vec<TagDefinition> = self.api.get("/tag-manager/v1/tags")?;
        for name in [TAG_USAGE, TAG_CLUSTER, TAG_NAMESPACE, TAG_NAME, TAG_DELETE] {
            if !existing.iter().any(|t| t.name == name) {
                // tagapi.spec.yaml `POST /tags` documents 409 for a name that exists: another
                // writer created it since the list (review finding D4), which is what we want.
                self.api.post_accepting(
                    "/tag-manager/v1/tags",
                    &serde_json::json!({"name": name, "isBillingTag": false}),
                    &[409],
                )?;
            }
        }
        Ok(())
    }

    /// The block's assignment must be our public network; an unassigned block, or one whose
    /// assignment failed (`error assigning`, upstream re-assigned a block without an assigned
    /// resource; review finding D5), is assigned. Returns whether it had to be assigned.
    fn ensure_assigned(&self, block: &IpBlock) -> Result<bool, ProviderError> {
        let retry = block.status == "error assigning";
        match block.assigned_resource_type.as_deref() {
            _ if retry => {}
            Some(_) if on_public_network(block) == Some(self.network) => return Ok(false),
            Some(kind) => {
                return Err(ProviderError::Permanent(format!(
                    "IP block {} ({}) is assigned to {kind} {}, not to the public network {}; unassign it or delete the Service's tags from it",
                    block.id,
                    block.cidr,
                    block.assigned_resource_id.as_deref().unwrap_or("?"),
                    self.network
                )));
            }
            None if block.status == "assigning" => return Ok(false),
            None if block.status.starts_with("error") => {
                return Err(ProviderError::Transient(format!(
                    "IP block {} is in state {:?}",
                    block.id, block.status
                )));
            }
            None => {}
        }
        self.api.post_accepted(
            &format!(
                "/networks/v1/public-networks/{}/ip-blocks",
                encode_path_segment(self.network)
            ),
            &serde_json::json!({"id": block.id}),
        )?;
        Ok(true)
    }

    /// The configured public network's location (`GET /networks/v1/public-networks/{id}`,
    /// networkapi.spec.yaml, where `PublicNetwork.location` is required), read once.
    fn network_location(&self) -> Result<String, ProviderError> {
        if let Some(l) = self.network_location.borrow().as_ref() {
            return Ok(l.clone());
        }
        let path = format!(
            "/networks/v1/public-networks/{}",
            encode_path_segment(self.network)
        );
        let network: PublicNetwork = match self.api.get_or_status(&path)? {
            Ok(n) => n,
            Err(404) => {
                return Err(ProviderError::InvalidConfig(format!(
                    "the public network {} (PNAP_LOAD_BALANCER or loadbalancer kube-vip://<id>) does not exist",
                    self.network
                )));
            }
            Err(status) => {
                return Err(ProviderError::Unauthorized(format!(
                    "reading the public network {} answered {status}; the credentials need the bmc.read scope",
                    self.network
                )));
            }
        };
        let location = network.location.trim().to_ascii_uppercase();
        *self.network_location.borrow_mut() = Some(location.clone());
        Ok(location)
    }

    /// The location a new block is created in: the wanted one, which must be the public
    /// network's (a block in another location can never be assigned to it: review finding D1),
    /// else the network's. Checked before anything is created.
    fn new_block_location(&self, wanted: Option<&WantedLocation>) -> Result<String, ProviderError> {
        let network = self.network_location()?;
        match wanted {
            None => Ok(network),
            Some(w) if w.location.eq_ignore_ascii_case(&network) => Ok(network),
            Some(w) => Err(ProviderError::InvalidConfig(format!(
                "{} asks for an IP block in {}, but the public network {} is in {network}; an IP block can only be assigned to a public network in its own location, so none was created: set it to {network} or remove it",
                w.source, w.location, self.network
            ))),
        }
    }

    /// Finds or creates the Service's block, assigns it, and publishes its address in the
    /// status and in kube-vip's annotation.
    pub fn ensure(
        &self,
        service: &Service,
        wanted: Option<&WantedLocation>,
    ) -> Result<EnsureResult, ProviderError> {
        let block = match self.active_block(service)? {
            Some(block) => block,
            None => {
                let location = self.new_block_location(wanted)?;
                self.ensure_tag_names()?;
                let body = serde_json::json!({
                    "location": location,
                    "cidrBlockSize": BLOCK_SIZE,
                    "tags": [
                        BlockTag::new(TAG_USAGE, USAGE),
                        BlockTag::new(TAG_CLUSTER, self.cluster_id),
                        BlockTag::new(TAG_NAMESPACE, &service.namespace),
                        BlockTag::new(TAG_NAME, &service.name),
                    ],
                });
                self.api.post("/ips/v1/ip-blocks", &body)?
            }
        };
        if let Some(w) = wanted
            && !block.location.is_empty()
            && !block.location.eq_ignore_ascii_case(&w.location)
        {
            return Err(ProviderError::InvalidConfig(format!(
                "the Service's IP block {} is in {}, but {} asks for {}; an IP block cannot move: re-create the Service to change its location",
                block.id, block.location, w.source, w.location
            )));
        }
        let ip = service_ip(&block)?.to_string();
        if let Some(wanted) = service
            .load_balancer_ip
            .as_deref()
            .filter(|s| !s.is_empty())
            && wanted != ip
        {
            return Err(ProviderError::InvalidConfig(format!(
                "spec.loadBalancerIP is {wanted}, but the Service's IP block {} gives {ip}; remove spec.loadBalancerIP (PhoenixNAP chooses the block)",
                block.id
            )));
        }
        self.ensure_assigned(&block)?;
        let mut result = EnsureResult::with_ingress(vec![Ingress::vip(ip.clone())]);
        if service.annotation(KUBE_VIP_ANNOTATION) != Some(ip.as_str()) {
            result
                .set_annotations
                .push((KUBE_VIP_ANNOTATION.to_string(), ip));
        }
        Ok(result)
    }

    /// Marks the Service's block for deletion: its service tags replaced by `delete=true`.
    pub fn delete(&self, service: &Service) -> Result<(), ProviderError> {
        for block in self.active_blocks(service)? {
            let mut tags: Vec<BlockTag> = block
                .tags
                .iter()
                .filter(|t| t.name != TAG_NAME && t.name != TAG_NAMESPACE)
                .cloned()
                .collect();
            tags.push(BlockTag::new(TAG_DELETE, "true"));
            self.api.put(
                &format!("/ips/v1/ip-blocks/{}/tags", encode_path_segment(&block.id)),
                &tags,
            )?;
        }
        Ok(())
    }

    /// Unassigns and deletes every block of this cluster marked for deletion, each one (upstream
    /// acted on the first block of the list only). Returns the first failure after trying all.
    pub fn housekeeping(&self) -> Result<usize, ProviderError> {
        self.require_cluster()?;
        let query = tag_filter(&[
            (TAG_CLUSTER, self.cluster_id),
            (TAG_USAGE, USAGE),
            (TAG_DELETE, "true"),
        ]);
        let blocks: Vec<IpBlock> = self.api.get(&format!("/ips/v1/ip-blocks?{query}"))?;
        let mut first_error = None;
        let mut acted = 0;
        for block in blocks.iter().filter(|b| !b.id.is_empty()) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn block(cidr: &str) -> IpBlock {
        IpBlock {
            id: "b1".into(),
            location: "PHX".into(),
            cidr: cidr.into(),
            status: "assigned".into(),
            assigned_resource_id: None,
            assigned_resource_type: None,
            tags: vec![],
        }
    }

    #[test]
    fn the_service_ip_is_the_third_address() {
        assert_eq!(
            service_ip(&block("198.51.100.8/29")).unwrap().to_string(),
            "198.51.100.10"
        );
        assert_eq!(
            service_ip(&block("198.51.100.13/29")).unwrap().to_string(),
            "198.51.100.10"
        );
        assert!(service_ip(&block("2001:db8::/64")).is_err());
        assert!(service_ip(&block("198.51.100.8")).is_err());
    }

    #[test]
    fn tag_filters_are_repeated_params() {
        assert_eq!(
            tag_filter(&[("cluster", "u-1"), ("usage", USAGE)]),
            "tag=cluster.u-1&tag=usage.cloud-provider-phoenixnap-auto"
        );
    }
}
