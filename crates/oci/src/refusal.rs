//! How a policy refusal is written: one line of bounded length, whatever the registry listed.
//!
//! A registry chooses how many signatures there are and some of the text in each failure
//! (origins, certificate fields); a refusal must still fit a log line and a Kubernetes event.
//! So each candidate's reason is cut and put on one line, failures with the same reason are
//! counted instead of repeated, each unsatisfied entry shows a few of them, the list of entries
//! has a length budget, and the line always ends by saying how many candidates were checked
//! and how many were not.

use crate::limits::{MAX_CANDIDATES, MAX_SIGNATURE_MANIFESTS, Unchecked};

/// The most reasons shown for one unsatisfied entry; the others are counted.
const SHOWN_REASONS: usize = 3;
/// The most characters of one candidate's reason.
const MAX_REASON_CHARS: usize = 240;
/// The most characters of the list of unsatisfied entries; the counts come after it.
pub(crate) const MAX_FAILURES_CHARS: usize = 1200;

/// `text` on one line (control characters become spaces) and at most `max` characters.
pub(crate) fn clip(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max + 1)
        .collect();
    if out.chars().count() > max {
        out = out.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
    }
    out
}

/// Why one entry was not satisfied: `what` (e.g. `allOf[0] pubKey SHA256:…`) and each
/// candidate's (origin, reason), summarised: the same reason once with a count, at most
/// [`SHOWN_REASONS`] reasons, the rest counted.
pub(crate) fn unsatisfied(what: &str, failures: &[(String, String)]) -> String {
    if failures.is_empty() {
        return format!("{what}: no signature found");
    }
    // (first origin, reason, how many) in the order first seen.
    let mut groups: Vec<(&str, String, usize)> = Vec::new();
    for (origin, why) in failures {
        let why = clip(why, MAX_REASON_CHARS);
        match groups.iter_mut().find(|(_, w, _)| *w == why) {
            Some(group) => group.2 += 1,
            None => groups.push((origin, why, 1)),
        }
    }
    let mut shown: Vec<String> = groups
        .iter()
        .take(SHOWN_REASONS)
        .map(|(origin, why, count)| {
            let origin = clip(origin, MAX_REASON_CHARS);
            match count {
                1 => format!("{origin}: {why}"),
                n => format!("{origin} and {} more: {why}", n - 1),
            }
        })
        .collect();
    let hidden: usize = groups.iter().skip(SHOWN_REASONS).map(|g| g.2).sum();
    if hidden > 0 {
        shown.push(format!("and {hidden} more for other reasons"));
    }
    let candidates = failures.len();
    format!(
        "{what} is not satisfied by the {candidates} candidate{}: {}",
        if candidates == 1 { "" } else { "s" },
        shown.join(", ")
    )
}

/// `items` joined by `separator`, at most `budget` characters: the items that fit, then how
/// many did not.
pub(crate) fn join_bounded(items: &[String], separator: &str, budget: usize) -> String {
    let mut out = String::new();
    for (i, item) in items.iter().enumerate() {
        let sep = if i == 0 { "" } else { separator };
        let room = budget.saturating_sub(out.chars().count() + sep.chars().count());
        if item.chars().count() <= room || i == 0 {
            out.push_str(sep);
            out.push_str(&clip(item, room.max(1)));
            continue;
        }
        let left = items.len() - i;
        out.push_str(&format!(
            "{separator}and {left} more {} not satisfied",
            if left == 1 { "entry" } else { "entries" }
        ));
        break;
    }
    out
}

/// `64 signature candidates checked, 936 more not checked (…)`: what was and was not checked.
pub(crate) fn counts(checked: usize, unchecked: Unchecked) -> String {
    let checked_text = format!(
        "{checked} signature candidate{} checked",
        if checked == 1 { "" } else { "s" }
    );
    if unchecked.is_none() {
        return format!("{checked_text}, none left unchecked");
    }
    let manifests = match unchecked.manifests {
        0 => String::new(),
        1 => ", and 1 signature manifest not read".to_string(),
        n => format!(", and {n} signature manifests not read"),
    };
    format!(
        "{checked_text}, {} more not checked{manifests} (at most {MAX_CANDIDATES} signatures and {MAX_SIGNATURE_MANIFESTS} signature manifests are read per driver; `cosign clean` removes old signatures, then sign again)",
        unchecked.candidates
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_keeps_one_line_and_the_bound() {
        assert_eq!(clip("a\nb\r\tc", 10), "a b  c");
        assert_eq!(clip(&"é".repeat(20), 5), "éééé…");
        assert_eq!(clip("short", 5), "short");
    }

    #[test]
    fn the_same_reason_is_counted_not_repeated() {
        let failures: Vec<(String, String)> = (0..100)
            .map(|i| (format!("layer {i}"), "signed by another key".to_string()))
            .chain([("layer 100".to_string(), "not base64".to_string())])
            .collect();
        assert_eq!(
            unsatisfied("allOf[0] k", &failures),
            "allOf[0] k is not satisfied by the 101 candidates: layer 0 and 99 more: signed by another key, layer 100: not base64"
        );
        let varied: Vec<(String, String)> = (0..10)
            .map(|i| (format!("layer {i}"), format!("reason {i}")))
            .collect();
        assert!(
            unsatisfied("x", &varied).ends_with("layer 2: reason 2, and 7 more for other reasons"),
            "{}",
            unsatisfied("x", &varied)
        );
    }

    #[test]
    fn entries_past_the_budget_are_counted() {
        let items: Vec<String> = (0..5)
            .map(|i| format!("entry {i} {}", "x".repeat(40)))
            .collect();
        let joined = join_bounded(&items, "; ", 100);
        assert!(
            joined.ends_with("; and 3 more entries not satisfied"),
            "{joined}"
        );
        assert!(joined.starts_with("entry 0"), "{joined}");
    }
}
