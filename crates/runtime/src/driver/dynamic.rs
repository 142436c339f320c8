//! The dynamic call, for `wasm-ccm-dev call` and the conformance runner: an export function of
//! the WIT named as `interface.function`, its arguments and its answer as JSON in the model's
//! encoding ([`crate::model`]).
//!
//! It is a table from name to typed call, not a walk over the component's types: every function
//! a driver may export is one of [`FUNCTIONS`], so the dynamic call reads its arguments with serde
//! into the model, makes the same typed call the controllers make (the same caps, redaction and
//! lowered-bytes count) and writes the answer with serde. A function with one parameter takes
//! its value directly; one with several takes an object keyed by parameter name or an array in
//! order; one with none takes `null`, `{}` or `[]`. `load-balancer.ensure` and `update` take the
//! nodes themselves (`{"service": …, "nodes": [node, …]}`), which become a node set of their own
//! that `cluster.nodes` returns during the call.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::handle::Driver;
use crate::call::{CallScope, Outcome};
use crate::error::{CallError, HostError};
use crate::model::json::{from_value, to_value};
use crate::model::types::{Node, Route, Service};

/// An export function of `wasm-ccm:provider@0.2` with its parameters, in the WIT's order and
/// spelling.
struct Function {
    interface: &'static str,
    name: &'static str,
    params: &'static [&'static str],
}

/// Every function a driver may export; a test checks the list against `wit/provider.wit`.
const FUNCTIONS: &[Function] = &[
    f("provider", "info", &[]),
    f("provider", "init", &["ctx", "config", "env"]),
    f("provider", "housekeeping", &[]),
    f("instances", "instance-exists", &["node"]),
    f("instances", "instance-shutdown", &["node"]),
    f("instances", "instance-metadata", &["node"]),
    f("instance-listing", "list-instances", &["page"]),
    f("load-balancer", "get", &["service"]),
    f("load-balancer", "name", &["service"]),
    f("load-balancer", "ensure", &["service", "nodes"]),
    f("load-balancer", "update", &["service", "nodes"]),
    f("load-balancer", "delete", &["service"]),
    f("routes", "list", &[]),
    f("routes", "create", &["name-hint", "route"]),
    f("routes", "delete", &["route"]),
];

const fn f(
    interface: &'static str,
    name: &'static str,
    params: &'static [&'static str],
) -> Function {
    Function {
        interface,
        name,
        params,
    }
}

