//! What a driver can recover from a response: the body read through every decoding a guest
//! could apply (gzip, Base64 runs at any offset, percent, HTML/XML references, JSON escapes,
//! hex, UTF-16), nested up to three deep. Written with the crates a driver author would use,
//! independently of the host's scanner, so that a gap in the host shows here.

use base64::Engine as _;

/// Whether `canary` can be recovered from `body` by any chain of the decodings below.
pub(crate) fn recovers(body: &[u8], canary: &str) -> bool {
    if canary.is_empty() {
        return false;
    }
    let mut frontier = vec![body.to_vec()];
    let mut seen = 0usize;
    for _depth in 0..=3 {
        let mut next: Vec<Vec<u8>> = Vec::new();
        let mut held = 0usize;
        for text in &frontier {
            if contains(text, canary.as_bytes()) {
                return true;
            }
            seen += 1;
            if seen > 4096 {
                return false;
            }
            // The guest has 64 MiB: the next level keeps at most 8 MiB of texts.
            for d in decodings(text) {
                if held + d.len() <= 8 << 20 {
                    held += d.len();
                    next.push(d);
                }
            }
        }
        frontier = next;
    }
    frontier.iter().any(|t| contains(t, canary.as_bytes()))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// Each decoding of `text` that changes it.
fn decodings(text: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut push = |d: Vec<u8>| {
        if d != text && !d.is_empty() {
            out.push(d);
        }
    };
    push(gunzip(text).unwrap_or_default());
    push(percent_encoding::percent_decode(text).collect());
    let plus: Vec<u8> = text
        .iter()
        .map(|&b| if b == b'+' { b' ' } else { b })
        .collect();
    push(percent_encoding::percent_decode(&plus).collect());
    let lossy = String::from_utf8_lossy(text);
    push(entities(&lossy).into_bytes());
    push(json_unescape(&lossy).into_bytes());
    push(base64_runs(&lossy));
    push(hex_runs(&lossy));
    for skip in 0..2 {
        let units: Vec<u16> = text
            .get(skip..)
            .unwrap_or_default()
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        push(String::from_utf16_lossy(&units).into_bytes());
    }
    out
}

/// A gzip member (RFC 1952) with a plain header, inflated.
fn gunzip(text: &[u8]) -> Option<Vec<u8>> {
    if text.len() < 18 || text[0] != 0x1f || text[1] != 0x8b || text[2] != 8 || text[3] != 0 {
        return None;
    }
    miniz_oxide::inflate::decompress_to_vec(&text[10..]).ok()
}

/// HTML/XML references: the five named ones and numeric ones.
fn entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let end = tail.find(';').filter(|&e| e <= 10);
        let decoded = end.and_then(|e| {
            let name = &tail[1..e];
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                _ => {
                    let num = name.strip_prefix('#')?;
                    let value = match num.strip_prefix(['x', 'X']) {
                        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                        None => num.parse().ok()?,
                    };
                    char::from_u32(value)
                }
            }?;
            Some((c, e + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &tail[len..];
            }
            None => {
                out.push('&');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// JSON string escapes, read by serde_json one `\uXXXX` (or pair) at a time.
fn json_unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let candidates = [12usize, 6, 2];
        let decoded = candidates.iter().find_map(|&n| {
            let piece = tail.get(..n)?;
            serde_json::from_str::<String>(&format!("\"{piece}\""))
                .ok()
                .map(|s| (s, n))
        });
        match decoded {
            Some((s, n)) => {
                out.push_str(&s);
                rest = &tail[n..];
            }
            None => {
                out.push('\\');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Every run of Base64 characters decoded at each of the four offsets, both alphabets,
/// leniently (any padding, any trailing bits), joined by NULs.
fn base64_runs(text: &str) -> Vec<u8> {
    let config = base64::engine::GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent);
    let mut out = Vec::new();
    for (alphabet, extra) in [
        (&base64::alphabet::STANDARD, ['+', '/']),
        (&base64::alphabet::URL_SAFE, ['-', '_']),
    ] {
        let engine = base64::engine::GeneralPurpose::new(alphabet, config);
        for run in text.split(|c: char| !(c.is_ascii_alphanumeric() || extra.contains(&c))) {
            if run.len() < 8 {
                continue;
            }
            for skip in 0..4 {
                let piece = run.get(skip..).unwrap_or_default();
                let piece = if piece.len() % 4 == 1 {
                    &piece[..piece.len() - 1]
                } else {
                    piece
                };
                out.extend(engine.decode(piece).unwrap_or_default());
                out.push(0);
            }
        }
    }
    out
}

/// Hex digits decoded, separators (space, colon) dropped, at both nibble offsets.
fn hex_runs(text: &str) -> Vec<u8> {
    let digits: String = text.chars().filter(|c| !matches!(c, ' ' | ':')).collect();
    let mut out = Vec::new();
    for skip in 0..2 {
        for run in digits
            .get(skip..)
            .unwrap_or_default()
            .split(|c: char| !c.is_ascii_hexdigit())
        {
            let bytes = run.as_bytes();
            for pair in bytes.chunks_exact(2) {
                let s = std::str::from_utf8(pair).unwrap_or("00");
                out.push(u8::from_str_radix(s, 16).unwrap_or(0));
            }
            out.push(0);
        }
    }
    out
}
