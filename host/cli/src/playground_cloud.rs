//! The cloud behind the playground's driver: the static driver's inventory service, or the
//! cloudscale, PhoenixNAP or CloudStack API simulator. Each holds one instance per simulated
//! node.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use serde_json::{Value, json};
use wasm_ccm_sim::cloudscale::{CloudscaleOptions, CloudscaleSim, SeedServer};
use wasm_ccm_sim::cloudstack::{CloudstackOptions, CloudstackSim, SeedNetwork, SeedVm};
use wasm_ccm_sim::phoenixnap::{PhoenixnapOptions, PhoenixnapSim, SeedPublicNetwork};
use wasm_ccm_sim::static_cloud::StaticCloud;

/// The public network the PhoenixNAP driver assigns IP blocks to.
const PHOENIXNAP_NETWORK: &str = "60473c2509268bc77fd06d29";

/// The private subnet of every simulated cloudscale server (the nodes' InternalIPs).
const CLOUDSCALE_SUBNET: &str = "0c5e2f4a-6b7d-4e8f-9a0b-1c2d3e4f5a6b";

/// The CloudStack zone and the isolated network every simulated VM is on (the playground's
/// and the soak's).
pub(crate) const CLOUDSTACK_ZONE: &str = "zone1";
pub(crate) const CLOUDSTACK_NETWORK: &str = "k8s-net";

/// Starts the CloudStack simulator on `addr` with [`CLOUDSTACK_ZONE`], the isolated network
/// [`CLOUDSTACK_NETWORK`] and a pool of public IPs (no VMs).
pub(crate) async fn start_cloudstack_zone(addr: SocketAddr) -> anyhow::Result<CloudstackSim> {
    let sim = CloudstackSim::start_on(addr, CloudstackOptions::default())
        .await
        .context("starting the CloudStack simulator")?;
    let seeding = |what: &str, e: String| anyhow::anyhow!("seeding {what}: {e}");
    sim.try_add_zone(CLOUDSTACK_ZONE)
        .map_err(|e| seeding("the zone", e))?;
    sim.try_add_network(SeedNetwork::isolated(CLOUDSTACK_NETWORK, CLOUDSTACK_ZONE))
        .map_err(|e| seeding("the network", e))?;
    sim.try_add_public_ips(CLOUDSTACK_ZONE, &["198.18.0.1-198.18.15.254"])
        .map_err(|e| seeding("the public IP pool", e))?;
    Ok(sim)
}

/// A running simulated cloud and how to point a driver at it.
pub enum PlaygroundCloud {
    Static(StaticCloud),
    Cloudscale {
        sim: CloudscaleSim,
        /// Node name → server UUID.
        servers: HashMap<String, String>,
    },
    Phoenixnap {
        sim: PhoenixnapSim,
        /// Node name → server ID.
        servers: HashMap<String, String>,
    },
    Cloudstack {
        sim: CloudstackSim,
        /// Node name → VM ID.
        vms: HashMap<String, String>,
    },
}

/// What loading the driver for this cloud needs.
pub struct DriverSetup {
    pub plugin: PathBuf,
    pub config: Vec<u8>,
    pub env: Vec<(String, String)>,
    pub egress: Vec<String>,
}

impl PlaygroundCloud {
    /// The static driver's inventory with `instances`.
    pub async fn start_static(addr: SocketAddr, instances: Vec<Value>) -> anyhow::Result<Self> {
        let cloud = StaticCloud::start(addr, instances, None)
            .await
            .context("starting the static cloud")?;
        Ok(Self::Static(cloud))
    }

    /// The cloudscale simulator with one server per node: `(name, internal IP, public IP)`.
    pub async fn start_cloudscale(
        addr: SocketAddr,
        nodes: &[(String, String, String)],
    ) -> anyhow::Result<Self> {
        let sim = CloudscaleSim::start(addr, CloudscaleOptions::default())
            .await
            .context("starting the cloudscale simulator")?;
        let mut servers = HashMap::new();
        for (i, (name, internal, public)) in nodes.iter().enumerate() {
            let flavor = if i % 3 == 0 { "plus-32-16" } else { "flex-4-2" };
            let uuid = sim
                .try_add_server(
                    SeedServer::new(name)
                        .with_flavor(flavor)
                        .public(&[public.as_str()])
                        .private(CLOUDSCALE_SUBNET, "10.0.0.0/16", &[internal.as_str()]),
                )
                .map_err(|e| anyhow::anyhow!("seeding server {name}: {e}"))?;
            servers.insert(name.clone(), uuid);
        }
        Ok(Self::Cloudscale { sim, servers })
    }

