//! The Apache CloudStack simulator in the kit's list of clouds ([`crate::kit`]): one zone, one
//! isolated network and a pool of public IPs, VMs added per node.

mod cli;
mod soak;

use std::any::Any;
use std::collections::BTreeSet;

use serde_json::Value;

use super::{CloudstackOptions, CloudstackSim, Seed, SeedNetwork, SeedVm};
use crate::kit::soak::SoakCloud;
use crate::kit::{BoxFuture, Cloud, DriverSetup, SimCloud, SimNode, StartOptions, count_requests};

/// The zone every simulated VM is in.
pub const ZONE: &str = "zone1";
/// The isolated network every simulated VM is on.
pub const NETWORK: &str = "k8s-net";

/// The Apache CloudStack API.
pub(crate) const CLOUD: Cloud = Cloud {
    name: "cloudstack",
    about: "the Apache CloudStack API (signed requests, async jobs, public IPs, load balancer rules)",
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
async fn start_sim(options: StartOptions) -> anyhow::Result<CloudstackSim> {
    let mut sim_options = CloudstackOptions::default();
    if let Some(secret) = options.secret {
        sim_options.secret_key = secret;
    }
    if let Some(account) = options.account {
        sim_options.api_key = account;
    }
    let sim = CloudstackSim::start_on(options.addr, sim_options)
        .await
        .map_err(|e| anyhow::anyhow!("starting the CloudStack simulator: {e:#}"))?;
    if options.empty {
        return Ok(sim);
    }
    let seeding = |what: &str, e: String| anyhow::anyhow!("seeding {what}: {e}");
    sim.try_add_zone(ZONE).map_err(|e| seeding("the zone", e))?;
    sim.try_add_network(SeedNetwork::isolated(NETWORK, ZONE))
        .map_err(|e| seeding("the network", e))?;
    sim.try_add_public_ips(ZONE, &["198.18.0.1-198.18.15.254"])
        .map_err(|e| seeding("the public IP pool", e))?;
    Ok(sim)
}

impl SimCloud for CloudstackSim {
    fn name(&self) -> &'static str {
        CLOUD.name
    }

    fn url(&self) -> String {
        self.base_url()
    }

    fn describe(&self) -> String {
        format!(
            "CloudStack API simulator at {} (api-key {}, secret-key {}; signed requests only)",
            CloudstackSim::url(self),
            self.api_key(),
            self.secret_key()
        )
    }

    fn driver_setup(&self) -> DriverSetup {
        DriverSetup {
            provider: "external-cloudstack",
            driver: "cloudstack",
            // Upstream's cloud-config, as the cloudstack-secret Secret holds it.
            config: Some(format!(
                "[Global]\napi-url = {}\napi-key = {}\nsecret-key = {}\n",
                CloudstackSim::url(self),
                self.api_key(),
                self.secret_key()
            )),
            // Well inside a 10 s call deadline.
            env: vec![("CLOUDSTACK_JOB_BUDGET".into(), "3s".into())],
            egress: vec![self.base_url()],
            extra_args: Vec::new(),
        }
    }

    fn seed(&self, seed: Value) -> Result<(), String> {
        let seed: Seed = serde_json::from_value(seed)
            .map_err(|e| format!("not a CloudStack simulator seed: {e}"))?;
        CloudstackSim::seed(self, seed)
    }

    fn add_instance(&self, index: usize, node: &SimNode) -> Result<String, String> {
        let mut vm = SeedVm::new(&node.name, ZONE).nic(NETWORK, node.internal_ip.as_str());
        vm.service_offering = if index.is_multiple_of(3) {
            "Large Instance"
        } else {
            "Medium Instance"
        }
        .into();
        self.try_add_vm(vm)
    }

    fn remove_instance(&self, id: &str) -> bool {
        self.remove_vm(id)
    }

    fn set_running(&self, id: &str, running: bool) -> bool {
        self.set_vm_state(id, if running { "Running" } else { "Stopped" })
    }

    fn load_balancers(&self) -> Option<usize> {
        // A Service's rules share one public IP.
        let ips: BTreeSet<String> = self
            .load_balancer_rules()
            .iter()
            .filter_map(|r| r["publicipid"].as_str().map(String::from))
            .collect();
        Some(ips.len())
    }

    fn request_counts(&self) -> (u64, u64) {
        count_requests(&self.requests(), |r| r.is_mutation())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn shutdown(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(CloudstackSim::shutdown(*self))
    }
}
