//! The `cluster` capability: what a driver may read of the cluster during a call, and the
//! events it records on the call's object.
//!
//! As a capability unit ([`crate::capability`]):
//! - config: none from the driver's options; the caller supplies its input per call, the
//!   [`ClusterView`] of its [`crate::CallScope`] and, for `load-balancer.ensure` and `update`, the
//!   call's [`SharedNodes`];
//! - per-call state: [`ClusterCall`], that input plus the events recorded so far;
//! - host view: [`ClusterHost`], which implements `cluster::Host`. Every answer adds what it
//!   copies into the guest to the driver's lowered-bytes counter ([`crate::lowered`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use wasmtime::component::{HasData, Linker};

use super::log::{CallTags, DriverLogger, Level, Source};
use crate::bindings::cluster as wit;
use crate::bindings::types::{Node, Service};
use crate::call::{ClusterView, DriverEvent, EventKind, SharedNodes};
use crate::lowered::Lowered;
use crate::wit::Convert;

/// Events a single call may record; more are dropped with a log line.
pub(crate) const MAX_EVENTS_PER_CALL: usize = 50;
const MAX_EVENT_MESSAGE: usize = 1024;
/// Longest event reason kept from a driver (the controllers refuse one over 128 bytes and quote a
/// shortened form of it).
const MAX_EVENT_REASON_BYTES: usize = 512;

/// The capability's state during one call.
pub(crate) struct ClusterCall {
    /// What the Service queries read.
    pub view: Arc<dyn ClusterView>,
    /// The node set of a `load-balancer.ensure` or `update` call, for `cluster.nodes`.
    pub nodes: Option<SharedNodes>,
    /// The events the driver recorded, redacted and bounded.
    pub events: Vec<DriverEvent>,
}

impl ClusterCall {
    /// A call reading `view`, with `nodes` as its node set.
    pub(crate) fn new(view: Arc<dyn ClusterView>, nodes: Option<SharedNodes>) -> Self {
        ClusterCall {
            view,
            nodes,
            events: Vec::new(),
        }
    }
}

/// What the `cluster` functions need of an instance's state.
pub(crate) struct ClusterHost<'a> {
    /// The driver's name, for the log line about dropped events.
    driver: &'a str,
    logger: &'a DriverLogger,
    lowered: &'a AtomicU64,
    tags: &'a Mutex<CallTags>,
    call: &'a mut ClusterCall,
}

impl<'a> ClusterHost<'a> {
    /// A view of the call's cluster state and the driver's logger and counter.
    pub(crate) fn new(
        driver: &'a str,
        logger: &'a DriverLogger,
        lowered: &'a AtomicU64,
        tags: &'a Mutex<CallTags>,
        call: &'a mut ClusterCall,
    ) -> Self {
        ClusterHost {
            driver,
            logger,
            lowered,
            tags,
            call,
        }
    }

    /// Counts what an answer copies into the guest.
    fn count_lowered<T: Lowered + ?Sized>(&self, answer: &T) {
        self.lowered
            .fetch_add(answer.lowered_bytes(), Ordering::Relaxed);
    }

    fn tags(&self) -> CallTags {
        self.tags.lock().map(|t| t.clone()).unwrap_or_default()
    }
}

impl wit::Host for ClusterHost<'_> {
    fn load_balancer_services(&mut self) -> Vec<Service> {
        let services = self.call.view.load_balancer_services();
        self.count_lowered(services.as_slice());
        services.convert()
    }

    fn services_with_annotation(&mut self, key: String, values: Vec<String>) -> Vec<Service> {
        let services = self.call.view.services_with_annotation(&key, &values);
        self.count_lowered(services.as_slice());
        services.convert()
    }

    fn services_with_address(&mut self, ips: Vec<String>) -> Vec<Service> {
        let services = self.call.view.services_with_address(&ips);
        self.count_lowered(services.as_slice());
        services.convert()
    }

    fn address_claims(&mut self, ips: Vec<String>, annotation: String) -> Vec<wit::AddressClaim> {
        let claims = self.call.view.address_claims(&ips, &annotation);
        self.count_lowered(claims.as_slice());
        claims.convert()
    }

    fn nodes(&mut self) -> Vec<Node> {
        let Some(set) = self.call.nodes.as_ref() else {
            return Vec::new();
        };
        self.count_lowered(set.nodes());
        set.nodes().iter().cloned().map(Node::from).collect()
    }

    fn event(&mut self, kind: wit::EventType, reason: String, message: String) {
        let tags = self.tags();
        // The controllers validate the reason (UpperCamelCase, ≤ 128 bytes) and quote a refused
        // one; here it is kept from growing the host and redacted (before any cut, so no part of
        // a secret survives it).
        let reason = self.logger.redact_bounded(&reason, MAX_EVENT_REASON_BYTES);
        if self.call.events.len() >= MAX_EVENTS_PER_CALL {
            self.logger.log(
                Level::Warn,
                Source::Host,
                &tags.function,
                &tags.object,
                &format!(
                    "driver {} recorded more than {MAX_EVENTS_PER_CALL} events in one call; dropping event {reason}",
                    self.driver
                ),
                &[],
            );
            return;
        }
        let message = self.logger.redact_bounded(&message, MAX_EVENT_MESSAGE);
        self.call.events.push(DriverEvent {
            kind: EventKind::from(kind),
            reason,
            message,
        });
    }
}

