//! Several drivers in one process: which driver owns a node, which serves a Service.
//!
//! The table ([`Routing`]) is built once at start from the operator's configuration and checked
//! there: two drivers never share a name or a provider-ID scheme, at most one is the default for
//! uninitialised nodes, for class-less Services and for routes, a `loadBalancerClass` is served
//! by at most one driver, and no two node selectors can match the same node. Every driver's
//! controllers then hold a [`DriverView`]: the table seen from that driver. A controller acts
//! on an object only when the view says it is the driver's, so one driver's controllers never
//! touch another's nodes or load balancers.
//!
//! The apiserver's rules make this stable: a provider ID only goes from empty to set
//! (`ValidateNodeUpdate`), so a node's owner by scheme never changes, and a Service's class
//! cannot change while it stays a LoadBalancer (`validateLoadBalancerClassField`), so a class
//! moves only through another type, where the old driver cleans up.
//!
//! The one-driver flags (`--driver`, `--cloud-provider`) are a table of one driver
//! ([`DriverRoles::alone`]): it owns every node of its scheme and every uninitialised node,
//! serves class-less Services and runs the routes, and has no [`DriverRoles::label`], so it keeps
//! upstream's names and upstream's finalizer. With that finalizer the rules below give
//! upstream's answers without a branch of their own: the driver owns a load balancer when its
//! finalizer is there, no other driver can hold one, and an ensure adds nothing else (the tests
//! hold every rule to `controllers::service::rules`' upstream one).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use crate::answer_rules::provider_id_scheme;
use crate::controllers::service::rules::LB_FINALIZER;

/// The finalizer prefix of each driver's own cleanup finalizer when several drivers run
/// (`wasm-ccm.io/lb-cleanup.<driver>`).
pub(crate) const DRIVER_FINALIZER_PREFIX: &str = "wasm-ccm.io/lb-cleanup.";

/// What one configured driver is asked to do.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DriverRoles {
    /// The configured name (the driver's own name for the one-driver flags): logs, messages,
    /// the reload metrics' `driver` label.
    pub name: String,
    /// The name in queue names, metric labels and event notes, and the suffix of the driver's
    /// cleanup finalizer (`wasm-ccm.io/lb-cleanup.<label>`); a DriverSet file's drivers have
    /// their configured name here. `None` keeps upstream's names (`service`, no `driver`
    /// label, no note) and upstream's finalizer `service.kubernetes.io/load-balancer-cleanup`,
    /// so an upgrade, a rollback or a Go CCM finds its own: only a driver alone in its table
    /// (the one-driver flags) may have none.
    pub label: Option<String>,
    /// The provider-ID scheme of the nodes it owns once initialised (checked against the
    /// driver's own `info` at load).
    pub provider_id_scheme: String,
    /// Which uninitialised nodes it claims.
    pub nodes: NodeClaim,
    /// Which Services of type LoadBalancer it serves.
    pub load_balancer: LoadBalancerClaim,
    /// Whether it runs the route controller.
    pub routes: bool,
}

/// The uninitialised nodes a driver claims (an initialised node belongs to its scheme's driver).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeClaim {
    /// Nodes no selector matches go to this driver.
    pub default: bool,
    /// Nodes whose labels match go to this driver.
    pub selector: Option<LabelSelector>,
}

/// The Services a driver serves.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadBalancerClaim {
    /// Services without `spec.loadBalancerClass`.
    pub default: bool,
    /// These `spec.loadBalancerClass` values.
    pub classes: Vec<String>,
}

impl DriverRoles {
    /// The roles of the one driver of the flags: named `name`, owning the nodes of `scheme`
    /// and every uninitialised node, serving class-less Services, running the routes, with
    /// upstream's names and finalizer (no label).
    pub fn alone(name: &str, scheme: &str) -> Self {
        DriverRoles {
            name: name.to_string(),
            label: None,
            provider_id_scheme: scheme.to_string(),
            nodes: NodeClaim {
                default: true,
                selector: None,
            },
            load_balancer: LoadBalancerClaim {
                default: true,
                classes: Vec::new(),
            },
            routes: true,
        }
    }
}

/// The whole table; see the module doc.
#[derive(Debug)]
pub struct Routing {
    drivers: Vec<DriverRoles>,
}

