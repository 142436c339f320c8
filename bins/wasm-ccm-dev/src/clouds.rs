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
