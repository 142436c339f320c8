//! The cloud-config document: parsing and validation.
//!
//! Parsing goes through serde with `deny_unknown_fields`, so a misspelt key is refused with its
//! path (`instances[1]: unknown field `zoen`, …`) instead of being silently ignored. Everything
//! else is checked by hand in [`Config::parse`] so that the message names the exact path.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use wasm_ccm_sdk::types::{AddressType, NodeAddress, ProviderError, Route};

use crate::pool::{AddressPool, parse_cidr};

/// The document as written, before validation.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    region: String,
    #[serde(default)]
    zone: String,
    #[serde(default)]
    instances: Vec<RawInstance>,
    #[serde(default)]
    load_balancer: Option<RawLoadBalancer>,
    #[serde(default)]
    inventory_url: Option<String>,
    #[serde(default)]
    inventory_token: Option<String>,
    #[serde(default)]
    routes: Vec<RawRoute>,
}

/// One instance as written in the config or served by the inventory.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawInstance {
    name: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default, rename = "type")]
    instance_type: String,
    #[serde(default)]
    zone: Option<String>,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    addresses: Vec<RawAddress>,
    #[serde(default)]
    shutdown: bool,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAddress {
    #[serde(rename = "type")]
    kind: String,
    address: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawLoadBalancer {
    #[serde(default)]
    addresses: Vec<String>,
    #[serde(default)]
    hostname_suffix: Option<String>,
}

/// A route as written in the config and exchanged with the inventory service.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RawRoute {
    /// The route's name (for created routes: the target node's UID).
    pub name: String,
    /// The node the traffic goes to.
    pub target_node: String,
    /// The pod CIDR.
    pub destination_cidr: String,
    /// The route points at a node that no longer exists.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub blackhole: bool,
}

/// The body of `GET {inventoryUrl}/instances`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstancesDocument {
    /// The instances, in the config's schema.
    pub instances: Vec<RawInstance>,
}

/// The body of `GET {inventoryUrl}/routes`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutesDocument {
    /// The routes, in the config's schema.
    pub routes: Vec<RawRoute>,
}

/// One validated instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// The Kubernetes node name.
    pub name: String,
    /// The id in the provider ID `static://<id>`.
    pub id: String,
    /// `node.kubernetes.io/instance-type`.
    pub instance_type: String,
    /// Zone, with the top-level default applied.
    pub zone: String,
    /// Region, with the top-level default applied.
    pub region: String,
    /// Addresses in config order.
    pub addresses: Vec<NodeAddress>,
    /// Powered off.
    pub shutdown: bool,
    /// Extra node labels.
    pub labels: Vec<(String, String)>,
}

/// Zone and region for instances that name none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Defaults {
    /// Default region.
    pub region: String,
    /// Default zone.
    pub zone: String,
}

/// Where instances and routes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// From the config document itself.
    Static {
        /// The instances.
        instances: Vec<Instance>,
        /// The routes (read-only).
        routes: Vec<Route>,
    },
    /// From an inventory service over HTTP, on every call.
    Inventory {
        /// Base URL without a trailing slash.
        url: String,
        /// Bearer token, when one is configured.
        token: Option<String>,
    },
}

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Zone and region defaults.
    pub defaults: Defaults,
    /// Instances and routes.
    pub source: Source,
    /// Load-balancer address pool (possibly empty).
    pub pool: AddressPool,
    /// When set, ingress is `<namespace>-<name>.<suffix>` instead of an IP.
    pub hostname_suffix: Option<String>,
}

/// The environment variable that carries the inventory token.
pub const TOKEN_ENV: &str = "STATIC_INVENTORY_TOKEN";

impl Config {
    /// Parses and validates the cloud-config bytes (YAML or JSON; empty means an empty cloud).
    /// `env` may carry [`TOKEN_ENV`], which wins over `inventoryToken`.
    pub fn parse(bytes: &[u8], env: &[(String, String)]) -> Result<Self, ProviderError> {
        let text = std::str::from_utf8(bytes)
            .map_err(|e| invalid(format!("cloud-config is not UTF-8: {e}")))?;
        let raw: RawConfig = if text.trim().is_empty() {
            RawConfig::default()
        } else if let Some(raw) = parse_json(text)? {
            raw
        } else {
            serde_norway::from_str(text).map_err(|e| invalid(format!("cloud-config: {e}")))?
        };

        let defaults = Defaults {
            region: raw.region,
            zone: raw.zone,
        };
        let env_token = env
            .iter()
            .find(|(k, _)| k == TOKEN_ENV)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty());