/// Who owns a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NodeOwner {
    /// The driver at this index.
    Driver(usize),
    /// A provider ID of a scheme no configured driver has: another party's node.
    Foreign,
    /// No provider ID, and more than one selector matches (startup checks make this rare).
    Ambiguous(Vec<usize>),
    /// No provider ID, no selector matches and no driver is the default.
    Unrouted,
}

impl Routing {
    /// The table of one driver alone ([`DriverRoles::alone`]): nothing to check.
    pub fn alone(name: &str, scheme: &str) -> Arc<Self> {
        Arc::new(Routing {
            drivers: vec![DriverRoles::alone(name, scheme)],
        })
    }

    /// The table of `drivers` (one of the flags, or a DriverSet file's), or why it cannot be
    /// (the message names the drivers and the field, and what to change).
    pub fn new(drivers: Vec<DriverRoles>) -> Result<Arc<Self>, String> {
        if drivers.is_empty() {
            return Err("no driver is configured: list at least one under `drivers`".into());
        }
        if drivers.len() > 1
            && let Some(d) = drivers.iter().find(|d| d.label.is_none())
        {
            return Err(format!(
                "driver {:?} has no label among {} drivers: only a driver alone may keep upstream's names and finalizer; give every driver of a set its name as label",
                d.name,
                drivers.len()
            ));
        }
        for (i, d) in drivers.iter().enumerate() {
            check_driver(d)?;
            for other in &drivers[..i] {
                check_pair(other, d)?;
            }
        }
        check_classes(&drivers)?;
        check_single_roles(&drivers)?;
        Ok(Arc::new(Routing { drivers }))
    }

    /// The drivers, in configuration order.
    pub fn drivers(&self) -> &[DriverRoles] {
        &self.drivers
    }

    /// The view of the driver at `index`.
    pub(crate) fn view(self: &Arc<Self>, index: usize) -> DriverView {
        DriverView {
            routing: Arc::clone(self),
            me: index,
        }
    }

    /// Who owns `node` (see the module doc).
    pub(crate) fn node_owner(&self, node: &Node) -> NodeOwner {
        let id = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .unwrap_or_default();
        if !id.is_empty() {
            let scheme = provider_id_scheme(id);
            return match self
                .drivers
                .iter()
                .position(|d| Some(d.provider_id_scheme.as_str()) == scheme)
            {
                Some(i) => NodeOwner::Driver(i),
                None => NodeOwner::Foreign,
            };
        }
        let empty = BTreeMap::new();
        let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
        let matching: Vec<usize> = self
            .drivers
            .iter()
            .enumerate()
            .filter(|(_, d)| {
                d.nodes
                    .selector
                    .as_ref()
                    .is_some_and(|s| matches(s, labels))
            })
            .map(|(i, _)| i)
            .collect();
        match matching.len() {
            1 => NodeOwner::Driver(matching[0]),
            0 => match self.drivers.iter().position(|d| d.nodes.default) {
                Some(i) => NodeOwner::Driver(i),
                None => NodeOwner::Unrouted,
            },
            _ => NodeOwner::Ambiguous(matching),
        }
    }

    /// The driver serving `svc`'s load balancer, if it is a LoadBalancer Service routed here.
    pub(crate) fn service_driver(&self, svc: &Service) -> Option<usize> {
        let spec = svc.spec.as_ref()?;
        if spec.type_.as_deref() != Some("LoadBalancer") {
            return None;
        }
        match spec.load_balancer_class.as_deref() {
            None => self.drivers.iter().position(|d| d.load_balancer.default),
            Some(class) => self
                .drivers
                .iter()
                .position(|d| d.load_balancer.classes.iter().any(|c| c == class)),
        }
    }

    /// The cleanup finalizer of the driver at `index`: upstream's without a label (the
    /// one-driver flags), so an upgrade or a rollback finds its own;
    /// `wasm-ccm.io/lb-cleanup.<label>` with one.
    fn finalizer(&self, index: usize) -> String {
        match &self.drivers[index].label {
            None => LB_FINALIZER.to_string(),
            Some(label) => format!("{DRIVER_FINALIZER_PREFIX}{label}"),
        }
    }

    /// The index of the driver labelled `label`.
    fn labelled(&self, label: &str) -> Option<usize> {
        self.drivers
            .iter()
            .position(|d| d.label.as_deref() == Some(label))
    }
}

