//! Request signatures, verified the way the management server does: every parameter except
//! `signature`, sorted by name (byte order, as sent), `name=value` with the value
//! percent-encoded, joined by `&`, lowercased, HMAC-SHA1 with the account's secret key, standard
//! Base64. With `signatureversion=3`, `expires` must be present, parse and lie in the future.
//!
//! CloudStack encodes with Java's `URLEncoder` (`*` kept, `~` escaped) while Go clients leave
//! `~` alone, so a signature is accepted under either encoding; the two differ only for values
//! holding `~`.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha1::Sha1;

use super::params::Params;

/// Which percent-encoding a client used for the string it signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// RFC 3986 unreserved characters and `*` stay; what Go clients (cloudstack-go) send.
    Go,
    /// Java's `URLEncoder` with `+` turned into `%20`: `~` is escaped; what the server uses.
    Java,
}

/// Why a request is refused; every reason answers the same 401, the reason is only logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    MissingApiKey,
    UnknownApiKey,
    MissingSignature,
    MissingExpires,
    BadExpires(String),
    Expired(String),
    BadSignature,
}

/// Percent-encodes `value` as `encoding` does; a space is `%20`, hex digits are uppercase.
pub fn encode(value: &str, encoding: Encoding) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        let keep = b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'_' | b'.' | b'*')
            || (b == b'~' && encoding == Encoding::Go);
        if keep {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The string that is signed: `pairs` without `signature` (any case), sorted by name, values
/// encoded, lowercased.
pub fn string_to_sign<'a>(
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    encoding: Encoding,
) -> String {
    let mut sorted: Vec<(&str, &str)> = pairs
        .into_iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case("signature"))
        .collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    sorted
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v, encoding)))
        .collect::<Vec<_>>()
        .join("&")
        .to_lowercase()
}

/// The Base64 HMAC-SHA1 signature of `pairs` (a `signature` among them is skipped), as a client
/// computes it.
pub fn sign<'a>(
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    secret_key: &str,
    encoding: Encoding,
) -> String {
    hmac_base64(&string_to_sign(pairs, encoding), secret_key)
}

/// Base64 of HMAC-SHA1(`key`, `text`).
fn hmac_base64(text: &str, key: &str) -> String {
    match Hmac::<Sha1>::new_from_slice(key.as_bytes()) {
        Ok(mut mac) => {
            mac.update(text.as_bytes());
            base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
        }
        // HMAC accepts keys of every length; an empty string never matches a signature.
        Err(_) => String::new(),
    }
}

/// Parses `expires`: RFC 3339 (`2026-01-02T03:04:05Z`, `+00:00`) or with a `+0000` offset, as
/// CloudStack's `DateUtil.parseTZDateString` accepts.
pub(crate) fn parse_expires(text: &str) -> Option<jiff::Timestamp> {
    if let Ok(ts) = text.parse::<jiff::Timestamp>() {
        return Some(ts);
    }
    jiff::fmt::strtime::parse("%Y-%m-%dT%H:%M:%S%z", text)
        .ok()?
        .to_timestamp()
        .ok()
}

/// Checks a request's key, expiry and signature against the account's credentials.
pub(crate) fn verify(
    params: &Params,
    api_key: &str,
    secret_key: &str,
    now: jiff::Timestamp,
) -> Result<(), Refusal> {
    let key = params.get("apiKey").ok_or(Refusal::MissingApiKey)?;
    let received = params.get("signature").ok_or(Refusal::MissingSignature)?;
    if params.get("signatureversion") == Some("3") {
        let expires = params.get("expires").ok_or(Refusal::MissingExpires)?;
        let at = parse_expires(expires).ok_or_else(|| Refusal::BadExpires(expires.into()))?;
        if at < now {
            return Err(Refusal::Expired(expires.into()));
        }
    }
    if key != api_key {
        return Err(Refusal::UnknownApiKey);
    }
    // A raw Base64 signature in a query decodes `+` to a space; put it back.
    let received = received.replace(' ', "+");
    let matches = [Encoding::Go, Encoding::Java]
        .into_iter()
        .any(|e| sign(params.pairs(), secret_key, e) == received);
    if matches {
        Ok(())
    } else {
        Err(Refusal::BadSignature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_differ_only_in_tilde() {
        assert_eq!(
            encode("a b*c~d/e+f=g,h", Encoding::Go),
            "a%20b*c~d%2Fe%2Bf%3Dg%2Ch"
        );
        assert_eq!(
            encode("a b*c~d/e+f=g,h", Encoding::Java),
            "a%20b*c%7Ed%2Fe%2Bf%3Dg%2Ch"
        );
        assert_eq!(encode("ä", Encoding::Go), "%C3%A4");
    }

    #[test]
    fn the_signed_string_is_sorted_by_name_as_sent_and_lowercased() {
        let pairs = [
            ("response", "json"),
            ("command", "listZones"),
            ("apiKey", "K y"),
            ("signature", "ignored"),
        ];
        assert_eq!(
            string_to_sign(pairs, Encoding::Go),
            "apikey=k%20y&command=listzones&response=json"
        );
    }

    /// RFC 2202's second HMAC-SHA1 test case, in Base64.
    #[test]
    fn hmac_sha1_vector() {
        assert_eq!(
            hmac_base64("what do ya want for nothing?", "Jefe"),
            "7/zfauXrL6LSdBbV8YTfnCWafHk="
        );
    }

    #[test]
    fn expiry_formats() {
        let want: jiff::Timestamp = "2026-01-02T03:04:05Z".parse().expect("timestamp");
        for text in [
            "2026-01-02T03:04:05Z",
            "2026-01-02T03:04:05+00:00",
            "2026-01-02T03:04:05+0000",
            "2026-01-02T04:04:05+0100",
        ] {
            assert_eq!(parse_expires(text), Some(want), "{text}");
        }
        assert_eq!(parse_expires("tomorrow"), None);
    }
}
