//! [`Cloud`]: the seam as the controllers hold it, and the one decorator every driver call goes
//! through. [`Cloud::call`] takes the provider's future and does, for every function alike, what
//! each call site once did by hand (and some forgot): a span naming the call, the call counter and
//! its duration, a shadow run's record of the cloud writes the runtime refused, and the events
//! the driver asked for, published on the object the call is about (or logged for a call about
//! no object) with a refused event reason counted.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;
use wasm_ccm_runtime::types::{ListedInstance, Node as WitNode, ProviderError, ProviderInfo};
use wasm_ccm_runtime::{CallError, CallScope, ClusterView, DriverEvent, Outcome};

use super::listing::{InstanceListing, Listed, PageRules, Refusal};
use super::slot::CloudSource;
use super::{About, Function, SharedCloud, Subject};
use crate::cluster_view::StoreCluster;
use crate::events::{Events, count_refusal};
use crate::metrics::Metrics;
use crate::shadow::{Recorded, ShadowLog};

/// The cloud behind the seam with metrics, shadow recording and driver events around every
/// call.
pub(crate) struct Cloud {
    source: Arc<dyn CloudSource>,
    /// The `driver` label of its metrics: the configured name with several drivers, else the
    /// driver's own name (read per call: a reload may not change it, but a fake may).
    label: Option<String>,
    metrics: Arc<Metrics>,
    cluster: Arc<StoreCluster>,
    shadow: Option<Arc<ShadowLog>>,
    events: Arc<Events>,
    listing: InstanceListing,
}

/// The parts of a [`Cloud`], each named at the one place it is built.
pub(crate) struct CloudParts {
    pub(crate) source: Arc<dyn CloudSource>,
    pub(crate) label: Option<String>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) cluster: Arc<StoreCluster>,
    pub(crate) shadow: Option<Arc<ShadowLog>>,
    pub(crate) events: Arc<Events>,
    /// How long one `instance-listing` answers for nodes (`--instance-listing-max-age`; zero:
    /// never list).
    pub(crate) listing_max_age: Duration,
}

impl Cloud {
    /// The seam over `parts.source` (in production the slot of the driver in service); with a
    /// shadow log, the writes the runtime refused are recorded there.
    pub(crate) fn new(parts: CloudParts) -> Self {
        Cloud {
            source: parts.source,
            label: parts.label,
            metrics: parts.metrics,
            cluster: parts.cluster,
            shadow: parts.shadow,
            events: parts.events,
            listing: InstanceListing::new(parts.listing_max_age),
        }
    }

    /// What the driver's listing says of `node` (`listing.rs`): its instance, when a listing
    /// no older than `--instance-listing-max-age` and `within` (the caller's period) names it
    /// exactly once, else [`Listed::AskPerNode`]. Takes a new listing, page by page, when there
    /// is none.
    pub(crate) async fn listed(&self, node: &WitNode, within: Duration) -> Listed {
        if self.listing.is_off() {
            return Listed::AskPerNode;
        }
        let provider = self.provider();
        let found = self
            .listing
            .find(&provider, node, within, || async {
                let scope = self.scope("instance-listing");
                let taken = self.list_all(&provider, &scope).await;
                self.count_listing(&taken);
                taken
            })
            .await;
        self.count_lookup(&found);
        found
    }

    /// [`Cloud::listed`] from a listing already at hand, never a new one (the lifecycle pass).
    pub(crate) async fn listed_at_hand(&self, node: &WitNode, within: Duration) -> Listed {
        if self.listing.is_off() {
            return Listed::AskPerNode;
        }
        let found = self
            .listing
            .find_at_hand(&self.provider(), node, within)
            .await;
        self.count_lookup(&found);
        found
    }

    fn count_lookup(&self, found: &Listed) {
        let answer = match found {
            Listed::Found(_) => "listed",
            Listed::AskPerNode => "per-node",
        };
        self.metrics.inc(
            "wasm_ccm_instance_listing_lookups_total",
            &[("driver", &self.name()), ("answer", answer)],
        );
    }

    /// Lists every page of `provider`, each page a call about no one object, under the bounds of
    /// [`PageRules`].
    async fn list_all(
        &self,
        provider: &SharedCloud,
        scope: &CallScope,
    ) -> Result<Vec<ListedInstance>, Refusal> {
        let mut rules = PageRules::new(&provider.provider_id_scheme());
        let mut page: Option<String> = None;
        loop {
            let about = About::subject(Subject::driver("instance-listing"));
            let answer = self
                .call(
                    Function::ListInstances,
                    about,
                    provider.list_instances(page.as_deref(), scope),
                )
                .await;
            let got = match answer {
                Ok(got) => got,
                Err(CallError::Provider(ProviderError::NotImplemented)) => {
                    return Err(Refusal::NotImplemented);
                }
                Err(e) => return Err(Refusal::Failed(e)),
            };
            match rules.take(got.instances, got.next) {
                Ok(Some(next)) => page = Some(next),
                Ok(None) => return Ok(rules.into_instances()),
                Err(why) => return Err(Refusal::Refused(why)),
            }
        }
    }

