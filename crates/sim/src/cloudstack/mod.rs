//! A stateful simulator of the Apache CloudStack API, as far as the CloudStack cloud controller
//! manager uses it (apache/cloudstack-kubernetes-provider through apache/cloudstack-go): one
//! endpoint `/client/api` taking every command by `GET ?query` or form `POST`, signed requests
//! (HMAC-SHA1, `signatureversion=3` with `expires`), JSON envelopes, pagination, project scoping,
//! and asynchronous jobs polled with `queryAsyncJobResult` — for zones, projects, VMs, guest
//! networks, public IPs, load-balancer rules and their members, firewall rules and network ACLs,
//! and resource tags (`createTags`, `deleteTags`, `listTags`, the `tags[i]` filter of
//! `listPublicIpAddresses`; see `commands/tags.rs`).
//!
//! Mutating commands answer `{"jobid", "id"?}` at once and show their change in a transitional
//! state (`Add`, `Allocating`, `Revoke`, `Releasing`) until the job completes: after
//! `job_polls` polls of it (default 1: the first poll sees it done), after `job_duration`, or on
//! [`CloudstackSim::settle`] ([`CloudstackSim::settle_jobs`] for one command's jobs).
//! [`CloudstackSim::fail_next_jobs`] makes jobs fail and roll back. Fault injection (including
//! kill points, [`Faults::kill_after`]: every request after a named one fails, as if the client
//! died there) and a request log make it a test fixture.
//!
//! Two switches make it behave as a given cloud does: the version (`set_version`, seed
//! `settings.version`, `PUT /sim/version`; before 4.18 `createLoadBalancerRule` refuses
//! `cidrlist`, before 4.22 `updateLoadBalancerRule` ignores it) and `default.page.size`
//! (`set_page_size_limit`, seed `settings.page_size`, `PUT /sim/page-size`; a larger `pagesize`
//! is refused with 431, and so are `page` without `pagesize` and `pagesize` without `page`, as
//! `BaseListCmd` refuses them: see `params.rs`). `assignToLoadBalancerRule` checks its VMs in
//! the job, as CloudStack does: one gone, `Destroyed` or `Expunging` VM, or one off the rule's
//! network, fails the whole job with 431 (`commands/lb.rs`, `assign_refusal`). These, the
//! LB-rule port conflict, `listCapabilities` and the failed-job body name their sources (CloudStack's Java classes, recorded answers of
//! apache/cloudstack-go `test/testdata`, issue threads) where they are implemented.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use wasm_ccm_sim::cloudstack::{CloudstackSim, Match, Seed};
//! let sim = CloudstackSim::start().await?;
//! sim.seed(Seed::example()).map_err(anyhow::Error::msg)?;
//! sim.faults().fail_next(Match::command("createLoadBalancerRule"), 530, 1);
//! println!("api-url {} api-key {} secret-key {}", sim.url(), sim.api_key(), sim.secret_key());
//! # Ok(()) }
//! ```

mod commands;
mod control;
mod error;
mod job;
mod jobs;
pub mod kit;
mod log;
mod model;
mod options;
mod params;
mod records;
mod render;
mod seed;
mod server;
mod signing;
mod snapshot;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::request_core::{self, StateCell};
use crate::serving::Served;

pub use crate::fixture::{Faults, Match};
pub use log::{LOG_CAPACITY, LoggedRequest, REDACTED};
pub use seed::{
    EXAMPLE_YAML, Seed, SeedAclList, SeedIpPool, SeedLbRule, SeedNetwork, SeedNic, SeedProject,
    SeedPublicIp, SeedSettings, SeedVm, SeedVpc, SeedZone,
};
pub use server::API_PATH;
pub use signing::{Encoding, encode, sign, string_to_sign};

use model::State;
pub use options::{CidrSeparator, CloudstackOptions};

/// State shared by the server task and every [`CloudstackSim`] handle.
pub(crate) struct Shared {
    state: StateCell<State>,
    faults: Faults,
    log: log::RequestLog,
    /// The account's key pair: `(api_key, secret_key)`; [`CloudstackSim::rotate_keys`]
    /// replaces it.
    keys: std::sync::RwLock<(String, String)>,
    /// `http://127.0.0.1:PORT`.
    base: String,
}

