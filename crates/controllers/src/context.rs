//! What every controller shares: the Kubernetes client (rate limited, counted), the driver
//! (counted), the caches, the event recorders, the metrics and the configuration.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, ObjectReference, Service};
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Client, Resource};
use serde_json::Value;
use wasm_ccm_runtime::AddressClaim;
use wasm_ccm_runtime::{
    AddressQuery, CallError, CallScope, ClusterView, DriverEvent, EventKind, Outcome, claims_of,
};

use crate::answer_rules::{
    EVENT_ACTION_LIMIT, EVENT_NOTE_LIMIT, EVENT_REASON_LIMIT, EVENT_REPORTING_INSTANCE_LIMIT,
    REPLACEMENT_EVENT_REASON, Violation, check_event_reason, cut_to_bytes, shown,
};
use crate::cloud::{CloudProvider, SharedCloud};
use crate::config::ControllerConfig;
use crate::convert::service_to_wit;
use crate::informer::Store;
use crate::metrics::Metrics;
use crate::queue::TokenBucket;
use crate::routing::{DriverView, NodeOwner};
use crate::shadow::{KubeChange, Recorded, ShadowLog};

/// The Kubernetes client with `--kube-api-qps/burst` applied and requests counted. Every write
/// the controllers make goes through [`Kube::patch`], [`Kube::patch_conditions`] or
/// [`Kube::delete_node`], so a shadow run can record them instead.
pub(crate) struct Kube {
    client: Client,
    limiter: TokenBucket,
    metrics: Arc<Metrics>,
    shadow: Option<Arc<ShadowLog>>,
}

/// The object a controller writes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target<'a> {
    /// A Node by name.
    Node(&'a str),
    /// A Service.
    Service { namespace: &'a str, name: &'a str },
}

impl Target<'_> {
    fn kind(&self) -> &'static str {
        match self {
            Target::Node(_) => "Node",
            Target::Service { .. } => "Service",
        }
    }

    fn key(&self) -> String {
        match self {
            Target::Node(name) => name.to_string(),
            Target::Service { namespace, name } => format!("{namespace}/{name}"),
        }
    }
}

impl Kube {
    /// Wraps `client`; with `shadow`, writes are recorded there instead of sent.
    pub(crate) fn new(
        client: Client,
        qps: f32,
        burst: u32,
        metrics: Arc<Metrics>,
        shadow: Option<Arc<ShadowLog>>,
    ) -> Self {
        Kube {
            client,
            limiter: TokenBucket::new(f64::from(qps), burst),
            metrics,
            shadow,
        }
    }

    /// Merge-patches `target` (its `status` subresource when `status`).
    pub(crate) async fn patch(
        &self,
        controller: &'static str,
        target: Target<'_>,
        patch: &Value,
        status: bool,
    ) -> Result<(), kube::Error> {
        let change = KubeChange::Patch { patch, status };
        self.write(controller, target, change, |dry_run| {
            let params = PatchParams {
                dry_run,
                ..Default::default()
            };
            let patch = Patch::Merge(patch);
            async move {
                match (target, status) {
                    (Target::Node(name), false) => {
                        self.nodes().patch(name, &params, &patch).await.map(drop)
                    }
                    (Target::Node(name), true) => self
                        .nodes()
                        .patch_status(name, &params, &patch)
                        .await
                        .map(drop),
                    (Target::Service { namespace, name }, false) => self
                        .services(namespace)
                        .patch(name, &params, &patch)
                        .await
                        .map(drop),
                    (Target::Service { namespace, name }, true) => self
                        .services(namespace)
                        .patch_status(name, &params, &patch)
                        .await
                        .map(drop),
                }
            }
        })
        .await
    }

    /// Strategic-merge-patches a Node's status conditions (merged by `type`, so the other
    /// conditions stay as the kubelet wrote them).
    pub(crate) async fn patch_conditions(
        &self,
        controller: &'static str,
        node: &str,
        patch: &Value,
    ) -> Result<(), kube::Error> {
        let change = KubeChange::Patch {
            patch,
            status: true,
        };
        self.write(controller, Target::Node(node), change, |dry_run| {
            let params = PatchParams {
                dry_run,
                ..Default::default()
            };
            async move {
                self.nodes()
                    .patch_status(node, &params, &Patch::Strategic(patch))
                    .await
                    .map(drop)
            }
        })
        .await
    }

    /// Deletes a Node, preconditioned on its UID (a node re-registered under the same name
    /// meanwhile is left alone).
    pub(crate) async fn delete_node(
        &self,
        controller: &'static str,
        node: &str,
        uid: Option<&str>,
    ) -> Result<(), kube::Error> {
        let change = KubeChange::Delete { uid };
        self.write(controller, Target::Node(node), change, |dry_run| {
            let params = DeleteParams {
                dry_run,
                preconditions: Some(Preconditions {
                    uid: uid.map(str::to_string),
                    resource_version: None,
                }),
                ..Default::default()
            };
            async move { self.nodes().delete(node, &params).await.map(drop) }
        })
        .await
    }