    /// Counts a listing by outcome, and says why one was not used.
    fn count_listing(&self, taken: &Result<Vec<ListedInstance>, Refusal>) {
        let driver = self.name();
        let outcome = match taken {
            Ok(instances) => {
                tracing::debug!(driver = %driver, instances = instances.len(), "instances listed");
                "ok"
            }
            Err(refusal) => {
                match refusal {
                    Refusal::NotImplemented => tracing::info!(
                        driver = %driver,
                        "the driver does not list its instances (instance-listing answers not-implemented): every node is asked about alone"
                    ),
                    Refusal::Failed(e) => tracing::warn!(
                        driver = %driver,
                        error = %e,
                        "listing the instances failed: nodes are asked about one by one until the next listing"
                    ),
                    Refusal::Refused(why) => tracing::warn!(
                        driver = %driver,
                        reason = %why,
                        "the driver's listing was refused whole: nodes are asked about one by one until the next listing; fix the driver's listing"
                    ),
                }
                refusal.outcome()
            }
        };
        self.metrics.inc(
            "wasm_ccm_instance_listings_total",
            &[("driver", &driver), ("outcome", outcome)],
        );
    }

    /// The provider for one call (a reload may swap the driver between calls, never during
    /// one): pass its method's future to [`Cloud::call`].
    pub(crate) fn provider(&self) -> SharedCloud {
        self.source.current()
    }

    /// The cloud's name, for messages and metric labels: the configured name with several
    /// drivers, else the driver's own.
    pub(crate) fn name(&self) -> String {
        match &self.label {
            Some(label) => label.clone(),
            None => self.provider().name(),
        }
    }

    /// What the driver in service declared at load.
    pub(crate) fn info(&self) -> ProviderInfo {
        self.provider().info()
    }

    /// The provider-ID scheme the driver declared (`<scheme>://…`).
    pub(crate) fn provider_id_scheme(&self) -> String {
        self.provider().provider_id_scheme()
    }

    /// The cluster view the driver sees.
    pub(crate) fn cluster(&self) -> &StoreCluster {
        &self.cluster
    }

    /// The call scope for `object`.
    pub(crate) fn scope(&self, object: &str) -> CallScope {
        CallScope {
            object: object.to_string(),
            cluster: Arc::clone(&self.cluster) as Arc<dyn ClusterView>,
        }
    }

    /// Runs one driver call (`call`, the future of the provider's method for `function`) and
    /// does around it what every call needs: a span, the call counter and duration, a shadow
    /// run's record, the driver's events on `about`. Returns the call's typed result.
    pub(crate) async fn call<T>(
        &self,
        function: Function,
        about: About<'_>,
        call: impl Future<Output = Outcome<T>>,
    ) -> Result<T, CallError> {
        let driver = self.name();
        let span = tracing::debug_span!(
            "cloud.call",
            driver = %driver,
            function = function.as_str(),
            kind = about.subject.kind,
            object = %about.subject.object,
        );
        let outcome = call.instrument(span).await;
        if let Some(shadow) = &self.shadow {
            self.record_shadowed(shadow, function, &about.subject, &outcome);
        }
        self.count(&driver, function, &outcome);
        self.publish_events(&driver, function, &about, &outcome.events)
            .await;
        outcome.result
    }

    fn count<T>(&self, driver: &str, function: Function, outcome: &Outcome<T>) {
        let result = match &outcome.result {
            Ok(_) => "ok",
            Err(CallError::Provider(p)) => p.case(),
            Err(CallError::Host(_)) => "host-error",
        };
        let function = function.as_str();
        self.metrics.inc(
            "wasm_ccm_driver_calls_total",
            &[
                ("driver", driver),
                ("function", function),
                ("result", result),
            ],
        );
        self.metrics.observe(
            "wasm_ccm_driver_call_duration_seconds",
            &[("driver", driver), ("function", function)],
            outcome.elapsed.as_secs_f64(),
        );
    }

    /// The driver's events: on the object the call is about, by its reporting controller; a
    /// call about no object (the route pass, housekeeping, the status pass) has none to carry
    /// them, so they are logged. A refused reason is counted either way.
    async fn publish_events(
        &self,
        driver: &str,
        function: Function,
        about: &About<'_>,
        events: &[DriverEvent],
    ) {
        if events.is_empty() {
            return;
        }
        match about.regarding {
            Some((reporter, regarding)) => {
                let refused = self
                    .events
                    .publish_driver_events(reporter, regarding, events)
                    .await;
                for v in &refused {
                    count_refusal(&self.metrics, driver, function.as_str(), regarding, v);
                }
            }
            None => {
                for e in events {
                    tracing::info!(
                        driver = %driver,
                        function = function.as_str(),
                        kind = about.subject.kind,
                        object = %about.subject.object,
                        reason = ?e.reason,
                        message = ?e.message,
                        "driver event about no Kubernetes object (logged, not published)"
                    );
                }
            }
        }
    }

    fn record_shadowed<T>(
        &self,
        shadow: &ShadowLog,
        function: Function,
        subject: &Subject,
        outcome: &Outcome<T>,
    ) {
        let refused: Vec<String> = outcome
            .http
            .iter()
            .filter_map(|e| e.shadowed.clone())
            .collect();
        let any = !refused.is_empty();
        let function = function.as_str();
        let recorded = shadow.record_cloud(
            function,
            subject.kind,
            &subject.object,
            refused,
            outcome.result.is_ok(),
        );
        if any && recorded == Recorded::Changed {
            self.metrics.inc(
                "wasm_ccm_shadow_writes_total",
                &[("controller", function), ("target", "cloud")],
            );
            tracing::info!(
                function,
                kind = subject.kind,
                object = %subject.object,
                "shadow: the driver would write to the cloud (refused, recorded)"
            );
        }
    }

    /// Copies the cloud's own counters into the registry (at scrape time).
    pub(crate) fn export_counters(&self) {
        self.provider().export_counters(&self.metrics, &self.name());
    }
}
