//! A stateful Kubernetes API server simulator over plain HTTP, or HTTPS with its own CA
//! ([`KubeSim::start_tls`]) (JSON; protobuf request bodies of the kinds in `protobuf`).
//!
//! Serves core `v1` namespaces, nodes, services, events, configmaps, pods and serviceaccounts
//! (with their `token` subresource, a TokenRequest: [`tokens`]),
//! `events.k8s.io/v1` events (one storage with core events, two views) and
//! `coordination.k8s.io/v1` leases from one generic JSON store with the apiserver's semantics
//! where controllers notice them: resourceVersions and optimistic concurrency, status
//! subresources, merge/JSON/strategic-merge patches (server-side apply is refused), finalizers,
//! namespace termination ([`namespaces`]), watches with history and 410 Gone, label and per-kind
//! field selectors, list resourceVersion semantics and pages from the first page's snapshot,
//! dry runs, Service
//! IP and node-port allocation, the apiserver's validation and defaulting of everything a
//! cloud-controller-manager reads or writes (each rule names its source in `validation`,
//! `services`, `nodes` and `events`), and `Status` errors with causes. Fault injection and a
//! request log make it a test fixture; bearer tokens and RBAC ([`rbac`]) can be switched on. crates/sim/README.md lists what it does not do.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use wasm_ccm_sim::kube::KubeSim;
//! let sim = KubeSim::start("127.0.0.1:0".parse()?).await?;
//! sim.seed(vec![serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})])?;
//! sim.faults().conflict_next_writes("nodes", 1); // the next node PUT/PATCH gets 409
//! println!("{}", sim.url());
//! # Ok(()) }
//! ```

mod allocated;
mod api;
mod control;
mod discovery;
mod error;
mod events;
mod faults;
mod log;
mod meta;
mod namespaces;
mod node_ports;
mod nodes;
mod obj_key;
mod openapi;
mod patch;
mod protobuf;
pub mod rbac;
mod rbac_api;
mod request;
mod resources;
mod respond;
mod restart;
mod reviews;
mod seed;
mod selector;
mod server;
mod services;
mod shared;
mod store;
mod table;
mod tls;
mod tokens;
mod user;
mod validation;
mod watch;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use serde_json::Value;

use crate::serving::{self, Served};

pub use discovery::DEFAULT_SERVER_VERSION;
pub(crate) use discovery::major_minor as check_server_version;
pub use error::{ApiError, Reason};
pub use faults::{FaultAction, FaultCommand, Faults, RequestMatcher};
pub use log::{LOG_CAPACITY, RequestCounts, RequestRecord};
pub use node_ports::PortRange;
pub use patch::{PatchError, PatchKind, json_patch, merge_patch, strategic_merge_patch};
pub use request::Verb;
pub use restart::RestartStats;
pub use seed::{SeedError, load_file as load_seed_file, parse as parse_seed};
pub use store::{DEFAULT_NAMESPACES, HISTORY_LIMIT, WATCH_BUFFER};
pub use tokens::{EXPIRY_LEEWAY, service_account_groups};

use resources::ResourceType;
use store::{ObjKey, Scope, Store};

pub(crate) use shared::Shared;
pub use shared::WatchList;

/// Tunables of a simulator; [`KubeSimOptions::default`] is what [`KubeSim::start`] uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeSimOptions {
    /// Changes kept for watches that resume from a resourceVersion ([`HISTORY_LIMIT`]). Each
    /// kept change holds a version of an object, so this bounds the memory of old versions.
    pub history_limit: usize,
    /// Changes a watch may fall behind before it is ended with 410 ([`WATCH_BUFFER`]).
    pub watch_buffer: usize,
    /// Whether request records are kept from the start (counters always count).
    pub request_log: bool,
    /// Whether streaming lists are served, or refused as an apiserver without them refuses
    /// them ([`WatchList`]).
    pub watch_list: WatchList,
    /// The Kubernetes release `/version` reports as `gitVersion` (`major` and `minor` follow
    /// it), e.g. `v1.35.2`: what clients judge their version skew by and what `wasm-ccm run`
    /// checks against the versions it supports. Default [`DEFAULT_SERVER_VERSION`]; a text that
    /// is no `v<major>.<minor>.<patch>[-suffix]` makes the start fail.
    pub server_version: String,
    /// The range Services' node ports come from, as `kube-apiserver
    /// --service-node-port-range` (default `30000-32767`).
    pub service_node_port_range: PortRange,
}

