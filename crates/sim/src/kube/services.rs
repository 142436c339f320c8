//! Service defaulting and allocation: cluster IPs, node ports, health-check node ports.
//!
//! Modest on purpose: single-stack IPv4, the defaults controllers read, and the validation errors
//! a controller can provoke (a taken node port, a node port on a ClusterIP Service). Node ports
//! come from the simulator's NodePort range ([`PortRange`], `--service-node-port-range`).

use rand::Rng;
use serde_json::{Map, Value, json};

use super::allocated::Allocated;
use super::error::ApiError;
use super::node_ports::PortRange;
use super::obj_key::ObjKey;
use super::resources::RESOURCES;
use super::resources::SERVICES;
use super::validation::{
    Errors, IP_FMT, decode_error, dns1123_label, dns1123_subdomain, drop_empty, parse_cidr_sloppy,
    parse_ip_sloppy, qualified_name, show,
};

const TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
/// `supportedPortProtocols` (pkg/apis/core/validation/validation.go), sorted as listed there.
const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
/// `supportedLoadBalancerIPMode` (same file).
const IP_MODES: &[&str] = &["VIP", "Proxy"];

/// Defaults and allocates the fields of a Service being created (`old` is `None`) or updated,
/// its node ports from `node_ports`; `allocated` is what the stored Services hold.
pub(crate) fn admit(
    allocated: &Allocated,
    key: &ObjKey,
    old: Option<&Value>,
    new: &mut Value,
    node_ports: &PortRange,
) -> Result<(), ApiError> {
    let rt = &RESOURCES[SERVICES];
    let invalid = |msg: String| ApiError::invalid(rt, &key.name, msg);
    let others = allocated.except(old);
    let old_spec = old.and_then(|o| o.get("spec")).and_then(Value::as_object);
    let old_str = |f: &str| old_spec.and_then(|s| s.get(f)).and_then(Value::as_str);

    let Some(obj) = new.as_object_mut() else {
        return Err(ApiError::bad_request("a Service must be a JSON object"));
    };
    let spec = obj
        .entry("spec")
        .or_insert_with(|| Value::Object(Map::new()));
    if !spec.is_object() {
        return Err(invalid("spec: Invalid value: must be an object".into()));
    }
    let Some(spec) = spec.as_object_mut() else {
        return Ok(());
    };

    let ty = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_string();
    if !TYPES.contains(&ty.as_str()) {
        return Err(invalid(format!(
            "spec.type: Unsupported value: \"{ty}\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\""
        )));
    }
    spec.insert("type".into(), json!(ty));
    spec.entry("sessionAffinity").or_insert(json!("None"));
    let external_name = ty == "ExternalName";
    let load_balancer = ty == "LoadBalancer";
    let mut errs = Errors::default();
    let old_type = old_str("type").unwrap_or("ClusterIP");
    validate_spec_fields(spec, old_spec, old_type, load_balancer, &mut errs);

    // Cluster IP: keep the old one, refuse a change, allocate when absent.
    let requested_ip = spec
        .get("clusterIP")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let old_ip = old_str("clusterIP").filter(|s| !s.is_empty());
    let cluster_ip = match (requested_ip, old_ip) {
        (Some(ip), Some(old)) if ip != old && !external_name => {
            return Err(invalid(format!(
                "spec.clusterIPs[0]: Invalid value: [\"{ip}\"]: may not change once set"
            )));
        }
        (Some(ip), _) => Some(ip),
        (None, Some(old)) if !external_name => Some(old.to_string()),
        (None, _) if external_name => None,
        (None, _) => Some(
            allocate_ip(|ip| others.has_ip(ip))
                .ok_or_else(|| invalid("spec.clusterIPs: Internal error: range is full".into()))?,
        ),
    };
    let headless = cluster_ip.as_deref() == Some("None");
    match &cluster_ip {
        Some(ip) => {
            if old.is_none() && !headless && others.has_ip(ip) {
                return Err(invalid(format!(
                    "spec.clusterIPs: Invalid value: []string{{\"{ip}\"}}: failed to allocate IP {ip}: provided IP is already allocated"
                )));
            }
            spec.insert("clusterIP".into(), json!(ip));
            spec.insert("clusterIPs".into(), json!([ip]));
            spec.entry("ipFamilies").or_insert(json!(["IPv4"]));
            spec.entry("ipFamilyPolicy").or_insert(json!("SingleStack"));
            spec.entry("internalTrafficPolicy")
                .or_insert(json!("Cluster"));
        }
        None => {
            spec.remove("clusterIP");
            spec.remove("clusterIPs");
        }
    }

    // Node ports come from one range shared by every Service's ports and health checks: a port
    // is taken when another Service holds it or this one placed it already.
    let mut own: Vec<u64> = Vec::new();
    let taken = |p: u64, own: &[u64]| others.has_port(p) || own.contains(&p);
    allocate_load_balancer_node_ports(spec, old_spec, old_type, load_balancer, &mut errs)?;
    // `shouldAllocateNodePorts` (pkg/registry/core/service/storage/alloc.go): NodePort
    // Services, and LoadBalancer Services unless allocateLoadBalancerNodePorts is false. A
    // LoadBalancer Service without them still keeps the node ports it asks for by number.
    let allocate = ty == "NodePort"
        || (load_balancer
            && spec
                .get("allocateLoadBalancerNodePorts")
                .and_then(Value::as_bool)
                != Some(false));
    let old_ports: Vec<&Value> = old_spec
        .and_then(|s| s.get("ports"))
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let ports = spec.entry("ports").or_insert_with(|| json!([]));
    let Some(ports) = ports.as_array_mut() else {
        return Err(invalid("spec.ports: Invalid value: must be a list".into()));
    };
    if ports.is_empty() && !external_name && !headless {
        return Err(invalid("spec.ports: Required value".into()));
    }
    for (i, port) in ports.iter_mut().enumerate() {
        let Some(port) = port.as_object_mut() else {
            return Err(invalid(format!(
                "spec.ports[{i}]: Invalid value: must be an object"
            )));
        };
        let number = port.get("port").and_then(Value::as_u64);
        let Some(number) = number.filter(|n| (1..=65535).contains(n)) else {
            return Err(invalid(format!(
                "spec.ports[{i}].port: Required value: must be between 1 and 65535, inclusive"
            )));
        };
        port.entry("protocol").or_insert(json!("TCP"));
        port.entry("targetPort").or_insert(json!(number));
        let protocol = port.get("protocol").cloned();
        let previous = old_ports
            .iter()
            .find(|p| {
                p.get("port").and_then(Value::as_u64) == Some(number)
                    && p.get("protocol").cloned().or(Some(json!("TCP"))) == protocol
            })
            .and_then(|p| p.get("nodePort"))
            .and_then(Value::as_u64);
        match port.get("nodePort").and_then(Value::as_u64) {
            Some(np) if !allocate && !load_balancer => {
                // Left over from a type change away from NodePort/LoadBalancer: dropped, like the
                // apiserver does when the client did not touch it.
                if previous == Some(np) {
                    port.remove("nodePort");
                } else {
                    return Err(invalid(format!(
                        "spec.ports[{i}].nodePort: Forbidden: may not be used when `type` is '{ty}'"
                    )));
                }
            }
            Some(np) => {
                check_node_port(node_ports, np, |p| taken(p, &own), previous).map_err(|why| {
                    invalid(format!(
                        "spec.ports[{i}].nodePort: Invalid value: {np}: {why}"
                    ))
                })?;
                own.push(np);
            }
            None if allocate => {
                let np = match previous.filter(|p| !taken(*p, &own)) {
                    Some(p) => p,
                    // `initNodePorts`/`updateNodePorts` (alloc.go): a full range is an internal
                    // error, not a field error.
                    None => node_ports.allocate(|p| taken(p, &own)).ok_or_else(|| {
                        ApiError::new(
                            500,
                            "Internal error occurred: failed to allocate a nodePort: range is full",
                        )
                    })?,
                };
                own.push(np);
                port.insert("nodePort".into(), json!(np));
            }
            None => {}
        }
    }

    if ty == "NodePort" || load_balancer {
        let policy = spec
            .entry("externalTrafficPolicy")
            .or_insert(json!("Cluster"));
        if policy != "Cluster" && policy != "Local" {
            return Err(invalid(format!(
                "spec.externalTrafficPolicy: Unsupported value: {policy}: supported values: \"Cluster\", \"Local\""
            )));
        }
    } else {
        spec.remove("externalTrafficPolicy");
    }
    let wants_health_check =
        load_balancer && spec.get("externalTrafficPolicy").and_then(Value::as_str) == Some("Local");
    let old_hc = old_spec
        .and_then(|s| s.get("healthCheckNodePort"))
        .and_then(Value::as_u64);
    match spec.get("healthCheckNodePort").and_then(Value::as_u64) {
        Some(hc) if wants_health_check => {
            // `allocHealthCheckNodePort` (alloc.go): the allocator's refusal, wrapped in an
            // internal error by its callers.
            check_node_port(node_ports, hc, |p| taken(p, &own), old_hc).map_err(|why| {
                ApiError::new(
                    500,
                    format!(
                        "Internal error occurred: failed to allocate requested HealthCheck NodePort {hc}: {why}"
                    ),
                )
            })?;
        }
        None if wants_health_check => {
            let hc = match old_hc.filter(|p| !taken(*p, &own)) {
                Some(p) => p,
                // Upstream prints the port it failed to get, which is 0 then.
                None => node_ports.allocate(|p| taken(p, &own)).ok_or_else(|| {
                    ApiError::new(
                        500,
                        "Internal error occurred: failed to allocate a HealthCheck NodePort 0: range is full",
                    )
                })?,
            };
            spec.insert("healthCheckNodePort".into(), json!(hc));
        }
        _ => {
            spec.remove("healthCheckNodePort");
        }
    }
    errs.into_result(rt, &key.name)
}

