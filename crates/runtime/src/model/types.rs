//! The records of the WIT's `types` interface, as the host sees them. `wit/provider.wit`
//! documents each one; the doc comments here say what the host does with them.

use serde::{Deserialize, Serialize};

use super::wit_enum;

/// What a driver reports when a call did not succeed (`provider-error`). The host maps each case
/// onto the controllers' requeue, backoff and events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProviderError {
    /// The object (instance, load balancer, route) does not exist in the cloud.
    #[serde(rename = "not-found")]
    NotFound(String),
    /// The driver does not implement this function.
    #[serde(rename = "not-implemented")]
    NotImplemented,
    /// Another component manages this object: ensure/update are a successful no-op.
    #[serde(rename = "implemented-elsewhere")]
    ImplementedElsewhere,
    /// The operator's configuration or an annotation is wrong: a Warning event, slow retries.
    #[serde(rename = "invalid-config")]
    InvalidConfig(String),
    /// The cloud refused the credentials.
    #[serde(rename = "unauthorized")]
    Unauthorized(String),
    /// The cloud asked to slow down; seconds from Retry-After when known.
    #[serde(rename = "rate-limited")]
    RateLimited(Option<u32>),
    /// Work is under way in the cloud: call again after exactly `seconds`.
    #[serde(rename = "retry-after")]
    RetryAfter(Retry),
    /// A failure that may pass by itself: exponential backoff.
    #[serde(rename = "transient")]
    Transient(String),
    /// A failure that retrying will not fix without a change somewhere.
    #[serde(rename = "permanent")]
    Permanent(String),
}

impl ProviderError {
    /// The WIT name of the case, e.g. `not-found`; used in metrics labels and JSON.
    pub fn case(&self) -> &'static str {
        match self {
            ProviderError::NotFound(_) => "not-found",
            ProviderError::NotImplemented => "not-implemented",
            ProviderError::ImplementedElsewhere => "implemented-elsewhere",
            ProviderError::InvalidConfig(_) => "invalid-config",
            ProviderError::Unauthorized(_) => "unauthorized",
            ProviderError::RateLimited(_) => "rate-limited",
            ProviderError::RetryAfter(_) => "retry-after",
            ProviderError::Transient(_) => "transient",
            ProviderError::Permanent(_) => "permanent",
        }
    }
}

/// The case and the driver's message, e.g. `not-found: no server web-1`
/// ([`crate::Described`] is the sentence the host's own messages use).
impl std::fmt::Display for ProviderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProviderError::NotFound(m)
            | ProviderError::InvalidConfig(m)
            | ProviderError::Unauthorized(m)
            | ProviderError::Transient(m)
            | ProviderError::Permanent(m) => write!(f, "{}: {m}", self.case()),
            ProviderError::NotImplemented | ProviderError::ImplementedElsewhere => {
                f.write_str(self.case())
            }
            ProviderError::RateLimited(Some(s)) => write!(f, "{}: {s}s", self.case()),
            ProviderError::RateLimited(None) => f.write_str(self.case()),
            ProviderError::RetryAfter(r) => {
                write!(f, "{}: {}s: {}", self.case(), r.seconds, r.reason)
            }
        }
    }
}

impl std::error::Error for ProviderError {}

/// How long to wait before calling again, and why (`retry`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct Retry {
    /// Seconds until the next call.
    pub seconds: u32,
    /// Why, for the event and the log line.
    pub reason: String,
}

wit_enum! {
    /// Kinds of node addresses (`address-type`), as in Kubernetes' `NodeAddressType`.
    AddressType {
        /// `Hostname`.
        #[default]
        Hostname = "hostname",
        /// `InternalIP`.
        InternalIp = "internal-ip",
        /// `ExternalIP`.
        ExternalIp = "external-ip",
        /// `InternalDNS`.
        InternalDns = "internal-dns",
        /// `ExternalDNS`.
        ExternalDns = "external-dns",
    }
}

/// One node address (`node-address`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct NodeAddress {
    /// Its type.
    pub kind: AddressType,
    /// The address.
    pub address: String,
}

/// A taint on a node (`taint`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct Taint {
    /// The taint's key.
    pub key: String,
    /// Its value.
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// The parts of a Kubernetes Node a driver may need (`node`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct Node {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `spec.providerID`; empty while the node has none.
    pub provider_id: String,
    /// `metadata.labels`.
    #[serde(with = "super::pairs")]
    pub labels: Vec<(String, String)>,
    /// `metadata.annotations`.
    #[serde(with = "super::pairs")]
    pub annotations: Vec<(String, String)>,
    /// `status.addresses`.
    pub addresses: Vec<NodeAddress>,
    /// `spec.taints`.
    pub taints: Vec<Taint>,
    /// The node's Ready condition is True.
    pub ready: bool,
}