        let source = match raw.inventory_url {
            Some(url) => {
                if !raw.instances.is_empty() {
                    return Err(invalid(
                        "instances: not allowed together with inventoryUrl (the inventory serves the instances)",
                    ));
                }
                if !raw.routes.is_empty() {
                    return Err(invalid(
                        "routes: not allowed together with inventoryUrl (the inventory serves the routes)",
                    ));
                }
                let url = url.trim_end_matches('/').to_string();
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(invalid(format!(
                        "inventoryUrl: {url:?} is not an http:// or https:// URL"
                    )));
                }
                Source::Inventory {
                    url,
                    token: env_token.or(raw.inventory_token.filter(|t| !t.is_empty())),
                }
            }
            None => {
                if raw.inventory_token.is_some() {
                    return Err(invalid("inventoryToken: only meaningful with inventoryUrl"));
                }
                Source::Static {
                    instances: validate_instances(raw.instances, &defaults)
                        .map_err(ProviderError::InvalidConfig)?,
                    routes: validate_routes(raw.routes).map_err(ProviderError::InvalidConfig)?,
                }
            }
        };

        let lb = raw.load_balancer.unwrap_or_default();
        let pool = AddressPool::parse(&lb.addresses, "loadBalancer.addresses")
            .map_err(ProviderError::InvalidConfig)?;
        let hostname_suffix = match lb.hostname_suffix {
            Some(s) => {
                let s = s.trim_matches('.').to_string();
                if !is_dns_name(&s) {
                    return Err(invalid(format!(
                        "loadBalancer.hostnameSuffix: {s:?} is not a DNS name"
                    )));
                }
                Some(s)
            }
            None => None,
        };

        Ok(Config {
            defaults,
            source,
            pool,
            hostname_suffix,
        })
    }

    /// The secret to register with the host's redaction, if any.
    pub fn token(&self) -> Option<&str> {
        match &self.source {
            Source::Inventory { token, .. } => token.as_deref(),
            Source::Static { .. } => None,
        }
    }
}

