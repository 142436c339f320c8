//! The traits a driver implements; [`crate::export_driver!`] wires them to the WIT exports.

#[cfg(feature = "routes")]
use crate::types::Route;
use crate::types::{Context, InstanceMetadata, InstancePage, Node, ProviderError, ProviderInfo};
#[cfg(feature = "load-balancer")]
use crate::types::{EnsureResult, Ingress, Service};

/// Identity, configuration and upkeep: every driver implements it (`provider` in the WIT).
///
/// The value returned by [`Provider::init`] is kept for the life of the component instance and
/// every other call receives it as `&self`.
pub trait Provider {
    /// Who the driver is. Called before `init`; must not make requests.
    fn info() -> ProviderInfo;

    /// The plain (non-secret) environment variables the driver reads, by exact name, each under
    /// one of its [`ProviderInfo::env_prefixes`] (`environment.plain-variables`, contract
    /// 0.2.1). A driver that names them gets an allow-list in `init`: these, the places of its
    /// declared secrets and its secrets' origin settings, nothing else under its prefixes. The
    /// default, `None`, keeps 0.2.0's behaviour (every prefixed variable, minus
    /// credential-looking names when the driver declares secrets), and the host warns about a
    /// driver that declares secrets but not this. Called before `init`; must not make requests.
    fn plain_env() -> Option<Vec<String>> {
        None
    }

    /// Configure the driver from the `--cloud-config` bytes (empty when none) and the
    /// environment variables matching [`ProviderInfo::env_prefixes`]. An error stops the driver
    /// from loading, so validate everything here and say exactly what is wrong.
    fn init(
        ctx: Context,
        config: Vec<u8>,
        env: Vec<(String, String)>,
    ) -> Result<Self, ProviderError>
    where
        Self: Sized;

    /// Periodic upkeep (garbage collection, cache refresh). Nothing to do by default.
    fn housekeeping(&self) -> Result<(), ProviderError> {
        Ok(())
    }
}

/// Nodes and the machines behind them (`instances` in the WIT, Kubernetes' InstancesV2).
pub trait Instances {
    /// Whether the instance behind `node` exists. `false` makes the host delete the Node, so
    /// answer `false` only when the cloud said so; stopped instances exist.
    fn instance_exists(&self, node: &Node) -> Result<bool, ProviderError>;

    /// Whether the instance is shut down (powered off).
    fn instance_shutdown(&self, node: &Node) -> Result<bool, ProviderError>;

    /// Provider ID, type, zone, region and addresses of the instance behind `node`.
    fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, ProviderError>;

    /// One page of the cluster's instances (`instance-listing.list-instances`, contract 0.2.2):
    /// `page` is `None` for the first page, else the `next` of the page before. Each listed
    /// instance carries what [`Instances::instance_metadata`] and
    /// [`Instances::instance_shutdown`] would answer for it and the node name the per-node
    /// lookup matches it to, so the host asks the cloud once per pass instead of once per node.
    /// Keep the two paths equal (`wasm-ccm-dev conformance` compares them). The default answers
    /// [`ProviderError::NotImplemented`], and the host keeps asking per node.
    fn list_instances(&self, page: Option<String>) -> Result<InstancePage, ProviderError> {
        let _ = page;
        Err(ProviderError::NotImplemented)
    }
}

/// Load balancers for Services of type LoadBalancer (`load-balancer` in the WIT).
#[cfg(feature = "load-balancer")]
pub trait LoadBalancer {
    /// The load balancer's current ingress, or `None` when it does not exist. Read-only.
    fn get(&self, service: &Service) -> Result<Option<Vec<Ingress>>, ProviderError>;

    /// The name of the service's load balancer; deterministic, no requests.
    fn name(&self, service: &Service) -> String;

    /// Create or update the load balancer so it matches `service` and sends traffic to `nodes`.
    /// Idempotent: a second call with the same inputs changes nothing.
    fn ensure(&self, service: &Service, nodes: &[Node]) -> Result<EnsureResult, ProviderError>;

    /// Only the set of backend nodes changed.
    fn update(&self, service: &Service, nodes: &[Node]) -> Result<(), ProviderError>;

    /// Delete the load balancer; succeeds when it does not exist.
    fn delete(&self, service: &Service) -> Result<(), ProviderError>;
}

/// Routes from pod CIDRs to nodes (`routes` in the WIT).
#[cfg(feature = "routes")]
pub trait Routes {
    /// The routes of this cluster that the driver manages.
    fn list(&self) -> Result<Vec<Route>, ProviderError>;

    /// Create a route; `name_hint` is the target node's UID.
    fn create(&self, name_hint: &str, route: &Route) -> Result<(), ProviderError>;

    /// Delete a route as returned by `list`; succeeds when it does not exist.
    fn delete(&self, route: &Route) -> Result<(), ProviderError>;
}
