//! What a simulated cloud is to the developer tools: the [`SimCloud`] trait its simulator
//! implements, how it is started ([`StartOptions`], [`StartFn`]), its instances ([`SimNode`])
//! and its driver's wiring ([`DriverSetup`]). A leaf: the list ([`super::CLOUDS`]) names the
//! clouds, and the clouds name only this.

use std::any::Any;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;

use serde_json::Value;

/// A future a simulated cloud returns, boxed so that [`SimCloud`] stays object safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One instance a cloud is seeded with, as the node a kubelet on it registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimNode {
    /// The Node's name (the instance's name or hostname in the cloud).
    pub name: String,
    /// Its InternalIP.
    pub internal_ip: String,
    /// Its public address, for clouds that give instances one.
    pub public_ip: String,
}

impl SimNode {
    /// The `index`-th node of a simulated cluster: `node-0000`, `10.0.0.1`, `5.102.148.1`, …
    /// (unique for up to 62,500 nodes).
    pub fn numbered(index: usize) -> SimNode {
        SimNode {
            name: format!("node-{index:04}"),
            internal_ip: format!("10.0.{}.{}", index / 250, index % 250 + 1),
            public_ip: format!("5.102.{}.{}", 148 + index / 250, index % 250 + 1),
        }
    }
}

/// How to start a simulated cloud.
#[derive(Debug, Clone)]
pub struct StartOptions {
    /// Where to listen (port 0 picks a free port).
    pub addr: SocketAddr,
    /// The secret the driver must present (cloudscale's token, PhoenixNAP's client secret,
    /// CloudStack's secret key, the static inventory's bearer token); the simulator's default
    /// when None.
    pub secret: Option<String>,
    /// The account the secret belongs to, for clouds that have one (PhoenixNAP's client ID,
    /// CloudStack's API key); the simulator's default when None.
    pub account: Option<String>,
    /// Start with nothing in the cloud (a conformance scenario seeds everything itself) instead
    /// of what a cluster's nodes need (PhoenixNAP's public network for IP blocks; CloudStack's
    /// zone, isolated network and public IP pool).
    pub empty: bool,
}

impl Default for StartOptions {
    fn default() -> Self {
        StartOptions {
            addr: ([127, 0, 0, 1], 0).into(),
            secret: None,
            account: None,
            empty: false,
        }
    }
}

/// How to run a cloud's driver against a running simulator: what `wasm-ccm run` (or the
/// in-process controllers) and the driver's `init` need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverSetup {
    /// `--cloud-provider`: the driver's name.
    pub provider: &'static str,
    /// The guest that is this cloud's driver, as `wasm_ccm_drivers::shipped` names it.
    pub driver: &'static str,
    /// The `--cloud-config` file's text, for drivers that read one.
    pub config: Option<String>,
    /// The driver's environment.
    pub env: Vec<(String, String)>,
    /// `--allow-egress`: the simulator's URL.
    pub egress: Vec<String>,
    /// More `run` flags this driver needs against the simulator.
    pub extra_args: Vec<String>,
}

/// A running simulated cloud, as the developer tools drive it. Instances are named by the ID
/// [`SimCloud::add_instance`] returned.
pub trait SimCloud: Send + Sync {
    /// The cloud's name in [`CLOUDS`].
    fn name(&self) -> &'static str;
    /// The base URL a driver or a conformance scenario is pointed at.
    fn url(&self) -> String;
    /// One line saying what is running and how to look at it by hand.
    fn describe(&self) -> String;
    /// How to run this cloud's driver against it.
    fn driver_setup(&self) -> DriverSetup;
    /// Loads a conformance scenario's `cloud.seed` (the simulator's own seed format).
    fn seed(&self, seed: Value) -> Result<(), String>;
    /// Adds the instance behind `node` (`index` varies its size and zone); its ID.
    fn add_instance(&self, index: usize, node: &SimNode) -> Result<String, String>;
    /// Deletes an instance; whether it existed.
    fn remove_instance(&self, id: &str) -> bool;
    /// Powers an instance on or off; whether it exists.
    fn set_running(&self, id: &str, running: bool) -> bool;
    /// Load balancers in the cloud (or what stands for one: a PhoenixNAP IP block, a CloudStack
    /// public IP with rules), when the cloud has them as objects.
    fn load_balancers(&self) -> Option<usize>;
    /// Routes in the cloud (only the static inventory keeps them).
    fn routes(&self) -> usize {
        0
    }
    /// (reads, writes) the driver made so far; token requests count as reads.
    fn request_counts(&self) -> (u64, u64);
    /// The concrete simulator, for tools that drive one cloud's faults (the soak).
    fn as_any(&self) -> &dyn Any;
    /// Stops the simulator and waits for its server to end.
    fn shutdown(self: Box<Self>) -> BoxFuture<'static, ()>;
}

/// Starts a cloud's simulator, with no instances.
pub type StartFn = fn(StartOptions) -> BoxFuture<'static, anyhow::Result<Box<dyn SimCloud>>>;

/// Boxes a started simulator as a [`StartFn`] returns it (a cloud's `start_sim` future).
pub(crate) fn boxed<S: SimCloud + 'static>(
    started: impl Future<Output = anyhow::Result<S>> + Send + 'static,
) -> BoxFuture<'static, anyhow::Result<Box<dyn SimCloud>>> {
    Box::pin(async move { Ok(Box::new(started.await?) as Box<dyn SimCloud>) })
}

/// Counts a request log: `is_write` tells a mutating request from a read.
pub(crate) fn count_requests<R>(log: &[R], is_write: impl Fn(&R) -> bool) -> (u64, u64) {
    let writes = log.iter().filter(|r| is_write(r)).count() as u64;
    (log.len() as u64 - writes, writes)
}
