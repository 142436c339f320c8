//! What the apiserver's request log shows about the Lease the processes elect a leader with:
//! renewals a holder made through injected latency (the review of 2026-11-28, §2: a leader must
//! ride out lease requests that take a good part of the renew deadline, as client-go's does),
//! and the `renewTime` each process slot writes, which shows whether `--clock-skew` reached the
//! process (libfaketime) rather than only its command line.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use wasm_ccm_sim::kube::RequestRecord;

/// The soak's lease: where the product's replicas elect their leader (the product's default).
pub(super) const LEASE_NAMESPACE: &str = "kube-system";
/// The lease's name.
pub(super) const LEASE_NAME: &str = "cloud-controller-manager";

/// A lease request delayed at least this long is latent: the review's +0.3 s per request, under
/// which the earlier renewal budget lost the lease (`2 × (GET + PUT) + retry period` past the
/// soak's 1.5 s renew deadline) and client-go's does not.
pub(crate) const LATENT_MS: u64 = 300;

/// The Lease's story as the request log tells it.
#[derive(Debug, Default)]
pub(crate) struct LeaseEvidence {
    /// The incarnation (`b#3`) whose lease write was the last one accepted.
    last_writer: Option<String>,
    /// Accepted renewals (a PUT by the incarnation whose write was the last accepted one, still
    /// naming a holder) that waited [`LATENT_MS`] or more.
    latent_renewals: u64,
    /// Latent renewals in a row by the current holder, and the most ever.
    streak: u64,
    longest_streak: u64,
    /// How often a streak reached two: a holder renewed through the latency, not just once.
    streaks_of_two: u64,
    /// Per process slot (`a`, `b`): how far ahead of the soak's clock the `renewTime` it wrote
    /// was when the soak read the write (seconds; the most of all its writes, since a write is
    /// read a little after it was made), and how many writes were read.
    ahead: BTreeMap<String, (i64, u64)>,
}

impl LeaseEvidence {
    /// Takes one logged request into account, read at `now` (the soak's clock, seconds since
    /// the Unix epoch: [`unix_now`]); `writer` is its incarnation, if it carried a soak token.
    pub(crate) fn record(&mut self, r: &RequestRecord, writer: Option<&str>, now: i64) {
        let ours = r
            .resource
            .as_deref()
            .is_some_and(|res| res.starts_with("leases"))
            && r.namespace.as_deref() == Some(LEASE_NAMESPACE)
            && r.name.as_deref() == Some(LEASE_NAME)
            && matches!(r.method.as_str(), "PUT" | "POST")
            && (200..300).contains(&r.status);
        let (true, Some(writer)) = (ours, writer) else {
            return;
        };
        let body: Value = r
            .body
            .as_deref()
            .and_then(|b| serde_json::from_str(b).ok())
            .unwrap_or(Value::Null);
        let spec = &body["spec"];
        let names_holder = spec["holderIdentity"]
            .as_str()
            .is_some_and(|h| !h.is_empty());
        let renewal =
            r.method == "PUT" && names_holder && self.last_writer.as_deref() == Some(writer);
        if renewal && r.delay_ms >= LATENT_MS {
            self.latent_renewals += 1;
            self.streak += 1;
            if self.streak == 2 {
                self.streaks_of_two += 1;
            }
            self.longest_streak = self.longest_streak.max(self.streak);
        } else {
            self.streak = 0;
        }
        self.last_writer = Some(writer.to_string());
        if let Some(renew) = spec["renewTime"].as_str().and_then(unix_seconds) {
            let slot = writer.split_once('#').map_or(writer, |(slot, _)| slot);
            let entry = self.ahead.entry(slot.to_string()).or_insert((i64::MIN, 0));
            entry.0 = entry.0.max(renew - now);
            entry.1 += 1;
        }
    }

    /// How many times a holder has renewed twice in a row through latent lease requests.
    pub(crate) fn streaks_of_two(&self) -> u64 {
        self.streaks_of_two
    }

    /// The latent renewals, for the summary.
    pub(crate) fn renewals_summary(&self) -> Value {
        json!({
            "renewals": self.latent_renewals,
            "longest_streak": self.longest_streak,
            "latent_ms": LATENT_MS,
        })
    }

    /// How far ahead of the soak's clock each slot's `renewTime` was, for the summary.
    pub(crate) fn ahead_summary(&self) -> Value {
        let slots: serde_json::Map<String, Value> = self
            .ahead
            .iter()
            .map(|(slot, (ahead, writes))| {
                (
                    slot.clone(),
                    json!({"max_seconds": ahead, "writes": writes}),
                )
            })
            .collect();
        Value::Object(slots)
    }
}

