//! The controllers' context: a struct of handles to the seams every controller shares (the
//! Kubernetes client [`Kube`], the metered cloud [`Cloud`], the [`Events`] and their refusal
//! memory, the informers' stores, the metrics, the settings, this driver's routing view and a
//! shadow run's log), plus the one step that needs several of them at once: reporting refused
//! answers. A driver call goes through [`Cloud::call`], which publishes the driver's events.
//! The node-ownership rule (`ownership.rs`) is a method of it too, written beside its policy.
//!
//! Each handle's type lives in its own module, none of which names this one: a seam can be read
//! and tested alone, and the controllers reach all of them through [`Ctx`].

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, ObjectReference, Service};

use crate::answer_rules::Violation;
use crate::cloud::{Cloud, Function};
use crate::config::ControllerConfig;
use crate::events::{ANSWER_REFUSED_REASON, Events, Refusals, count_refusal, refusal_note};
use crate::kube::Kube;
use crate::machinery::informer::Store;
use crate::metrics::Metrics;
use crate::routing::DriverView;
use crate::shadow::ShadowLog;

/// Shared state of every controller.
pub(crate) struct Ctx {
    pub(crate) kube: Kube,
    pub(crate) cloud: Cloud,
    pub(crate) events: Arc<Events>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) config: ControllerConfig,
    pub(crate) nodes: Store<Node>,
    pub(crate) services: Store<Service>,
    pub(crate) refusals: Refusals,
    /// Which nodes and Services are this driver's (all of them with one driver).
    pub(crate) route: DriverView,
    /// A shadow run's would-be writes; `None` in a normal run.
    pub(crate) shadow: Option<Arc<ShadowLog>>,
}

impl Ctx {
    /// The name of this driver's `base` queue in metrics and logs: upstream's (`node`,
    /// `service`) for a driver without a label (the one-driver flags), `base/<label>` else.
    pub(crate) fn queue_name(&self, base: &str) -> String {
        match self.route.label() {
            None => base.to_string(),
            Some(label) => format!("{base}/{label}"),
        }
    }

    /// The shadow report now; `None` outside shadow mode.
    pub(crate) fn shadow_report(&self) -> Option<crate::shadow::ShadowReport> {
        let shadow = self.shadow.as_ref()?;
        Some(shadow.report(&self.cloud.name(), &self.nodes, &self.services))
    }

    /// Sets `wasm_ccm_shadow_differences{driver,verdict}` from a fresh report (at scrape time;
    /// the scrape clears the series first, once for every driver).
    pub(crate) fn export_shadow_gauges(&self) {
        let Some(report) = self.shadow_report() else {
            return;
        };
        let driver = report.driver.as_str();
        for (verdict, count) in [
            ("pending", report.summary.pending),
            ("agreed", report.summary.agreed),
            ("diverged", report.summary.diverged),
        ] {
            self.metrics.set(
                "wasm_ccm_shadow_differences",
                &[("driver", driver), ("verdict", verdict)],
                count as f64,
            );
        }
    }

    /// Reports the parts of a driver's `function` answer about `regarding` that were refused:
    /// a counter per rule and a log line each, and one Warning event naming the driver and the
    /// rules, published again only when the refusals change (a resync with the same answer is
    /// quiet on the object).
    pub(crate) async fn report_refusals(
        &self,
        reporter: &'static str,
        regarding: &ObjectReference,
        function: Function,
        action: &str,
        violations: &[Violation],
    ) {
        if violations.is_empty() {
            // A clean answer: the next refusal is news again.
            self.clear_refusals(regarding);
            return;
        }
        let driver = self.cloud.name();
        for v in violations {
            count_refusal(&self.metrics, &driver, function.as_str(), regarding, v);
        }
        let note = refusal_note(&driver, function.as_str(), violations);
        if !self.refusals.is_news(regarding, &note) {
            return;
        }
        self.events
            .publish(
                reporter,
                regarding,
                true,
                ANSWER_REFUSED_REASON,
                &note,
                action,
            )
            .await;
    }

    /// Forgets what was reported about `regarding`, after an answer with nothing refused (a
    /// later refusal is news again).
    pub(crate) fn clear_refusals(&self, regarding: &ObjectReference) {
        self.refusals.forget(regarding);
    }
}
