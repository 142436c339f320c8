//! Starts the informers and, per driver, its context and controllers ([`start`]); the process
//! around them (leader election, serving, reload) is `wasm-ccm-manager`'s.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Service};
use kube::{Api, Client};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::clients::ControllerClients;
use crate::cloud::{About, Cloud, CloudParts, CloudSource, DriverSlot, Function, Subject};
use crate::cluster_view::StoreCluster;
use crate::config::ControllerConfig;
use crate::controllers::entry::{Needs, Pending, Wiring};
use crate::controllers::node::is_uninitialized;
use crate::ctx::Ctx;
use crate::events::Events;
use crate::kube::Kube;
use crate::machinery::informer::{Informer, Store};
use crate::metrics::Metrics;
use crate::registry::{CONTROLLERS, EnabledControllers};
use crate::routing::DriverView;
use crate::routing::Routing;
use crate::shadow::ShadowLog;

/// Handles to a running set of controllers, for the playground and tests.
pub struct Running {
    /// One context per driver, in the routing table's order.
    pub(crate) ctxs: Vec<Arc<Ctx>>,
    pub(crate) pending: Vec<Arc<dyn Pending>>,
    tasks: JoinSet<()>,
}

/// What the process reads of running controllers, apart from the tasks: shared handles, cheap
/// to clone into the serving endpoints' hooks.
#[derive(Clone)]
pub struct RunningView {
    ctxs: Vec<Arc<Ctx>>,
    pending: Vec<Arc<dyn Pending>>,
}

impl RunningView {
    /// Sets the series computed at scrape time: each driver's own counters (HTTP requests,
    /// instances, dropped log lines…), a shadow run's differences and the work queues' in-flight
    /// gauges. A driver renamed by a reload leaves no stale series.
    pub fn export_metrics(&self) {
        if let Some(first) = self.ctxs.first() {
            first.metrics.clear("wasm_ccm_shadow_differences");
        }
        for ctx in &self.ctxs {
            ctx.cloud.export_counters();
            ctx.export_shadow_gauges();
        }
        for controller in &self.pending {
            controller.export_gauges();
        }
    }

    /// A shadow run's report, all drivers merged (each judged by its own driver's calls);
    /// `None` outside shadow mode.
    pub fn shadow_report(&self) -> Option<crate::shadow::ShadowReport> {
        crate::shadow::ShadowReport::merge(
            self.ctxs.iter().filter_map(|c| c.shadow_report()).collect(),
        )
    }

    /// Waits until the informers' caches (shared by every driver) have listed once.
    pub async fn wait_synced(&self) {
        if let Some(ctx) = self.ctxs.first() {
            ctx.nodes.wait_synced().await;
            ctx.services.wait_synced().await;
        }
    }
}

impl Running {
    /// Keys queued, in flight or waiting for a retry in the controllers' queues.
    pub fn pending(&self) -> usize {
        self.pending.iter().map(|p| p.pending()).sum()
    }

    /// The handles the process reads while the controllers run (metrics, the shadow report,
    /// readiness).
    pub fn view(&self) -> RunningView {
        RunningView {
            ctxs: self.ctxs.clone(),
            pending: self.pending.clone(),
        }
    }

    /// In a shadow run with `--shadow-events`, announces each driver's divergences as events
    /// every period until `cancel` (the shadow's own recorders are silenced; these are not).
    pub fn announce_divergences(
        &self,
        client: &Client,
        identity: &str,
        cancel: &CancellationToken,
    ) {
        for ctx in &self.ctxs {
            if ctx.shadow.as_ref().is_some_and(|s| s.options().events) {
                tokio::spawn(crate::shadow::announce_divergences(
                    Arc::clone(ctx),
                    Events::new(client.clone(), identity.to_string()),
                    crate::shadow::ANNOUNCE_PERIOD,
                    cancel.clone(),
                ));
            }
        }
    }

    /// Waits for every task after the cancel token fired.
    pub async fn join(mut self) {
        while self.tasks.join_next().await.is_some() {}
    }
}

/// Starts informers and the enabled controllers over the driver in `driver` alone (the table
/// of one the one-driver flags make, [`crate::DriverRoles::alone`]); they stop on `cancel`. The
/// playground's entry; [`start`] underneath.
pub fn start_controllers(
    client: Client,
    driver: Arc<DriverSlot>,
    config: ControllerConfig,
    metrics: Arc<Metrics>,
    identity: &str,
    cancel: CancellationToken,
) -> Running {
    start_with_cloud(
        client,
        driver,
        config,
        EnabledControllers::ALL,
        metrics,
        identity,
        cancel,
    )
}