/// `list<tuple<string, string>>` as a parameter, in the model's encoding of pairs.
#[derive(Default, serde::Deserialize)]
#[serde(transparent)]
struct Pairs(#[serde(with = "crate::model::pairs")] Vec<(String, String)>);

/// `list<u8>` as a parameter: an array of bytes or a string.
#[derive(Default, serde::Deserialize)]
#[serde(transparent)]
struct Bytes(#[serde(deserialize_with = "crate::model::bytes::deserialize")] Vec<u8>);

/// A call's arguments by parameter name.
struct Args(Vec<(&'static str, Value)>);

impl Args {
    /// Matches `input` with `params` (see the module doc).
    fn split(params: &'static [&'static str], input: Value) -> Result<Args, String> {
        let names = || {
            params
                .iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match (params, input) {
            ([], Value::Null) => Ok(Args(Vec::new())),
            ([], Value::Object(m)) if m.is_empty() => Ok(Args(Vec::new())),
            ([], Value::Array(a)) if a.is_empty() => Ok(Args(Vec::new())),
            ([], _) => Err("takes no arguments; pass null or {}".into()),
            ([one], v) => Ok(Args(vec![(*one, v)])),
            (_, Value::Array(items)) => {
                if items.len() != params.len() {
                    return Err(format!(
                        "takes {} arguments ({}), got {}",
                        params.len(),
                        names(),
                        items.len()
                    ));
                }
                Ok(Args(params.iter().copied().zip(items).collect()))
            }
            (_, Value::Object(mut m)) => {
                let args = params
                    .iter()
                    .map(|p| (*p, m.remove(*p).unwrap_or(Value::Null)))
                    .collect();
                if let Some(k) = m.keys().next() {
                    return Err(format!(
                        "has no parameter `{k}`; its parameters are {}",
                        names()
                    ));
                }
                Ok(Args(args))
            }
            (_, _) => Err(format!(
                "takes several arguments: pass an object with {} or an array",
                names()
            )),
        }
    }

    fn value(&self, param: &str) -> &Value {
        self.0
            .iter()
            .find(|(p, _)| *p == param)
            .map_or(&Value::Null, |(_, v)| v)
    }

    /// The argument `param` as a `T`; an error names the parameter and the field.
    fn get<T: DeserializeOwned + Default>(&self, param: &str) -> Result<T, String> {
        from_value(self.value(param), param)
    }

    /// The nodes of `ensure` and `update`: a list of nodes, not the WIT's `node-set` record.
    fn nodes(&self) -> Result<Vec<Node>, String> {
        match self.value("nodes") {
            v @ (Value::Null | Value::Array(_)) => from_value(v, "nodes"),
            _ => Err("`nodes` must be an array of nodes".to_string()),
        }
    }
}

/// The outcome with its answer as JSON.
fn json<T: Serialize>(o: Outcome<T>) -> Outcome<Value> {
    Outcome {
        result: o.result.map(|v| to_value(&v)),
        events: o.events,
        http: o.http,
        elapsed: o.elapsed,
        peak_memory: o.peak_memory,
    }
}

impl Driver {
    /// Calls any export function of the WIT by name (`interface.function`) with JSON arguments,
    /// for the CLI and the conformance runner; see `driver/dynamic.rs` and `crate::model` for
    /// the encoding. The call is the typed one the controllers make, with the same checks.
    pub async fn call_json(&self, target: &str, input: Value, scope: &CallScope) -> Outcome<Value> {
        let refuse = |e: HostError| Outcome::failed(CallError::from(e), Duration::ZERO);
        let Some((iface, function)) = target.split_once('.') else {
            return refuse(HostError::UnknownFunction(format!(
                "`{target}` is not interface.function; e.g. instances.instance-metadata or load-balancer.ensure"
            )));
        };
        let exports = self.inner.compiled.surface.exports;
        let present = match iface {
            "provider" => true,
            "instances" => exports.instances,
            // Optional (0.2.2): a driver without it answers `not-implemented`, as the SDKs'
            // default does.
            "instance-listing" => true,
            "load-balancer" => exports.load_balancer,
            "routes" => exports.routes,
            other => {
                return refuse(HostError::UnknownFunction(format!(
                    "there is no interface `{other}`; the driver exports {}",
                    exports.names().join(", ")
                )));
            }
        };
        if let Err(e) = self.inner.require(present, iface, target) {
            return Outcome::failed(e, Duration::ZERO);
        }
        let Some(f) = FUNCTIONS
            .iter()
            .find(|f| f.interface == iface && f.name == function)
        else {
            let known: Vec<&str> = FUNCTIONS
                .iter()
                .filter(|f| f.interface == iface)
                .map(|f| f.name)
                .collect();
            return refuse(HostError::UnknownFunction(format!(
                "{iface} has no function `{function}`; its functions are {}",
                known.join(", ")
            )));
        };
        let args = match Args::split(f.params, input) {
            Ok(a) => a,
            Err(msg) => return refuse(HostError::BadArguments(format!("{target}: {msg}"))),
        };
        match self.dispatch(f, &args, scope).await {
            Ok(outcome) => outcome,
            Err(msg) => refuse(HostError::BadArguments(format!("{target}: {msg}"))),
        }
    }

    /// The typed call of `f` with `args`; `Err` when an argument cannot be read.
    async fn dispatch(
        &self,
        f: &Function,
        args: &Args,
        scope: &CallScope,
    ) -> Result<Outcome<Value>, String> {
        Ok(match (f.interface, f.name) {
            ("provider", "info") => json(self.info_call(scope).await),
            ("provider", "init") => {
                let (ctx, config) = (args.get("ctx")?, args.get::<Bytes>("config")?);
                let env = args.get::<Pairs>("env")?;
                json(self.init_call(ctx, config.0, env.0, scope).await)
            }
            ("provider", "housekeeping") => json(self.housekeeping(scope).await),
            ("instances", "instance-exists") => {
                json(self.instance_exists(&args.get("node")?, scope).await)
            }
            ("instances", "instance-shutdown") => {
                json(self.instance_shutdown(&args.get("node")?, scope).await)
            }
            ("instances", "instance-metadata") => {
                json(self.instance_metadata(&args.get("node")?, scope).await)
            }
            ("instance-listing", "list-instances") => {
                let page: Option<String> = args.get("page")?;
                json(self.list_instances(page.as_deref(), scope).await)
            }
            ("load-balancer", "get") => {
                json(self.load_balancer_get(&args.get("service")?, scope).await)
            }
            ("load-balancer", "name") => {
                json(self.load_balancer_name(&args.get("service")?, scope).await)
            }
            ("load-balancer", "ensure") => {
                let service: Service = args.get("service")?;
                let nodes = args.nodes()?;
                json(self.load_balancer_ensure(&service, &nodes, scope).await)
            }
            ("load-balancer", "update") => {
                let service: Service = args.get("service")?;
                let nodes = args.nodes()?;
                json(self.load_balancer_update(&service, &nodes, scope).await)
            }
            ("load-balancer", "delete") => json(
                self.load_balancer_delete(&args.get("service")?, scope)
                    .await,
            ),
            ("routes", "list") => json(self.routes_list(scope).await),
            ("routes", "create") => {
                let (hint, route): (String, Route) = (args.get("name-hint")?, args.get("route")?);
                json(self.routes_create(&hint, &route, scope).await)
            }
            ("routes", "delete") => json(self.routes_delete(&args.get("route")?, scope).await),
            (iface, name) => return Err(format!("{iface}.{name} has no typed call")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `name: func(a: …, b: …)` lines of the interfaces a driver exports, from the WIT itself.
    fn wit_functions() -> Vec<(String, String, Vec<String>)> {
        let wit = include_str!("../../../../wit/provider.wit");
        let mut out = Vec::new();
        let mut iface = String::new();
        for line in wit.lines().map(str::trim) {
            if let Some(rest) = line.strip_prefix("interface ") {
                iface = rest.trim_end_matches('{').trim().to_string();
            } else if let Some((name, rest)) = line.split_once(": func(")
                && [
                    "provider",
                    "instances",
                    "instance-listing",
                    "load-balancer",
                    "routes",
                ]
                .contains(&iface.as_str())
            {
                // `a: t, b: list<tuple<x, y>>`: split at the commas outside `<…>`.
                let params = rest.split(')').next().unwrap_or_default();
                let mut depth = 0i32;
                let params = params
                    .split(|c: char| {
                        depth += match c {
                            '<' => 1,
                            '>' => -1,
                            _ => 0,
                        };
                        c == ',' && depth == 0
                    })
                    .filter_map(|p| p.split(':').next())
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(str::to_string)
                    .collect();
                out.push((
                    iface.clone(),
                    name.trim_start_matches('%').to_string(),
                    params,
                ));
            }
        }
        out
    }

    #[test]
    fn the_table_is_the_wits_exports() {
        let wit = wit_functions();
        assert_eq!(wit.len(), FUNCTIONS.len(), "{wit:?}");
        for (iface, name, params) in &wit {
            let Some(f) = FUNCTIONS
                .iter()
                .find(|f| f.interface == iface && f.name == name)
            else {
                panic!("{iface}.{name} is exported by the WIT but not in FUNCTIONS");
            };
            assert_eq!(f.params, params.as_slice(), "{iface}.{name}");
        }
    }

    #[test]
    fn arguments_by_position_by_name_or_alone() {
        let Ok(one) = Args::split(&["node"], serde_json::json!({"name": "a"})) else {
            panic!("one parameter takes its value");
        };
        assert_eq!(one.value("node")["name"], "a");
        let params: &'static [&'static str] = &["service", "nodes"];
        let Ok(by_name) = Args::split(params, serde_json::json!({"nodes": []})) else {
            panic!("a missing parameter is its zero value");
        };
        assert!(by_name.value("service").is_null());
        let e = Args::split(params, serde_json::json!({"servcie": {}}))
            .err()
            .unwrap_or_default();
        assert!(e.contains("no parameter `servcie`"), "{e}");
        let e = Args::split(params, serde_json::json!([{}]))
            .err()
            .unwrap_or_default();
        assert!(e.contains("takes 2 arguments"), "{e}");
        let e = Args::split(&[], serde_json::json!(1))
            .err()
            .unwrap_or_default();
        assert!(e.contains("takes no arguments"), "{e}");
        let e = Args::split(params, serde_json::json!("x"))
            .err()
            .unwrap_or_default();
        assert!(e.contains("an object with `service`, `nodes`"), "{e}");
    }

    #[test]
    fn arguments_read_into_the_model_and_name_the_parameter() {
        let args = Args(vec![
            ("node", serde_json::json!({"name": "a", "ready": false})),
            ("nodes", serde_json::json!([{"name": "b", "colour": "red"}])),
            ("env", serde_json::json!({"A_KEY": "1"})),
            ("config", serde_json::json!("zone: a")),
        ]);
        let node: Node = args.get("node").unwrap_or_default();
        assert_eq!((node.name.as_str(), node.ready), ("a", false));
        let e = args.nodes().err().unwrap_or_default();
        assert!(
            e.starts_with("nodes[0]") && e.contains("unknown field `colour`"),
            "{e}"
        );
        let env: Pairs = args.get("env").unwrap_or_default();
        assert_eq!(env.0, vec![("A_KEY".to_string(), "1".to_string())]);
        let config: Bytes = args.get("config").unwrap_or_default();
        assert_eq!(config.0, b"zone: a");
        let bad = Args(vec![("nodes", serde_json::json!("node-a"))]);
        let e = bad.nodes().err().unwrap_or_default();
        assert!(e.contains("array of nodes"), "{e}");
    }
}
