//! The 24 `k8s.cloudscale.ch/*` Service annotations, with upstream's defaults and parsing.
//!
//! Parsing accepts everything upstream accepts (review 2026-11-23, findings 1-4): JSON keys match
//! as Go's `encoding/json` matches them (exact name first, then case-insensitively), unknown keys
//! are ignored with a warning, `null` lists are empty and floating IPs may be bare addresses.
//!
//! Defaults are frozen (upstream: changing one would silently reconfigure existing clusters).
//! Everything is parsed before the first request, so a bad value changes nothing in the cloud.

use serde::Deserialize;
use wasm_ccm_sdk::types::{ProviderError, Service};

use crate::selector::Selector;

/// The prefix of every annotation.
pub const PREFIX: &str = "k8s.cloudscale.ch/";

/// `loadbalancer-uuid`: written by the driver after creation, used for lookup.
pub const LB_UUID: &str = "k8s.cloudscale.ch/loadbalancer-uuid";
/// `loadbalancer-config-version`: written by the driver (`1`).
pub const LB_CONFIG_VERSION: &str = "k8s.cloudscale.ch/loadbalancer-config-version";
/// `loadbalancer-name`.
pub const LB_NAME: &str = "k8s.cloudscale.ch/loadbalancer-name";
/// `loadbalancer-flavor`.
pub const LB_FLAVOR: &str = "k8s.cloudscale.ch/loadbalancer-flavor";
/// `loadbalancer-zone`: written back by the driver.
pub const LB_ZONE: &str = "k8s.cloudscale.ch/loadbalancer-zone";
/// `loadbalancer-vip-addresses`.
pub const LB_VIP_ADDRESSES: &str = "k8s.cloudscale.ch/loadbalancer-vip-addresses";
/// `loadbalancer-floating-ips`.
pub const LB_FLOATING_IPS: &str = "k8s.cloudscale.ch/loadbalancer-floating-ips";
/// `loadbalancer-pool-algorithm`.
pub const LB_POOL_ALGORITHM: &str = "k8s.cloudscale.ch/loadbalancer-pool-algorithm";
/// `loadbalancer-pool-protocol`.
pub const LB_POOL_PROTOCOL: &str = "k8s.cloudscale.ch/loadbalancer-pool-protocol";
/// `loadbalancer-force-hostname`.
pub const LB_FORCE_HOSTNAME: &str = "k8s.cloudscale.ch/loadbalancer-force-hostname";
/// `loadbalancer-ip-mode`.
pub const LB_IP_MODE: &str = "k8s.cloudscale.ch/loadbalancer-ip-mode";
/// `loadbalancer-health-monitor-delay-s`.
pub const LB_HM_DELAY: &str = "k8s.cloudscale.ch/loadbalancer-health-monitor-delay-s";
/// `loadbalancer-health-monitor-timeout-s`.
pub const LB_HM_TIMEOUT: &str = "k8s.cloudscale.ch/loadbalancer-health-monitor-timeout-s";
/// `loadbalancer-health-monitor-up-threshold`.
pub const LB_HM_UP: &str = "k8s.cloudscale.ch/loadbalancer-health-monitor-up-threshold";
/// `loadbalancer-health-monitor-down-threshold`.
pub const LB_HM_DOWN: &str = "k8s.cloudscale.ch/loadbalancer-health-monitor-down-threshold";
/// `loadbalancer-health-monitor-type`.
pub const LB_HM_TYPE: &str = "k8s.cloudscale.ch/loadbalancer-health-monitor-type";
/// `loadbalancer-health-monitor-http`.
pub const LB_HM_HTTP: &str = "k8s.cloudscale.ch/loadbalancer-health-monitor-http";
/// `loadbalancer-listener-protocol`.
pub const LB_LISTENER_PROTOCOL: &str = "k8s.cloudscale.ch/loadbalancer-listener-protocol";
/// `loadbalancer-listener-allowed-cidrs`.
pub const LB_ALLOWED_CIDRS: &str = "k8s.cloudscale.ch/loadbalancer-listener-allowed-cidrs";
/// `loadbalancer-timeout-client-data-ms`.
pub const LB_TIMEOUT_CLIENT_DATA: &str = "k8s.cloudscale.ch/loadbalancer-timeout-client-data-ms";
/// `loadbalancer-timeout-member-connect-ms`.
pub const LB_TIMEOUT_MEMBER_CONNECT: &str =
    "k8s.cloudscale.ch/loadbalancer-timeout-member-connect-ms";
