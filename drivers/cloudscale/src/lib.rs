//! The cloudscale.ch driver: a drop-in replacement for the upstream cloudscale
//! cloud-controller-manager (`cloudscale-ch/cloudscale-cloud-controller-manager`).
//!
//! Same configuration (`CLOUDSCALE_*` environment variables), provider IDs
//! (`cloudscale://<uuid>`), annotations, object names and written-back annotations, so an
//! operator can switch without re-creating anything. The decisions are pure modules
//! ([`annotations`], [`desired`], [`plan`], [`status`], [`instances`]) tested natively; the API
//! calls live in [`api`] and [`reconcile`]. `README.md` lists where this driver deliberately
//! differs from upstream.

pub mod annotations;
pub mod api;
pub mod config;
pub mod desired;
pub mod instances;
pub mod model;
pub mod node_name;
pub mod plan;
pub mod provider_id;
pub mod reconcile;
/// Label selectors moved to the SDK; kept here under their old path.
pub use wasm_ccm_sdk::selector;
pub mod status;

use wasm_ccm_sdk::types::{
    Context, EnsureResult, Ingress, InstanceMetadata, InstancePage, Node, ProviderError,
    ProviderInfo, Service,
};
use wasm_ccm_sdk::{Instances, LoadBalancer, Provider, cluster, listing, log};

use crate::annotations::Annotations;
use crate::api::Api;
use crate::config::Config;
use crate::model::Server;

/// The driver value kept between calls.
pub struct CloudscaleDriver {
    api: Api,
    ip_mode_supported: bool,
}

impl CloudscaleDriver {
    /// Everything ensure and update share: the gate, the node selection, the node → server
    /// mapping and the reconcile. Returns the load balancer and the parsed annotations.
    fn reconcile(
        &self,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(model::LoadBalancer, Annotations), ProviderError> {
        gate(service)?;
        let a = Annotations::parse(service)?;
        // What upstream silently ignored (unknown JSON keys, bare floating IPs) is accepted and
        // shown, never refused (review 2026-11-23, findings 1 and 2).
        for warning in &a.warnings {
            cluster::warning("AnnotationValueIgnored", warning);
        }
        check_floating_ip_conflicts(service, &a)?;
        let selected: Vec<Node> = match &a.node_selector {
            Some(selector) => nodes
                .iter()
                .filter(|n| selector.matches(&n.labels))
                .cloned()
                .collect(),
            None => nodes.to_vec(),
        };
        // Upstream's loadbalancer.go emits NoValidNodes whenever the node list it is left with
        // is empty, with or without a selector (review finding 7).
        if selected.is_empty() {
            let why = match service.annotation(annotations::LB_NODE_SELECTOR) {
                Some(s) if !s.trim().is_empty() && !nodes.is_empty() => {
                    format!("no node matches {}={s:?}", annotations::LB_NODE_SELECTOR)
                }
                _ => "there are no nodes to send traffic to".to_string(),
            };
            cluster::warning(
                "NoValidNodes",
                &format!("{why}: the load balancer gets no members"),
            );
        }
        // One list of all servers maps every node (upstream asks once per node).
        let servers: Vec<Server> = if selected.is_empty() {
            Vec::new()
        } else {
            self.api.get("servers")?
        };
        let mapping = instances::map_nodes(&servers, &selected)?;
        // One bad node never takes the load balancer down for the good ones (review
        // 2026-11-26, §3): it is left out, and the event names it.
        if !mapping.left_out.is_empty() {
            cluster::warning(
                "BackendsLeftOut",
                &format!(
                    "{} of {} nodes get no load balancer members: {}",
                    mapping.left_out.len(),
                    selected.len(),
                    mapping.left_out.join("; ")
                ),
            );
        }
        let without = desired::servers_without_members(&mapping.servers, &a.allowed_subnets);
        if !without.is_empty() {
            cluster::warning(
                "BackendsLeftOut",
                &format!(
                    "these servers have no private address with a subnet{}, so they get no \
                     load balancer members: {}; attach them to a private network",
                    if a.allowed_subnets.is_empty() {
                        String::new()
                    } else {
                        format!(" in {}", annotations::LB_ALLOWED_SUBNETS)
                    },
                    without.join(", ")
                ),
            );
        }
        let mut want = desired::desired(service, &a, &mapping.servers)?;
        want.keep_members_at = mapping.ambiguous_addresses;
        let lb = reconcile::ensure(&self.api, &a.uuid, &want)?;
        Ok((lb, a))
    }
}

/// Services of another load balancer class belong to another controller.
fn gate(service: &Service) -> Result<(), ProviderError> {
    match &service.load_balancer_class {
        Some(class) if !class.is_empty() => Err(ProviderError::ImplementedElsewhere),
        _ => Ok(()),
    }
}

/// The same floating IP on two Services would make them fight over it: refuse, naming both.
/// Other Services whose annotation does not parse are skipped, as upstream.
fn check_floating_ip_conflicts(service: &Service, a: &Annotations) -> Result<(), ProviderError> {
    if a.floating_ips.is_empty() {
        return Ok(());
    }
    let mut conflicts = Vec::new();
    for other in cluster::services_with_annotation(annotations::LB_FLOATING_IPS, &[]) {
        if other.uid == service.uid
            || (other.namespace == service.namespace && other.name == service.name)
        {
            continue;
        }
        let Ok(theirs) = annotations::claimed_floating_ips(&other) else {
            continue;
        };
        // Compared by address, so `5.102.150.123` and `5.102.150.123/32` are the same IP.
        for ip in a.floating_ips.iter().filter(|ip| {
            annotations::floating_ip_address(ip).is_some_and(|addr| theirs.contains(&addr))
        }) {
            conflicts.push(format!("{ip}->{}", other.key()));
        }
    }
    if conflicts.is_empty() {
        return Ok(());
    }
    Err(ProviderError::invalid_config(format!(
        "floating IPs in {} are also claimed by other Services: {}; a floating IP can point at \
         one load balancer only, remove it from one of them",
        annotations::LB_FLOATING_IPS,
        conflicts.join(", ")
    )))
}

impl Provider for CloudscaleDriver {
    fn info() -> ProviderInfo {
        ProviderInfo {
            name: "cloudscale".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            provider_id_scheme: provider_id::SCHEME.to_string(),
            default_egress: vec![config::DEFAULT_API_URL.to_string()],
            env_prefixes: vec!["CLOUDSCALE_".to_string()],
            annotation_prefixes: vec![annotations::PREFIX.to_string()],
            secrets: config::secrets(),
        }
    }

