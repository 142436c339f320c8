//! Keeping secret values out of what reaches the guest (responses) and out of what the host
//! writes (the redactor's list): every value with the encodings a server or a log could give it
//! back in. One Aho-Corasick pass replaces them all.

use aho_corasick::{AhoCorasick, MatchKind};
use base64::Engine as _;

/// Values shorter than this are not scrubbed from responses: a short credential would blank
/// ordinary text (the outside review's `redact("info")`), and no cloud issues one.
pub const MIN_SCRUBBED_BYTES: usize = 8;

/// The forms in which `value` may come back: raw, Base64 (standard and URL-safe, at each of the
/// three alignments inside a longer text, padding trimmed), percent-encoded (both hex cases,
/// `+` or `%20` for a space) and JSON-escaped. Each at least [`MIN_SCRUBBED_BYTES`] long.
pub fn encodings(value: &str) -> Vec<String> {
    let mut out = vec![value.to_string()];
    let bytes = value.as_bytes();
    for engine in [
        &base64::engine::general_purpose::STANDARD_NO_PAD,
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ] {
        for offset in 0..3usize {
            out.push(aligned_base64(engine, bytes, offset));
        }
    }
    let percent_upper = percent(bytes);
    out.push(percent_upper.to_lowercase_hex());
    out.push(percent_upper.0.replace("%20", "+"));
    out.push(percent_upper.0);
    if let Ok(json) = serde_json::to_string(value) {
        let inner = &json[1..json.len() - 1];
        // JSON may also escape `/` (many servers do).
        out.push(inner.replace('/', "\\/"));
        out.push(inner.to_string());
    }
    out.retain(|e| e.len() >= MIN_SCRUBBED_BYTES);
    out.sort();
    out.dedup();
    out
}

/// The Base64 characters that depend only on `value` when it starts `offset` bytes into a
/// longer encoded text: encode behind `offset` filler bytes, drop the characters the filler
/// touches, and the last one when the unknown bytes that follow would touch it.
fn aligned_base64(engine: &base64::engine::GeneralPurpose, value: &[u8], offset: usize) -> String {
    let mut input = vec![0u8; offset];
    input.extend_from_slice(value);
    let text = engine.encode(&input);
    // Characters 0..skip carry filler bits: 4 bits of a filler byte reach into ceil(8*offset/6).
    let skip = (offset * 8).div_ceil(6);
    let whole = (input.len() * 8) / 6; // characters made of known bits only
    text.get(skip..whole).unwrap_or_default().to_string()
}

/// Percent-encoding of every byte but unreserved ones (RFC 3986), upper-case hex.
struct Percent(String);

impl Percent {
    fn to_lowercase_hex(&self) -> String {
        let mut out = String::with_capacity(self.0.len());
        let mut hex_left = 0;
        for c in self.0.chars() {
            if c == '%' {
                hex_left = 2;
                out.push(c);
            } else if hex_left > 0 {
                hex_left -= 1;
                out.push(c.to_ascii_lowercase());
            } else {
                out.push(c);
            }
        }
        out
    }
}

fn percent(bytes: &[u8]) -> Percent {
    let mut out = String::with_capacity(bytes.len() * 3);
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Percent(out)
}

/// Replaces each of a set of texts by its own replacement, in one pass.
pub struct Scrubber {
    automaton: Option<AhoCorasick>,
    replacements: Vec<String>,
}

impl Scrubber {
    /// A scrubber for `(value, replacement)` pairs; every encoding of a value is replaced by the
    /// value's replacement.
    pub fn new<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut patterns = Vec::new();
        let mut replacements = Vec::new();
        for (value, replacement) in pairs {
            if value.len() < MIN_SCRUBBED_BYTES {
                continue;
            }
            for form in encodings(value) {
                patterns.push(form);
                replacements.push(replacement.to_string());
            }
        }
        let automaton = (!patterns.is_empty())
            .then(|| {
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(&patterns)
                    .ok()
            })
            .flatten();
        Scrubber {
            automaton,
            replacements,
        }
    }

    /// Whether the scrubber replaces nothing.
    pub fn is_empty(&self) -> bool {
        self.automaton.is_none()
    }

    /// `bytes` with every known form replaced; `None` when nothing was found (no copy made).
    pub fn scrub(&self, bytes: &[u8]) -> Option<Vec<u8>> {
        let automaton = self.automaton.as_ref()?;
        if !automaton.is_match(bytes) {
            return None;
        }
        Some(automaton.replace_all_bytes(bytes, &self.replacements))
    }

    /// `text` with every known form replaced.
    pub fn scrub_str(&self, text: &str) -> Option<String> {
        self.scrub(text.as_bytes())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "s3cr3t/key+with space";

    #[test]
    fn every_encoding_at_every_alignment_is_replaced() {
        let scrubber = Scrubber::new([(SECRET, "[P]")]);
        for prefix in ["", "x", "xy", "xyz"] {
            let text = format!("{prefix}{SECRET}:tail");
            for engine in [
                &base64::engine::general_purpose::STANDARD,
                &base64::engine::general_purpose::URL_SAFE,
            ] {
                let encoded = engine.encode(&text);
                let scrubbed = scrubber.scrub_str(&encoded).unwrap_or_default();
                assert!(
                    scrubbed.contains("[P]"),
                    "{prefix:?}: {encoded} -> {scrubbed}"
                );
            }
        }
        for form in [
            "s3cr3t%2Fkey%2Bwith%20space",
            "s3cr3t%2fkey%2bwith%20space",
            "s3cr3t%2Fkey%2Bwith+space",
            "s3cr3t\\/key+with space",
        ] {
            let scrubbed = scrubber.scrub_str(&format!("a {form} b"));
            assert_eq!(scrubbed.as_deref(), Some("a [P] b"), "{form}");
        }
        let raw = scrubber.scrub_str(&format!("{{\"v\":\"{SECRET}\"}}"));
        assert_eq!(raw.as_deref(), Some("{\"v\":\"[P]\"}"));
    }

    #[test]
    fn clean_text_is_not_copied_and_short_values_are_ignored() {
        let scrubber = Scrubber::new([(SECRET, "[P]"), ("short", "[S]")]);
        assert_eq!(scrubber.scrub(b"nothing here, short"), None);
        assert!(Scrubber::new([("short", "[S]")]).is_empty());
    }
}
