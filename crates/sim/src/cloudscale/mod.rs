//! A stateful simulator of the cloudscale.ch REST API, as far as the cloudscale cloud
//! controller manager uses it: servers (seeded), load balancers with pools, members, listeners
//! and health monitors, and floating IPs (seeded or created, assigned and deleted, as
//! cloudscale-cli does), plus the networks and subnets cloudscale-cli lists.
//!
//! Every request needs `Authorization: Bearer <token>`. Errors are flat JSON objects of
//! strings (Django REST framework style), which the Go SDK and the driver decode. Every
//! resource has an absolute `href` that resolves against this simulator, so clients can DELETE
//! by href. Load balancers are `changing` until `lb_ready_after` has passed (or
//! [`CloudscaleSim::settle`]), then `running`. Fault injection and a request log make it a test
//! fixture.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use wasm_ccm_sim::cloudscale::{CloudscaleOptions, CloudscaleSim, Match, SeedServer};
//! let sim = CloudscaleSim::start("127.0.0.1:0".parse()?, CloudscaleOptions::default()).await?;
//! let uuid = sim.add_server(
//!     SeedServer::new("node-1").private("", "10.0.0.0/24", &["10.0.0.10"]),
//! );
//! sim.faults().fail_next(Match::method("POST"), 500, 1);
//! println!("CLOUDSCALE_API_URL={}/ CLOUDSCALE_ACCESS_TOKEN={} ({uuid})", sim.url(), sim.token());
//! # Ok(()) }
//! ```

mod body;
mod control;
mod error;
mod faults;
mod floating_ips;
pub mod kit;
mod listeners;
mod load_balancers;
mod log;
mod model;
mod monitors;
mod net;
mod pools;
mod query;
mod render;
mod reply;
mod seed;
mod server;
mod shared;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::request_core::{self, StateCell};
use crate::serving::Served;

pub use faults::{Faults, Match};
pub use log::{LOG_CAPACITY, LoggedRequest};
pub use seed::{Seed, SeedAddress, SeedFloatingIp, SeedInterface, SeedServer};

use model::{Ctx, HasMeta, State, ordered};
use shared::Shared;

/// Makes every load balancer `running` now.
fn settle(state: &mut State) {
    let now = Instant::now();
    for lb in state.load_balancers.values_mut() {
        lb.ready_at = lb.ready_at.min(now);
    }
}

/// Removes a server; floating IPs on it are unassigned. Its subnets stay known.
fn remove_server(state: &mut State, uuid: &str) -> bool {
    if state.servers.remove(uuid).is_none() {
        return false;
    }
    for fip in state.floating_ips.values_mut() {
        if fip.server.as_deref() == Some(uuid) {
            fip.server = None;
        }
    }
    true
}

/// Tunables of a simulator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloudscaleOptions {
    /// The bearer token every request must carry.
    pub token: String,
    /// How long a new load balancer reads `changing` before it is `running`.
    pub lb_ready_after: Duration,
    /// A request limit (none by default); see `CloudApi::throttled` in `server.rs` for the
    /// answer.
    pub rate_limit: Option<crate::RateLimit>,
}

impl Default for CloudscaleOptions {
    /// Token `sim-token`; load balancers are `running` as soon as they are read after creation.
    fn default() -> Self {
        CloudscaleOptions {
            token: "sim-token".into(),
            lb_ready_after: Duration::ZERO,
            rate_limit: None,
        }
    }
}

/// A running cloudscale API simulator. Cheap to clone; the server stops when the last clone is
/// dropped or on [`CloudscaleSim::shutdown`].
#[derive(Clone)]
pub struct CloudscaleSim {
    shared: Arc<Shared>,
    server: Arc<Served>,
}

impl std::fmt::Debug for CloudscaleSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudscaleSim")
            .field("url", &self.url())
            .finish()
    }
}

impl CloudscaleSim {
    /// Binds `addr` (port 0 picks a free port) and serves on a spawned task of the current
    /// tokio runtime.
    pub async fn start(addr: SocketAddr, options: CloudscaleOptions) -> anyhow::Result<Self> {
        // cloudscale's faults wrap the shared ones (busy refusals on top).
        let faults = Faults::default();
        faults.set_rate_limit(options.rate_limit);
        let (shared, server) = request_core::start(addr, |url| Shared {
            state: StateCell::new(State::new(options.lb_ready_after)),
            faults,
            log: log::RequestLog::default(),
            token: options.token,
            url,
        })
        .await?;
        Ok(CloudscaleSim { shared, server })
    }

    /// The base URL, e.g. `http://127.0.0.1:34567` (no trailing slash; an unspecified bind
    /// address shows as 127.0.0.1). The API lives under `/v1/`.
    pub fn url(&self) -> String {
        self.shared.url.clone()
    }

    /// The bearer token requests must carry.
    pub fn token(&self) -> String {
        self.shared.token.clone()
    }

