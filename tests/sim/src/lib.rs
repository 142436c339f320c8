//! Stateful simulators for wasm-ccm's tests, playground and benchmarks.
//!
//! [`kube`] simulates the Kubernetes API server over plain HTTP; the cloud APIs come later.

pub mod kube;
pub mod static_cloud;