    /// Sends a write (`send(false)`), or in a shadow run records it, after sending it as a dry
    /// run (`send(true)`) when the apiserver should judge it. A shadow write always "succeeds":
    /// the controller goes on as though it had written, which is the state the report judges.
    async fn write<F, Fut>(
        &self,
        controller: &'static str,
        target: Target<'_>,
        change: KubeChange<'_>,
        send: F,
    ) -> Result<(), kube::Error>
    where
        F: FnOnce(bool) -> Fut,
        Fut: std::future::Future<Output = Result<(), kube::Error>>,
    {
        let verb = match change {
            KubeChange::Delete { .. } => "delete",
            KubeChange::Patch { .. } => "patch",
        };
        let Some(shadow) = &self.shadow else {
            return self.request(verb, send(false)).await;
        };
        let apiserver = if shadow.options().validate_on_server {
            Some(match self.request(verb, send(true)).await {
                Ok(()) => "accepted".to_string(),
                Err(kube::Error::Api(s)) => format!("refused ({}): {}", s.code, s.message),
                Err(e) => format!("not judged: {e}"),
            })
        } else {
            None
        };
        let recorded =
            shadow.record_kube(controller, target.kind(), &target.key(), change, apiserver);
        if recorded == Recorded::Changed {
            self.metrics.inc(
                "wasm_ccm_shadow_writes_total",
                &[("controller", controller), ("target", "kube")],
            );
            tracing::info!(
                controller,
                kind = target.kind(),
                object = %target.key(),
                verb,
                "shadow: would write (recorded, not sent)"
            );
        }
        Ok(())
    }

    /// Nodes.
    pub(crate) fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    /// Services of one namespace.
    pub(crate) fn services(&self, namespace: &str) -> Api<Service> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Runs one request after the rate limit and counts it by verb and code.
    pub(crate) async fn request<T>(
        &self,
        verb: &'static str,
        fut: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, kube::Error> {
        self.limiter.acquire().await;
        let result = fut.await;
        let code = match &result {
            Ok(_) => "2xx".to_string(),
            Err(kube::Error::Api(s)) => s.code.to_string(),
            Err(_) => "error".to_string(),
        };
        self.metrics.inc(
            "wasm_ccm_kube_requests_total",
            &[("verb", verb), ("code", &code)],
        );
        result
    }
}

/// Whether a Kubernetes error is HTTP `code`.
pub(crate) fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// What this controller last decided for a Service, not yet visible in the cache.
#[derive(Debug, Clone, Default)]
pub(crate) struct PendingWrite {
    pub(crate) set_annotations: Vec<(String, String)>,
    pub(crate) remove_annotations: Vec<String>,
    pub(crate) ingress: Vec<wasm_ccm_runtime::types::Ingress>,
}

/// The cluster view drivers get: the LoadBalancer Services in the cache, with this controller's
/// own latest results laid over them. Without the overlay, a driver that allocates from a pool by
/// looking at the other Services (like the static driver) could hand out an address twice while
/// the watch has not yet delivered the previous write.
pub(crate) struct StoreCluster {
    store: Store<Service>,
    /// Whose view: with several drivers, a driver sees only the Services it serves or still
    /// owns, so a pool allocator never sees (or hands out) another driver's addresses.
    route: DriverView,
    pending: std::sync::Mutex<std::collections::HashMap<String, PendingWrite>>,
}

impl StoreCluster {
    /// A view of `store` for the driver of `route`.
    pub(crate) fn new(store: Store<Service>, route: DriverView) -> Self {
        StoreCluster {
            store,
            route,
            pending: Default::default(),
        }
    }

    /// Whether the driver sees `s`: a LoadBalancer Service it serves, or one whose load
    /// balancer it still owns (with one driver: upstream's `wantsLoadBalancer`).
    fn visible(&self, s: &Service) -> bool {
        self.route.serves(s) || (!self.route.is_single() && self.route.owns_service(s))
    }

    /// Records the result of an ensure for `key` (or forgets it with `None`, after a delete).
    pub(crate) fn record(&self, key: &str, write: Option<PendingWrite>) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        match write {
            Some(w) => pending.insert(key.to_string(), w),
            None => pending.remove(key),
        };
    }
}

impl StoreCluster {
    /// The LoadBalancer Services for which `keep` holds, as drivers see them: with this
    /// controller's own latest results laid over the cache. Only the Services kept are converted,
    /// so a query that matches few copies few.
    fn services_where(
        &self,
        keep: impl Fn(&Service, Option<&PendingWrite>) -> bool,
    ) -> Vec<wasm_ccm_runtime::types::Service> {
        let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        // One buffer for every Service's key: a query scans every Service, and a `String` per
        // Service per query was a measurable part of an ensure at 1,000 Services.
        let mut key = String::new();
        self.store
            .list()
            .iter()
            .filter(|s| self.visible(s))
            .filter_map(|s| {
                key.clear();
                key.push_str(s.metadata.namespace.as_deref().unwrap_or_default());
                key.push('/');
                key.push_str(s.metadata.name.as_deref().unwrap_or_default());
                let write = pending.get(key.as_str());
                keep(s, write).then(|| {
                    let mut wit = service_to_wit(s);
                    if let Some(w) = write {
                        wit.annotations.retain(|(k, _)| {
                            !w.remove_annotations.contains(k)
                                && !w.set_annotations.iter().any(|(s, _)| s == k)
                        });
                        wit.annotations.extend(w.set_annotations.iter().cloned());
                        wit.ingress = w.ingress.clone();
                    }
                    wit
                })
            })
            .collect()
    }
}