/// `loadbalancer-timeout-member-data-ms`.
pub const LB_TIMEOUT_MEMBER_DATA: &str = "k8s.cloudscale.ch/loadbalancer-timeout-member-data-ms";
/// `loadbalancer-listener-allowed-subnets`.
pub const LB_ALLOWED_SUBNETS: &str = "k8s.cloudscale.ch/loadbalancer-listener-allowed-subnets";
/// `loadbalancer-node-selector`.
pub const LB_NODE_SELECTOR: &str = "k8s.cloudscale.ch/loadbalancer-node-selector";

/// Every annotation with its frozen default, in upstream's order (the node selector, which has
/// no default, is the 24th key).
pub const ALL: [(&str, &str); 23] = [
    (LB_UUID, ""),
    (LB_CONFIG_VERSION, "1"),
    (LB_NAME, ""),
    (LB_FLAVOR, "lb-standard"),
    (LB_ZONE, ""),
    (LB_VIP_ADDRESSES, "[]"),
    (LB_FLOATING_IPS, "[]"),
    (LB_POOL_ALGORITHM, "round_robin"),
    (LB_POOL_PROTOCOL, "tcp"),
    (LB_FORCE_HOSTNAME, ""),
    (LB_IP_MODE, "Proxy"),
    (LB_HM_DELAY, "2"),
    (LB_HM_TIMEOUT, "1"),
    (LB_HM_UP, "2"),
    (LB_HM_DOWN, "3"),
    (LB_HM_TYPE, "tcp"),
    (LB_HM_HTTP, "{}"),
    (LB_LISTENER_PROTOCOL, "tcp"),
    (LB_ALLOWED_CIDRS, "[]"),
    (LB_TIMEOUT_CLIENT_DATA, "50000"),
    (LB_TIMEOUT_MEMBER_CONNECT, "5000"),
    (LB_TIMEOUT_MEMBER_DATA, "50000"),
    (LB_ALLOWED_SUBNETS, "[]"),
];

/// The annotation `key` on `service`, or its default.
pub fn value<'a>(service: &'a Service, key: &str) -> &'a str {
    service.annotation(key).unwrap_or_else(|| default_of(key))
}

fn default_of(key: &str) -> &'static str {
    ALL.iter().find(|(k, _)| *k == key).map_or("", |(_, d)| *d)
}

/// A VIP the operator asked for: a subnet, optionally a fixed address in it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct VipRequest {
    /// The subnet UUID; empty when not given (upstream sends none then).
    #[serde(default)]
    pub subnet: String,
    /// A fixed address; `""` counts as not given, as upstream.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub address: Option<String>,
}

fn empty_as_none<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let v: Option<String> = Option::deserialize(d)?;
    Ok(v.filter(|s| !s.is_empty()))
}

/// The JSON keys of [`VipRequest`] (the SDK's `VIPAddressRequest` tags).
const VIP_KEYS: &[&str] = &["subnet", "address"];

/// The user's HTTP health check block; missing fields get the API's defaults.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct HttpCheckRequest {
    /// The HTTP method (`GET` when not given).
    pub method: Option<String>,
    /// The path to request (`/` when not given).
    pub url_path: Option<String>,
    /// The HTTP version (`1.1` when not given).
    pub version: Option<String>,
    /// The `Host` header to send; none when not given.
    pub host: Option<String>,
    /// The status codes that count as healthy (`["200"]` when not given).
    pub expected_codes: Option<Vec<String>>,
}

/// The JSON keys of [`HttpCheckRequest`] (the SDK's `LoadBalancerHealthMonitorHTTPRequest` tags).
const HTTP_KEYS: &[&str] = &["method", "url_path", "version", "host", "expected_codes"];

