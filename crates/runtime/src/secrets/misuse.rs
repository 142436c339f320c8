//! How often a driver put a placeholder where its declaration does not allow, by secret and
//! reason (conformance's `provider/credentials`, the misuse metric). A leaf.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Refused placements by secret and reason; bounded by the driver's declared secrets (at most
/// 16 names, plus one for sealed tokens) times three reasons.
#[derive(Default)]
pub(crate) struct MisuseCounters(Mutex<BTreeMap<(String, &'static str), u64>>);

impl MisuseCounters {
    pub(super) fn count(&self, secret: &str, reason: &'static str) {
        if let Ok(mut m) = self.0.lock() {
            *m.entry((secret.to_string(), reason)).or_default() += 1;
        }
    }

    pub(crate) fn snapshot(&self) -> Vec<((String, &'static str), u64)> {
        self.0
            .lock()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), *v)).collect())
            .unwrap_or_default()
    }
}
