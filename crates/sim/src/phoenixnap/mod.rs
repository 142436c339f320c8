//! A stateful simulator of the PhoenixNAP APIs, as far as the PhoenixNAP cloud controller
//! manager uses them: the OAuth2 token endpoint, BMC servers (seeded), IP blocks with tags,
//! public networks with asynchronous block assignment, and the tag manager — all on one port.
//!
//! Every API request needs `Authorization: Bearer <token>` with a token from
//! `POST /auth/realms/BMC/protocol/openid-connect/token` (client credentials by HTTP Basic or
//! form fields); tokens expire after `token_ttl` (or [`PhoenixnapSim::expire_tokens`]). Errors
//! are `{"message": ..., "validationErrors": [...]}`. Assigning a block to a public network
//! answers 202 and reads `assigning` until `assign_after` has passed (or
//! [`PhoenixnapSim::settle`]), then `assigned`; unassigning goes through `unassigning` the same
//! way. Fault injection and a request log make it a test fixture.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use wasm_ccm_sim::phoenixnap::{
//!     Match, PhoenixnapOptions, PhoenixnapSim, SeedPublicNetwork, SeedServer,
//! };
//! let sim = PhoenixnapSim::start("127.0.0.1:0".parse()?, PhoenixnapOptions::default()).await?;
//! let server = sim.add_server(
//!     SeedServer::new("node-1").public(&["198.51.100.130"]).private(&["10.0.0.11"]),
//! );
//! let network = sim.add_public_network(SeedPublicNetwork::new("k8s").with_vlan(20));
//! sim.faults().fail_next(Match::method("POST"), 500, 1);
//! println!(
//!     "base URL {} token URL {} client {}:{} server {server} LB network {network}",
//!     sim.url(),
//!     sim.token_url(),
//!     sim.client_id(),
//!     sim.client_secret(),
//! );
//! # Ok(()) }
//! ```

mod api;
mod auth;
mod control;
mod error;
pub mod kit;
mod log;
mod model;
mod seed;
mod server;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::request_core::{self, StateCell};
use crate::serving::Served;

pub use crate::fixture::{Faults, Match};
pub use auth::{TOKEN_PATH, TokenRequest};
pub use log::{LOG_CAPACITY, LoggedRequest};
pub use model::Race;
pub use seed::{Seed, SeedIpBlock, SeedPublicNetwork, SeedServer, SeedTag, SeedTagValue};

use model::{State, render_block, render_network, render_network_block, render_server, render_tag};

/// State shared by the server task and every [`PhoenixnapSim`] handle.
pub(crate) struct Shared {
    state: StateCell<State>,
    tokens: auth::Tokens,
    faults: Faults,
    log: log::RequestLog,
    /// `http://127.0.0.1:PORT`.
    url: String,
}

/// Sets a block's status and cancels its pending transition; `unassigned` also drops the
/// assignment. Returns whether the block exists.
fn set_block_status(state: &mut State, id: &str, status: &str) -> bool {
    match state.block_mut(id) {
        Some(block) => {
            block.status = status.to_string();
            block.due = None;
            if status == "unassigned" {
                block.assignment = None;
            }
            true
        }
        None => false,
    }
}

/// Sets a public network's status; returns whether the network exists.
fn set_network_status(state: &mut State, id: &str, status: &str) -> bool {
    match state.networks.iter_mut().find(|n| n.id == id) {
        Some(n) => {
            n.status = status.to_string();
            true
        }
        None => false,
    }
}

/// Tunables of a simulator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhoenixnapOptions {
    /// The OAuth2 client ID the token endpoint accepts.
    pub client_id: String,
    /// The OAuth2 client secret the token endpoint accepts.
    pub client_secret: String,
    /// How long an issued token is valid (`expires_in`).
    pub token_ttl: Duration,
    /// How long `assigning` and `unassigning` last.
    pub assign_after: Duration,
    /// A request limit (none by default); see `CloudApi::throttled` in `server.rs` for the
    /// answer.
    pub rate_limit: Option<crate::RateLimit>,
}