/// The document read as JSON, when it is JSON: `None` for text that is not (YAML, including a
/// YAML flow mapping such as `{region: r}`), which the YAML reader then takes.
///
/// JSON is read straight into the structs. The YAML reader first loads every event of the
/// document with its position (about a hundred bytes each, a dozen per instance) and then
/// builds the structs from them: a 15,000-instance inventory (2.5 MB of JSON) needed more than
/// 64 MiB of the driver's memory that way, about 5 KiB per instance; this way the peak is the
/// text and the result. The errors name the path as the YAML reader's do.
fn parse_json(text: &str) -> Result<Option<RawConfig>, ProviderError> {
    if !text.trim_start().starts_with('{') {
        return Ok(None);
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let raw = match serde_path_to_error::deserialize::<_, RawConfig>(&mut de) {
        Ok(raw) => raw,
        // Not JSON (a syntax error, or text cut short): YAML may read it.
        Err(e) if e.inner().is_syntax() || e.inner().is_eof() => return Ok(None),
        Err(e) => return Err(invalid(json_error(&e))),
    };
    match de.end() {
        Ok(()) => Ok(Some(raw)),
        // Something after the document: not one JSON document, so YAML decides.
        Err(_) => Ok(None),
    }
}

/// `cloud-config: <path>: <what>`, the path as `instances[1].addresses[0]`, like the YAML
/// reader's messages.
fn json_error(e: &serde_path_to_error::Error<serde_json::Error>) -> String {
    let path = e.path().to_string();
    if path.is_empty() || path == "." {
        format!("cloud-config: {}", e.inner())
    } else {
        format!("cloud-config: {path}: {}", e.inner())
    }
}

fn invalid(message: impl Into<String>) -> ProviderError {
    ProviderError::InvalidConfig(message.into())
}

/// Validates instances; errors name the path, e.g. `instances[2].addresses[0].type: …`.
pub fn validate_instances(
    raw: Vec<RawInstance>,
    defaults: &Defaults,
) -> Result<Vec<Instance>, String> {
    let mut names = HashSet::new();
    let mut ids = HashSet::new();
    let mut out = Vec::with_capacity(raw.len());
    for (i, r) in raw.into_iter().enumerate() {
        let path = format!("instances[{i}]");
        if r.name.trim().is_empty() {
            return Err(format!("{path}.name: must not be empty"));
        }
        if !names.insert(r.name.clone()) {
            return Err(format!("{path}.name: duplicate instance name {:?}", r.name));
        }
        // The id defaults to the name, which is what a small hand-written inventory wants.
        let id = r.id.unwrap_or_else(|| r.name.clone());
        if id.is_empty() || id.contains(char::is_whitespace) || id.contains('/') {
            return Err(format!(
                "{path}.id: {id:?} is not usable in a provider ID (non-empty, no spaces or slashes)"
            ));
        }
        if !ids.insert(id.clone()) {
            return Err(format!("{path}.id: duplicate instance id {id:?}"));
        }
        let mut addresses = Vec::with_capacity(r.addresses.len());
        for (j, a) in r.addresses.into_iter().enumerate() {
            let kind = AddressType::from_kubernetes(&a.kind).ok_or_else(|| {
                let names: Vec<&str> = AddressType::ALL.iter().map(|t| t.as_kubernetes()).collect();
                format!(
                    "{path}.addresses[{j}].type: unknown address type {:?}; use one of {}",
                    a.kind,
                    names.join(", ")
                )
            })?;
            if matches!(kind, AddressType::InternalIp | AddressType::ExternalIp)
                && a.address.parse::<IpAddr>().is_err()
            {
                return Err(format!(
                    "{path}.addresses[{j}].address: {:?} is not an IP address (type {})",
                    a.address, a.kind
                ));
            }
            if a.address.is_empty() {
                return Err(format!("{path}.addresses[{j}].address: must not be empty"));
            }
            addresses.push(NodeAddress::new(kind, a.address));
        }
        out.push(Instance {
            name: r.name,
            id,
            instance_type: r.instance_type,
            zone: r.zone.unwrap_or_else(|| defaults.zone.clone()),
            region: r.region.unwrap_or_else(|| defaults.region.clone()),
            addresses,
            shutdown: r.shutdown,
            labels: r.labels.into_iter().collect(),
        });
    }
    Ok(out)
}

/// Validates routes: unique names, parseable CIDRs.
pub fn validate_routes(raw: Vec<RawRoute>) -> Result<Vec<Route>, String> {
    let mut names = HashSet::new();
    raw.into_iter()
        .enumerate()
        .map(|(i, r)| {
            if r.name.is_empty() {
                return Err(format!("routes[{i}].name: must not be empty"));
            }
            if !names.insert(r.name.clone()) {
                return Err(format!(
                    "routes[{i}].name: duplicate route name {:?}",
                    r.name
                ));
            }
            parse_cidr(&r.destination_cidr)
                .map_err(|e| format!("routes[{i}].destinationCidr: {e}"))?;
            Ok(Route {
                name: r.name,
                target_node: r.target_node,
                target_node_addresses: Vec::new(),
                destination_cidr: r.destination_cidr,
                blackhole: r.blackhole,
            })
        })
        .collect()
}

fn is_dns_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = include_str!("../examples/cloud-config.yaml");

    fn parse(s: &str) -> Result<Config, ProviderError> {
        Config::parse(s.as_bytes(), &[])
    }

    fn err(s: &str) -> String {
        match parse(s) {
            Err(ProviderError::InvalidConfig(m)) => m,
            other => panic!("expected invalid-config, got {other:?}"),
        }
    }

    #[test]
    fn sample_parses() {
        let c = parse(SAMPLE).unwrap();
        let Source::Static { instances, .. } = &c.source else {
            panic!("static source expected")
        };
        assert_eq!(instances.len(), 2);
        assert_eq!(instances[0].name, "node-a");
        assert_eq!(instances[1].zone, "eu-1b");
        assert!(!c.pool.is_empty());
    }

    #[test]
    fn empty_config_is_an_empty_cloud() {
        let c = parse("  \n").unwrap();
        assert_eq!(
            c.source,
            Source::Static {
                instances: vec![],
                routes: vec![]
            }
        );
        assert!(c.pool.is_empty());
    }

    #[test]
    fn json_is_accepted() {
        let c = parse(r#"{"region":"r","instances":[{"name":"n","id":"i"}]}"#).unwrap();
        let Source::Static { instances, .. } = c.source else {
            panic!()
        };
        assert_eq!(instances[0].region, "r");
        assert_eq!(instances[0].id, "i");
    }

    /// JSON is read as JSON (not through the YAML reader), with the same path in its errors;
    /// a YAML flow mapping, which also starts with `{`, is still YAML.
    #[test]
    fn json_errors_name_the_path_and_flow_yaml_still_parses() {
        let m = err(r#"{"instances":[{"name":"a"},{"name":"b","zoen":"x"}]}"#);
        assert!(m.starts_with("cloud-config: instances[1]"), "{m}");
        assert!(m.contains("zoen"), "{m}");
        let m = err(r#"{"instances":[{"name":"a","addresses":[{"type":"InternalIP"}]}]}"#);
        assert!(m.contains("instances[0].addresses[0]"), "{m}");
        assert!(m.contains("address"), "{m}");
        let c = parse("{region: r, instances: [{name: n}]}").unwrap();
        assert_eq!(c.defaults.region, "r");
        // Not one JSON document (two values): YAML decides, and refuses it.
        assert!(parse(r#"{"region":"r"} {"zone":"z"}"#).is_err());
    }

    #[test]
    fn defaults_apply() {
        let c = parse("region: r\nzone: z\ninstances:\n  - name: n\n  - name: m\n    zone: y\n")
            .unwrap();
        let Source::Static { instances, .. } = c.source else {
            panic!()
        };
        assert_eq!(
            (instances[0].zone.as_str(), instances[0].region.as_str()),
            ("z", "r")
        );
        assert_eq!(instances[1].zone, "y");
        assert_eq!(instances[0].id, "n");
    }

    #[test]
    fn unknown_keys_are_named() {
        let m = err("instances:\n  - name: n\n    zoen: x\n");
        assert!(m.contains("instances[0]") && m.contains("zoen"), "{m}");
        let m = err("loadBalancers: {}\n");
        assert!(m.contains("loadBalancers"), "{m}");
    }

    #[test]
    fn bad_address_type_names_path_and_choices() {
        let m = err(
            "instances:\n - name: a\n - name: b\n - name: c\n   addresses: [{type: Foo, address: x}]\n",
        );
        assert_eq!(
            m,
            "instances[2].addresses[0].type: unknown address type \"Foo\"; use one of Hostname, InternalIP, ExternalIP, InternalDNS, ExternalDNS"
        );
    }

    #[test]
    fn duplicates_and_bad_ips_are_refused() {
        assert!(err("instances:\n - name: a\n - name: a\n").contains("duplicate instance name"));
        assert!(
            err("instances:\n - {name: a, id: x}\n - {name: b, id: x}\n")
                .contains("instances[1].id: duplicate")
        );
        assert!(
            err("instances:\n - name: a\n   addresses: [{type: InternalIP, address: 10.0.0}]\n")
                .contains("instances[0].addresses[0].address")
        );
        assert!(
            err("loadBalancer:\n  addresses: [300.1.1.1]\n").contains("loadBalancer.addresses[0]")
        );
        assert!(
            err("routes:\n - {name: r, targetNode: n, destinationCidr: 10.0.0.0/33}\n")
                .contains("routes[0].destinationCidr")
        );
    }

    #[test]
    fn inventory_mode() {
        let c = Config::parse(
            b"inventoryUrl: http://127.0.0.1:8080/\ninventoryToken: file\n",
            &[(TOKEN_ENV.to_string(), "env".to_string())],
        )
        .unwrap();
        assert_eq!(
            c.source,
            Source::Inventory {
                url: "http://127.0.0.1:8080".into(),
                token: Some("env".into())
            }
        );
        assert_eq!(c.token(), Some("env"));
        assert!(err("inventoryUrl: ftp://x\n").contains("inventoryUrl"));
        assert!(err("inventoryUrl: http://x\ninstances: [{name: a}]\n").contains("instances"));
    }
}