/// Starts informers and, per driver of `routing` (`drivers` in its order), the controllers its
/// roles and exports call for; they stop on `cancel`. The product's (`wasm_ccm_manager::run`) and
/// the playground's entry;
/// [`start`] underneath.
#[allow(clippy::too_many_arguments)] // the parts of one start, each named at the call
pub fn start_driver_set(
    clients: impl Into<ControllerClients>,
    drivers: Vec<Arc<DriverSlot>>,
    routing: Arc<Routing>,
    config: ControllerConfig,
    controllers: EnabledControllers,
    metrics: Arc<Metrics>,
    identity: &str,
    cancel: CancellationToken,
) -> Running {
    let clouds = drivers
        .into_iter()
        .map(|d| d as Arc<dyn CloudSource>)
        .collect::<Vec<_>>();
    start(
        clients.into(),
        clouds,
        routing,
        config,
        controllers,
        metrics,
        identity,
        cancel,
    )
}

/// The context every controller shares, over the informers' stores.
#[allow(clippy::too_many_arguments)] // the parts of one context, each named at the call
pub(crate) fn new_ctx(
    clients: ControllerClients,
    cloud: Arc<dyn CloudSource>,
    route: DriverView,
    config: ControllerConfig,
    metrics: Arc<Metrics>,
    identity: &str,
    nodes: Store<Node>,
    services: Store<Service>,
) -> Arc<Ctx> {
    let shadow = config.shadow.clone().map(|o| Arc::new(ShadowLog::new(o)));
    let events = Arc::new(
        Events::for_controllers(clients.clone(), identity.to_string())
            .silenced(shadow.is_some())
            .for_driver(route.label().map(str::to_string)),
    );
    Arc::new(Ctx {
        kube: Kube::new(
            clients,
            config.kube_api_qps,
            config.kube_api_burst,
            Arc::clone(&metrics),
            shadow.clone(),
        ),
        cloud: Cloud::new(CloudParts {
            source: cloud,
            label: route.label().map(str::to_string),
            metrics: Arc::clone(&metrics),
            cluster: Arc::new(StoreCluster::new(services.clone(), route.clone())),
            shadow: shadow.clone(),
            events: Arc::clone(&events),
            listing_max_age: config.instance_listing_max_age,
        }),
        events,
        shadow,
        metrics,
        nodes,
        services,
        config,
        refusals: Default::default(),
        route,
    })
}

/// [`start_controllers`] over any [`CloudSource`] (the crate's tests pass a fixed fake cloud).
pub(crate) fn start_with_cloud(
    client: Client,
    cloud: Arc<dyn CloudSource>,
    config: ControllerConfig,
    controllers: EnabledControllers,
    metrics: Arc<Metrics>,
    identity: &str,
    cancel: CancellationToken,
) -> Running {
    let provider = cloud.current();
    let routing = Routing::alone(&provider.name(), &provider.provider_id_scheme());
    start(
        client.into(),
        vec![cloud],
        routing,
        config,
        controllers,
        metrics,
        identity,
        cancel,
    )
}

/// Whether the driver's roles call for the controller `needs` serves: every driver runs the
/// node controllers (it owns the nodes of its scheme); the service controller runs for a
/// driver serving class-less Services or a class; the route controller for the routes driver.
fn role_wants(route: &DriverView, needs: Needs) -> bool {
    let roles = &route.routing().drivers()[route.index()];
    match needs {
        Needs::Instances => true,
        Needs::LoadBalancer => {
            roles.load_balancer.default || !roles.load_balancer.classes.is_empty()
        }
        Needs::Routes => roles.routes,
    }
}

