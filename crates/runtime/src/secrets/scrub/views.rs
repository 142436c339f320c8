//! Decoded views of a response: what its bytes mean once the encodings a server applies are
//! undone. Each view keeps, for every byte it holds, where that byte came from in the original
//! text, so a credential found in a view is removed from the original at the right span.
//!
//! The decoders, each undoing one kind of layer everywhere it appears, as a guest would:
//! - [`unescape`] with an [`Escape`]: percent-encoding (`%2F`, any case, whatever safe set the
//!   encoder used; `+` as a space or not), HTML/XML character references (`&amp;`, `&#47;`,
//!   `&#x2F;`) or backslash escapes of JSON and scripting languages (`\u0026` with surrogate
//!   pairs, `\x26`, `\/`) — one kind at a time, so a value holding a literal `\b` survives an
//!   entity decoding;
//! - [`base64_runs`]: every run of Base64 characters (standard or URL-safe) that decodes to
//!   text, from the start of the run;
//! - [`hex_runs`]: hex bytes written with a separator (`41 42 43`, `41:42:43`), as in
//!   strings-to-sign quoted by AWS-style errors (contiguous hex is matched as a pattern).
//!
//! The scanner chains them (a percent-encoded URL inside a `Location` that was percent-encoded
//! again, JSON inside an HTML page).

use std::borrow::Cow;

/// One piece of a decoded text and where it came from in the decoder's input.
#[derive(Debug, Clone, Copy)]
enum Piece {
    /// `len` bytes copied unchanged.
    Copy { len: usize },
    /// `out` bytes made from `from` input bytes together (an escape, a reference).
    Chunk { out: usize, from: usize },
    /// `out` bytes decoded from a run of `from` Base64 characters.
    Base64 { out: usize, from: usize },
}

impl Piece {
    fn out_len(self) -> usize {
        match self {
            Piece::Copy { len } => len,
            Piece::Chunk { out, .. } | Piece::Base64 { out, .. } => out,
        }
    }

    /// The input span (relative to the piece's start) that output byte `k` of the piece was
    /// made from.
    fn source_of(self, k: usize) -> (usize, usize) {
        match self {
            Piece::Copy { .. } => (k, k + 1),
            Piece::Chunk { from, .. } => (0, from),
            // Byte k holds bits 8k..8k+8, which sit in characters 8k/6 ..= (8k+7)/6.
            Piece::Base64 { from, .. } => ((8 * k) / 6, ((8 * k + 7) / 6 + 1).min(from)),
        }
    }
}

/// A decoded text and the map from its bytes back to the text it was decoded from.
#[derive(Debug, Default)]
pub(super) struct Decoded {
    pub text: Vec<u8>,
    /// Pieces in output order: (output offset, input offset, piece).
    pieces: Vec<(usize, usize, Piece)>,
}

impl Decoded {
    fn with_capacity(n: usize) -> Self {
        Decoded {
            text: Vec::with_capacity(n),
            pieces: Vec::new(),
        }
    }

    /// Bytes copied from input offset `from` on; joins the previous copy when adjacent.
    fn copy(&mut self, bytes: &[u8], from: usize) {
        if bytes.is_empty() {
            return;
        }
        let out = self.text.len();
        self.text.extend_from_slice(bytes);
        if let Some((o, i, Piece::Copy { len })) = self.pieces.last_mut()
            && *o + *len == out
            && *i + *len == from
        {
            *len += bytes.len();
            return;
        }
        self.pieces
            .push((out, from, Piece::Copy { len: bytes.len() }));
    }

    fn chunk(&mut self, bytes: &[u8], from: usize, len: usize) {
        let out = self.text.len();
        self.text.extend_from_slice(bytes);
        self.pieces.push((
            out,
            from,
            Piece::Chunk {
                out: bytes.len(),
                from: len,
            },
        ));
    }