/// The name rule: a DNS label of at most 40 characters (it ends up in a finalizer, which is a
/// qualified name: 63 characters after the prefix).
fn check_driver_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "driver name {name:?} must be a DNS label of at most 40 characters (lower-case letters, digits and `-`, starting and ending with a letter or digit)"
        ))
    }
}

/// The apiserver's rule for `spec.loadBalancerClass` (`ValidateQualifiedName`): an optional
/// DNS-subdomain prefix and `/`, then a name of at most 63 characters of alphanumerics, `-`,
/// `_` and `.`, starting and ending with an alphanumeric.
fn check_class(class: &str) -> Result<(), String> {
    let (prefix, name) = match class.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, class),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            })
    });
    if name_ok && prefix_ok {
        Ok(())
    } else {
        Err("is not a qualified name (an optional DNS prefix and `/`, then at most 63 alphanumerics, `-`, `_` or `.`), which the apiserver requires of spec.loadBalancerClass".into())
    }
}

/// Only the operators whose meaning is settled for labels.
fn check_selector(s: &LabelSelector) -> Result<(), String> {
    let has_any = s.match_labels.as_ref().is_some_and(|m| !m.is_empty())
        || s.match_expressions.as_ref().is_some_and(|e| !e.is_empty());
    if !has_any {
        return Err("an empty selector matches every node; give matchLabels or matchExpressions (or use `default: true`)".into());
    }
    for e in s.match_expressions.iter().flatten() {
        match e.operator.as_str() {
            "In" | "NotIn" if e.values.as_ref().is_some_and(|v| !v.is_empty()) => {}
            "Exists" | "DoesNotExist" if e.values.as_ref().is_none_or(|v| v.is_empty()) => {}
            "In" | "NotIn" => {
                return Err(format!("{} {} needs at least one value", e.key, e.operator));
            }
            "Exists" | "DoesNotExist" => {
                return Err(format!("{} {} takes no values", e.key, e.operator));
            }
            other => {
                return Err(format!(
                    "operator {other:?} is not one of In, NotIn, Exists, DoesNotExist"
                ));
            }
        }
    }
    Ok(())
}

/// The checks of one driver entry on its own.
fn check_driver(d: &DriverRoles) -> Result<(), String> {
    // The label ends up in a finalizer and in metric labels; a driver without one (the flags')
    // is named by its own `info`, which no such rule binds.
    if let Some(label) = &d.label {
        check_driver_name(label)?;
    }
    if d.provider_id_scheme.is_empty() || d.provider_id_scheme.contains("://") {
        return Err(format!(
            "driver {:?}: providerIDScheme {:?} must be a scheme alone (e.g. `cloudscale`, the part before `://`)",
            d.name, d.provider_id_scheme
        ));
    }
    for c in &d.load_balancer.classes {
        check_class(c)
            .map_err(|e| format!("driver {:?}: loadBalancer.classes: {c:?} {e}", d.name))?;
    }
    if let Some(s) = &d.nodes.selector {
        check_selector(s).map_err(|e| format!("driver {:?}: nodes.selector: {e}", d.name))?;
    }
    Ok(())
}

/// What two driver entries may not share: a name, a provider-ID scheme, a node.
fn check_pair(other: &DriverRoles, d: &DriverRoles) -> Result<(), String> {
    if other.name == d.name {
        return Err(format!(
            "two drivers are named {:?}: names must be unique",
            d.name
        ));
    }
    if let Some(label) = &d.label
        && other.label.as_ref() == Some(label)
    {
        return Err(format!(
            "two drivers are labelled {label:?} ({} and {}): labels name finalizers and metric series and must be unique",
            other.name, d.name
        ));
    }
    if other.provider_id_scheme == d.provider_id_scheme {
        return Err(format!(
            "drivers {:?} and {:?} both have providerIDScheme {:?}: a node's provider ID must name exactly one driver",
            other.name, d.name, d.provider_id_scheme
        ));
    }
    if let (Some(a), Some(b)) = (&other.nodes.selector, &d.nodes.selector)
        && may_overlap(a, b)
    {
        return Err(format!(
            "the node selectors of drivers {:?} and {:?} can match the same node: make them exclusive (e.g. different values of one label), so exactly one driver claims each new node",
            other.name, d.name
        ));
    }
    Ok(())
}