/// `ingress[].ipMode` the operator asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpModeChoice {
    /// `ipMode: Proxy` (the default): in-cluster traffic to the VIP goes through the load balancer.
    Proxy,
    /// `ipMode: VIP`: kube-proxy sends in-cluster traffic to the VIP straight to the endpoints.
    Vip,
}

/// Every annotation of one Service, parsed and validated.
#[derive(Clone, Debug, PartialEq)]
pub struct Annotations {
    /// `loadbalancer-uuid`: the load balancer to look up first; empty when not written yet.
    pub uuid: String,
    /// The load balancer's name: `loadbalancer-name`, or `k8s-service-<uid>` when empty.
    pub name: String,
    /// `loadbalancer-flavor`, `lb-standard` by default; fixed once created.
    pub flavor: String,
    /// `loadbalancer-zone`; empty means no preference (the nodes' common zone, if any).
    pub zone: String,
    /// `loadbalancer-vip-addresses`; empty for the public IPv4 + IPv6 pair.
    pub vip_addresses: Vec<VipRequest>,
    /// `loadbalancer-floating-ips`, each an `address/prefix` network (a bare address gets `/32` or
    /// `/128`).
    pub floating_ips: Vec<String>,
    /// `loadbalancer-pool-algorithm`, `round_robin` by default (passed to the API unchecked).
    pub pool_algorithm: String,
    /// `loadbalancer-pool-protocol`, `tcp` by default (TCP ports only; UDP ports get `udp`).
    pub pool_protocol: String,
    /// `loadbalancer-force-hostname`; when set, the status shows only this hostname.
    pub force_hostname: String,
    /// `loadbalancer-ip-mode`; always `Proxy` when a hostname is forced.
    pub ip_mode: IpModeChoice,
    /// `loadbalancer-health-monitor-delay-s`: seconds between checks; `0` means the API default.
    pub hm_delay_s: u64,
    /// `loadbalancer-health-monitor-timeout-s`: seconds per check; `0` means the API default.
    pub hm_timeout_s: u64,
    /// `loadbalancer-health-monitor-up-threshold`; `0` means the API default.
    pub hm_up_threshold: u64,
    /// `loadbalancer-health-monitor-down-threshold`; `0` means the API default.
    pub hm_down_threshold: u64,
    /// `loadbalancer-health-monitor-type`, `tcp` by default (the monitor is `http` anyway with
    /// traffic policy `Local`).
    pub hm_type: String,
    /// `None` for `{}`.
    pub hm_http: Option<HttpCheckRequest>,
    /// `loadbalancer-listener-protocol`, `tcp` by default (UDP ports get `udp`).
    pub listener_protocol: String,
    /// `loadbalancer-listener-allowed-cidrs`; empty allows every source.
    pub allowed_cidrs: Vec<String>,
    /// `loadbalancer-timeout-client-data-ms`, in milliseconds; `0` means the API default.
    pub timeout_client_data_ms: u64,
    /// `loadbalancer-timeout-member-connect-ms`, in milliseconds; `0` means the API default.
    pub timeout_member_connect_ms: u64,
    /// `loadbalancer-timeout-member-data-ms`, in milliseconds; `0` means the API default.
    pub timeout_member_data_ms: u64,
    /// `loadbalancer-listener-allowed-subnets`: subnet UUIDs members may be in; empty allows all.
    pub allowed_subnets: Vec<String>,
    /// `loadbalancer-node-selector`; `None` (absent or blank) selects every node.
    pub node_selector: Option<Selector>,
    /// What parsing ignored (unknown JSON keys, bare floating IPs), as upstream ignored it; the
    /// driver reports each as a Warning event.
    pub warnings: Vec<String>,
}

