//! Wires the informers, the controllers, leader election and the endpoints together.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Service};
use kube::{Api, Client};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use wasm_ccm_runtime::Driver;

use crate::cloud::SharedCloud;
use crate::config::ControllerConfig;
use crate::context::{Cloud, Ctx, Events, Kube, StoreCluster, Subject};
use crate::informer::{Informer, Store};
use crate::leader::{LeaderConfig, LeaderElector};
use crate::metrics::Metrics;
use crate::node::is_uninitialized;
use crate::registry::{CONTROLLERS, Pending, Wiring};
use crate::reload::{DriverSlot, ReloadOptions, record_in_service, watch};
use crate::server::{Health, Serving, serve};
use crate::shadow::ShadowLog;
use crate::user_agent::{shadow_user_agent, user_agent, with_user_agent};

/// How `wasm-ccm run` runs.
pub struct RunOptions {
    /// The control loops' settings.
    pub config: ControllerConfig,
    /// `None` runs without leader election.
    pub leader: Option<LeaderConfig>,
    /// Where and how `/healthz`, `/readyz` and `/metrics` are served; `None` serves nothing.
    pub serving: Option<Serving>,
    /// This process's identity (events' reporting instance, the lease holder).
    pub identity: String,
    /// Watch the driver's file and hot-swap new versions; `None` keeps the first one.
    pub reload: Option<ReloadOptions>,
    /// How long loading the driver took (fetch, compile, `info`, `init`), for the load metric.
    pub driver_load_time: Duration,
}

/// Why [`run`] returned.
#[derive(Debug, PartialEq, Eq)]
pub enum Exit {
    /// Cancelled (a signal, the playground finishing).
    Stopped,
    /// Leadership was lost; the process must exit non-zero so it restarts as a candidate.
    LostLeadership,
}