/// Every loadBalancerClass is listed once, by one driver.
fn check_classes(drivers: &[DriverRoles]) -> Result<(), String> {
    let mut owner: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    for d in drivers {
        for c in &d.load_balancer.classes {
            match owner.insert(c, &d.name) {
                Some(first) if first == d.name => {
                    return Err(format!(
                        "driver {:?} lists loadBalancerClass {c:?} twice",
                        d.name
                    ));
                }
                Some(first) => {
                    return Err(format!(
                        "drivers {first:?} and {:?} both serve loadBalancerClass {c:?}: a class is served by one driver",
                        d.name
                    ));
                }
                None => {}
            }
        }
    }
    Ok(())
}

/// Whether a driver has a role.
type HasRole = fn(&DriverRoles) -> bool;

/// The roles at most one driver may have.
fn check_single_roles(drivers: &[DriverRoles]) -> Result<(), String> {
    let roles: [(&str, HasRole); 3] = [
        ("nodes.default", |d| d.nodes.default),
        ("loadBalancer.default", |d| d.load_balancer.default),
        ("routes", |d| d.routes),
    ];
    for (what, has) in roles {
        let names: Vec<&str> = drivers
            .iter()
            .filter(|d| has(d))
            .map(|d| d.name.as_str())
            .collect();
        if names.len() > 1 {
            return Err(format!(
                "{what} is set on {} drivers ({}): at most one driver may have it",
                names.len(),
                names.join(", ")
            ));
        }
    }
    Ok(())
}

/// Whether `labels` satisfy `s` (Kubernetes' label-selector semantics: `NotIn` and
/// `DoesNotExist` match an absent key).
pub(crate) fn matches(s: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    s.match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v))
        && s.match_expressions
            .iter()
            .flatten()
            .all(|e| requirement_holds(e, labels.get(&e.key)))
}

fn requirement_holds(e: &LabelSelectorRequirement, value: Option<&String>) -> bool {
    let values = e.values.as_deref().unwrap_or(&[]);
    match e.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        _ => false,
    }
}

/// What a selector says about one key: the values it allows (`None`: any value), and whether
/// the key must be present or absent.
#[derive(Debug, Clone)]
struct KeyConstraint {
    /// `Some(set)`: the value must be in the set.
    allowed: Option<Vec<String>>,
    /// Values the key must not have.
    forbidden: Vec<String>,
    present: Option<bool>,
}

fn constraints(s: &LabelSelector) -> BTreeMap<&str, KeyConstraint> {
    let mut out: BTreeMap<&str, KeyConstraint> = BTreeMap::new();
    let blank = || KeyConstraint {
        allowed: None,
        forbidden: Vec::new(),
        present: None,
    };
    let narrow = |allowed: &mut Option<Vec<String>>, set: &[String]| {
        *allowed = Some(match allowed.take() {
            Some(a) => a.into_iter().filter(|x| set.contains(x)).collect(),
            None => set.to_vec(),
        });
    };
    for (k, v) in s.match_labels.iter().flatten() {
        let c = out.entry(k.as_str()).or_insert_with(blank);
        c.present = Some(true);
        narrow(&mut c.allowed, std::slice::from_ref(v));
    }
    for e in s.match_expressions.iter().flatten() {
        let values = e.values.as_deref().unwrap_or(&[]);
        let c = out.entry(e.key.as_str()).or_insert_with(blank);
        match e.operator.as_str() {
            "In" => {
                c.present = Some(true);
                narrow(&mut c.allowed, values);
            }
            "NotIn" => c.forbidden.extend(values.iter().cloned()),
            "Exists" => c.present = Some(true),
            "DoesNotExist" => c.present = Some(false),
            _ => {}
        }
    }
    out
}

/// Whether some label set can satisfy both selectors. Exact for these operators: two selectors
/// are exclusive only when one key is constrained incompatibly (different required values, a
/// required value the other forbids, present against absent).
pub(crate) fn may_overlap(a: &LabelSelector, b: &LabelSelector) -> bool {
    let (ca, cb) = (constraints(a), constraints(b));
    let keys: std::collections::BTreeSet<&str> = ca.keys().chain(cb.keys()).copied().collect();
    keys.into_iter().all(|k| {
        let both = [ca.get(k), cb.get(k)];
        let present: Vec<bool> = both.iter().flatten().filter_map(|c| c.present).collect();
        if present.contains(&true) && present.contains(&false) {
            return false;
        }
        let must_absent = present.contains(&false);
        let forbidden: Vec<&String> = both.iter().flatten().flat_map(|c| &c.forbidden).collect();
        let mut allowed: Option<Vec<String>> = None;
        for c in both.iter().flatten() {
            if let Some(set) = &c.allowed {
                allowed = Some(match allowed.take() {
                    Some(a) => a.into_iter().filter(|x| set.contains(x)).collect(),
                    None => set.clone(),
                });
            }
        }
        match allowed {
            // Some value in every required set that nobody forbids.
            Some(values) => !must_absent && values.iter().any(|v| !forbidden.contains(&v)),
            // Any value (or absence) will do: infinitely many values escape a finite NotIn.
            None => true,
        }
    })
}

