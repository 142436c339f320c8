//! The cloud a driver is checked against: a simulator started in process, a real endpoint, or a
//! cassette replayed without the network.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use serde::Deserialize;
use serde_json::Value;
use wasm_ccm_sim::cloudscale::{CloudscaleOptions, CloudscaleSim, Seed};
use wasm_ccm_sim::cloudstack::{self, CloudstackOptions, CloudstackSim};
use wasm_ccm_sim::phoenixnap::{self, PhoenixnapOptions, PhoenixnapSim};
use wasm_ccm_sim::static_cloud::StaticCloud;

use super::scenario::Scenario;
use crate::cassette::{Cassette, Replayer};

/// The simulators `--cloud sim:<name>` can start.
pub const SIMULATORS: &[&str] = &["static", "cloudscale", "phoenixnap", "cloudstack"];

/// The OAuth2 client ID of `sim:phoenixnap` (its secret is `${CLOUD_TOKEN}`).
pub const PHOENIXNAP_CLIENT_ID: &str = "conformance";

/// The API key of `sim:cloudstack` (its secret key is `${CLOUD_TOKEN}`; `${CLOUD_URL}` is
/// `http://127.0.0.1:<port>`, the API below it at `/client/api`).
pub const CLOUDSTACK_API_KEY: &str = "conformance";

/// The environment variable holding the credential for `--cloud URL` (`${CLOUD_TOKEN}`).
pub const TOKEN_ENV: &str = "WASM_CCM_CLOUD_TOKEN";

/// What `--cloud` asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloudChoice {
    Sim(String),
    Url(String),
    Cassette(PathBuf),
}

impl CloudChoice {
    /// Parses `sim:<name>`, `cassette:FILE` or an `http(s)://` URL.
    pub fn parse(s: &str) -> anyhow::Result<CloudChoice> {
        if let Some(name) = s.strip_prefix("sim:") {
            if !SIMULATORS.contains(&name) {
                bail!(
                    "--cloud sim:{name}: there is no `{name}` simulator; choose one of {}",
                    SIMULATORS.join(", ")
                );
            }
            return Ok(CloudChoice::Sim(name.to_string()));
        }
        if let Some(path) = s.strip_prefix("cassette:") {
            return Ok(CloudChoice::Cassette(PathBuf::from(path)));
        }
        if s.starts_with("http://") || s.starts_with("https://") {
            url::Url::parse(s).with_context(|| format!("--cloud {s} is not a valid URL"))?;
            return Ok(CloudChoice::Url(s.trim_end_matches('/').to_string()));
        }
        bail!("--cloud {s}: expected sim:<name>, an http(s):// URL or cassette:FILE")
    }
}