/// The value of annotation `key` a driver sees on `s`: this controller's pending write first.
fn seen_annotation<'a>(
    s: &'a Service,
    write: Option<&'a PendingWrite>,
    key: &str,
) -> Option<&'a str> {
    if let Some(w) = write {
        if let Some((_, v)) = w.set_annotations.iter().find(|(k, _)| k == key) {
            return Some(v);
        }
        if w.remove_annotations.iter().any(|k| k == key) {
            return None;
        }
    }
    s.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The addresses a driver sees on `s`: `spec.loadBalancerIP` and the ingress IPs, this
/// controller's pending ingress first.
fn seen_addresses<'a>(s: &'a Service, write: Option<&'a PendingWrite>) -> Vec<&'a str> {
    let mut ips: Vec<&str> = s
        .spec
        .as_ref()
        .and_then(|spec| spec.load_balancer_ip.as_deref())
        .into_iter()
        .collect();
    ips.extend(seen_ingress_ips(s, write));
    ips
}

/// The ingress IPs a driver sees on `s`: this controller's pending ingress, else the status.
fn seen_ingress_ips<'a>(s: &'a Service, write: Option<&'a PendingWrite>) -> Vec<&'a str> {
    match write {
        Some(w) => w.ingress.iter().filter_map(|i| i.ip.as_deref()).collect(),
        None => s
            .status
            .iter()
            .filter_map(|st| st.load_balancer.as_ref())
            .flat_map(|lb| lb.ingress.iter().flatten())
            .filter_map(|i| i.ip.as_deref())
            .collect(),
    }
}

impl ClusterView for StoreCluster {
    fn load_balancer_services(&self) -> Vec<wasm_ccm_runtime::types::Service> {
        self.services_where(|_, _| true)
    }

    fn services_with_annotation(
        &self,
        key: &str,
        values: &[String],
    ) -> Vec<wasm_ccm_runtime::types::Service> {
        // A set: a pool driver asks about thousands of addresses at once, and every Service's
        // value is looked up in them.
        let values: std::collections::HashSet<&str> = values.iter().map(String::as_str).collect();
        self.services_where(|s, write| {
            seen_annotation(s, write, key).is_some_and(|v| values.is_empty() || values.contains(v))
        })
    }

    fn address_claims(&self, ips: &[String], annotation: &str) -> Vec<AddressClaim> {
        let wanted = AddressQuery::new(ips);
        let mut out = Vec::new();
        if wanted.is_empty() {
            return out;
        }
        let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let mut key = String::new();
        // Nothing is converted: each Service's addresses are read where they are, so a query
        // about thousands of candidates costs a scan and copies only the claims.
        for s in self.store.list().iter().filter(|s| self.visible(s)) {
            key.clear();
            key.push_str(s.metadata.namespace.as_deref().unwrap_or_default());
            key.push('/');
            key.push_str(s.metadata.name.as_deref().unwrap_or_default());
            let write = pending.get(key.as_str());
            let value = (!annotation.is_empty())
                .then(|| seen_annotation(s, write, annotation))
                .flatten();
            let load_balancer_ip = s
                .spec
                .as_ref()
                .and_then(|spec| spec.load_balancer_ip.as_deref());
            claims_of(
                s.metadata.uid.as_deref().unwrap_or_default(),
                load_balancer_ip,
                value,
                seen_ingress_ips(s, write),
                &wanted,
                &mut out,
            );
        }
        out
    }

    fn services_with_address(&self, ips: &[String]) -> Vec<wasm_ccm_runtime::types::Service> {
        let wanted = AddressQuery::new(ips);
        if wanted.is_empty() {
            return Vec::new();
        }
        self.services_where(|s, write| seen_addresses(s, write).iter().any(|ip| wanted.matches(ip)))
    }
}

/// The cloud behind the seam ([`CloudProvider`]) with metrics around every call.
pub(crate) struct Cloud {
    provider: SharedCloud,
    /// The `driver` label of its metrics: the configured name with several drivers, else the
    /// driver's own name (read per call: a reload may not change it, but a fake may).
    label: Option<String>,
    metrics: Arc<Metrics>,
    cluster: Arc<StoreCluster>,
    shadow: Option<Arc<ShadowLog>>,
}

/// What a driver call is about, for the shadow report: a kind (`Node`, `Service`, or `Driver`
/// for calls about no one object) and the object's key (a Service's `namespace/name`).
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    pub(crate) kind: &'static str,
    pub(crate) object: String,
}

