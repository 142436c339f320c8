//! Scenario files: the cloud a driver is checked against, how the driver is configured for it,
//! and the nodes and services to exercise with what the driver should answer.
//!
//! A scenario is YAML (or JSON). Strings in `driver` may use `${CLOUD_URL}` and `${CLOUD_TOKEN}`,
//! which become the address and credential of the cloud chosen with `--cloud`. Nodes and
//! services use the same JSON form as `wasm-ccm-dev call` arguments.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context as _, bail};
use serde::Deserialize;
use serde_json::Value;
use wasm_ccm_runtime::json::from_value;
use wasm_ccm_runtime::types::{Node, NodeAddress, Service};

/// A parsed, validated scenario.
#[derive(Debug, Clone)]
pub(super) struct Scenario {
    /// The level checked when `--level` is not given.
    pub level: Option<String>,
    /// The simulated cloud this scenario is written for and its starting inventory.
    pub cloud: CloudSection,
    /// How the driver is configured (placeholders not yet substituted).
    pub driver: DriverSection,
    /// Nodes whose instances exist in the cloud, with what the driver should say about them.
    pub nodes: Vec<KnownNode>,
    /// Nodes the cloud has never heard of.
    pub unknown_nodes: Vec<Node>,
    /// LoadBalancer Services to create, update and delete.
    pub services: Vec<ScenarioService>,
    /// Routes to create and delete (drivers exporting `routes`).
    pub routes: Vec<ScenarioRoute>,
}

/// A pod CIDR routed to a node.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct ScenarioRoute {
    /// The name of one of the scenario's nodes.
    pub target_node: String,
    pub destination_cidr: String,
}

/// `cloud:` — the simulator and its seed.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct CloudSection {
    /// The simulator `--cloud sim` starts: a name in the kit's list of clouds
    /// (`wasm_ccm_sim::kit::CLOUDS`; an unknown name is refused with the list).
    #[serde(default)]
    pub sim: Option<String>,
    /// The simulator's starting inventory, in that simulator's `--seed` format.
    #[serde(default)]
    pub seed: Value,
    /// The credential the simulator requires (`${CLOUD_TOKEN}`); a fixed one when absent.
    #[serde(default)]
    pub token: Option<String>,
}

/// `driver:` — what the operator would configure.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct DriverSection {
    /// The `--cloud-config` file's text.
    #[serde(default)]
    pub config: String,
    /// Environment variables offered to `init` (after the process environment, so they win).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The operator's `--allow-egress` grants; absent means the driver's declared defaults.
    #[serde(default)]
    pub egress: Option<Vec<String>>,
    /// `--cluster-name`.
    #[serde(default)]
    pub cluster_name: Option<String>,
    /// The Kubernetes version `init` is told.
    #[serde(default)]
    pub kubernetes_version: Option<String>,
}

/// A node whose instance exists, and what the driver must answer for it.
#[derive(Debug, Clone)]
pub(super) struct KnownNode {
    pub node: Node,
    pub expect: Expectation,
}

/// What a known node's calls must return; absent fields are not compared.
#[derive(Debug, Clone, Default)]
pub(super) struct Expectation {
    pub exists: bool,
    pub shutdown: bool,
    pub provider_id: Option<String>,
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    pub region: Option<String>,
    pub addresses: Option<Vec<NodeAddress>>,
}

/// A Service with the nodes that back it.
#[derive(Debug, Clone)]
pub(super) struct ScenarioService {
    pub service: Service,
    /// Names of scenario nodes used as backends; `update` is checked with the last one removed.
    pub backends: Vec<String>,
    /// The `provider-error` case `ensure` must answer (e.g. `invalid-config` for a Service the
    /// cloud cannot serve), with no request that changes the cloud; `None` for a Service that
    /// must get a load balancer.
    pub expect_error: Option<String>,
}