impl Default for KubeSimOptions {
    fn default() -> Self {
        KubeSimOptions {
            history_limit: HISTORY_LIMIT,
            watch_buffer: WATCH_BUFFER,
            request_log: true,
            watch_list: WatchList::Enabled,
            server_version: DEFAULT_SERVER_VERSION.to_string(),
            service_node_port_range: PortRange::DEFAULT,
        }
    }
}

/// Stops the server when the last [`KubeSim`] clone goes away.
struct ServerHandle {
    shared: Arc<Shared>,
    served: Served,
}

impl ServerHandle {
    /// Open watches are in-flight requests: a graceful shutdown would wait for them forever.
    fn drop_watches(&self) {
        self.shared.store.drop_watches();
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.served.signal_stop();
        self.drop_watches();
    }
}

/// A running Kubernetes API simulator. Cheap to clone; the server stops when the last clone is
/// dropped or on [`KubeSim::shutdown`].
#[derive(Clone)]
pub struct KubeSim {
    shared: Arc<Shared>,
    server: Arc<ServerHandle>,
}

impl std::fmt::Debug for KubeSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeSim").field("url", &self.url()).finish()
    }
}

fn resource(name: &str) -> Result<&'static ResourceType, ApiError> {
    resources::by_name(name).ok_or_else(|| {
        ApiError::new(
            404,
            format!("the server doesn't have a resource type \"{name}\""),
        )
    })
}

fn object_resource(obj: &Value) -> Result<&'static ResourceType, ApiError> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    resources::by_kind(api_version, kind).ok_or_else(|| {
        ApiError::bad_request(format!(
            "no resource served for apiVersion {api_version:?} kind {kind:?}"
        ))
    })
}

fn object_key(rt: &ResourceType, obj: &Value) -> Result<ObjKey, ApiError> {
    let name = meta::meta_str(obj, "name")
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::bad_request("metadata.name is required"))?;
    let ns = meta::meta_str(obj, "namespace")
        .filter(|n| !n.is_empty())
        .unwrap_or("default");
    Ok(ObjKey::new(rt, Some(ns), name))
}

impl KubeSim {
    /// Binds `listen` (port 0 picks a free port) and serves on a spawned task of the current
    /// tokio runtime.
    pub async fn start(listen: SocketAddr) -> anyhow::Result<KubeSim> {
        KubeSim::start_with(listen, KubeSimOptions::default()).await
    }

    /// [`KubeSim::start`] with explicit options.
    pub async fn start_with(
        listen: SocketAddr,
        options: KubeSimOptions,
    ) -> anyhow::Result<KubeSim> {
        KubeSim::start_inner(listen, options, false).await
    }

    /// Like [`KubeSim::start`], but serves HTTPS (HTTP/1.1) with a CA and serving certificate
    /// (for `localhost`, `127.0.0.1`, `::1` and the bound address) made for this simulator.
    /// [`KubeSim::url`] is then `https://...`, [`KubeSim::kubeconfig`] carries the CA as
    /// `certificate-authority-data`, and [`KubeSim::ca_pem`] gives it to other clients.
    /// client-go sends bearer tokens only over TLS, so this is the mode for kubectl with
    /// [`KubeSim::enable_rbac`] (`kubectl auth can-i`).
    pub async fn start_tls(listen: SocketAddr) -> anyhow::Result<KubeSim> {
        KubeSim::start_tls_with(listen, KubeSimOptions::default()).await
    }

    /// [`KubeSim::start_tls`] with explicit options.
    pub async fn start_tls_with(
        listen: SocketAddr,
        options: KubeSimOptions,
    ) -> anyhow::Result<KubeSim> {
        KubeSim::start_inner(listen, options, true).await
    }

    async fn start_inner(
        listen: SocketAddr,
        options: KubeSimOptions,
        tls: bool,
    ) -> anyhow::Result<KubeSim> {
        // A bad version is the caller's mistake, refused before anything is bound.
        discovery::major_minor(&options.server_version).map_err(anyhow::Error::msg)?;
        let (listener, addr) = serving::bind(listen).await?;
        let tls = tls.then(|| tls::generate(addr)).transpose()?;
        let shared = Arc::new(Shared {
            store: Store::new(options.history_limit, options.watch_buffer)
                .with_node_ports(options.service_node_port_range),
            faults: Faults::default(),
            log: log::RequestLog::default(),
            rbac: rbac::Rbac::default(),
            addr,
            ca_pem: tls.as_ref().map(|t| t.ca_pem.clone()),
            watch_list: Mutex::new(options.watch_list),
            gate: Arc::new(restart::Gate::default()),
            expired_watches: std::sync::atomic::AtomicU64::new(0),
            server_version: options.server_version,
        });
        shared.log.set_enabled(options.request_log);
        let router = server::router(shared.clone());
        let served = match tls {
            Some(t) => Served::spawn(tls::TlsListener::new(listener, t.acceptor), router, "kube"),
            None => Served::spawn(
                restart::GatedListener::new(listener, shared.gate.clone()),
                router,
                "kube",
            ),
        };
        let server = Arc::new(ServerHandle {
            shared: shared.clone(),
            served,
        });
        Ok(KubeSim { shared, server })
    }