impl Annotations {
    /// Parses every annotation of `service`; the first bad one is an `invalid-config` naming it.
    pub fn parse(service: &Service) -> Result<Self, ProviderError> {
        let v = |key| value(service, key);
        let mut warnings = Vec::new();
        Ok(Self {
            uuid: v(LB_UUID).to_string(),
            name: lb_name(service),
            flavor: v(LB_FLAVOR).to_string(),
            zone: v(LB_ZONE).to_string(),
            vip_addresses: vip_addresses(service, &mut warnings)?,
            floating_ips: floating_ips_warn(service, &mut warnings)?,
            pool_algorithm: v(LB_POOL_ALGORITHM).to_string(),
            pool_protocol: v(LB_POOL_PROTOCOL).to_string(),
            force_hostname: v(LB_FORCE_HOSTNAME).to_string(),
            ip_mode: ip_mode(service)?,
            hm_delay_s: int(service, LB_HM_DELAY)?,
            hm_timeout_s: int(service, LB_HM_TIMEOUT)?,
            hm_up_threshold: int(service, LB_HM_UP)?,
            hm_down_threshold: int(service, LB_HM_DOWN)?,
            hm_type: v(LB_HM_TYPE).to_string(),
            hm_http: http_check(service, &mut warnings)?,
            listener_protocol: v(LB_LISTENER_PROTOCOL).to_string(),
            allowed_cidrs: json_list(service, LB_ALLOWED_CIDRS)?,
            timeout_client_data_ms: int(service, LB_TIMEOUT_CLIENT_DATA)?,
            timeout_member_connect_ms: int(service, LB_TIMEOUT_MEMBER_CONNECT)?,
            timeout_member_data_ms: int(service, LB_TIMEOUT_MEMBER_DATA)?,
            allowed_subnets: json_list(service, LB_ALLOWED_SUBNETS)?,
            node_selector: match service.annotation(LB_NODE_SELECTOR).map(str::trim) {
                None | Some("") => None,
                Some(s) => Some(Selector::parse(s).map_err(|e| bad(LB_NODE_SELECTOR, s, &e))?),
            },
            warnings,
        })
    }
}

/// `loadbalancer-ip-mode`: `Proxy` (default) or `VIP`, case-sensitive like upstream. With a
/// `loadbalancer-force-hostname` the status carries no ipMode and upstream never looks at this
/// annotation (its `loadbalancer.go` returns the hostname first; review finding 3), so any value
/// is accepted then.
pub fn ip_mode(service: &Service) -> Result<IpModeChoice, ProviderError> {
    if !value(service, LB_FORCE_HOSTNAME).is_empty() {
        return Ok(IpModeChoice::Proxy);
    }
    match value(service, LB_IP_MODE) {
        "Proxy" => Ok(IpModeChoice::Proxy),
        "VIP" => Ok(IpModeChoice::Vip),
        other => Err(bad(
            LB_IP_MODE,
            other,
            "must be `Proxy` or `VIP` (case-sensitive)",
        )),
    }
}

/// The floating IPs another Service claims, as addresses (unvalidated, like upstream: one bad
/// entry there must not hide a conflict with its good ones, so entries that are no IP are
/// skipped).
pub fn claimed_floating_ips(service: &Service) -> Result<Vec<std::net::IpAddr>, ProviderError> {
    let raw: Vec<String> = json_list(service, LB_FLOATING_IPS)?;
    Ok(raw.iter().filter_map(|s| floating_ip_address(s)).collect())
}

/// The address of a floating IP entry (`5.102.150.123`, `5.102.150.123/32`, `2a06:c01::/56`):
/// the part upstream assigns (`actions.go` takes everything before the first `/`).
pub fn floating_ip_address(entry: &str) -> Option<std::net::IpAddr> {
    entry.split('/').next()?.parse().ok()
}

/// `k8s-service-<uid>`: the load balancer's name unless `loadbalancer-name` says otherwise.
pub fn default_name(service: &Service) -> String {
    format!("k8s-service-{}", service.uid)
}

/// The load balancer name of `service` (the annotation or the default), without parsing the
/// other annotations: `name` must answer even when another annotation is bad.
pub fn lb_name(service: &Service) -> String {
    match value(service, LB_NAME) {
        "" => default_name(service),
        n => n.to_string(),
    }
}

