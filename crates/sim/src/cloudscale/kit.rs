//! The cloudscale.ch simulator in the kit's list of clouds ([`crate::kit`]).

mod cli;
mod soak;

use std::any::Any;

use serde_json::Value;

use super::{CloudscaleOptions, CloudscaleSim, Seed, SeedServer};
use crate::kit::soak::SoakCloud;
use crate::kit::{BoxFuture, Cloud, DriverSetup, SimCloud, SimNode, StartOptions, count_requests};

/// The private subnet every simulated server is on (the nodes' InternalIPs).
const SUBNET: &str = "0c5e2f4a-6b7d-4e8f-9a0b-1c2d3e4f5a6b";

/// The cloudscale.ch API.
pub(crate) const CLOUD: Cloud = Cloud {
    name: "cloudscale",
    about: "the cloudscale.ch REST API (servers, load balancers, pools, listeners, floating IPs)",
    start,
    soak: Some(start_soak),
    cli: Some(cli::CLI),
};

fn start(options: StartOptions) -> BoxFuture<'static, anyhow::Result<Box<dyn SimCloud>>> {
    crate::kit::boxed(start_sim(options))
}

fn start_soak(options: StartOptions) -> BoxFuture<'static, anyhow::Result<Box<dyn SoakCloud>>> {
    crate::kit::soak::boxed(start_sim(options))
}

/// Starts the simulator as `options` say, for both of the list's start functions.
async fn start_sim(options: StartOptions) -> anyhow::Result<CloudscaleSim> {
    let mut sim_options = CloudscaleOptions::default();
    if let Some(token) = options.secret {
        sim_options.token = token;
    }
    let sim = CloudscaleSim::start(options.addr, sim_options)
        .await
        .map_err(|e| anyhow::anyhow!("starting the cloudscale simulator: {e:#}"))?;
    Ok(sim)
}

impl SimCloud for CloudscaleSim {
    fn name(&self) -> &'static str {
        CLOUD.name
    }

    fn url(&self) -> String {
        CloudscaleSim::url(self)
    }

    fn describe(&self) -> String {
        format!(
            "cloudscale API simulator at {url} (try: curl -H 'Authorization: Bearer {}' {url}/v1/load-balancers)",
            self.token(),
            url = CloudscaleSim::url(self),
        )
    }

    fn driver_setup(&self) -> DriverSetup {
        DriverSetup {
            provider: "cloudscale",
            driver: "cloudscale",
            config: None,
            env: vec![
                ("CLOUDSCALE_ACCESS_TOKEN".into(), self.token()),
                (
                    "CLOUDSCALE_API_URL".into(),
                    format!("{}/", CloudscaleSim::url(self)),
                ),
                // A request held by injected latency must not hold a driver call for the
                // upstream default of 20 s.
                ("CLOUDSCALE_API_TIMEOUT".into(), "5".into()),
            ],
            egress: vec![CloudscaleSim::url(self)],
            extra_args: Vec::new(),
        }
    }

    fn seed(&self, seed: Value) -> Result<(), String> {
        let seed: Seed = serde_json::from_value(seed)
            .map_err(|e| format!("not a cloudscale simulator seed: {e}"))?;
        CloudscaleSim::seed(self, seed)
    }

    fn add_instance(&self, index: usize, node: &SimNode) -> Result<String, String> {
        let flavor = if index.is_multiple_of(3) {
            "plus-32-16"
        } else {
            "flex-4-2"
        };
        self.try_add_server(
            SeedServer::new(&node.name)
                .with_flavor(flavor)
                .public(&[node.public_ip.as_str()])
                .private(SUBNET, "10.0.0.0/16", &[node.internal_ip.as_str()]),
        )
    }

    fn remove_instance(&self, id: &str) -> bool {
        self.remove_server(id)
    }

    fn set_running(&self, id: &str, running: bool) -> bool {
        self.set_server_status(id, if running { "running" } else { "stopped" })
    }

    fn load_balancers(&self) -> Option<usize> {
        Some(CloudscaleSim::load_balancers(self).len())
    }

    fn request_counts(&self) -> (u64, u64) {
        count_requests(&self.requests(), |r| r.is_mutation())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn shutdown(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(CloudscaleSim::shutdown(*self))
    }
}
