//! Load balancers (upstream `cloudstack_loadbalancer.go`): one CloudStack LB rule per Service port
//! on one public IP, firewall rules or VPC ACL entries opening the ports, and the IP released on
//! delete when we took it.
//!
//! Identity is the rule names (`<lbname>-<protocol>-<port>`), matched exactly, and for a public
//! IP we associated its ownership tags (`ownership`), so that an IP whose rules do not exist yet
//! is found again by a driver instance that never saw it. Every change is an asynchronous job
//! waited for within the call's budget; a job that outlives it makes the call answer
//! `retry-after`, and the next call first waits for it, then continues from CloudStack's state,
//! so nothing is done twice.

pub mod firewall;
pub mod hosts;
pub mod ownership;
pub mod spec;

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;
use wasm_ccm_sdk::cluster;
use wasm_ccm_sdk::log;
use wasm_ccm_sdk::types::{EnsureResult, Ingress, Node, ProviderError, Service};

use crate::api::{Api, Budget, JOB_RETRY_SECS, Params};
use crate::model::{LbRule, Network, PublicIp, split_cidrs};
use firewall::Opening;
use hosts::Hosts;
use spec::{Wanted, WantedRule};

/// VMs CloudStack refused as members, each with why.
type Refused = Vec<(String, String)>;

/// Assignments tried per rule and call when members go bad in between.
const ASSIGN_ATTEMPTS: usize = 3;

/// An IP this driver associated for a Service whose load balancer is not complete yet: reused
/// by the next call instead of associating another one, released if the Service goes away.
#[derive(Clone, Debug)]
pub struct Claim {
    /// The UUID of the public IP.
    pub ip_id: String,
    /// It is the Service's `spec.loadBalancerIP`.
    pub requested: bool,
}

/// State kept between calls; caches only (a fresh instance works from CloudStack's state).
#[derive(Default)]
pub struct LbState {
    /// Per Service UID.
    pub claims: RefCell<BTreeMap<String, Claim>>,
    /// The management server's `(major, minor)` version from `listCapabilities`, once known.
    pub version: Cell<Option<(u32, u32)>>,
}

/// The load-balancer operations of one call.
pub struct Lb<'a> {
    /// The API client.
    pub api: &'a Api,
    /// Caches kept between calls.
    pub state: &'a LbState,
    /// How long this call may wait for CloudStack's jobs (`CLOUDSTACK_JOB_BUDGET`, 10 s by
    /// default).
    pub job_budget: Duration,
    /// `--cluster-name`, for the ownership tags.
    pub cluster_name: &'a str,
}

/// One of our rules found in CloudStack, with what its name says.
#[derive(Clone, Debug)]
struct Found {
    rule: LbRule,
    protocol: &'static str,
    port: u16,
}

impl Found {
    fn opening(&self) -> Opening {
        Opening {
            protocol: spec::ip_protocol(self.protocol),
            port: self.port,
        }
    }
}

fn ingress(wanted_hostname: Option<&str>, ip: &str) -> Vec<Ingress> {
    vec![match wanted_hostname {
        Some(h) => Ingress {
            ip: None,
            hostname: Some(h.to_string()),
            ip_mode: None,
        },
        None => Ingress {
            ip: Some(ip.to_string()),
            hostname: None,
            ip_mode: None,
        },
    }]
}

/// The object a job result carries (`{"loadbalancer": {...}}` → the rule).
fn job_object<T: serde::de::DeserializeOwned>(
    result: &Value,
    key: &str,
) -> Result<T, ProviderError> {
    let object = result.get(key).cloned().unwrap_or(Value::Null);
    serde_json::from_value(object).map_err(|e| {
        ProviderError::Transient(format!(
            "unexpected CloudStack job result: no {key} object in {result}: {e}"
        ))
    })
}

fn openings(rules: &[WantedRule]) -> Vec<Opening> {
    let mut out: Vec<Opening> = rules
        .iter()
        .map(|r| Opening {
            protocol: r.ip_protocol(),
            port: r.port,
        })
        .collect();
    out.dedup();
    out
}