impl Subject {
    /// A Node by name.
    pub(crate) fn node(name: &str) -> Self {
        Subject {
            kind: "Node",
            object: name.to_string(),
        }
    }

    /// A Service by `namespace/name`.
    pub(crate) fn service(key: &str) -> Self {
        Subject {
            kind: "Service",
            object: key.to_string(),
        }
    }

    /// A call about no one object (housekeeping, the route pass).
    pub(crate) fn driver(what: &str) -> Self {
        Subject {
            kind: "Driver",
            object: what.to_string(),
        }
    }

    /// A route by destination CIDR.
    pub(crate) fn route(destination: &str) -> Self {
        Subject {
            kind: "Route",
            object: destination.to_string(),
        }
    }

    /// The subject an event reference names.
    pub(crate) fn of(regarding: &ObjectReference) -> Self {
        let name = regarding.name.as_deref().unwrap_or_default();
        match (regarding.kind.as_deref(), regarding.namespace.as_deref()) {
            (Some("Node"), _) => Subject::node(name),
            (Some("Service"), Some(ns)) => Subject::service(&format!("{ns}/{name}")),
            _ => Subject::driver(name),
        }
    }
}

impl Cloud {
    /// Wraps `provider` (in production the slot of the driver in service); with `shadow`, the
    /// writes the runtime refused are recorded there.
    pub(crate) fn new(
        provider: SharedCloud,
        label: Option<String>,
        metrics: Arc<Metrics>,
        cluster: Arc<StoreCluster>,
        shadow: Option<Arc<ShadowLog>>,
    ) -> Self {
        Cloud {
            provider,
            label,
            metrics,
            cluster,
            shadow,
        }
    }

    fn record_shadowed<T>(
        &self,
        shadow: &ShadowLog,
        function: &str,
        subject: Subject,
        outcome: &Outcome<T>,
    ) {
        let refused: Vec<String> = outcome
            .http
            .iter()
            .filter_map(|e| e.shadowed.clone())
            .collect();
        let any = !refused.is_empty();
        let recorded = shadow.record_cloud(
            function,
            subject.kind,
            &subject.object,
            refused,
            outcome.result.is_ok(),
        );
        if any && recorded == Recorded::Changed {
            self.metrics.inc(
                "wasm_ccm_shadow_writes_total",
                &[("controller", function), ("target", "cloud")],
            );
            tracing::info!(
                function,
                kind = subject.kind,
                object = %subject.object,
                "shadow: the driver would write to the cloud (refused, recorded)"
            );
        }
    }

    /// The calls to the cloud (a reload may swap the driver between calls, never during one).
    pub(crate) fn api(&self) -> &dyn CloudProvider {
        self.provider.as_ref()
    }

    /// The cloud's name, for messages and metric labels: the configured name with several
    /// drivers, else the driver's own.
    pub(crate) fn name(&self) -> String {
        match &self.label {
            Some(label) => label.clone(),
            None => self.provider.name(),
        }
    }

    /// The provider-ID scheme the driver declared (`<scheme>://…`).
    pub(crate) fn provider_id_scheme(&self) -> String {
        self.provider.provider_id_scheme()
    }

    /// The cluster view the driver sees.
    pub(crate) fn cluster(&self) -> &StoreCluster {
        &self.cluster
    }

    /// The call scope for `object`.
    pub(crate) fn scope(&self, object: &str) -> CallScope {
        CallScope {
            object: object.to_string(),
            cluster: Arc::clone(&self.cluster) as Arc<dyn ClusterView>,
        }
    }

    /// Counts and times a finished call about `subject`; returns its result and the events the
    /// driver recorded. In a shadow run, records the cloud writes the runtime refused.
    pub(crate) fn observe<T>(
        &self,
        function: &str,
        subject: Subject,
        outcome: Outcome<T>,
    ) -> (Result<T, CallError>, Vec<DriverEvent>) {
        if let Some(shadow) = &self.shadow {
            self.record_shadowed(shadow, function, subject, &outcome);
        }
        let result = match &outcome.result {
            Ok(_) => "ok",
            Err(CallError::Provider(p)) => p.case(),
            Err(CallError::Host(_)) => "host-error",
        };
        let driver = self.name();
        self.metrics.inc(
            "wasm_ccm_driver_calls_total",
            &[
                ("driver", &driver),
                ("function", function),
                ("result", result),
            ],
        );
        self.metrics.observe(
            "wasm_ccm_driver_call_duration_seconds",
            &[("driver", &driver), ("function", function)],
            outcome.elapsed.as_secs_f64(),
        );
        (outcome.result, outcome.events)
    }

    /// Copies the cloud's own counters into the registry (at scrape time).
    pub(crate) fn export_counters(&self) {
        self.provider.export_counters(&self.metrics, &self.name());
    }
}