/// The `provider-error` cases a scenario may expect from `ensure`.
const ERROR_CASES: &[&str] = &[
    "not-found",
    "not-implemented",
    "implemented-elsewhere",
    "invalid-config",
    "unauthorized",
    "rate-limited",
    "retry-after",
    "transient",
    "permanent",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Raw {
    #[serde(default)]
    level: Option<String>,
    #[serde(default)]
    cloud: CloudSection,
    #[serde(default)]
    driver: DriverSection,
    #[serde(default)]
    nodes: Vec<RawNode>,
    #[serde(default)]
    unknown_nodes: Vec<Value>,
    #[serde(default)]
    services: Vec<RawService>,
    #[serde(default)]
    routes: Vec<ScenarioRoute>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    node: Value,
    #[serde(default)]
    expect: RawExpect,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawExpect {
    #[serde(default)]
    exists: Option<bool>,
    #[serde(default)]
    shutdown: Option<bool>,
    #[serde(default)]
    provider_id: Option<String>,
    #[serde(default)]
    instance_type: Option<String>,
    #[serde(default)]
    zone: Option<String>,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    addresses: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawService {
    service: Value,
    #[serde(default)]
    backends: Vec<String>,
    #[serde(default, rename = "expect-error")]
    expect_error: Option<String>,
}

impl Scenario {
    /// Reads and validates a scenario file.
    pub(super) fn load(path: &Path) -> anyhow::Result<Scenario> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the scenario {}", path.display()))?;
        Scenario::parse(&text).with_context(|| format!("scenario {}", path.display()))
    }

    /// Parses and validates a scenario document.
    pub(super) fn parse(text: &str) -> anyhow::Result<Scenario> {
        let raw: Raw = serde_norway::from_str(text)
            .context("not a valid scenario (see sdk/README.md, \"Conformance scenarios\")")?;
        let nodes = raw
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| known_node(n).map_err(|e| anyhow::anyhow!("nodes[{i}]: {e}")))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let unknown_nodes = raw
            .unknown_nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                from_value::<Node>(n, "node")
                    .map_err(|e| anyhow::anyhow!("unknown-nodes[{i}]: {e}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let services = raw
            .services
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let service = from_value::<Service>(&s.service, "service")
                    .map_err(|e| anyhow::anyhow!("services[{i}]: {e}"))?;
                for b in &s.backends {
                    if !nodes.iter().any(|n| &n.node.name == b) {
                        bail!("services[{i}].backends: `{b}` is not the name of one of the scenario's nodes");
                    }
                }
                if let Some(case) = &s.expect_error
                    && !ERROR_CASES.contains(&case.as_str())
                {
                    bail!(
                        "services[{i}].expect-error: `{case}` is not a provider-error case; use one of {}",
                        ERROR_CASES.join(", ")
                    );
                }
                Ok(ScenarioService {
                    service,
                    backends: s.backends.clone(),
                    expect_error: s.expect_error.clone(),
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        for (i, r) in raw.routes.iter().enumerate() {
            if !nodes.iter().any(|n| n.node.name == r.target_node) {
                bail!(
                    "routes[{i}].target-node: `{}` is not the name of one of the scenario's nodes",
                    r.target_node
                );
            }
        }
        let mut names: Vec<&str> = nodes.iter().map(|n| n.node.name.as_str()).collect();
        names.extend(unknown_nodes.iter().map(|n| n.name.as_str()));
        if let Some(empty) = names.iter().position(|n| n.is_empty()) {
            bail!("node {empty} has no name; every node needs one");
        }
        let mut sorted = names.clone();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            bail!("the node name `{}` is used twice", w[0]);
        }
        if let Some(level) = &raw.level
            && !["core", "full"].contains(&level.as_str())
        {
            bail!("level: `{level}` is not core or full");
        }
        Ok(Scenario {
            level: raw.level,
            cloud: raw.cloud,
            driver: raw.driver,
            nodes,
            unknown_nodes,
            services,
            routes: raw.routes,
        })
    }

    /// The known nodes named in `names`, in that order.
    pub(super) fn nodes_named(&self, names: &[String]) -> Vec<Node> {
        names
            .iter()
            .filter_map(|n| self.nodes.iter().find(|k| &k.node.name == n))
            .map(|k| k.node.clone())
            .collect()
    }
}

fn known_node(raw: &RawNode) -> Result<KnownNode, String> {
    let node = from_value::<Node>(&raw.node, "node")?;
    let e = &raw.expect;
    let addresses = e
        .addresses
        .as_ref()
        .map(|list| from_value::<Vec<NodeAddress>>(list, "expect.addresses"))
        .transpose()?;
    Ok(KnownNode {
        node,
        expect: Expectation {
            exists: e.exists.unwrap_or(true),
            shutdown: e.shutdown.unwrap_or(false),
            provider_id: e.provider_id.clone(),
            instance_type: e.instance_type.clone(),
            zone: e.zone.clone(),
            region: e.region.clone(),
            addresses,
        },
    })
}

/// Replaces `${CLOUD_URL}` and `${CLOUD_TOKEN}`; `None` when the text uses a placeholder that has
/// no value (the variable is then left to the process environment).
pub(super) fn substitute(text: &str, url: &str, token: Option<&str>) -> Option<String> {
    let text = text.replace("${CLOUD_URL}", url);
    if text.contains("${CLOUD_TOKEN}") {
        return token.map(|t| text.replace("${CLOUD_TOKEN}", t));
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
level: full
cloud:
  sim: static
  seed: {instances: []}
driver:
  config: "inventoryUrl: ${CLOUD_URL}"
  env: {STATIC_INVENTORY_TOKEN: "${CLOUD_TOKEN}"}
  egress: ["${CLOUD_URL}"]
nodes:
  - node: {name: a, provider-id: "static://a"}
    expect: {instance-type: small, addresses: [{kind: internal-ip, address: 10.0.0.1}]}
unknown-nodes:
  - {name: ghost}
services:
  - service: {namespace: default, name: web, uid: u1, ports: [{port: 80, node-port: 30080}]}
    backends: [a]
"#;

    #[test]
    fn sample_parses_with_defaults() {
        let s = Scenario::parse(SAMPLE).unwrap();
        assert_eq!(s.nodes.len(), 1);
        assert!(s.nodes[0].expect.exists);
        assert!(!s.nodes[0].expect.shutdown);
        assert_eq!(s.nodes[0].expect.addresses.as_ref().unwrap().len(), 1);
        assert_eq!(s.unknown_nodes[0].name, "ghost");
        assert_eq!(s.services[0].backends, vec!["a"]);
        assert_eq!(s.nodes_named(&["a".into()]).len(), 1);
    }

    #[test]
    fn mistakes_are_named() {
        let bad_backend = SAMPLE.replace("backends: [a]", "backends: [zz]");
        let e = format!("{:#}", Scenario::parse(&bad_backend).unwrap_err());
        assert!(
            e.contains("services[0].backends") && e.contains("zz"),
            "{e}"
        );
        let typo = SAMPLE.replace("instance-type: small", "instance-typ: small");
        let e = format!("{:#}", Scenario::parse(&typo).unwrap_err());
        assert!(e.contains("instance-typ"), "{e}");
        let dup = SAMPLE.replace("{name: ghost}", "{name: a}");
        let e = format!("{:#}", Scenario::parse(&dup).unwrap_err());
        assert!(e.contains("`a` is used twice"), "{e}");
        let level = SAMPLE.replace("level: full", "level: most");
        assert!(Scenario::parse(&level).is_err());
    }

    #[test]
    fn placeholders() {
        assert_eq!(
            substitute("u=${CLOUD_URL}", "http://x", None).as_deref(),
            Some("u=http://x")
        );
        assert_eq!(substitute("${CLOUD_TOKEN}", "u", None), None);
        assert_eq!(
            substitute("${CLOUD_TOKEN}", "u", Some("t")).as_deref(),
            Some("t")
        );
    }
}
