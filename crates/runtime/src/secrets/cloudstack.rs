//! CloudStack's request signature, computed by the host (`secret-use.cloudstack-signature`): the
//! driver builds its command's parameters with the `apiKey` placeholder, `signatureversion=3`
//! and an `expires` time; the host substitutes the key, removes any `signature` the driver sent
//! and appends its own. The secret key never enters the guest, and a signature is never handed
//! to it either (a signature with `expires` is itself a credential for 15 minutes).
//!
//! The algorithm is the management server's check (`ApiServer.verifyRequest`): every parameter
//! but `signature`, sorted by name, `name=value` with the value encoded as Java's `URLEncoder`
//! does with `%20` for a space, joined by `&`, lower-cased, HMAC-SHA1 with the secret key,
//! standard Base64.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha1::Sha1;

/// The longest an `expires` may lie ahead: what cloudstack-go and this project's driver use, and
/// the bound the design gives replayable requests.
pub(crate) const MAX_EXPIRES_AHEAD_SECS: i64 = 15 * 60;

/// Clock skew tolerated for an `expires` already in the past by the host's clock: none. A
/// request that has expired is refused by the server too, so signing it helps nobody.
const MAX_EXPIRED_SECS: i64 = 0;

/// Java's `URLEncoder` with `%20` for a space: letters, digits, `-`, `_`, `.` and `*` stay.
pub fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 8);
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                out.push(b as char)
            }
            _ => {
                out.push('%');
                out.push(HEX[usize::from(b >> 4)] as char);
                out.push(HEX[usize::from(b & 15)] as char);
            }
        }
    }
    out
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// The text that is signed: `params` without `signature`, sorted by name as Java's
/// `Arrays.sort` does on the server (case-sensitive, byte order; stable for repeated names),
/// encoded, joined, lower-cased.
pub fn string_to_sign(params: &[(String, String)]) -> String {
    let mut sorted: Vec<&(String, String)> = params
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case("signature"))
        .collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut text = String::new();
    for (i, (k, v)) in sorted.iter().enumerate() {
        if i > 0 {
            text.push('&');
        }
        text.push_str(k);
        text.push('=');
        text.push_str(&encode(v));
    }
    text.to_lowercase()
}