/// The floating IPs `service` asks for, each an `address/prefix` network as the API lists them.
/// A bare address means `/32` or `/128` (upstream passes it on unchanged and assigns its
/// address; review finding 1). Only entries that are no IP network at all are refused.
pub fn floating_ips(service: &Service) -> Result<Vec<String>, ProviderError> {
    floating_ips_warn(service, &mut Vec::new())
}

fn floating_ips_warn(
    service: &Service,
    warnings: &mut Vec<String>,
) -> Result<Vec<String>, ProviderError> {
    let entries: Vec<String> = json_list(service, LB_FLOATING_IPS)?;
    let mut networks = Vec::with_capacity(entries.len());
    for entry in entries {
        let (ip, prefix) = match entry.split_once('/') {
            Some((ip, prefix)) => (ip, Some(prefix)),
            None => (entry.as_str(), None),
        };
        let max = match ip.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V4(_)) => 32,
            Ok(std::net::IpAddr::V6(_)) => 128,
            Err(_) => {
                return Err(bad(
                    LB_FLOATING_IPS,
                    &entry,
                    "not a floating IP such as 5.102.150.123, 5.102.150.123/32 or \
                     2a06:c01::123/128",
                ));
            }
        };
        match prefix {
            None => {
                warnings.push(format!(
                    "{LB_FLOATING_IPS}: {entry:?} has no prefix length, read as {entry}/{max}"
                ));
                networks.push(format!("{entry}/{max}"));
            }
            Some(p) if p.parse::<u8>().is_ok_and(|p| p <= max) => networks.push(entry),
            Some(_) => {
                return Err(bad(
                    LB_FLOATING_IPS,
                    &entry,
                    &format!("the prefix length must be 0 to {max}"),
                ));
            }
        }
    }
    Ok(networks)
}

fn bad(key: &str, value: &str, why: &str) -> ProviderError {
    ProviderError::invalid_config(format!("annotation {key}={value:?}: {why}"))
}

/// A JSON list annotation: blank after trimming spaces is an empty list, like upstream, and so is
/// `null` (Go's `json.Unmarshal("null", &list)` leaves the list empty; review finding 4).
fn json_list<T: for<'de> Deserialize<'de>>(
    service: &Service,
    key: &str,
) -> Result<Vec<T>, ProviderError> {
    let raw = value(service, key);
    if raw.trim_matches(' ').is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_str::<Option<Vec<T>>>(raw)
        .map(Option::unwrap_or_default)
        .map_err(|e| bad(key, raw, &format!("not a valid JSON list: {e}")))
}

/// `loadbalancer-vip-addresses`: a JSON list of objects whose keys match as Go's decoder
/// matches them ([`go_object`]).
fn vip_addresses(
    service: &Service,
    warnings: &mut Vec<String>,
) -> Result<Vec<VipRequest>, ProviderError> {
    let items: Vec<Option<Ordered>> = json_list(service, LB_VIP_ADDRESSES)?;
    let raw = value(service, LB_VIP_ADDRESSES);
    items
        .into_iter()
        .map(|item| {
            let object = go_object(item, VIP_KEYS, LB_VIP_ADDRESSES, warnings);
            serde_json::from_value(object).map_err(|e| {
                bad(
                    LB_VIP_ADDRESSES,
                    raw,
                    &format!("not a JSON list of {{subnet, address}} objects: {e}"),
                )
            })
        })
        .collect()
}

/// A JSON object decoded as Go's `encoding/json` decodes into a struct (upstream's
/// `reconcile.go` uses `json.Unmarshal`; review finding 2): each key goes to the field of the
/// same name, else to one whose name matches case-insensitively (Unicode simple folding, so the
/// Kelvin sign matches `k`); a later key overwrites an earlier one for the same field; unknown
/// keys are ignored, and reported in `warnings`. `null` (`None`) is an empty object, as in Go.
fn go_object(
    object: Option<Ordered>,
    fields: &[&str],
    annotation: &str,
    warnings: &mut Vec<String>,
) -> serde_json::Value {
    let entries = object.map_or_else(Vec::new, |o| o.0);
    let mut out = serde_json::Map::new();
    for (key, v) in entries {
        let field = fields
            .iter()
            .find(|f| **f == key)
            .or_else(|| fields.iter().find(|f| fold_eq(f, &key)));
        match field {
            Some(f) => {
                out.insert((*f).to_string(), v);
            }
            None => warnings.push(format!(
                "{annotation}: unknown key {key:?} ignored, as upstream ignores it (known keys: {})",
                fields.join(", ")
            )),
        }
    }
    serde_json::Value::Object(out)
}

