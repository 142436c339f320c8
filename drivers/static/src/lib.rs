//! The static driver: the reference wasm-ccm driver, whose "cloud" is its configuration.
//!
//! Instances, an address pool for load balancers and routes are described in the cloud-config
//! (YAML or JSON), or served by a small inventory service over HTTP so they can change while the
//! driver runs. See `README.md` for the schema. The decisions live in plain modules
//! ([`config`], [`pool`], [`lookup`], [`lb`]) that test natively; this file only wires them to
//! the host's imports.

pub mod config;
pub mod lb;
pub mod lookup;
pub mod pool;

use std::borrow::Cow;

use wasm_ccm_sdk::http::{self, encode_path_segment};
use wasm_ccm_sdk::types::{
    Context, EnsureResult, Ingress, InstanceMetadata, InstancePage, Node, ProviderError,
    ProviderInfo, Route, Service,
};
use wasm_ccm_sdk::{Instances, LoadBalancer, Provider, Routes, cluster, log};

use crate::config::{
    Config, Instance, InstancesDocument, RawRoute, RoutesDocument, Source, validate_instances,
    validate_routes,
};
use crate::lb::{AllocationError, IP_ANNOTATION};

/// How long one inventory request may take; well inside the host's call deadline.
const INVENTORY_TIMEOUT_MS: u32 = 5_000;

/// The driver value kept between calls.
pub struct StaticDriver {
    config: Config,
}

impl StaticDriver {
    /// The current instances: from the config, or fetched from the inventory on every call so
    /// that changes show up without a restart.
    fn instances(&self) -> Result<Cow<'_, [Instance]>, ProviderError> {
        match &self.config.source {
            Source::Static { instances, .. } => Ok(Cow::Borrowed(instances)),
            Source::Inventory { url, token } => {
                let url = format!("{url}/instances");
                let doc: InstancesDocument = self
                    .request(http::get(&url), token.as_deref())
                    .send()?
                    .error_for_status()?
                    .json()?;
                validate_instances(doc.instances, &self.config.defaults)
                    .map(Cow::Owned)
                    .map_err(|e| {
                        ProviderError::InvalidConfig(format!(
                            "inventory {}: {e}",
                            http::display_url(&url)
                        ))
                    })
            }
        }
    }

    fn request(&self, builder: http::RequestBuilder, token: Option<&str>) -> http::RequestBuilder {
        let builder = builder.timeout_ms(INVENTORY_TIMEOUT_MS);
        match token {
            Some(t) => builder.bearer(t),
            None => builder,
        }
    }

    fn with_instance<R>(
        &self,
        node: &Node,
        f: impl FnOnce(Option<&Instance>) -> Result<R, ProviderError>,
    ) -> Result<R, ProviderError> {
        let instances = self.instances()?;
        f(lookup::find(&instances, node)?)
    }

    /// The inventory base URL, or the error routes get without one.
    fn inventory_for_routes(&self) -> Result<(&str, Option<&str>), ProviderError> {
        match &self.config.source {
            Source::Inventory { url, token } => Ok((url, token.as_deref())),
            Source::Static { .. } => Err(ProviderError::InvalidConfig(
                "routes from the cloud-config are read-only: creating or deleting routes needs an inventoryUrl"
                    .to_string(),
            )),
        }
    }
}

impl Provider for StaticDriver {
    fn info() -> ProviderInfo {
        ProviderInfo {
            name: "static".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            provider_id_scheme: lookup::SCHEME.to_string(),
            // The inventory URL is the operator's choice, so there is nothing to allow by
            // default: they grant it with --allow-egress.
            default_egress: Vec::new(),
            env_prefixes: vec!["STATIC_".to_string()],
            annotation_prefixes: vec!["static.wasm-ccm.io/".to_string()],
            // Its inventory token may sit in the YAML config, which no `secret-location` can
            // name yet: it stays in the guest, redacted from logs (`log.redact`).
            secrets: Vec::new(),
        }
    }

    fn init(
        ctx: Context,
        config: Vec<u8>,
        env: Vec<(String, String)>,
    ) -> Result<Self, ProviderError> {
        let config = Config::parse(&config, &env)?;
        if let Some(token) = config.token() {
            log::redact(token);
        }
        let (mode, instances) = match &config.source {
            Source::Static { instances, .. } => ("static", instances.len().to_string()),
            Source::Inventory { url, .. } => ("inventory", http::display_url(url)),
        };
        log::info(
            "static driver configured",
            &[
                ("cluster", &ctx.cluster_name),
                ("mode", mode),
                ("instances", &instances),
                (
                    "pool-empty",
                    if config.pool.is_empty() {
                        "true"
                    } else {
                        "false"
                    },
                ),
            ],
        );
        Ok(Self { config })
    }
}

impl Instances for StaticDriver {
    fn instance_exists(&self, node: &Node) -> Result<bool, ProviderError> {
        self.with_instance(node, |i| Ok(i.is_some()))
    }

    fn instance_shutdown(&self, node: &Node) -> Result<bool, ProviderError> {
        self.with_instance(node, |i| match i {
            Some(i) => Ok(i.shutdown),
            None => Err(not_found(node)),
        })
    }

    fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, ProviderError> {
        self.with_instance(node, |i| match i {
            Some(i) => Ok(lookup::metadata(i)),
            None => Err(not_found(node)),
        })
    }

