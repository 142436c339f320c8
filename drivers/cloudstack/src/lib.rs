//! The Apache CloudStack driver, compatible with the upstream
//! `apache/cloudstack-kubernetes-provider`: the same `cloud-config` file, provider IDs
//! (`external-cloudstack://<vm-uuid>`), LB rule names and annotations, so an operator can switch
//! without re-creating anything. `README.md` lists where it deliberately differs from upstream.

pub mod api;
pub mod config;
pub mod instances;
pub mod lb;
pub mod model;
pub mod provider_id;
pub mod sign;

use wasm_ccm_sdk::types::{
    Context, EnsureResult, Ingress, InstanceMetadata, InstancePage, Node, ProviderError,
    ProviderInfo, Service,
};
use wasm_ccm_sdk::{Instances, LoadBalancer, Provider, log};

use crate::api::{Api, PageAt};
use crate::config::Config;
use crate::lb::{Lb, LbState};

/// The driver value kept between calls (the project id, pending jobs and claimed IPs are caches).
pub struct CloudstackDriver {
    api: Api,
    config: Config,
    lb: LbState,
    /// `--cluster-name`, written into the ownership tags of the public IPs we associate.
    cluster_name: String,
}

impl CloudstackDriver {
    fn lb(&self) -> Lb<'_> {
        Lb {
            api: &self.api,
            state: &self.lb,
            job_budget: self.config.job_budget,
            cluster_name: &self.cluster_name,
        }
    }
}

impl Provider for CloudstackDriver {
    fn info() -> ProviderInfo {
        ProviderInfo {
            name: "external-cloudstack".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            provider_id_scheme: provider_id::SCHEME.into(),
            // Every CloudStack has its own API URL: the operator grants it with --allow-egress.
            default_egress: Vec::new(),
            env_prefixes: vec!["CLOUDSTACK_".into()],
            // Upstream's one state annotation, kept so a migrated Service is adopted as it is.
            annotation_prefixes: vec![lb::spec::IP_ASSOCIATED.into()],
            secrets: config::secrets(),
        }
    }

    /// The credentials sit in the cloud-config; the one variable read is the job budget.
    fn plain_env() -> Option<Vec<String>> {
        Some(vec![config::JOB_BUDGET_VAR.into()])
    }

    /// Reads the configuration only: no request, so no admin-only call (upstream's
    /// `listManagementServersMetrics`) can keep the driver from starting.
    fn init(
        ctx: Context,
        file: Vec<u8>,
        env: Vec<(String, String)>,
    ) -> Result<Self, ProviderError> {
        let config = Config::parse(&file, &env)?;
        log::redact(&config.secret_key);
        log::redact(&config.api_key);
        if config.ssl_no_verify {
            log::warn(
                "ssl-no-verify = true is ignored: wasm-ccm always verifies TLS; give the host the CloudStack CA instead (SSL_CERT_FILE)",
                &[],
            );
        }
        log::info(
            "cloudstack driver configured",
            &[
                ("api", &config.api_url),
                ("project", config.project.as_deref().unwrap_or("none")),
                ("job-budget", &format!("{:?}", config.job_budget)),
            ],
        );
        Ok(CloudstackDriver {
            api: Api::new(&config),
            config,
            lb: LbState::default(),
            cluster_name: ctx.cluster_name,
        })
    }
}

impl Instances for CloudstackDriver {
    fn instance_exists(&self, node: &Node) -> Result<bool, ProviderError> {
        instances::exists(&self.api, node)
    }

    fn instance_shutdown(&self, node: &Node) -> Result<bool, ProviderError> {
        instances::shutdown(&self.api, node)
    }

    fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, ProviderError> {
        let vm = instances::find(&self.api, node)?;
        instances::metadata(&vm, self.config.region.as_deref())
    }

    /// `listVirtualMachines` page by page, in the per-node lookups' scope: a status pass costs
    /// one request a page (500 VMs at CloudStack's default `default.page.size`) instead of one
    /// or more a node.
    fn list_instances(&self, page: Option<String>) -> Result<InstancePage, ProviderError> {
        let at = match page {
            None => None,
            Some(token) => Some(PageAt::parse(&token).ok_or_else(|| {
                ProviderError::Permanent(format!(
                    "page token {token:?} was not issued by this driver (it issues <page>/<pagesize>)"
                ))
            })?),
        };
        let (listed, next) = instances::list_page(&self.api, at, self.config.region.as_deref())?;
        Ok(listed.into_page(next.map(PageAt::token)))
    }
}

impl LoadBalancer for CloudstackDriver {
    fn get(&self, service: &Service) -> Result<Option<Vec<Ingress>>, ProviderError> {
        self.lb().get(service)
    }

    fn name(&self, service: &Service) -> String {
        lb::spec::lb_name(service)
    }

    fn ensure(&self, service: &Service, nodes: &[Node]) -> Result<EnsureResult, ProviderError> {
        self.lb().ensure(service, nodes)
    }

    fn update(&self, service: &Service, nodes: &[Node]) -> Result<(), ProviderError> {
        self.lb().update(service, nodes)
    }

    fn delete(&self, service: &Service) -> Result<(), ProviderError> {
        self.lb().delete(service)
    }
}

wasm_ccm_sdk::export_driver!(CloudstackDriver);