/// `spec.allocateLoadBalancerNodePorts`: a bool (else the JSON decoder's 400);
/// `SetDefaults_Service` (pkg/apis/core/v1/defaults.go) sets it to true on LoadBalancer Services
/// that leave it out; `ValidateService` (pkg/apis/core/validation/validation.go) forbids it on
/// other types; `dropTypeDependentFields` (pkg/registry/core/service/strategy.go) first clears it
/// when a LoadBalancer Service changes type and the field kept its value.
fn allocate_load_balancer_node_ports(
    spec: &mut Map<String, Value>,
    old_spec: Option<&Map<String, Value>>,
    old_type: &str,
    load_balancer: bool,
    errs: &mut Errors,
) -> Result<(), ApiError> {
    const FIELD: &str = "allocateLoadBalancerNodePorts";
    let value = match spec.get(FIELD) {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(other) => {
            return Err(decode_error(
                "Service",
                &format!("spec.{FIELD}"),
                other,
                "bool",
            ));
        }
    };
    if load_balancer {
        spec.insert(FIELD.into(), json!(value.unwrap_or(true)));
        return Ok(());
    }
    let old = old_spec.and_then(|s| s.get(FIELD)).and_then(Value::as_bool);
    match value {
        None => {
            spec.remove(FIELD);
        }
        Some(v) if old_type == "LoadBalancer" && old == Some(v) => {
            spec.remove(FIELD);
        }
        Some(_) => errs.forbidden(
            &format!("spec.{FIELD}"),
            "may only be used when `type` is 'LoadBalancer'",
        ),
    }
    Ok(())
}