    /// The input span output byte `i` was made from.
    fn source_of(&self, i: usize) -> (usize, usize) {
        let at = self.pieces.partition_point(|(o, _, _)| *o <= i);
        match at.checked_sub(1).map(|p| self.pieces[p]) {
            Some((o, from, piece)) if i < o + piece.out_len() => {
                let (s, e) = piece.source_of(i - o);
                (from + s, from + e)
            }
            // Unreachable by construction (every output byte belongs to a piece); the widest
            // answer is the safe one.
            _ => (0, usize::MAX),
        }
    }
}

/// A decoded view of the original text: its bytes, and through its chain of decodings where
/// each came from.
#[derive(Debug)]
pub(super) struct View {
    decoded: Decoded,
    /// The view this one was decoded from; none: the original text.
    parent: Option<std::rc::Rc<View>>,
}

impl View {
    /// The view of `decoded`, made from `parent`'s text (none: the original).
    pub(super) fn new(decoded: Decoded, parent: Option<std::rc::Rc<View>>) -> std::rc::Rc<Self> {
        std::rc::Rc::new(View { decoded, parent })
    }

    /// Its bytes.
    pub(super) fn text(&self) -> &[u8] {
        &self.decoded.text
    }

    /// The original text's span of this view's bytes `from..to` (non-empty).
    pub(super) fn source_span(&self, from: usize, to: usize) -> (usize, usize) {
        let start = self.decoded.source_of(from).0;
        let end = self.decoded.source_of(to - 1).1;
        match &self.parent {
            None => (start, end),
            Some(p) => {
                let len = p.text().len();
                p.source_span(start.min(len.saturating_sub(1)), end.clamp(1, len))
            }
        }
    }
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The byte written as two hex digits at `text[at..at + 2]`.
fn hex_byte(text: &[u8], at: usize) -> Option<u8> {
    let hi = hex_value(*text.get(at)?)?;
    let lo = hex_value(*text.get(at + 1)?)?;
    Some(hi << 4 | lo)
}

/// The number written as 1 to `max` digits of `radix` at `text[at..]`, and how many digits.
fn number(text: &[u8], at: usize, radix: u32, max: usize) -> Option<(u32, usize)> {
    let mut value: u32 = 0;
    let mut digits = 0;
    while digits < max {
        let Some(d) = text
            .get(at + digits)
            .and_then(|&b| (b as char).to_digit(radix))
        else {
            break;
        };
        value = value.checked_mul(radix)?.checked_add(d)?;
        digits += 1;
    }
    (digits > 0).then_some((value, digits))
}

/// Named character references of HTML and XML that stand for ASCII characters a credential may
/// hold (the HTML5 list's ASCII entries, and XML's five).
const NAMED: &[(&str, char)] = &[
    ("amp", '&'),
    ("lt", '<'),
    ("gt", '>'),
    ("quot", '"'),
    ("apos", '\''),
    ("sol", '/'),
    ("bsol", '\\'),
    ("plus", '+'),
    ("equals", '='),
    ("colon", ':'),
    ("semi", ';'),
    ("comma", ','),
    ("period", '.'),
    ("num", '#'),
    ("excl", '!'),
    ("dollar", '$'),
    ("percnt", '%'),
    ("lpar", '('),
    ("rpar", ')'),
    ("ast", '*'),
    ("quest", '?'),
    ("commat", '@'),
    ("lsqb", '['),
    ("rsqb", ']'),
    ("lbrack", '['),
    ("rbrack", ']'),
    ("lowbar", '_'),
    ("grave", '`'),
    ("lcub", '{'),
    ("rcub", '}'),
    ("lbrace", '{'),
    ("rbrace", '}'),
    ("verbar", '|'),
    ("vert", '|'),
    ("Hat", '^'),
    ("tilde", '~'),
    ("hyphen", '-'),
    ("dash", '-'),
    ("nbsp", '\u{a0}'),
    ("Tab", '\t'),
    ("NewLine", '\n'),
];

/// The character a reference at `text[at..]` (which starts with `&`) stands for, and its
/// length.
fn reference(text: &[u8], at: usize) -> Option<(char, usize)> {
    let rest = text.get(at + 1..)?;
    if rest.first() == Some(&b'#') {
        let (radix, skip) = match rest.get(1) {
            Some(b'x' | b'X') => (16, 2),
            _ => (10, 1),
        };
        let (value, digits) = number(rest, skip, radix, 8)?;
        let len = 1 + skip + digits;
        // The closing `;` is optional in HTML's error-tolerant parsing; take it when present.
        let len = if rest.get(skip + digits) == Some(&b';') {
            len + 1
        } else {
            len
        };
        return char::from_u32(value).map(|c| (c, len));
    }
    let end = rest.iter().take(12).position(|&b| b == b';')?;
    let name = std::str::from_utf8(&rest[..end]).ok()?;
    NAMED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, c)| (c, end + 2))
}

