//! Wires the informers, the controllers, leader election and the endpoints together.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Service};
use kube::{Api, Client};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use wasm_ccm_runtime::Driver;

use crate::config::ControllerConfig;
use crate::context::{Cloud, Ctx, Events, Kube, StoreCluster};
use crate::informer::Informer;
use crate::leader::{LeaderConfig, LeaderElector};
use crate::lifecycle::LifecycleController;
use crate::metrics::Metrics;
use crate::node::{NodeController, is_uninitialized};
use crate::reload::{DriverSlot, ReloadOptions, record_in_service, watch};
use crate::route::RouteController;
use crate::route_rules::parse_cluster_cidrs;
use crate::server::{Health, Serving, serve};
use crate::service::ServiceController;
use crate::user_agent::{user_agent, with_user_agent};

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
    pub(crate) node: Option<Arc<NodeController>>,
    pub(crate) service: Option<Arc<ServiceController>>,
    tasks: JoinSet<()>,
}

impl Running {
    /// Keys queued, in flight or waiting for a retry in the node and service queues.
    pub fn pending(&self) -> usize {
        self.node.as_ref().map_or(0, |n| n.pending())
            + self.service.as_ref().map_or(0, |s| s.pending())
    }

    /// Waits for every task after the cancel token fired.
    pub async fn join(mut self) {
        while self.tasks.join_next().await.is_some() {}
    }
}

/// Starts informers and the enabled controllers; they stop on `cancel`.
pub fn start_controllers(
    client: Client,
    driver: Arc<DriverSlot>,
    config: ControllerConfig,
    metrics: Arc<Metrics>,
    identity: &str,
    cancel: CancellationToken,
) -> Running {
    let mut node_informer = Informer::new(Api::<Node>::all(client.clone()));
    let mut service_informer = Informer::new(Api::<Service>::all(client.clone()));
    let services = service_informer.store();
    let ctx = Arc::new(Ctx {
        kube: Kube::new(
            client.clone(),
            config.kube_api_qps,
            config.kube_api_burst,
            Arc::clone(&metrics),
        ),
        cloud: Cloud::new(
            Arc::clone(&driver),
            Arc::clone(&metrics),
            Arc::new(StoreCluster::new(services.clone())),
        ),
        events: Events::new(client.clone(), identity.to_string()),
        metrics: Arc::clone(&metrics),
        nodes: node_informer.store(),
        services,
        config: config.clone(),
        refusals: Default::default(),
    });
    let mut tasks = JoinSet::new();
    // A reload never changes the exports (it is refused if it would), so this stays true.
    let exports = driver.get().compiled().surface.exports;
    let mut node = None;
    if config.controllers.node || config.controllers.lifecycle {
        if !exports.instances {
            tracing::error!(
                "the driver exports no `instances` interface: the node and node-lifecycle controllers are not started"
            );
        } else {
            if config.controllers.node {
                let c = NodeController::new(Arc::clone(&ctx));
                let h = Arc::clone(&c);
                node_informer.on_change(move |old, new| h.handle(old, new));
                tasks.spawn(Arc::clone(&c).run(cancel.clone()));
                node = Some(c);
            }
            if config.controllers.lifecycle {
                tasks.spawn(LifecycleController::new(Arc::clone(&ctx)).run(cancel.clone()));
            }
        }
    }
    let mut service = None;
    if config.controllers.service {
        if !exports.load_balancer {
            tracing::warn!(
                "the driver exports no `load-balancer` interface: the service controller is not started"
            );
        } else {
            let c = ServiceController::new(Arc::clone(&ctx));
            let (hs, hn) = (Arc::clone(&c), Arc::clone(&c));
            service_informer.on_change(move |old, new| hs.handle_service(old, new));
            node_informer.on_change(move |old, new| hn.handle_node(old, new));
            tasks.spawn(Arc::clone(&c).run(cancel.clone()));
            service = Some(c);
        }
    }
    if config.controllers.route && config.configure_cloud_routes {
        if !exports.routes {
            tracing::info!(
                "the driver exports no `routes` interface: the route controller is not started"
            );
        } else {
            match parse_cluster_cidrs(&config.cluster_cidr) {
                Ok(cidrs) => {
                    tasks.spawn(RouteController::new(Arc::clone(&ctx), cidrs).run(cancel.clone()));
                }
                // Upstream exits here; a CCM that cannot run routes can still run everything else.
                Err(e) => tracing::error!(
                    "the route controller is disabled: {e}; pass --cluster-cidr, or --configure-cloud-routes=false to silence this"
                ),
            }
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
                cloud.driver().housekeeping(&cloud.scope("")).await,
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
        node,
        service,
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
    let client = with_user_agent(
        client,
        Arc::new(move || user_agent(Some(agent_slot.get().info()))),
    );
    // Every replica watches, leader or not, so a standby takes over with the current version.
    if let Some(reload) = opts.reload {
        let events = Arc::new(Events::new(client.clone(), opts.identity.clone()));
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
        client,
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
            .unwrap_or_else(|p| p.into_inner()) =
            Some(Box::new(move || ctx.cloud.export_counters()));
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
