//! Ownership tags on the public IPs the driver associates, so that a driver instance that never
//! saw the association (the controller was killed, or a new leader took over) finds the IP again:
//! the next ensure adopts it instead of associating a second one, the next delete releases it.
//!
//! An IP is tagged right after `associateIpAddress` answers: that answer already carries the
//! new IP's id next to the job id (`AssociateIPAddrCmd` is a `BaseAsyncCreateCmd`: its
//! `create()` allocates the address, state `Allocating`, before the job runs), and `createTags`
//! takes an IP in any state. The job of the association is waited for only afterwards.
//!
//! Tags are additive: upstream's CCM neither reads nor writes them, and CloudStack removes an
//! IP's tags when it is released (`NetworkServiceImpl.releaseIpAddressInternal`), so a roll-back
//! to upstream or a later release leaves nothing behind. IPs the driver did not associate (a
//! user's own `spec.loadBalancerIP`) are never tagged.
//!
//! Look-ups filter on the load-balancer tag alone: CloudStack's `tags[i]` filter matches an IP
//! that has ANY of the pairs (`searchForIPAddresses` ORs one clause per pair) and compares
//! case-insensitively, so the answer is checked here for the exact pair. The load-balancer name
//! comes from the Service's UID and is unique across clusters; the cluster and Service tags are
//! for operators.

use wasm_ccm_sdk::log;
use wasm_ccm_sdk::types::{ProviderError, Service};

use super::Lb;
use crate::api::{Budget, JOB_RETRY_SECS, Params};
use crate::model::PublicIp;

/// The Service's load-balancer name (`a` + UID without dashes, cut to 32): the key look-ups use.
pub const TAG_LOAD_BALANCER: &str = "wasm-ccm/load-balancer";
/// `--cluster-name`.
pub const TAG_CLUSTER: &str = "wasm-ccm/cluster";
/// `namespace/name` of the Service.
pub const TAG_SERVICE: &str = "wasm-ccm/service";

/// CloudStack's `ResourceObjectType` of public IPs.
const RESOURCE_TYPE: &str = "PublicIpAddress";

