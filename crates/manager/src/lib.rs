//! The process around wasm-ccm's cloud-controller loops, as `wasm-ccm run` runs it: [`run`]
//! puts each driver in its slot, watches file-mounted drivers for a new version (`reload`),
//! serves `/healthz`, `/readyz` and `/metrics` over HTTPS with delegated authentication and
//! authorization ([`server`]), waits for the lease (`leader`, client-go-compatible), then
//! starts the loops (`wasm_ccm_controllers::start_driver_set`) and holds the lease until it is
//! cancelled or loses it.
//!
//! Beside it: the Kubernetes versions the release supports ([`kubernetes_version`]) and the
//! User-Agent every Kubernetes request carries ([`user_agent`]). The playground runs the loops
//! without any of this, so it does not link this crate for them.

pub mod kubernetes_version;
mod leader;
mod reload;
pub mod request_metrics;
mod run;
pub mod server;
pub mod service_accounts;
pub mod user_agent;

pub use leader::{LeaderConfig, default_identity};
pub use reload::{Loader, Refusal, ReloadOptions};
pub use run::{DriverEntry, Exit, RunOptions, run};