impl Lb<'_> {
    fn budget(&self, service: &Service) -> Budget {
        Budget::new(self.job_budget, &service.uid)
    }

    /// Every LB rule matching `filter` (one parameter), in the configured project.
    fn load_balancer_rules(&self, filter: &str, value: &str) -> Result<Vec<LbRule>, ProviderError> {
        self.api.list(
            "listLoadBalancerRules",
            self.api
                .scoped(Params::new().set(filter, value).set("listall", "true"))?,
            "loadbalancerrule",
        )
    }

    /// Our rules: a keyword search (a substring match in CloudStack) filtered to exact names.
    fn discover(&self, lbname: &str) -> Result<Vec<Found>, ProviderError> {
        let rules = self.load_balancer_rules("keyword", lbname)?;
        Ok(rules
            .into_iter()
            .filter_map(|rule| {
                let (protocol, port) = spec::parse_rule_name(lbname, &rule.name)?;
                Some(Found {
                    rule,
                    protocol,
                    port,
                })
            })
            .collect())
    }

    fn network(&self, id: &str) -> Result<Network, ProviderError> {
        let networks: Vec<Network> = self.api.list(
            "listNetworks",
            self.api.scoped(Params::new().set("id", id))?,
            "network",
        )?;
        networks.into_iter().find(|n| n.id == id).ok_or_else(|| {
            ProviderError::NotFound(format!(
                "CloudStack network {id} is not visible to this API key"
            ))
        })
    }

    fn public_ips(&self, params: Params) -> Result<Vec<PublicIp>, ProviderError> {
        self.api.list(
            "listPublicIpAddresses",
            self.api
                .scoped(params.set("allocatedonly", "false").set("listall", "true"))?,
            "publicipaddress",
        )
    }

    fn ip_by_id(&self, id: &str) -> Result<Option<PublicIp>, ProviderError> {
        match self.public_ips(Params::new().set("id", id)) {
            Ok(ips) => Ok(ips.into_iter().find(|ip| ip.id == id)),
            Err(ProviderError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn ip_by_address(&self, address: &str) -> Result<Vec<PublicIp>, ProviderError> {
        Ok(self
            .public_ips(Params::new().set("ipaddress", address))?
            .into_iter()
            .filter(|ip| ip.ipaddress == address)
            .collect())
    }

    /// Waits for the jobs an earlier call for the Service left running. An association that
    /// turned out to have failed gave its address back: its claim goes, and so do our tags
    /// (CloudStack does not drop them when an association fails; left on a free address they
    /// would make its next owner look like this Service's, and make that owner's `createTags`
    /// fail).
    fn finish_pending(&self, service: &Service, budget: &Budget) -> Result<(), ProviderError> {
        for job in self.api.finish_pending(budget)? {
            if let ("associateIpAddress", Some(ip_id)) = (job.command, &job.entity) {
                let mut claims = self.state.claims.borrow_mut();
                if claims.get(&service.uid).is_some_and(|c| &c.ip_id == ip_id) {
                    claims.remove(&service.uid);
                }
                drop(claims);
                self.untag_quietly(service, ip_id, budget);
            }
        }
        Ok(())
    }

    /// Rules being deleted by a job this instance does not know of: wait for them.
    fn refuse_while_revoking(found: &[Found]) -> Result<(), ProviderError> {
        match found
            .iter()
            .find(|f| f.rule.state.eq_ignore_ascii_case("revoke"))
        {
            Some(f) => Err(ProviderError::retry_after(
                JOB_RETRY_SECS,
                format!(
                    "CloudStack is still deleting load-balancer rule {}",
                    f.rule.name
                ),
            )),
            None => Ok(()),
        }
    }

    /// The management server's `(major, minor)` version: `cloudstackversion` of
    /// `listCapabilities` (e.g. `4.15.2.0` in cloudstack-go's recorded
    /// ConfigurationService.json), which every account may call. Asked once per instance.
    fn version(&self) -> Result<(u32, u32), ProviderError> {
        if let Some(known) = self.state.version.get() {
            return Ok(known);
        }
        let body = self.api.read("listCapabilities", Params::new())?;
        let text = body
            .pointer("/capability/cloudstackversion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let version = parse_version(text).ok_or_else(|| {
            ProviderError::Transient(format!(
                "unexpected listCapabilities response from CloudStack: cloudstackversion {text:?} is not a version such as 4.18.0.0"
            ))
        })?;
        self.state.version.set(Some(version));
        Ok(version)
    }

    /// Whether this CloudStack updates a rule's CIDR list in place (4.22+). If the version
    /// cannot be read, rules are recreated instead, which works on every version.
    fn cidr_updates(&self) -> bool {
        match self.version() {
            Ok(v) => v >= (4, 22),
            Err(e) => {
                log::warn(
                    "listCapabilities failed; CIDR changes recreate LB rules",
                    &[("error", &e.to_string())],
                );
                false
            }
        }
    }

    /// The CIDR list the LB rules can carry. `0.0.0.0/0` is never sent (it is what a rule
    /// without `cidrlist` allows). Other lists need CloudStack 4.18+: before, the parameter is
    /// refused (`CreateLoadBalancerRuleCmd.create`: 431 "Parameter cidrList is deprecated …",
    /// apache/cloudstack#4036; back in 4.18 with #6460). There the rules stay open to all and
    /// only the firewall rules or ACL entries restrict the sources.
    fn rule_cidrs(&self, service: &Service, wanted: &Wanted) -> Result<Vec<String>, ProviderError> {
        let anywhere = vec![spec::ANYWHERE.to_string()];
        if spec::same_cidrs(&wanted.rule_cidrs, &anywhere) {
            return Ok(anywhere);
        }
        let version = self.version()?;
        if version >= (4, 18) {
            return Ok(wanted.rule_cidrs.clone());
        }
        let firewall_too = spec::same_cidrs(&wanted.firewall_cidrs, &wanted.rule_cidrs);
        log::warn(
            "CloudStack before 4.18 takes no cidrlist on load-balancer rules; the source CIDRs restrict the firewall or ACL only",
            &[
                ("service", &service.key()),
                ("version", &format!("{}.{}", version.0, version.1)),
                (
                    "applied-to-firewall",
                    if firewall_too { "true" } else { "false" },
                ),
            ],
        );
        if !firewall_too {
            cluster::warning(
                "SourceCidrsIgnored",
                &format!(
                    "CloudStack {}.{} takes no cidrlist on load-balancer rules (4.18 and later do), and the firewall follows spec.loadBalancerSourceRanges: the {} annotation has no effect",
                    version.0,
                    version.1,
                    spec::SOURCE_CIDRS
                ),
            );
        }
        Ok(anywhere)
    }

    /// The current ingress, or `None` when nothing of the Service's load balancer exists. Its
    /// rules, and also a public IP we associated for it without rules yet (claimed by this
    /// instance, or carrying its ownership tag, in any state): the host asks `get` before it
    /// deletes, so an IP only `get` cannot see would never be released. A user's own
    /// `spec.loadBalancerIP` is never tagged or claimed while it has no rules, so it does not
    /// count (delete keeps it anyway). An untagged IP still being associated that may be this
    /// Service's (its tag not visible yet) is waited for (`retry-after`).
    pub fn get(&self, service: &Service) -> Result<Option<Vec<Ingress>>, ProviderError> {
        let wanted_hostname = spec::wanted(service).ok().and_then(|w| w.hostname);
        let lbname = spec::lb_name(service);
        let found = self.discover(&lbname)?;
        if let Some(f) = found.first() {
            return Ok(Some(ingress(wanted_hostname.as_deref(), &f.rule.publicip)));
        }
        let claimed = self.state.claims.borrow().get(&service.uid).cloned();
        if let Some(claim) = claimed
            && let Some(ip) = self.ip_by_id(&claim.ip_id)?.filter(|ip| !ip.is("Free"))
        {
            return Ok(Some(ingress(wanted_hostname.as_deref(), &ip.ipaddress)));
        }
        // Several tagged IPs exist too: delete then refuses them as ambiguous.
        if let Some(ip) = self.tagged_ips(&lbname)?.first() {
            return Ok(Some(ingress(wanted_hostname.as_deref(), &ip.ipaddress)));
        }
        self.refuse_while_unattributed(service, Params::new())?;
        Ok(None)
    }

    /// An IP still `Allocating` without any ownership tag (and not claimed by this instance
    /// for another Service) may be one a replaced instance associated for this Service and
    /// tagged with a `createTags` job that has not run yet: which Service it is for cannot be
    /// told until then, so the call waits (`retry-after`) instead of associating a second IP or
    /// taking the load balancer for gone. `place` narrows the look-up (the network or VPC).
    fn refuse_while_unattributed(
        &self,
        service: &Service,
        place: Params,
    ) -> Result<(), ProviderError> {
        let ips: Vec<PublicIp> = self.api.list(
            "listPublicIpAddresses",
            self.api.scoped(place.set("listall", "true"))?,
            "publicipaddress",
        )?;
        let claims = self.state.claims.borrow();
        let unattributed = ips.iter().find(|ip| {
            ip.is("Allocating")
                && !ip.issourcenat
                && !ip
                    .tags
                    .iter()
                    .any(|t| t.key == ownership::TAG_LOAD_BALANCER)
                && !claims
                    .iter()
                    .any(|(uid, c)| *uid != service.uid && c.ip_id == ip.id)
        });
        match unattributed {
            Some(ip) => Err(ProviderError::retry_after(
                JOB_RETRY_SECS,
                format!(
                    "CloudStack is still associating public IP {} (id {}), which has no {} tag yet: it may be Service {}'s, so nothing is associated or given up until its tag shows",
                    ip.ipaddress,
                    ip.id,
                    ownership::TAG_LOAD_BALANCER,
                    service.key()
                ),
            )),
            None => Ok(()),
        }
    }

    /// Creates or updates the load balancer (upstream `EnsureLoadBalancer`).
    pub fn ensure(&self, service: &Service, nodes: &[Node]) -> Result<EnsureResult, ProviderError> {
        let mut wanted = spec::wanted(service)?;
        let budget = self.budget(service);
        self.finish_pending(service, &budget)?;
        // Everything checkable is checked before anything is associated (and billed).
        wanted.rule_cidrs = self.rule_cidrs(service, &wanted)?;
        let found = self.discover(&wanted.name)?;
        Self::refuse_while_revoking(&found)?;
        // Existing rules fix the network, and so does a public IP already associated for the
        // Service (claimed, or tagged by an instance that did not get to create the rules):
        // CloudStack refuses rules on another network than their IP's, so a majority vote
        // could never succeed then. Members not on it are left out.
        let fixed = match found.first() {
            Some(f) => Some(f.rule.networkid.clone()),
            None => self.network_of_existing_ip(service, &wanted.name)?,
        };
        let hosts = hosts::find(self.api, nodes, fixed.as_deref())?;
        warn_hosts(&hosts);
        let network_id = hosts.network_id.clone().ok_or_else(|| {
            ProviderError::Transient(format!(
                "none of the {} nodes is a CloudStack VM that can be a load-balancer member (see the Warning events); node names must be VM names (or set providerIDs), and their VMs must not be destroyed or failed",
                nodes.len()
            ))
        })?;
        let network = self.network(&network_id)?;
        // Checked before anything is associated: CloudStack refuses the rules on such a network
        // (`LoadBalancingRulesManagerImpl.createPublicLoadBalancer`, "LB service is not
        // supported in specified network id"). A network listed without services is not judged.
        if !network.service.is_empty() && !network.has_service("Lb") {
            return Err(ProviderError::InvalidConfig(format!(
                "CloudStack network {} ({}) offers no load balancing (its offering has no Lb service); the nodes' VMs must be on a network whose offering includes Lb",
                network.name, network.id
            )));
        }

        let (ip, associated) = self.public_ip(service, &wanted, &found, &network, &budget)?;
        let result = self.converge(&wanted, &found, &ip, &network, &hosts, &budget);
        if let Err(e) = result {
            // An IP taken in this call for a load balancer that could not be built is given
            // back, unless the work is only waiting for a job (the next call goes on with it).
            if associated
                && !matches!(e, ProviderError::RetryAfter(_))
                && ip.ipaddress != wanted.requested_ip.clone().unwrap_or_default()
            {
                self.release_quietly(&ip, &budget);
                self.state.claims.borrow_mut().remove(&service.uid);
            }
            return Err(e);
        }
        let claim = self.state.claims.borrow_mut().remove(&service.uid);
        let mut set_annotations = Vec::new();
        if claim.is_some_and(|c| c.requested) && !wanted.ip_associated_by_us {
            set_annotations.push((spec::IP_ASSOCIATED.to_string(), "true".to_string()));
        }
        Ok(EnsureResult {
            ingress: ingress(wanted.hostname.as_deref(), &ip.ipaddress),
            set_annotations,
            remove_annotations: Vec::new(),
        })
    }

    /// The isolated network of the public IP `public_ip` would take before associating one:
    /// the one claimed earlier (while not free), else the one tagged for the Service. `None`
    /// when there is none, or it names no network (a VPC's IP before its first rule).
    fn network_of_existing_ip(
        &self,
        service: &Service,
        lbname: &str,
    ) -> Result<Option<String>, ProviderError> {
        let claimed = self.state.claims.borrow().get(&service.uid).cloned();
        let ip = match claimed {
            Some(claim) => self
                .ip_by_id(&claim.ip_id)?
                .filter(|ip| !ip.is("Free") && (!ip.state.is_empty() || !ip.allocated.is_empty())),
            None => None,
        };
        let ip = match ip {
            Some(ip) => Some(ip),
            None => self.tagged_ip(service, lbname)?,
        };
        Ok(ip
            .map(|ip| ip.associatednetworkid)
            .filter(|n| !n.is_empty()))
    }

    /// The public IP of the load balancer: the rules', else the one claimed earlier, else the one
    /// tagged for the Service, else the requested one (associated if free), else a new one.
    /// Returns whether this call associated it.
    fn public_ip(
        &self,
        service: &Service,
        wanted: &Wanted,
        found: &[Found],
        network: &Network,
        budget: &Budget,
    ) -> Result<(PublicIp, bool), ProviderError> {
        if let Some(first) = found.first() {
            if let Some(other) = found
                .iter()
                .find(|f| f.rule.publicipid != first.rule.publicipid)
            {
                log::warn(
                    "the Service's LB rules are on different public IPs; using the first",
                    &[("first", &first.rule.name), ("other", &other.rule.name)],
                );
            }
            // The rule names its IP; only what the rest of ensure uses is filled in.
            return Ok((
                PublicIp {
                    id: first.rule.publicipid.clone(),
                    ipaddress: first.rule.publicip.clone(),
                    ..PublicIp::default()
                },
                false,
            ));
        }
        let claimed = self.state.claims.borrow().get(&service.uid).cloned();
        if let Some(claim) = claimed {
            // Still ours while it is not free, even while its association runs (an IP
            // `Allocating` may show no `allocated` time yet): dropping the claim then would
            // associate a second IP.
            if let Some(ip) = self
                .ip_by_id(&claim.ip_id)?
                .filter(|ip| !ip.is("Free") && (!ip.state.is_empty() || !ip.allocated.is_empty()))
            {
                if ip.is("Releasing") {
                    return Err(ProviderError::retry_after(
                        JOB_RETRY_SECS,
                        format!(
                            "CloudStack is still releasing public IP {} of Service {}",
                            ip.ipaddress,
                            service.key()
                        ),
                    ));
                }
                // Tagging failed after the association in an earlier call: tag it now, or a
                // replaced instance could not find it.
                if !ip.has_tag(ownership::TAG_LOAD_BALANCER, &wanted.name) {
                    self.tag(service, &wanted.name, &ip.id, budget)?;
                }
                if ip.is("Allocating") {
                    return Err(ProviderError::retry_after(
                        JOB_RETRY_SECS,
                        format!(
                            "CloudStack is still associating public IP {} of Service {}",
                            ip.ipaddress,
                            service.key()
                        ),
                    ));
                }
                return Ok((ip, false));
            }
            self.state.claims.borrow_mut().remove(&service.uid);
        }
        // An IP an earlier instance associated and tagged, but whose rules it did not get to
        // create (it was killed or replaced): adopted, never a second one.
        if let Some(ip) = self.tagged_ip(service, &wanted.name)? {
            log::info(
                "adopting the public IP tagged for this Service",
                &[("service", &service.key()), ("ip", &ip.ipaddress)],
            );
            self.state.claims.borrow_mut().insert(
                service.uid.clone(),
                Claim {
                    ip_id: ip.id.clone(),
                    requested: wanted.requested_ip.as_deref() == Some(ip.ipaddress.as_str()),
                },
            );
            return Ok((ip, false));
        }
        // Nothing found: before a new association, an IP still being associated on the
        // network whose tag is not visible yet may be this Service's.
        let place = if network.vpcid.is_empty() {
            Params::new().set("associatednetworkid", &network.id)
        } else {
            Params::new().set("vpcid", &network.vpcid)
        };
        self.refuse_while_unattributed(service, place)?;
        match wanted.requested_ip.as_deref() {
            Some(address) => {
                let ips = self.ip_by_address(address)?;
                let [ip] = &ips[..] else {
                    return Err(ProviderError::InvalidConfig(format!(
                        "Service {}: spec.loadBalancerIP {address} is {} public IP of this account's zones; use an address CloudStack can allocate to the account",
                        service.key(),
                        if ips.is_empty() {
                            "not a"
                        } else {
                            "more than one"
                        }
                    )));
                };
                if !ip.allocated.is_empty() {
                    return Ok((ip.clone(), false));
                }
                let ip = self.associate(service, network, Some(address), budget)?;
                Ok((ip, true))
            }
            None => Ok((self.associate(service, network, None, budget)?, true)),
        }
    }

    /// `associateIpAddress` on the network (or its VPC), claimed and tagged before its job ends.
    fn associate(
        &self,
        service: &Service,
        network: &Network,
        address: Option<&str>,
        budget: &Budget,
    ) -> Result<PublicIp, ProviderError> {
        let place = if network.vpcid.is_empty() {
            Params::new().set("networkid", &network.id)
        } else {
            Params::new().set("vpcid", &network.vpcid)
        };
        let job = self.api.submit(
            "associateIpAddress",
            self.api.scoped(place.opt("ipaddress", address))?,
        )?;
        let lbname = spec::lb_name(service);
        let tagging = job.entity.as_ref().map(|ip_id| {
            self.state.claims.borrow_mut().insert(
                service.uid.clone(),
                Claim {
                    ip_id: ip_id.clone(),
                    requested: address.is_some(),
                },
            );
            // The crash window: from sending associateIpAddress until createTags is accepted,
            // only this instance knows the IP. Tagging before waiting for the association keeps
            // it as short as two requests.
            self.tag(service, &lbname, ip_id, budget)
        });
        // Waited for even when tagging failed: the claim then holds the IP, which the next call
        // tags.
        let result = match self.api.wait(&job, budget) {
            Ok(result) => result,
            Err(e) => {
                // Only a job that failed gave the address back; one still running or whose
                // poll failed (remembered as pending) keeps its claim.
                if let (Some(ip_id), false) = (&job.entity, self.api.is_pending(&job)) {
                    // The association failed: CloudStack gives the address back.
                    if matches!(tagging, Some(Ok(()))) {
                        self.untag_quietly(service, ip_id, budget);
                    }
                    self.state.claims.borrow_mut().remove(&service.uid);
                }
                return Err(e);
            }
        };
        let ip: PublicIp = job_object(&result, "ipaddress")?;
        log::info(
            "associated a public IP",
            &[("service", &service.key()), ("ip", &ip.ipaddress)],
        );
        self.state.claims.borrow_mut().insert(
            service.uid.clone(),
            Claim {
                ip_id: ip.id.clone(),
                requested: address.is_some(),
            },
        );
        match tagging {
            Some(tagged) => tagged?,
            // A server that did not name the IP next to the job id: tagged only now.
            None => self.tag(service, &lbname, &ip.id, budget)?,
        }
        Ok(ip)
    }

    /// Rules, members and openings as wanted; our rules no port claims are deleted first.
    fn converge(
        &self,
        wanted: &Wanted,
        found: &[Found],
        ip: &PublicIp,
        network: &Network,
        hosts: &Hosts,
        budget: &Budget,
    ) -> Result<(), ProviderError> {
        let open = openings(&wanted.rules);
        // Rules no port claims go first: a port that changed protocol (TCP to proxy protocol)
        // gets a new rule on the same IP and port, which CloudStack refuses while the old one
        // is there.
        let stale: Vec<&Found> = found
            .iter()
            .filter(|f| !wanted.rules.iter().any(|w| w.name == f.rule.name))
            .collect();
        let closing: Vec<Opening> = stale
            .iter()
            .map(|f| f.opening())
            .filter(|o| !open.contains(o))
            .collect();
        self.close(network, &ip.id, &closing, &stale, budget)?;
        for f in stale {
            self.api.run(
                "deleteLoadBalancerRule",
                Params::new().set("id", &f.rule.id),
                budget,
            )?;
        }
        for want in &wanted.rules {
            let existing = found.iter().find(|f| f.rule.name == want.name);
            let rule =
                self.ensure_rule(wanted, want, existing.map(|f| &f.rule), ip, network, budget)?;
            self.reconcile_members(&rule, hosts, existing.is_none(), budget)?;
        }
        if network.has_service("Firewall") {
            firewall::reconcile_firewall(self.api, &ip.id, &open, &wanted.firewall_cidrs, budget)?;
        } else if network.has_service("NetworkACL") {
            firewall::open_acl(self.api, network, &open, &wanted.firewall_cidrs, budget)?;
        }
        Ok(())
    }

    /// One rule as wanted: kept, updated in place, or (for a changed IP or port, or a CIDR
    /// change CloudStack cannot update) deleted and created again.
    fn ensure_rule(
        &self,
        wanted: &Wanted,
        want: &WantedRule,
        existing: Option<&LbRule>,
        ip: &PublicIp,
        network: &Network,
        budget: &Budget,
    ) -> Result<LbRule, ProviderError> {
        if let Some(rule) = existing {
            let cidrs_differ = !spec::same_cidrs(&rule_cidrs(rule), &wanted.rule_cidrs);
            let moved = rule.publicipid != ip.id
                || rule.publicport != Some(want.port)
                || rule.privateport != Some(want.node_port);
            // CIDR changes are updated in place only where CloudStack supports it (4.22+).
            let updatable = !cidrs_differ || self.cidr_updates();
            if !moved && updatable {
                if rule.algorithm == wanted.algorithm && !cidrs_differ {
                    return Ok(rule.clone());
                }
                let result = self.api.run(
                    "updateLoadBalancerRule",
                    Params::new()
                        .set("id", &rule.id)
                        .set("algorithm", wanted.algorithm)
                        .set("protocol", want.protocol)
                        .opt(
                            "cidrlist",
                            cidrs_differ.then(|| wanted.rule_cidrs.join(",")).as_deref(),
                        ),
                    budget,
                )?;
                return job_object(&result, "loadbalancer").or_else(|_| Ok(rule.clone()));
            }
            self.api.run(
                "deleteLoadBalancerRule",
                Params::new().set("id", &rule.id),
                budget,
            )?;
        }
        // No `projectid`: `CreateLoadBalancerRuleCmd` has no such parameter (the rule's owner
        // follows the IP's), and CloudStack logs every unknown parameter. `cidrlist` only when
        // the rules are restricted (see `rule_cidrs`: then the server is 4.18+).
        let open = spec::same_cidrs(&wanted.rule_cidrs, &[spec::ANYWHERE.to_string()]);
        let result = self.api.run(
            "createLoadBalancerRule",
            Params::new()
                .set("algorithm", wanted.algorithm)
                .set("name", &want.name)
                .set("privateport", want.node_port.to_string())
                .set("publicport", want.port.to_string())
                .set("networkid", &network.id)
                .set("publicipid", &ip.id)
                .set("protocol", want.protocol)
                .set("openfirewall", "false")
                .opt(
                    "cidrlist",
                    (!open).then(|| wanted.rule_cidrs.join(",")).as_deref(),
                ),
            budget,
        )?;
        job_object(&result, "loadbalancer")
    }

    /// The rule's members become exactly the hosts' VMs. A refused assignment (one VM that
    /// went bad since it was read fails all of them, and CloudStack does not say which) is
    /// retried without the VMs that re-reading them shows CloudStack refuses, so the others
    /// still get traffic; when re-reading shows none, the refusal is the answer (nothing is
    /// guessed).
    fn reconcile_members(
        &self,
        rule: &LbRule,
        hosts: &Hosts,
        fresh: bool,
        budget: &Budget,
    ) -> Result<(), ProviderError> {
        let current: Vec<String> = if fresh {
            Vec::new()
        } else {
            self.members(&rule.id)?
        };
        let mut add: Vec<String> = hosts
            .vm_ids
            .iter()
            .filter(|id| !current.contains(id))
            .cloned()
            .collect();
        // A VM an ambiguous node name matched is not removed: it may be that node's working
        // member (`Hosts::keep`; it is added only when another node names it for certain).
        let remove: Vec<&str> = current
            .iter()
            .filter(|id| !hosts.vm_ids.contains(id) && !hosts.keep.contains(id))
            .map(String::as_str)
            .collect();
        for _ in 0..ASSIGN_ATTEMPTS {
            if add.is_empty() {
                break;
            }
            let refused = match self.api.run(
                "assignToLoadBalancerRule",
                Params::new()
                    .set("id", &rule.id)
                    .set("virtualmachineids", add.join(",")),
                budget,
            ) {
                Ok(_) => {
                    add.clear();
                    break;
                }
                // A refusal (a failed job, or a VM that no longer resolves) can be a member
                // gone bad; anything else (a job still running, a 5xx) is not ours to judge.
                Err(e @ (ProviderError::Permanent(_) | ProviderError::NotFound(_))) => e,
                Err(e) => return Err(e),
            };
            let (bad, already) = self.refused_members(rule, &add)?;
            if bad.is_empty() && already.is_empty() {
                return Err(refused);
            }
            if !bad.is_empty() {
                warn_refused(rule, &bad, hosts, &refused);
            }
            add.retain(|id| !bad.iter().any(|(b, _)| b == id) && !already.contains(id));
        }
        if !add.is_empty() {
            return Err(ProviderError::Transient(format!(
                "CloudStack refused to add VMs {} to load-balancer rule {} {ASSIGN_ATTEMPTS} times, each time for members that went bad meanwhile; the next call tries again",
                add.join(", "),
                rule.name
            )));
        }
        if !remove.is_empty() {
            self.api.run(
                "removeFromLoadBalancerRule",
                Params::new()
                    .set("id", &rule.id)
                    .set("virtualmachineids", remove.join(",")),
                budget,
            )?;
        }
        Ok(())
    }

    /// The rule's members now.
    fn members(&self, rule_id: &str) -> Result<Vec<String>, ProviderError> {
        let vms: Vec<crate::model::Vm> = self.api.list(
            "listLoadBalancerRuleInstances",
            Params::new().set("id", rule_id),
            "loadbalancerruleinstance",
        )?;
        Ok(vms.into_iter().map(|vm| vm.id).collect())
    }

    /// After a refused assignment of `add`: the VMs CloudStack refuses now, read again (gone,
    /// in a state it refuses, or off the rule's network), each with why; and those that are
    /// members already (another writer added them meanwhile).
    fn refused_members(
        &self,
        rule: &LbRule,
        add: &[String],
    ) -> Result<(Refused, Vec<String>), ProviderError> {
        let vms = hosts::all_vms(self.api)?;
        let current = self.members(&rule.id)?;
        let mut bad = Vec::new();
        let mut already = Vec::new();
        for id in add {
            if current.contains(id) {
                already.push(id.clone());
                continue;
            }
            match vms.iter().find(|vm| &vm.id == id) {
                None => bad.push((id.clone(), format!("VM {id} no longer exists"))),
                Some(vm) => {
                    if let Some(why) = hosts::refusal(vm, &rule.networkid) {
                        bad.push((id.clone(), why));
                    }
                }
            }
        }
        Ok((bad, already))
    }

    /// Closes `openings` on the IP (firewall) or the tier (ACL; only ports no other load
    /// balancer on the tier still uses, since ACL lists are shared).
    fn close(
        &self,
        network: &Network,
        ip_id: &str,
        openings: &[Opening],
        leaving: &[&Found],
        budget: &Budget,
    ) -> Result<(), ProviderError> {
        if openings.is_empty() {
            return Ok(());
        }
        if network.has_service("Firewall") {
            return firewall::close_firewall(self.api, ip_id, openings, budget);
        }
        if !network.has_service("NetworkACL") {
            return Ok(());
        }
        let others = self.load_balancer_rules("networkid", &network.id)?;
        let still_used: Vec<Opening> = others
            .iter()
            .filter(|r| !leaving.iter().any(|f| f.rule.id == r.id))
            .filter_map(|r| {
                Some(Opening {
                    protocol: spec::ip_protocol(&r.protocol),
                    port: r.publicport?,
                })
            })
            .collect();
        let free: Vec<Opening> = openings
            .iter()
            .filter(|o| !still_used.contains(o))
            .copied()
            .collect();
        firewall::close_acl(self.api, network, &free, budget)
    }

    /// Only the backends changed (upstream `UpdateLoadBalancer`): each rule's members become the
    /// nodes' VMs.
    pub fn update(&self, service: &Service, nodes: &[Node]) -> Result<(), ProviderError> {
        let budget = self.budget(service);
        self.finish_pending(service, &budget)?;
        let found = self.discover(&spec::lb_name(service))?;
        let Some(first) = found.first() else {
            return Ok(());
        };
        let hosts = hosts::find(self.api, nodes, Some(&first.rule.networkid))?;
        warn_hosts(&hosts);
        if hosts.vm_ids.is_empty() && !nodes.is_empty() {
            return Err(ProviderError::Transient(format!(
                "none of the {} nodes is a CloudStack VM that can be a member of the load balancer (see the Warning events); the members are left as they are",
                nodes.len()
            )));
        }
        for f in &found {
            self.reconcile_members(&f.rule, &hosts, false, &budget)?;
        }
        Ok(())
    }

    /// Deletes the rules, their openings and, when we took it, the IP (upstream
    /// `EnsureLoadBalancerDeleted`). Works from what is left after a partial delete: with no rules,
    /// the IP is found from the Service's status.
    pub fn delete(&self, service: &Service) -> Result<(), ProviderError> {
        let budget = self.budget(service);
        self.finish_pending(service, &budget)?;
        let lbname = spec::lb_name(service);
        let found = self.discover(&lbname)?;
        Self::refuse_while_revoking(&found)?;
        let ip = self.ip_to_release(service, &found)?;
        if found.is_empty() && ip.is_none() {
            // Nothing of it found: unless an IP whose tag is not visible yet may be its own.
            self.refuse_while_unattributed(service, Params::new())?;
        }
        if let Some(first) = found.first() {
            let network = self.network(&first.rule.networkid)?;
            let leaving: Vec<&Found> = found.iter().collect();
            let mut closing: Vec<Opening> = found.iter().map(Found::opening).collect();
            closing.dedup();
            self.close(
                &network,
                &first.rule.publicipid,
                &closing,
                &leaving,
                &budget,
            )?;
            for f in &found {
                self.api.run(
                    "deleteLoadBalancerRule",
                    Params::new().set("id", &f.rule.id),
                    &budget,
                )?;
            }
        }
        if let Some(ip) = ip {
            self.release(service, &ip, &budget)?;
        }
        self.state.claims.borrow_mut().remove(&service.uid);
        self.api.forget(&service.uid);
        Ok(())
    }

    /// The IP the Service's load balancer used: its rules', else one claimed by an unfinished
    /// ensure, else the one tagged for it, else the address in the Service's status or its
    /// requested address. An IP tagged for the Service that is not its rules' one is ambiguous:
    /// refused before anything is deleted.
    fn ip_to_release(
        &self,
        service: &Service,
        found: &[Found],
    ) -> Result<Option<PublicIp>, ProviderError> {
        let lbname = spec::lb_name(service);
        let tagged = self.tagged_ip(service, &lbname)?;
        if let Some(first) = found.first() {
            if let Some(other) = tagged.filter(|ip| ip.id != first.rule.publicipid) {
                return Err(ProviderError::Permanent(format!(
                    "Service {}: its load-balancer rules are on public IP {} but IP {} (id {}) carries its tag {}={lbname}; nothing is released while it is ambiguous. Release the IP that is not the load balancer's, or delete its tag",
                    service.key(),
                    first.rule.publicip,
                    other.ipaddress,
                    other.id,
                    ownership::TAG_LOAD_BALANCER
                )));
            }
            return self.ip_by_id(&first.rule.publicipid);
        }
        let claimed = self.state.claims.borrow().get(&service.uid).cloned();
        if let Some(claim) = claimed {
            return self.ip_by_id(&claim.ip_id);
        }
        if let Some(ip) = tagged {
            return Ok(Some(ip));
        }
        let address = service
            .ingress
            .iter()
            .find_map(|i| i.ip.clone())
            .or_else(|| service.load_balancer_ip.clone().filter(|ip| !ip.is_empty()));
        match address {
            Some(a) => Ok(self.ip_by_address(&a)?.into_iter().next()),
            None => Ok(None),
        }
    }

    /// Gives the IP back unless it is not ours to give: the user's own `spec.loadBalancerIP`,
    /// a source-NAT or static-NAT address, one still carrying other rules, or already free.
    fn release(
        &self,
        service: &Service,
        ip: &PublicIp,
        budget: &Budget,
    ) -> Result<(), ProviderError> {
        // An association or a release still running: releasing nothing and succeeding would
        // leave the IP allocated once the association ends (and the host forgets the Service).
        if let Some(wait) = ownership::still_changing(ip, service) {
            return Err(wait);
        }
        if ip.allocated.is_empty() || ip.issourcenat || ip.isstaticnat {
            return Ok(());
        }
        let requested = service.load_balancer_ip.as_deref() == Some(ip.ipaddress.as_str());
        // Ours if the annotation, this instance's claim, or our tag says so (the tag survives a
        // crash before the annotation was written).
        let ours_by_annotation = service.annotation(spec::IP_ASSOCIATED) == Some("true")
            || ip.has_tag(ownership::TAG_LOAD_BALANCER, &spec::lb_name(service))
            || self
                .state
                .claims
                .borrow()
                .get(&service.uid)
                .is_some_and(|c| c.requested && c.ip_id == ip.id);
        if requested && !ours_by_annotation {
            log::info(
                "keeping the Service's own spec.loadBalancerIP",
                &[("service", &service.key()), ("ip", &ip.ipaddress)],
            );
            return Ok(());
        }
        let remaining = self.load_balancer_rules("publicipid", &ip.id)?;
        if let Some(other) = remaining.first() {
            log::warn(
                "keeping a public IP other LB rules still use",
                &[("ip", &ip.ipaddress), ("rule", &other.name)],
            );
            return Ok(());
        }
        self.api.run(
            "disassociateIpAddress",
            Params::new().set("id", &ip.id),
            budget,
        )?;
        log::info(
            "released a public IP",
            &[("service", &service.key()), ("ip", &ip.ipaddress)],
        );
        Ok(())
    }

    /// Best-effort release after a failed ensure; the error that caused it is what is reported.
    fn release_quietly(&self, ip: &PublicIp, budget: &Budget) {
        if let Err(e) = self.api.run(
            "disassociateIpAddress",
            Params::new().set("id", &ip.id),
            budget,
        ) {
            log::warn(
                "could not release the public IP of a failed ensure",
                &[("ip", &ip.ipaddress), ("error", &e.to_string())],
            );
        }
    }
}

/// `4.18.1.0` → `(4, 18)`.
fn parse_version(text: &str) -> Option<(u32, u32)> {
    let mut parts = text.trim().split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()?;
    Some((major, minor))
}

/// A rule's CIDR list; empty means open to all (a rule created without `cidrlist`, and every
/// rule before 4.18: cloudstack-go's recorded 4.15.2 createLoadBalancerRule answers
/// `"cidrlist": ""`).
fn rule_cidrs(rule: &LbRule) -> Vec<String> {
    let cidrs = split_cidrs(&rule.cidrlist);
    if cidrs.is_empty() {
        vec![spec::ANYWHERE.to_string()]
    } else {
        cidrs
    }
}

/// Warning events naming the nodes no VM was found for, and those left out (with why).
fn warn_hosts(hosts: &Hosts) {
    if !hosts.unmatched.is_empty() {
        let message = format!(
            "no CloudStack VM found for node(s) {}; they get no traffic (node names must be VM names, or set providerIDs)",
            hosts.unmatched.join(", ")
        );
        log::warn(&message, &[]);
        cluster::warning("UnmatchedNodes", &message);
    }
    if !hosts.left_out.is_empty() {
        let message = format!(
            "node(s) left out of the load balancer, the others still get traffic: {}",
            hosts.left_out.join("; ")
        );
        log::warn(&message, &[]);
        cluster::warning("BackendsLeftOut", &message);
    }
}

/// A Warning event naming the members CloudStack refused, found by reading them again.
fn warn_refused(rule: &LbRule, bad: &[(String, String)], hosts: &Hosts, refusal: &ProviderError) {
    let named: Vec<String> = bad
        .iter()
        .map(|(id, why)| match hosts.nodes_of.get(id) {
            Some(node) => format!("{node}: {why}"),
            None => why.clone(),
        })
        .collect();
    let message = format!(
        "CloudStack refused to add the members of load-balancer rule {} ({refusal}); left out, the others are added again: {}",
        rule.name,
        named.join("; ")
    );
    log::warn(&message, &[]);
    cluster::warning("BackendsLeftOut", &message);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(parse_version("4.15.2.0"), Some((4, 15)));
        assert_eq!(parse_version("4.18.0.0-SNAPSHOT"), Some((4, 18)));
        assert_eq!(parse_version("4.22"), Some((4, 22)));
        assert_eq!(parse_version("x"), None);
        assert_eq!(parse_version(""), None);
    }

    #[test]
    fn empty_cidr_list_is_open() {
        let rule = |c: &str| LbRule {
            cidrlist: c.into(),
            ..LbRule::default()
        };
        assert_eq!(rule_cidrs(&rule("")), [spec::ANYWHERE]);
        assert_eq!(
            rule_cidrs(&rule("10.0.0.0/8 192.168.0.0/16")),
            ["10.0.0.0/8", "192.168.0.0/16"]
        );
    }
}