/// Event recorders, one per upstream reporter name.
pub(crate) struct Events {
    client: Client,
    instance: String,
    /// One recorder per (controller, note). kube-rs' `Recorder` deduplicates events by a key
    /// without the note (client-go's includes it), so a second event with the same reason but a
    /// different message would only bump the first one's series count and the new message would
    /// be lost. A recorder per note restores client-go's behaviour.
    recorders: std::sync::Mutex<std::collections::HashMap<(&'static str, String), Recorder>>,
    /// A shadow run publishes nothing: events are writes, and beside the CCM in charge they
    /// would confuse `kubectl describe`.
    silent: bool,
    /// With several drivers, every note starts with `driver <name>: `, so `kubectl describe`
    /// says which driver acted (the reporting controller keeps upstream's name).
    driver: Option<String>,
}

/// Recorders kept before the map is cleared (each is a client handle and a tiny cache; clearing
/// only means the next repeat of an event starts a new series).
const MAX_RECORDERS: usize = 1024;

impl Events {
    /// Recorders for `instance` (the leader-election identity), cut to the apiserver's 128 bytes
    /// for `reportingInstance`.
    pub(crate) fn new(client: Client, instance: String) -> Self {
        Events {
            client,
            instance: cut_to_bytes(&instance, EVENT_REPORTING_INSTANCE_LIMIT).to_string(),
            recorders: Default::default(),
            silent: false,
            driver: None,
        }
    }

    /// Recorders that publish nothing (a shadow run).
    pub(crate) fn silenced(mut self, silent: bool) -> Self {
        self.silent = silent;
        self
    }

    /// Events whose notes name `driver` (`None`: as they are, with one driver).
    pub(crate) fn for_driver(mut self, driver: Option<String>) -> Self {
        self.driver = driver;
        self
    }

    fn recorder(&self, controller: &'static str, note: &str) -> Recorder {
        let mut map = self.recorders.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_RECORDERS {
            map.clear();
        }
        map.entry((controller, note.to_string()))
            .or_insert_with(|| {
                Recorder::new(
                    self.client.clone(),
                    Reporter {
                        controller: controller.to_string(),
                        instance: Some(self.instance.clone()),
                    },
                )
            })
            .clone()
    }

    /// Publishes an event; failures are logged, never fatal (events are best effort). Reason and
    /// action are cut to 128 bytes and the note to 1024 bytes, on a character boundary: the
    /// apiserver counts bytes (`legacyValidateEvent`) and refuses a longer event with a 422.
    pub(crate) async fn publish(
        &self,
        controller: &'static str,
        regarding: &ObjectReference,
        warning: bool,
        reason: &str,
        note: &str,
        action: &str,
    ) {
        if self.silent {
            tracing::debug!(reason, "shadow: event not published");
            return;
        }
        let named;
        let note = match &self.driver {
            Some(driver) => {
                named = format!("driver {driver}: {note}");
                named.as_str()
            }
            None => note,
        };
        let reason = match cut_to_bytes(reason, EVENT_REASON_LIMIT) {
            "" => REPLACEMENT_EVENT_REASON,
            r => r,
        };
        let action = match cut_to_bytes(action, EVENT_ACTION_LIMIT) {
            "" => "Unknown",
            a => a,
        };
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: Some(cut_to_bytes(note, EVENT_NOTE_LIMIT).to_string()),
            action: action.to_string(),
            secondary: None,
        };
        let recorder = self.recorder(controller, event.note.as_deref().unwrap_or_default());
        if let Err(e) = recorder.publish(&event, regarding).await {
            tracing::warn!(reason, error = %e, "could not record event");
        }
    }

    /// Publishes the events a driver recorded during a call on `regarding`. A reason that is not
    /// UpperCamelCase of at most 128 bytes is replaced by [`REPLACEMENT_EVENT_REASON`] (the note
    /// says so); the refusals are returned for counting.
    pub(crate) async fn publish_driver_events(
        &self,
        controller: &'static str,
        regarding: &ObjectReference,
        events: &[DriverEvent],
    ) -> Vec<Violation> {
        let mut refused = Vec::new();
        for e in events {
            let (reason, note) = match check_event_reason(&e.reason) {
                Ok(()) => (e.reason.as_str(), e.message.clone()),
                Err(v) => {
                    let note = format!(
                        "(the driver's reason {} was refused: not UpperCamelCase of at most {EVENT_REASON_LIMIT} bytes) {}",
                        shown(&e.reason),
                        e.message
                    );
                    refused.push(v);
                    (REPLACEMENT_EVENT_REASON, note)
                }
            };
            self.publish(
                controller,
                regarding,
                e.kind == EventKind::Warning,
                reason,
                &note,
                "Driver",
            )
            .await;
        }
        refused
    }
}

/// Reason of the Warning event recording that part of a driver's answer was refused.
pub(crate) const ANSWER_REFUSED_REASON: &str = "DriverAnswerRefused";
/// Reason of the Warning event on a node whose provider ID belongs to another provider.
pub(crate) const FOREIGN_NODE_REASON: &str = "ForeignProviderID";
/// Reason of the Warning event on an uninitialised node two drivers' selectors claim.
pub(crate) const AMBIGUOUS_NODE_REASON: &str = "AmbiguousNodeOwner";
/// Reason of the Normal event on an uninitialised node no configured driver claims.
pub(crate) const NO_DRIVER_REASON: &str = "NoDriverForNode";

