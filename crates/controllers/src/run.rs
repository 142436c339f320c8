//! Wires the informers, the controllers, leader election and the endpoints together.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Service};
use kube::{Api, Client};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use wasm_ccm_runtime::Driver;

use crate::cloud::{About, Cloud, CloudParts, CloudSource, DriverSlot, Function, Subject};
use crate::cluster_view::StoreCluster;
use crate::config::ControllerConfig;
use crate::controllers::entry::{Needs, Pending, Wiring};
use crate::controllers::node::is_uninitialized;
use crate::ctx::Ctx;
use crate::events::Events;
use crate::kube::Kube;
use crate::kubernetes_version;
use crate::leader::{LeaderConfig, LeaderElector};
use crate::machinery::informer::{Informer, Store};
use crate::metrics::Metrics;
use crate::registry::{CONTROLLERS, EnabledControllers};
use crate::reload::{ReloadOptions, record_in_service, watch};
use crate::routing::DriverView;
use crate::routing::Routing;
use crate::server::{Health, Serving, serve};
use crate::shadow::ShadowLog;
use crate::user_agent::{shadow_user_agent, user_agent, with_user_agent};

/// How `wasm-ccm run` runs.
pub struct RunOptions {
    /// The control loops' settings.
    pub config: ControllerConfig,
    /// `--controllers`: which loops run.
    pub controllers: EnabledControllers,
    /// `None` runs without leader election.
    pub leader: Option<LeaderConfig>,
    /// Where and how `/healthz`, `/readyz` and `/metrics` are served; `None` serves nothing.
    pub serving: Option<Serving>,
    /// This process's identity (events' reporting instance, the lease holder).
    pub identity: String,
    /// The API server's `gitVersion` read at start-up (empty when it did not tell), for
    /// `wasm_ccm_kubernetes_version_supported` ([`crate::kubernetes_version`]).
    pub kubernetes_version: String,
}

/// Why [`run`] returned.
#[derive(Debug, PartialEq, Eq)]
pub enum Exit {
    /// Cancelled (a signal, the playground finishing).
    Stopped,
    /// Leadership was lost; the process must exit non-zero so it restarts as a candidate.
    LostLeadership,
}

/// One driver of the process, in its table's order (see [`run`]); the one-driver flags give
/// one.
pub struct DriverEntry {
    /// The driver, loaded and initialised.
    pub driver: Arc<Driver>,
    /// Watch its file and hot-swap new versions; `None` keeps the first one.
    pub reload: Option<ReloadOptions>,
    /// How long loading it took (fetch, compile, `info`, `init`), for the load metric.
    pub load_time: Duration,
}

/// Handles to a running set of controllers, for the playground and tests.
pub struct Running {
    /// One context per driver, in the routing table's order.
    pub(crate) ctxs: Vec<Arc<Ctx>>,
    pub(crate) pending: Vec<Arc<dyn Pending>>,
    tasks: JoinSet<()>,
}

