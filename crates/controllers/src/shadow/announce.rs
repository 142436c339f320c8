//! `--shadow-events`: one event per diverged object, for operators who read `kubectl describe`
//! rather than the report. Off by default: events are writes (the read-only role of
//! `deploy/components/shadow` has no `create` on events), and beside the CCM in charge they add
//! to its own events.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use tokio_util::sync::CancellationToken;

use super::{Difference, Verdict};
use crate::ctx::Ctx;
use crate::events::{Events, reference};

/// How often `run` reads the report for new divergences.
pub(crate) const PERIOD: Duration = Duration::from_secs(10);
/// Divergences remembered as announced; past it the memory is cleared (an event repeats).
const MAX_ANNOUNCED: usize = 20_000;
/// The reason of the event.
pub(crate) const REASON: &str = "ShadowDiverged";
/// The reporting controller's name.
const REPORTER: &str = "wasm-ccm-shadow";

/// Publishes, every `period` until `cancel`, one Normal `ShadowDiverged` event per diverged
/// would-be write not announced yet (or changed since), on the object it is about.
pub(crate) async fn announce_divergences(
    ctx: Arc<Ctx>,
    events: Events,
    period: Duration,
    cancel: CancellationToken,
) {
    let mut announcer = Announcer::new(ctx, events);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
        if announcer.pass().await.is_none() {
            return;
        }
    }
}

/// The divergences announced so far, and one pass over the report at a time.
pub(crate) struct Announcer {
    ctx: Arc<Ctx>,
    events: Events,
    /// (kind, object, action) → the `last_changed` of the divergence announced.
    announced: HashMap<(String, String, String), String>,
}

impl Announcer {
    /// Nothing announced yet.
    pub(crate) fn new(ctx: Arc<Ctx>, events: Events) -> Self {
        Announcer {
            ctx,
            events,
            announced: HashMap::new(),
        }
    }

    /// Reads the report once and publishes an event for each divergence that is new or changed
    /// since it was announced; how many it published (`None` outside a shadow run).
    pub(crate) async fn pass(&mut self) -> Option<usize> {
        let report = self.ctx.shadow_report()?;
        if self.announced.len() > MAX_ANNOUNCED {
            self.announced.clear();
        }
        let mut published = 0;
        for d in report
            .differences
            .iter()
            .filter(|d| d.verdict == Verdict::Diverged)
        {
            let key = (d.kind.clone(), d.object.clone(), d.action.clone());
            if self.announced.get(&key) == Some(&d.last_changed) {
                continue;
            }
            let Some(regarding) = regarding(&self.ctx, d) else {
                continue;
            };
            self.events
                .publish(REPORTER, &regarding, false, REASON, &note(d), "Shadow")
                .await;
            self.announced.insert(key, d.last_changed.clone());
            published += 1;
        }
        Some(published)
    }
}

/// The object a difference is about, as the watch shows it (`None` for routes and the driver,
/// and for objects gone meanwhile).
fn regarding(ctx: &Ctx, d: &Difference) -> Option<ObjectReference> {
    match d.kind.as_str() {
        "Node" => ctx.nodes.get(&d.object).map(|n| reference(&*n)),
        "Service" => ctx.services.get(&d.object).map(|s| reference(&*s)),
        _ => None,
    }
}

/// `switching would patch-status: status.addresses` or `… would send POST https://…`.
fn note(d: &Difference) -> String {
    let what = if !d.cloud_writes.is_empty() {
        format!("send {}", d.cloud_writes.join(", "))
    } else if d.action == "delete" {
        format!("delete this {}", d.kind)
    } else {
        let paths: Vec<&str> = d.changes.iter().map(|c| c.path.as_str()).collect();
        format!("{} {}", d.action, paths.join(", "))
    };
    format!(
        "wasm-ccm in shadow mode ({}) would {what}; see its /shadow report",
        d.controller
    )
}
