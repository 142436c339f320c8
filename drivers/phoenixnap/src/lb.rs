//! Load balancers (upstream `loadbalancers.go`): one tagged /29 IP block per Service, assigned to
//! the configured public network; the Service's address is the block's network address + 2 and
//! kube-vip announces it. Deleting marks the block with the `delete` tag; housekeeping
//! (`housekeeping.rs`) unassigns and deletes marked blocks (upstream's background reaper).
//! `network.rs` reads the public network, `assign.rs` assigns and handles refusals.

mod assign;
mod housekeeping;
pub mod network;

use std::net::Ipv4Addr;

use wasm_ccm_sdk::http::encode_path_segment;
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

/// The four tags that make a block this Service's (upstream's identity: cluster, usage,
/// namespace, name).
pub fn service_tags<'a>(cluster_id: &'a str, service: &'a Service) -> [(&'a str, &'a str); 4] {
    [
        (TAG_CLUSTER, cluster_id),
        (TAG_USAGE, USAGE),
        (TAG_NAME, &service.name),
        (TAG_NAMESPACE, &service.namespace),
    ]
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
        let wanted = service_tags(self.cluster_id, service);
        let blocks: Vec<IpBlock> = self
            .api
            .get(&format!("/ips/v1/ip-blocks?{}", tag_filter(&wanted)))?;
        // `IpBlock.id` is optional in ipapi.spec.yaml (review finding D6): a block without one
        // cannot be acted on, so it is not ours to use. Each block must carry every tag asked
        // for: the filter is the server's, and a list that ignored it (as the simulator's
        // servers list once did) must not hand another Service's block to this one.
        Ok(blocks
            .into_iter()
            .filter(|b| !b.has_tag(TAG_DELETE) && !b.id.is_empty() && b.carries(&wanted))
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

    /// The location a new block is created in: the wanted one, which must be the public
    /// network's (a block in another location can never be assigned to it: review finding D1),
    /// else the network's. Checked before anything is created.
    fn new_block_location(
        &self,
        wanted: Option<&WantedLocation>,
        network: &PublicNetwork,
    ) -> Result<String, ProviderError> {
        let location = network.location.trim().to_ascii_uppercase();
        match wanted {
            None => Ok(location),
            Some(w) if w.location.eq_ignore_ascii_case(&location) => Ok(location),
            Some(w) => Err(ProviderError::InvalidConfig(format!(
                "{} asks for an IP block in {}, but the public network {} is in {location}; an IP block can only be assigned to a public network in its own location, so none was created: set it to {location} or remove it",
                w.source, w.location, self.network
            ))),
        }
    }

    /// Everything that can be checked before a billed block is created for the Service.
    /// Returns the network, read now and `READY`.
    fn check_before_creating(
        &self,
        service: &Service,
        wanted: Option<&WantedLocation>,
    ) -> Result<(PublicNetwork, String), ProviderError> {
        // PhoenixNAP chooses a new block's address, so a requested one cannot be honoured; a
        // block created anyway would be refused below and stay billed.
        if let Some(ip) = service
            .load_balancer_ip
            .as_deref()
            .filter(|s| !s.trim().is_empty())
        {
            return Err(ProviderError::InvalidConfig(format!(
                "spec.loadBalancerIP is {ip}, but the Service has no IP block and PhoenixNAP chooses a new block's address; remove spec.loadBalancerIP (no block was created)"
            )));
        }
        // One read of the network: its location is configuration (refused first), its status
        // may pass.
        let network = self.read_network()?;
        let location = self.new_block_location(wanted, &network)?;
        self.require_ready(&network, "no IP block was created")?;
        Ok((network, location))
    }

    /// Finds or creates the Service's block, assigns it, and publishes its address in the
    /// status and in kube-vip's annotation.
    pub fn ensure(
        &self,
        service: &Service,
        wanted: Option<&WantedLocation>,
    ) -> Result<EnsureResult, ProviderError> {
        let (block, network) = match self.active_block(service)? {
            Some(block) => (block, None),
            None => {
                let (network, location) = self.check_before_creating(service, wanted)?;
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
                (self.api.post("/ips/v1/ip-blocks", &body)?, Some(network))
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
        self.ensure_assigned(service, &block, network)?;
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
