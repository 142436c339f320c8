//! Stateful simulators for wasm-ccm's tests, playground and benchmarks.
//!
//! [`kube`] simulates the Kubernetes API server over plain HTTP; [`cloudscale`] the cloudscale.ch
//! REST API; [`static_cloud`] is the static driver's inventory service.

pub mod cloudscale;
pub mod kube;
mod serving;
pub mod static_cloud;