    /// Besides the token (a secret) and the API URL (its origin's setting), upstream reads one
    /// variable; nothing else under `CLOUDSCALE_` reaches the driver.
    fn plain_env() -> Option<Vec<String>> {
        Some(vec![config::TIMEOUT_VAR.to_string()])
    }

    fn init(
        ctx: Context,
        config: Vec<u8>,
        env: Vec<(String, String)>,
    ) -> Result<Self, ProviderError> {
        let cfg = Config::from_env(&env)?;
        log::redact(&cfg.token);
        if !config.is_empty() {
            log::warn(
                "--cloud-config is ignored by the cloudscale driver: it is configured by the CLOUDSCALE_* environment variables",
                &[],
            );
        }
        log::info(
            "cloudscale driver configured",
            &[
                ("api", &cfg.api_url),
                ("token", &cfg.masked_token()),
                ("timeout-ms", &cfg.timeout_ms.to_string()),
                ("kubernetes", &ctx.kubernetes_version),
            ],
        );
        Ok(Self {
            api: Api::new(&cfg),
            ip_mode_supported: status::supports_ip_mode(&ctx.kubernetes_version),
        })
    }
}

fn require_provider_id(node: &Node, what: &str) -> Result<(), ProviderError> {
    if node.provider_id.is_empty() {
        // A name is too weak to justify deleting or tainting a node (upstream's rule).
        return Err(ProviderError::permanent(format!(
            "node {} has no provider ID, so {what} cannot be decided; it gets one when the node \
             is initialised",
            node.name
        )));
    }
    Ok(())
}

impl Instances for CloudscaleDriver {
    fn instance_exists(&self, node: &Node) -> Result<bool, ProviderError> {
        require_provider_id(node, "whether its server exists")?;
        Ok(instances::by_provider_id(&self.api, node)?.is_some())
    }

    fn instance_shutdown(&self, node: &Node) -> Result<bool, ProviderError> {
        require_provider_id(node, "whether its server is stopped")?;
        let server = instances::exactly_one(&self.api, node)?;
        Ok(instances::shut_down(&server))
    }

    fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, ProviderError> {
        Ok(instances::metadata(&instances::exactly_one(
            &self.api, node,
        )?))
    }

    /// One `GET /v1/servers` lists every server of the project in one answer (the API does not
    /// page it), so a status pass costs one request instead of one per node.
    fn list_instances(&self, page: Option<String>) -> Result<InstancePage, ProviderError> {
        listing::first_page_only(page, "cloudscale")?;
        let servers: Vec<Server> = self.api.get("servers")?;
        Ok(instances::listing(&servers).into_page(None))
    }
}

impl LoadBalancer for CloudscaleDriver {
    fn get(&self, service: &Service) -> Result<Option<Vec<Ingress>>, ProviderError> {
        if gate(service).is_err() {
            return Ok(None);
        }
        // Only the annotations `get` needs: a bad one elsewhere must not hide the load balancer.
        let uuid = service.annotation(annotations::LB_UUID).unwrap_or_default();
        let Some(lb) = reconcile::find(&self.api, uuid, &annotations::lb_name(service))? else {
            return Ok(None);
        };
        Ok(Some(status::ingress_with(
            &lb,
            annotations::value(service, annotations::LB_FORCE_HOSTNAME),
            annotations::ip_mode(service)?,
            self.ip_mode_supported,
        )))
    }

    fn name(&self, service: &Service) -> String {
        annotations::lb_name(service)
    }

    fn ensure(&self, service: &Service, nodes: &[Node]) -> Result<EnsureResult, ProviderError> {
        let (lb, a) = self.reconcile(service, nodes)?;
        let mut result =
            EnsureResult::with_ingress(status::ingress(&lb, &a, self.ip_mode_supported));
        result.set_annotations = status::annotations_to_set(service, &lb);
        Ok(result)
    }

    fn update(&self, service: &Service, nodes: &[Node]) -> Result<(), ProviderError> {
        self.reconcile(service, nodes).map(|_| ())
    }

    fn delete(&self, service: &Service) -> Result<(), ProviderError> {
        gate(service)?;
        // Upstream ran the floating-IP conflict check here too, so two Services claiming one IP
        // could not be deleted; deleting assigns nothing, so this driver does not.
        let uuid = service.annotation(annotations::LB_UUID).unwrap_or_default();
        reconcile::delete(&self.api, uuid, &annotations::lb_name(service))
    }
}

wasm_ccm_sdk::export_driver!(CloudscaleDriver);