/// A node with nothing set but `ready`, which is true: tests and scenario files describe the
/// nodes they care about, and a node is ready unless they say otherwise.
impl Default for Node {
    fn default() -> Self {
        Node {
            name: String::new(),
            uid: String::new(),
            provider_id: String::new(),
            labels: Vec::new(),
            annotations: Vec::new(),
            addresses: Vec::new(),
            taints: Vec::new(),
            ready: true,
        }
    }
}

impl Node {
    /// A ready node called `name`, for tests and examples.
    pub fn named(name: impl Into<String>) -> Self {
        Node {
            name: name.into(),
            ..Default::default()
        }
    }
}

/// The backend nodes of a `load-balancer.ensure` or `update` call, by reference (`node-set`):
/// what crosses into the guest for a [`crate::SharedNodes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct NodeSet {
    /// Equal generations mean equal node lists for the life of the host process.
    pub generation: u64,
    /// How many nodes `cluster.nodes` returns during the call.
    pub count: u32,
}

/// What the cloud knows about the instance behind a node (`instance-metadata`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct InstanceMetadata {
    /// `<scheme>://<id>`.
    pub provider_id: String,
    /// Written to `node.kubernetes.io/instance-type`; empty for none.
    pub instance_type: String,
    /// Written to `topology.kubernetes.io/zone`; empty for none.
    pub zone: String,
    /// Written to `topology.kubernetes.io/region`; empty for none.
    pub region: String,
    /// The node's addresses in the order the cloud prefers them.
    pub addresses: Vec<NodeAddress>,
    /// Extra node labels.
    #[serde(with = "super::pairs")]
    pub additional_labels: Vec<(String, String)>,
}

/// One instance as a listing shows it (`instance-listing.listed-instance`, contract 0.2.2).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct ListedInstance {
    /// The node the per-node lookup matches this instance to; empty when the driver cannot say.
    pub node_name: String,
    /// What `instance-metadata` answers for it.
    pub metadata: InstanceMetadata,
    /// What `instance-shutdown` answers for it.
    pub shutdown: bool,
}

/// One page of a listing (`instance-listing.instance-page`, contract 0.2.2).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct InstancePage {
    /// The instances of this page.
    pub instances: Vec<ListedInstance>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<String>,
}

wit_enum! {
    /// Layer-4 protocol of a service port (`protocol`).
    Protocol {
        /// TCP.
        #[default]
        Tcp = "tcp",
        /// UDP.
        Udp = "udp",
        /// SCTP.
        Sctp = "sctp",
    }
}

/// One port of a Service (`service-port`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct ServicePort {
    /// The port's name.
    pub name: String,
    /// Its protocol.
    pub protocol: Protocol,
    /// The port the load balancer listens on.
    pub port: u16,
    /// The node port traffic is sent to; 0 when none is allocated.
    pub node_port: u16,
}

wit_enum! {
    /// `spec.externalTrafficPolicy` (`traffic-policy`).
    TrafficPolicy {
        /// `Cluster`.
        #[default]
        Cluster = "cluster",
        /// `Local`.
        Local = "local",
    }
}

wit_enum! {
    /// `spec.sessionAffinity` (`session-affinity`).
    SessionAffinity {
        /// `None`.
        #[default]
        None = "none",
        /// `ClientIP`.
        ClientIp = "client-ip",
    }
}

wit_enum! {
    /// An IP family of a Service (`ip-family`).
    IpFamily {
        /// `IPv4`.
        #[default]
        Ipv4 = "ipv4",
        /// `IPv6`.
        Ipv6 = "ipv6",
    }
}

wit_enum! {
    /// `status.loadBalancer.ingress[].ipMode` (`ip-mode`).
    IpMode {
        /// `VIP`.
        #[default]
        Vip = "vip",
        /// `Proxy`.
        Proxy = "proxy",
    }
}

/// One entry of `status.loadBalancer.ingress` (`ingress`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct Ingress {
    /// The address.
    pub ip: Option<String>,
    /// The DNS name.
    pub hostname: Option<String>,
    /// How the address reaches the nodes.
    pub ip_mode: Option<IpMode>,
}

