//! Field validation shared by the served kinds, worded like the apiserver's `field.Error`s
//! (k8s.io/apimachinery/pkg/util/validation/field/errors.go): `<path>: <type>: <value>: <detail>`.
//!
//! Every rule names the apiserver function it follows. The rules are checked on every write
//! (create, update, patch, status) after the server's defaulting, as the registry's
//! `Validate`/`ValidateUpdate` strategies do.

use std::net::IpAddr;

use serde_json::{Map, Value};

use super::error::ApiError;
use super::resources::ResourceType;

/// `TotalAnnotationSizeLimitB` in k8s.io/apimachinery/pkg/api/validation/objectmeta.go.
pub(crate) const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

const QUALIFIED_NAME_FMT: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_FMT: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const DNS1123_SUBDOMAIN_FMT: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL_FMT: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
/// The `IsValidIP` wording (k8s.io/apimachinery/pkg/util/validation/ip.go).
pub(crate) const IP_FMT: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";

/// Collected field errors (`field.ErrorList`), each already rendered as `field.Error.Error()`.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Errors(pub Vec<String>);

/// A value as `field.Error` prints it: strings quoted, numbers and bools bare.
pub(crate) fn show(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

impl Errors {
    /// `field.Required`.
    pub(super) fn required(&mut self, path: &str, detail: &str) {
        self.push(path, "Required value", None, detail);
    }
    /// `field.Invalid`.
    pub(super) fn invalid(&mut self, path: &str, value: &str, detail: &str) {
        self.push(path, "Invalid value", Some(value.to_string()), detail);
    }
    /// `field.Forbidden`.
    pub(super) fn forbidden(&mut self, path: &str, detail: &str) {
        self.push(path, "Forbidden", None, detail);
    }
    /// `field.Duplicate`.
    pub(super) fn duplicate(&mut self, path: &str, value: &str) {
        self.push(path, "Duplicate value", Some(value.to_string()), "");
    }
    /// `field.NotSupported`.
    pub(super) fn not_supported(&mut self, path: &str, value: &str, supported: &[&str]) {
        let list = supported
            .iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        self.push(
            path,
            "Unsupported value",
            Some(value.to_string()),
            &format!("supported values: {list}"),
        );
    }
    /// `field.TooLong`.
    pub(super) fn too_long(&mut self, path: &str, max: usize) {
        self.push(
            path,
            "Too long",
            None,
            &format!("may not be more than {max} bytes"),
        );
    }

    fn push(&mut self, path: &str, ty: &str, value: Option<String>, detail: &str) {
        let mut s = format!("{path}: {ty}");
        if let Some(v) = value {
            s.push_str(": ");
            s.push_str(&v);
        }
        if !detail.is_empty() {
            s.push_str(": ");
            s.push_str(detail);
        }
        self.0.push(s);
    }

    /// An already rendered error.
    pub(super) fn push_raw(&mut self, error: String) {
        self.0.push(error);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// 422 for `rt`/`name` when any error was collected.
    pub(super) fn into_result(self, rt: &ResourceType, name: &str) -> Result<(), ApiError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid_all(rt, name, self.0))
        }
    }
}

/// `IsDNS1123Subdomain` (k8s.io/apimachinery/pkg/util/validation/validation.go).
pub(crate) fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > 253 {
        out.push("must be no more than 253 characters".into());
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if s.is_empty() || !s.split('.').all(label_ok) {
        out.push(DNS1123_SUBDOMAIN_FMT.into());
    }
    out
}

/// `IsDNS1035Label` (same file): what Service names must be (`ValidateServiceName` is
/// `NameIsDNS1035Label`).
pub(crate) fn dns1035_label(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > 63 {
        out.push("must be no more than 63 characters".into());
    }
    let ok = s.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.ends_with('-');
    if !ok {
        out.push("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')".into());
    }
    out
}

/// `IsDNS1123Label` (same file).
pub(crate) fn dns1123_label(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > 63 {
        out.push("must be no more than 63 characters".into());
    }
    let ok = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if !ok {
        out.push(DNS1123_LABEL_FMT.into());
    }
    out
}

