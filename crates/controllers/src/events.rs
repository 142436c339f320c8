//! Events: the recorders (one per upstream reporter name and note, cut to the apiserver's
//! limits, silent in a shadow run) and the refusal memory, which keeps a resync that repeats the
//! same refused answer, or the same unowned node, from repeating the same event.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use wasm_ccm_runtime::{DriverEvent, EventKind};

use crate::answer_rules::{
    EVENT_ACTION_LIMIT, EVENT_NOTE_LIMIT, EVENT_REASON_LIMIT, EVENT_REPORTING_INSTANCE_LIMIT,
    REPLACEMENT_EVENT_REASON, Violation, check_event_reason, cut_to_bytes, shown,
};
use crate::metrics::Metrics;

/// Event recorders, one per upstream reporter name.
pub struct Events {
    /// Each reporter's client: its own ServiceAccount's with per-controller credentials, as
    /// upstream's controllers record through their own clientset.
    clients: crate::clients::ControllerClients,
    instance: String,
    /// One recorder per (controller, note). kube-rs' `Recorder` deduplicates events by a key
    /// without the note (client-go's includes it), so a second event with the same reason but a
    /// different message would only bump the first one's series count and the new message would
    /// be lost. A recorder per note restores client-go's behaviour.
    recorders: std::sync::Mutex<std::collections::HashMap<(&'static str, String), Recorder>>,
    /// A shadow run publishes nothing: events are writes, and beside the CCM in charge they
    /// would confuse `kubectl describe`.
    silent: bool,
    /// With several drivers, every note starts with `driver <name>: `, so `kubectl describe`
    /// says which driver acted (the reporting controller keeps upstream's name).
    driver: Option<String>,
}

/// Recorders kept before the map is cleared (each is a client handle and a tiny cache; clearing
/// only means the next repeat of an event starts a new series).
const MAX_RECORDERS: usize = 1024;

impl Events {
    /// Recorders for `instance` (the leader-election identity), cut to the apiserver's 128 bytes
    /// for `reportingInstance`.
    pub fn new(client: Client, instance: String) -> Self {
        Events::for_controllers(client.into(), instance)
    }

    /// [`Events::new`] whose recorders publish through each reporter's client.
    pub fn for_controllers(clients: crate::clients::ControllerClients, instance: String) -> Self {
        Events {
            clients,
            instance: cut_to_bytes(&instance, EVENT_REPORTING_INSTANCE_LIMIT).to_string(),
            recorders: Default::default(),
            silent: false,
            driver: None,
        }
    }

    /// Recorders that publish nothing (a shadow run).
    pub fn silenced(mut self, silent: bool) -> Self {
        self.silent = silent;
        self
    }

    /// Events whose notes name `driver` (`None`: as they are, with one driver).
    pub(crate) fn for_driver(mut self, driver: Option<String>) -> Self {
        self.driver = driver;
        self
    }

    fn recorder(&self, controller: &'static str, note: &str) -> Recorder {
        let mut map = self.recorders.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_RECORDERS {
            map.clear();
        }
        map.entry((controller, note.to_string()))
            .or_insert_with(|| {
                Recorder::new(
                    self.clients.for_controller(controller),
                    Reporter {
                        controller: controller.to_string(),
                        instance: Some(self.instance.clone()),
                    },
                )
            })
            .clone()
    }

    /// Publishes an event; failures are logged, never fatal (events are best effort). Reason and
    /// action are cut to 128 bytes and the note to 1024 bytes, on a character boundary: the
    /// apiserver counts bytes (`legacyValidateEvent`) and refuses a longer event with a 422.
    pub async fn publish(
        &self,
        controller: &'static str,
        regarding: &ObjectReference,
        warning: bool,
        reason: &str,
        note: &str,
        action: &str,
    ) {
        if self.silent {
            tracing::debug!(reason, "shadow: event not published");
            return;
        }
        let named;
        let note = match &self.driver {
            Some(driver) => {
                named = format!("driver {driver}: {note}");
                named.as_str()
            }
            None => note,
        };
        let reason = match cut_to_bytes(reason, EVENT_REASON_LIMIT) {
            "" => REPLACEMENT_EVENT_REASON,
            r => r,
        };
        let action = match cut_to_bytes(action, EVENT_ACTION_LIMIT) {
            "" => "Unknown",
            a => a,
        };
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: Some(cut_to_bytes(note, EVENT_NOTE_LIMIT).to_string()),
            action: action.to_string(),
            secondary: None,
        };
        let recorder = self.recorder(controller, event.note.as_deref().unwrap_or_default());
        if let Err(e) = recorder.publish(&event, regarding).await {
            tracing::warn!(reason, error = %e, "could not record event");
        }
    }