    /// Adds servers and floating IPs; all or nothing (an error leaves the simulator as it
    /// was). Errors: duplicate server UUIDs or floating IPs, unparsable addresses, CIDRs or
    /// flavors, unknown zones, subnets reused with another CIDR or network.
    pub fn seed(&self, seed: Seed) -> Result<(), String> {
        self.shared.state.change(|s| seed::apply(s, &seed))
    }

    /// Adds one server (its private subnets become known subnets); returns its UUID.
    ///
    /// # Panics
    ///
    /// When the server is invalid (see [`CloudscaleSim::seed`]); a test set-up error.
    /// [`CloudscaleSim::try_add_server`] returns the error instead.
    pub fn add_server(&self, server: SeedServer) -> String {
        match self.try_add_server(server) {
            Ok(uuid) => uuid,
            Err(e) => panic!("invalid seed server: {e}"),
        }
    }

    /// [`CloudscaleSim::add_server`] returning the error instead of panicking.
    pub fn try_add_server(&self, server: SeedServer) -> Result<String, String> {
        self.shared.state.change(|s| seed::add_server(s, &server))
    }

    /// Removes a server (floating IPs on it are unassigned); returns whether it existed.
    pub fn remove_server(&self, uuid: &str) -> bool {
        remove_server(&mut self.shared.state.lock(), uuid)
    }

    /// Sets a server's status (any string, e.g. `stopped`); returns whether it exists.
    pub fn set_server_status(&self, uuid: &str, status: &str) -> bool {
        match self.shared.state.lock().servers.get_mut(uuid) {
            Some(s) => {
                s.status = status.to_string();
                true
            }
            None => false,
        }
    }

    /// Adds an unassigned regional floating IP in `rma`: `5.102.150.123/32` or
    /// `2a06:c01::123/128` (or an IPv6 `/56`).
    pub fn add_floating_ip(&self, network: &str) -> Result<(), String> {
        seed::add_floating_ip(&mut self.shared.state.lock(), network, None)
    }

    /// Makes every existing load balancer `running` now.
    pub fn settle(&self) {
        settle(&mut self.shared.state.lock());
    }

    /// How long load balancers created from now on stay `changing`.
    pub fn set_lb_ready_after(&self, d: Duration) {
        self.shared.state.lock().lb_ready_after = d;
    }

    /// Renders every resource of a table in creation order, as a GET of the list would.
    fn render_all<T: HasMeta, K: Ord>(
        &self,
        table: impl Fn(&State) -> &std::collections::BTreeMap<K, T>,
        render: impl Fn(&State, &Ctx, &T) -> Value,
    ) -> Vec<Value> {
        let state = self.shared.state.lock();
        let ctx = Ctx {
            base: self.shared.url.clone(),
            now: Instant::now(),
            refuse_changing: false,
        };
        ordered(table(&state))
            .into_iter()
            .map(|x| render(&state, &ctx, x))
            .collect()
    }

    /// Every server, as `GET /v1/servers` renders them.
    pub fn servers(&self) -> Vec<Value> {
        self.render_all(|s| &s.servers, render::server)
    }

    /// Every load balancer, as `GET /v1/load-balancers` renders them.
    pub fn load_balancers(&self) -> Vec<Value> {
        self.render_all(|s| &s.load_balancers, render::load_balancer)
    }

    /// Every pool.
    pub fn pools(&self) -> Vec<Value> {
        self.render_all(|s| &s.pools, render::pool)
    }

    /// Every member of every pool.
    pub fn members(&self) -> Vec<Value> {
        self.render_all(|s| &s.members, render::member)
    }

    /// Every listener.
    pub fn listeners(&self) -> Vec<Value> {
        self.render_all(|s| &s.listeners, render::listener)
    }

    /// Every health monitor.
    pub fn health_monitors(&self) -> Vec<Value> {
        self.render_all(|s| &s.monitors, render::monitor)
    }

    /// Every floating IP.
    pub fn floating_ips(&self) -> Vec<Value> {
        self.render_all(|s| &s.floating_ips, render::floating_ip)
    }

    /// Every request so far (the last [`LOG_CAPACITY`]), oldest first, including rejected and
    /// faulted ones. `/sim/...` control requests are not logged.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.shared.log.all()
    }

    /// [`Self::requests`] with when each arrived and was answered, on the clock every
    /// simulator of the process shares (to order the requests of several clouds).
    pub fn requests_sequenced(&self) -> Vec<crate::Sequenced<LoggedRequest>> {
        self.shared.log.sequenced()
    }

    /// Empties the request log.
    pub fn clear_requests(&self) {
        self.shared.log.clear();
    }

    /// The logged requests whose method is not GET.
    pub fn mutations(&self) -> Vec<LoggedRequest> {
        self.requests()
            .into_iter()
            .filter(LoggedRequest::is_mutation)
            .collect()
    }

    /// Fault injection, effective immediately for every later request.
    pub fn faults(&self) -> Faults {
        self.shared.faults.clone()
    }

    /// Stops accepting connections and waits (up to 5 s) for open requests; other clones stop
    /// serving too.
    pub async fn shutdown(self) {
        self.server.shutdown().await;
    }
}