/// Handles to a running set of controllers, for the playground and tests.
pub struct Running {
    pub(crate) ctx: Arc<Ctx>,
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

/// Starts informers and the enabled controllers over the driver in `driver`; they stop on
/// `cancel`.
pub fn start_controllers(
    client: Client,
    driver: Arc<DriverSlot>,
    config: ControllerConfig,
    metrics: Arc<Metrics>,
    identity: &str,
    cancel: CancellationToken,
) -> Running {
    start_with_cloud(client, driver, config, metrics, identity, cancel)
}

/// The context every controller shares, over the informers' stores.
pub(crate) fn new_ctx(
    client: Client,
    cloud: SharedCloud,
    config: ControllerConfig,
    metrics: Arc<Metrics>,
    identity: &str,
    nodes: Store<Node>,
    services: Store<Service>,
) -> Arc<Ctx> {
    let shadow = config.shadow.clone().map(|o| Arc::new(ShadowLog::new(o)));
    Arc::new(Ctx {
        kube: Kube::new(
            client.clone(),
            config.kube_api_qps,
            config.kube_api_burst,
            Arc::clone(&metrics),
            shadow.clone(),
        ),
        cloud: Cloud::new(
            cloud,
            Arc::clone(&metrics),
            Arc::new(StoreCluster::new(services.clone())),
            shadow.clone(),
        ),
        events: Events::new(client, identity.to_string()).silenced(shadow.is_some()),
        shadow,
        metrics,
        nodes,
        services,
        config,
        refusals: Default::default(),
    })
}

/// [`start_controllers`] over any [`CloudProvider`] (the crate's tests pass a fake cloud).
pub(crate) fn start_with_cloud(
    client: Client,
    cloud: SharedCloud,
    config: ControllerConfig,
    metrics: Arc<Metrics>,
    identity: &str,
    cancel: CancellationToken,
) -> Running {
    let mut node_informer = Informer::new(Api::<Node>::all(client.clone()));
    let mut service_informer = Informer::new(Api::<Service>::all(client.clone()));
    // A reload never changes the exports (it is refused if it would), so this stays true.
    let exports = cloud.exports();
    let ctx = new_ctx(
        client,
        cloud,
        config.clone(),
        metrics,
        identity,
        node_informer.store(),
        service_informer.store(),
    );
    let mut tasks = JoinSet::new();
    let mut pending: Vec<Arc<dyn Pending>> = Vec::new();
    for entry in CONTROLLERS {
        if !config.controllers.is_enabled(entry.name) || !(entry.switched_on)(&config) {
            continue;
        }
        if !entry.needs.met_by(&exports) {
            let interface = entry.needs.interface();
            if entry.needs.missing_is_notable() {
                tracing::warn!(
                    controller = entry.name,
                    "the driver exports no `{interface}` interface: the {} is not started",
                    entry.title
                );
            } else {
                tracing::info!(
                    controller = entry.name,
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
            let (result, _) = cloud.observe(
                "provider.housekeeping",
                Subject::driver("housekeeping"),
                cloud.api().housekeeping(&cloud.scope("")).await,
            );
            if let Err(e) = result {
                tracing::warn!(error = %e, "driver housekeeping failed");
            }
        }
    });
    // The pending-initialisation gauge (operators alert on nodes stuck with the taint).
    let gauge_ctx = Arc::clone(&ctx);
    let gauge_cancel = cancel.clone();
    tasks.spawn(async move {
        loop {
            let stuck = gauge_ctx
                .nodes
                .list()
                .iter()
                .filter(|n| is_uninitialized(n))
                .count();
            gauge_ctx
                .metrics
                .clear("wasm_ccm_nodes_pending_initialization");
            gauge_ctx
                .metrics
                .set("wasm_ccm_nodes_pending_initialization", &[], stuck as f64);
            tokio::select! {
                _ = gauge_cancel.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(10)) => {}
            }
        }
    });
    tasks.spawn(node_informer.run(cancel.clone()));
    tasks.spawn(service_informer.run(cancel.clone()));
    Running {
        ctx,
        pending,
        tasks,
    }
}

/// Runs the controller manager until `cancel` or the loss of leadership.
pub async fn run(
    client: Client,
    driver: Arc<Driver>,
    opts: RunOptions,
    cancel: CancellationToken,
) -> std::io::Result<Exit> {
    let metrics = Arc::new(Metrics::default());
    let health = Arc::new(Health::default());
    record_in_service(&metrics, &driver, "startup", opts.driver_load_time);
    let slot = Arc::new(DriverSlot::new(driver));
    // Every request names this program and the driver in service (a reload shows at once).
    let agent_slot = Arc::clone(&slot);
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
    if let Some(reload) = opts.reload {
        let events = Arc::new(Events::new(client.clone(), opts.identity.clone()).silenced(shadow));
        tokio::spawn(watch(
            Arc::clone(&slot),
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
    if let Some(elector) = &elector {
        tracing::info!(identity = %elector.identity(), "waiting to acquire the lease");
        if !elector.acquire(&cancel).await {
            return Ok(Exit::Stopped);
        }
        tracing::info!(identity = %elector.identity(), "became leader");
        metrics.set(
            "leader_election_master_status",
            &[("name", "cloud-controller-manager")],
            1.0,
        );
    }
    let work = cancel.child_token();
    let running = start_controllers(
        client.clone(),
        slot,
        opts.config,
        Arc::clone(&metrics),
        &opts.identity,
        work.clone(),
    );
    {
        let ctx = Arc::clone(&running.ctx);
        *health
            .before_scrape
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Box::new(move || {
            ctx.cloud.export_counters();
            ctx.export_shadow_gauges();
        }));
        let ctx = Arc::clone(&running.ctx);
        *health
            .shadow_report
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Box::new(move || ctx.shadow_report()));
    }
    if running
        .ctx
        .shadow
        .as_ref()
        .is_some_and(|s| s.options().events)
    {
        tokio::spawn(crate::shadow::announce_divergences(
            Arc::clone(&running.ctx),
            Events::new(client.clone(), opts.identity.clone()),
            crate::shadow::ANNOUNCE_PERIOD,
            work.clone(),
        ));
    }
    let ready_ctx = Arc::clone(&running.ctx);
    let ready_health = Arc::clone(&health);
    tokio::spawn(async move {
        ready_ctx.nodes.wait_synced().await;
        ready_ctx.services.wait_synced().await;
        ready_health.ready.store(true, Ordering::Relaxed);
        tracing::info!("caches synced; controllers running");
    });
    let exit = match &elector {
        Some(elector) => {
            if elector.hold(&cancel).await {
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
    running.join().await;
    if exit == Exit::Stopped
        && let Some(elector) = &elector
    {
        elector.release().await;
    }
    Ok(exit)
}
