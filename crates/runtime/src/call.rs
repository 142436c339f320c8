//! What a caller gives a driver call and what it gets back besides the value.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::error::CallError;
use crate::model::cluster::{AddressClaim, AddressUse};
use crate::model::http::HttpExchange;
use crate::model::types::{Node, NodeSet, Service};

/// The cluster as a driver may see it through the `cluster` import.
///
/// The two queries have default implementations that filter [`ClusterView::load_balancer_services`];
/// a view over a large cache overrides them to look only at what matches, so a query copies
/// only the Services it returns.
pub trait ClusterView: Send + Sync {
    /// All Services of type LoadBalancer.
    fn load_balancer_services(&self) -> Vec<Service>;

    /// The LoadBalancer Services with annotation `key` (and, when `values` is not empty, one of
    /// those values).
    fn services_with_annotation(&self, key: &str, values: &[String]) -> Vec<Service> {
        self.load_balancer_services()
            .into_iter()
            .filter(|s| annotation_matches(&s.annotations, key, values))
            .collect()
    }

    /// The LoadBalancer Services using one of `ips` as `spec.loadBalancerIP` or ingress IP.
    fn services_with_address(&self, ips: &[String]) -> Vec<Service> {
        let wanted = AddressQuery::new(ips);
        self.load_balancer_services()
            .into_iter()
            .filter(|s| {
                s.load_balancer_ip
                    .as_deref()
                    .is_some_and(|ip| wanted.matches(ip))
                    || s.ingress
                        .iter()
                        .filter_map(|i| i.ip.as_deref())
                        .any(|ip| wanted.matches(ip))
            })
            .collect()
    }

    /// Which of `ips` LoadBalancer Services hold, and how ([`claims_of`]).
    fn address_claims(&self, ips: &[String], annotation: &str) -> Vec<AddressClaim> {
        let wanted = AddressQuery::new(ips);
        let mut out = Vec::new();
        if wanted.is_empty() {
            return out;
        }
        for s in self.load_balancer_services() {
            let value = (!annotation.is_empty())
                .then(|| s.annotations.iter().find(|(k, _)| k == annotation))
                .flatten()
                .map(|(_, v)| v.as_str());
            claims_of(
                &s.uid,
                s.load_balancer_ip.as_deref(),
                value,
                s.ingress.iter().filter_map(|i| i.ip.as_deref()),
                &wanted,
                &mut out,
            );
        }
        out
    }
}

/// The claims of one Service on the addresses of `wanted` (the rule of `cluster.address-claims`):
/// its `spec.loadBalancerIP`, the value of the query's annotation (when it has one) and its
/// ingress IPs, each reported with the query's spelling of the address.
pub fn claims_of<'a>(
    uid: &str,
    load_balancer_ip: Option<&str>,
    annotation_value: Option<&str>,
    ingress_ips: impl IntoIterator<Item = &'a str>,
    wanted: &AddressQuery,
    out: &mut Vec<AddressClaim>,
) {
    let mut claim = |ip: &str, used_as: AddressUse| {
        if let Some(spelled) = wanted.spelling(ip) {
            out.push(AddressClaim {
                ip: spelled.to_string(),
                service_uid: uid.to_string(),
                used_as,
            });
        }
    };
    if let Some(ip) = load_balancer_ip {
        claim(ip, AddressUse::LoadBalancerIp);
    }
    if let Some(ip) = annotation_value {
        claim(ip, AddressUse::Annotation);
    }
    for ip in ingress_ips {
        claim(ip, AddressUse::Ingress);
    }
}

/// Whether `annotations` hold `key` with one of `values` (any value when `values` is empty): the
/// rule of `cluster.services-with-annotation`.
pub(crate) fn annotation_matches(
    annotations: &[(String, String)],
    key: &str,
    values: &[String],
) -> bool {
    annotations
        .iter()
        .any(|(k, v)| k == key && (values.is_empty() || values.iter().any(|w| w == v)))
}

/// The addresses of a `cluster.services-with-address` or `address-claims` query. Addresses
/// compare as addresses (`2001:db8::1` equals `2001:0db8::1`), so a driver need not guess how a
/// Service spelled one; text that is no address compares as trimmed text.
pub struct AddressQuery {
    /// Each address with the query's spelling of it.
    parsed: std::collections::HashMap<IpAddr, String>,
    text: std::collections::HashSet<String>,
}

impl AddressQuery {
    /// The query for `ips`.
    pub fn new(ips: &[String]) -> Self {
        let mut q = AddressQuery {
            parsed: Default::default(),
            text: Default::default(),
        };
        for ip in ips {
            match ip.trim().parse::<IpAddr>() {
                Ok(a) => {
                    q.parsed.entry(a).or_insert_with(|| ip.clone());
                }
                Err(_) => {
                    q.text.insert(ip.trim().to_string());
                }
            }
        }
        q
    }