/// The table as one driver sees it.
#[derive(Debug, Clone)]
pub(crate) struct DriverView {
    routing: Arc<Routing>,
    me: usize,
}

impl DriverView {
    /// The configured name.
    pub(crate) fn name(&self) -> &str {
        &self.routing.drivers[self.me].name
    }

    /// This driver's index in the table.
    pub(crate) fn index(&self) -> usize {
        self.me
    }

    /// The name in queue names, metric labels and event notes; `None`: upstream's (see
    /// [`DriverRoles::label`]).
    pub(crate) fn label(&self) -> Option<&str> {
        self.routing.drivers[self.me].label.as_deref()
    }

    /// Whether this driver stands alone for upstream's cloud provider (the one-driver flags:
    /// no label, so upstream's finalizer). The ownership rules here need no such question; the
    /// controllers still ask it where upstream acts on every object and a driver of a set must
    /// keep to its own: routes and load-balancer backends over every node
    /// (`controllers/route/`, `controllers/service/`), a not-found uninitialised node deleted
    /// (`controllers/lifecycle/`), a Service it neither serves nor owns still taken through
    /// upstream's delete branch, no handover count and no `LoadBalancerNotServed` note
    /// (`controllers/service/`), and the foreign node's wording (`ownership.rs`).
    pub(crate) fn is_single(&self) -> bool {
        self.label().is_none()
    }

    /// The whole table.
    pub(crate) fn routing(&self) -> &Routing {
        &self.routing
    }

    /// Whether this driver reports what no driver owns (foreign, ambiguous, unrouted nodes):
    /// the first one, so each such node gets one event, not one per driver.
    pub(crate) fn reports_unowned(&self) -> bool {
        self.me == 0
    }

    /// Who owns `node`.
    pub(crate) fn node_owner(&self, node: &Node) -> NodeOwner {
        self.routing.node_owner(node)
    }

    /// Whether `node` is this driver's.
    pub(crate) fn owns_node(&self, node: &Node) -> bool {
        self.node_owner(node) == NodeOwner::Driver(self.me)
    }

    /// The name of the driver at `index` (for messages).
    pub(crate) fn name_of(&self, index: usize) -> &str {
        &self.routing.drivers[index].name
    }

    /// This driver's cleanup finalizer.
    pub(crate) fn finalizer(&self) -> String {
        self.routing.finalizer(self.me)
    }

    /// Whether `svc` is a LoadBalancer Service this driver serves (with one driver: upstream's
    /// `wantsLoadBalancer`, type LoadBalancer without a class).
    pub(crate) fn serves(&self, svc: &Service) -> bool {
        self.routing.service_driver(svc) == Some(self.me)
    }

    /// Whether this driver made (or adopts) `svc`'s load balancer: it carries this driver's
    /// finalizer, or only upstream's shared one (made by a single-driver run or an upstream
    /// CCM) and this driver is the default for class-less Services.
    pub(crate) fn owns_service(&self, svc: &Service) -> bool {
        let finalizers = finalizers(svc);
        let own = self.finalizer();
        if finalizers.iter().any(|f| *f == own) {
            return true;
        }
        self.routing.drivers[self.me].load_balancer.default
            && finalizers.contains(&LB_FINALIZER)
            && !finalizers
                .iter()
                .any(|f| f.starts_with(DRIVER_FINALIZER_PREFIX))
    }