/// A `\uXXXX` escape at `text[at..]`: its UTF-16 unit.
fn unit(text: &[u8], at: usize) -> Option<u16> {
    if text.get(at) != Some(&b'\\') || text.get(at + 1) != Some(&b'u') {
        return None;
    }
    let hi = hex_byte(text, at + 2)?;
    let lo = hex_byte(text, at + 4)?;
    Some(u16::from(hi) << 8 | u16::from(lo))
}

/// The character a backslash escape at `text[at..]` stands for, and its length.
fn backslash(text: &[u8], at: usize) -> Option<(Vec<u8>, usize)> {
    let kind = *text.get(at + 1)?;
    let simple = |b: u8| Some((vec![b], 2));
    match kind {
        b'u' => {
            let first = unit(text, at)?;
            let c = if (0xD800..0xDC00).contains(&first) {
                let second = unit(text, at + 6)?;
                let c = char::decode_utf16([first, second]).next()?.ok()?;
                return Some((c.to_string().into_bytes(), 12));
            } else {
                char::from_u32(u32::from(first))?
            };
            Some((c.to_string().into_bytes(), 6))
        }
        b'x' => hex_byte(text, at + 2).map(|b| (vec![b], 4)),
        b'/' | b'\\' | b'"' | b'\'' => simple(kind),
        b'n' => simple(b'\n'),
        b'r' => simple(b'\r'),
        b't' => simple(b'\t'),
        b'b' => simple(0x08),
        b'f' => simple(0x0c),
        _ => None,
    }
}

/// One kind of escaping a server applies, undone by [`unescape`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Escape {
    /// `%XX` (any case); with `plus_is_space`, `+` is a space (forms, `quote_plus`).
    Percent { plus_is_space: bool },
    /// HTML/XML character references.
    Reference,
    /// JSON and script backslash escapes.
    Backslash,
}

/// Undoes one layer of `kind` wherever it appears; `None` when the text has none.
pub(super) fn unescape(text: &[u8], kind: Escape) -> Option<Decoded> {
    let starts = |b: &u8| match kind {
        Escape::Percent { plus_is_space } => *b == b'%' || (plus_is_space && *b == b'+'),
        Escape::Reference => *b == b'&',
        Escape::Backslash => *b == b'\\',
    };
    let first = text.iter().position(starts)?;
    let mut out: Option<Decoded> = None;
    let mut copied = 0;
    let mut at = first;
    while at < text.len() {
        let b = text[at];
        let decoded: Option<(Cow<'_, [u8]>, usize)> = match (b, kind) {
            (b'%', Escape::Percent { .. }) => {
                hex_byte(text, at + 1).map(|v| (Cow::Owned(vec![v]), 3))
            }
            (
                b'+',
                Escape::Percent {
                    plus_is_space: true,
                },
            ) => Some((Cow::Borrowed(&b" "[..]), 1)),
            (b'&', Escape::Reference) => {
                reference(text, at).map(|(c, len)| (Cow::Owned(c.to_string().into_bytes()), len))
            }
            (b'\\', Escape::Backslash) => {
                backslash(text, at).map(|(bytes, len)| (Cow::Owned(bytes), len))
            }
            _ => None,
        };
        match decoded {
            Some((bytes, len)) => {
                let o = out.get_or_insert_with(|| Decoded::with_capacity(text.len()));
                o.copy(&text[copied..at], copied);
                o.chunk(&bytes, at, len);
                at += len;
                copied = at;
            }
            None => at += 1,
        }
        // Straight to the next byte that may start an escape.
        at += text
            .get(at..)
            .map_or(0, |rest| rest.iter().position(starts).unwrap_or(rest.len()));
    }
    let mut o = out?;
    o.copy(&text[copied..], copied);
    Some(o)
}

