//! A small driver over the static inventory service (`GET /instances`, `PUT`/`DELETE
//! /routes/{name}` as its key/value store for load balancers), correct unless its
//! cloud-config names a bug:
//!
//! | `bug` | what it does wrong |
//! | --- | --- |
//! | `non-idempotent-ensure` | every `ensure` writes the load balancer again |
//! | `unknown-node-error` | `instance-exists` answers `not-found` instead of `false` |
//! | `trap-on-500` | panics on an HTTP 500 |
//! | `rate-limit-as-transient` | reports a 429 as `transient` |
//! | `egress-outside` | also asks a URL it was never granted (a loopback port, so nothing could leave) |
//! | `hidden-state` | `get` answers from memory of what this instance created |
//! | `panic-deep` | every `instances` call recurses `depth` frames into `crash::descend` and panics there with `panic` |
//!
//! Config (JSON): `{"url": "http://…", "token": "…", "bug": "…"}`; `panic-deep` also reads
//! `depth` (default 3) and `panic` (the panic message), and `mark`, a value `init` registers
//! with `log.redact`: the backtrace tests put it in a panic message or a function name and look
//! for it redacted.

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde::Deserialize;
use wasm_ccm_sdk::http::{self, Response};
use wasm_ccm_sdk::types::{
    AddressType, Context, EnsureResult, Ingress, InstanceMetadata, Node, NodeAddress,
    ProviderError, ProviderInfo, Service,
};
use wasm_ccm_sdk::{Instances, LoadBalancer, Provider};

const SCHEME: &str = "broken";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Bug {
    None,
    NonIdempotentEnsure,
    UnknownNodeError,
    #[serde(rename = "trap-on-500")]
    TrapOn500,
    RateLimitAsTransient,
    EgressOutside,
    HiddenState,
    PanicDeep,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    url: String,
    #[serde(default)]
    token: String,
    #[serde(default = "no_bug")]
    bug: Bug,
    /// `panic-deep`: frames of `crash::descend` under the panic.
    #[serde(default = "three")]
    depth: u32,
    /// `panic-deep`: the panic message.
    #[serde(default)]
    panic: String,
    /// Registered with `log.redact` in `init` when not empty.
    #[serde(default)]
    mark: String,
}

fn no_bug() -> Bug {
    Bug::None
}

fn three() -> u32 {
    3
}

/// The `panic-deep` bug: a stack of one named function, for the backtrace tests.
mod crash {
    /// Recurses `depth` frames, then panics with `message`. Never inlined, and its frame is kept
    /// alive across the call, so every level is a real frame in the backtrace.
    #[inline(never)]
    pub(crate) fn descend(depth: u32, message: &str) -> u32 {
        let frame = [depth; 4];
        std::hint::black_box(&frame);
        if depth == 0 {
            panic!("{message}");
        }
        let below = descend(depth - 1, message);
        std::hint::black_box(below).wrapping_add(frame[1])
    }
}

#[derive(Deserialize)]
struct Inventory {
    instances: Vec<Instance>,
}

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
struct Records {
    routes: Vec<serde_json::Value>,
}

/// The driver.
pub struct Broken {
    config: Config,
    /// Only the `hidden-state` bug reads this.
    remembered: RefCell<BTreeMap<String, String>>,
}

impl Broken {
    fn send(&self, req: http::RequestBuilder) -> Result<Response, ProviderError> {
        let resp = req.bearer(&self.config.token).timeout_ms(5_000).send()?;
        if resp.status == 500 && self.config.bug == Bug::TrapOn500 {
            panic!("the cloud answered 500");
        }
        if resp.status == 429 && self.config.bug == Bug::RateLimitAsTransient {
            return Err(ProviderError::Transient("HTTP 429".into()));
        }
        resp.error_for_status()
    }

    fn find(&self, node: &Node) -> Result<Option<Instance>, ProviderError> {
        if self.config.bug == Bug::PanicDeep {
            crash::descend(self.config.depth, &self.config.panic);
        }
        if self.config.bug == Bug::EgressOutside {
            // Ignored on purpose: the bug is asking at all. An ungranted loopback port (discard,
            // 9) rather than a real metadata endpoint: were the host's check ever to regress,
            // this request still could not leave the machine.
            let _ = http::get("http://127.0.0.1:9/latest/meta-data/").send();
        }
        let inv: Inventory = self
            .send(http::get(format!("{}/instances", self.config.url)))?
            .json()?;
        let id = node.provider_id.strip_prefix("broken://");
        Ok(inv.instances.into_iter().find(|i| match id {
            Some(id) => i.id.as_deref().unwrap_or(&i.name) == id,
            None => i.name == node.name,
        }))
    }

    fn record_name(service: &Service) -> String {
        format!("lb-{}", service.uid)
    }

    fn address(service: &Service) -> String {
        let n = service
            .uid
            .bytes()
            .fold(0u32, |a, b| a.wrapping_add(u32::from(b)));
        format!("192.0.2.{}", n % 250 + 1)
    }