impl Lb<'_> {
    /// The allocated (or still allocating, or releasing) public IPs tagged for `lbname`.
    pub(super) fn tagged_ips(&self, lbname: &str) -> Result<Vec<PublicIp>, ProviderError> {
        let ips = self.public_ips(
            Params::new()
                .set("tags[0].key", TAG_LOAD_BALANCER)
                .set("tags[0].value", lbname),
        )?;
        Ok(ips
            .into_iter()
            .filter(|ip| ip.has_tag(TAG_LOAD_BALANCER, lbname) && !ip.is("Free"))
            .collect())
    }

    /// The one IP tagged for the Service, if any. Several are ambiguous: refused, so that
    /// nothing is adopted or released on a guess. An IP whose association or release still
    /// runs (a job of a replaced driver instance) is waited for.
    pub(super) fn tagged_ip(
        &self,
        service: &Service,
        lbname: &str,
    ) -> Result<Option<PublicIp>, ProviderError> {
        let tagged = self.tagged_ips(lbname)?;
        let ip = match &tagged[..] {
            [] => return Ok(None),
            [ip] => ip,
            many => return Err(ambiguous(service, many)),
        };
        if let Some(wait) = still_changing(ip, service) {
            return Err(wait);
        }
        Ok(Some(ip.clone()))
    }

    /// Tags a public IP we associate (or associated) for the Service, and waits for the job (a
    /// tag is visible only once its job ran). `createTags` is sent first, without a look at the
    /// IP, so that the crash window after `associateIpAddress` stays two requests.
    ///
    /// The address was free when we associated it, so a tag of ours already on it with another
    /// value is stale: left by an association that failed (a rollback keeps tags) while no
    /// instance was there to remove them. `createTags` fails the whole job for a key already on
    /// the resource ("tag … already on …"); then the stale tags are removed and the pairs not
    /// yet in place are sent again, once. A job whose outcome is unknown (still running, or its
    /// poll failed) is never repeated.
    pub(super) fn tag(
        &self,
        service: &Service,
        lbname: &str,
        ip_id: &str,
        budget: &Budget,
    ) -> Result<(), ProviderError> {
        let service_key = service.key();
        let mut pairs = vec![
            (TAG_LOAD_BALANCER, lbname),
            (TAG_SERVICE, service_key.as_str()),
        ];
        // CloudStack refuses an empty value ("Value for the key … is either null or empty").
        if !self.cluster_name.is_empty() {
            pairs.push((TAG_CLUSTER, self.cluster_name));
        }
        let job = self.api.submit("createTags", create_tags(ip_id, &pairs))?;
        let failure = match self.api.wait(&job, budget) {
            Ok(_) => return Ok(()),
            Err(e) if self.api.is_pending(&job) => return Err(e),
            Err(e) => e,
        };
        let current = self.ip_by_id(ip_id)?.map(|ip| ip.tags).unwrap_or_default();
        let stale: Vec<_> = current
            .iter()
            .filter(|t| [TAG_LOAD_BALANCER, TAG_SERVICE, TAG_CLUSTER].contains(&t.key.as_str()))
            .filter(|t| !pairs.iter().any(|(k, v)| t.key == *k && t.value == *v))
            .collect();
        pairs.retain(|(k, v)| !current.iter().any(|t| t.key == *k && t.value == *v));
        if stale.is_empty() {
            // Nothing stale: the failure stands, unless every pair is in place after all.
            return if pairs.is_empty() {
                Ok(())
            } else {
                Err(failure)
            };
        }
        log::warn(
            "removing stale ownership tags from a public IP we associated",
            &[
                ("ip-id", ip_id),
                ("service", &service_key),
                (
                    "tags",
                    &stale
                        .iter()
                        .map(|t| format!("{}={}", t.key, t.value))
                        .collect::<Vec<_>>()
                        .join(","),
                ),
            ],
        );
        let mut params = Params::new()
            .set("resourcetype", RESOURCE_TYPE)
            .set("resourceids", ip_id);
        for (i, t) in stale.iter().enumerate() {
            params = params
                .set(&format!("tags[{i}].key"), &t.key)
                .set(&format!("tags[{i}].value"), &t.value);
        }
        self.api.run("deleteTags", params, budget)?;
        if !pairs.is_empty() {
            self.api
                .run("createTags", create_tags(ip_id, &pairs), budget)?;
        }
        Ok(())
    }

    /// Best-effort removal of the Service's tags from an IP whose association failed:
    /// CloudStack gives the address back to the pool but nothing says it drops the tags, and a
    /// tag left on a free address would make whoever gets it next look like this Service's.
    /// Only the pairs with this Service's values go (`deleteTags` matches key and value): by
    /// the time a later call learns of the failure, another Service may own the address and
    /// its tags.
    pub(super) fn untag_quietly(&self, service: &Service, ip_id: &str, budget: &Budget) {
        let service_key = service.key();
        let lbname = super::spec::lb_name(service);
        let mut pairs = vec![
            (TAG_LOAD_BALANCER, lbname.as_str()),
            (TAG_SERVICE, service_key.as_str()),
        ];
        if !self.cluster_name.is_empty() {
            pairs.push((TAG_CLUSTER, self.cluster_name));
        }
        let params = create_tags(ip_id, &pairs);
        if let Err(e) = self.api.run("deleteTags", params, budget) {
            log::warn(
                "could not remove the ownership tags of a public IP whose association failed",
                &[("ip-id", ip_id), ("error", &e.to_string())],
            );
        }
    }
}

/// `createTags` (or `deleteTags`) parameters for `pairs` on the public IP `ip_id`.
fn create_tags(ip_id: &str, pairs: &[(&str, &str)]) -> Params {
    let mut params = Params::new()
        .set("resourcetype", RESOURCE_TYPE)
        .set("resourceids", ip_id);
    for (i, (key, value)) in pairs.iter().enumerate() {
        params = params
            .set(&format!("tags[{i}].key"), *key)
            .set(&format!("tags[{i}].value"), *value);
    }
    params
}

/// Two or more IPs tagged for one Service: which one is the load balancer's cannot be told.
/// A `retry-after` while CloudStack is still associating or releasing `ip` (its job runs):
/// acting on it now would release nothing, or leave it allocated once the job ends.
pub(super) fn still_changing(ip: &PublicIp, service: &Service) -> Option<ProviderError> {
    let doing = if ip.is("Allocating") {
        "associating"
    } else if ip.is("Releasing") {
        "releasing"
    } else {
        return None;
    };
    Some(ProviderError::retry_after(
        JOB_RETRY_SECS,
        format!(
            "CloudStack is still {doing} public IP {} of Service {}",
            ip.ipaddress,
            service.key()
        ),
    ))
}

fn ambiguous(service: &Service, ips: &[PublicIp]) -> ProviderError {
    let list: Vec<String> = ips
        .iter()
        .map(|ip| format!("{} (id {})", ip.ipaddress, ip.id))
        .collect();
    ProviderError::Permanent(format!(
        "Service {}: {} public IPs carry the tag {TAG_LOAD_BALANCER}={}: {}; nothing is adopted or released while it is ambiguous. Release the IP that is not the load balancer's, or delete its {TAG_LOAD_BALANCER} tag",
        service.key(),
        ips.len(),
        ips.first()
            .and_then(|ip| ip.tags.iter().find(|t| t.key == TAG_LOAD_BALANCER))
            .map(|t| t.value.as_str())
            .unwrap_or_default(),
        list.join(", ")
    ))
}
