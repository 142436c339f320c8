//! The kit's view of the simulated clouds ([`wasm_ccm_sim::kit`], the one list) and the drivers
//! embedded in this binary ([`wasm_ccm_drivers::SHIPPED`]).

use wasm_ccm_sim::kit;

/// A `--driver`/`--cloud sim:` value: a cloud in the kit's list.
pub(crate) fn parse_cloud_name(name: &str) -> Result<String, String> {
    match kit::cloud(name) {
        Some(cloud) => Ok(cloud.name.to_string()),
        None => Err(format!(
            "there is no `{name}` simulated cloud; choose one of {}",
            kit::names()
        )),
    }
}

/// The embedded bytes of the shipped driver `name`.
pub(crate) fn driver_bytes(name: &str) -> anyhow::Result<&'static [u8]> {
    wasm_ccm_drivers::shipped(name).ok_or_else(|| {
        anyhow::anyhow!(
            "this wasm-ccm-dev embeds no `{name}` driver (it has {}); rebuild it from a checkout that builds that driver",
            wasm_ccm_drivers::SHIPPED
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every cloud in the kit's list has its driver embedded: a cloud added to the list without
    /// its line in the guest build table fails here, not in a user's playground.
    #[tokio::test]
    async fn every_cloud_has_its_driver_embedded() {
        for cloud in kit::CLOUDS {
            let sim = kit::start(cloud.name, kit::StartOptions::default())
                .await
                .unwrap_or_else(|e| panic!("{}: {e:#}", cloud.name));
            let driver = sim.driver_setup().driver;
            let bytes = driver_bytes(driver).unwrap_or_else(|e| panic!("{e:#}"));
            assert!(bytes.starts_with(b"\0asm"), "{driver}");
            sim.shutdown().await;
        }
    }

    #[test]
    fn an_unknown_cloud_name_lists_the_known_ones() {
        let err = parse_cloud_name("aws").unwrap_err();
        let listed: Vec<&str> = err
            .strip_prefix("there is no `aws` simulated cloud; choose one of ")
            .unwrap_or_else(|| panic!("{err}"))
            .split(", ")
            .collect();
        // The expected names are written here, not taken from the list under test; a new cloud
        // may join them.
        for known in ["static", "cloudscale", "phoenixnap", "cloudstack"] {
            assert!(listed.contains(&known), "{known} missing from: {err}");
        }
        assert_eq!(parse_cloud_name("cloudstack").unwrap(), "cloudstack");
    }
}