impl Default for PhoenixnapOptions {
    /// Client `sim-client` / `sim-secret`, tokens valid for an hour, assignments complete as
    /// soon as they are read after the request that started them.
    fn default() -> Self {
        PhoenixnapOptions {
            client_id: "sim-client".into(),
            client_secret: "sim-secret".into(),
            token_ttl: Duration::from_secs(3600),
            assign_after: Duration::ZERO,
            rate_limit: None,
        }
    }
}

/// A running PhoenixNAP API simulator. Cheap to clone; the server stops when the last clone is
/// dropped or on [`PhoenixnapSim::shutdown`].
#[derive(Clone)]
pub struct PhoenixnapSim {
    shared: Arc<Shared>,
    server: Arc<Served>,
}

impl std::fmt::Debug for PhoenixnapSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PhoenixnapSim")
            .field("url", &self.url())
            .finish()
    }
}

impl PhoenixnapSim {
    /// Binds `addr` (port 0 picks a free port) and serves on a spawned task of the current
    /// tokio runtime.
    pub async fn start(addr: SocketAddr, options: PhoenixnapOptions) -> anyhow::Result<Self> {
        let faults = Faults::with_rate_limit(options.rate_limit);
        let (shared, server) = request_core::start(addr, |url| Shared {
            state: StateCell::new(State::new(options.assign_after)),
            tokens: auth::Tokens::new(options.client_id, options.client_secret, options.token_ttl),
            faults,
            log: log::RequestLog::default(),
            url,
        })
        .await?;
        Ok(PhoenixnapSim { shared, server })
    }

    /// The base URL of every API, e.g. `http://127.0.0.1:34567` (no trailing slash; an
    /// unspecified bind address shows as 127.0.0.1): `{url}/bmc/v1`, `{url}/ips/v1`,
    /// `{url}/networks/v1`, `{url}/tag-manager/v1`.
    pub fn url(&self) -> String {
        self.shared.url.clone()
    }

    /// The token endpoint: `{url}/auth/realms/BMC/protocol/openid-connect/token`.
    pub fn token_url(&self) -> String {
        format!("{}{TOKEN_PATH}", self.shared.url)
    }

    /// The client ID the token endpoint accepts.
    pub fn client_id(&self) -> String {
        self.shared.tokens.client_id.clone()
    }

    /// The client secret the token endpoint accepts.
    pub fn client_secret(&self) -> String {
        self.shared.tokens.client_secret.clone()
    }

    /// A valid bearer token without going through the token endpoint.
    pub fn issue_token(&self) -> String {
        self.shared.tokens.issue()
    }

    /// The bearer tokens the simulator has issued (by its token endpoint or
    /// [`PhoenixnapSim::issue_token`]), sorted; one that had expired when a later one was issued
    /// is forgotten. For tests that look for a client's token where it must not be.
    pub fn issued_tokens(&self) -> Vec<String> {
        self.shared.tokens.held()
    }

    /// Every token issued so far expires now: API calls with them answer 401 until the client
    /// fetches a new one.
    pub fn expire_tokens(&self) {
        self.shared.tokens.expire_all();
    }

    /// Every request the token endpoint received, with the client credentials as they came
    /// (Basic header decoded, form fields decoded), granted or not; in order.
    pub fn token_requests(&self) -> Vec<TokenRequest> {
        self.shared.tokens.requests()
    }

    /// Whether the token endpoint accepts client credentials by HTTP Basic (default true). Off,
    /// a Basic header is ignored and credentials must come as `client_id`/`client_secret` form
    /// fields (401 otherwise), which exercises a client's fallback.
    pub fn accept_basic_auth(&self, on: bool) {
        self.shared.tokens.set_accept_basic(on);
    }

    /// Adds tags, servers, public networks and IP blocks; all or nothing (an error leaves the
    /// simulator as it was).
    pub fn seed(&self, seed: Seed) -> Result<(), String> {
        self.shared
            .state
            .change(|s| seed::apply(s, &seed, Instant::now()))
    }