fn name_part_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// `IsQualifiedName` (k8s.io/apimachinery/pkg/util/validation/validation.go): an optional DNS
/// subdomain prefix and `/`, then a name of at most 63 characters.
pub(crate) fn qualified_name(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                out.push("prefix part must be non-empty".into());
            } else {
                for m in dns1123_subdomain(prefix) {
                    out.push(format!("prefix part {m}"));
                }
            }
            *name
        }
        _ => {
            out.push(
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
                    .into(),
            );
            return out;
        }
    };
    if name.is_empty() {
        out.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        out.push("name part must be no more than 63 characters".into());
    }
    if !name.is_empty() && !name_part_ok(name) {
        out.push(QUALIFIED_NAME_FMT.into());
    }
    out
}

/// `IsValidLabelValue` (same file).
pub(crate) fn label_value(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > 63 {
        out.push("must be no more than 63 characters".into());
    }
    if !s.is_empty() && !name_part_ok(s) {
        out.push(LABEL_VALUE_FMT.into());
    }
    out
}

/// `ParseIPSloppy` (k8s.io/utils/net): also accepts IPv4 octets with leading zeros.
pub(crate) fn parse_ip_sloppy(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    let octets: Vec<&str> = s.split('.').collect();
    if octets.len() != 4 {
        return None;
    }
    let mut out = [0u8; 4];
    for (o, slot) in octets.iter().zip(out.iter_mut()) {
        if o.is_empty() || o.len() > 3 || !o.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *slot = o.parse().ok()?;
    }
    Some(IpAddr::from(out))
}

/// `ParseCIDRSloppy` (k8s.io/utils/net).
pub(crate) fn parse_cidr_sloppy(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let Some(ip) = parse_ip_sloppy(ip) else {
        return false;
    };
    let max = if ip.is_ipv4() { 32 } else { 128 };
    !bits.is_empty()
        && bits.bytes().all(|b| b.is_ascii_digit())
        && bits.parse::<u32>().is_ok_and(|b| b <= max)
}

/// The string values of a `map[string]string` field, or the decode error the apiserver's JSON
/// decoder answers (400) for anything else.
fn string_map<'a>(
    kind: &str,
    field: &str,
    v: Option<&'a Value>,
) -> Result<Vec<(&'a String, &'a str)>, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k, s.as_str())),
                Value::Null => Ok((k, "")),
                other => Err(decode_error(kind, field, other, "string")),
            })
            .collect(),
        Some(other) => Err(decode_error(kind, field, other, "map[string]string")),
    }
}

/// The 400 of a body whose field has the wrong JSON type, as the apiserver's JSON decoder words
/// it (`ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal ...`).
pub(crate) fn decode_error(kind: &str, field: &str, got: &Value, want: &str) -> ApiError {
    let got = match got {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    ApiError::bad_request(format!(
        "{kind} in version \"v1\" cannot be handled as a {kind}: json: cannot unmarshal {got} into Go struct field {kind}.{field} of type {want}"
    ))
}

/// Type checks of `metadata` the JSON decoder does (400), then `ValidateObjectMeta`'s label,
/// annotation and finalizer rules (k8s.io/apimachinery/pkg/api/validation/objectmeta.go:
/// `ValidateLabels` via `ValidateLabelName`/`IsValidLabelValue`, `ValidateAnnotations`,
/// `ValidateFinalizers`; pkg/apis/core/validation/validation.go `ValidateObjectMeta`).
pub(crate) fn object_meta(
    rt: &ResourceType,
    obj: &Value,
    errs: &mut Errors,
) -> Result<(), ApiError> {
    let Some(m) = obj.get("metadata").and_then(Value::as_object) else {
        return Ok(());
    };
    let labels = string_map(rt.kind, "metadata.labels", m.get("labels"))?;
    for (k, v) in labels {
        for msg in qualified_name(k) {
            errs.invalid("metadata.labels", &format!("{k:?}"), &msg);
        }
        for msg in label_value(v) {
            errs.invalid("metadata.labels", &format!("{v:?}"), &msg);
        }
    }
    let annotations = string_map(rt.kind, "metadata.annotations", m.get("annotations"))?;
    let mut total = 0usize;
    for (k, v) in annotations {
        for msg in qualified_name(&k.to_lowercase()) {
            errs.invalid("metadata.annotations", &format!("{k:?}"), &msg);
        }
        total += k.len() + v.len();
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.too_long("metadata.annotations", TOTAL_ANNOTATION_SIZE_LIMIT);
    }
    match m.get("finalizers") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            for (i, f) in list.iter().enumerate() {
                let Some(f) = f.as_str() else {
                    return Err(decode_error(rt.kind, "metadata.finalizers", f, "string"));
                };
                // ValidateFinalizerName: a qualified name (plus the core `kubernetes` one).
                for msg in qualified_name(f) {
                    errs.invalid(
                        &format!("metadata.finalizers[{i}]"),
                        &format!("{f:?}"),
                        &msg,
                    );
                }
            }
        }
        Some(other) => {
            return Err(decode_error(
                rt.kind,
                "metadata.finalizers",
                other,
                "[]string",
            ));
        }
    }
    Ok(())
}

