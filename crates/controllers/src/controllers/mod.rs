//! The four controllers, one folder each: `mod.rs` holds the loop (its reconcile body and how
//! it is wired to the informers), `rules.rs` the pure rules it follows (tested in
//! `rules/tests.rs`), and `upstream.rs` upstream's controller test tables
//! (`k8s.io/cloud-provider/controllers/…/*_test.go`), ported as data and run in process: each
//! case seeds the Kubernetes simulator, scripts the fake cloud behind the Cloud seam, calls the
//! controller's reconcile body and asserts what was written. Each `upstream.rs` names the
//! upstream tests it ports and skips, and where ours deliberately differs.
//!
//! A new controller is one folder here (its `mod.rs` defines its `ENTRY`, the shape of which is
//! in `entry.rs`), its `mod` line below, and one line in [`crate::registry::CONTROLLERS`]. The harness the tables share is `crate::test_support`
//! (the shadow and routing tests use it too), and `smoke.rs` tests the harness itself.

pub(crate) mod entry;
pub(crate) mod lifecycle;
pub(crate) mod node;
pub(crate) mod route;
pub(crate) mod service;

#[cfg(test)]
mod smoke;