    /// The base URL, e.g. `http://127.0.0.1:34567`, `https://` in TLS mode (an unspecified
    /// bind address shows as 127.0.0.1).
    pub fn url(&self) -> String {
        let mut addr = self.shared.addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(Ipv4Addr::LOCALHOST.into());
        }
        let scheme = if self.shared.ca_pem.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{addr}")
    }

    /// The CA certificate (PEM) that signed the serving certificate, in TLS mode
    /// ([`KubeSim::start_tls`]); `None` for plain HTTP.
    pub fn ca_pem(&self) -> Option<&str> {
        self.shared.ca_pem.as_deref()
    }

    /// Switches on authentication and RBAC authorization (off by default): a bearer token must
    /// be registered with [`KubeSim::add_token`] (else 401), a request without one is
    /// `system:anonymous` ([`KubeSim::set_anonymous_auth`]), and every request is authorized
    /// against the objects given to [`KubeSim::load_rbac`] (else 403). Loads the
    /// bootstrap policy every authenticated user has ([`rbac::bootstrap_objects`]) and
    /// registers the token `sim` (the one [`KubeSim::kubeconfig`] uses) as an admin in
    /// `system:masters`, which bypasses RBAC.
    pub fn enable_rbac(&self) {
        self.shared.rbac.enable();
    }

    /// Whether a request without credentials is served as `system:anonymous` (group
    /// `system:unauthenticated`) once RBAC is on: true by default, like kube-apiserver's
    /// `--anonymous-auth`; the bootstrap policy lets it read `/healthz`, `/livez`, `/readyz`
    /// and `/version` only. False makes such requests 401. An unknown token is 401 either way.
    pub fn set_anonymous_auth(&self, allowed: bool) {
        self.shared.rbac.set_anonymous(allowed);
    }

    /// Registers a bearer token for a user and its groups (`system:authenticated` is added).
    pub fn add_token(&self, token: &str, user: &str, groups: &[&str]) {
        self.shared.rbac.add_token(token, user, groups);
    }

    /// Moves the clock that issues and judges ServiceAccount tokens (TokenRequests) forward by
    /// `by`, so a test can see a token expire without waiting its lifetime (at least ten
    /// minutes); nothing else sees this clock.
    pub fn advance_token_clock(&self, by: Duration) {
        self.shared.rbac.issued.advance(by);
    }

    /// Adds or replaces Roles, ClusterRoles, RoleBindings and ClusterRoleBindings
    /// (rbac.authorization.k8s.io/v1); other kinds are an error.
    pub fn load_rbac(&self, objects: Vec<Value>) -> anyhow::Result<()> {
        for obj in objects {
            self.shared.rbac.apply(obj)?;
        }
        Ok(())
    }

    /// The RBAC objects loaded so far, with their evaluation.
    pub fn rbac_policy(&self) -> rbac::Policy {
        self.shared.rbac.policy()
    }

    /// Every authorization decision made since RBAC was enabled, in order.
    pub fn rbac_decisions(&self) -> Vec<rbac::Decision> {
        self.shared.rbac.decisions()
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// A kubeconfig (YAML) for this simulator, for kubectl or any client, with the token
    /// `sim` (an admin once [`KubeSim::enable_rbac`] is called).
    pub fn kubeconfig(&self) -> String {
        self.kubeconfig_for_token("sim")
    }

    /// [`KubeSim::kubeconfig`] with another bearer token (see [`KubeSim::add_token`]). In TLS
    /// mode the cluster carries the CA as `certificate-authority-data`, so clients verify the
    /// server.
    pub fn kubeconfig_for_token(&self, token: &str) -> String {
        use base64::Engine as _;
        let ca = self
            .ca_pem()
            .map(|pem| {
                let data = base64::engine::general_purpose::STANDARD.encode(pem);
                format!("    certificate-authority-data: {data}\n")
            })
            .unwrap_or_default();
        // A plain word stays bare (`token: sim`, which tests rewrite); anything else is quoted
        // as a JSON string, which YAML reads as one string scalar whatever the text.
        let bare = token.starts_with(|c: char| c.is_ascii_alphabetic())
            && token
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && !matches!(
                token.to_ascii_lowercase().as_str(),
                "true" | "false" | "yes" | "no" | "on" | "off" | "null"
            );
        let token = if bare {
            token.to_string()
        } else {
            Value::from(token).to_string()
        };
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: sim\n  cluster:\n    server: {}\n{ca}contexts:\n- name: sim\n  context:\n    cluster: sim\n    user: sim\n    namespace: default\ncurrent-context: sim\nusers:\n- name: sim\n  user:\n    token: {token}\n",
            self.url()
        )
    }

    /// Inserts or replaces objects (resource from `apiVersion` + `kind`; namespaced objects
    /// without a namespace go to `default`; missing namespaces are created). Given uid,
    /// creationTimestamp, status and finalizers are kept; resourceVersions are assigned and
    /// watches are notified. Services get their defaults and allocations.
    pub fn seed(&self, objects: Vec<Value>) -> anyhow::Result<()> {
        for (i, obj) in objects.into_iter().enumerate() {
            let name = meta::meta_str(&obj, "name").unwrap_or("?").to_string();
            self.shared
                .store
                .seed(obj)
                .with_context(|| format!("seed object {} ({name})", i + 1))?;
        }
        Ok(())
    }

    /// One object; `resource` is a plural (`nodes`), singular, short name or kind, optionally
    /// qualified with its group (`events.events.k8s.io`; plain `events` is core v1).
    pub fn get(&self, resource: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let rt = resources::by_name(resource)?;
        let key = ObjKey::new(rt, namespace, name);
        self.shared.store.get(rt, &key).ok().map(|v| (*v).clone())
    }

    /// Every object of a resource, all namespaces, in (namespace, name) order.
    pub fn list(&self, resource: &str) -> Vec<Value> {
        resources::by_name(resource)
            .map(|rt| {
                self.shared
                    .store
                    .all(rt)
                    .iter()
                    .map(|v| (**v).clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Creates an object like a POST (namespace from `metadata.namespace`, default `default`).
    pub fn create(&self, obj: Value) -> Result<Value, ApiError> {
        let rt = object_resource(&obj)?;
        let ns = meta::meta_str(&obj, "namespace")
            .filter(|n| !n.is_empty())
            .map(str::to_string);
        let created = self.shared.store.create(rt, ns.as_deref(), obj, false)?;
        Ok((*created).clone())
    }

    /// Replaces an object like a PUT of the main resource (`status` kept as stored). The
    /// resourceVersion is checked only if `obj` carries one.
    pub fn update(&self, obj: Value) -> Result<Value, ApiError> {
        self.put(obj, Scope::Main)
    }

    /// Replaces the status like a PUT of `/status` (everything but spec may change).
    pub fn update_status(&self, obj: Value) -> Result<Value, ApiError> {
        self.put(obj, Scope::Status)
    }

    fn put(&self, obj: Value, scope: Scope) -> Result<Value, ApiError> {
        let rt = object_resource(&obj)?;
        let key = object_key(rt, &obj)?;
        Ok((*self.shared.store.update(rt, &key, obj, scope, false)?).clone())
    }

    /// Patches the main resource like a PATCH with `kind`'s content type.
    pub fn patch(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
        kind: PatchKind,
        patch: &Value,
    ) -> Result<Value, ApiError> {
        self.patch_scoped(resource, namespace, name, kind, patch, Scope::Main)
    }

    /// Patches the status subresource.
    pub fn patch_status(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
        kind: PatchKind,
        patch: &Value,
    ) -> Result<Value, ApiError> {
        self.patch_scoped(resource, namespace, name, kind, patch, Scope::Status)
    }

    fn patch_scoped(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
        kind: PatchKind,
        patch: &Value,
        scope: Scope,
    ) -> Result<Value, ApiError> {
        let rt = self::resource(resource)?;
        let key = ObjKey::new(rt, namespace, name);
        let body = serde_json::to_vec(patch).map_err(|e| ApiError::bad_request(e.to_string()))?;
        Ok((*self
            .shared
            .store
            .patch(rt, &key, kind, &body, scope, false)?)
        .clone())
    }

    /// Read-modify-write of the whole object (spec, status and metadata) under the store lock:
    /// no conflict possible; bumps the resourceVersion and notifies watches if anything changed;
    /// removing the last finalizer of a terminating object deletes it.
    pub fn modify(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
        f: impl FnOnce(&mut Value),
    ) -> Result<Value, ApiError> {
        let rt = self::resource(resource)?;
        let key = ObjKey::new(rt, namespace, name);
        Ok((*self.shared.store.modify(rt, &key, f)?).clone())
    }

    /// Deletes like a DELETE without preconditions: objects with finalizers only get a
    /// deletionTimestamp. Returns the object's last state.
    pub fn remove(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let rt = self::resource(resource)?;
        let key = ObjKey::new(rt, namespace, name);
        let pre = store::Preconditions::default();
        Ok((*self.shared.store.delete(rt, &key, &pre, false)?).clone())
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.store.resource_version()
    }

    /// Fault injection, effective immediately for every later request.
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// The logged requests, oldest first (the last [`LOG_CAPACITY`]).
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.log.records()
    }

    /// The arrival number the next request gets ([`RequestRecord::arrival`]): requests with
    /// a lower one arrived before this call.
    pub fn arrivals(&self) -> u64 {
        self.shared.log.arrivals()
    }

    /// Empties the request log (counters are kept).
    pub fn clear_requests(&self) {
        self.shared.log.clear();
    }

    /// Turns keeping request records on (the default) or off; counters always count.
    pub fn set_request_log(&self, enabled: bool) {
        self.shared.log.set_enabled(enabled);
    }

    /// Switches streaming lists on or off for every later request, like restarting the
    /// apiserver with another `WatchList` feature gate or version ([`WatchList`]); open watches
    /// are not touched. Also `PUT /sim/watch-list`.
    pub fn set_watch_list(&self, watch_list: WatchList) {
        self.shared.set_watch_list(watch_list);
    }

    /// Whether streaming lists are served now ([`KubeSim::set_watch_list`]).
    pub fn watch_list(&self) -> WatchList {
        self.shared.watch_list()
    }

    /// Request totals by verb since start or the last [`KubeSim::reset_counts`].
    pub fn request_counts(&self) -> RequestCounts {
        self.shared.log.counts()
    }

    /// Request totals for one resource (zero for an unknown name).
    pub fn request_counts_for(&self, resource: &str) -> RequestCounts {
        resources::by_name(resource)
            .map(|rt| self.shared.log.counts_for(rt.index))
            .unwrap_or_default()
    }

    /// Zeroes every counter.
    pub fn reset_counts(&self) {
        self.shared.log.reset_counts();
    }

    /// Forgets the watch history: any later watch from a resourceVersion before now gets a 410
    /// Expired ERROR event (clients re-list).
    pub fn compact(&self) {
        self.shared.store.compact();
    }

    /// Watch streams open now, of every client.
    pub fn open_watches(&self) -> usize {
        self.shared.store.open_watches()
    }

    /// Ends every open watch stream now (clients re-watch from their last resourceVersion).
    pub fn drop_watches(&self) {
        self.shared.store.drop_watches();
    }

    /// Simulates an apiserver restart with its state kept (etcd keeps it): every open watch
    /// ends, the watch history is forgotten (a watch resuming from an older resourceVersion gets
    /// 410 Expired, as from a new apiserver's empty watch cache), every open connection breaks
    /// on its next read or write, and new connections are closed at once for `down` (plain HTTP
    /// only; in TLS mode the connections are not touched). Also `POST /sim/restart
    /// {"down_ms": 500}`. [`KubeSim::restart_stats`] counts what it did.
    pub fn restart(&self, down: Duration) {
        self.shared.restart(down);
    }

    /// What the restarts did so far: how many, connections refused while down, connections
    /// broken.
    pub fn restart_stats(&self) -> RestartStats {
        self.shared.gate.stats()
    }

    /// Watch requests answered with a 410 Expired ERROR event so far (a resourceVersion older
    /// than the history, or [`Faults::expire_next_watches`]).
    pub fn expired_watches(&self) -> u64 {
        self.shared
            .expired_watches
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Stops accepting connections, ends watches and waits (up to 5 s) for open requests; other
    /// clones stop serving too.
    pub async fn shutdown(self) {
        self.server.served.signal_stop();
        self.server.drop_watches();
        self.server.served.shutdown().await;
    }
}
