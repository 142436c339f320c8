//! A wasm-ccm driver template: node initialisation and lifecycle over an inventory API.
//!
//! The "cloud" here is the inventory service of `wasm-ccm-sim` (`GET /instances`, bearer token),
//! so the template runs and passes `wasm-ccm-dev conformance` as it is. To write a driver for your
//! cloud, replace [`Template::list`] and the [`Instance`] shape with your API; keep the rest:
//! the configuration checks in `init`, the lookup rules and the error mapping are what the
//! conformance checks expect.

use serde::Deserialize;
use wasm_ccm_sdk::http;
use wasm_ccm_sdk::types::{
    AddressType, Context, InstanceMetadata, InstancePage, ListedInstance, Node, NodeAddress,
    ProviderError, ProviderInfo,
};
use wasm_ccm_sdk::{Instances, Provider, log};

/// Provider IDs are `example://<id>`: choose your cloud's scheme once, it is stored on every Node.
const SCHEME: &str = "example";

/// One request may take this long; well inside the host's 30 s call deadline.
const TIMEOUT_MS: u32 = 5_000;

/// What `init` read from the environment (`EXAMPLE_API_URL`, `EXAMPLE_API_TOKEN`).
pub struct Template {
    url: String,
    token: String,
}

/// An instance as the API returns it.
#[derive(Deserialize)]
struct Instance {
    name: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default, rename = "type")]
    instance_type: String,
    #[serde(default)]
    zone: String,
    #[serde(default)]
    region: String,
    #[serde(default)]
    addresses: Vec<Address>,
    #[serde(default)]
    shutdown: bool,
}

#[derive(Deserialize)]
struct Address {
    #[serde(rename = "type")]
    kind: String,
    address: String,
}

#[derive(Deserialize)]
struct InstanceList {
    instances: Vec<Instance>,
}

impl Instance {
    fn id(&self) -> &str {
        self.id.as_deref().unwrap_or(&self.name)
    }
}

impl Template {
    /// Every instance. `send` maps transport failures and `error_for_status` maps HTTP errors to
    /// the `provider-error` cases the host acts on (429 → rate-limited with Retry-After, 401/403
    /// → unauthorized, 5xx → transient); `json` turns a malformed body into `transient`.
    fn list(&self) -> Result<Vec<Instance>, ProviderError> {
        let list: InstanceList = http::get(format!("{}/instances", self.url))
            .bearer(&self.token)
            .timeout_ms(TIMEOUT_MS)
            .send()?
            .error_for_status()?
            .json()?;
        Ok(list.instances)
    }

    /// The instance behind `node`: by provider ID when the node has one, else by name.
    /// `Ok(None)` only when the cloud answered and the instance is not there.
    fn find(&self, node: &Node) -> Result<Option<Instance>, ProviderError> {
        let wanted_id = if node.provider_id.is_empty() {
            None
        } else {
            // Another provider's ID is an error, never "not found": `false` from
            // instance-exists makes the host delete the Node.
            let id = node
                .provider_id
                .strip_prefix(SCHEME)
                .and_then(|rest| rest.strip_prefix("://"))
                .ok_or_else(|| {
                    ProviderError::InvalidConfig(format!(
                        "node {} has provider ID {:?}, which is not {SCHEME}://<id>",
                        node.name, node.provider_id
                    ))
                })?;
            Some(id.to_string())
        };
        Ok(self.list()?.into_iter().find(|i| match &wanted_id {
            Some(id) => i.id() == id,
            None => i.name == node.name,
        }))
    }

    fn require(&self, node: &Node) -> Result<Instance, ProviderError> {
        self.find(node)?.ok_or_else(|| {
            ProviderError::NotFound(format!(
                "no instance for node {} in the inventory",
                node.name
            ))
        })
    }
}

fn address_type(kind: &str) -> Option<AddressType> {
    Some(match kind {
        "Hostname" => AddressType::Hostname,
        "InternalIP" => AddressType::InternalIp,
        "ExternalIP" => AddressType::ExternalIp,
        "InternalDNS" => AddressType::InternalDns,
        "ExternalDNS" => AddressType::ExternalDns,
        _ => return None,
    })
}