/// The Service spec rules of `ValidateService`/`ValidateServiceUpdate`
/// (pkg/apis/core/validation/validation.go) that the allocation code above does not cover.
fn validate_spec_fields(
    spec: &mut Map<String, Value>,
    old_spec: Option<&Map<String, Value>>,
    old_type: &str,
    load_balancer: bool,
    errs: &mut Errors,
) {
    // validateLoadBalancerClassField: immutable while the Service stays a LoadBalancer, a
    // qualified name, and only on LoadBalancer Services. dropTypeDependentFields
    // (pkg/registry/core/service/storage/storage.go) clears an unchanged class on a type change.
    let old_class = old_spec
        .and_then(|s| s.get("loadBalancerClass"))
        .filter(|v| !v.is_null());
    let class = spec
        .get("loadBalancerClass")
        .filter(|v| !v.is_null())
        .cloned();
    if old_spec.is_some()
        && old_type == "LoadBalancer"
        && load_balancer
        && class.as_ref() != old_class
    {
        errs.invalid(
            "spec.loadBalancerClass",
            &class.as_ref().map_or("null".into(), show),
            "may not change once set",
        );
    }
    match &class {
        Some(Value::String(c)) if load_balancer => {
            for msg in qualified_name(c) {
                errs.invalid("spec.loadBalancerClass", &format!("{c:?}"), &msg);
            }
        }
        Some(c) if !load_balancer => {
            if Some(c) == old_class {
                spec.remove("loadBalancerClass");
            } else {
                errs.forbidden(
                    "spec.loadBalancerClass",
                    "may only be used when `type` is 'LoadBalancer'",
                );
            }
        }
        Some(other) if !other.is_string() => {
            errs.invalid("spec.loadBalancerClass", &show(other), "must be a string")
        }
        _ => {}
    }
    // ValidateService: spec.loadBalancerIP is an IP (IsValidIPForLegacyField).
    if let Some(ip) = spec.get("loadBalancerIP").and_then(Value::as_str)
        && !ip.is_empty()
        && parse_ip_sloppy(ip).is_none()
    {
        errs.invalid("spec.loadBalancerIP", &format!("{ip:?}"), IP_FMT);
    }
    // ValidateService: source ranges only on LoadBalancer Services, each a CIDR. The field
    // path is spelled `LoadBalancerSourceRanges` upstream.
    if let Some(ranges) = spec
        .get("loadBalancerSourceRanges")
        .and_then(Value::as_array)
        && !ranges.is_empty()
    {
        let path = "spec.LoadBalancerSourceRanges";
        if !load_balancer {
            errs.forbidden(path, "may only be used when `type` is 'LoadBalancer'");
        }
        for r in ranges {
            let text = r.as_str().unwrap_or("");
            if !parse_cidr_sloppy(text.trim()) {
                errs.invalid(
                    path,
                    &show(r),
                    "must be a list of IP ranges. For example, 10.240.0.0/24,10.250.0.0/24 ",
                );
            }
        }
    }
    // validateServicePort: names (required with several ports, DNS labels, unique), protocols,
    // target ports; then ValidateService's duplicate (protocol, port) check.
    let Some(ports) = spec.get("ports").and_then(Value::as_array) else {
        return;
    };
    let require_name = ports.len() > 1;
    let mut names: Vec<&str> = Vec::new();
    let mut pairs: Vec<(String, u64)> = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let path = format!("spec.ports[{i}]");
        let name = port.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            if require_name {
                errs.required(&format!("{path}.name"), "");
            }
        } else {
            for msg in dns1123_label(name) {
                errs.invalid(&format!("{path}.name"), &format!("{name:?}"), &msg);
            }
            if names.contains(&name) {
                errs.duplicate(&format!("{path}.name"), &format!("{name:?}"));
            }
            names.push(name);
        }
        let protocol = port
            .get("protocol")
            .and_then(Value::as_str)
            .unwrap_or("TCP");
        if !PROTOCOLS.contains(&protocol) {
            errs.not_supported(
                &format!("{path}.protocol"),
                &format!("{protocol:?}"),
                PROTOCOLS,
            );
        }
        match port.get("targetPort") {
            Some(Value::Number(n)) if n.as_u64().is_some_and(|n| (1..=65535).contains(&n)) => {}
            Some(Value::String(s)) if !s.is_empty() && port_name_ok(s) => {}
            Some(Value::Number(n)) if n.as_u64() == Some(0) => {}
            Some(other) => errs.invalid(
                &format!("{path}.targetPort"),
                &show(other),
                "must be between 1 and 65535, inclusive",
            ),
            None => {}
        }
        let number = port.get("port").and_then(Value::as_u64).unwrap_or(0);
        let pair = (protocol.to_string(), number);
        if pairs.contains(&pair) {
            errs.duplicate(
                &path,
                &format!("core.ServicePort{{Name:\"\", Protocol:{protocol:?}, AppProtocol:(*string)(nil), Port:{number}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}"),
            );
        }
        pairs.push(pair);
    }
}