/// The soak's wall clock in seconds since the Unix epoch.
pub(crate) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Seconds since the Unix epoch of an RFC 3339 UTC timestamp as the apiserver writes a
/// `MicroTime` (`2026-11-28T16:42:01.123456Z`); the fraction is dropped. `None` for anything else.
fn unix_seconds(text: &str) -> Option<i64> {
    let (date, time) = text.strip_suffix('Z')?.split_once('T')?;
    let mut d = date.splitn(3, '-').map(str::parse::<i64>);
    let (year, month, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    let whole = time.split('.').next()?;
    let mut t = whole.splitn(3, ':').map(str::parse::<i64>);
    let (h, m, s) = (t.next()?.ok()?, t.next()?.ok()?, t.next()?.ok()?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    // Days from 1970-01-01 of a proleptic Gregorian date (the civil-from-days inverse, with
    // March as the first month so the leap day is the year's last).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3_600 + m * 60 + s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micro_times_read_as_unix_seconds() {
        assert_eq!(unix_seconds("1970-01-01T00:00:00.000000Z"), Some(0));
        // `date -u -d 2026-11-28T16:42:01Z +%s`
        assert_eq!(
            unix_seconds("2026-11-28T16:42:01.123456Z"),
            Some(1_795_884_121)
        );
        // A leap day: `date -u -d 2024-02-29T23:59:59Z +%s`
        assert_eq!(unix_seconds("2024-02-29T23:59:59Z"), Some(1_709_251_199));
        assert_eq!(unix_seconds("2026-11-28T16:42:01+01:00"), None);
        assert_eq!(unix_seconds("2026-13-28T16:42:01Z"), None);
    }

    fn write(method: &str, writer_token: &str, delay_ms: u64, renew: &str) -> RequestRecord {
        let body = json!({"spec": {"holderIdentity": writer_token, "renewTime": renew}});
        RequestRecord {
            seq: 0,
            method: method.into(),
            path: format!(
                "/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{LEASE_NAME}"
            ),
            query: String::new(),
            verb: None,
            resource: Some("leases.coordination.k8s.io".into()),
            namespace: Some(LEASE_NAMESPACE.into()),
            name: Some(LEASE_NAME.into()),
            subresource: None,
            status: if method == "POST" { 201 } else { 200 },
            content_type: None,
            body: Some(body.to_string()),
            authorization: None,
            user_agent: None,
            faulted: false,
            arrival: 0,
            delay_ms,
        }
    }

    #[test]
    fn a_streak_counts_latent_renewals_in_a_row_by_one_holder() {
        let t = "2026-11-28T16:42:01.000000Z";
        let mut e = LeaseEvidence::default();
        e.record(&write("POST", "a", 400, t), Some("a#1"), 0);
        // The take-over is not a renewal; then two latent renewals in a row.
        e.record(&write("PUT", "a", 400, t), Some("a#1"), 0);
        e.record(&write("PUT", "a", 350, t), Some("a#1"), 0);
        assert_eq!(
            (e.latent_renewals, e.longest_streak, e.streaks_of_two),
            (2, 2, 1)
        );
        // A quick renewal ends the streak; another holder's take-over too.
        e.record(&write("PUT", "a", 10, t), Some("a#1"), 0);
        e.record(&write("PUT", "a", 400, t), Some("a#1"), 0);
        e.record(&write("PUT", "b", 400, t), Some("b#1"), 0);
        e.record(&write("PUT", "b", 400, t), Some("b#1"), 0);
        assert_eq!(
            (e.latent_renewals, e.longest_streak, e.streaks_of_two),
            (4, 2, 1)
        );
        // A restarted incarnation of the same slot takes over: not a renewal.
        e.record(&write("PUT", "b", 400, t), Some("b#2"), 0);
        assert_eq!(e.streak, 0);
    }

    #[test]
    fn renew_times_ahead_of_the_clock_are_kept_per_slot() {
        let now = unix_seconds("2026-11-28T16:42:01Z").expect("time");
        let mut e = LeaseEvidence::default();
        e.record(
            &write("POST", "a", 0, "2026-11-28T16:42:00.500000Z"),
            Some("a#1"),
            now,
        );
        e.record(
            &write("PUT", "b", 0, "2026-11-28T17:41:58.000000Z"),
            Some("b#1"),
            now,
        );
        e.record(
            &write("PUT", "b", 0, "2026-11-28T17:42:00.900000Z"),
            Some("b#1"),
            now,
        );
        let s = e.ahead_summary();
        assert_eq!(s["a"]["max_seconds"], -1, "{s}");
        assert_eq!(s["b"]["max_seconds"], 3599, "{s}");
        assert_eq!(s["b"]["writes"], 2, "{s}");
    }
}