/// The Base64 HMAC-SHA1 signature of `params` with `secret_key`.
pub fn signature(params: &[(String, String)], secret_key: &[u8]) -> String {
    // HMAC takes keys of any length, so this cannot fail; the fallback keeps the function total.
    let Ok(mut mac) = Hmac::<Sha1>::new_from_slice(secret_key) else {
        return String::new();
    };
    mac.update(string_to_sign(params).as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// Checks that a request to be signed bounds its own replay: `signatureversion=3` and an
/// `expires` no further ahead than [`MAX_EXPIRES_AHEAD_SECS`] from `now_unix`. The error says
/// what to send instead.
pub(crate) fn check_expiry(params: &[(String, String)], now_unix: i64) -> Result<(), String> {
    let value = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    if value("signatureversion") != Some("3") {
        return Err(
            "a CloudStack request the host signs must carry signatureversion=3 and an expires time \
             at most 15 minutes ahead"
                .into(),
        );
    }
    let Some(expires) = value("expires") else {
        return Err("a CloudStack request the host signs must carry an expires time (yyyy-MM-ddTHH:mm:ss+0000) at most 15 minutes ahead".into());
    };
    let Some(at) = parse_cs_date(expires) else {
        return Err(format!(
            "expires {:?} is not a CloudStack date such as 2026-01-02T03:04:05+0000",
            crate::text::cut(expires, 64)
        ));
    };
    if at < now_unix - MAX_EXPIRED_SECS {
        return Err("expires lies in the past; send a time at most 15 minutes ahead".into());
    }
    if at > now_unix + MAX_EXPIRES_AHEAD_SECS {
        return Err(format!(
            "expires lies {} s ahead, more than the {MAX_EXPIRES_AHEAD_SECS} s the host signs for",
            at - now_unix
        ));
    }
    Ok(())
}

/// Unix seconds of CloudStack's `yyyy-MM-dd'T'HH:mm:ssZ` with a numeric offset (`+0000`,
/// `+05:30`) or `Z`.
fn parse_cs_date(text: &str) -> Option<i64> {
    let ts = jiff::Timestamp::strptime("%Y-%m-%dT%H:%M:%S%z", text)
        .or_else(|_| jiff::Timestamp::strptime("%Y-%m-%dT%H:%M:%S%:z", text))
        .or_else(|_| text.parse::<jiff::Timestamp>())
        .ok()?;
    Some(ts.as_second())
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

    /// The whole signer (sorting, encoding, lower-casing, HMAC-SHA1, Base64) against values
    /// computed independently with Python's `hmac` and `base64` over the canonical text that
    /// CloudStack's documentation describes (`hmac.new(b"Jefe", b"command=listzones&response=json",
    /// hashlib.sha1)`), so a fault in any step fails here, not only one in the HMAC crate.
    #[test]
    fn the_signer_matches_an_independent_hmac_sha1() {
        let two = p(&[("response", "json"), ("command", "listZones")]);
        assert_eq!(signature(&two, b"Jefe"), "1PqVFBFNnovKdQNOi9dCvDfy1qQ=");
        let three = p(&[("name", "Z 1"), ("command", "listZones"), ("apiKey", "AbC")]);
        assert_eq!(
            string_to_sign(&three),
            "apikey=abc&command=listzones&name=z%201"
        );
        assert_eq!(signature(&three, b"Jefe"), "rAcn1mSEdX2whETGHZaAwWktDCU=");
        // A driver's own `signature` parameter is not signed over.
        let mut signed = three.clone();
        signed.push(("signature".into(), "forged".into()));
        assert_eq!(signature(&signed, b"Jefe"), "rAcn1mSEdX2whETGHZaAwWktDCU=");
    }

    /// The driver's own vector (drivers/cloudstack/src/sign.rs), so that the host signs exactly
    /// as the driver did before it moved here.
    #[test]
    fn the_signature_is_over_the_sorted_lowercased_text_without_signature() {
        let params = p(&[
            ("command", "listZones"),
            ("apiKey", "AbC"),
            ("name", "Z 1"),
            ("signature", "ignored"),
        ]);
        assert_eq!(
            string_to_sign(&params),
            "apikey=abc&command=listzones&name=z%201"
        );
        let without = p(&[("command", "listZones"), ("apiKey", "AbC"), ("name", "Z 1")]);
        assert_eq!(
            signature(&params, b"s3cret"),
            signature(&without, b"s3cret")
        );
    }

    #[test]
    fn expiry_must_be_version_3_and_at_most_15_minutes_ahead() {
        let now = 1_767_323_045; // 2026-01-02T03:04:05Z
        let ok = p(&[
            ("signatureversion", "3"),
            ("expires", "2026-01-02T03:14:05+0000"),
        ]);
        assert_eq!(check_expiry(&ok, now), Ok(()));
        let far = p(&[
            ("signatureversion", "3"),
            ("expires", "2026-01-02T04:04:05+0000"),
        ]);
        assert!(check_expiry(&far, now).is_err_and(|e| e.contains("ahead")));
        let past = p(&[
            ("signatureversion", "3"),
            ("expires", "2026-01-02T03:04:04+0000"),
        ]);
        assert!(check_expiry(&past, now).is_err_and(|e| e.contains("past")));
        let v2 = p(&[("expires", "2026-01-02T03:14:05+0000")]);
        assert!(check_expiry(&v2, now).is_err_and(|e| e.contains("signatureversion=3")));
        let bad = p(&[("signatureversion", "3"), ("expires", "tomorrow")]);
        assert!(check_expiry(&bad, now).is_err_and(|e| e.contains("not a CloudStack date")));
    }
}
