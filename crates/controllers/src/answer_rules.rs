//! What a driver's answer may put into Kubernetes (sandbox review S1-7, S1-9; Kubernetes API
//! review B, C).
//!
//! A driver is treated as an adversary: everything it returns is checked here before a
//! controller writes it. Each rule mirrors the apiserver validation the write would otherwise
//! fail (a 422 the controller would retry forever) or adds what the apiserver does not check but
//! a shared cluster needs (a driver may not touch other Nodes, `kubectl`'s annotations, or Service
//! annotations outside the prefixes it declared in `provider-info.annotation-prefixes`).
//!
//! Invalid parts are dropped where that is safe (an address, a label, an annotation, an ingress
//! entry); a provider ID that breaks a rule refuses the whole `instance-metadata` answer, since
//! labels and addresses describing another instance must not be written either. Every refusal is
//! a [`Violation`]; the controllers turn them into a Warning event, a log line and the counter
//! `wasm_ccm_driver_answers_refused_total{rule}` (see `Ctx::report_refusals`).
//!
//! The runtime already refuses results over its (looser) size caps; the caps here are the ones
//! for what is written to Kubernetes.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{LoadBalancerIngress, NodeAddress as KubeAddress};
use wasm_ccm_runtime::types::{AddressType, Ingress, InstanceMetadata, NodeAddress};

/// Node addresses written from one answer (after validation and de-duplication).
pub(crate) const MAX_ADDRESSES: usize = 32;
/// Additional node labels written from one answer.
pub(crate) const MAX_LABELS: usize = 64;
/// Ingress entries written to one Service's status.
pub(crate) const MAX_INGRESS: usize = 16;
/// Annotations one `ensure` answer may set, and (separately) remove.
pub(crate) const MAX_ANNOTATIONS: usize = 32;
/// Bytes (keys plus values) the annotations set by one `ensure` answer may add up to.
pub(crate) const MAX_ANNOTATION_BYTES: usize = 64 * 1024;
/// The apiserver's limit on all annotations of an object, keys plus values
/// (`apimachinery/pkg/api/validation.TotalAnnotationSizeLimitB`).
pub(crate) const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;
/// Longest provider ID accepted. The apiserver sets no limit; every cloud's IDs are far shorter,
/// and a huge one would be copied into every later driver call about the node.
pub(crate) const MAX_PROVIDER_ID_BYTES: usize = 512;
/// `LabelValueMaxLength` and `qualifiedNameMaxLength` of `apimachinery/pkg/util/validation`.
pub(crate) const MAX_LABEL_VALUE_BYTES: usize = 63;
/// `DNS1123SubdomainMaxLength`.
pub(crate) const MAX_DNS1123_SUBDOMAIN_BYTES: usize = 253;
/// Event limits of `pkg/apis/core/validation/events.go` (`legacyValidateEvent`, applied to
/// events.k8s.io/v1): Go's `len`, i.e. bytes.
pub(crate) const EVENT_NOTE_LIMIT: usize = 1024;
/// `ReasonLengthLimit`.
pub(crate) const EVENT_REASON_LIMIT: usize = 128;
/// `ActionLengthLimit`.
pub(crate) const EVENT_ACTION_LIMIT: usize = 128;
/// `ReportingInstanceLengthLimit`.
pub(crate) const EVENT_REPORTING_INSTANCE_LIMIT: usize = 128;
/// The reason a driver event with an invalid reason is recorded under.
pub(crate) const REPLACEMENT_EVENT_REASON: &str = "DriverEvent";

/// The rule a refused part of an answer broke; `name()` is the metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Rule {
    /// The provider ID does not use the driver's declared `<scheme>://`.
    ProviderIdScheme,
    /// The provider ID is not printable ASCII or is too long.
    ProviderIdInvalid,
    /// Another Node already carries the provider ID.
    ProviderIdTaken,
    /// The node already has another provider ID (the apiserver forbids changing it).
    ProviderIdChanged,
    /// An annotation key is not a qualified name.
    AnnotationKey,
    /// An annotation key outside the driver's declared `annotation-prefixes`.
    AnnotationNotDeclared,
    /// An annotation under `kubectl.kubernetes.io/`, never a driver's.
    AnnotationReserved,
    /// More annotations, or more bytes, than one answer may write.
    AnnotationBudget,
    /// The Service's annotations would exceed the apiserver's 256 KiB.
    AnnotationObjectSize,
    /// An address that does not parse for its type.
    AddressInvalid,
    /// The same type and address twice (the apiserver refuses duplicates).
    AddressDuplicate,
    /// More addresses than [`MAX_ADDRESSES`].
    AddressCount,
    /// A label key that is not a qualified name.
    LabelKey,
    /// A label value that is not a valid label value.
    LabelValue,
    /// A label key under `kubernetes.io` or `k8s.io`.
    LabelReserved,
    /// More additional labels than [`MAX_LABELS`].
    LabelCount,
    /// An ingress entry the apiserver would refuse.
    IngressInvalid,
    /// More ingress entries than [`MAX_INGRESS`].
    IngressCount,
    /// A driver event's reason is not UpperCamelCase of at most 128 bytes.
    EventReason,
}