    /// Whether `ip` (a Service's address as written) is one of the query's.
    pub fn matches(&self, ip: &str) -> bool {
        self.spelling(ip).is_some()
    }

    /// The query's spelling of `ip` (a Service's address as written), if it asked for it.
    pub fn spelling(&self, ip: &str) -> Option<&str> {
        match ip.trim().parse::<IpAddr>() {
            Ok(a) => self.parsed.get(&a).map(String::as_str),
            Err(_) => self.text.get(ip.trim()).map(String::as_str),
        }
    }

    /// Whether the query asks for nothing.
    pub fn is_empty(&self) -> bool {
        self.parsed.is_empty() && self.text.is_empty()
    }
}

/// The backend nodes of `load-balancer.ensure` and `update`, converted once and shared.
///
/// Each new set gets a new generation, unique in the process, so a driver that keeps the nodes
/// of the generation it last fetched (the SDKs do) copies them once per change of the set, not
/// once per call: equal generations always mean equal lists.
#[derive(Debug, Clone)]
pub struct SharedNodes {
    generation: u64,
    nodes: Arc<[Node]>,
}

/// Generations are process-wide, so two drivers or two callers never hand out the same one for
/// different lists.
static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

impl SharedNodes {
    /// A new set of `nodes` (sorted by name, as `cluster.nodes` promises) with a new generation.
    pub fn new(nodes: impl Into<Vec<Node>>) -> Self {
        let mut nodes: Vec<Node> = nodes.into();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        SharedNodes {
            generation: NEXT_GENERATION.fetch_add(1, Ordering::Relaxed),
            nodes: nodes.into(),
        }
    }

    /// The set's generation.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The nodes.
    pub fn nodes(&self) -> &Arc<[Node]> {
        &self.nodes
    }

    /// What crosses into the guest as the call's argument.
    pub(crate) fn record(&self) -> NodeSet {
        NodeSet {
            generation: self.generation,
            count: u32::try_from(self.nodes.len()).unwrap_or(u32::MAX),
        }
    }
}

/// A cluster with no Services (the CLI, tests).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct EmptyCluster;

impl ClusterView for EmptyCluster {
    fn load_balancer_services(&self) -> Vec<Service> {
        Vec::new()
    }
}

/// A fixed list of Services.
#[derive(Debug, Default, Clone)]
pub struct StaticCluster(pub Vec<Service>);

impl ClusterView for StaticCluster {
    fn load_balancer_services(&self) -> Vec<Service> {
        self.0.clone()
    }
}

/// Who a call is for: the object (for log lines and events) and the cluster view.
#[derive(Clone)]
pub struct CallScope {
    /// `namespace/name` of a Service or the name of a Node; empty when none.
    pub object: String,
    /// What the `cluster` queries read.
    pub cluster: Arc<dyn ClusterView>,
}

impl Default for CallScope {
    fn default() -> Self {
        CallScope {
            object: String::new(),
            cluster: Arc::new(EmptyCluster),
        }
    }
}

impl CallScope {
    /// A scope for `object` with an empty cluster.
    pub fn object(object: impl Into<String>) -> Self {
        CallScope {
            object: object.into(),
            ..Default::default()
        }
    }
}

/// Severity of a driver event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum EventKind {
    /// Kubernetes' `Normal` event type: something worth knowing happened.
    Normal,
    /// Kubernetes' `Warning` event type: something went wrong.
    Warning,
}

/// An event the driver recorded on the call's object; the host writes it to Kubernetes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DriverEvent {
    /// `Normal` or `Warning`.
    pub kind: EventKind,
    /// The event's reason: a short CamelCase word, as Kubernetes events have.
    pub reason: String,
    /// The human-readable note.
    pub message: String,
}

/// The result of a driver call plus what happened during it.
#[derive(Debug, Clone)]
pub struct Outcome<T> {
    /// The value, the driver's error, or the host's.
    pub result: Result<T, CallError>,
    /// Events the driver recorded (also when it failed).
    pub events: Vec<DriverEvent>,
    /// Requests the driver made.
    pub http: Vec<HttpExchange>,
    /// Wall time of the call, instantiation included when a new instance was needed.
    pub elapsed: Duration,
    /// The instance's linear-memory high-water mark, in bytes.
    pub peak_memory: usize,
}

impl<T> Outcome<T> {
    pub(crate) fn failed(error: CallError, elapsed: Duration) -> Self {
        Outcome {
            result: Err(error),
            events: Vec::new(),
            http: Vec::new(),
            elapsed,
            peak_memory: 0,
        }
    }

    /// The result alone.
    pub fn into_result(self) -> Result<T, CallError> {
        self.result
    }
}