    /// The PhoenixNAP simulator with one server per node and the public network for IP blocks.
    pub async fn start_phoenixnap(
        addr: SocketAddr,
        nodes: &[(String, String, String)],
    ) -> anyhow::Result<Self> {
        let sim = PhoenixnapSim::start(addr, PhoenixnapOptions::default())
            .await
            .context("starting the PhoenixNAP simulator")?;
        sim.try_add_public_network(SeedPublicNetwork::new("k8s-vips").with_id(PHOENIXNAP_NETWORK))
            .map_err(|e| anyhow::anyhow!("seeding the public network: {e}"))?;
        let mut servers = HashMap::new();
        for (i, (name, internal, public)) in nodes.iter().enumerate() {
            let server_type = if i % 3 == 0 {
                "s2.c1.medium"
            } else {
                "s1.c1.small"
            };
            let id = sim
                .try_add_server(
                    wasm_ccm_sim::phoenixnap::SeedServer::new(name)
                        .with_type(server_type)
                        .public(&[public.as_str()])
                        .private(&[internal.as_str()]),
                )
                .map_err(|e| anyhow::anyhow!("seeding server {name}: {e}"))?;
            servers.insert(name.clone(), id);
        }
        Ok(Self::Phoenixnap { sim, servers })
    }

    /// The CloudStack simulator: one zone, one isolated network with a source-NAT IP and a pool
    /// of public IPs, one VM per node `(name, internal IP)`.
    pub async fn start_cloudstack(
        addr: SocketAddr,
        nodes: &[(String, String)],
    ) -> anyhow::Result<Self> {
        let sim = start_cloudstack_zone(addr).await?;
        let mut vms = HashMap::new();
        for (i, (name, internal)) in nodes.iter().enumerate() {
            let mut vm =
                SeedVm::new(name, CLOUDSTACK_ZONE).nic(CLOUDSTACK_NETWORK, internal.as_str());
            vm.service_offering = if i % 3 == 0 {
                "Large Instance"
            } else {
                "Medium Instance"
            }
            .into();
            let id = sim
                .try_add_vm(vm)
                .map_err(|e| anyhow::anyhow!("seeding VM {name}: {e}"))?;
            vms.insert(name.clone(), id);
        }
        Ok(Self::Cloudstack { sim, vms })
    }

    /// One line saying what the cloud is.
    pub fn describe(&self) -> String {
        match self {
            Self::Static(c) => format!("static cloud (the driver's inventory) at {}", c.url()),
            Self::Cloudscale { sim, .. } => format!(
                "cloudscale API simulator at {} (try: curl -H 'Authorization: Bearer {}' {}/v1/load-balancers)",
                sim.url(),
                sim.token(),
                sim.url()
            ),
            Self::Phoenixnap { sim, .. } => format!(
                "PhoenixNAP API simulator at {} (client {} / {}; IP blocks: {}/ips/v1/ip-blocks)",
                sim.url(),
                sim.client_id(),
                sim.client_secret(),
                sim.url()
            ),
            Self::Cloudstack { sim, .. } => format!(
                "CloudStack API simulator at {} (api-key {}, secret-key {}; signed requests only)",
                sim.url(),
                sim.api_key(),
                sim.secret_key()
            ),
        }
    }

    /// The driver and its configuration for this cloud.
    pub fn driver(&self) -> DriverSetup {
        match self {
            Self::Static(c) => DriverSetup {
                plugin: PathBuf::from(wasm_ccm_plugins::STATIC_DRIVER),
                config: json!({
                    "region": "eu-1",
                    "zone": "eu-1a",
                    "loadBalancer": {"addresses": ["198.18.0.0/20"]},
                    "inventoryUrl": c.url(),
                })
                .to_string()
                .into_bytes(),
                env: Vec::new(),
                egress: vec![c.url()],
            },
            Self::Cloudscale { sim, .. } => DriverSetup {
                plugin: PathBuf::from(wasm_ccm_plugins::CLOUDSCALE_DRIVER),
                config: Vec::new(),
                env: vec![
                    ("CLOUDSCALE_ACCESS_TOKEN".into(), sim.token()),
                    ("CLOUDSCALE_API_URL".into(), format!("{}/", sim.url())),
                ],
                egress: vec![sim.url()],
            },
            Self::Phoenixnap { sim, .. } => DriverSetup {
                plugin: PathBuf::from(wasm_ccm_plugins::PHOENIXNAP_DRIVER),
                config: Vec::new(),
                env: vec![
                    ("PNAP_CLIENT_ID".into(), sim.client_id()),
                    ("PNAP_CLIENT_SECRET".into(), sim.client_secret()),
                    ("PNAP_BASE_URL".into(), sim.url()),
                    ("PNAP_AUTH_URL".into(), sim.url()),
                    ("PNAP_LOCATION".into(), "PHX".into()),
                    (
                        "PNAP_LOAD_BALANCER".into(),
                        format!("kube-vip://{PHOENIXNAP_NETWORK}"),
                    ),
                ],
                egress: vec![sim.url()],
            },
            Self::Cloudstack { sim, .. } => DriverSetup {
                plugin: PathBuf::from(wasm_ccm_plugins::CLOUDSTACK_DRIVER),
                // Upstream's cloud-config, as the cloudstack-secret Secret holds it.
                config: format!(
                    "[Global]\napi-url = {}\napi-key = {}\nsecret-key = {}\n",
                    sim.url(),
                    sim.api_key(),
                    sim.secret_key()
                )
                .into_bytes(),
                // Well inside the playground's 10 s call deadline.
                env: vec![("CLOUDSTACK_JOB_BUDGET".into(), "3s".into())],
                egress: vec![sim.base_url()],
            },
        }
    }