/// The one start: informers once; per cloud (in `routing`'s order) a context and its
/// controllers, so each driver has its own queues, workers and loops and a hung driver stalls
/// only its own objects. One driver is a table of one, started the same way.
#[allow(clippy::too_many_arguments)] // the parts of one start, each named at the call
pub(crate) fn start(
    clients: ControllerClients,
    clouds: Vec<Arc<dyn CloudSource>>,
    routing: Arc<Routing>,
    config: ControllerConfig,
    controllers: EnabledControllers,
    metrics: Arc<Metrics>,
    identity: &str,
    cancel: CancellationToken,
) -> Running {
    // The informers watch as the process itself, with or without per-controller credentials:
    // upstream's shared informer factory is built on the root client ("shared-informers").
    let client = clients.root().clone();
    let mut node_informer = Informer::new(Api::<Node>::all(client.clone()));
    let mut service_informer = Informer::new(Api::<Service>::all(client));
    let mut tasks = JoinSet::new();
    let mut pending: Vec<Arc<dyn Pending>> = Vec::new();
    let mut started: Vec<&'static str> = Vec::new();
    let mut ctxs = Vec::with_capacity(clouds.len());
    for (index, cloud) in clouds.into_iter().enumerate() {
        let route = routing.view(index);
        let driver = route.name().to_string();
        // A reload never changes the exports (it is refused if it would), so this stays true.
        let exports = cloud.current().exports();
        let ctx = new_ctx(
            clients.clone(),
            cloud,
            route.clone(),
            config.clone(),
            Arc::clone(&metrics),
            identity,
            node_informer.store(),
            service_informer.store(),
        );
        for entry in CONTROLLERS {
            if !controllers.is_enabled(entry.name)
                || !(entry.switched_on)(&config)
                || !role_wants(&route, entry.needs)
            {
                continue;
            }
            if !entry.needs.met_by(&exports) {
                let interface = entry.needs.interface();
                if entry.needs.missing_is_notable() {
                    tracing::warn!(
                        controller = entry.name,
                        driver = %driver,
                        "the driver exports no `{interface}` interface: the {} is not started",
                        entry.title
                    );
                } else {
                    tracing::info!(
                        controller = entry.name,
                        driver = %driver,
                        "the driver exports no `{interface}` interface: the {} is not started",
                        entry.title
                    );
                }
                continue;
            }
            let mut wiring = Wiring {
                ctx: &ctx,
                nodes: &mut node_informer,
                services: &mut service_informer,
                tasks: &mut tasks,
                cancel: &cancel,
                pending: &mut pending,
            };
            match (entry.start)(&mut wiring) {
                Ok(()) => started.push(entry.alias),
                Err(e) => tracing::error!(
                    controller = entry.name,
                    driver = %driver,
                    "the {} is disabled: {e}",
                    entry.title
                ),
            }
        }
        // Housekeeping for drivers that keep caches or tokens fresh.
        let housekeeping_ctx = Arc::clone(&ctx);
        let hk_cancel = cancel.clone();
        tasks.spawn(async move {
            let period = housekeeping_ctx.config.housekeeping_period;
            loop {
                tokio::select! {
                    _ = hk_cancel.cancelled() => return,
                    _ = tokio::time::sleep(period) => {}
                }
                let cloud = &housekeeping_ctx.cloud;
                let scope = cloud.scope("");
                let result = cloud
                    .call(
                        Function::Housekeeping,
                        About::subject(Subject::driver("housekeeping")),
                        cloud.provider().housekeeping(&scope),
                    )
                    .await;
                if let Err(e) = result {
                    tracing::warn!(driver = %cloud.name(), error = %e, "driver housekeeping failed");
                }
            }
        });
        ctxs.push(ctx);
    }
    // The pending-initialisation gauge (operators alert on nodes stuck with the taint).
    let gauge_nodes = node_informer.store();
    let gauge_metrics = Arc::clone(&metrics);
    let gauge_cancel = cancel.clone();
    tasks.spawn(async move {
        loop {
            let stuck = gauge_nodes
                .list()
                .iter()
                .filter(|n| is_uninitialized(n))
                .count();
            gauge_metrics.clear("wasm_ccm_nodes_pending_initialization");
            gauge_metrics.set("wasm_ccm_nodes_pending_initialization", &[], stuck as f64);
            tokio::select! {
                _ = gauge_cancel.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(10)) => {}
            }
        }
    });
    running_managed(&metrics, started, &cancel, &mut tasks);
    tasks.spawn(node_informer.run(cancel.clone()));
    tasks.spawn(service_informer.run(cancel.clone()));
    Running {
        ctxs,
        pending,
        tasks,
    }
}

/// Upstream's `running_managed_controllers{name,manager}` (`k8s.io/component-base`
/// `metrics/prometheus/controllers`): 1 once a controller started, 0 when it stops; `name` is
/// upstream's short name (the `--controllers` alias: `cloud-node`, `cloud-node-lifecycle`,
/// `service`, `route`), `manager` upstream's `cloud-controller-manager`. One task sets every
/// started controller's series back to 0.
fn running_managed(
    metrics: &Arc<Metrics>,
    started: Vec<&'static str>,
    cancel: &CancellationToken,
    tasks: &mut JoinSet<()>,
) {
    let set = move |metrics: &Metrics, started: &[&'static str], value: f64| {
        for name in started {
            let labels = [("name", *name), ("manager", "cloud-controller-manager")];
            metrics.set("running_managed_controllers", &labels, value);
        }
    };
    set(metrics, &started, 1.0);
    let (metrics, cancel) = (Arc::clone(metrics), cancel.clone());
    tasks.spawn(async move {
        cancel.cancelled().await;
        set(&metrics, &started, 0.0);
    });
}