/// Entries kept per memory below before it is cleared (clearing only means an event repeats).
const MAX_REMEMBERED: usize = 10_000;

/// What the refusal reports already said, so a resync repeating the same answer does not
/// repeat the same event.
#[derive(Default)]
pub(crate) struct Refusals {
    /// Object UID (or key) → a digest of the last refusal note published for it.
    last_note: std::sync::Mutex<std::collections::HashMap<String, u64>>,
    /// Foreign nodes already reported (UID and provider ID).
    foreign: std::sync::Mutex<std::collections::HashSet<String>>,
}

fn object_key(regarding: &ObjectReference) -> String {
    regarding.uid.clone().unwrap_or_else(|| {
        format!(
            "{}/{}/{}",
            regarding.kind.as_deref().unwrap_or_default(),
            regarding.namespace.as_deref().unwrap_or_default(),
            regarding.name.as_deref().unwrap_or_default()
        )
    })
}

/// The object reference events point at.
pub(crate) fn reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    obj.object_ref(&())
}

/// Shared state of every controller.
pub(crate) struct Ctx {
    pub(crate) kube: Kube,
    pub(crate) cloud: Cloud,
    pub(crate) events: Events,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) config: ControllerConfig,
    pub(crate) nodes: Store<Node>,
    pub(crate) services: Store<Service>,
    pub(crate) refusals: Refusals,
    /// Which nodes and Services are this driver's (all of them with one driver).
    pub(crate) route: DriverView,
    /// A shadow run's would-be writes; `None` in a normal run.
    pub(crate) shadow: Option<Arc<ShadowLog>>,
}

impl Ctx {
    /// The name of this driver's `base` queue in metrics and logs: upstream's (`node`,
    /// `service`) with one driver, `base/<driver>` with several.
    pub(crate) fn queue_name(&self, base: &str) -> String {
        if self.route.is_single() {
            base.to_string()
        } else {
            format!("{base}/{}", self.route.name())
        }
    }

    /// The shadow report now; `None` outside shadow mode.
    pub(crate) fn shadow_report(&self) -> Option<crate::shadow::ShadowReport> {
        let shadow = self.shadow.as_ref()?;
        Some(shadow.report(&self.cloud.name(), &self.nodes, &self.services))
    }

    /// Sets `wasm_ccm_shadow_differences{driver,verdict}` from a fresh report (at scrape time).
    pub(crate) fn export_shadow_gauges(&self) {
        let Some(report) = self.shadow_report() else {
            return;
        };
        let driver = report.driver.as_str();
        self.metrics.clear("wasm_ccm_shadow_differences");
        for (verdict, count) in [
            ("pending", report.summary.pending),
            ("agreed", report.summary.agreed),
            ("diverged", report.summary.diverged),
        ] {
            self.metrics.set(
                "wasm_ccm_shadow_differences",
                &[("driver", driver), ("verdict", verdict)],
                count as f64,
            );
        }
    }

    /// Counts and times a finished driver call and records the events the driver asked for on
    /// `regarding`; returns the call's result.
    pub(crate) async fn finish_call<T>(
        &self,
        function: &str,
        outcome: Outcome<T>,
        reporter: &'static str,
        regarding: &ObjectReference,
    ) -> Result<T, CallError> {
        let (result, events) = self
            .cloud
            .observe(function, Subject::of(regarding), outcome);
        let refused = self
            .events
            .publish_driver_events(reporter, regarding, &events)
            .await;
        for v in &refused {
            self.count_refusal(function, regarding, v);
        }
        result
    }

    fn count_refusal(&self, function: &str, regarding: &ObjectReference, v: &Violation) {
        self.metrics.inc(
            "wasm_ccm_driver_answers_refused_total",
            &[("rule", v.rule.name())],
        );
        tracing::warn!(
            driver = %self.cloud.name(),
            function,
            object = %regarding.name.as_deref().unwrap_or_default(),
            rule = v.rule.name(),
            detail = %v.detail,
            "driver answer refused"
        );
    }

    /// Reports the parts of a driver's `function` answer about `regarding` that were refused:
    /// a counter per rule and a log line each, and one Warning event naming the driver and the
    /// rules, published again only when the refusals change (a resync with the same answer is
    /// quiet on the object).
    pub(crate) async fn report_refusals(
        &self,
        reporter: &'static str,
        regarding: &ObjectReference,
        function: &str,
        action: &str,
        violations: &[Violation],
    ) {
        if violations.is_empty() {
            // A clean answer: the next refusal is news again.
            self.clear_refusals(regarding);
            return;
        }
        for v in violations {
            self.count_refusal(function, regarding, v);
        }
        let driver = self.cloud.name();
        // The rules first: the details may be cut at the apiserver's 1024 bytes.
        let mut rules: Vec<&str> = Vec::new();
        for v in violations {
            if !rules.contains(&v.rule.name()) {
                rules.push(v.rule.name());
            }
        }
        let note = format!(
            "driver {} answered {function} with parts that were not written (rules: {}): {}",
            shown(&driver),
            rules.join(", "),
            violations
                .iter()
                .map(Violation::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        );
        {
            let mut last = self
                .refusals
                .last_note
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if last.len() >= MAX_REMEMBERED {
                last.clear();
            }
            let key = object_key(regarding);
            // A digest, not the note: notes can be long and up to MAX_REMEMBERED are kept.
            let digest = note_digest(&note);
            if last.get(&key) == Some(&digest) {
                return;
            }
            last.insert(key, digest);
        }
        self.events
            .publish(
                reporter,
                regarding,
                true,
                ANSWER_REFUSED_REASON,
                &note,
                action,
            )
            .await;
    }

    /// Forgets what was reported about `regarding`, after an answer with nothing refused (a
    /// later refusal is news again).
    pub(crate) fn clear_refusals(&self, regarding: &ObjectReference) {
        self.refusals
            .last_note
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&object_key(regarding));
    }