/// `IsValidPortName` (k8s.io/apimachinery/pkg/util/validation/validation.go).
fn port_name_ok(s: &str) -> bool {
    s.len() <= 15
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.bytes().any(|b| b.is_ascii_lowercase())
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.contains("--")
}

/// The server side of a Service's `status.loadBalancer` on every write:
/// - `svcStrategy.PrepareForUpdate` (pkg/registry/core/service/strategy.go) clears the
///   load-balancer status when the type is no longer LoadBalancer (main resource only; the
///   status subresource keeps the spec and is validated instead);
/// - `SetDefaults_Service` (pkg/apis/core/v1/defaults.go) defaults `ipMode: VIP` on ingress
///   entries that have an `ip`, for LoadBalancer Services (LoadBalancerIPMode, GA in 1.32);
/// - an empty `ingress` list is not kept (`omitempty`).
pub(crate) fn prepare_status(new: &mut Value, clear_when_not_lb: bool) {
    let load_balancer = new
        .get("spec")
        .and_then(|s| s.get("type"))
        .and_then(Value::as_str)
        == Some("LoadBalancer");
    let Some(obj) = new.as_object_mut() else {
        return;
    };
    let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    if clear_when_not_lb && !load_balancer {
        status.insert("loadBalancer".into(), json!({}));
    }
    let Some(lb) = status
        .get_mut("loadBalancer")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if load_balancer && let Some(ingress) = lb.get_mut("ingress").and_then(Value::as_array_mut) {
        for entry in ingress.iter_mut().filter_map(Value::as_object_mut) {
            let has_ip = entry
                .get("ip")
                .and_then(Value::as_str)
                .is_some_and(|ip| !ip.is_empty());
            if has_ip && entry.get("ipMode").is_none_or(Value::is_null) {
                entry.insert("ipMode".into(), json!("VIP"));
            }
        }
    }
    drop_empty(lb, "ingress");
}