/// Selects [`ClusterHost`] as what the bindings call.
struct ClusterData;

impl HasData for ClusterData {
    type Data<'a> = ClusterHost<'a>;
}

/// What `cluster` needs of a store's data: the driver's name, logger and lowered-bytes counter,
/// the instance's call tags and the call's view of the cluster.
pub(crate) trait ClusterStateView {
    /// The host view the bindings call.
    fn cluster_host(&mut self) -> ClusterHost<'_>;
}

/// Links `cluster` for a store whose data is a [`ClusterStateView`].
pub(crate) fn add_to_linker<T: ClusterStateView + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, ClusterData>(linker, T::cluster_host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::cluster::Host as _;
    use crate::call::{EmptyCluster, StaticCluster};
    use crate::capability::log::{LogLimits, MemorySink};

    struct Fixture {
        sink: Arc<MemorySink>,
        logger: DriverLogger,
        lowered: AtomicU64,
        tags: Mutex<CallTags>,
    }

    impl Fixture {
        fn new() -> Self {
            let sink = Arc::new(MemorySink::default());
            Fixture {
                logger: DriverLogger::new("acme", sink.clone(), LogLimits::default()),
                sink,
                lowered: AtomicU64::new(0),
                tags: Mutex::new(CallTags {
                    function: "load-balancer.ensure".into(),
                    object: "default/web".into(),
                }),
            }
        }

        fn host<'a>(&'a self, call: &'a mut ClusterCall) -> ClusterHost<'a> {
            ClusterHost::new("acme", &self.logger, &self.lowered, &self.tags, call)
        }
    }

    fn service(name: &str) -> crate::types::Service {
        crate::types::Service {
            namespace: "default".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            annotations: vec![("acme/pool".into(), "blue".into())],
            ..Default::default()
        }
    }

    #[test]
    fn queries_read_the_calls_view_and_count_what_they_copy() {
        let f = Fixture::new();
        let view = StaticCluster(vec![service("a"), service("b")]);
        let mut call = ClusterCall::new(Arc::new(view), None);
        let mut host = f.host(&mut call);
        assert_eq!(host.load_balancer_services().len(), 2);
        let counted = f.lowered.load(Ordering::Relaxed);
        assert!(counted > 0);
        let matched = host.services_with_annotation("acme/pool".into(), vec!["blue".into()]);
        assert_eq!(matched.len(), 2);
        assert!(f.lowered.load(Ordering::Relaxed) > counted);
        assert!(
            host.nodes().is_empty(),
            "no node set outside ensure and update"
        );
    }

    #[test]
    fn nodes_are_the_calls_set() {
        let f = Fixture::new();
        let set = SharedNodes::new(vec![crate::types::Node::named("n1")]);
        let mut call = ClusterCall::new(Arc::new(EmptyCluster), Some(set));
        let nodes = f.host(&mut call).nodes();
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].name, "n1");
    }

    #[test]
    fn events_are_redacted_bounded_and_capped_per_call() {
        let f = Fixture::new();
        f.logger.add_secret("s3cr3t-token-value");
        let mut call = ClusterCall::new(Arc::new(EmptyCluster), None);
        let mut host = f.host(&mut call);
        let long = "x".repeat(10 * MAX_EVENT_MESSAGE);
        for _ in 0..MAX_EVENTS_PER_CALL + 2 {
            host.event(
                wit::EventType::Warning,
                "Failed".into(),
                format!("s3cr3t-token-value {long}"),
            );
        }
        assert_eq!(call.events.len(), MAX_EVENTS_PER_CALL);
        let event = &call.events[0];
        assert_eq!(event.kind, EventKind::Warning);
        assert!(!event.message.contains("s3cr3t-token-value"));
        assert!(event.message.len() <= MAX_EVENT_MESSAGE);
        let dropped = f
            .sink
            .records()
            .into_iter()
            .filter(|r| r.message.contains("dropping event Failed"))
            .count();
        assert_eq!(dropped, 2);
    }
}
