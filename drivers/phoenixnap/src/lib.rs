//! The PhoenixNAP Bare Metal Cloud driver, compatible with the upstream
//! `phoenixnap/k8s-cloud-provider-bmc`: the same `cloud-sa.json` and `PNAP_*` variables,
//! provider IDs (`phoenixnap://<server-id>`) and IP-block tags, so an operator can switch without
//! re-creating anything. `README.md` lists where it deliberately differs from upstream.

pub mod api;
pub mod config;
pub mod instances;
pub mod lb;
pub mod model;
pub mod node_name;
pub mod provider_id;

use wasm_ccm_sdk::types::{
    Context, EnsureResult, Ingress, InstanceMetadata, InstancePage, Node, ProviderError,
    ProviderInfo, Service,
};
use wasm_ccm_sdk::{Instances, LoadBalancer, Provider, listing, log};

use crate::api::Api;
use crate::config::{Config, LOCATIONS};
use crate::model::Server;

/// How many uninitialised nodes a warning names (the event message stays short).
const MAX_NAMED_NODES: usize = 10;

/// The driver value kept between calls (the token in [`Api`] is a cache).
pub struct PhoenixnapDriver {
    api: Api,
    config: Config,
    cluster_id: String,
}

impl PhoenixnapDriver {
    /// The load-balancer context, or the error saying load balancers are off.
    fn lb(&self) -> Result<lb::Lb<'_>, ProviderError> {
        let network = self.config.public_network.as_deref().ok_or_else(|| {
            ProviderError::InvalidConfig(
                "load balancers are disabled: set PNAP_LOAD_BALANCER or loadbalancer to kube-vip://<public-network-id>"
                    .into(),
            )
        })?;
        Ok(lb::Lb {
            api: &self.api,
            cluster_id: &self.cluster_id,
            network,
        })
    }

    /// Upstream's check on the backends, with its `serviceNodeSelector` honoured (upstream parsed
    /// it and then used an empty one): every selected node should be initialised. Upstream
    /// failed the whole update for one such node; here it is a Warning event naming them (at
    /// most [`MAX_NAMED_NODES`]) and the update succeeds. Nothing in PhoenixNAP depends on the
    /// nodes (kube-vip announces the address from the nodes themselves), so one uninitialised
    /// or stale Node must not make the Service's load balancer report failure for the others.
    fn check_nodes(&self, nodes: &[Node]) {
        let selected = |n: &Node| {
            self.config
                .service_node_selector
                .as_ref()
                .is_none_or(|s| s.matches(&n.labels))
        };
        let bare: Vec<&str> = nodes
            .iter()
            .filter(|n| selected(n) && n.provider_id.is_empty())
            .map(|n| n.name.as_str())
            .collect();
        if bare.is_empty() {
            return;
        }
        let more = bare.len().saturating_sub(MAX_NAMED_NODES);
        let mut names = bare[..bare.len().min(MAX_NAMED_NODES)].join(", ");
        if more > 0 {
            names.push_str(&format!(" and {more} more"));
        }
        wasm_ccm_sdk::cluster::warning(
            "BackendsUninitialized",
            &format!(
                "{} selected node(s) have no provider ID yet: {names}; nothing in PhoenixNAP depends on them (kube-vip announces the address from the nodes), so the load balancer is unaffected; a node gets a provider ID when it is initialised, and a Node whose server is gone must be deleted by hand",
                bare.len()
            ),
        );
    }

    /// Where a Service's block should be, by upstream's precedence (its README, "Service Load
    /// Balancer IP Location"): the configured location (`PNAP_LOCATION` or `location`) wins and
    /// the annotation is ignored; else the annotation; else `None`, which means the public
    /// network's location (upstream answered an error there; the network's location is the only
    /// one a block can be assigned in).
    fn location(&self, service: &Service) -> Result<Option<lb::WantedLocation>, ProviderError> {
        if !self.config.location.is_empty() {
            return Ok(Some(lb::WantedLocation {
                location: self.config.location.clone(),
                source: "the configured location (PNAP_LOCATION or location)".into(),
            }));
        }
        match service.annotation(&self.config.ip_location_annotation) {
            None => Ok(None),
            Some(v) => {
                let v = v.trim().to_ascii_uppercase();
                if LOCATIONS.contains(&v.as_str()) {
                    Ok(Some(lb::WantedLocation {
                        location: v,
                        source: format!("the annotation {}", self.config.ip_location_annotation),
                    }))
                } else {
                    Err(ProviderError::InvalidConfig(format!(
                        "annotation {}: {v:?} is not one of {}",
                        self.config.ip_location_annotation,
                        LOCATIONS.join(", ")
                    )))
                }
            }
        }
    }
}