/// `ValidateConfigMap` (pkg/apis/core/validation/validation.go): data values are strings (the
/// decoder's 400 otherwise), keys are `IsConfigMapKey`, a key is in `data` or `binaryData` but
/// not both, and the total is at most 1 MiB (`MaxSecretSize`).
pub(crate) fn config_map(obj: &Value, errs: &mut Errors) -> Result<(), ApiError> {
    let data = string_map("ConfigMap", "data", obj.get("data"))?;
    let binary = string_map("ConfigMap", "binaryData", obj.get("binaryData"))?;
    let mut total = 0usize;
    for (k, v) in &data {
        config_key("data", k, errs);
        total += v.len();
    }
    for (k, v) in &binary {
        config_key("binaryData", k, errs);
        if data.iter().any(|(d, _)| d == k) {
            errs.invalid(
                "data",
                &format!("{k:?}"),
                "duplicate of key present in binaryData",
            );
        }
        total += v.len();
    }
    if total > 1024 * 1024 {
        errs.too_long("", 1024 * 1024);
    }
    Ok(())
}

/// `IsConfigMapKey` (k8s.io/apimachinery/pkg/util/validation/validation.go).
fn config_key(field: &str, k: &str, errs: &mut Errors) {
    if k.len() > 253 {
        errs.invalid(
            field,
            &format!("{k:?}"),
            "must be no more than 253 characters",
        );
    }
    if k.is_empty()
        || !k
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        errs.invalid(
            field,
            &format!("{k:?}"),
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
        );
    } else if k == "." || k == ".." || k.starts_with("..") {
        errs.invalid(field, &format!("{k:?}"), "must not be '.' or '..'");
    }
}

/// `ValidateLeaseSpec` (pkg/apis/coordination/validation/validation.go), after the decoder's
/// type checks of the integer fields.
pub(crate) fn lease(obj: &Value, errs: &mut Errors) -> Result<(), ApiError> {
    let Some(spec) = obj.get("spec") else {
        return Ok(());
    };
    let Some(spec) = spec.as_object() else {
        return Err(decode_error("Lease", "spec", spec, "v1.LeaseSpec"));
    };
    for (field, min, msg) in [
        ("leaseDurationSeconds", 1, "must be greater than 0"),
        ("leaseTransitions", 0, "must be greater than or equal to 0"),
    ] {
        match spec.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::Number(n)) if n.as_i64().is_some() => {
                let n = n.as_i64().unwrap_or(0);
                if n < min {
                    errs.invalid(&format!("spec.{field}"), &n.to_string(), msg);
                }
            }
            Some(other) => {
                return Err(decode_error(
                    "Lease",
                    &format!("spec.{field}"),
                    other,
                    "int32",
                ));
            }
        }
    }
    for field in [
        "holderIdentity",
        "acquireTime",
        "renewTime",
        "strategy",
        "preferredHolder",
    ] {
        if let Some(v) = spec.get(field).filter(|v| !v.is_null() && !v.is_string()) {
            return Err(decode_error("Lease", &format!("spec.{field}"), v, "string"));
        }
    }
    let strategy = spec.get("strategy").and_then(Value::as_str).unwrap_or("");
    if !strategy.is_empty() && strategy != "OldestEmulationVersion" {
        errs.not_supported(
            "spec.strategy",
            &format!("{strategy:?}"),
            &["OldestEmulationVersion"],
        );
    }
    if spec
        .get("preferredHolder")
        .and_then(Value::as_str)
        .is_some_and(|p| !p.is_empty())
        && strategy.is_empty()
    {
        errs.forbidden(
            "spec.preferredHolder",
            "may only be specified if `strategy` is defined",
        );
    }
    Ok(())
}