/// `ValidateLoadBalancerStatus` (pkg/apis/core/validation/validation.go), as
/// `ValidateServiceStatusUpdate` calls it: ingress only on LoadBalancer Services; each `ip` an IP
/// address; `ipMode` only with an `ip` and one of VIP/Proxy; each `hostname` a DNS subdomain
/// and not an IP.
pub(crate) fn validate_status(new: &Value) -> Vec<String> {
    let mut errs = Errors::default();
    let load_balancer = new
        .get("spec")
        .and_then(|s| s.get("type"))
        .and_then(Value::as_str)
        == Some("LoadBalancer");
    let ingress = new
        .get("status")
        .and_then(|s| s.get("loadBalancer"))
        .and_then(|l| l.get("ingress"));
    let path = "status.loadBalancer.ingress";
    let ingress = match ingress {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Array(a)) => a,
        Some(other) => {
            errs.invalid(path, &show(other), "must be a list");
            return errs.0;
        }
    };
    if !load_balancer && !ingress.is_empty() {
        errs.forbidden(path, "may only be used when `spec.type` is 'LoadBalancer'");
        return errs.0;
    }
    for (i, entry) in ingress.iter().enumerate() {
        let idx = format!("{path}[{i}]");
        let ip = entry.get("ip").and_then(Value::as_str).unwrap_or("");
        if !ip.is_empty() && parse_ip_sloppy(ip).is_none() {
            errs.invalid(&format!("{idx}.ip"), &format!("{ip:?}"), IP_FMT);
        }
        match entry.get("ipMode").filter(|m| !m.is_null()) {
            None if !ip.is_empty() => {
                errs.required(
                    &format!("{idx}.ipMode"),
                    "must be specified when `ip` is set",
                );
            }
            Some(_) if ip.is_empty() => {
                errs.forbidden(
                    &format!("{idx}.ipMode"),
                    "may not be specified when `ip` is not set",
                );
            }
            Some(mode) if mode.as_str().is_none_or(|m| !IP_MODES.contains(&m)) => {
                errs.not_supported(&format!("{idx}.ipMode"), &show(mode), IP_MODES);
            }
            _ => {}
        }
        let hostname = entry.get("hostname").and_then(Value::as_str).unwrap_or("");
        if !hostname.is_empty() {
            for msg in dns1123_subdomain(hostname) {
                errs.invalid(&format!("{idx}.hostname"), &format!("{hostname:?}"), &msg);
            }
            if parse_ip_sloppy(hostname).is_some() {
                errs.invalid(
                    &format!("{idx}.hostname"),
                    &format!("{hostname:?}"),
                    "must be a DNS name, not an IP address",
                );
            }
        }
    }
    errs.0
}