/// Whether `key` equals the ASCII field name `field` under Unicode simple case folding, the
/// rule Go's decoder applies (`ſ` matches `s`, `K` (Kelvin) matches `k`).
fn fold_eq(field: &str, key: &str) -> bool {
    let mut key_chars = key.chars();
    for f in field.chars() {
        let Some(k) = key_chars.next() else {
            return false;
        };
        let same = k == f
            || k.to_lowercase().eq(f.to_lowercase())
            || k.to_uppercase().eq(f.to_uppercase());
        if !same {
            return false;
        }
    }
    key_chars.next().is_none()
}

/// A JSON object's entries in document order, duplicates kept.
struct Ordered(Vec<(String, serde_json::Value)>);

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Ordered, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Ordered(entries))
            }
        }
        d.deserialize_map(Visitor)
    }
}

/// An integer annotation. Negative values are refused here (the API would refuse them later,
/// after part of the load balancer was changed).
fn int(service: &Service, key: &str) -> Result<u64, ProviderError> {
    let raw = value(service, key);
    raw.parse::<i64>()
        .map_err(|_| bad(key, raw, "not an integer"))
        .and_then(|n| u64::try_from(n).map_err(|_| bad(key, raw, "must not be negative")))
}

/// The HTTP check block; exactly `{}` (the default) means none, as upstream. Empty strings and
/// lists count as not given, so they get the API's defaults instead of a diff that never settles.
fn http_check(
    service: &Service,
    warnings: &mut Vec<String>,
) -> Result<Option<HttpCheckRequest>, ProviderError> {
    let raw = value(service, LB_HM_HTTP);
    if raw == "{}" {
        return Ok(None);
    }
    let what = "not a JSON object with method, url_path, version, host, expected_codes";
    let object: Option<Ordered> =
        serde_json::from_str(raw).map_err(|e| bad(LB_HM_HTTP, raw, &format!("{what}: {e}")))?;
    let parsed: HttpCheckRequest =
        serde_json::from_value(go_object(object, HTTP_KEYS, LB_HM_HTTP, warnings))
            .map_err(|e| bad(LB_HM_HTTP, raw, &format!("{what}: {e}")))?;
    let text = |v: Option<String>| v.filter(|s| !s.is_empty());
    Ok(Some(HttpCheckRequest {
        method: text(parsed.method),
        url_path: text(parsed.url_path),
        version: text(parsed.version),
        host: text(parsed.host),
        expected_codes: parsed.expected_codes.filter(|c| !c.is_empty()),
    }))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use wasm_ccm_sdk::types::{SessionAffinity, TrafficPolicy};

    pub(crate) fn service(annotations: &[(&str, &str)]) -> Service {
        Service {
            namespace: "default".into(),
            name: "web".into(),
            uid: "6a1c0c4e-3d2b-4f3e-9a7c-1b2c3d4e5f60".into(),
            labels: vec![],
            annotations: annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ports: vec![],
            external_traffic_policy: TrafficPolicy::Cluster,
            health_check_node_port: 0,
            load_balancer_ip: None,
            load_balancer_source_ranges: vec![],
            session_affinity: SessionAffinity::None,
            session_affinity_timeout: None,
            ip_families: vec![],
            load_balancer_class: None,
            ingress: vec![],
        }
    }

    #[test]
    fn defaults_are_upstreams() {
        let a = Annotations::parse(&service(&[])).unwrap();
        assert_eq!(a.name, "k8s-service-6a1c0c4e-3d2b-4f3e-9a7c-1b2c3d4e5f60");
        assert_eq!(a.flavor, "lb-standard");
        assert_eq!(a.zone, "");
        assert_eq!(a.pool_algorithm, "round_robin");
        assert_eq!(a.pool_protocol, "tcp");
        assert_eq!(a.ip_mode, IpModeChoice::Proxy);
        assert_eq!(
            (
                a.hm_delay_s,
                a.hm_timeout_s,
                a.hm_up_threshold,
                a.hm_down_threshold
            ),
            (2, 1, 2, 3)
        );
        assert_eq!(a.hm_type, "tcp");
        assert_eq!(a.hm_http, None);
        assert_eq!(a.listener_protocol, "tcp");
        assert!(a.allowed_cidrs.is_empty() && a.allowed_subnets.is_empty());
        assert!(a.vip_addresses.is_empty() && a.floating_ips.is_empty());
        assert_eq!(
            (
                a.timeout_client_data_ms,
                a.timeout_member_connect_ms,
                a.timeout_member_data_ms
            ),
            (50_000, 5_000, 50_000)
        );
        assert_eq!(a.node_selector, None);
        assert_eq!(ALL.len(), 23);
        assert!(ALL.iter().all(|(k, _)| k.starts_with(PREFIX)));
    }

    #[test]
    fn values_parse() {
        let a = Annotations::parse(&service(&[
            (LB_NAME, "my-lb"),
            (
                LB_VIP_ADDRESSES,
                r#"[{"subnet": "s1", "address": "10.0.0.5"}, {"subnet": "s2"}]"#,
            ),
            (LB_FLOATING_IPS, r#"["5.102.150.123/32"]"#),
            (LB_ALLOWED_CIDRS, "  "),
            (LB_IP_MODE, "VIP"),
            (LB_HM_HTTP, r#"{"url_path": "/healthz"}"#),
            (LB_TIMEOUT_MEMBER_DATA, "60000"),
            (LB_NODE_SELECTOR, "role=lb"),
        ]))
        .unwrap();
        assert_eq!(a.name, "my-lb");
        assert_eq!(
            a.vip_addresses,
            vec![
                VipRequest {
                    subnet: "s1".into(),
                    address: Some("10.0.0.5".into())
                },
                VipRequest {
                    subnet: "s2".into(),
                    address: None
                }
            ]
        );
        assert_eq!(a.floating_ips, vec!["5.102.150.123/32"]);
        assert!(a.allowed_cidrs.is_empty());
        assert_eq!(a.ip_mode, IpModeChoice::Vip);
        assert_eq!(a.hm_http.unwrap().url_path.as_deref(), Some("/healthz"));
        assert_eq!(a.timeout_member_data_ms, 60_000);
        assert!(a.node_selector.is_some());
        // `{}` means "no HTTP block", as upstream.
        let a = Annotations::parse(&service(&[(LB_HM_HTTP, "{}")])).unwrap();
        assert_eq!(a.hm_http, None);
    }

    #[test]
    fn bad_values_name_the_annotation() {
        for (key, value) in [
            (LB_IP_MODE, "proxy"),
            (LB_HM_DELAY, "two"),
            (LB_TIMEOUT_CLIENT_DATA, "-1"),
            (LB_FLOATING_IPS, "5.102.150.123/32"),
            (LB_FLOATING_IPS, r#"["floating.example"]"#),
            (LB_VIP_ADDRESSES, r#"[{"subnet": 1}]"#),
            (LB_ALLOWED_CIDRS, "[1, 2]"),
            (LB_HM_HTTP, r#"{"method": 1}"#),
            (LB_HM_HTTP, "[]"),
            (LB_VIP_ADDRESSES, r#"["s1"]"#),
            (LB_HM_HTTP, ""),
            (LB_FLOATING_IPS, r#"["5.102.150.123/64"]"#),
            (LB_NODE_SELECTOR, "a in b"),
        ] {
            let e = Annotations::parse(&service(&[(key, value)])).unwrap_err();
            assert!(
                matches!(&e, ProviderError::InvalidConfig(m) if m.contains(key)),
                "{key}={value}: {e}"
            );
        }
    }

    #[test]
    fn bare_floating_ips_get_a_prefix_and_a_warning() {
        let a = Annotations::parse(&service(&[(
            LB_FLOATING_IPS,
            r#"["5.102.150.123", "2a06:c01::123", "5.102.150.124/32", "2a06:c01:1::/56"]"#,
        )]))
        .unwrap();
        assert_eq!(
            a.floating_ips,
            vec![
                "5.102.150.123/32",
                "2a06:c01::123/128",
                "5.102.150.124/32",
                "2a06:c01:1::/56"
            ]
        );
        assert_eq!(a.warnings.len(), 2, "{:?}", a.warnings);
        assert!(a.warnings[0].contains("5.102.150.123/32"));
        assert_eq!(
            floating_ip_address("2a06:c01:1::/56"),
            Some("2a06:c01:1::".parse().unwrap())
        );
        assert_eq!(floating_ip_address("nope"), None);
    }

    #[test]
    fn null_floating_ips_are_empty() {
        for raw in ["null", " null ", "[]", " "] {
            let a = Annotations::parse(&service(&[(LB_FLOATING_IPS, raw)])).unwrap();
            assert!(a.floating_ips.is_empty(), "{raw}");
        }
        assert!(
            claimed_floating_ips(&service(&[(LB_FLOATING_IPS, "null")]))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn json_keys_match_as_go_decodes_them() {
        let a = Annotations::parse(&service(&[
            (
                LB_HM_HTTP,
                r#"{"Method": "HEAD", "URL_PATH": "/x", "path": "/y", "expected_codes": ["204"]}"#,
            ),
            (
                LB_VIP_ADDRESSES,
                r#"[{"Subnet": "s1", "ADDRESS": "10.0.0.5", "extra": true}, null]"#,
            ),
        ]))
        .unwrap();
        let http = a.hm_http.unwrap();
        assert_eq!(http.method.as_deref(), Some("HEAD"));
        assert_eq!(http.url_path.as_deref(), Some("/x"));
        assert_eq!(http.expected_codes, Some(vec!["204".to_string()]));
        assert_eq!(
            a.vip_addresses,
            vec![
                VipRequest {
                    subnet: "s1".into(),
                    address: Some("10.0.0.5".into())
                },
                VipRequest::default()
            ]
        );
        assert_eq!(a.warnings.len(), 2, "{:?}", a.warnings);
        assert!(a.warnings.iter().any(|w| w.contains("\"path\"")));
        assert!(a.warnings.iter().any(|w| w.contains("\"extra\"")));
        // The last of two keys for one field wins, as in Go; the Kelvin sign folds to `k`.
        let a = Annotations::parse(&service(&[(
            LB_HM_HTTP,
            r#"{"method": "GET", "METHOD": "HEAD", "\u212aeep": 1}"#,
        )]))
        .unwrap();
        assert_eq!(a.hm_http.unwrap().method.as_deref(), Some("HEAD"));
        assert!(fold_eq("host", "HOST") && fold_eq("host", "Host"));
        assert!(fold_eq("key", "\u{212a}EY") && fold_eq("subnet", "\u{17f}ubnet"));
        assert!(!fold_eq("host", "hosts") && !fold_eq("host", "hos"));
        // An exact and a folded key both set the field; the later one wins, as in Go.
        let a = Annotations::parse(&service(&[(
            LB_VIP_ADDRESSES,
            r#"[{"subnet": "exact", "SUBNET": "folded"}]"#,
        )]))
        .unwrap();
        assert_eq!(a.vip_addresses[0].subnet, "folded");
    }

    #[test]
    fn force_hostname_accepts_any_ip_mode() {
        let s = service(&[(LB_FORCE_HOSTNAME, "lb.example.org"), (LB_IP_MODE, "proxy")]);
        let a = Annotations::parse(&s).unwrap();
        assert_eq!(a.force_hostname, "lb.example.org");
        assert!(ip_mode(&s).is_ok());
        assert!(Annotations::parse(&service(&[(LB_IP_MODE, "proxy")])).is_err());
    }
}