    /// Whether this driver must leave `node` alone: it carries another provider's ID, or (with
    /// several drivers) it belongs to another configured driver, or no driver or more than one
    /// claims it. The first time per node and reason this logs and records one event (by one
    /// driver only, so a node gets one event however many drivers run), later passes log at
    /// debug level. Such a node is never initialised, deleted or tainted on this driver's word.
    pub(crate) async fn skip_foreign_node(
        &self,
        reporter: &'static str,
        node: &Node,
        action: &str,
    ) -> bool {
        let existing = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .unwrap_or_default();
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let (reason, warning, message) = match self.route.node_owner(node) {
            NodeOwner::Driver(i) if i == self.route.index() => return false,
            NodeOwner::Driver(i) => {
                tracing::debug!(node = %name, owner = %self.route.name_of(i), driver = %self.route.name(), "another driver's node");
                return true;
            }
            NodeOwner::Foreign => {
                let scheme = self.cloud.provider_id_scheme();
                let message = if self.route.is_single() {
                    format!(
                        "node {name} has provider ID {}, which is not of the driver's scheme {}; the driver {} is not asked about it and the node is never initialised, deleted or tainted by this controller manager",
                        shown(existing),
                        shown(&format!("{scheme}://")),
                        shown(&self.cloud.name())
                    )
                } else {
                    format!(
                        "node {name} has provider ID {}, whose scheme no configured driver has ({}); no driver is asked about it and the node is never initialised, deleted or tainted by this controller manager",
                        shown(existing),
                        self.schemes()
                    )
                };
                (FOREIGN_NODE_REASON, true, message)
            }
            NodeOwner::Ambiguous(drivers) => {
                let names: Vec<&str> = drivers.iter().map(|i| self.route.name_of(*i)).collect();
                (
                    AMBIGUOUS_NODE_REASON,
                    true,
                    format!(
                        "node {name} has no provider ID and the node selectors of drivers {} all match its labels; no driver is asked about it and it keeps its taint until its labels or the selectors name one driver",
                        names.join(" and ")
                    ),
                )
            }
            NodeOwner::Unrouted => (
                NO_DRIVER_REASON,
                false,
                format!(
                    "node {name} has no provider ID, no driver's node selector matches its labels and no driver is the default for nodes; it is left to whoever owns it (another controller manager)"
                ),
            ),
        };
        if !self.route.reports_unowned() {
            return true;
        }
        let first = {
            let mut seen = self
                .refusals
                .foreign
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if seen.len() >= MAX_REMEMBERED {
                seen.clear();
            }
            seen.insert(format!(
                "{}\n{existing}\n{reason}",
                node.metadata.uid.as_deref().unwrap_or(name)
            ))
        };
        if !first {
            tracing::debug!(node = %name, provider_id = %existing, reason, "skipping a node no driver here owns");
            return true;
        }
        let label = match reason {
            FOREIGN_NODE_REASON => "foreign",
            AMBIGUOUS_NODE_REASON => "ambiguous",
            _ => "unrouted",
        };
        self.metrics.inc(
            "wasm_ccm_node_ownership_skipped_total",
            &[("reason", label)],
        );
        tracing::info!(node = %name, provider_id = %existing, reason, "skipping a node: {message}");
        self.events
            .publish(
                reporter,
                &reference(node),
                warning,
                reason,
                &message,
                action,
            )
            .await;
        true
    }