    /// Whether the driver's cluster view (the `cluster` import's Services) shows `svc`: a
    /// LoadBalancer Service it serves, or, with a label, one whose load balancer it still
    /// owns, so a pool allocator does not hand out an address until its delete is done.
    ///
    /// A driver without a label sees only what it serves (upstream's `wantsLoadBalancer`), as
    /// before: its finalizer is upstream's, which any CCM or class controller may put on a
    /// Service, so that finalizer alone does not show the load balancer is this driver's. This
    /// is the one rule where the one-driver table keeps a difference, and it is on purpose.
    pub(crate) fn sees(&self, svc: &Service) -> bool {
        self.serves(svc) || (self.label().is_some() && self.owns_service(svc))
    }

    /// Upstream's `needsCleanup` for this driver: it owns the load balancer and the Service is
    /// being deleted or no longer served by it.
    pub(crate) fn needs_cleanup(&self, svc: &Service) -> bool {
        self.owns_service(svc) && (svc.metadata.deletion_timestamp.is_some() || !self.serves(svc))
    }

    /// Whether a node-sync `update` may touch `svc`'s load balancer (see
    /// [`crate::controllers::service::rules::may_update_backends`]).
    pub(crate) fn may_update_backends(&self, svc: &Service) -> bool {
        self.serves(svc) && svc.metadata.deletion_timestamp.is_none() && self.owns_service(svc)
    }

    /// Another configured driver that still holds `svc`'s load balancer: this driver's ensure
    /// waits until it is released, so two clouds never serve one Service. A finalizer of a
    /// driver no longer configured holds nothing (nobody could release it).
    pub(crate) fn held_by(&self, svc: &Service) -> Option<&str> {
        let finalizers = finalizers(svc);
        for f in &finalizers {
            // Another driver's, by index: a driver without a label has upstream's finalizer,
            // so one named after its `name` (left by a DriverSet run) is nobody's here.
            if let Some(other) = f.strip_prefix(DRIVER_FINALIZER_PREFIX)
                && let Some(d) = self.routing.labelled(other)
                && d != self.me
            {
                return Some(&self.routing.drivers[d].name);
            }
        }
        // Only the shared finalizer: the default driver's until it cleans up.
        let default = self
            .routing
            .drivers
            .iter()
            .position(|d| d.load_balancer.default);
        match default {
            Some(d)
                if d != self.me
                    && finalizers.contains(&LB_FINALIZER)
                    && !finalizers
                        .iter()
                        .any(|f| f.starts_with(DRIVER_FINALIZER_PREFIX)) =>
            {
                Some(&self.routing.drivers[d].name)
            }
            _ => None,
        }
    }

    /// The finalizers of drivers that are no longer configured (their load balancers cannot
    /// be deleted by this process).
    pub(crate) fn orphaned_owners<'a>(&self, svc: &'a Service) -> Vec<&'a str> {
        finalizers(svc)
            .into_iter()
            .filter_map(|f| f.strip_prefix(DRIVER_FINALIZER_PREFIX))
            .filter(|label| self.routing.labelled(label).is_none())
            .collect()
    }

    /// `svc`'s finalizers after this driver adds (`present`) or drops its own. Upstream's
    /// shared finalizer goes with this driver's when no driver finalizer remains and no
    /// default driver still serves the Service; an ensure of a class-less Service adds it too,
    /// so a Go CCM or a single-driver rollback still finds its own.
    pub(crate) fn finalizers_after(&self, svc: &Service, present: bool) -> Vec<String> {
        let own = self.finalizer();
        let mut out: Vec<String> = finalizers(svc)
            .into_iter()
            .filter(|f| *f != own)
            .map(str::to_string)
            .collect();
        let class_less = svc
            .spec
            .as_ref()
            .is_some_and(|s| s.load_balancer_class.is_none());
        if present {
            out.push(own);
            if class_less && !out.iter().any(|f| f == LB_FINALIZER) {
                out.push(LB_FINALIZER.to_string());
            }
        } else {
            let default_serves = self
                .routing
                .service_driver(svc)
                .is_some_and(|d| self.routing.drivers[d].load_balancer.default)
                && svc.metadata.deletion_timestamp.is_none();
            let others = out.iter().any(|f| f.starts_with(DRIVER_FINALIZER_PREFIX));
            if !others && !default_serves {
                out.retain(|f| f != LB_FINALIZER);
            }
        }
        out
    }
}

fn finalizers(svc: &Service) -> Vec<&str> {
    svc.metadata
        .finalizers
        .iter()
        .flatten()
        .map(String::as_str)
        .collect()
}

#[cfg(test)]
mod tests;
