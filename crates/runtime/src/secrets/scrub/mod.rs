//! Keeping secret values out of what reaches the guest: a response is judged by what it means
//! (its decoded views, [`views`]), not by a list of spellings, and every span that holds a
//! value, in any view, is replaced in the original by the value's placeholder. The redactor of
//! what the host writes gets the value's common forms ([`encodings`]).

mod views;

use aho_corasick::{AhoCorasick, MatchKind};
use base64::Engine as _;

use std::rc::Rc;

use views::{Escape, View};

/// Values shorter than this are not scrubbed from responses: a short credential would blank
/// ordinary text (the outside review's `redact("info")`), and no cloud issues one.
pub(crate) const MIN_SCRUBBED_BYTES: usize = 8;

/// The forms in which `value` may come back: raw, Base64 (standard and URL-safe, at each of the
/// three alignments inside a longer text, padding trimmed), percent-encoded (both hex cases,
/// `+` or `%20` for a space) and JSON-escaped. Each at least [`MIN_SCRUBBED_BYTES`] long.
pub(crate) fn encodings(value: &str) -> Vec<String> {
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

/// A response could not be checked: it is encoded more deeply than the host undoes, or a
/// credential survived every pass. The host refuses such a response rather than pass it on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unscrubbable(pub String);

impl std::fmt::Display for Unscrubbable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Passes over one text: each pass replaces what it finds and the next looks again (a
/// replacement can complete an encoding that overlapped another); a text still holding a
/// credential after the last is refused.
const MAX_PASSES: usize = 3;

/// Layers of one kind undone in a row before the text is judged too deep to check: real
/// servers nest two or three (a URL in a query in a redirect).
const MAX_SAME_KIND_ROUNDS: usize = 8;

/// Kinds of layer nested in one chain (a form-encoded URL in a JSON string in an HTML page is
/// three): deeper mixes are not looked for (SECURITY.md says so).
const MAX_KINDS_NESTED: usize = 4;

/// Decoded bytes the views of one text may hold in all, as a multiple of its length (plus a
/// floor for short texts): past it the text is refused, so a hostile answer cannot make the
/// host decode without end.
const VIEW_BUDGET_FACTOR: usize = 32;
const VIEW_BUDGET_FLOOR: usize = 1 << 20;

/// Finds credentials in a text by what it means and replaces each with its placeholder.
///
/// The text is read raw and through decoded views ([`views`]): percent-encoding with any safe
/// set, HTML/XML references, JSON and script escapes, Base64 runs and separated hex, nested in
/// any order the decoders reach. In each view the value is looked for raw, as Base64 at each of
/// the three alignments (both alphabets), as contiguous hex (any case) and as UTF-16; a find in
/// a view replaces the span of the original text it came from.
pub(crate) struct Scrubber {
    /// Case-sensitive forms.
    exact: Option<Patterns>,
    /// Contiguous hex, matched case-insensitively.
    hex: Option<Patterns>,
    /// The replacement of each value, by pair index.
    replacements: Vec<String>,
    /// Whether a value holds a space, so that `+` read as a space can matter.
    plus_matters: bool,
}

/// One automaton and the pair each of its patterns belongs to.
struct Patterns {
    automaton: AhoCorasick,
    owner: Vec<usize>,
}

impl Patterns {
    fn build(
        forms: Vec<(Vec<u8>, usize)>,
        case_insensitive: bool,
        kind: Option<aho_corasick::AhoCorasickKind>,
    ) -> Option<Self> {
        if forms.is_empty() {
            return None;
        }
        let (patterns, owner): (Vec<Vec<u8>>, Vec<usize>) = forms.into_iter().unzip();
        let automaton = AhoCorasick::builder()
            .kind(kind)
            .match_kind(MatchKind::LeftmostLongest)
            .ascii_case_insensitive(case_insensitive)
            .build(&patterns)
            .ok()?;
        Some(Patterns { automaton, owner })
    }

    /// Every find in `text`: its span and pair.
    fn find(&self, text: &[u8], out: &mut Vec<(usize, usize, usize)>) {
        for m in self.automaton.find_iter(text) {
            out.push((m.start(), m.end(), self.owner[m.pattern().as_usize()]));
        }
    }
}

/// UTF-16 code units of `value` as bytes, little- or big-endian.
fn utf16(value: &str, little: bool) -> Vec<u8> {
    value
        .encode_utf16()
        .flat_map(|u| {
            if little {
                u.to_le_bytes()
            } else {
                u.to_be_bytes()
            }
        })
        .collect()
}

impl Scrubber {
    /// A scrubber for `(value, replacement)` pairs; values shorter than
    /// [`MIN_SCRUBBED_BYTES`] are left out. Its automatons are DFAs: slower to build, fastest to
    /// run, for a scrubber kept and run over every view of every response (a vault's).
    pub(crate) fn new<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Self::with_kind(pairs, Some(aho_corasick::AhoCorasickKind::DFA))
    }

    /// The same for values of one response (a signature the host computed for its request):
    /// built per request, so the automaton kind is the cheap one to build that the library
    /// picks.
    pub(crate) fn for_one_response<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Self {
        Self::with_kind(pairs, None)
    }

    fn with_kind<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
        kind: Option<aho_corasick::AhoCorasickKind>,
    ) -> Self {
        let mut exact = Vec::new();
        let mut hex_forms = Vec::new();
        let mut replacements = Vec::new();
        let mut plus_matters = false;
        for (value, replacement) in pairs {
            if value.len() < MIN_SCRUBBED_BYTES {
                continue;
            }
            let owner = replacements.len();
            replacements.push(replacement.to_string());
            plus_matters |= value.contains(' ');
            exact.push((value.as_bytes().to_vec(), owner));
            let bytes = value.as_bytes();
            for engine in [
                &base64::engine::general_purpose::STANDARD_NO_PAD,
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            ] {
                for offset in 0..3usize {
                    let form = aligned_base64(engine, bytes, offset);
                    if form.len() >= MIN_SCRUBBED_BYTES {
                        exact.push((form.into_bytes(), owner));
                    }
                }
            }
            for little in [true, false] {
                exact.push((utf16(value, little), owner));
            }
            hex_forms.push((hex::encode(bytes).into_bytes(), owner));
        }
        Scrubber {
            exact: Patterns::build(exact, false, kind),
            hex: Patterns::build(hex_forms, true, kind),
            replacements,
            plus_matters,
        }
    }

    /// Whether the scrubber replaces nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.replacements.is_empty()
    }

    /// `bytes` with every credential found replaced by its placeholder; `Ok(None)` when none
    /// was found (no copy made); an error when the text cannot be checked.
    pub(crate) fn scrub(&self, bytes: &[u8]) -> Result<Option<Vec<u8>>, Unscrubbable> {
        if self.is_empty() {
            return Ok(None);
        }
        let mut current: Option<Vec<u8>> = None;
        for _ in 0..MAX_PASSES {
            let text = current.as_deref().unwrap_or(bytes);
            let spans = self.spans(text)?;
            if spans.is_empty() {
                return Ok(current);
            }
            current = Some(self.replace(text, spans));
        }
        let text = current.as_deref().unwrap_or(bytes);
        if self.spans(text)?.is_empty() {
            Ok(current)
        } else {
            Err(Unscrubbable(format!(
                "a credential was still found after {MAX_PASSES} passes"
            )))
        }
    }

    /// `text` with every credential found replaced.
    pub(crate) fn scrub_str(&self, text: &str) -> Result<Option<String>, Unscrubbable> {
        Ok(self
            .scrub(text.as_bytes())?
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    /// Whether `text` holds a credential in any form the scrubber knows.
    pub(crate) fn finds(&self, text: &[u8]) -> Result<bool, Unscrubbable> {
        Ok(!self.is_empty() && !self.spans(text)?.is_empty())
    }

    /// Spans of `text` (with their pair) holding a credential, in the text or any view of it.
    ///
    /// The views are walked breadth first: every decoding step applied to every view, as long
    /// as it changes something new, up to [`MAX_KINDS_NESTED`] kinds of layer in one chain (a
    /// run of one kind counts once, up to [`MAX_SAME_KIND_ROUNDS`] deep; deeper is refused).
    fn spans(&self, text: &[u8]) -> Result<Vec<(usize, usize, usize)>, Unscrubbable> {
        let mut walk = Walk {
            scrubber: self,
            spans: Vec::new(),
            budget: text
                .len()
                .saturating_mul(VIEW_BUDGET_FACTOR)
                .max(VIEW_BUDGET_FLOOR),
        };
        walk.find_raw(text);
        let mut seen = std::collections::HashSet::from([digest(text)]);
        let mut queue: std::collections::VecDeque<Chain> =
            std::collections::VecDeque::from([Chain::default()]);
        while let Some(chain) = queue.pop_front() {
            let input = chain.view.as_ref().map_or(text, |v| v.text());
            for step in STEPS {
                if step
                    == Step::Escape(Escape::Percent {
                        plus_is_space: true,
                    })
                    && !self.plus_matters
                {
                    continue;
                }
                let repeat = chain.last == Some(step);
                let kinds = chain.kinds + usize::from(!repeat);
                let rounds = if repeat { chain.rounds + 1 } else { 1 };
                if kinds > MAX_KINDS_NESTED {
                    continue;
                }
                let Some(decoded) = step.apply(input) else {
                    continue;
                };
                if rounds > MAX_SAME_KIND_ROUNDS {
                    return Err(Unscrubbable(format!(
                        "it is escaped more than {MAX_SAME_KIND_ROUNDS} layers deep"
                    )));
                }
                if !seen.insert(digest(&decoded.text)) {
                    continue;
                }
                let view = View::new(decoded, chain.view.clone());
                walk.spend(view.text().len())?;
                walk.find_view(&view);
                queue.push_back(Chain {
                    view: Some(view),
                    last: Some(step),
                    kinds,
                    rounds,
                });
            }
        }
        Ok(walk.spans)
    }

    /// `text` with each span replaced by its pair's replacement; overlapping spans are merged.
    fn replace(&self, text: &[u8], mut spans: Vec<(usize, usize, usize)>) -> Vec<u8> {
        spans.sort_unstable();
        let mut out = Vec::with_capacity(text.len());
        let mut at = 0;
        let mut i = 0;
        while i < spans.len() {
            let (start, mut end, owner) = spans[i];
            i += 1;
            while i < spans.len() && spans[i].0 < end {
                end = end.max(spans[i].1);
                i += 1;
            }
            if start < at {
                // Inside a span already replaced.
                at = at.max(end);
                continue;
            }
            out.extend_from_slice(&text[at..start]);
            out.extend_from_slice(self.replacements[owner].as_bytes());
            at = end;
        }
        out.extend_from_slice(&text[at.min(text.len())..]);
        out
    }
}

/// The views of one text being searched, and what was found.
struct Walk<'s> {
    scrubber: &'s Scrubber,
    spans: Vec<(usize, usize, usize)>,
    /// Decoded bytes the views may still hold.
    budget: usize,
}

