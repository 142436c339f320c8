//! The parts of CloudStack's request signing the driver still does: the query text (sorted,
//! encoded as the management server re-encodes it) and the `expires` time. The signature itself
//! is the host's (`secret-use.cloudstack-signature`, `crates/runtime/src/secrets/cloudstack.rs`):
//! the driver never holds the secret key, and sends `signatureversion=3` with an `expires` so
//! that the host signs a request whose replay is bounded to 15 minutes.

/// How long a signed request stays valid (cloudstack-go uses the same).
pub const EXPIRES_AFTER_SECS: u64 = 15 * 60;

/// Percent-encodes a value as the management server does when it checks a signature (Java's
/// `URLEncoder` with `%20` for a space): letters, digits, `-`, `_`, `.` and `*` stay; `~` is
/// escaped, unlike in Go's encoder, so a value with `~` still verifies.
pub fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// `name=value&…` in name order, values encoded; the same string is the GET query and the POST
/// body (before the signature is added).
pub fn canonical_query(params: &[(String, String)]) -> String {
    let mut sorted: Vec<&(String, String)> = params.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    sorted
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Unix seconds as CloudStack's date format in UTC, `yyyy-MM-dd'T'HH:mm:ssZ` with a numeric
/// offset, e.g. `2026-01-02T03:04:05+0000` (the civil-from-days algorithm, so the guest needs no
/// date library). The API guide documents this form for `expires` (`2011-10-10T12:00:00+0530`),
/// and older `DateUtil.parseTZDateString` accepts only a numeric offset, not `Z`; every version
/// parses `+0000`.
pub fn cs_date(unix_secs: u64) -> String {
    let days = (unix_secs / 86_400) as i64;
    let secs = unix_secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}+0000",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn encoding_is_javas() {
        assert_eq!(encode("a b*c~d/e+f=g,h"), "a%20b*c%7Ed%2Fe%2Bf%3Dg%2Ch");
        assert_eq!(encode("ä"), "%C3%A4");
    }

    #[test]
    fn canonical_form_is_sorted() {
        let q = canonical_query(&p(&[
            ("response", "json"),
            ("command", "listZones"),
            ("apiKey", "K y"),
        ]));
        assert_eq!(q, "apiKey=K%20y&command=listZones&response=json");
    }

    #[test]
    fn dates() {
        assert_eq!(cs_date(0), "1970-01-01T00:00:00+0000");
        assert_eq!(cs_date(1_767_323_045), "2026-01-02T03:04:05+0000");
        assert_eq!(cs_date(951_782_400), "2000-02-29T00:00:00+0000");
    }
}
