//! What the chaos soak (`wasm-ccm-dev soak`) needs of a cloud beyond [`SimCloud`](super::SimCloud):
//! the cloud objects a Service maps to (for the invariants), the cloud's fault injection and its
//! request log ([`SoakCloud`], in `model.rs`). A cloud joins the soak by implementing it (beside
//! its simulator, in `<cloud>/kit/soak.rs`) and naming its start function in its
//! [`Cloud`](super::Cloud) entry; `--driver` then offers it ([`names`]).

mod model;

use std::net::SocketAddr;

use super::{CLOUDS, StartOptions};

pub use super::rng::SplitMix64;
pub use model::{CloudFault, CloudLb, MemberSet, SoakCloud, SoakStartFn, Tally};
pub(crate) use model::{boxed, inject_common};

/// The clouds the soak can drive (those whose entry has a [`SoakStartFn`]), in the list's order.
pub fn names() -> impl Iterator<Item = &'static str> {
    CLOUDS.iter().filter(|c| c.soak.is_some()).map(|c| c.name)
}

/// Starts the simulator of the cloud named `name` on `addr`, with what the soak drives on top
/// of it; a cloud the soak has no fault model for is refused, naming those it has.
pub async fn start(name: &str, addr: SocketAddr) -> anyhow::Result<Box<dyn SoakCloud>> {
    let start = super::cloud(name).and_then(|c| c.soak).ok_or_else(|| {
        anyhow::anyhow!(
            "the soak has no fault model for the `{name}` cloud; choose {}",
            names().collect::<Vec<_>>().join(", ")
        )
    })?;
    start(StartOptions {
        addr,
        ..Default::default()
    })
    .await
}