    /// The configured drivers' schemes, for messages.
    fn schemes(&self) -> String {
        self.route
            .routing()
            .drivers()
            .iter()
            .map(|d| format!("{}://", d.provider_id_scheme))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A 64-bit digest of an event note, to tell a repeated refusal from a new one.
fn note_digest(note: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    note.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_ccm_runtime::types::Ingress;

    fn lb_service(
        name: &str,
        annotations: serde_json::Value,
        lb_ip: Option<&str>,
        ingress: &[&str],
    ) -> Service {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default", "uid": name, "annotations": annotations},
            "spec": {"type": "LoadBalancer", "loadBalancerIP": lb_ip},
            "status": {"loadBalancer": {"ingress": ingress.iter().map(|ip| serde_json::json!({"ip": ip})).collect::<Vec<_>>()}},
        }))
        .expect("a Service")
    }

    fn names(services: Vec<wasm_ccm_runtime::types::Service>) -> Vec<String> {
        let mut names: Vec<String> = services.into_iter().map(|s| s.name).collect();
        names.sort();
        names
    }

    // A runtime only because a kube `Client` needs one to exist; nothing is requested.
    #[tokio::test]
    async fn service_queries_return_only_matches_with_this_process_results_laid_over() {
        let config = kube::Config::new("http://127.0.0.1:1".parse().expect("a URL"));
        let client = kube::Client::try_from(config).expect("a client");
        let informer = crate::informer::Informer::<Service>::new(Api::all(client));
        let mut cluster_ip: Service = lb_service(
            "internal",
            serde_json::json!({"x/ip": "10.0.0.9"}),
            None,
            &[],
        );
        cluster_ip.spec.as_mut().expect("spec").type_ = Some("ClusterIP".into());
        informer.replace(vec![
            lb_service(
                "a",
                serde_json::json!({"x/ip": "10.0.0.1"}),
                None,
                &["10.0.0.1"],
            ),
            lb_service(
                "b",
                serde_json::json!({"x/other": "1"}),
                Some("2001:db8::1"),
                &[],
            ),
            lb_service("c", serde_json::json!({}), None, &["10.0.0.3"]),
            cluster_ip,
        ]);
        let view = StoreCluster::new(
            informer.store(),
            crate::routing::Routing::single("static", "static").view(0),
        );
        let q = |ips: &[&str]| ips.iter().map(|s| s.to_string()).collect::<Vec<_>>();

        assert_eq!(names(view.services_with_annotation("x/ip", &[])), ["a"]);
        assert_eq!(
            names(view.services_with_annotation("x/ip", &q(&["10.0.0.1"]))),
            ["a"]
        );
        assert!(
            view.services_with_annotation("x/ip", &q(&["10.0.0.2"]))
                .is_empty()
        );
        // Addresses compare as addresses; spec.loadBalancerIP counts; a Service that is not a
        // LoadBalancer never shows.
        assert_eq!(
            names(view.services_with_address(&q(&["2001:0db8::1", "10.0.0.3"]))),
            ["b", "c"]
        );
        assert!(view.services_with_address(&q(&["10.0.0.9"])).is_empty());
        assert!(view.services_with_address(&[]).is_empty());

        // This process's latest result counts before the watch delivers it: c took 10.0.0.7
        // and its annotation; a dropped its annotation and its old ingress.
        view.record(
            "default/c",
            Some(PendingWrite {
                set_annotations: vec![("x/ip".into(), "10.0.0.7".into())],
                remove_annotations: vec![],
                ingress: vec![Ingress {
                    ip: Some("10.0.0.7".into()),
                    hostname: None,
                    ip_mode: None,
                }],
            }),
        );
        view.record(
            "default/a",
            Some(PendingWrite {
                set_annotations: vec![],
                remove_annotations: vec!["x/ip".into()],
                ingress: vec![],
            }),
        );
        assert_eq!(names(view.services_with_annotation("x/ip", &[])), ["c"]);
        assert_eq!(names(view.services_with_address(&q(&["10.0.0.7"]))), ["c"]);
        assert!(
            view.services_with_address(&q(&["10.0.0.3", "10.0.0.1"]))
                .is_empty()
        );
        let c = view.services_with_annotation("x/ip", &q(&["10.0.0.7"]));
        assert_eq!(
            c[0].annotations,
            vec![("x/ip".to_string(), "10.0.0.7".to_string())]
        );
        // Every query agrees with the full list it narrows.
        assert_eq!(names(view.load_balancer_services()), ["a", "b", "c"]);

        // Claims: addresses and UIDs, in the query's spelling, with the pending overlay (c's
        // new annotation and ingress; a's removed annotation and ingress claim nothing).
        use wasm_ccm_runtime::AddressUse;
        let mut claims: Vec<(String, String, AddressUse)> = view
            .address_claims(
                &q(&["10.0.0.7", "2001:0DB8::1", "10.0.0.1", "10.0.0.9"]),
                "x/ip",
            )
            .into_iter()
            .map(|c| (c.ip, c.service_uid, c.used_as))
            .collect();
        claims.sort_by(|x, y| (&x.0, &x.1).cmp(&(&y.0, &y.1)));
        assert_eq!(
            claims,
            [
                (
                    "10.0.0.7".to_string(),
                    "c".to_string(),
                    AddressUse::Annotation
                ),
                ("10.0.0.7".to_string(), "c".to_string(), AddressUse::Ingress),
                (
                    "2001:0DB8::1".to_string(),
                    "b".to_string(),
                    AddressUse::LoadBalancerIp
                ),
            ]
        );
        assert!(view.address_claims(&[], "x/ip").is_empty());
        // Without an annotation name, annotations claim nothing.
        assert_eq!(view.address_claims(&q(&["10.0.0.7"]), "").len(), 1);
    }
}
