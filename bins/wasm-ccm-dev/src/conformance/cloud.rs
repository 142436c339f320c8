//! The cloud a driver is checked against: a simulator started in process, a real endpoint, or a
//! cassette replayed without the network.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use serde_json::Value;
use wasm_ccm_sim::kit::{self, SimCloud, StartOptions};

use super::scenario::Scenario;
use crate::cassette::{Cassette, Replayer};

/// The account every `sim:` cloud is started with, for clouds whose secret belongs to one
/// (PhoenixNAP's OAuth2 client ID, CloudStack's API key; the others have none): scenarios name
/// it beside `${CLOUD_TOKEN}`, its secret (see `drivers/<cloud>/conformance.yaml`). Each cloud's
/// kit entry maps it onto its own field ([`StartOptions::account`]), so no cloud is named here.
pub(super) const SIM_ACCOUNT: &str = "conformance";

/// The environment variable holding the credential for `--cloud URL` (`${CLOUD_TOKEN}`).
pub(super) const TOKEN_ENV: &str = "WASM_CCM_CLOUD_TOKEN";

/// What `--cloud` asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum CloudChoice {
    Sim(String),
    Url(String),
    Cassette(PathBuf),
}

impl CloudChoice {
    /// Parses `sim:<name>`, `cassette:FILE` or an `http(s)://` URL.
    pub(super) fn parse(s: &str) -> anyhow::Result<CloudChoice> {
        if let Some(name) = s.strip_prefix("sim:") {
            if kit::cloud(name).is_none() {
                bail!(
                    "--cloud sim:{name}: there is no `{name}` simulator; choose one of {}",
                    kit::names()
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

/// A cloud ready for the driver.
pub(super) struct CloudUnderTest {
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
    /// The simulator started for `sim:`, stopped by [`CloudUnderTest::stop`].
    running: Option<Box<dyn SimCloud>>,
}

impl CloudUnderTest {
    /// Starts or opens the chosen cloud for `scenario`.
    pub(super) async fn start(choice: &CloudChoice, scenario: &Scenario) -> anyhow::Result<Self> {
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
                let sim = kit::start(
                    name,
                    StartOptions {
                        secret: Some(token.clone()),
                        account: Some(SIM_ACCOUNT.into()),
                        empty: true,
                        ..Default::default()
                    },
                )
                .await?;
                sim.seed(seed)
                    .map_err(|e| anyhow::anyhow!("cloud.seed of sim:{name}: {e}"))?;
                let url = sim.url();
                let running = Some(sim);
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
                running: None,
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
                    running: None,
                })
            }
        }
    }

    /// Stops a simulator.
    pub(super) async fn stop(self) {
        if let Some(sim) = self.running {
            sim.shutdown().await;
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