    /// Adds a server; returns its ID.
    ///
    /// # Panics
    ///
    /// When the server is invalid (a test set-up error); [`PhoenixnapSim::try_add_server`]
    /// returns the error instead.
    pub fn add_server(&self, server: SeedServer) -> String {
        self.try_add_server(server)
            .unwrap_or_else(|e| panic!("invalid seed server: {e}"))
    }

    /// [`PhoenixnapSim::add_server`] returning the error instead of panicking.
    pub fn try_add_server(&self, server: SeedServer) -> Result<String, String> {
        self.shared.state.change(|s| seed::add_server(s, &server))
    }

    /// Adds a public network (and its `ipBlocks`); returns its ID.
    ///
    /// # Panics
    ///
    /// When the network is invalid; [`PhoenixnapSim::try_add_public_network`] returns the error.
    pub fn add_public_network(&self, network: SeedPublicNetwork) -> String {
        self.try_add_public_network(network)
            .unwrap_or_else(|e| panic!("invalid seed public network: {e}"))
    }

    /// [`PhoenixnapSim::add_public_network`] returning the error instead of panicking.
    pub fn try_add_public_network(&self, network: SeedPublicNetwork) -> Result<String, String> {
        self.shared.state.change(|s| seed::add_network(s, &network))
    }

    /// Adds a tag name to the tag manager; returns its ID.
    ///
    /// # Panics
    ///
    /// When the name is empty or taken; [`PhoenixnapSim::try_add_tag`] returns the error.
    pub fn add_tag(&self, tag: SeedTag) -> String {
        self.try_add_tag(tag)
            .unwrap_or_else(|e| panic!("invalid seed tag: {e}"))
    }

    /// [`PhoenixnapSim::add_tag`] returning the error instead of panicking.
    pub fn try_add_tag(&self, tag: SeedTag) -> Result<String, String> {
        self.shared.state.change(|s| seed::add_tag(s, &tag))
    }

    /// Adds an IP block; returns its ID.
    ///
    /// # Panics
    ///
    /// When the block is invalid; [`PhoenixnapSim::try_add_ip_block`] returns the error.
    pub fn add_ip_block(&self, block: SeedIpBlock) -> String {
        self.try_add_ip_block(block)
            .unwrap_or_else(|e| panic!("invalid seed IP block: {e}"))
    }

    /// [`PhoenixnapSim::add_ip_block`] returning the error instead of panicking.
    pub fn try_add_ip_block(&self, block: SeedIpBlock) -> Result<String, String> {
        self.shared
            .state
            .change(|s| seed::add_block(s, &block, Instant::now()))
    }

    /// Sets a server's status (any string, e.g. `powered-off`); returns whether it exists.
    pub fn set_server_status(&self, id: &str, status: &str) -> bool {
        match self
            .shared
            .state
            .lock()
            .servers
            .iter_mut()
            .find(|s| s.id == id)
        {
            Some(s) => {
                s.status = status.to_string();
                true
            }
            None => false,
        }
    }

    /// Removes a server; returns whether it existed. Blocks assigned to it keep their
    /// assignment.
    pub fn remove_server(&self, id: &str) -> bool {
        let mut state = self.shared.state.lock();
        let before = state.servers.len();
        state.servers.retain(|s| s.id != id);
        state.servers.len() != before
    }

    /// Sets an IP block's status (any string, e.g. `error assigning`) and cancels its pending
    /// transition; `unassigned` also drops its assignment. Returns whether the block exists.
    pub fn set_block_status(&self, id: &str, status: &str) -> bool {
        set_block_status(&mut self.shared.state.lock(), id, status)
    }

    /// Completes every pending `assigning`/`unassigning` now.
    pub fn settle(&self) {
        self.shared.state.lock().settle();
    }

    /// How long `assigning`/`unassigning` last for transitions started from now on.
    pub fn set_assign_after(&self, d: Duration) {
        self.shared.state.lock().assign_after = d;
    }

    /// The `assignedResourceType` of blocks assigned to a public network from now on: the
    /// default `public network` (the real API's, upstream commit 86fc6c9), or the other
    /// observed spelling `PUBLIC_NETWORK`. Also `PUT /sim/network-resource-type {"type": ...}`.
    pub fn set_network_resource_type(&self, resource_type: &str) {
        self.shared.state.lock().network_resource_type = resource_type.to_string();
    }

