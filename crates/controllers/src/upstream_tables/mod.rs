//! Upstream's controller test tables (`k8s.io/cloud-provider/controllers/…/*_test.go`), ported
//! as data and run in process: each case seeds the Kubernetes simulator, scripts the fake cloud
//! behind the Cloud seam, calls the controller's reconcile body and asserts what was written.
//! Each file names the upstream tests it ports and skips, and where ours deliberately differs.

mod lifecycle;
mod node;
mod route;
mod service;
mod smoke;