/// Whether decoded bytes read as text (a credential does; a run of letters decoded as Base64
/// by accident does not): at least 7 in 8 bytes belong to printable characters or whitespace
/// of valid UTF-8. Garbage views would only cost time, and what hides in binary is found by the
/// Base64 patterns of the raw text.
fn texty(bytes: &[u8]) -> bool {
    let plain = |b: &u8| b.is_ascii_graphic() || matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    let ascii = bytes.iter().filter(|b| plain(b)).count();
    if ascii * 8 >= bytes.len() * 7 {
        return true;
    }
    if bytes.is_ascii() {
        return false;
    }
    let mut good = 0;
    for chunk in bytes.utf8_chunks() {
        good += chunk
            .valid()
            .chars()
            .filter(|c| !c.is_control() || c.is_whitespace())
            .map(char::len_utf8)
            .sum::<usize>();
    }
    good * 8 >= bytes.len() * 7
}

/// Shortest Base64 run worth decoding: 12 characters give 9 bytes, more than the shortest
/// credential scanned for.
const MIN_BASE64_RUN: usize = 12;

/// The 6-bit value of each Base64 character (both alphabets), 0xFF for the rest.
const BASE64: [u8; 256] = {
    let mut t = [0xFFu8; 256];
    let mut i = 0;
    while i < 26 {
        t[b'A' as usize + i] = i as u8;
        t[b'a' as usize + i] = 26 + i as u8;
        i += 1;
    }
    let mut d = 0;
    while d < 10 {
        t[b'0' as usize + d] = 52 + d as u8;
        d += 1;
    }
    t[b'+' as usize] = 62;
    t[b'-' as usize] = 62;
    t[b'/' as usize] = 63;
    t[b'_' as usize] = 63;
    t
};

fn is_base64(b: u8) -> bool {
    BASE64[b as usize] != 0xFF
}

/// The bytes whole groups of Base64 characters decode to (a short prefix's check).
fn decode_base64(chars: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(chars.len() * 3 / 4);
    for group in chars.chunks_exact(4) {
        let v = group
            .iter()
            .fold(0u32, |acc, &c| acc << 6 | u32::from(BASE64[c as usize]));
        out.extend_from_slice(&v.to_be_bytes()[1..]);
    }
    out
}

/// Replaces every run of at least [`MIN_BASE64_RUN`] Base64 characters (both alphabets at
/// once) that decodes to text by the bytes it decodes to from its start; other bytes stay.
/// Each decoded byte comes from the characters that carry its bits.
pub(super) fn base64_runs(text: &[u8]) -> Option<Decoded> {
    let mut out: Option<Decoded> = None;
    let mut copied = 0;
    let mut scratch = Vec::new();
    let mut at = 0;
    while at < text.len() {
        if !is_base64(text[at]) {
            at += 1;
            continue;
        }
        let run = text[at..].iter().take_while(|&&b| is_base64(b)).count();
        // A run whose first characters already decode to non-text is skipped without decoding
        // the rest: ordinary words and identifiers are runs too.
        if run >= MIN_BASE64_RUN && texty(&decode_base64(&text[at..at + MIN_BASE64_RUN])) {
            scratch.clear();
            let mut acc: u32 = 0;
            let mut bits = 0;
            for &c in &text[at..at + run] {
                acc = acc << 6 | u32::from(BASE64[c as usize]);
                bits += 6;
                if bits >= 8 {
                    bits -= 8;
                    scratch.push((acc >> bits) as u8);
                    acc &= (1 << bits) - 1;
                }
            }
            if texty(&scratch) {
                let o = out.get_or_insert_with(|| Decoded::with_capacity(text.len()));
                o.copy(&text[copied..at], copied);
                o.pieces.push((
                    o.text.len(),
                    at,
                    Piece::Base64 {
                        out: scratch.len(),
                        from: run,
                    },
                ));
                o.text.extend_from_slice(&scratch);
                copied = at + run;
            }
        }
        at += run;
    }
    let mut o = out?;
    o.copy(&text[copied..], copied);
    Some(o)
}