    /// What `GET /bmc/v1/servers/{id}` answers for an unknown or deleted server: 403 (the
    /// default, as the real API: upstream commit d84a2c5) or 404. Also
    /// `PUT /sim/gone-server-status {"status": 404}`.
    ///
    /// # Panics
    ///
    /// For another status (a test set-up error).
    pub fn set_gone_server_status(&self, status: u16) {
        assert!(
            matches!(status, 403 | 404),
            "gone-server status {status}: 403 or 404"
        );
        self.shared.state.lock().gone_server_status = status;
    }

    /// Sets a public network's status: `BUSY`, `READY`, `DELETING` or `ERROR`
    /// (networkapi.spec.yaml `PublicNetwork.status`); only a `READY` network takes IP blocks
    /// (others answer 409). Also `PUT /sim/public-networks/{id}/status {"status": "ERROR"}`.
    /// Returns whether the network exists.
    ///
    /// # Panics
    ///
    /// For another status (a test set-up error).
    pub fn set_public_network_status(&self, id: &str, status: &str) -> bool {
        assert!(
            model::NETWORK_STATUSES.contains(&status),
            "public network status {status:?}: one of {:?}",
            model::NETWORK_STATUSES
        );
        set_network_status(&mut self.shared.state.lock(), id, status)
    }

    /// Another client's change that lands just before the next assignment request
    /// (`POST /networks/v1/public-networks/{id}/ip-blocks`) is handled: a race between a
    /// client's read and its assignment, made deterministic. Replaces a pending one.
    pub fn race_next_assignment(&self, race: Race) {
        self.shared.state.lock().race = Some(race);
    }

    /// Reads the state after completing due transitions, as a request would see it.
    fn read<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        let mut state = self.shared.state.lock();
        state.advance(Instant::now());
        f(&state)
    }

    /// Every server, as `GET /bmc/v1/servers` renders them.
    pub fn servers(&self) -> Vec<Value> {
        self.read(|s| s.servers.iter().map(|v| render_server(s, v)).collect())
    }

    /// Every IP block, as `GET /ips/v1/ip-blocks` renders them.
    pub fn ip_blocks(&self) -> Vec<Value> {
        self.read(|s| s.blocks.iter().map(|b| render_block(s, b)).collect())
    }

    /// Every tag, as `GET /tag-manager/v1/tags` renders them.
    pub fn tags(&self) -> Vec<Value> {
        self.read(|s| s.tags.iter().map(|t| render_tag(s, t)).collect())
    }

    /// Every public network, as `GET /networks/v1/public-networks` renders them.
    pub fn public_networks(&self) -> Vec<Value> {
        self.read(|s| s.networks.iter().map(|n| render_network(s, n)).collect())
    }

    /// The `ipBlocks` of a public network (`{id, cidr, usedIpsCount}`: assigning, assigned
    /// and unassigning blocks); empty for an unknown network.
    pub fn public_network_blocks(&self, network_id: &str) -> Vec<Value> {
        self.read(|s| {
            s.blocks
                .iter()
                .filter(|b| b.on_network(network_id))
                .map(render_network_block)
                .collect()
        })
    }

    /// Every request so far (the last [`LOG_CAPACITY`]), oldest first, including rejected and
    /// faulted ones and token requests. `/sim/...` control requests are not logged.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.shared.log.all()
    }

    /// [`Self::requests`] with when each arrived and was answered, on the clock every
    /// simulator of the process shares (to order the requests of several clouds).
    pub fn requests_sequenced(&self) -> Vec<crate::Sequenced<LoggedRequest>> {
        self.shared.log.sequenced()
    }

    /// The logged requests whose method is not GET (token requests included).
    pub fn mutations(&self) -> Vec<LoggedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.method != "GET")
            .collect()
    }

    /// Empties the request log.
    pub fn clear_requests(&self) {
        self.shared.log.clear();
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
