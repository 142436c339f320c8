//! What every controller runs on, and nothing controller-specific: the watch caches
//! ([`informer`]), the deduplicating work queue and its backoff ([`queue`]), the worker loop
//! that drives a reconciler from the queue ([`runner`]), the reconcile error and its retry
//! classes ([`error`]). Pacing takes its tokens from the workspace's one token bucket,
//! `wasm_ccm_runtime::TokenBucket`.

pub(crate) mod error;
pub(crate) mod informer;
pub(crate) mod queue;
pub(crate) mod runner;