impl Rule {
    /// The metric label and the name in events and logs.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Rule::ProviderIdScheme => "provider-id-scheme",
            Rule::ProviderIdInvalid => "provider-id-invalid",
            Rule::ProviderIdTaken => "provider-id-taken",
            Rule::ProviderIdChanged => "provider-id-changed",
            Rule::AnnotationKey => "annotation-key",
            Rule::AnnotationNotDeclared => "annotation-not-declared",
            Rule::AnnotationReserved => "annotation-reserved",
            Rule::AnnotationBudget => "annotation-budget",
            Rule::AnnotationObjectSize => "annotation-object-size",
            Rule::AddressInvalid => "address-invalid",
            Rule::AddressDuplicate => "address-duplicate",
            Rule::AddressCount => "address-count",
            Rule::LabelKey => "label-key",
            Rule::LabelValue => "label-value",
            Rule::LabelReserved => "label-reserved",
            Rule::LabelCount => "label-count",
            Rule::IngressInvalid => "ingress-invalid",
            Rule::IngressCount => "ingress-count",
            Rule::EventReason => "event-reason",
        }
    }
}

/// One refused part of a driver's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Violation {
    pub(crate) rule: Rule,
    /// What was refused and why; driver-supplied values appear only through [`shown`].
    pub(crate) detail: String,
}

impl Violation {
    fn new(rule: Rule, detail: String) -> Self {
        Violation { rule, detail }
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}] {}", self.rule.name(), self.detail)
    }
}

/// A driver-supplied value shown safely (the runtime's rule: 64 characters, escaped).
pub(crate) use wasm_ccm_runtime::log::shown;

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary (the
/// apiserver counts limits in bytes: Go's `len`).
pub(crate) use wasm_ccm_runtime::log::cut as cut_to_bytes;

// ---------------------------------------------------------------------------------------------
// apimachinery/pkg/util/validation
// ---------------------------------------------------------------------------------------------

fn is_alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// `validation.IsDNS1123Subdomain`: at most 253 bytes of lowercase RFC 1123 labels joined by
/// dots (`[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`).
pub(crate) fn is_dns1123_subdomain(value: &str) -> Result<(), String> {
    if value.len() > MAX_DNS1123_SUBDOMAIN_BYTES {
        return Err(format!(
            "must be no more than {MAX_DNS1123_SUBDOMAIN_BYTES} bytes"
        ));
    }
    let label_ok = |label: &str| {
        let b = label.as_bytes();
        !b.is_empty()
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            && b[0] != b'-'
            && b[b.len() - 1] != b'-'
    };
    if value.split('.').all(label_ok) {
        Ok(())
    } else {
        Err("must be a lowercase RFC 1123 subdomain (lowercase alphanumerics, '-' and '.', starting and ending with an alphanumeric)".into())
    }
}

/// The name part of `validation.IsQualifiedName` and `validation.IsValidLabelValue`:
/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, at most 63 bytes (empty allowed here).
fn is_name_part(value: &str) -> bool {
    let b = value.as_bytes();
    if b.is_empty() {
        return true;
    }
    b.len() <= MAX_LABEL_VALUE_BYTES
        && is_alnum(b[0])
        && is_alnum(b[b.len() - 1])
        && b.iter()
            .all(|c| is_alnum(*c) || *c == b'-' || *c == b'_' || *c == b'.')
}

/// `validation.IsQualifiedName`: an optional DNS-1123-subdomain prefix and `/`, then a name of
/// 1-63 bytes matching `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
pub(crate) fn is_qualified_name(value: &str) -> Result<(), String> {
    let (prefix, name) = match value.split_once('/') {
        None => (None, value),
        Some((p, n)) => (Some(p), n),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Err("prefix part must be non-empty".into());
        }
        is_dns1123_subdomain(prefix).map_err(|e| format!("prefix part {e}"))?;
    }
    if name.is_empty() {
        return Err("name part must be non-empty".into());
    }
    if name.contains('/') {
        return Err("a qualified name has at most one '/'".into());
    }
    if !is_name_part(name) {
        return Err(format!(
            "name part must be at most {MAX_LABEL_VALUE_BYTES} bytes of alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
        ));
    }
    Ok(())
}