    fn stored(&self, service: &Service) -> Result<Option<serde_json::Value>, ProviderError> {
        let records: Records = self
            .send(http::get(format!("{}/routes", self.config.url)))?
            .json()?;
        let name = Self::record_name(service);
        Ok(records
            .routes
            .into_iter()
            .find(|r| r.get("name").and_then(|n| n.as_str()) == Some(name.as_str())))
    }

    fn store(&self, service: &Service, nodes: &[Node]) -> Result<(), ProviderError> {
        let body = serde_json::json!({
            "targetNode": nodes.first().map(|n| n.name.as_str()).unwrap_or(""),
            "destinationCidr": format!("{}/32", Self::address(service)),
            "backends": nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
        });
        let url = format!(
            "{}/routes/{}",
            self.config.url,
            http::encode_path_segment(&Self::record_name(service))
        );
        self.send(http::put(url).json(&body))?;
        Ok(())
    }

    fn backends_of(record: &serde_json::Value) -> Vec<String> {
        record
            .get("backends")
            .and_then(|b| b.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn kind(k: &str) -> AddressType {
    match k {
        "InternalIP" => AddressType::InternalIp,
        "ExternalIP" => AddressType::ExternalIp,
        "InternalDNS" => AddressType::InternalDns,
        "ExternalDNS" => AddressType::ExternalDns,
        _ => AddressType::Hostname,
    }
}

impl Provider for Broken {
    fn info() -> ProviderInfo {
        ProviderInfo {
            name: "broken".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            provider_id_scheme: SCHEME.into(),
            default_egress: Vec::new(),
            env_prefixes: Vec::new(),
            annotation_prefixes: Vec::new(),
            secrets: Vec::new(),
        }
    }

    fn init(
        _ctx: Context,
        config: Vec<u8>,
        _env: Vec<(String, String)>,
    ) -> Result<Self, ProviderError> {
        let config: Config = serde_json::from_slice(&config)
            .map_err(|e| ProviderError::InvalidConfig(format!("cloud-config: {e}")))?;
        wasm_ccm_sdk::log::redact(&config.mark);
        Ok(Broken {
            config,
            remembered: RefCell::default(),
        })
    }
}

impl Instances for Broken {
    fn instance_exists(&self, node: &Node) -> Result<bool, ProviderError> {
        match self.find(node)? {
            Some(_) => Ok(true),
            None if self.config.bug == Bug::UnknownNodeError => Err(ProviderError::NotFound(
                format!("no instance {}", node.name),
            )),
            None => Ok(false),
        }
    }

    fn instance_shutdown(&self, node: &Node) -> Result<bool, ProviderError> {
        self.find(node)?
            .map(|i| i.shutdown)
            .ok_or_else(|| ProviderError::NotFound(node.name.clone()))
    }

    fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, ProviderError> {
        let i = self
            .find(node)?
            .ok_or_else(|| ProviderError::NotFound(node.name.clone()))?;
        Ok(InstanceMetadata {
            provider_id: format!("{SCHEME}://{}", i.id.as_deref().unwrap_or(&i.name)),
            instance_type: i.instance_type,
            zone: i.zone,
            region: i.region,
            addresses: i
                .addresses
                .into_iter()
                .map(|a| NodeAddress {
                    kind: kind(&a.kind),
                    address: a.address,
                })
                .collect(),
            additional_labels: Vec::new(),
        })
    }
}

impl LoadBalancer for Broken {
    fn get(&self, service: &Service) -> Result<Option<Vec<Ingress>>, ProviderError> {
        if self.config.bug == Bug::HiddenState {
            return Ok(self
                .remembered
                .borrow()
                .get(&service.uid)
                .map(|ip| vec![Ingress::vip(ip.clone())]));
        }
        Ok(self
            .stored(service)?
            .map(|_| vec![Ingress::vip(Self::address(service))]))
    }

    fn name(&self, service: &Service) -> String {
        Self::record_name(service)
    }

    fn ensure(&self, service: &Service, nodes: &[Node]) -> Result<EnsureResult, ProviderError> {
        let wanted: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
        let current = match self.config.bug {
            Bug::NonIdempotentEnsure => None,
            _ => self.stored(service)?,
        };
        if current.as_ref().map(Self::backends_of) != Some(wanted) {
            self.store(service, nodes)?;
        }
        self.remembered
            .borrow_mut()
            .insert(service.uid.clone(), Self::address(service));
        Ok(EnsureResult::with_ingress(vec![Ingress::vip(
            Self::address(service),
        )]))
    }

    fn update(&self, service: &Service, nodes: &[Node]) -> Result<(), ProviderError> {
        let wanted: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
        match self.stored(service)? {
            Some(r) if Self::backends_of(&r) == wanted => Ok(()),
            _ => self.store(service, nodes),
        }
    }

    fn delete(&self, service: &Service) -> Result<(), ProviderError> {
        self.remembered.borrow_mut().remove(&service.uid);
        if self.stored(service)?.is_none() {
            return Ok(());
        }
        let url = format!(
            "{}/routes/{}",
            self.config.url,
            http::encode_path_segment(&Self::record_name(service))
        );
        match self.send(http::delete(url)) {
            Ok(_) | Err(ProviderError::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

wasm_ccm_sdk::export_driver!(Broken);