/// Removes `key` from `map` when it holds an empty list or map: the apiserver stores typed
/// objects, and `omitempty` fields that are empty do not come back.
pub(crate) fn drop_empty(map: &mut Map<String, Value>, key: &str) {
    let empty = match map.get(key) {
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty(),
        Some(Value::Null) => true,
        _ => false,
    };
    if empty {
        map.remove(key);
    }
}

/// The layout of `metav1.MicroTime` (k8s.io/apimachinery/pkg/apis/meta/v1/micro_time.go,
/// `RFC3339Micro`): Go's parser needs exactly six fractional digits for it.
const MICRO_LAYOUT: &str = "2006-01-02T15:04:05.000000Z07:00";

fn is_micro_time(s: &str) -> bool {
    let Some((_, time)) = s.split_once('T') else {
        return false;
    };
    let six_digits = time.split_once('.').is_some_and(|(_, frac)| {
        frac.len() > 6
            && frac.as_bytes()[..6].iter().all(u8::is_ascii_digit)
            && matches!(frac.as_bytes()[6], b'Z' | b'+' | b'-')
    });
    six_digits && s.parse::<jiff::Timestamp>().is_ok()
}

/// The decoder's 400 for timestamps that do not parse: `metav1.MicroTime` fields
/// (`UnmarshalJSON` with [`MICRO_LAYOUT`]) and `metav1.Time` fields (RFC 3339), by dotted path.
pub(crate) fn times(
    kind: &str,
    obj: &Value,
    micro: &[&str],
    plain: &[&str],
) -> Result<(), ApiError> {
    let at = |path: &str| {
        path.split('.')
            .try_fold(obj, |v, seg| v.get(seg))
            .filter(|v| !v.is_null())
    };
    for (paths, is_micro) in [(micro, true), (plain, false)] {
        for path in paths {
            let Some(v) = at(path) else { continue };
            let text = v.as_str().unwrap_or("");
            let ok = v.is_string()
                && if is_micro {
                    is_micro_time(text)
                } else {
                    text.parse::<jiff::Timestamp>().is_ok()
                };
            if !ok {
                let layout = if is_micro {
                    MICRO_LAYOUT
                } else {
                    "2006-01-02T15:04:05Z07:00"
                };
                return Err(ApiError::bad_request(format!(
                    "{kind} in version \"v1\" cannot be handled as a {kind}: parsing time {:?} as {layout:?}: cannot parse {path}",
                    show(v)
                )));
            }
        }
    }
    Ok(())
}