/// Shortest separated hex run decoded: 8 bytes.
const MIN_HEX_RUN: usize = 8;

/// Replaces runs of hex bytes written with one separator between them (`41 42`, `41:42`,
/// `41-42`, `41,42`) by the bytes; other bytes stay.
pub(super) fn hex_runs(text: &[u8]) -> Option<Decoded> {
    let mut out: Option<Decoded> = None;
    let mut copied = 0;
    let mut at = 0;
    while at + 2 < text.len() {
        let sep = text[at + 2];
        if !matches!(sep, b' ' | b':' | b'-' | b',') || hex_byte(text, at).is_none() {
            at += 1;
            continue;
        }
        // Pairs separated by `sep`, each pair's start at `at + 3k`.
        let mut pairs = 1;
        while text.get(at + 3 * pairs - 1) == Some(&sep) && hex_byte(text, at + 3 * pairs).is_some()
        {
            pairs += 1;
        }
        if pairs < MIN_HEX_RUN {
            at += 1;
            continue;
        }
        let o = out.get_or_insert_with(|| Decoded::with_capacity(text.len()));
        o.copy(&text[copied..at], copied);
        for k in 0..pairs {
            if let Some(b) = hex_byte(text, at + 3 * k) {
                o.chunk(&[b], at + 3 * k, 2);
            }
        }
        at += 3 * pairs - 1;
        copied = at;
    }
    let mut o = out?;
    o.copy(&text[copied..], copied);
    Some(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(d: Option<Decoded>) -> String {
        String::from_utf8_lossy(&d.map(|d| d.text).unwrap_or_default()).into_owned()
    }

    #[test]
    fn unescape_undoes_percent_references_and_backslashes_one_kind_at_a_time() {
        let pct = Escape::Percent {
            plus_is_space: false,
        };
        let form = Escape::Percent {
            plus_is_space: true,
        };
        assert_eq!(text(unescape(b"a%2Fb%2fc", pct)), "a/b/c");
        assert_eq!(text(unescape(b"a+b", form)), "a b");
        assert!(unescape(b"a+b", pct).is_none());
        assert_eq!(
            text(unescape(
                b"x&amp;y&lt;&#47;&#x2F;&sol;&#61\\b",
                Escape::Reference
            )),
            "x&y<///=\\b"
        );
        assert_eq!(
            text(unescape(b"\\u0026\\u003c\\/\\x41%41", Escape::Backslash)),
            "&</A%41"
        );
        assert_eq!(
            text(unescape(b"\\ud83d\\ude00", Escape::Backslash)),
            "\u{1f600}"
        );
        assert!(unescape(b"plain text", form).is_none());
    }

    #[test]
    fn base64_runs_map_each_byte_to_the_characters_holding_it() {
        // "secret-value" is c2VjcmV0LXZhbHVl.
        let d = base64_runs(b"x:c2VjcmV0LXZhbHVl;").expect("decoded");
        assert_eq!(&d.text[2..14], b"secret-value");
        let view = View::new(d, None);
        // The bytes "cret" (2..6 of the value) come from characters 2..8 of the run.
        let (from, to) = view.source_span(4, 8);
        assert_eq!((from, to), (4, 10));
    }

    #[test]
    fn separated_hex_runs_decode_and_short_ones_stay() {
        assert_eq!(text(hex_runs(b"<73 65 63 72 65 74 2d 76>")), "<secret-v>");
        assert!(hex_runs(b"12:30:45").is_none());
    }
}
