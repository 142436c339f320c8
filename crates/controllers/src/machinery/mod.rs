//! What every controller runs on, and nothing controller-specific: the watch caches
//! ([`informer`]), the deduplicating work queue and its backoff ([`queue`]), the worker loop
//! that drives a reconciler from the queue ([`runner`]), the reconcile error and its retry
//! classes ([`error`]), and the one token bucket of the crate ([`token_bucket`]).

pub(crate) mod error;
pub(crate) mod informer;
pub(crate) mod queue;
pub(crate) mod runner;
pub(crate) mod token_bucket;
