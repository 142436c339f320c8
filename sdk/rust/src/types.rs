//! The records and variants of the WIT contract, with helpers.
//!
//! Everything here is re-exported from the generated bindings, so the values are exactly what
//! crosses the component boundary.

pub use crate::bindings::exports::wasm_ccm::provider::instance_listing::{
    InstancePage, ListedInstance,
};
pub use crate::bindings::wasm_ccm::provider::cluster::{AddressClaim, AddressUse, EventType};
pub use crate::bindings::wasm_ccm::provider::log::Level;
pub use crate::bindings::wasm_ccm::provider::types::{
    AddressType, Context, EnsureResult, Ingress, InstanceMetadata, IpFamily, IpMode, Node,
    NodeAddress, NodeSet, Oauth2Seal, Protocol, ProviderInfo, Retry, Route, SecretDecl,
    SecretLocation, SecretOrigin, SecretUse, Service, ServicePort, SessionAffinity, Taint,
    TrafficPolicy,
};
pub use crate::error::ProviderError;

/// The value of `key` in a list of (key, value) pairs, as Kubernetes labels and annotations are
/// passed across the boundary.
fn lookup<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

impl Node {
    /// The value of label `key`, if the node has it.
    pub fn label(&self, key: &str) -> Option<&str> {
        lookup(&self.labels, key)
    }

    /// The value of annotation `key`, if the node has it.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        lookup(&self.annotations, key)
    }

    /// The first address of the given kind, if any.
    pub fn address(&self, kind: AddressType) -> Option<&str> {
        self.addresses
            .iter()
            .find(|a| a.kind == kind)
            .map(|a| a.address.as_str())
    }
}

impl Service {
    /// The value of label `key`, if the service has it.
    pub fn label(&self, key: &str) -> Option<&str> {
        lookup(&self.labels, key)
    }

    /// The value of annotation `key`, if the service has it.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        lookup(&self.annotations, key)
    }

    /// `namespace/name`, for messages.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

impl NodeAddress {
    /// An address of the given kind.
    pub fn new(kind: AddressType, address: impl Into<String>) -> Self {
        Self {
            kind,
            address: address.into(),
        }
    }
}

impl AddressType {
    /// The Kubernetes spelling (`NodeAddressType`), e.g. `InternalIP`.
    pub fn as_kubernetes(self) -> &'static str {
        match self {
            Self::Hostname => "Hostname",
            Self::InternalIp => "InternalIP",
            Self::ExternalIp => "ExternalIP",
            Self::InternalDns => "InternalDNS",
            Self::ExternalDns => "ExternalDNS",
        }
    }

    /// Parses the Kubernetes spelling (`InternalIP`, …); exact match, as the API server does.
    pub fn from_kubernetes(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_kubernetes() == name)
    }

    /// Every address type, in the order Kubernetes documents them.
    pub const ALL: [AddressType; 5] = [
        Self::Hostname,
        Self::InternalIp,
        Self::ExternalIp,
        Self::InternalDns,
        Self::ExternalDns,
    ];
}

impl Ingress {
    /// An ingress entry with an IP and `ip-mode: vip` (traffic is delivered to the node with the
    /// load balancer's IP as destination).
    pub fn vip(ip: impl Into<String>) -> Self {
        Self {
            ip: Some(ip.into()),
            hostname: None,
            ip_mode: Some(IpMode::Vip),
        }
    }

    /// An ingress entry with an IP and `ip-mode: proxy` (the load balancer rewrites the
    /// destination).
    pub fn proxy(ip: impl Into<String>) -> Self {
        Self {
            ip: Some(ip.into()),
            hostname: None,
            ip_mode: Some(IpMode::Proxy),
        }
    }

    /// An ingress entry with only a hostname.
    pub fn hostname(hostname: impl Into<String>) -> Self {
        Self {
            ip: None,
            hostname: Some(hostname.into()),
            ip_mode: None,
        }
    }
}

impl EnsureResult {
    /// A result that sets the ingress and touches no annotation.
    pub fn with_ingress(ingress: Vec<Ingress>) -> Self {
        Self {
            ingress,
            set_annotations: Vec::new(),
            remove_annotations: Vec::new(),
        }
    }
}

impl SecretLocation {
    /// The environment variable `name` (it must start with one of the driver's `env-prefixes`).
    pub fn env(name: impl Into<String>) -> Self {
        Self::Env(name.into())
    }

    /// The key `key` of section `section` of an INI `--cloud-config` file.
    pub fn ini(section: impl Into<String>, key: impl Into<String>) -> Self {
        Self::Ini((section.into(), key.into()))
    }

    /// The string member at JSON Pointer `pointer` (e.g. `/clientSecret`) of a JSON
    /// `--cloud-config` file.
    pub fn json(pointer: impl Into<String>) -> Self {
        Self::Json(pointer.into())
    }
}

impl SecretOrigin {
    /// The origin of the URL in the first present of `settings`, else of `default_url` (empty:
    /// one of the settings is required).
    pub fn new(settings: Vec<SecretLocation>, default_url: impl Into<String>) -> Self {
        Self {
            settings,
            default_url: default_url.into(),
        }
    }
}

impl SecretDecl {
    /// A credential named `name`, found at `at`, that the host applies to requests for
    /// `origin` in the ways `uses` lists.
    pub fn new(
        name: impl Into<String>,
        at: Vec<SecretLocation>,
        origin: SecretOrigin,
        uses: Vec<SecretUse>,
    ) -> Self {
        Self {
            name: name.into(),
            at,
            origin,
            uses,
        }
    }
}

impl InstanceMetadata {
    /// Metadata with only a provider ID; fill in the other fields as needed.
    pub fn new(provider_id: impl Into<String>) -> Self {
        Self {
            provider_id: provider_id.into(),
            instance_type: String::new(),
            zone: String::new(),
            region: String::new(),
            addresses: Vec::new(),
            additional_labels: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_types_round_trip() {
        for t in AddressType::ALL {
            assert_eq!(AddressType::from_kubernetes(t.as_kubernetes()), Some(t));
        }
        assert_eq!(AddressType::from_kubernetes("internalip"), None);
    }

    #[test]
    fn node_lookups() {
        let node = Node {
            name: "n".into(),
            uid: "u".into(),
            provider_id: String::new(),
            labels: vec![("a".into(), "1".into())],
            annotations: vec![("b".into(), "2".into())],
            addresses: vec![NodeAddress::new(AddressType::InternalIp, "10.0.0.1")],
            taints: vec![],
            ready: true,
        };
        assert_eq!(node.label("a"), Some("1"));
        assert_eq!(node.label("b"), None);
        assert_eq!(node.annotation("b"), Some("2"));
        assert_eq!(node.address(AddressType::InternalIp), Some("10.0.0.1"));
    }
}