impl Shared {
    /// The current `(api_key, secret_key)`.
    pub(crate) fn keys(&self) -> (String, String) {
        self.keys.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Marks the next `count` jobs of `command` (any case) to fail.
fn fail_jobs(state: &mut State, command: &str, count: usize) {
    if count > 0 {
        *state
            .settings
            .failing_jobs
            .entry(command.to_lowercase())
            .or_default() += count;
    }
}

/// A running CloudStack API simulator. Cheap to clone; the server stops when the last clone is
/// dropped or on [`CloudstackSim::shutdown`].
#[derive(Clone)]
pub struct CloudstackSim {
    shared: Arc<Shared>,
    server: Arc<Served>,
}

impl std::fmt::Debug for CloudstackSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudstackSim")
            .field("url", &self.url())
            .finish()
    }
}

/// Unwraps a seeding result of a convenience call: a bad entry is a test set-up error.
fn seeded<T>(what: &str, result: Result<T, String>) -> T {
    result.unwrap_or_else(|e| panic!("invalid seed {what}: {e}"))
}

impl CloudstackSim {
    /// Starts with default options and no state (no zones, VMs, ...) on a free loopback port.
    pub async fn start() -> anyhow::Result<Self> {
        CloudstackSim::start_with(CloudstackOptions::default()).await
    }