/// `validation.IsValidLabelValue`: empty, or at most 63 bytes matching
/// `(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?`.
pub(crate) fn is_valid_label_value(value: &str) -> Result<(), String> {
    if is_name_part(value) {
        Ok(())
    } else {
        Err(format!(
            "must be at most {MAX_LABEL_VALUE_BYTES} bytes of alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
        ))
    }
}

/// An IP address as `validation.IsValidIP` (strict form, `StrictIPCIDRValidation`) accepts it:
/// IPv4 dotted quad without leading zeros, or IPv6 without a zone and not IPv4-mapped.
pub(crate) fn is_valid_ip(value: &str) -> Result<IpAddr, String> {
    let ip: IpAddr = value
        .parse()
        .map_err(|_| "must be a valid IP address".to_string())?;
    if let IpAddr::V6(v6) = ip
        && v6.to_ipv4_mapped().is_some()
    {
        return Err("must not be an IPv4-mapped IPv6 address".into());
    }
    Ok(ip)
}

/// Whether a key's prefix (the part before `/`) is `kubernetes.io`, `k8s.io` or a subdomain of
/// either, ignoring case (`KUBERNETES.IO/x` is the same namespace to a person reading it).
pub(crate) fn in_kubernetes_namespace(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else {
        return false;
    };
    let prefix = prefix.to_ascii_lowercase();
    ["kubernetes.io", "k8s.io"]
        .iter()
        .any(|d| prefix == *d || prefix.ends_with(&format!(".{d}")))
}

/// Whether a key's prefix is `kubectl.kubernetes.io` or a subdomain of it, ignoring case.
pub(crate) fn in_kubectl_namespace(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else {
        return false;
    };
    let prefix = prefix.to_ascii_lowercase();
    prefix == "kubectl.kubernetes.io" || prefix.ends_with(".kubectl.kubernetes.io")
}

// ---------------------------------------------------------------------------------------------
// Provider IDs
// ---------------------------------------------------------------------------------------------

/// The scheme of a provider ID (`aws` of `aws:///us-east-1a/i-1`), if it has the
/// `<scheme>://` form.
pub(crate) fn provider_id_scheme(id: &str) -> Option<&str> {
    id.split_once("://").map(|(scheme, _)| scheme)
}

/// Whether a node's existing provider ID belongs to another provider than the driver's scheme:
/// such a node is never initialised, deleted or tainted on this driver's word. An empty ID is
/// not foreign (the node waits for a provider ID). The controllers ask the routing table
/// (`routing.rs`), which applies the same rule per configured driver.
#[cfg(test)]
pub(crate) fn is_foreign_provider_id(existing: &str, scheme: &str) -> bool {
    !existing.is_empty() && provider_id_scheme(existing) != Some(scheme)
}

