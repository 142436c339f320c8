//! [`run`]: the controller manager as a process — slots, reload watchers, the HTTPS endpoints,
//! the lease, then the loops until cancelled or the lease is lost.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use kube::Client;
use tokio_util::sync::CancellationToken;
use wasm_ccm_controllers::{
    ControllerConfig, DriverSlot, EnabledControllers, Events, Metrics, Routing, start_driver_set,
};
use wasm_ccm_runtime::Driver;

use crate::kubernetes_version;
use crate::leader::{LeaderConfig, LeaderElector};
use crate::reload::{ReloadOptions, record_in_service, watch};
use crate::request_metrics::RequestMetrics;
use crate::server::{Health, Serving, serve};
use crate::service_accounts::{ServiceAccountOptions, controller_clients};
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
    /// `--use-service-account-credentials`: each controller talks as its own ServiceAccount
    /// ([`crate::service_accounts`]); `None` runs every controller on `client`.
    pub service_account_credentials: Option<ServiceAccountOptions>,
    /// The API server's `host[:port]`, the `host` label of the REST client metrics
    /// ([`crate::request_metrics`]).
    pub api_host: String,
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
        let label = routing.drivers()[index].name.clone();
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
    let agent: crate::user_agent::AgentFn = if opts.config.shadow.is_some() {
        Arc::new(move || shadow_user_agent(agent_slot.get().info()))
    } else {
        Arc::new(move || user_agent(Some(agent_slot.get().info())))
    };
    let client = with_user_agent(client, Arc::clone(&agent));
    // Every request of the process's clients is counted (client-go's REST client metrics).
    let counted = RequestMetrics::new(opts.api_host.clone(), Arc::clone(&metrics));
    let client = counted.wrap(client);
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
        .map(|cfg| LeaderElector::new(client.clone(), cfg).with_metrics(Arc::clone(&metrics)));
    let mut leading_since = None;
    if let Some(elector) = &elector {
        // As client-go's `NewLeaderElector`: a candidate reports itself not leading (0) from the
        // start, so a standby's series exists too.
        metrics.set(
            "leader_election_master_status",
            &[("name", elector.lease_name())],
            0.0,
        );
        tracing::info!(identity = %elector.identity(), "waiting to acquire the lease");
        let Some(acquired) = elector.acquire(&cancel).await else {
            return Ok(Exit::Stopped);
        };
        leading_since = Some(acquired);
        tracing::info!(identity = %elector.identity(), "became leader");
        metrics.set(
            "leader_election_master_status",
            &[("name", elector.lease_name())],
            1.0,
        );
    }
    let work = cancel.child_token();
    // As upstream, the controllers' accounts are got and their clients built once leading:
    // the informers stay on this process's client, the controllers get their own.
    let clients = match opts.service_account_credentials {
        None => client.clone().into(),
        Some(sa) => {
            let events = Arc::new(Events::new(client.clone(), opts.identity.clone()));
            controller_clients(&client, sa, agent, counted, events, &work)
                .await
                .map_err(std::io::Error::other)?
        }
    };
    let running = start_driver_set(
        clients,
        slots,
        routing,
        opts.config,
        opts.controllers,
        Arc::clone(&metrics),
        &opts.identity,
        work.clone(),
    );
    let view = running.view();
    {
        let scrape = view.clone();
        *health
            .before_scrape
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Box::new(move || scrape.export_metrics()));
        let report = view.clone();
        *health
            .shadow_report
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Box::new(move || report.shadow_report()));
    }
    running.announce_divergences(&client, &opts.identity, &work);
    let ready_health = Arc::clone(&health);
    tokio::spawn(async move {
        view.wait_synced().await;
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
                    &[("name", elector.lease_name())],
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