    /// Starts with `options` and no state on a free loopback port.
    pub async fn start_with(options: CloudstackOptions) -> anyhow::Result<Self> {
        CloudstackSim::start_on(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), options).await
    }

    /// Binds `addr` (port 0 picks a free port) and serves on a spawned task of the current
    /// tokio runtime.
    pub async fn start_on(addr: SocketAddr, options: CloudstackOptions) -> anyhow::Result<Self> {
        let faults = Faults::with_rate_limit(options.rate_limit);
        let (shared, server) = request_core::start(addr, |base| Shared {
            state: StateCell::new(State::new(options.settings())),
            faults,
            log: log::RequestLog::default(),
            keys: std::sync::RwLock::new((options.api_key, options.secret_key)),
            base,
        })
        .await?;
        Ok(CloudstackSim { shared, server })
    }

    /// The API endpoint, `http://127.0.0.1:PORT/client/api` (the CCM's `api-url`).
    pub fn url(&self) -> String {
        format!("{}{API_PATH}", self.shared.base)
    }

    /// `http://127.0.0.1:PORT`, where the `/sim/...` control API is.
    pub fn base_url(&self) -> String {
        self.shared.base.clone()
    }

    /// The API key requests must carry.
    pub fn api_key(&self) -> String {
        self.shared.keys().0
    }

    /// The secret key requests are signed with.
    pub fn secret_key(&self) -> String {
        self.shared.keys().1
    }

    /// Replaces the account's key pair, as CloudStack's `registerUserKeys` does: from now on
    /// requests with the old API key are refused (401, unknown key) and the new pair must sign.
    pub fn rotate_keys(&self, api_key: &str, secret_key: &str) {
        *self.shared.keys.write().unwrap_or_else(|p| p.into_inner()) =
            (api_key.to_string(), secret_key.to_string());
    }

    /// Adds everything in `seed`; all or nothing (an error leaves the simulator as it was).
    pub fn seed(&self, seed: Seed) -> Result<(), String> {
        self.shared.state.change(|s| seed::apply(s, &seed))
    }

    /// Adds a zone; returns its ID. Panics on a bad entry (e.g. a taken name), as the other
    /// `add_*` calls do; the `try_add_*` twins return the error.
    pub fn add_zone(&self, name: &str) -> String {
        seeded("zone", self.try_add_zone(name))
    }

    /// [`CloudstackSim::add_zone`] returning the error.
    pub fn try_add_zone(&self, name: &str) -> Result<String, String> {
        let zone = SeedZone {
            id: None,
            name: name.into(),
        };
        self.shared.state.change(|s| seed::add_zone(s, &zone))
    }

    /// Adds a project; returns its ID.
    pub fn add_project(&self, name: &str) -> String {
        seeded("project", self.try_add_project(name))
    }

    /// [`CloudstackSim::add_project`] returning the error.
    pub fn try_add_project(&self, name: &str) -> Result<String, String> {
        let project = SeedProject {
            id: None,
            name: name.into(),
        };
        self.shared.state.change(|s| seed::add_project(s, &project))
    }

    /// Adds an isolated network, or a VPC tier when `vpc` is set; returns its ID.
    pub fn add_network(&self, network: SeedNetwork) -> String {
        seeded("network", self.try_add_network(network))
    }

    /// [`CloudstackSim::add_network`] returning the error.
    pub fn try_add_network(&self, network: SeedNetwork) -> Result<String, String> {
        self.shared.state.change(|s| seed::add_network(s, &network))
    }

    /// Adds a VPC in `zone` (name or ID), optionally of a project (name or ID); returns its
    /// ID.
    pub fn add_vpc(&self, name: &str, zone: &str, project: Option<&str>) -> String {
        seeded("VPC", self.try_add_vpc(name, zone, project))
    }

    /// [`CloudstackSim::add_vpc`] returning the error.
    pub fn try_add_vpc(
        &self,
        name: &str,
        zone: &str,
        project: Option<&str>,
    ) -> Result<String, String> {
        let vpc = SeedVpc {
            id: None,
            name: name.into(),
            zone: zone.into(),
            project: project.map(str::to_string),
        };
        self.shared.state.change(|s| seed::add_vpc(s, &vpc))
    }

    /// Adds an ACL list to a VPC (name or ID); returns its ID.
    pub fn add_acl_list(&self, name: &str, vpc_id: &str) -> String {
        seeded("ACL list", self.try_add_acl_list(name, vpc_id))
    }

    /// [`CloudstackSim::add_acl_list`] returning the error.
    pub fn try_add_acl_list(&self, name: &str, vpc_id: &str) -> Result<String, String> {
        let acl = SeedAclList {
            id: None,
            name: name.into(),
            vpc: vpc_id.into(),
            description: None,
        };
        self.shared.state.change(|s| seed::add_acl_list(s, &acl))
    }

    /// Adds a VM; returns its ID.
    pub fn add_vm(&self, vm: SeedVm) -> String {
        seeded("VM", self.try_add_vm(vm))
    }

    /// [`CloudstackSim::add_vm`] returning the error.
    pub fn try_add_vm(&self, vm: SeedVm) -> Result<String, String> {
        self.shared.state.change(|s| seed::add_vm(s, &vm))
    }

    /// Adds free addresses (IPv4, or ranges `first-last`) to the pool of `zone`.
    pub fn add_public_ips(&self, zone: &str, ips: &[&str]) {
        seeded("public IP pool", self.try_add_public_ips(zone, ips));
    }

    /// [`CloudstackSim::add_public_ips`] returning the error, or the new addresses' IDs.
    pub fn try_add_public_ips(&self, zone: &str, ips: &[&str]) -> Result<Vec<String>, String> {
        let entries: Vec<String> = ips.iter().map(|s| (*s).to_string()).collect();
        self.shared
            .state
            .change(|s| seed::add_pool(s, zone, &entries))
    }

    /// Adds an allocated address (e.g. a source NAT one); returns its ID.
    pub fn add_public_ip(&self, ip: SeedPublicIp) -> String {
        seeded("public IP", self.try_add_public_ip(ip))
    }

    /// [`CloudstackSim::add_public_ip`] returning the error.
    pub fn try_add_public_ip(&self, ip: SeedPublicIp) -> Result<String, String> {
        self.shared.state.change(|s| seed::add_public_ip(s, &ip))
    }

    /// Adds an active LB rule made outside the driver under test; returns its ID.
    pub fn add_load_balancer_rule(&self, rule: SeedLbRule) -> String {
        seeded(
            "LB rule",
            self.shared.state.change(|s| seed::add_lb_rule(s, &rule)),
        )
    }

    /// Sets a VM's state (any string, e.g. `Stopped`); returns whether it exists.
    pub fn set_vm_state(&self, id: &str, state: &str) -> bool {
        match self.shared.state.lock().vms.iter_mut().find(|v| v.id == id) {
            Some(vm) => {
                vm.state = state.to_string();
                true
            }
            None => false,
        }
    }

    /// Expunges a VM: it leaves its load balancers, its static NAT address stays allocated,
    /// and lists by its ID answer empty. Returns whether it existed.
    pub fn remove_vm(&self, id: &str) -> bool {
        self.shared.state.lock().remove_vm(id)
    }

    /// Polls after which jobs submitted from now on complete (0: before the command answers).
    pub fn set_job_polls(&self, n: u32) {
        self.shared.state.lock().settings.job_polls = n;
    }

    /// Jobs submitted from now on complete after this duration (polls do not count), or by
    /// polls again with None.
    pub fn set_job_duration(&self, d: Option<Duration>) {
        self.shared.state.lock().settings.job_duration = d;
    }

    /// The next `count` jobs of `command` (e.g. `createLoadBalancerRule`, any case) fail:
    /// `jobstatus: 2`, `jobresult: {errorcode: 530, errortext}`, and their change is rolled back.
    pub fn fail_next_jobs(&self, command: &str, count: usize) {
        fail_jobs(&mut self.shared.state.lock(), command, count);
    }

    /// Completes every pending job now.
    pub fn settle(&self) {
        self.shared.state.lock().settle();
    }

    /// Completes the pending jobs of one command (e.g. `createTags`, any case) now: a cloud
    /// whose quick jobs ran while a slow one still runs.
    pub fn settle_jobs(&self, command: &str) {
        self.shared.state.lock().settle_command(command);
    }

    /// Tags `resource_id` of `resource_type` (a `ResourceObjectType` name, any case) with
    /// `key=value` outside any driver, e.g. an operator's or an earlier controller's tag. Panics on
    /// an unknown type or resource, or a key the resource already has.
    pub fn add_tag(&self, resource_type: &str, resource_id: &str, key: &str, value: &str) {
        let added = self.shared.state.change(|s| {
            let tag = commands::new_tag(s, resource_type, resource_id, key, value)?;
            if s.tags
                .iter()
                .any(|t| t.on(tag.resource_type, resource_id) && t.key.eq_ignore_ascii_case(key))
            {
                return Err(format!(
                    "tag {key} already on {resource_type} {resource_id}"
                ));
            }
            s.tags.push(tag);
            Ok(())
        });
        seeded("tag", added);
    }

    /// Every resource tag as `listTags` renders it, whatever its project.
    pub fn tags(&self) -> Vec<Value> {
        self.read(|s| s.tags.iter().map(|t| render::render_tag(s, t)).collect())
    }

    /// Jobs not completed yet.
    pub fn pending_jobs(&self) -> usize {
        self.read(State::pending_jobs)
    }

    /// How load-balancer rules render `cidrlist` from now on.
    pub fn set_cidr_separator(&self, s: CidrSeparator) {
        self.shared.state.lock().settings.cidr_separator = s;
    }

    /// Makes the account a root admin or a user.
    pub fn set_admin(&self, admin: bool) {
        self.shared.state.lock().settings.admin = admin;
    }

    /// The version the management server reports (default `4.22.0.0`) and behaves as: before
    /// `4.18`, `createLoadBalancerRule` refuses `cidrlist`.
    pub fn set_version(&self, version: &str) {
        self.shared.state.lock().settings.version = version.to_string();
    }

    /// The global setting `default.page.size` (default 500, at least 1): the default and
    /// largest `pagesize`; a larger one is refused with 431.
    pub fn set_page_size_limit(&self, limit: usize) {
        self.shared.state.lock().settings.page_size_limit = limit.max(1);
    }

    /// Reads the state after completing due time-based jobs, as a request would see it.
    fn read<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        let mut state = self.shared.state.lock();
        state.advance(Instant::now());
        f(&state)
    }

    /// Every load-balancer rule as the API renders it, each also with `members`: the assigned
    /// VM IDs, sorted.
    pub fn load_balancer_rules(&self) -> Vec<Value> {
        self.read(snapshot::load_balancer_rules)
    }

    /// Every public IP address, free ones included.
    pub fn public_ips(&self) -> Vec<Value> {
        self.read(snapshot::public_ips)
    }

    /// Every firewall rule.
    pub fn firewall_rules(&self) -> Vec<Value> {
        self.read(snapshot::firewall_rules)
    }

    /// Every item of the VPCs' ACL lists (not the system lists' fixed items).
    pub fn network_acls(&self) -> Vec<Value> {
        self.read(snapshot::network_acls)
    }

    /// Every VM (with `hostname` only when the account is admin, as the API renders it).
    pub fn vms(&self) -> Vec<Value> {
        self.read(snapshot::vms)
    }

    /// Every guest network.
    pub fn networks(&self) -> Vec<Value> {
        self.read(snapshot::networks)
    }

    /// Every request so far (the last [`LOG_CAPACITY`]), oldest first, including rejected and
    /// faulted ones; `/sim/...` control requests are not logged.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.shared.log.all()
    }

    /// [`Self::requests`] with when each arrived and was answered, on the clock every
    /// simulator of the process shares (to order the requests of several clouds).
    pub fn requests_sequenced(&self) -> Vec<crate::Sequenced<LoggedRequest>> {
        self.shared.log.sequenced()
    }

    /// The logged requests whose command is not `list*` or `query*`.
    pub fn mutations(&self) -> Vec<LoggedRequest> {
        self.requests()
            .into_iter()
            .filter(LoggedRequest::is_mutation)
            .collect()
    }

    /// Empties the request log.
    pub fn clear_requests(&self) {
        self.shared.log.clear();
    }

    /// Fault injection, effective immediately for every later request; `Match::command(..)`
    /// narrows a rule to one API command. Failures answer CloudStack's error body with the
    /// status as `errorcode`.
    pub fn faults(&self) -> Faults {
        self.shared.faults.clone()
    }

    /// Stops accepting connections and waits (up to 5 s) for open requests; other clones stop
    /// serving too.
    pub async fn shutdown(self) {
        self.server.shutdown().await;
    }
}
