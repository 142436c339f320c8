//! The {{name}} wasm-ccm driver: node initialisation and lifecycle over an inventory API.
//!
//! As generated, the "cloud" is the inventory API of wasm-ccm-dev's `static` simulator
//! (`GET /instances`, bearer token), so the driver passes `wasm-ccm-dev conformance` as it is.
//! Make it yours: replace [`Driver::list`] and the [`Instance`] shape with your cloud's API and
//! keep the rest: the configuration checks in `init`, the lookup rules and the error mapping are
//! what the conformance checks expect.

use serde::Deserialize;
use wasm_ccm_sdk::http;
use wasm_ccm_sdk::types::{
    AddressType, Context, InstanceMetadata, InstancePage, ListedInstance, Node, NodeAddress,
    ProviderError, ProviderInfo,
};
use wasm_ccm_sdk::{Instances, Provider, log};

/// Provider IDs are `{{name}}://<id>`: the scheme is stored on every Node, so choose it once.
const SCHEME: &str = "{{name}}";

/// One request may take this long; well inside the host's 30 s call deadline.
const TIMEOUT_MS: u32 = 5_000;

/// What `init` read from the environment (`{{ENV}}_API_URL`, `{{ENV}}_API_TOKEN`).
pub struct Driver {
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

/// An address of an instance, with its Kubernetes type name (`InternalIP`, …).
#[derive(Deserialize)]
struct Address {
    #[serde(rename = "type")]
    kind: String,
    address: String,
}

/// The answer of `GET /instances`.
#[derive(Deserialize)]
struct InstanceList {
    instances: Vec<Instance>,
}

impl Instance {
    /// The ID in provider IDs: the API's `id`, or the name when it has none.
    fn id(&self) -> &str {
        self.id.as_deref().unwrap_or(&self.name)
    }
}

/// The instance ID in `node`'s provider ID; `None` when the node has none yet (look it up by
/// name then). Another provider's ID is an error, never "not found": `false` from
/// instance-exists makes the host delete the Node.
fn instance_id(node: &Node) -> Result<Option<&str>, ProviderError> {
    if node.provider_id.is_empty() {
        return Ok(None);
    }
    node.provider_id
        .strip_prefix(SCHEME)
        .and_then(|rest| rest.strip_prefix("://"))
        .filter(|id| !id.is_empty())
        .map(Some)
        .ok_or_else(|| {
            ProviderError::InvalidConfig(format!(
                "node {} has provider ID {:?}, which is not {SCHEME}://<id>",
                node.name, node.provider_id
            ))
        })
}

impl Driver {
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
        let wanted = instance_id(node)?;
        Ok(self.list()?.into_iter().find(|i| match wanted {
            Some(id) => i.id() == id,
            None => i.name == node.name,
        }))
    }

    /// Like [`Driver::find`], with a missing instance as `not-found`.
    fn require(&self, node: &Node) -> Result<Instance, ProviderError> {
        self.find(node)?.ok_or_else(|| {
            ProviderError::NotFound(format!("no instance for node {} in the inventory", node.name))
        })
    }
}

impl Provider for Driver {
    fn info() -> ProviderInfo {
        ProviderInfo {
            // The operator's --cloud-provider value.
            name: "{{name}}".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            provider_id_scheme: SCHEME.into(),
            // Your API's address. The operator's --allow-egress replaces it (the conformance
            // scenario points the driver at a simulator that way).
            default_egress: vec!["https://api.example.com".into()],
            // Only environment variables with these prefixes reach init.
            env_prefixes: vec!["{{ENV}}_".into()],
            // Service annotation keys the driver may set or remove (its own domain).
            annotation_prefixes: vec!["{{name}}.example.com/".into()],
            // The credentials the driver reads. Declared, the host keeps them out of the guest:
            // `init` sees a placeholder and the host applies the value to requests, e.g.
            // `SecretDecl::new("api-token", vec![SecretLocation::env("{{ENV}}_API_TOKEN")],
            // SecretOrigin::new(vec![SecretLocation::env("{{ENV}}_API_URL")],
            // "https://api.example.com"), vec![SecretUse::Bearer])`. Left empty, the driver
            // receives its credentials in clear.
            secrets: Vec::new(),
        }
    }

    /// The variables `init` reads, by exact name (contract 0.2.1). Named here, `init` gets only
    /// these and the places of declared secrets: a credential the operator keeps under the
    /// prefix by another name never reaches the driver. `None`: every `{{ENV}}_` variable.
    fn plain_env() -> Option<Vec<String>> {
        Some(vec!["{{ENV}}_API_URL".into(), "{{ENV}}_API_TOKEN".into()])
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
        let url = var("{{ENV}}_API_URL").unwrap_or_else(|| "https://api.example.com".into());
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(ProviderError::InvalidConfig(format!(
                "{{ENV}}_API_URL {url:?} is not an http(s):// URL; set it to the API's address"
            )));
        }
        let token = var("{{ENV}}_API_TOKEN").ok_or_else(|| {
            ProviderError::InvalidConfig(
                "{{ENV}}_API_TOKEN is not set; put the API token in it".into(),
            )
        })?;
        // Never let the token reach a log line.
        log::redact(&token);
        Ok(Driver {
            url: url.trim_end_matches('/').to_string(),
            token,
        })
    }
}

impl Instances for Driver {
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
    /// name [`Driver::find`] matches a node without a provider ID by. This API answers in one
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
        let kind = AddressType::from_kubernetes(&a.kind).ok_or_else(|| {
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

wasm_ccm_sdk::export_driver!(Driver);

/// Logic that does not call the host runs natively: `cargo test`.
#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, provider_id: &str) -> Node {
        Node {
            name: name.into(),
            provider_id: provider_id.into(),
            uid: format!("uid-{name}"),
            labels: Vec::new(),
            annotations: Vec::new(),
            addresses: Vec::new(),
            taints: Vec::new(),
            ready: true,
        }
    }

    #[test]
    fn a_node_without_a_provider_id_is_looked_up_by_name() {
        assert!(matches!(instance_id(&node("n1", "")), Ok(None)));
    }

    #[test]
    fn the_instance_id_comes_from_this_driver_s_provider_ids_only() {
        assert!(matches!(
            instance_id(&node("n1", "{{name}}://i-1")),
            Ok(Some("i-1"))
        ));
        for foreign in ["other://i-1", "{{name}}://", "{{name}}:i-1"] {
            assert!(
                matches!(
                    instance_id(&node("n1", foreign)),
                    Err(ProviderError::InvalidConfig(_))
                ),
                "{foreign}"
            );
        }
    }
}