enum Running {
    Static(#[allow(dead_code)] StaticCloud),
    Cloudscale(CloudscaleSim),
    Phoenixnap(PhoenixnapSim),
    Cloudstack(CloudstackSim),
    Nothing,
}

/// A cloud ready for the driver.
pub struct CloudUnderTest {
    /// How the report names it.
    pub label: String,
    /// `${CLOUD_URL}`.
    pub url: String,
    /// `${CLOUD_TOKEN}`, when known.
    pub token: Option<String>,
    /// The cassette being replayed.
    pub replayer: Option<Arc<Replayer>>,
    /// Whether `retry-after` must really be waited out (a real cloud) or the cloud is ready at
    /// once (simulators are started with no provisioning delay; cassettes replay).
    pub real: bool,
    running: Running,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StaticSeed {
    #[serde(default)]
    instances: Vec<Value>,
}

impl CloudUnderTest {
    /// Starts or opens the chosen cloud for `scenario`.
    pub async fn start(choice: &CloudChoice, scenario: &Scenario) -> anyhow::Result<Self> {
        let loopback: SocketAddr = ([127, 0, 0, 1], 0).into();
        let token = scenario
            .cloud
            .token
            .clone()
            .unwrap_or_else(|| "conformance-token".into());
        match choice {
            CloudChoice::Sim(name) => {
                let seed = if scenario.cloud.seed.is_null() {
                    Value::Object(Default::default())
                } else {
                    scenario.cloud.seed.clone()
                };
                let (url, running) = match name.as_str() {
                    "static" => {
                        let seed: StaticSeed = serde_json::from_value(seed)
                            .context("cloud.seed is not a static inventory ({instances: [...]})")?;
                        let cloud =
                            StaticCloud::start(loopback, seed.instances, Some(token.clone()))
                                .await
                                .context("starting the static inventory simulator")?;
                        (cloud.url(), Running::Static(cloud))
                    }
                    "cloudscale" => {
                        let seed: Seed = serde_json::from_value(seed)
                            .context("cloud.seed is not a cloudscale simulator seed")?;
                        let sim = CloudscaleSim::start(
                            loopback,
                            CloudscaleOptions {
                                token: token.clone(),
                                ..Default::default()
                            },
                        )
                        .await
                        .context("starting the cloudscale simulator")?;
                        sim.seed(seed)
                            .map_err(|e| anyhow::anyhow!("cloud.seed: {e}"))?;
                        (sim.url(), Running::Cloudscale(sim))
                    }
                    "phoenixnap" => {
                        let seed: phoenixnap::Seed = serde_json::from_value(seed)
                            .context("cloud.seed is not a PhoenixNAP simulator seed")?;
                        // The client secret is `${CLOUD_TOKEN}`; the client ID is fixed.
                        let sim = PhoenixnapSim::start(
                            loopback,
                            PhoenixnapOptions {
                                client_id: PHOENIXNAP_CLIENT_ID.into(),
                                client_secret: token.clone(),
                                ..Default::default()
                            },
                        )
                        .await
                        .context("starting the PhoenixNAP simulator")?;
                        sim.seed(seed)
                            .map_err(|e| anyhow::anyhow!("cloud.seed: {e}"))?;
                        (sim.url(), Running::Phoenixnap(sim))
                    }
                    "cloudstack" => {
                        let seed: cloudstack::Seed = serde_json::from_value(seed)
                            .context("cloud.seed is not a CloudStack simulator seed")?;
                        // Jobs complete at their first poll: the async path is exercised
                        // without waiting.
                        let sim = CloudstackSim::start_on(
                            loopback,
                            CloudstackOptions {
                                api_key: CLOUDSTACK_API_KEY.into(),
                                secret_key: token.clone(),
                                ..Default::default()
                            },
                        )
                        .await
                        .context("starting the CloudStack simulator")?;
                        sim.seed(seed)
                            .map_err(|e| anyhow::anyhow!("cloud.seed: {e}"))?;
                        (sim.base_url(), Running::Cloudstack(sim))
                    }
                    other => bail!("there is no `{other}` simulator"),
                };
                Ok(CloudUnderTest {
                    label: format!("sim:{name}"),
                    url,
                    token: Some(token),
                    replayer: None,
                    real: false,
                    running,
                })
            }
            CloudChoice::Url(url) => Ok(CloudUnderTest {
                label: url.clone(),
                url: url.clone(),
                token: std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()),
                replayer: None,
                real: true,
                running: Running::Nothing,
            }),
            CloudChoice::Cassette(path) => {
                let cassette = Cassette::load(path)?;
                let url = cassette.cloud_url.clone().with_context(|| {
                    format!(
                        "{} does not say which cloud it was recorded against (cloud-url); it cannot be replayed",
                        path.display()
                    )
                })?;
                Ok(CloudUnderTest {
                    label: format!("cassette:{}", path.display()),
                    url,
                    token: Some("replayed".into()),
                    replayer: Some(Arc::new(Replayer::new(cassette))),
                    real: false,
                    running: Running::Nothing,
                })
            }
        }
    }

    /// Stops a simulator.
    pub async fn stop(self) {
        match self.running {
            Running::Cloudscale(sim) => sim.shutdown().await,
            Running::Phoenixnap(sim) => sim.shutdown().await,
            Running::Cloudstack(sim) => sim.shutdown().await,
            Running::Static(_) | Running::Nothing => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices() {
        assert_eq!(
            CloudChoice::parse("sim:static").unwrap(),
            CloudChoice::Sim("static".into())
        );
        assert_eq!(
            CloudChoice::parse("https://api.example/").unwrap(),
            CloudChoice::Url("https://api.example".into())
        );
        assert_eq!(
            CloudChoice::parse("cassette:x.json").unwrap(),
            CloudChoice::Cassette("x.json".into())
        );
        let e = CloudChoice::parse("sim:aws").unwrap_err().to_string();
        assert!(
            e.contains("static, cloudscale, phoenixnap, cloudstack"),
            "{e}"
        );
        assert!(CloudChoice::parse("ftp://x").is_err());
    }
}
