//! In-process test support: a scripted [`FakeCloud`] behind the Cloud seam and a [`Harness`]
//! that runs the controllers' reconcile bodies against the Kubernetes simulator on loopback
//! (real HTTP, the real informers), so upstream's controller test tables run without a
//! WebAssembly component or a child process.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::{Api, Client};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use wasm_ccm_runtime::Exports;
use wasm_ccm_runtime::http::HttpExchange;
use wasm_ccm_runtime::types::{
    EnsureResult, Ingress, InstanceMetadata, InstancePage, ListedInstance, Node as WitNode,
    ProviderError, ProviderInfo, Route, Service as WitService,
};
use wasm_ccm_runtime::{CallError, CallScope, DriverEvent, Outcome, SharedNodes};
use wasm_ccm_sim::kube::KubeSim;

use crate::cloud::{CloudProvider, Fixed, SharedCloud};
use crate::config::ControllerConfig;
use crate::ctx::Ctx;
use crate::machinery::informer::Informer;
use crate::metrics::Metrics;
use crate::run::new_ctx;

/// The provider-ID scheme of the fake cloud.
pub(crate) const SCHEME: &str = "fake";

fn done<T>(result: Result<T, ProviderError>) -> Outcome<T> {
    Outcome {
        result: result.map_err(CallError::Provider),
        events: Vec::new(),
        http: Vec::new(),
        elapsed: Duration::ZERO,
        peak_memory: 0,
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A cloud scripted per test: instances by node name, load balancers by Service key, routes,
/// and an error per function to inject. Every call is recorded as `function object`.
pub(crate) struct FakeCloud {
    pub(crate) exports: Exports,
    pub(crate) annotation_prefixes: Vec<String>,
    /// `instance-metadata` answers by node name (absent: `not-found`).
    pub(crate) instances: Mutex<HashMap<String, Result<InstanceMetadata, ProviderError>>>,
    /// `instance-exists` answers by node name (absent: true).
    pub(crate) exists: Mutex<HashMap<String, Result<bool, ProviderError>>>,
    /// `instance-shutdown` answers by node name (absent: false).
    pub(crate) shutdown: Mutex<HashMap<String, Result<bool, ProviderError>>>,
    /// `instance-listing` pages, the page token being the page's index (`None`: the fake
    /// cannot list and answers `not-implemented`, like a driver of an SDK's default).
    pub(crate) pages: Mutex<Option<Vec<InstancePage>>>,
    /// Load balancers by Service key (`namespace/name`): their ingress.
    pub(crate) balancers: Mutex<BTreeMap<String, Vec<Ingress>>>,
    /// The ingress a new load balancer gets.
    pub(crate) next_ingress: Mutex<Vec<Ingress>>,
    /// Errors to answer, by function (`load-balancer.ensure`, …); kept until removed.
    pub(crate) errors: Mutex<HashMap<&'static str, ProviderError>>,
    /// The routes in the cloud.
    pub(crate) routes: Mutex<Vec<Route>>,
    /// Every call, as `function object` (the object is the Service key or the node name).
    pub(crate) calls: Mutex<Vec<String>>,
    /// The node names of each ensure/update, by Service key.
    pub(crate) backends: Mutex<BTreeMap<String, Vec<String>>>,
    /// Every successful `load-balancer.update`, in order: (Service key, node names).
    pub(crate) updates: Mutex<Vec<(String, Vec<String>)>>,
    /// Shadow runs: the writes a shadow host refuses, by load-balancer function (each call's
    /// outcome carries them as refused exchanges; the call answers as scripted otherwise, like
    /// a driver that carries on past a refused write).
    pub(crate) refused: Mutex<HashMap<&'static str, Vec<String>>>,
    /// Events the driver records on every call of a function (`routes.create`,
    /// `instances.instance-metadata`), by function.
    pub(crate) events: Mutex<HashMap<&'static str, Vec<DriverEvent>>>,
    /// Calls held until released, by function (see [`FakeCloud::hold`]).
    pub(crate) holds: Mutex<HashMap<&'static str, Arc<Hold>>>,
}

/// Calls of a function held in flight until [`Hold::release`]: how many are held now and the
/// most ever held at once, so a test can see how many calls a controller has in flight.
#[derive(Default)]
pub(crate) struct Hold {
    held: std::sync::atomic::AtomicUsize,
    peak: std::sync::atomic::AtomicUsize,
    released: CancellationToken,
}

impl Hold {
    /// Calls held now.
    pub(crate) fn held(&self) -> usize {
        self.held.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The most calls held at once so far.
    pub(crate) fn peak(&self) -> usize {
        self.peak.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Lets every held call (and every later one) answer.
    pub(crate) fn release(&self) {
        self.released.cancel();
    }

    /// Polls (bounded) until `held` calls are in flight; panics with `what` otherwise.
    pub(crate) async fn until_held(&self, held: usize, what: &str) {
        for _ in 0..1000 {
            if self.held() >= held {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{what}: {} calls held, never {held}", self.held());
    }

    async fn pass(&self) {
        use std::sync::atomic::Ordering::SeqCst;
        let now = self.held.fetch_add(1, SeqCst) + 1;
        self.peak.fetch_max(now, SeqCst);
        self.released.cancelled().await;
        self.held.fetch_sub(1, SeqCst);
    }
}

impl Default for FakeCloud {
    fn default() -> Self {
        FakeCloud {
            exports: Exports {
                instances: true,
                load_balancer: true,
                routes: true,
            },
            annotation_prefixes: Vec::new(),
            instances: Mutex::default(),
            exists: Mutex::default(),
            shutdown: Mutex::default(),
            pages: Mutex::default(),
            balancers: Mutex::default(),
            next_ingress: Mutex::new(vec![Ingress {
                ip: Some("192.0.2.10".into()),
                hostname: None,
                ip_mode: None,
            }]),
            errors: Mutex::default(),
            routes: Mutex::default(),
            calls: Mutex::default(),
            backends: Mutex::default(),
            updates: Mutex::default(),
            refused: Mutex::default(),
            events: Mutex::default(),
            holds: Mutex::default(),
        }
    }
}

fn service_key(s: &WitService) -> String {
    format!("{}/{}", s.namespace, s.name)
}

impl FakeCloud {
    /// An instance for `node` with this provider ID (`fake://<id>`), type and zone.
    pub(crate) fn add_instance(&self, node: &str, meta: InstanceMetadata) {
        lock(&self.instances).insert(node.to_string(), Ok(meta));
    }

    /// Lists `instances` in one page from now on.
    pub(crate) fn list(&self, instances: Vec<ListedInstance>) {
        *lock(&self.pages) = Some(vec![InstancePage {
            instances,
            next: None,
        }]);
    }

    /// Makes `function` fail with `error` until [`FakeCloud::clear_error`].
    pub(crate) fn fail(&self, function: &'static str, error: ProviderError) {
        lock(&self.errors).insert(function, error);
    }

    /// Stops failing `function`.
    pub(crate) fn clear_error(&self, function: &'static str) {
        lock(&self.errors).remove(function);
    }

    /// Holds every call of `function` until the returned [`Hold`] is released (calls already
    /// answered are not affected). The call is recorded when it starts, before it is held.
    pub(crate) fn hold(&self, function: &'static str) -> Arc<Hold> {
        Arc::clone(lock(&self.holds).entry(function).or_default())
    }

    /// Waits while `function` is held (see [`FakeCloud::hold`]).
    async fn held(&self, function: &'static str) {
        let hold = lock(&self.holds).get(function).cloned();
        if let Some(hold) = hold {
            hold.pass().await;
        }
    }

    /// The calls so far, in order.
    pub(crate) fn calls(&self) -> Vec<String> {
        lock(&self.calls).clone()
    }

    /// The calls of `function` so far.
    pub(crate) fn calls_of(&self, function: &str) -> usize {
        let prefix = format!("{function} ");
        lock(&self.calls)
            .iter()
            .filter(|c| c.starts_with(&prefix))
            .count()
    }

    fn record(&self, function: &'static str, object: &str) -> Result<(), ProviderError> {
        lock(&self.calls).push(format!("{function} {object}"));
        match lock(&self.errors).get(function) {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// `outcome` with the events scripted for `function` (see `events`).
    fn with_events<T>(&self, function: &'static str, mut outcome: Outcome<T>) -> Outcome<T> {
        outcome.events = lock(&self.events)
            .get(function)
            .cloned()
            .unwrap_or_default();
        outcome
    }

    /// `outcome` with the writes scripted as refused for `function` (see `refused`).
    fn refusing<T>(&self, function: &'static str, mut outcome: Outcome<T>) -> Outcome<T> {
        let refused = lock(&self.refused)
            .get(function)
            .cloned()
            .unwrap_or_default();
        outcome.http = refused
            .into_iter()
            .map(|write| HttpExchange {
                method: write.split(' ').next().unwrap_or_default().to_string(),
                url: write.split(' ').nth(1).unwrap_or_default().to_string(),
                status: None,
                error: Some("denied".into()),
                mutating: true,
                shadowed: Some(write),
            })
            .collect();
        outcome
    }

    fn answer<T: Clone>(
        &self,
        function: &'static str,
        node: &WitNode,
        table: &Mutex<HashMap<String, Result<T, ProviderError>>>,
        absent: Result<T, ProviderError>,
    ) -> Outcome<T> {
        let answer = self
            .record(function, &node.name)
            .and_then(|()| lock(table).get(&node.name).cloned().unwrap_or(absent));
        self.with_events(function, done(answer))
    }
}

impl CloudProvider for FakeCloud {
    fn name(&self) -> String {
        "fake".into()
    }

    fn info(&self) -> ProviderInfo {
        ProviderInfo {
            name: "fake".into(),
            version: "0.0.0".into(),
            provider_id_scheme: SCHEME.into(),
            default_egress: Vec::new(),
            env_prefixes: Vec::new(),
            annotation_prefixes: self.annotation_prefixes.clone(),
            secrets: Vec::new(),
        }
    }

    fn exports(&self) -> Exports {
        self.exports
    }

    fn instance_exists<'a>(
        &'a self,
        node: &'a WitNode,
        _scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<bool>> {
        Box::pin(
            async move { self.answer("instances.instance-exists", node, &self.exists, Ok(true)) },
        )
    }

    fn instance_shutdown<'a>(
        &'a self,
        node: &'a WitNode,
        _scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<bool>> {
        Box::pin(async move {
            self.answer(
                "instances.instance-shutdown",
                node,
                &self.shutdown,
                Ok(false),
            )
        })
    }

    fn instance_metadata<'a>(
        &'a self,
        node: &'a WitNode,
        _scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<InstanceMetadata>> {
        Box::pin(async move {
            self.answer(
                "instances.instance-metadata",
                node,
                &self.instances,
                Err(ProviderError::NotFound(format!(
                    "no instance for {}",
                    node.name
                ))),
            )
        })
    }

    fn list_instances<'a>(
        &'a self,
        page: Option<&'a str>,
        _scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<InstancePage>> {
        const FUNCTION: &str = "instance-listing.list-instances";
        Box::pin(async move {
            // Without pages the fake is a driver without the export: the host's call never
            // reaches it, so nothing is recorded (the tables' call lists stay upstream's).
            let Some(pages) = lock(&self.pages).clone() else {
                return done(Err(ProviderError::NotImplemented));
            };
            let answer = self.record(FUNCTION, page.unwrap_or("-")).and_then(|()| {
                let index = page.map_or(Ok(0), |t| t.parse::<usize>());
                index
                    .ok()
                    .and_then(|i| pages.get(i).cloned())
                    .ok_or_else(|| ProviderError::Permanent(format!("no page {page:?}")))
            });
            self.with_events(FUNCTION, done(answer))
        })
    }

    fn load_balancer_get<'a>(
        &'a self,
        service: &'a WitService,
        _scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<Option<Vec<Ingress>>>> {
        Box::pin(async move {
            let key = service_key(service);
            done(
                self.record("load-balancer.get", &key)
                    .map(|()| lock(&self.balancers).get(&key).cloned()),
            )
        })
    }

    fn load_balancer_ensure<'a>(
        &'a self,
        service: &'a WitService,
        nodes: &'a SharedNodes,
        _scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<EnsureResult>> {
        Box::pin(async move {
            let key = service_key(service);
            let recorded = self.record("load-balancer.ensure", &key);
            self.held("load-balancer.ensure").await;
            let answer = recorded.map(|()| {
                lock(&self.backends).insert(
                    key.clone(),
                    nodes.nodes().iter().map(|n| n.name.clone()).collect(),
                );
                let ingress = lock(&self.balancers)
                    .entry(key)
                    .or_insert_with(|| lock(&self.next_ingress).clone())
                    .clone();
                EnsureResult {
                    ingress,
                    set_annotations: Vec::new(),
                    remove_annotations: Vec::new(),
                }
            });
            self.refusing("load-balancer.ensure", done(answer))
        })
    }

    fn load_balancer_update<'a>(
        &'a self,
        service: &'a WitService,
        nodes: &'a SharedNodes,
        _scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<()>> {
        Box::pin(async move {
            let key = service_key(service);
            let recorded = self.record("load-balancer.update", &key);
            self.held("load-balancer.update").await;
            let answer = recorded.map(|()| {
                let names: Vec<String> = nodes.nodes().iter().map(|n| n.name.clone()).collect();
                lock(&self.updates).push((key.clone(), names.clone()));
                lock(&self.backends).insert(key, names);
            });
            self.refusing("load-balancer.update", done(answer))
        })
    }

    fn load_balancer_delete<'a>(
        &'a self,
        service: &'a WitService,
        _scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<()>> {
        Box::pin(async move {
            let key = service_key(service);
            let answer = self.record("load-balancer.delete", &key).map(|()| {
                lock(&self.balancers).remove(&key);
            });
            self.refusing("load-balancer.delete", done(answer))
        })
    }

    fn routes_list<'a>(&'a self, _scope: &'a CallScope) -> BoxFuture<'a, Outcome<Vec<Route>>> {
        Box::pin(async move {
            done(
                self.record("routes.list", "")
                    .map(|()| lock(&self.routes).clone()),
            )
        })
    }

    fn routes_create<'a>(
        &'a self,
        name_hint: &'a str,
        route: &'a Route,
        _scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<()>> {
        Box::pin(async move {
            let recorded = self.record("routes.create", &route.target_node);
            self.held("routes.create").await;
            let answer = recorded.map(|()| {
                let mut route = route.clone();
                route.name = name_hint.to_string();
                lock(&self.routes).push(route);
            });
            self.with_events("routes.create", done(answer))
        })
    }

    fn routes_delete<'a>(
        &'a self,
        route: &'a Route,
        _scope: &'a CallScope,
    ) -> BoxFuture<'a, Outcome<()>> {
        Box::pin(async move {
            let recorded = self.record("routes.delete", &route.target_node);
            self.held("routes.delete").await;
            done(recorded.map(|()| {
                lock(&self.routes).retain(|r| r.name != route.name);
            }))
        })
    }

    fn housekeeping<'a>(&'a self, _scope: &'a CallScope) -> BoxFuture<'a, Outcome<()>> {
        Box::pin(async move { done(self.record("provider.housekeeping", "")) })
    }
}

/// The controllers' context over `client` and `cloud` with `config` as given, and the informers
/// whose stores it reads (not running: the caller runs them, or sends no request at all).
pub(crate) fn test_ctx(
    client: &Client,
    cloud: &Arc<FakeCloud>,
    config: ControllerConfig,
) -> (Arc<Ctx>, Informer<Node>, Informer<Service>) {
    let nodes = Informer::new(Api::<Node>::all(client.clone()));
    let services = Informer::new(Api::<Service>::all(client.clone()));
    let route = crate::routing::Routing::alone(&cloud.name(), &cloud.provider_id_scheme());
    let ctx = new_ctx(
        client.clone().into(),
        Arc::new(Fixed(Arc::clone(cloud) as SharedCloud)),
        route.view(0),
        config,
        Arc::new(Metrics::default()),
        "test",
        nodes.store(),
        services.store(),
    );
    (ctx, nodes, services)
}

/// The Kubernetes simulator on loopback, running informers and a [`Ctx`] over a [`FakeCloud`]:
/// a test seeds objects, calls a controller's reconcile body and reads the simulator.
pub(crate) struct Harness {
    pub(crate) sim: KubeSim,
    pub(crate) client: Client,
    pub(crate) cloud: Arc<FakeCloud>,
    pub(crate) ctx: Arc<Ctx>,
    cancel: CancellationToken,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl Harness {
    /// Starts the simulator seeded with `objects` and waits until the informers listed them.
    pub(crate) async fn start(cloud: FakeCloud, objects: Vec<Value>) -> Harness {
        Harness::start_with(cloud, objects, ControllerConfig::default()).await
    }

    /// [`Harness::start`] with controller settings.
    pub(crate) async fn start_with(
        cloud: FakeCloud,
        objects: Vec<Value>,
        config: ControllerConfig,
    ) -> Harness {
        let sim = KubeSim::start("127.0.0.1:0".parse().expect("loopback address"))
            .await
            .expect("start the Kubernetes simulator");
        sim.seed(objects).expect("seed the simulator");
        let client = Client::try_from(kube::Config::new(sim.url().parse().expect("simulator URL")))
            .expect("client for the simulator");
        let cloud = Arc::new(cloud);
        let config = ControllerConfig {
            // Tests are not paced by the client-side limit.
            kube_api_qps: 0.0,
            ..config
        };
        let (ctx, nodes, services) = test_ctx(&client, &cloud, config);
        let cancel = CancellationToken::new();
        tokio::spawn(nodes.run(cancel.clone()));
        tokio::spawn(services.run(cancel.clone()));
        ctx.nodes.wait_synced().await;
        ctx.services.wait_synced().await;
        Harness {
            sim,
            client,
            cloud,
            ctx,
            cancel,
        }
    }

    /// A Node as the simulator holds it now.
    pub(crate) fn node(&self, name: &str) -> Option<Value> {
        self.sim.get("nodes", None, name)
    }

    /// A Service as the simulator holds it now.
    pub(crate) fn service(&self, namespace: &str, name: &str) -> Option<Value> {
        self.sim.get("services", Some(namespace), name)
    }

    /// Waits (bounded) until the informers' caches show the simulator's current state of every
    /// Node and Service, so a reconcile reads what a test just wrote.
    pub(crate) async fn settle(&self) {
        let version = |v: &Value| {
            v.pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        for _ in 0..500 {
            let nodes_current = self.sim.list("nodes").iter().all(|n| {
                let name = n.pointer("/metadata/name").and_then(Value::as_str);
                name.and_then(|name| self.ctx.nodes.get(name))
                    .and_then(|c| c.metadata.resource_version.clone())
                    == Some(version(n))
            });
            let services_current = self.sim.list("services").iter().all(|s| {
                let key = format!(
                    "{}/{}",
                    s.pointer("/metadata/namespace")
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                    s.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                );
                self.ctx
                    .services
                    .get(&key)
                    .and_then(|c| c.metadata.resource_version.clone())
                    == Some(version(s))
            });
            let counts = self.ctx.nodes.list().len() == self.sim.list("nodes").len()
                && self.ctx.services.list().len() == self.sim.list("services").len();
            if nodes_current && services_current && counts {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the informers did not catch up with the simulator within 5 s");
    }

    /// The writes (every request but GET) to the object `name` of `resource` (a plural, e.g.
    /// `services`) so far, as `METHOD subresource` (`PATCH status`; empty subresource: the
    /// main resource).
    pub(crate) fn writes(&self, resource: &str, name: &str) -> Vec<String> {
        self.sim
            .requests()
            .into_iter()
            .filter(|r| {
                r.method != "GET"
                    && r.resource.as_deref() == Some(resource)
                    && r.name.as_deref() == Some(name)
            })
            .map(|r| format!("{} {}", r.method, r.subresource.unwrap_or_default()))
            .collect()
    }

    /// The events recorded so far, as `reason: note` of the object named `name`.
    pub(crate) fn events_for(&self, name: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for e in self
            .sim
            .list("events.events.k8s.io")
            .into_iter()
            .chain(self.sim.list("events"))
        {
            let regarding = e
                .pointer("/regarding/name")
                .or_else(|| e.pointer("/involvedObject/name"))
                .and_then(Value::as_str);
            if regarding != Some(name) {
                continue;
            }
            let reason = e.pointer("/reason").and_then(Value::as_str).unwrap_or("");
            let note = e
                .pointer("/note")
                .or_else(|| e.pointer("/message"))
                .and_then(Value::as_str)
                .unwrap_or("");
            out.push(format!("{reason}: {note}"));
        }
        out
    }
}

/// Polls `future` while the runtime runs every other task a few hundred times over: it must
/// not finish meanwhile (it waits on something held, e.g. a [`Hold`]); panics with `what` if it
/// does.
pub(crate) async fn stays_pending<F: std::future::Future>(
    future: std::pin::Pin<&mut F>,
    what: &str,
) {
    let spin = async {
        for _ in 0..200 {
            tokio::task::yield_now().await;
        }
    };
    tokio::select! {
        _ = future => panic!("{what}"),
        () = spin => {}
    }
}

/// A Node object for the simulator: `name`, with the uninitialized taint when `tainted`, a
/// provider ID when given, Ready when `ready`.
pub(crate) fn node_json(
    name: &str,
    provider_id: Option<&str>,
    tainted: bool,
    ready: bool,
) -> Value {
    let mut node = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {}},
        "spec": {},
        "status": {
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
        }
    });
    if let Some(id) = provider_id {
        node["spec"]["providerID"] = id.into();
    }
    if tainted {
        node["spec"]["taints"] = serde_json::json!([{
            "key": crate::controllers::node::rules::UNINITIALIZED_TAINT,
            "value": "true",
            "effect": "NoSchedule"
        }]);
    }
    node
}

/// A Service of type LoadBalancer with one TCP port.
pub(crate) fn lb_service_json(namespace: &str, name: &str) -> Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080}],
            "selector": {"app": name}
        }
    })
}

/// Instance metadata of the fake cloud for `id`.
pub(crate) fn instance(id: &str) -> InstanceMetadata {
    InstanceMetadata {
        provider_id: format!("{SCHEME}://{id}"),
        instance_type: "standard".into(),
        zone: "zone-a".into(),
        region: "region-1".into(),
        addresses: Vec::new(),
        additional_labels: Vec::new(),
    }
}
