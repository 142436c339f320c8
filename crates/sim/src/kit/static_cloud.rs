//! The static driver's inventory service in the kit's list of clouds ([`crate::kit`]).

use std::any::Any;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{BoxFuture, Cloud, DriverSetup, SimCloud, SimNode, StartOptions};
use crate::static_cloud::StaticCloud;

/// The static driver's inventory: instances and routes over plain HTTP.
pub(super) const CLOUD: Cloud = Cloud {
    name: "static",
    about: "the static driver's inventory service (instances and routes)",
    start,
    soak: None,
    cli: None,
};

fn start(options: StartOptions) -> BoxFuture<'static, anyhow::Result<Box<dyn SimCloud>>> {
    Box::pin(async move {
        let cloud = StaticCloud::start(options.addr, Vec::new(), options.secret)
            .await
            .map_err(|e| anyhow::anyhow!("starting the static inventory: {e:#}"))?;
        Ok(Box::new(cloud) as Box<dyn SimCloud>)
    })
}

/// A conformance scenario's `cloud.seed` for the static inventory.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StaticSeed {
    #[serde(default)]
    instances: Vec<Value>,
}

impl SimCloud for StaticCloud {
    fn name(&self) -> &'static str {
        CLOUD.name
    }

    fn url(&self) -> String {
        StaticCloud::url(self)
    }

    fn describe(&self) -> String {
        format!(
            "static cloud (the driver's inventory) at {}",
            StaticCloud::url(self)
        )
    }

    fn driver_setup(&self) -> DriverSetup {
        DriverSetup {
            provider: "static",
            driver: "static",
            config: Some(
                json!({
                    "region": "eu-1",
                    "zone": "eu-1a",
                    "loadBalancer": {"addresses": ["198.18.0.0/20"]},
                    "inventoryUrl": StaticCloud::url(self),
                })
                .to_string(),
            ),
            env: Vec::new(),
            egress: vec![StaticCloud::url(self)],
            extra_args: Vec::new(),
        }
    }

    fn seed(&self, seed: Value) -> Result<(), String> {
        let seed: StaticSeed = serde_json::from_value(seed)
            .map_err(|e| format!("not a static inventory ({{instances: [...]}}): {e}"))?;
        for instance in seed.instances {
            self.upsert_instance(instance)
                .map_err(|e| format!("{e:#}"))?;
        }
        Ok(())
    }

    fn add_instance(&self, index: usize, node: &SimNode) -> Result<String, String> {
        self.upsert_instance(json!({
            "name": node.name,
            "id": format!("i-{index:04}"),
            "type": if index.is_multiple_of(3) { "s1.large" } else { "s1.medium" },
            "zone": if index.is_multiple_of(2) { "eu-1a" } else { "eu-1b" },
            "addresses": [
                {"type": "InternalIP", "address": node.internal_ip},
                {"type": "Hostname", "address": node.name},
            ],
            "labels": {"example.com/rack": format!("r{}", index % 4)},
        }))
        .map_err(|e| format!("{e:#}"))?;
        // The inventory keys instances by name.
        Ok(node.name.clone())
    }

    fn remove_instance(&self, id: &str) -> bool {
        StaticCloud::remove_instance(self, id)
    }

    fn set_running(&self, id: &str, running: bool) -> bool {
        self.set_shutdown(id, !running)
    }

    fn load_balancers(&self) -> Option<usize> {
        // The static driver's load balancers are addresses from its configuration, not cloud
        // objects.
        None
    }

    fn routes(&self) -> usize {
        StaticCloud::routes(self).len()
    }

    fn request_counts(&self) -> (u64, u64) {
        StaticCloud::request_counts(self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn shutdown(self: Box<Self>) -> BoxFuture<'static, ()> {
        // The inventory's server task ends with the process; dropping the handle is all.
        Box::pin(async {})
    }
}