    /// The inventory in pages of [`lookup::PAGE_SIZE`], each entry built by the same functions
    /// the per-node answers use. An inventory served over HTTP is fetched again for every page,
    /// as every per-node call fetches it: one listing of N instances costs N / 1,000 requests
    /// instead of N.
    fn list_instances(&self, page: Option<String>) -> Result<InstancePage, ProviderError> {
        let instances = self.instances()?;
        lookup::page(&instances, page.as_deref(), lookup::PAGE_SIZE)
    }
}

fn not_found(node: &Node) -> ProviderError {
    ProviderError::NotFound(if node.provider_id.is_empty() {
        format!("no instance named {:?} in the static inventory", node.name)
    } else {
        format!(
            "no instance with provider ID {:?} in the static inventory",
            node.provider_id
        )
    })
}

impl LoadBalancer for StaticDriver {
    fn get(&self, service: &Service) -> Result<Option<Vec<Ingress>>, ProviderError> {
        let suffix = self.config.hostname_suffix.as_deref();
        if let Some(ip) = service
            .annotation(IP_ANNOTATION)
            .and_then(|v| v.trim().parse().ok())
        {
            return Ok(Some(lb::ingress(service, Some(ip), suffix)));
        }
        // Hostname-only mode keeps no annotation; the published hostname is the only trace.
        if let (Some(suffix), true) = (suffix, self.config.pool.is_empty()) {
            let expected = lb::hostname(service, suffix);
            if service
                .ingress
                .iter()
                .any(|i| i.hostname.as_deref() == Some(expected.as_str()))
            {
                return Ok(Some(vec![Ingress::hostname(expected)]));
            }
        }
        Ok(None)
    }

    fn name(&self, service: &Service) -> String {
        lb::name(service)
    }

    fn ensure(&self, service: &Service, _nodes: &[Node]) -> Result<EnsureResult, ProviderError> {
        lb::check_service(service)?;
        let suffix = self.config.hostname_suffix.as_deref();
        if suffix.is_some() && self.config.pool.is_empty() {
            return Ok(EnsureResult::with_ingress(lb::ingress(
                service, None, suffix,
            )));
        }
        let claims = |ips: &[std::net::IpAddr]| {
            let ips: Vec<String> = ips.iter().map(ToString::to_string).collect();
            cluster::address_claims(&ips, lb::IP_ANNOTATION)
        };
        let ip = match lb::choose_ip(service, &self.config.pool, &claims) {
            Ok(ip) => ip,
            Err(AllocationError::Invalid(m)) => return Err(ProviderError::InvalidConfig(m)),
            Err(AllocationError::Exhausted(m)) => {
                cluster::warning("AddressPoolExhausted", &m);
                return Err(ProviderError::Permanent(m));
            }
        };
        let mut result = EnsureResult::with_ingress(lb::ingress(service, Some(ip), suffix));
        let ip = ip.to_string();
        // Only write the annotation when it changes, so a steady state writes nothing.
        if service.annotation(IP_ANNOTATION) != Some(ip.as_str()) {
            result.set_annotations.push((IP_ANNOTATION.to_string(), ip));
        }
        Ok(result)
    }

    fn update(&self, service: &Service, nodes: &[Node]) -> Result<(), ProviderError> {
        log::debug(
            "backend nodes changed; static load balancers have nothing to reconfigure",
            &[
                ("service", &service.key()),
                ("nodes", &nodes.len().to_string()),
            ],
        );
        Ok(())
    }

    fn delete(&self, _service: &Service) -> Result<(), ProviderError> {
        // Nothing exists outside the Service object; the host removes the finalizer.
        Ok(())
    }
}

impl Routes for StaticDriver {
    fn list(&self) -> Result<Vec<Route>, ProviderError> {
        match &self.config.source {
            Source::Static { routes, .. } => Ok(routes.clone()),
            Source::Inventory { url, token } => {
                let url = format!("{url}/routes");
                let doc: RoutesDocument = self
                    .request(http::get(&url), token.as_deref())
                    .send()?
                    .error_for_status()?
                    .json()?;
                validate_routes(doc.routes).map_err(|e| {
                    ProviderError::InvalidConfig(format!(
                        "inventory {}: {e}",
                        http::display_url(&url)
                    ))
                })
            }
        }
    }

    fn create(&self, name_hint: &str, route: &Route) -> Result<(), ProviderError> {
        let (base, token) = self.inventory_for_routes()?;
        let body = RawRoute {
            name: name_hint.to_string(),
            target_node: route.target_node.clone(),
            destination_cidr: route.destination_cidr.clone(),
            blackhole: false,
        };
        let url = format!("{base}/routes/{}", encode_path_segment(name_hint));
        self.request(http::put(&url).json(&body), token)
            .send()?
            .error_for_status()?;
        Ok(())
    }

    fn delete(&self, route: &Route) -> Result<(), ProviderError> {
        let (base, token) = self.inventory_for_routes()?;
        let url = format!("{base}/routes/{}", encode_path_segment(&route.name));
        match self
            .request(http::delete(&url), token)
            .send()?
            .error_for_status()
        {
            Ok(_) | Err(ProviderError::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

wasm_ccm_sdk::export_driver!(StaticDriver);