    /// Publishes the events a driver recorded during a call on `regarding`. A reason that is not
    /// UpperCamelCase of at most 128 bytes is replaced by [`REPLACEMENT_EVENT_REASON`] (the note
    /// says so); the refusals are returned for counting.
    pub(crate) async fn publish_driver_events(
        &self,
        controller: &'static str,
        regarding: &ObjectReference,
        events: &[DriverEvent],
    ) -> Vec<Violation> {
        let mut refused = Vec::new();
        for e in events {
            let (reason, note) = match check_event_reason(&e.reason) {
                Ok(()) => (e.reason.as_str(), e.message.clone()),
                Err(v) => {
                    let note = format!(
                        "(the driver's reason {} was refused: not UpperCamelCase of at most {EVENT_REASON_LIMIT} bytes) {}",
                        shown(&e.reason),
                        e.message
                    );
                    refused.push(v);
                    (REPLACEMENT_EVENT_REASON, note)
                }
            };
            self.publish(
                controller,
                regarding,
                e.kind == EventKind::Warning,
                reason,
                &note,
                "Driver",
            )
            .await;
        }
        refused
    }
}

/// Reason of the Warning event recording that part of a driver's answer was refused.
pub(crate) const ANSWER_REFUSED_REASON: &str = "DriverAnswerRefused";

/// Entries kept per memory below before it is cleared (clearing only means an event repeats).
const MAX_REMEMBERED: usize = 10_000;

/// What the refusal reports already said, so a resync repeating the same answer does not
/// repeat the same event.
#[derive(Default)]
pub(crate) struct Refusals {
    /// Object UID (or key) → a digest of the last refusal note published for it.
    last_note: std::sync::Mutex<std::collections::HashMap<String, u64>>,
    /// Foreign nodes already reported (UID and provider ID).
    foreign: std::sync::Mutex<std::collections::HashSet<String>>,
}

fn object_key(regarding: &ObjectReference) -> String {
    regarding.uid.clone().unwrap_or_else(|| {
        format!(
            "{}/{}/{}",
            regarding.kind.as_deref().unwrap_or_default(),
            regarding.namespace.as_deref().unwrap_or_default(),
            regarding.name.as_deref().unwrap_or_default()
        )
    })
}

/// The object reference events point at.
pub(crate) fn reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    obj.object_ref(&())
}

impl Refusals {
    /// Whether `note` about `regarding` is news: not the note last published for it. Records it
    /// as the last one.
    pub(crate) fn is_news(&self, regarding: &ObjectReference, note: &str) -> bool {
        let mut last = self.last_note.lock().unwrap_or_else(|p| p.into_inner());
        if last.len() >= MAX_REMEMBERED {
            last.clear();
        }
        let key = object_key(regarding);
        // A digest, not the note: notes can be long and up to MAX_REMEMBERED are kept.
        let digest = note_digest(note);
        if last.get(&key) == Some(&digest) {
            return false;
        }
        last.insert(key, digest);
        true
    }

    /// Forgets what was reported about `regarding` (a later refusal is news again).
    pub(crate) fn forget(&self, regarding: &ObjectReference) {
        self.last_note
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&object_key(regarding));
    }

    /// Whether the unowned node `key` (its UID, provider ID and reason) is seen for the first
    /// time; records it.
    pub(crate) fn first_unowned(&self, key: String) -> bool {
        let mut seen = self.foreign.lock().unwrap_or_else(|p| p.into_inner());
        if seen.len() >= MAX_REMEMBERED {
            seen.clear();
        }
        seen.insert(key)
    }
}

/// Counts a refused part of `driver`'s `function` answer about `regarding` and logs it.
pub(crate) fn count_refusal(
    metrics: &Metrics,
    driver: &str,
    function: &str,
    regarding: &ObjectReference,
    v: &Violation,
) {
    metrics.inc(
        "wasm_ccm_driver_answers_refused_total",
        &[("rule", v.rule.name())],
    );
    tracing::warn!(
        driver = %driver,
        function,
        object = %regarding.name.as_deref().unwrap_or_default(),
        rule = v.rule.name(),
        detail = %v.detail,
        "driver answer refused"
    );
}

/// The note of the Warning event on refused parts of `driver`'s `function` answer: the rules
/// first (the details may be cut at the apiserver's 1024 bytes), then each refusal.
pub(crate) fn refusal_note(driver: &str, function: &str, violations: &[Violation]) -> String {
    let mut rules: Vec<&str> = Vec::new();
    for v in violations {
        if !rules.contains(&v.rule.name()) {
            rules.push(v.rule.name());
        }
    }
    format!(
        "driver {} answered {function} with parts that were not written (rules: {}): {}",
        shown(driver),
        rules.join(", "),
        violations
            .iter()
            .map(Violation::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    )
}

/// A 64-bit digest of an event note, to tell a repeated refusal from a new one.
fn note_digest(note: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    note.hash(&mut h);
    h.finish()
}