impl Walk<'_> {
    fn spend(&mut self, bytes: usize) -> Result<(), Unscrubbable> {
        self.budget = self.budget.checked_sub(bytes).ok_or_else(|| {
            Unscrubbable("it decodes into more views than the host checks".to_string())
        })?;
        Ok(())
    }

    fn find_raw(&mut self, text: &[u8]) {
        for patterns in [&self.scrubber.exact, &self.scrubber.hex]
            .into_iter()
            .flatten()
        {
            patterns.find(text, &mut self.spans);
        }
    }

    fn find_view(&mut self, view: &View) {
        let mut found = Vec::new();
        for patterns in [&self.scrubber.exact, &self.scrubber.hex]
            .into_iter()
            .flatten()
        {
            patterns.find(view.text(), &mut found);
        }
        for (from, to, owner) in found {
            let (start, end) = view.source_span(from, to);
            self.spans.push((start, end, owner));
        }
    }
}

/// A decoding step of the walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Escape(Escape),
    Base64,
    Hex,
}

const STEPS: [Step; 6] = [
    Step::Escape(Escape::Percent {
        plus_is_space: false,
    }),
    Step::Escape(Escape::Percent {
        plus_is_space: true,
    }),
    Step::Escape(Escape::Reference),
    Step::Escape(Escape::Backslash),
    Step::Base64,
    Step::Hex,
];

impl Step {
    fn apply(self, text: &[u8]) -> Option<views::Decoded> {
        match self {
            Step::Escape(kind) => views::unescape(text, kind),
            Step::Base64 => views::base64_runs(text),
            Step::Hex => views::hex_runs(text),
        }
    }
}

/// A view reached by a chain of steps.
#[derive(Default)]
struct Chain {
    view: Option<Rc<View>>,
    last: Option<Step>,
    /// Kinds of layer undone (a run of one kind counts once).
    kinds: usize,
    /// Layers of `last`'s kind undone in a row.
    rounds: usize,
}

fn digest(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests;
