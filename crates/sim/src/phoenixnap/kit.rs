//! The PhoenixNAP simulator in the kit's list of clouds ([`crate::kit`]).

mod cli;
mod soak;

use std::any::Any;

use serde_json::Value;

use super::{PhoenixnapOptions, PhoenixnapSim, Seed, SeedPublicNetwork, SeedServer};
use crate::kit::soak::SoakCloud;
use crate::kit::{BoxFuture, Cloud, DriverSetup, SimCloud, SimNode, StartOptions, count_requests};

/// The public network the driver assigns IP blocks to (`PNAP_LOAD_BALANCER=kube-vip://…`).
pub const PUBLIC_NETWORK: &str = "60473c2509268bc77fd06d29";

/// The PhoenixNAP APIs.
pub(crate) const CLOUD: Cloud = Cloud {
    name: "phoenixnap",
    about: "the PhoenixNAP APIs (OAuth2 tokens, BMC servers, IP blocks, public networks, tags)",
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
async fn start_sim(options: StartOptions) -> anyhow::Result<PhoenixnapSim> {
    let mut sim_options = PhoenixnapOptions::default();
    if let Some(secret) = options.secret {
        sim_options.client_secret = secret;
    }
    if let Some(account) = options.account {
        sim_options.client_id = account;
    }
    let sim = PhoenixnapSim::start(options.addr, sim_options)
        .await
        .map_err(|e| anyhow::anyhow!("starting the PhoenixNAP simulator: {e:#}"))?;
    if !options.empty {
        sim.try_add_public_network(SeedPublicNetwork::new("k8s-vips").with_id(PUBLIC_NETWORK))
            .map_err(|e| anyhow::anyhow!("seeding the public network: {e}"))?;
    }
    Ok(sim)
}

impl SimCloud for PhoenixnapSim {
    fn name(&self) -> &'static str {
        CLOUD.name
    }

    fn url(&self) -> String {
        PhoenixnapSim::url(self)
    }

    fn describe(&self) -> String {
        format!(
            "PhoenixNAP API simulator at {url} (client {} / {}; IP blocks: {url}/ips/v1/ip-blocks)",
            self.client_id(),
            self.client_secret(),
            url = PhoenixnapSim::url(self),
        )
    }

    fn driver_setup(&self) -> DriverSetup {
        let url = PhoenixnapSim::url(self);
        DriverSetup {
            provider: "phoenixnap",
            driver: "phoenixnap",
            config: None,
            env: vec![
                ("PNAP_CLIENT_ID".into(), self.client_id()),
                ("PNAP_CLIENT_SECRET".into(), self.client_secret()),
                ("PNAP_BASE_URL".into(), url.clone()),
                ("PNAP_AUTH_URL".into(), url.clone()),
                ("PNAP_LOCATION".into(), "PHX".into()),
                (
                    "PNAP_LOAD_BALANCER".into(),
                    format!("kube-vip://{PUBLIC_NETWORK}"),
                ),
            ],
            egress: vec![url],
            // A deleted Service's block is marked, then released by housekeeping: soon, so a
            // tool waiting for quiescence sees it gone.
            extra_args: vec!["--housekeeping-period".into(), "1s".into()],
        }
    }

    fn seed(&self, seed: Value) -> Result<(), String> {
        let seed: Seed = serde_json::from_value(seed)
            .map_err(|e| format!("not a PhoenixNAP simulator seed: {e}"))?;
        PhoenixnapSim::seed(self, seed)
    }

    fn add_instance(&self, index: usize, node: &SimNode) -> Result<String, String> {
        let server_type = if index.is_multiple_of(3) {
            "s2.c1.medium"
        } else {
            "s1.c1.small"
        };
        self.try_add_server(
            SeedServer::new(&node.name)
                .with_type(server_type)
                .public(&[node.public_ip.as_str()])
                .private(&[node.internal_ip.as_str()]),
        )
    }

    fn remove_instance(&self, id: &str) -> bool {
        self.remove_server(id)
    }

    fn set_running(&self, id: &str, running: bool) -> bool {
        self.set_server_status(id, if running { "powered-on" } else { "powered-off" })
    }

    fn load_balancers(&self) -> Option<usize> {
        // A Service's IP block; a deleted Service's block is marked, then released by
        // housekeeping.
        Some(
            self.ip_blocks()
                .iter()
                .filter(|b| !b["tags"].to_string().contains("\"delete\""))
                .count(),
        )
    }

    fn request_counts(&self) -> (u64, u64) {
        // Token requests change nothing in the cloud: counted as reads.
        count_requests(&self.requests(), |r| r.is_mutation())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn shutdown(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(PhoenixnapSim::shutdown(*self))
    }
}
