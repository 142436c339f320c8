//! The drivers a conformance run calls — a warm one, a fresh-instance one and one whose HTTP
//! faults are switched on and off — with what every call cost and where it tried to go.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use wasm_ccm_runtime::http::HttpInterceptor;
use wasm_ccm_runtime::types::ProviderError;
use wasm_ccm_runtime::{
    CallError, CallScope, Compiled, Driver, DriverOptions, InstanceMode, Outcome, Runtime,
};

use super::faults::FaultLayer;
use super::report::{Crash, Meter};

/// How many times `ensure` is called while the driver answers `retry-after`.
const MAX_CONVERGE_PASSES: usize = 10;

/// Longest `retry-after` waited out against a real cloud.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(60);

/// The drivers under test and what their calls showed.
pub(super) struct Harness {
    /// Instances are kept between calls, as in production.
    pub warm: Driver,
    /// Every call in a new instance (and `init`): what must not change the answers.
    pub fresh: Driver,
    /// Warm, with faults injected by [`Harness::faults`].
    pub faulty: Driver,
    /// The switch for `faulty`'s faults.
    pub faults: Arc<FaultLayer>,
    /// Cost per function of the behavioural calls.
    pub meter: Meter,
    /// Requests the egress policy refused, as `METHOD url (function)`.
    pub denied: BTreeSet<String>,
    /// Whether `retry-after` must really be waited for.
    pub real_cloud: bool,
    /// Calls that crashed, with their whole backtraces, for the report.
    pub crashes: Vec<Crash>,
}

/// Requests of one call: how many, and the mutating ones as `METHOD url`.
pub(super) struct Traffic {
    pub requests: usize,
    pub mutations: Vec<String>,
}

impl Harness {
    /// Loads the driver three times with `opts`; `transport` carries every request that is not
    /// faulted (recording or replaying it), `None` for straight to the network.
    pub(super) async fn load(
        runtime: &Runtime,
        compiled: &Compiled,
        opts: DriverOptions,
        transport: Option<Arc<dyn HttpInterceptor>>,
        real_cloud: bool,
    ) -> Result<Harness, wasm_ccm_runtime::HostError> {
        // Only the faulty driver needs the fault layer; the others go straight to the transport.
        let faults = Arc::new(FaultLayer::new(transport.clone()));
        let with = |mode: InstanceMode, interceptor: Option<Arc<dyn HttpInterceptor>>| {
            let mut opts = opts.clone();
            opts.pool.mode = mode;
            opts.http.interceptor = interceptor;
            opts
        };
        let warm = runtime
            .load(compiled, with(InstanceMode::Warm, transport.clone()))
            .await?;
        let fresh = runtime
            .load(compiled, with(InstanceMode::Fresh, transport))
            .await?;
        let faulty = runtime
            .load(
                compiled,
                with(
                    InstanceMode::Warm,
                    Some(faults.clone() as Arc<dyn HttpInterceptor>),
                ),
            )
            .await?;
        Ok(Harness {
            warm,
            fresh,
            faulty,
            faults,
            meter: Meter::default(),
            denied: BTreeSet::new(),
            real_cloud,
            crashes: Vec::new(),
        })
    }

    /// Notes what a call cost and any refused egress; returns its traffic.
    pub(super) fn observe<T>(&mut self, function: &str, outcome: &Outcome<T>) -> Traffic {
        self.meter.add(
            function,
            outcome.elapsed,
            outcome.peak_memory,
            outcome.http.len(),
        );
        self.note_denied(function, outcome)
    }

    /// Notes refused egress and a crash only (for calls whose cost is not representative, e.g.
    /// faulted).
    pub(super) fn note_denied<T>(&mut self, function: &str, outcome: &Outcome<T>) -> Traffic {
        if let Err(CallError::Host(e)) = &outcome.result
            && let Some(crash) = Crash::of(function, e)
        {
            Crash::add(&mut self.crashes, crash);
        }
        for h in &outcome.http {
            if h.error.as_deref() == Some("denied") {
                self.denied
                    .insert(format!("{} {} ({function})", h.method, h.url));
            }
        }
        Traffic {
            requests: outcome.http.len(),
            mutations: outcome
                .http
                .iter()
                .filter(|h| h.mutating)
                .map(|h| format!("{} {}", h.method, h.url))
                .collect(),
        }
    }

    /// Calls `call` until it stops answering `retry-after` (waiting it out against a real
    /// cloud), at most [`MAX_CONVERGE_PASSES`] times. Returns the last outcome and the passes.
    pub(super) async fn converge<T, F, Fut>(
        &mut self,
        function: &str,
        mut call: F,
    ) -> (Outcome<T>, usize)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Outcome<T>>,
    {
        let mut passes = 0;
        loop {
            passes += 1;
            let outcome = call().await;
            self.observe(function, &outcome);
            let wait = match &outcome.result {
                Err(CallError::Provider(ProviderError::RetryAfter(r))) => {
                    Duration::from_secs(u64::from(r.seconds))
                }
                _ => return (outcome, passes),
            };
            if passes >= MAX_CONVERGE_PASSES {
                return (outcome, passes);
            }
            if self.real_cloud {
                tokio::time::sleep(wait.min(MAX_RETRY_WAIT)).await;
            }
        }
    }
}

/// A scope naming the object of a call.
pub(super) fn scope(object: &str) -> CallScope {
    CallScope::object(object)
}