/// The fields of `ObjectMeta` (k8s.io/apimachinery/pkg/apis/meta/v1/types.go).
const META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Top-level fields per kind (k8s.io/api/*/v1/types.go), with the nested structs this simulator
/// knows field by field: `(path, fields)`, `[]` standing for every list entry.
fn schema(kind_index: usize) -> &'static [(&'static str, &'static [&'static str])] {
    use super::resources::{
        CONFIGMAPS, EVENTS, EVENTS_V1, LEASES, NAMESPACES, NODES, PODS, SERVICEACCOUNTS, SERVICES,
    };
    match kind_index {
        NODES => &[
            ("", &["apiVersion", "kind", "metadata", "spec", "status"]),
            (
                "spec",
                &[
                    "podCIDR",
                    "podCIDRs",
                    "providerID",
                    "unschedulable",
                    "taints",
                    "configSource",
                    "externalID",
                ],
            ),
            ("spec.taints[]", &["key", "value", "effect", "timeAdded"]),
            (
                "status",
                &[
                    "capacity",
                    "allocatable",
                    "phase",
                    "conditions",
                    "addresses",
                    "daemonEndpoints",
                    "nodeInfo",
                    "images",
                    "volumesInUse",
                    "volumesAttached",
                    "config",
                    "runtimeHandlers",
                    "features",
                ],
            ),
            ("status.addresses[]", &["type", "address"]),
        ],
        SERVICES => &[
            ("", &["apiVersion", "kind", "metadata", "spec", "status"]),
            (
                "spec",
                &[
                    "ports",
                    "selector",
                    "clusterIP",
                    "clusterIPs",
                    "type",
                    "externalIPs",
                    "sessionAffinity",
                    "loadBalancerIP",
                    "loadBalancerSourceRanges",
                    "externalName",
                    "externalTrafficPolicy",
                    "healthCheckNodePort",
                    "publishNotReadyAddresses",
                    "sessionAffinityConfig",
                    "ipFamilies",
                    "ipFamilyPolicy",
                    "allocateLoadBalancerNodePorts",
                    "loadBalancerClass",
                    "internalTrafficPolicy",
                    "trafficDistribution",
                ],
            ),
            (
                "spec.ports[]",
                &[
                    "name",
                    "protocol",
                    "appProtocol",
                    "port",
                    "targetPort",
                    "nodePort",
                ],
            ),
            ("status", &["loadBalancer", "conditions"]),
            ("status.loadBalancer", &["ingress"]),
            (
                "status.loadBalancer.ingress[]",
                &["ip", "hostname", "ipMode", "ports"],
            ),
        ],
        EVENTS => &[(
            "",
            &[
                "apiVersion",
                "kind",
                "metadata",
                "involvedObject",
                "reason",
                "message",
                "source",
                "firstTimestamp",
                "lastTimestamp",
                "count",
                "type",
                "eventTime",
                "series",
                "action",
                "related",
                "reportingComponent",
                "reportingInstance",
            ],
        )],
        EVENTS_V1 => &[(
            "",
            &[
                "apiVersion",
                "kind",
                "metadata",
                "eventTime",
                "series",
                "reportingController",
                "reportingInstance",
                "action",
                "reason",
                "regarding",
                "related",
                "note",
                "type",
                "deprecatedSource",
                "deprecatedFirstTimestamp",
                "deprecatedLastTimestamp",
                "deprecatedCount",
            ],
        )],
        CONFIGMAPS => &[(
            "",
            &[
                "apiVersion",
                "kind",
                "metadata",
                "immutable",
                "data",
                "binaryData",
            ],
        )],
        LEASES => &[
            ("", &["apiVersion", "kind", "metadata", "spec"]),
            (
                "spec",
                &[
                    "holderIdentity",
                    "leaseDurationSeconds",
                    "acquireTime",
                    "renewTime",
                    "leaseTransitions",
                    "strategy",
                    "preferredHolder",
                ],
            ),
        ],
        NAMESPACES | PODS => &[("", &["apiVersion", "kind", "metadata", "spec", "status"])],
        // k8s.io/api core/v1 types.go `ServiceAccount`.
        SERVICEACCOUNTS => &[(
            "",
            &[
                "apiVersion",
                "kind",
                "metadata",
                "secrets",
                "imagePullSecrets",
                "automountServiceAccountToken",
            ],
        )],
        _ => &[],
    }
}

/// The maps at `path` (`a.b`, `a.b[]` for each entry of a list) in `obj`.
fn maps_at<'a>(obj: &'a mut Value, path: &str) -> Vec<(String, &'a mut Map<String, Value>)> {
    let mut cur: Vec<(String, &mut Value)> = vec![(String::new(), obj)];
    if !path.is_empty() {
        for seg in path.split('.') {
            let (name, each) = match seg.strip_suffix("[]") {
                Some(n) => (n, true),
                None => (seg, false),
            };
            let mut next = Vec::new();
            for (at, v) in cur {
                let Some(child) = v.as_object_mut().and_then(|m| m.get_mut(name)) else {
                    continue;
                };
                let at = if at.is_empty() {
                    name.to_string()
                } else {
                    format!("{at}.{name}")
                };
                if each {
                    if let Some(list) = child.as_array_mut() {
                        for (i, item) in list.iter_mut().enumerate() {
                            next.push((format!("{at}[{i}]"), item));
                        }
                    }
                } else {
                    next.push((at, child));
                }
            }
            cur = next;
        }
    }
    cur.into_iter()
        .filter_map(|(at, v)| v.as_object_mut().map(|m| (at, m)))
        .collect()
}

/// Unknown fields of `obj` for its kind (the typed decoder drops them; with
/// `fieldValidation=Strict` they are a 400 `strict decoding error`), removed from `obj` when
/// `prune`. Returns their paths.
pub(crate) fn unknown_fields(kind_index: usize, obj: &mut Value, prune: bool) -> Vec<String> {
    let mut found = Vec::new();
    let mut rules: Vec<(&str, &[&str])> = schema(kind_index).to_vec();
    if !rules.is_empty() {
        rules.push(("metadata", META_FIELDS));
    }
    for (path, fields) in rules {
        for (at, map) in maps_at(obj, path) {
            let unknown: Vec<String> = map
                .keys()
                // `$patch`, `$setElementOrder/…`, `$retainKeys`, `$deleteFromPrimitiveList/…`
                // are strategic-merge directives, not fields.
                .filter(|k| !k.starts_with('$') && !fields.contains(&k.as_str()))
                .cloned()
                .collect();
            for k in unknown {
                found.push(if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                });
                if prune {
                    map.remove(&k);
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        assert!(qualified_name("example.com/name").is_empty());
        assert!(
            qualified_name("node.kubernetes.io/exclude-from-external-load-balancers").is_empty()
        );
        assert!(!qualified_name("Bad_/x").is_empty());
        assert!(!qualified_name("a/b/c").is_empty());
        assert!(!qualified_name("-x").is_empty());
        assert!(!qualified_name(&"x".repeat(64)).is_empty());
        assert!(label_value("").is_empty());
        assert!(!label_value("a b").is_empty());
    }

    #[test]
    fn unknown_fields_are_found_and_dropped() {
        use serde_json::json;
        let mut svc = json!({"apiVersion": "v1", "kind": "Service", "bogus": 1,
            "metadata": {"name": "a", "nmae": "x"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "prot": "TCP"}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1", "ipmode": "VIP"}]}}});
        let found = unknown_fields(super::super::resources::SERVICES, &mut svc, true);
        assert_eq!(
            found,
            vec![
                "bogus",
                "spec.ports[0].prot",
                "status.loadBalancer.ingress[0].ipmode",
                "metadata.nmae"
            ]
        );
        assert!(svc.get("bogus").is_none());
        assert!(
            svc["status"]["loadBalancer"]["ingress"][0]
                .get("ipmode")
                .is_none()
        );
        assert!(unknown_fields(super::super::resources::SERVICES, &mut svc, true).is_empty());
    }

    #[test]
    fn micro_times_need_six_digits() {
        assert!(is_micro_time("2026-01-01T00:00:00.000000Z"));
        assert!(is_micro_time("2026-01-01T00:00:00.123456+02:00"));
        assert!(!is_micro_time("2026-01-01T00:00:00Z"));
        assert!(!is_micro_time("2026-01-01T00:00:00.123Z"));
        assert!(!is_micro_time("yesterday"));
    }

    #[test]
    fn ips_and_cidrs() {
        assert!(parse_ip_sloppy("010.0.0.1").is_some());
        assert!(parse_ip_sloppy("not-an-ip").is_none());
        assert!(parse_cidr_sloppy("10.0.0.0/8"));
        assert!(!parse_cidr_sloppy("garbage"));
        assert!(!parse_cidr_sloppy("10.0.0.0/33"));
    }

    #[test]
    fn errors_render_like_field_errors() {
        let mut e = Errors::default();
        e.invalid("spec.x", "\"y\"", "bad");
        e.required("spec.z", "");
        e.not_supported("type", "\"Sometimes\"", &["Normal", "Warning"]);
        assert_eq!(e.0[0], "spec.x: Invalid value: \"y\": bad");
        assert_eq!(e.0[1], "spec.z: Required value");
        assert_eq!(
            e.0[2],
            "type: Unsupported value: \"Sometimes\": supported values: \"Normal\", \"Warning\""
        );
    }
}