impl Provider for PhoenixnapDriver {
    fn info() -> ProviderInfo {
        ProviderInfo {
            name: "phoenixnap".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            provider_id_scheme: provider_id::SCHEME.into(),
            default_egress: vec![
                config::DEFAULT_BASE_URL.into(),
                config::DEFAULT_AUTH_URL.into(),
            ],
            env_prefixes: vec!["PNAP_".into()],
            // kube-vip reads the block's address from here, as with the upstream CCM.
            annotation_prefixes: vec![lb::KUBE_VIP_ANNOTATION.into()],
            secrets: config::secrets(),
        }
    }

    /// The client ID and secret are secrets and the two URLs their origins' settings; these are
    /// the plain variables upstream reads, and nothing else under `PNAP_` reaches the driver.
    fn plain_env() -> Option<Vec<String>> {
        Some(config::PLAIN_VARS.iter().map(|v| v.to_string()).collect())
    }

    fn init(
        ctx: Context,
        file: Vec<u8>,
        env: Vec<(String, String)>,
    ) -> Result<Self, ProviderError> {
        let config = Config::parse(&file, &env)?;
        log::redact(&config.client_secret);
        log::info(
            "phoenixnap driver configured",
            &[
                (
                    "location",
                    if config.location.is_empty() {
                        "the public network's"
                    } else {
                        &config.location
                    },
                ),
                (
                    "load-balancer",
                    config.public_network.as_deref().unwrap_or("disabled"),
                ),
                ("api", &config.base_url),
            ],
        );
        Ok(PhoenixnapDriver {
            api: Api::new(&config),
            config,
            cluster_id: ctx.cluster_id,
        })
    }

    fn housekeeping(&self) -> Result<(), ProviderError> {
        if self.config.public_network.is_none() {
            return Ok(());
        }
        let acted = self.lb()?.housekeeping()?;
        if acted > 0 {
            log::info(
                "released IP blocks of deleted Services",
                &[("steps", &acted.to_string())],
            );
        }
        Ok(())
    }
}

impl Instances for PhoenixnapDriver {
    fn instance_exists(&self, node: &Node) -> Result<bool, ProviderError> {
        instances::require_provider_id(node, "exists")?;
        Ok(instances::by_provider_id(&self.api, node)?.is_some())
    }

    fn instance_shutdown(&self, node: &Node) -> Result<bool, ProviderError> {
        instances::require_provider_id(node, "is powered off")?;
        Ok(instances::powered_off(&instances::find(&self.api, node)?))
    }

    fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, ProviderError> {
        Ok(instances::metadata(&instances::find(&self.api, node)?))
    }

    /// One `GET /bmc/v1/servers` lists every server of the account in one answer
    /// (bmcapi.spec.yaml `serversGet` has no paging), so a status pass costs one request instead
    /// of one or two per node.
    fn list_instances(&self, page: Option<String>) -> Result<InstancePage, ProviderError> {
        listing::first_page_only(page, "PhoenixNAP")?;
        let servers: Vec<Server> = self.api.get("/bmc/v1/servers")?;
        Ok(instances::listing(&servers).into_page(None))
    }
}

impl LoadBalancer for PhoenixnapDriver {
    fn get(&self, service: &Service) -> Result<Option<Vec<Ingress>>, ProviderError> {
        self.lb()?.get(service)
    }

    fn name(&self, service: &Service) -> String {
        lb::name(service, &self.cluster_id)
    }

    /// The nodes do not matter here (kube-vip runs on them; the cloud keeps no backend list);
    /// upstream checks them in `update` only.
    fn ensure(&self, service: &Service, _nodes: &[Node]) -> Result<EnsureResult, ProviderError> {
        let lb = self.lb()?;
        let location = self.location(service)?;
        lb.ensure(service, location.as_ref())
    }

    /// kube-vip runs on the nodes and the cloud keeps no backend list, so only the nodes are
    /// checked, as upstream does, with a warning instead of upstream's failure.
    fn update(&self, _service: &Service, nodes: &[Node]) -> Result<(), ProviderError> {
        self.lb()?;
        self.check_nodes(nodes);
        Ok(())
    }

    fn delete(&self, service: &Service) -> Result<(), ProviderError> {
        self.lb()?.delete(service)
    }
}

wasm_ccm_sdk::export_driver!(PhoenixnapDriver);