/// Checks the provider ID of an `instance-metadata` answer for a node whose current provider ID
/// is `existing` (empty when none). `taken_by` names another Node already carrying the ID.
///
/// Mirrors `ValidateNodeUpdate` (`spec.providerID`: "node updates may not change providerID
/// except from \"\" to valid") and the cloud-provider convention `<ProviderName>://<id>`. An
/// empty answer is accepted here (the node's own ID is used; no ID at all is refused by the
/// node controller).
pub(crate) fn check_provider_id(
    returned: &str,
    scheme: &str,
    existing: &str,
    taken_by: Option<&str>,
) -> Result<(), Violation> {
    if returned.is_empty() {
        return Ok(());
    }
    if !existing.is_empty() && returned != existing {
        return Err(Violation::new(
            Rule::ProviderIdChanged,
            format!(
                "provider ID {} differs from the node's {}; a provider ID never changes once set (the apiserver forbids it), so the answer describes another instance",
                shown(returned),
                shown(existing)
            ),
        ));
    }
    if returned.len() > MAX_PROVIDER_ID_BYTES || !returned.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Violation::new(
            Rule::ProviderIdInvalid,
            format!(
                "provider ID {} must be 1-{MAX_PROVIDER_ID_BYTES} bytes of printable ASCII without spaces",
                shown(returned)
            ),
        ));
    }
    let rest = returned
        .strip_prefix(scheme)
        .and_then(|r| r.strip_prefix("://"));
    if scheme.is_empty() || rest.is_none_or(str::is_empty) {
        return Err(Violation::new(
            Rule::ProviderIdScheme,
            format!(
                "provider ID {} does not use the driver's declared scheme {}",
                shown(returned),
                shown(&format!("{scheme}://…"))
            ),
        ));
    }
    if let Some(other) = taken_by {
        return Err(Violation::new(
            Rule::ProviderIdTaken,
            format!(
                "provider ID {} already belongs to node {}; two Nodes never share an instance",
                shown(returned),
                shown(other)
            ),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Node addresses and labels (instance-metadata)
// ---------------------------------------------------------------------------------------------

fn address_kind_name(kind: AddressType) -> &'static str {
    crate::convert::address_type_name(kind)
}

/// Checks one address for its type: an IP for `InternalIP`/`ExternalIP`, a DNS-1123 subdomain
/// for `Hostname`/`InternalDNS`/`ExternalDNS`.
pub(crate) fn check_address(a: &NodeAddress) -> Result<(), String> {
    match a.kind {
        AddressType::InternalIp | AddressType::ExternalIp => is_valid_ip(&a.address).map(|_| ()),
        AddressType::Hostname | AddressType::InternalDns | AddressType::ExternalDns => {
            if a.address.is_empty() {
                return Err("must not be empty".into());
            }
            // The apiserver checks no format here; a name must still be one, but in any case:
            // DNS names are case-insensitive (RFC 4343) and upstream CCMs write VM names as the
            // cloud spells them (CloudStack's `testDummyVM`), so refusing capitals would drop a
            // migrated node's hostname.
            is_dns1123_subdomain(&a.address.to_ascii_lowercase())
        }
    }
}

/// The driver's addresses with invalid ones dropped, duplicates (same type and address; the
/// apiserver's `ValidateNode` refuses them: `status.addresses[i]: Duplicate value`) dropped
/// keeping the first, and at most [`MAX_ADDRESSES`] kept in the driver's order.
pub(crate) fn sanitize_addresses(addresses: &[NodeAddress]) -> (Vec<NodeAddress>, Vec<Violation>) {
    let mut kept: Vec<NodeAddress> = Vec::new();
    let mut violations = Vec::new();
    // AddressType derives no Hash: keyed by its Kubernetes name.
    let mut seen: HashSet<(&str, &str)> = HashSet::new();
    let mut over = 0usize;
    for a in addresses {
        let kind = address_kind_name(a.kind);
        if let Err(why) = check_address(a) {
            violations.push(Violation::new(
                Rule::AddressInvalid,
                format!("address {kind} {} {why}", shown(&a.address)),
            ));
            continue;
        }
        if !seen.insert((kind, a.address.as_str())) {
            violations.push(Violation::new(
                Rule::AddressDuplicate,
                format!("address {kind} {} listed twice", shown(&a.address)),
            ));
            continue;
        }
        if kept.len() == MAX_ADDRESSES {
            over += 1;
            continue;
        }
        kept.push(a.clone());
    }
    if over > 0 {
        violations.push(Violation::new(
            Rule::AddressCount,
            format!("{over} address(es) beyond the first {MAX_ADDRESSES} dropped"),
        ));
    }
    (kept, violations)
}

/// Removes repeated (type, address) pairs from the list about to be written, keeping the first
/// (`ValidateNode` refuses duplicates; the kubelet's carried-over hostname may repeat one).
pub(crate) fn dedupe_addresses(addresses: Vec<KubeAddress>) -> Vec<KubeAddress> {
    let mut seen = HashSet::new();
    addresses
        .into_iter()
        .filter(|a| seen.insert((a.type_.clone(), a.address.clone())))
        .collect()
}

/// Whether a label key is in a namespace Kubernetes reserves (`kubernetes.io`, `k8s.io` and
/// their subdomains), ignoring case.
pub(crate) fn is_reserved_label(key: &str) -> bool {
    in_kubernetes_namespace(key)
}

/// The metadata with everything that may not be written dropped: invalid or duplicate
/// addresses, invalid instance-type/zone/region values (the label is then not written), and
/// additional labels with an invalid key (`ValidateLabelName` → `IsQualifiedName`), an invalid
/// value (`IsValidLabelValue`), a reserved prefix, or beyond [`MAX_LABELS`]. The provider ID is
/// checked separately ([`check_provider_id`]), since it needs the cluster.
pub(crate) fn sanitize_metadata(mut meta: InstanceMetadata) -> (InstanceMetadata, Vec<Violation>) {
    let (addresses, mut violations) = sanitize_addresses(&meta.addresses);
    meta.addresses = addresses;
    for (what, value) in [
        ("instance type", &mut meta.instance_type),
        ("zone", &mut meta.zone),
        ("region", &mut meta.region),
    ] {
        if let Err(why) = is_valid_label_value(value) {
            violations.push(Violation::new(
                Rule::LabelValue,
                format!("{what} {} {why}; its labels are not written", shown(value)),
            ));
            value.clear();
        }
    }
    let mut labels = Vec::new();
    let mut over = 0usize;
    for (key, value) in std::mem::take(&mut meta.additional_labels) {
        if is_reserved_label(&key) {
            violations.push(Violation::new(
                Rule::LabelReserved,
                format!(
                    "label {} is in a namespace reserved for Kubernetes (kubernetes.io, k8s.io)",
                    shown(&key)
                ),
            ));
            continue;
        }
        if let Err(why) = is_qualified_name(&key) {
            violations.push(Violation::new(
                Rule::LabelKey,
                format!("label key {} is not a qualified name: {why}", shown(&key)),
            ));
            continue;
        }
        if let Err(why) = is_valid_label_value(&value) {
            violations.push(Violation::new(
                Rule::LabelValue,
                format!("label {} value {} {why}", shown(&key), shown(&value)),
            ));
            continue;
        }
        if labels.len() == MAX_LABELS {
            over += 1;
            continue;
        }
        labels.push((key, value));
    }
    if over > 0 {
        violations.push(Violation::new(
            Rule::LabelCount,
            format!("{over} additional label(s) beyond the first {MAX_LABELS} dropped"),
        ));
    }
    meta.additional_labels = labels;
    (meta, violations)
}

// ---------------------------------------------------------------------------------------------
// Service annotations (ensure-result)
// ---------------------------------------------------------------------------------------------

/// The annotation keys a driver declared in `provider-info.annotation-prefixes`: an entry ending
/// in `/` is a prefix (a whole domain), any other an exact key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AnnotationPolicy {
    entries: Vec<String>,
}

impl AnnotationPolicy {
    /// The policy of a driver declaring `entries`.
    pub(crate) fn new(entries: &[String]) -> Self {
        AnnotationPolicy {
            entries: entries.to_vec(),
        }
    }

    fn declared(&self, key: &str) -> bool {
        self.entries.iter().any(|e| {
            if e.ends_with('/') {
                key.starts_with(e.as_str())
            } else {
                key == e
            }
        })
    }

    /// Whether the driver may set or remove `key`:
    /// 1. a qualified name (`ValidateAnnotations`: `IsQualifiedName(strings.ToLower(key))`);
    /// 2. never under `kubectl.kubernetes.io/` (kubectl's `last-applied-configuration`);
    /// 3. declared by the driver; keys under `kubernetes.io`/`k8s.io` only when declared
    ///    themselves or by a prefix in that namespace (matching is exact and case-sensitive).
    pub(crate) fn check(&self, key: &str) -> Result<(), Violation> {
        if let Err(why) = is_qualified_name(&key.to_ascii_lowercase()) {
            return Err(Violation::new(
                Rule::AnnotationKey,
                format!(
                    "annotation key {} is not a qualified name: {why}",
                    shown(key)
                ),
            ));
        }
        if in_kubectl_namespace(key) {
            return Err(Violation::new(
                Rule::AnnotationReserved,
                format!(
                    "annotation {} is kubectl's (kubectl.kubernetes.io/); a driver never writes there",
                    shown(key)
                ),
            ));
        }
        if !self.declared(key) {
            let hint = if in_kubernetes_namespace(key) {
                "; keys under kubernetes.io and k8s.io must be declared explicitly"
            } else {
                ""
            };
            return Err(Violation::new(
                Rule::AnnotationNotDeclared,
                format!(
                    "annotation {} is outside the driver's declared annotation-prefixes [{}]{hint}",
                    shown(key),
                    self.entries
                        .iter()
                        .map(|e| shown(e))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        Ok(())
    }
}

/// The annotation changes of an `ensure` answer that may be written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AnnotationChanges {
    pub(crate) set: Vec<(String, String)>,
    pub(crate) remove: Vec<String>,
}

impl AnnotationChanges {
    /// The changes that would alter `current` (a steady state writes nothing).
    pub(crate) fn effective(&self, current: &BTreeMap<String, String>) -> AnnotationChanges {
        let set: Vec<(String, String)> = self
            .set
            .iter()
            .filter(|(k, v)| current.get(k) != Some(v))
            .cloned()
            .collect();
        let remove = self
            .remove
            .iter()
            .filter(|k| current.contains_key(*k) && !self.set.iter().any(|(s, _)| s == *k))
            .cloned()
            .collect();
        AnnotationChanges { set, remove }
    }

    /// Nothing to write.
    pub(crate) fn is_empty(&self) -> bool {
        self.set.is_empty() && self.remove.is_empty()
    }
}

/// Filters an answer's `set-annotations`/`remove-annotations` through `policy`, keeps at most
/// [`MAX_ANNOTATIONS`] of each and [`MAX_ANNOTATION_BYTES`] of set keys and values (an entry that
/// does not fit is dropped, later smaller ones may still fit), and drops every set if the
/// Service's annotations (`current`) would exceed the apiserver's [`TOTAL_ANNOTATION_SIZE_LIMIT`]
/// (`ValidateAnnotationsSize`). Annotations outside the policy are never removed.
pub(crate) fn sanitize_annotations(
    set: &[(String, String)],
    remove: &[String],
    policy: &AnnotationPolicy,
    current: &BTreeMap<String, String>,
) -> (AnnotationChanges, Vec<Violation>) {
    let mut violations = Vec::new();
    let mut changes = AnnotationChanges::default();
    let mut bytes = 0usize;
    let (mut over_count, mut over_bytes) = (0usize, 0usize);
    for (key, value) in set {
        if let Err(v) = policy.check(key) {
            violations.push(v);
            continue;
        }
        if changes.set.len() == MAX_ANNOTATIONS {
            over_count += 1;
            continue;
        }
        let size = key.len() + value.len();
        if bytes + size > MAX_ANNOTATION_BYTES {
            over_bytes += 1;
            continue;
        }
        bytes += size;
        changes.set.push((key.clone(), value.clone()));
    }
    let mut over_removes = 0usize;
    for key in remove {
        if let Err(v) = policy.check(key) {
            violations.push(v);
            continue;
        }
        if changes.remove.len() == MAX_ANNOTATIONS {
            over_removes += 1;
            continue;
        }
        changes.remove.push(key.clone());
    }
    if over_count + over_removes > 0 {
        violations.push(Violation::new(
            Rule::AnnotationBudget,
            format!(
                "{} annotation change(s) beyond {MAX_ANNOTATIONS} sets or removals dropped",
                over_count + over_removes
            ),
        ));
    }
    if over_bytes > 0 {
        violations.push(Violation::new(
            Rule::AnnotationBudget,
            format!(
                "{over_bytes} annotation(s) dropped: one answer may set at most {MAX_ANNOTATION_BYTES} bytes of keys and values"
            ),
        ));
    }
    let mut after = current.clone();
    for key in &changes.remove {
        after.remove(key);
    }
    for (k, v) in &changes.set {
        after.insert(k.clone(), v.clone());
    }
    let total: usize = after.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > TOTAL_ANNOTATION_SIZE_LIMIT && !changes.set.is_empty() {
        violations.push(Violation::new(
            Rule::AnnotationObjectSize,
            format!(
                "{} annotation(s) not set: the Service's annotations would total {total} bytes, over the apiserver's {TOTAL_ANNOTATION_SIZE_LIMIT}",
                changes.set.len()
            ),
        ));
        changes.set.clear();
    }
    (changes, violations)
}

// ---------------------------------------------------------------------------------------------
// Load-balancer ingress (ensure-result)
// ---------------------------------------------------------------------------------------------

/// Checks one ingress entry as `ValidateLoadBalancerStatus` does, plus: an entry has an `ip` or
/// a `hostname` (an empty one says nothing).
pub(crate) fn check_ingress(g: &Ingress) -> Result<(), String> {
    let ip = g.ip.as_deref().filter(|s| !s.is_empty());
    let hostname = g.hostname.as_deref().filter(|s| !s.is_empty());
    if ip.is_none() && hostname.is_none() {
        return Err("has neither an ip nor a hostname".into());
    }
    if let Some(ip) = ip {
        is_valid_ip(ip).map_err(|why| format!("ip {} {why}", shown(ip)))?;
    }
    if let Some(h) = hostname {
        is_dns1123_subdomain(h).map_err(|why| format!("hostname {} {why}", shown(h)))?;
        if h.parse::<IpAddr>().is_ok() {
            return Err(format!(
                "hostname {} must be a DNS name, not an IP address",
                shown(h)
            ));
        }
    }
    if g.ip_mode.is_some() && ip.is_none() {
        return Err("ipMode may not be specified when `ip` is not set".into());
    }
    Ok(())
}

/// The driver's ingress with invalid entries dropped and at most [`MAX_INGRESS`] kept.
pub(crate) fn sanitize_ingress(ingress: &[Ingress]) -> (Vec<Ingress>, Vec<Violation>) {
    let mut kept = Vec::new();
    let mut violations = Vec::new();
    let mut over = 0usize;
    for (i, g) in ingress.iter().enumerate() {
        if let Err(why) = check_ingress(g) {
            violations.push(Violation::new(
                Rule::IngressInvalid,
                format!("ingress[{i}] {why}"),
            ));
            continue;
        }
        if kept.len() == MAX_INGRESS {
            over += 1;
            continue;
        }
        kept.push(g.clone());
    }
    if over > 0 {
        violations.push(Violation::new(
            Rule::IngressCount,
            format!("{over} ingress entr(y/ies) beyond the first {MAX_INGRESS} dropped"),
        ));
    }
    (kept, violations)
}

/// An ingress list as a ≥ 1.30 apiserver stores it (`SetDefaults_Service`: an entry with an `ip`
/// and no `ipMode` gets `VIP`), with an empty `ports` list the same as none. Comparing the
/// Service's current status with the desired one through this makes a restart and a re-ensure
/// of a converged Service write nothing, on any apiserver version.
pub(crate) fn normalize_ingress(ingress: &[LoadBalancerIngress]) -> Vec<LoadBalancerIngress> {
    ingress
        .iter()
        .map(|g| {
            let mut g = g.clone();
            if g.ip.as_deref().is_some_and(|ip| !ip.is_empty()) && g.ip_mode.is_none() {
                g.ip_mode = Some("VIP".to_string());
            }
            if g.ip.as_deref() == Some("") {
                g.ip = None;
            }
            if g.hostname.as_deref() == Some("") {
                g.hostname = None;
            }
            if g.ports.as_ref().is_some_and(Vec::is_empty) {
                g.ports = None;
            }
            g
        })
        .collect()
}

/// Whether the Service's current ingress already is `desired`, after the apiserver's defaulting.
pub(crate) fn same_ingress(
    current: &[LoadBalancerIngress],
    desired: &[LoadBalancerIngress],
) -> bool {
    normalize_ingress(current) == normalize_ingress(desired)
}

// ---------------------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------------------

/// A driver event's reason, or why it is refused: 1-128 bytes (`ReasonLengthLimit`), and
/// UpperCamelCase (`[A-Z][A-Za-z0-9]*`) as the WIT asks.
pub(crate) fn check_event_reason(reason: &str) -> Result<(), Violation> {
    let b = reason.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= EVENT_REASON_LIMIT
        && b[0].is_ascii_uppercase()
        && b.iter().all(u8::is_ascii_alphanumeric);
    if ok {
        Ok(())
    } else {
        Err(Violation::new(
            Rule::EventReason,
            format!(
                "event reason {} must be 1-{EVENT_REASON_LIMIT} bytes of UpperCamelCase ([A-Z][A-Za-z0-9]*); recorded as {REPLACEMENT_EVENT_REASON}",
                shown(reason)
            ),
        ))
    }
}

#[cfg(test)]
mod tests;
