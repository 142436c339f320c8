//! Stateful simulators for wasm-ccm's tests, playground and benchmarks.
//!
//! [`kube`] simulates the Kubernetes API server over plain HTTP; [`cloudscale`] the cloudscale.ch
//! REST API; [`phoenixnap`] the PhoenixNAP APIs (OAuth2 token endpoint, BMC servers, IP blocks,
//! public networks, tag manager); [`cloudstack`] the Apache CloudStack API (signed requests,
//! async jobs, load-balancer rules, public IPs, firewall rules, network ACLs); [`static_cloud`]
//! is the static driver's inventory service.

pub mod cli;
pub mod cloudscale;
pub mod cloudstack;
mod fixture;
pub use fixture::Sequenced;
pub mod kit;
pub mod kube;
pub mod phoenixnap;
mod rate_limit;
pub use rate_limit::RateLimit;
mod request_core;
mod serving;
pub mod static_cloud;