/// The parts of a Kubernetes Service of type LoadBalancer a driver may need (`service`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct Service {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.labels`.
    #[serde(with = "super::pairs")]
    pub labels: Vec<(String, String)>,
    /// `metadata.annotations`.
    #[serde(with = "super::pairs")]
    pub annotations: Vec<(String, String)>,
    /// `spec.ports`.
    pub ports: Vec<ServicePort>,
    /// `spec.externalTrafficPolicy`.
    pub external_traffic_policy: TrafficPolicy,
    /// `spec.healthCheckNodePort`; 0 when none.
    pub health_check_node_port: u16,
    /// `spec.loadBalancerIP`.
    pub load_balancer_ip: Option<String>,
    /// `spec.loadBalancerSourceRanges`, CIDRs.
    pub load_balancer_source_ranges: Vec<String>,
    /// `spec.sessionAffinity`.
    pub session_affinity: SessionAffinity,
    /// `spec.sessionAffinityConfig.clientIP.timeoutSeconds`, when set.
    pub session_affinity_timeout: Option<u32>,
    /// `spec.ipFamilies`.
    pub ip_families: Vec<IpFamily>,
    /// `spec.loadBalancerClass`, when set.
    pub load_balancer_class: Option<String>,
    /// `status.loadBalancer.ingress` as it is now.
    pub ingress: Vec<Ingress>,
}

/// What `load-balancer.ensure` wants the host to write on the Service (`ensure-result`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct EnsureResult {
    /// The new `status.loadBalancer.ingress`.
    pub ingress: Vec<Ingress>,
    /// Annotations to set on the Service (key, value).
    #[serde(with = "super::pairs")]
    pub set_annotations: Vec<(String, String)>,
    /// Annotation keys to remove from the Service.
    pub remove_annotations: Vec<String>,
}

/// A route sending a pod CIDR to a node (`route`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct Route {
    /// The cloud's name or id for the route.
    pub name: String,
    /// The node the traffic goes to.
    pub target_node: String,
    /// The node's addresses, when the cloud tracks them.
    pub target_node_addresses: Vec<NodeAddress>,
    /// The pod CIDR.
    pub destination_cidr: String,
    /// The route points at a node that no longer exists.
    pub blackhole: bool,
}

/// Facts about the cluster, given once to `init` (`context`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct Context {
    /// `--cluster-name`.
    pub cluster_name: String,
    /// The UID of the kube-system namespace.
    pub cluster_id: String,
    /// The API server's version, e.g. `v1.31.2`.
    pub kubernetes_version: String,
}

/// What a driver tells about itself (`provider-info`); checked by `crate::info_rules`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct ProviderInfo {
    /// Short name, the `--cloud-provider` value.
    pub name: String,
    /// The driver's own version (semver).
    pub version: String,
    /// The scheme of the provider IDs it returns.
    pub provider_id_scheme: String,
    /// Egress the driver needs by default.
    pub default_egress: Vec<String>,
    /// Prefixes of the environment variables the host passes to `init`.
    pub env_prefixes: Vec<String>,
    /// Prefixes of the Service annotation keys the driver may set or remove.
    pub annotation_prefixes: Vec<String>,
    /// The credentials the driver reads; the host keeps them out of the guest
    /// ([`crate::secrets`]).
    pub secrets: Vec<SecretDecl>,
}

/// Where a credential sits in what the operator gives `init` (`secret-location`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SecretLocation {
    /// An environment variable.
    Env(String),
    /// An INI key: section and key.
    Ini((String, String)),
    /// A JSON Pointer to a string member of a JSON file.
    Json(String),
}

/// Where the host may send a credential (`secret-origin`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct SecretOrigin {
    /// Settings holding the URL, first present wins.
    pub settings: Vec<SecretLocation>,
    /// The URL when no setting is present; empty: a setting is required.
    pub default_url: String,
}

/// How the host puts a credential into a request (`secret-use`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SecretUse {
    /// `Authorization: Bearer`.
    Bearer,
    /// The whole value of a header.
    Header(String),
    /// A query parameter or form field.
    Param(String),
    /// The user of `Authorization: Basic`.
    BasicUser,
    /// The password of `Authorization: Basic`.
    BasicPassword,
    /// The key of CloudStack's request signature.
    CloudstackSignature,
    /// An OAuth2 client-credentials token endpoint whose token the host seals.
    Oauth2Client(Oauth2Seal),
}

/// The token endpoint of [`SecretUse::Oauth2Client`] (`oauth2-seal`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct Oauth2Seal {
    /// The token endpoint's path.
    pub token_path: String,
    /// Where the sealed access token may be sent, as a bearer token.
    pub token_origins: Vec<SecretOrigin>,
}

/// A credential the driver declares (`secret-decl`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct SecretDecl {
    /// Stable name.
    pub name: String,
    /// Every place the value may be.
    pub at: Vec<SecretLocation>,
    /// Where the host may send it.
    pub origin: SecretOrigin,
    /// How the host may put it into a request for `origin`.
    pub uses: Vec<SecretUse>,
}