impl Provider for Template {
    fn info() -> ProviderInfo {
        ProviderInfo {
            name: "example".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            provider_id_scheme: SCHEME.into(),
            // Your API's address, e.g. "https://api.example.com". The operator's --allow-egress
            // replaces it (tests point the driver at a simulator that way).
            default_egress: vec!["https://api.example.com".into()],
            env_prefixes: vec!["EXAMPLE_".into()],
            // Service annotation keys the driver may set or remove (its own domain).
            annotation_prefixes: vec!["example.com/".into()],
            // The credentials the driver reads. Declared, the host keeps them out of the guest:
            // `init` sees a placeholder and the host applies the value to requests, e.g.
            // `SecretDecl::new("api-token", vec![SecretLocation::env("EXAMPLE_API_TOKEN")],
            // SecretOrigin::new(vec![SecretLocation::env("EXAMPLE_API_URL")],
            // "https://api.example.com"), vec![SecretUse::Bearer])`. Left empty, the driver
            // receives its credentials in clear.
            secrets: Vec::new(),
        }
    }

    /// The variables `init` reads, by exact name (contract 0.2.1). Named here, `init` gets only
    /// these and the places of declared secrets: a credential the operator keeps under the
    /// prefix by another name never reaches the driver. `None`: every `EXAMPLE_` variable.
    fn plain_env() -> Option<Vec<String>> {
        Some(vec!["EXAMPLE_API_URL".into(), "EXAMPLE_API_TOKEN".into()])
    }

    fn init(
        _ctx: Context,
        _config: Vec<u8>,
        env: Vec<(String, String)>,
    ) -> Result<Self, ProviderError> {
        let var = |name: &str| {
            env.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let url = var("EXAMPLE_API_URL").unwrap_or_else(|| "https://api.example.com".into());
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(ProviderError::InvalidConfig(format!(
                "EXAMPLE_API_URL {url:?} is not an http(s):// URL"
            )));
        }
        let token = var("EXAMPLE_API_TOKEN").ok_or_else(|| {
            ProviderError::InvalidConfig(
                "EXAMPLE_API_TOKEN is not set; put the API token in it".into(),
            )
        })?;
        // Never let the token reach a log line.
        log::redact(&token);
        Ok(Template {
            url: url.trim_end_matches('/').to_string(),
            token,
        })
    }
}

impl Instances for Template {
    fn instance_exists(&self, node: &Node) -> Result<bool, ProviderError> {
        Ok(self.find(node)?.is_some())
    }

    fn instance_shutdown(&self, node: &Node) -> Result<bool, ProviderError> {
        Ok(self.require(node)?.shutdown)
    }

    fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, ProviderError> {
        metadata(self.require(node)?)
    }

    /// Every instance in one listing (contract 0.2.2), so the host asks the API once per pass
    /// instead of once per node. Each entry is what the two functions above answer, under the
    /// name [`Template::find`] matches a node without a provider ID by. This API answers in one
    /// response, so the listing is one page; with an API that pages, hand its cursor back as
    /// `next` (the host passes it as `page` to the next call; at most 20,000 instances a page).
    fn list_instances(&self, page: Option<String>) -> Result<InstancePage, ProviderError> {
        if let Some(page) = page {
            return Err(ProviderError::Permanent(format!(
                "page token {page:?} is not one this driver wrote: its listing is one page"
            )));
        }
        let instances = self
            .list()?
            .into_iter()
            .filter_map(|i| {
                let (node_name, shutdown) = (i.name.clone(), i.shutdown);
                // An instance the driver cannot describe is left out: the host asks about its
                // node on its own, and instance-metadata answers with the error.
                let metadata = metadata(i).ok()?;
                Some(ListedInstance {
                    node_name,
                    metadata,
                    shutdown,
                })
            })
            .collect();
        Ok(InstancePage {
            instances,
            next: None,
        })
    }
}

/// What instance-metadata answers for `i`; an address of a type Kubernetes does not know is
/// `permanent`, since asking again brings the same answer.
fn metadata(i: Instance) -> Result<InstanceMetadata, ProviderError> {
    let mut addresses = Vec::new();
    for a in &i.addresses {
        let kind = address_type(&a.kind).ok_or_else(|| {
            ProviderError::Permanent(format!(
                "instance {} has an address of unknown type {:?}",
                i.name, a.kind
            ))
        })?;
        addresses.push(NodeAddress {
            kind,
            address: a.address.clone(),
        });
    }
    Ok(InstanceMetadata {
        provider_id: format!("{SCHEME}://{}", i.id()),
        instance_type: i.instance_type,
        zone: i.zone,
        region: i.region,
        addresses,
        additional_labels: Vec::new(),
    })
}

wasm_ccm_sdk::export_driver!(Template);