impl Running {
    /// Keys queued, in flight or waiting for a retry in the controllers' queues.
    pub fn pending(&self) -> usize {
        self.pending.iter().map(|p| p.pending()).sum()
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
/// roles and exports call for; they stop on `cancel`. [`run`]'s and the playground's entry;
/// [`start`] underneath.
pub fn start_driver_set(
    client: Client,
    drivers: Vec<Arc<DriverSlot>>,
    routing: Arc<Routing>,
    config: ControllerConfig,
    metrics: Arc<Metrics>,
    identity: &str,
    cancel: CancellationToken,
) -> Running {
    let clouds = drivers
        .into_iter()
        .map(|d| d as Arc<dyn CloudSource>)
        .collect::<Vec<_>>();
    start(
        client,
        clouds,
        routing,
        config,
        EnabledControllers::ALL,
        metrics,
        identity,
        cancel,
    )
}

/// The context every controller shares, over the informers' stores.
#[allow(clippy::too_many_arguments)] // the parts of one context, each named at the call
pub(crate) fn new_ctx(
    client: Client,
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
        Events::new(client.clone(), identity.to_string())
            .silenced(shadow.is_some())
            .for_driver(route.label().map(str::to_string)),
    );
    Arc::new(Ctx {
        kube: Kube::new(
            client.clone(),
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
        client,
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
    client: Client,
    clouds: Vec<Arc<dyn CloudSource>>,
    routing: Arc<Routing>,
    config: ControllerConfig,
    controllers: EnabledControllers,
    metrics: Arc<Metrics>,
    identity: &str,
    cancel: CancellationToken,
) -> Running {
    let mut node_informer = Informer::new(Api::<Node>::all(client.clone()));
    let mut service_informer = Informer::new(Api::<Service>::all(client.clone()));
    let mut tasks = JoinSet::new();
    let mut pending: Vec<Arc<dyn Pending>> = Vec::new();
    let mut ctxs = Vec::with_capacity(clouds.len());
    for (index, cloud) in clouds.into_iter().enumerate() {
        let route = routing.view(index);
        let driver = route.name().to_string();
        // A reload never changes the exports (it is refused if it would), so this stays true.
        let exports = cloud.current().exports();
        let ctx = new_ctx(
            client.clone(),
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
            if let Err(e) = (entry.start)(&mut wiring) {
                tracing::error!(
                    controller = entry.name,
                    driver = %driver,
                    "the {} is disabled: {e}",
                    entry.title
                );
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
    tasks.spawn(node_informer.run(cancel.clone()));
    tasks.spawn(service_informer.run(cancel.clone()));
    Running {
        ctxs,
        pending,
        tasks,
    }
}

/// Runs the controller manager over the drivers of `routing` (`drivers` in its order; one for
/// the one-driver flags) until `cancel` or the loss of leadership.
pub async fn run(
    client: Client,
    drivers: Vec<DriverEntry>,
    routing: Arc<Routing>,
    opts: RunOptions,
    cancel: CancellationToken,
) -> std::io::Result<Exit> {
    let metrics = Arc::new(Metrics::default());
    // Set once, from the version read at start-up (as the start-up warning is): after a
    // control-plane upgrade the gauge names the version the process started against until it
    // restarts, which the series' `server_version` label shows.
    let support = kubernetes_version::Support::of(&opts.kubernetes_version);
    metrics.set(
        "wasm_ccm_kubernetes_version_supported",
        &[("server_version", &opts.kubernetes_version)],
        if support.is_supported() { 1.0 } else { 0.0 },
    );
    let health = Arc::new(Health::default());
    let mut slots = Vec::with_capacity(drivers.len());
    let mut reloads = Vec::new();
    for (index, entry) in drivers.into_iter().enumerate() {
        let label = routing.view(index).name().to_string();
        record_in_service(&metrics, &label, &entry.driver, "startup", entry.load_time);
        let slot = Arc::new(DriverSlot::new(entry.driver));
        if let Some(reload) = entry.reload {
            reloads.push((label, Arc::clone(&slot), reload));
        }
        slots.push(slot);
    }
    // Every request names this program and the (first) driver in service (a reload shows at
    // once).
    let agent_slot = Arc::clone(&slots[0]);
    let client = if opts.config.shadow.is_some() {
        with_user_agent(
            client,
            Arc::new(move || shadow_user_agent(agent_slot.get().info())),
        )
    } else {
        with_user_agent(
            client,
            Arc::new(move || user_agent(Some(agent_slot.get().info()))),
        )
    };
    // Every replica watches, leader or not, so a standby takes over with the current version.
    let shadow = opts.config.shadow.is_some();
    for (label, slot, reload) in reloads {
        let events = Arc::new(Events::new(client.clone(), opts.identity.clone()).silenced(shadow));
        tokio::spawn(watch(
            label,
            slot,
            reload,
            Arc::clone(&metrics),
            events,
            cancel.clone(),
        ));
    }
    if let Some(serving) = opts.serving {
        // Reviews name this program and the driver like every other request.
        let bound = serve(
            serving,
            &client,
            Arc::clone(&metrics),
            Arc::clone(&health),
            cancel.clone(),
        )
        .await?;
        tracing::info!(address = %bound, "serving /healthz, /readyz and /metrics over HTTPS");
    }
    let elector = opts
        .leader
        .map(|cfg| LeaderElector::new(client.clone(), cfg));
    let mut leading_since = None;
    if let Some(elector) = &elector {
        tracing::info!(identity = %elector.identity(), "waiting to acquire the lease");
        let Some(acquired) = elector.acquire(&cancel).await else {
            return Ok(Exit::Stopped);
        };
        leading_since = Some(acquired);
        tracing::info!(identity = %elector.identity(), "became leader");
        metrics.set(
            "leader_election_master_status",
            &[("name", "cloud-controller-manager")],
            1.0,
        );
    }
    let work = cancel.child_token();
    let running = start(
        client.clone(),
        slots
            .into_iter()
            .map(|d| d as Arc<dyn CloudSource>)
            .collect(),
        routing,
        opts.config,
        opts.controllers,
        Arc::clone(&metrics),
        &opts.identity,
        work.clone(),
    );
    {
        let ctxs = running.ctxs.clone();
        let scrape_metrics = Arc::clone(&metrics);
        *health
            .before_scrape
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Box::new(move || {
            // Each driver sets its own series; a driver renamed by a reload leaves none.
            scrape_metrics.clear("wasm_ccm_shadow_differences");
            for ctx in &ctxs {
                ctx.cloud.export_counters();
                ctx.export_shadow_gauges();
            }
        }));
        // A shadow of several drivers keeps a log per driver (each judged by its own
        // driver's calls); the report is all of them.
        let ctxs = running.ctxs.clone();
        *health
            .shadow_report
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Box::new(move || {
            crate::shadow::ShadowReport::merge(
                ctxs.iter().filter_map(|c| c.shadow_report()).collect(),
            )
        }));
    }
    for ctx in &running.ctxs {
        if ctx.shadow.as_ref().is_some_and(|s| s.options().events) {
            tokio::spawn(crate::shadow::announce_divergences(
                Arc::clone(ctx),
                Events::new(client.clone(), opts.identity.clone()),
                crate::shadow::ANNOUNCE_PERIOD,
                work.clone(),
            ));
        }
    }
    let ready_ctx = Arc::clone(&running.ctxs[0]);
    let ready_health = Arc::clone(&health);
    tokio::spawn(async move {
        ready_ctx.nodes.wait_synced().await;
        ready_ctx.services.wait_synced().await;
        ready_health.ready.store(true, Ordering::Relaxed);
        tracing::info!("caches synced; controllers running");
    });
    let exit = match &elector {
        Some(elector) => {
            let acquired = leading_since.unwrap_or_else(tokio::time::Instant::now);
            if elector.hold(&cancel, acquired).await {
                health.failed.store(true, Ordering::Relaxed);
                metrics.set(
                    "leader_election_master_status",
                    &[("name", "cloud-controller-manager")],
                    0.0,
                );
                Exit::LostLeadership
            } else {
                Exit::Stopped
            }
        }
        None => {
            cancel.cancelled().await;
            Exit::Stopped
        }
    };
    work.cancel();
    if exit == Exit::LostLeadership {
        // No draining: a sync still in flight would write beside the new leader. The process
        // exits now (as upstream's does), which ends those tasks where they stand.
        return Ok(exit);
    }
    running.join().await;
    if exit == Exit::Stopped
        && let Some(elector) = &elector
    {
        elector.release().await;
    }
    Ok(exit)
}