/// The allocator's refusal of `np` ([`PortRange::check`]); the port the Service already had is
/// its own, so only its range is checked.
fn check_node_port(
    range: &PortRange,
    np: u64,
    taken: impl Fn(u64) -> bool,
    previous: Option<u64>,
) -> Result<(), String> {
    range.check(np, |p| previous != Some(p) && taken(p))
}

/// A free address in 10.96.0.0/16 (10.96.0.1 is the `kubernetes` Service's by convention).
fn allocate_ip(taken: impl Fn(&str) -> bool) -> Option<String> {
    let mut rng = rand::rng();
    let candidate = |n: u32| format!("10.96.{}.{}", n >> 8, n & 0xff);
    let usable = |n: u32| (n & 0xff) != 0 && (n & 0xff) != 255 && n != 1;
    for _ in 0..64 {
        let n: u32 = rng.random_range(2..65534);
        let ip = candidate(n);
        if usable(n) && !taken(&ip) {
            return Some(ip);
        }
    }
    (2..65534)
        .filter(|n| usable(*n))
        .map(candidate)
        .find(|ip| !taken(ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjKey {
        ObjKey {
            namespace: "default".into(),
            name: name.into(),
        }
    }

    #[test]
    fn load_balancer_defaults() {
        let mut svc = json!({"spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": [{"port": 80}]}});
        assert_eq!(
            admit(
                &Allocated::default(),
                &key("a"),
                None,
                &mut svc,
                &PortRange::DEFAULT
            ),
            Ok(())
        );
        let spec = &svc["spec"];
        assert!(
            spec["clusterIP"]
                .as_str()
                .is_some_and(|ip| ip.starts_with("10.96."))
        );
        assert_eq!(spec["sessionAffinity"], "None");
        assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
        let np = spec["ports"][0]["nodePort"].as_u64().unwrap_or(0);
        assert!(PortRange::DEFAULT.contains(np));
        assert_eq!(spec["ports"][0]["protocol"], "TCP");
        assert_eq!(spec["ports"][0]["targetPort"], 80);
        assert!(spec["healthCheckNodePort"].as_u64().is_some());
        assert_eq!(spec["allocateLoadBalancerNodePorts"], true);
    }

    #[test]
    fn node_port_conflicts_and_type_changes() {
        let mut a =
            json!({"spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}});
        assert_eq!(
            admit(
                &Allocated::default(),
                &key("a"),
                None,
                &mut a,
                &PortRange::DEFAULT
            ),
            Ok(())
        );
        let mut existing = Allocated::default();
        existing.add(&a);
        let mut b =
            json!({"spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}});
        let err = admit(&existing, &key("b"), None, &mut b, &PortRange::DEFAULT);
        assert!(matches!(err, Err(e) if e.code == 422 && e.message.contains("already allocated")));

        // Updating `a` keeps its port; switching to ClusterIP drops it.
        let mut a2 = a.clone();
        assert_eq!(
            admit(&existing, &key("a"), Some(&a), &mut a2, &PortRange::DEFAULT),
            Ok(())
        );
        assert_eq!(a2["spec"]["ports"][0]["nodePort"], 30080);
        let mut a3 = a.clone();
        a3["spec"]["type"] = json!("ClusterIP");
        assert_eq!(
            admit(&existing, &key("a"), Some(&a), &mut a3, &PortRange::DEFAULT),
            Ok(())
        );
        assert!(a3["spec"]["ports"][0].get("nodePort").is_none());
        assert!(a3["spec"].get("externalTrafficPolicy").is_none());

        let mut bad = json!({"spec": {"ports": [{"port": 80, "nodePort": 30001}]}});
        assert!(
            admit(
                &Allocated::default(),
                &key("c"),
                None,
                &mut bad,
                &PortRange::DEFAULT
            )
            .is_err()
        );
        let mut ip_change = a.clone();
        ip_change["spec"]["clusterIP"] = json!("10.96.9.9");
        assert!(
            admit(
                &existing,
                &key("a"),
                Some(&a),
                &mut ip_change,
                &PortRange::DEFAULT
            )
            .is_err()
        );
    }

    #[test]
    fn spec_rules() {
        let lb = |extra: Value| {
            let mut s = json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}});
            if let (Some(spec), Some(extra)) = (s["spec"].as_object_mut(), extra.as_object()) {
                spec.extend(extra.clone());
            }
            s
        };
        for bad in [
            json!({"loadBalancerIP": "not-an-ip"}),
            json!({"loadBalancerSourceRanges": ["garbage"]}),
            json!({"ports": [{"port": 80, "protocol": "SCTPX"}]}),
            json!({"ports": [{"port": 80}, {"port": 81}]}),
            json!({"ports": [{"port": 80, "name": "a"}, {"port": 80, "name": "b"}]}),
            json!({"loadBalancerClass": "a/b/c"}),
        ] {
            let mut svc = lb(bad.clone());
            assert!(
                admit(
                    &Allocated::default(),
                    &key("a"),
                    None,
                    &mut svc,
                    &PortRange::DEFAULT
                )
                .is_err(),
                "{bad}"
            );
        }
        let mut with_class = lb(json!({"loadBalancerClass": "example.com/lb"}));
        assert_eq!(
            admit(
                &Allocated::default(),
                &key("a"),
                None,
                &mut with_class,
                &PortRange::DEFAULT
            ),
            Ok(())
        );
        let mut removed = with_class.clone();
        removed["spec"]
            .as_object_mut()
            .map(|s| s.remove("loadBalancerClass"));
        let err = admit(
            &Allocated::default(),
            &key("a"),
            Some(&with_class),
            &mut removed,
            &PortRange::DEFAULT,
        );
        assert!(
            matches!(err, Err(e) if e.message.contains("spec.loadBalancerClass: Invalid value: null: may not change once set"))
        );
        let mut cluster_ip = with_class.clone();
        cluster_ip["spec"]["type"] = json!("ClusterIP");
        assert_eq!(
            admit(
                &Allocated::default(),
                &key("a"),
                Some(&with_class),
                &mut cluster_ip,
                &PortRange::DEFAULT
            ),
            Ok(())
        );
        assert!(cluster_ip["spec"].get("loadBalancerClass").is_none());
    }

    #[test]
    fn status_rules_and_defaults() {
        let mut svc = json!({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}, {"hostname": "lb.example"}]}}});
        prepare_status(&mut svc, true);
        assert_eq!(svc["status"]["loadBalancer"]["ingress"][0]["ipMode"], "VIP");
        assert!(
            svc["status"]["loadBalancer"]["ingress"][1]
                .get("ipMode")
                .is_none()
        );
        assert!(validate_status(&svc).is_empty());
        let bad = json!({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {"ingress": [
            {"ip": "not-an-ip", "ipMode": "vip"}, {"hostname": "1.2.3.4"}, {"hostname": "h", "ipMode": "VIP"}]}}});
        assert_eq!(
            validate_status(&bad).len(),
            4,
            "{:?}",
            validate_status(&bad)
        );
        let not_lb = json!({"spec": {"type": "ClusterIP"}, "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}});
        assert_eq!(validate_status(&not_lb), vec!["status.loadBalancer.ingress: Forbidden: may only be used when `spec.type` is 'LoadBalancer'".to_string()]);
        let mut left = not_lb.clone();
        prepare_status(&mut left, true);
        assert_eq!(left["status"]["loadBalancer"], json!({}));
        let mut empty =
            json!({"spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {"ingress": []}}});
        prepare_status(&mut empty, true);
        assert_eq!(empty["status"]["loadBalancer"], json!({}));
    }

    /// `allocateLoadBalancerNodePorts`: defaulted on LoadBalancer Services, false means no
    /// node ports (but a port asked for by number is kept and checked), forbidden on other
    /// types unless it is the unchanged value of a Service that stopped being a LoadBalancer
    /// (then dropped), a bool or a 400.
    #[test]
    fn allocate_load_balancer_node_ports_rules() {
        let range = PortRange::new(30000, 30000).expect("one port");
        let lb = |extra: Value| {
            let mut s = json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}});
            if let (Some(spec), Some(extra)) = (s["spec"].as_object_mut(), extra.as_object()) {
                spec.extend(extra.clone());
            }
            s
        };
        let mut without = lb(json!({"allocateLoadBalancerNodePorts": false}));
        assert_eq!(
            admit(&Allocated::default(), &key("a"), None, &mut without, &range),
            Ok(())
        );
        assert!(
            without["spec"]["ports"][0].get("nodePort").is_none(),
            "{without}"
        );
        assert_eq!(without["spec"]["allocateLoadBalancerNodePorts"], false);

        // The one port of the range is taken by `full`; a Service with node ports then fails
        // with the apiserver's internal error, one without them does not.
        let mut full = lb(json!({}));
        assert_eq!(
            admit(&Allocated::default(), &key("full"), None, &mut full, &range),
            Ok(())
        );
        assert_eq!(full["spec"]["ports"][0]["nodePort"], 30000);
        let mut existing = Allocated::default();
        existing.add(&full);
        let err = admit(&existing, &key("b"), None, &mut lb(json!({})), &range);
        assert!(
            matches!(&err, Err(e) if e.code == 500 && e.message == "Internal error occurred: failed to allocate a nodePort: range is full"),
            "{err:?}"
        );
        let mut again = lb(json!({"allocateLoadBalancerNodePorts": false}));
        assert_eq!(
            admit(&existing, &key("b"), None, &mut again, &range),
            Ok(())
        );
        // Asked for by number, a node port is still checked against the others.
        let mut by_number = lb(json!({"allocateLoadBalancerNodePorts": false,
            "ports": [{"port": 80, "nodePort": 30000}]}));
        let err = admit(&existing, &key("c"), None, &mut by_number, &range);
        assert!(
            matches!(&err, Err(e) if e.message.contains("spec.ports[0].nodePort: Invalid value: 30000: provided port is already allocated")),
            "{err:?}"
        );

        let mut cluster_ip = json!({"spec": {"type": "ClusterIP", "ports": [{"port": 80}],
            "allocateLoadBalancerNodePorts": true}});
        let err = admit(
            &Allocated::default(),
            &key("d"),
            None,
            &mut cluster_ip,
            &range,
        );
        assert!(
            matches!(&err, Err(e) if e.code == 422 && e.message.contains("spec.allocateLoadBalancerNodePorts: Forbidden: may only be used when `type` is 'LoadBalancer'")),
            "{err:?}"
        );
        // A LoadBalancer Service turned ClusterIP keeps the value it had: dropped, not refused.
        let mut turned = without.clone();
        turned["spec"]["type"] = json!("ClusterIP");
        assert_eq!(
            admit(
                &Allocated::default(),
                &key("a"),
                Some(&without),
                &mut turned,
                &range
            ),
            Ok(())
        );
        assert!(
            turned["spec"]
                .get("allocateLoadBalancerNodePorts")
                .is_none(),
            "{turned}"
        );
        // ... but a changed value is the client's, and refused.
        let mut changed = without.clone();
        changed["spec"]["type"] = json!("ClusterIP");
        changed["spec"]["allocateLoadBalancerNodePorts"] = json!(true);
        assert!(
            admit(
                &Allocated::default(),
                &key("a"),
                Some(&without),
                &mut changed,
                &range
            )
            .is_err()
        );

        let mut not_bool = lb(json!({"allocateLoadBalancerNodePorts": "no"}));
        let err = admit(
            &Allocated::default(),
            &key("e"),
            None,
            &mut not_bool,
            &range,
        );
        assert!(
            matches!(&err, Err(e) if e.code == 400 && e.message.contains("cannot unmarshal string into Go struct field Service.spec.allocateLoadBalancerNodePorts of type bool")),
            "{err:?}"
        );
    }

    #[test]
    fn ports_required_unless_headless() {
        let mut none = json!({"spec": {}});
        assert!(
            admit(
                &Allocated::default(),
                &key("a"),
                None,
                &mut none,
                &PortRange::DEFAULT
            )
            .is_err()
        );
        let mut headless = json!({"spec": {"clusterIP": "None"}});
        assert_eq!(
            admit(
                &Allocated::default(),
                &key("a"),
                None,
                &mut headless,
                &PortRange::DEFAULT
            ),
            Ok(())
        );
    }
}