    /// Deletes the instance behind node `name`.
    pub fn remove_instance(&self, name: &str) {
        match self {
            Self::Static(c) => {
                c.remove_instance(name);
            }
            Self::Cloudscale { sim, servers } => {
                if let Some(uuid) = servers.get(name) {
                    sim.remove_server(uuid);
                }
            }
            Self::Phoenixnap { sim, servers } => {
                if let Some(id) = servers.get(name) {
                    sim.remove_server(id);
                }
            }
            Self::Cloudstack { sim, vms } => {
                if let Some(id) = vms.get(name) {
                    sim.remove_vm(id);
                }
            }
        }
    }

    /// Powers off the instance behind node `name`.
    pub fn shut_down(&self, name: &str) {
        match self {
            Self::Static(c) => {
                c.set_shutdown(name, true);
            }
            Self::Cloudscale { sim, servers } => {
                if let Some(uuid) = servers.get(name) {
                    sim.set_server_status(uuid, "stopped");
                }
            }
            Self::Phoenixnap { sim, servers } => {
                if let Some(id) = servers.get(name) {
                    sim.set_server_status(id, "powered-off");
                }
            }
            Self::Cloudstack { sim, vms } => {
                if let Some(id) = vms.get(name) {
                    sim.set_vm_state(id, "Stopped");
                }
            }
        }
    }

    /// Routes in the cloud (only the static driver manages them).
    pub fn routes(&self) -> usize {
        match self {
            Self::Static(c) => c.routes().len(),
            Self::Cloudscale { .. } | Self::Phoenixnap { .. } | Self::Cloudstack { .. } => 0,
        }
    }

    /// Load balancers in the cloud, when the cloud has them as objects.
    pub fn load_balancers(&self) -> Option<usize> {
        match self {
            Self::Static(_) => None,
            Self::Cloudscale { sim, .. } => Some(sim.load_balancers().len()),
            // A Service's IP block; a deleted Service's block is marked, then released by
            // housekeeping.
            Self::Phoenixnap { sim, .. } => Some(
                sim.ip_blocks()
                    .iter()
                    .filter(|b| !b["tags"].to_string().contains("\"delete\""))
                    .count(),
            ),
            // A Service's rules share one public IP.
            Self::Cloudstack { sim, .. } => {
                let ips: std::collections::BTreeSet<String> = sim
                    .load_balancer_rules()
                    .iter()
                    .filter_map(|r| r["publicipid"].as_str().map(String::from))
                    .collect();
                Some(ips.len())
            }
        }
    }

    /// (reads, writes) the driver made so far.
    pub fn request_counts(&self) -> (u64, u64) {
        match self {
            Self::Static(c) => c.request_counts(),
            Self::Cloudscale { sim, .. } => {
                let log = sim.requests();
                let reads = log.iter().filter(|r| r.method == "GET").count() as u64;
                (reads, log.len() as u64 - reads)
            }
            Self::Phoenixnap { sim, .. } => {
                // Token requests change nothing in the cloud: counted as reads.
                let log = sim.requests();
                let writes = log
                    .iter()
                    .filter(|r| r.method != "GET" && !r.path.ends_with("/openid-connect/token"))
                    .count() as u64;
                (log.len() as u64 - writes, writes)
            }
            Self::Cloudstack { sim, .. } => {
                let log = sim.requests();
                let writes = log.iter().filter(|r| r.is_mutation()).count() as u64;
                (log.len() as u64 - writes, writes)
            }
        }
    }
}
