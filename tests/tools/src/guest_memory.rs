//! Reading a driver's guest memory from a test: a wasmtime memory creator that allocates every
//! linear memory on the heap and keeps a list of the live ones ([`RecordingMemories`]), and the
//! forms a credential can take in memory ([`Canary`], [`Needles`]).
//!
//! wasmtime offers no way to reach a component's core memories from outside, but it lets the
//! embedder allocate them (`Config::with_host_memory`, the runtime's
//! `EngineOptions::memory_creator`). A test hands the runtime a [`RecordingMemories`], runs a
//! driver, and between calls scans every live memory for its canaries with
//! [`RecordingMemories::scan`].
//!
//! A finding names the canary, the encoding, the memory and the offset, never the bytes: the
//! message of a failing test must not become the leak it reports.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use aho_corasick::AhoCorasick;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use wasmtime::{LinearMemory, MemoryCreator, MemoryType};

/// The unit a recorded memory grows by, and its alignment (a host page).
const CHUNK: usize = 4096;

/// One page of a recorded memory: the `Vec` of them is page-aligned, as wasmtime asks of a host
/// memory, and a whole number of pages long.
#[derive(Clone, Copy)]
#[repr(C, align(4096))]
struct Chunk([u8; CHUNK]);

/// A recorded memory's bytes: `size` of them are the guest's, the rest of the last chunk is
/// zero.
struct Buffer {
    chunks: Vec<Chunk>,
    size: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A memory creator for `EngineOptions::memory_creator` that allocates every linear memory as a
/// heap buffer and remembers it, so that a test can scan what its guests hold.
///
/// Each memory gets a number in creation order (`#0`, `#1`, …) that findings report; a memory
/// leaves the list when wasmtime drops it (its instance's store went away).
#[derive(Default)]
pub struct RecordingMemories {
    next: AtomicU64,
    live: Mutex<Vec<(u64, Weak<Mutex<Buffer>>)>>,
}

impl RecordingMemories {
    /// A creator with no memories yet.
    pub fn new() -> Arc<RecordingMemories> {
        Arc::new(RecordingMemories::default())
    }

    /// How many memories are alive now.
    pub fn live(&self) -> usize {
        lock(&self.live)
            .iter()
            .filter(|(_, b)| b.strong_count() > 0)
            .count()
    }

    /// Every occurrence of every needle in every live memory: one [`Finding`] per needle and
    /// memory (the first offset and the number of occurrences), in memory order.
    ///
    /// # Safety
    ///
    /// No guest whose memory this creator made may run during the scan: wasmtime writes to
    /// these memories through the raw pointer it was given, without the lock the scan takes,
    /// and a write while the scan reads is a data race. Scanning between the calls of a driver
    /// whose engine runs nothing else (no background tier-up, no other test's driver) is safe.
    pub unsafe fn scan(&self, needles: &Needles) -> Vec<Finding> {
        let mut live = lock(&self.live);
        live.retain(|(_, b)| b.strong_count() > 0);
        let mut findings = Vec::new();
        for (index, buffer) in live.iter() {
            let Some(buffer) = buffer.upgrade() else {
                continue;
            };
            let buffer = lock(&buffer);
            // SAFETY: `chunks` holds at least `size` initialised bytes (whole zeroed chunks,
            // see `grow`), a `Chunk` is plain bytes without padding (`repr(C)`, its size a
            // multiple of its alignment), and the caller guarantees that nothing writes them
            // while this shared view lives (see `# Safety`).
            let bytes = unsafe {
                std::slice::from_raw_parts(buffer.chunks.as_ptr().cast::<u8>(), buffer.size)
            };
            findings.extend(needles.find(bytes).into_iter().map(|hit| Finding {
                memory: *index,
                ..hit
            }));
        }
        findings
    }

    fn grow(buffer: &mut Buffer, new_size: usize) -> Result<(), String> {
        let chunks = new_size.div_ceil(CHUNK);
        if chunks > buffer.chunks.len() {
            buffer
                .chunks
                .try_reserve_exact(chunks - buffer.chunks.len())
                .map_err(|e| format!("cannot grow a recorded memory to {new_size} bytes: {e}"))?;
            buffer.chunks.resize(chunks, Chunk([0; CHUNK]));
        }
        buffer.size = new_size;
        Ok(())
    }
}

// SAFETY: every memory it returns is a zeroed heap buffer of at least `minimum` bytes, page-
// aligned, that stays valid until wasmtime drops it; it refuses a reservation or guard pages it
// would not honour (wasmtime would elide bounds checks against them), so the engine must
// configure neither (the runtime's `EngineOptions::memory_creator` does so).
unsafe impl MemoryCreator for RecordingMemories {
    fn new_memory(
        &self,
        ty: MemoryType,
        minimum: usize,
        _maximum: Option<usize>,
        reserved_size_in_bytes: Option<usize>,
        guard_size_in_bytes: usize,
    ) -> Result<Box<dyn LinearMemory>, String> {
        if ty.is_shared() {
            return Err("recorded memories cannot be shared memories".into());
        }
        if reserved_size_in_bytes.is_some_and(|r| r > 0) || guard_size_in_bytes > 0 {
            return Err(format!(
                "recorded memories are plain heap buffers: the engine must ask for no \
                 reservation ({reserved_size_in_bytes:?} bytes asked) and no guard pages \
                 ({guard_size_in_bytes} bytes asked)"
            ));
        }
        let mut buffer = Buffer {
            chunks: Vec::new(),
            size: 0,
        };
        Self::grow(&mut buffer, minimum)?;
        let buffer = Arc::new(Mutex::new(buffer));
        let index = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.live).push((index, Arc::downgrade(&buffer)));
        Ok(Box::new(RecordedMemory { buffer }))
    }
}

/// One linear memory, as wasmtime holds it.
struct RecordedMemory {
    buffer: Arc<Mutex<Buffer>>,
}

// SAFETY: `as_ptr` is the start of `byte_capacity` zero-initialised (then guest-written) bytes,
// page-aligned; growth within the capacity never moves them (`grow` only reallocates when more
// chunks are needed than the buffer holds, and the capacity reported is exactly the chunks held);
// growth beyond it may move them, which the engine allows (`memory_may_move`, no reservation).
// The bytes are freed only when wasmtime drops this memory. Reads by `RecordingMemories::scan`
// are that function's caller's to keep apart from guest execution.
unsafe impl LinearMemory for RecordedMemory {
    fn byte_size(&self) -> usize {
        lock(&self.buffer).size
    }

    fn byte_capacity(&self) -> usize {
        lock(&self.buffer).chunks.len() * CHUNK
    }

    fn grow_to(&mut self, new_size: usize) -> wasmtime::Result<()> {
        RecordingMemories::grow(&mut lock(&self.buffer), new_size)
            .map_err(|e| wasmtime::format_err!("{e}"))
    }

    fn as_ptr(&self) -> *mut u8 {
        lock(&self.buffer).chunks.as_mut_ptr().cast()
    }
}

/// A credential planted in a test: a name for messages and the bytes nobody may see.
#[derive(Clone)]
pub struct Canary {
    name: String,
    value: Vec<u8>,
}

impl fmt::Debug for Canary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The name only: a canary's bytes in a test's output would be the leak it looks for.
        f.debug_struct("Canary").field("name", &self.name).finish()
    }
}

impl Canary {
    /// A canary named `name` (what messages say) with `value` (what they never say).
    ///
    /// # Panics
    ///
    /// When `value` is shorter than 16 bytes: a short value could occur by chance, and its
    /// Base64 forms, once the characters that depend on neighbouring bytes are dropped, would be
    /// shorter still.
    pub fn new(name: impl Into<String>, value: impl Into<Vec<u8>>) -> Canary {
        let (name, value) = (name.into(), value.into());
        assert!(
            value.len() >= 16,
            "canary `{name}` is shorter than 16 bytes: too likely to occur by chance"
        );
        Canary { name, value }
    }

    /// The canary's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every form the canary is looked for in: `(encoding, bytes)`, the raw bytes first.
    /// Forms equal to an earlier one are left out (a plain token is its own JSON string).
    pub fn encodings(&self) -> Vec<(String, Vec<u8>)> {
        let v = &self.value;
        let mut forms: Vec<(String, Vec<u8>)> = vec![("raw".into(), v.clone())];
        for (alphabet, engine) in [
            ("Base64", &STANDARD_NO_PAD),
            ("URL-safe Base64", &URL_SAFE_NO_PAD),
        ] {
            for prefix in 0..3 {
                forms.push((
                    format!("{alphabet} after {prefix} byte(s) of a longer text"),
                    base64_core(engine, v, prefix),
                ));
            }
        }
        for (set, keep) in [
            ("RFC 3986 unreserved", is_unreserved as fn(u8) -> bool),
            ("alphanumerics", |b: u8| b.is_ascii_alphanumeric()),
        ] {
            for (case, hex) in [
                ("upper", b"0123456789ABCDEF"),
                ("lower", b"0123456789abcdef"),
            ] {
                forms.push((
                    format!("percent-encoded ({set} kept, {case}-case hex)"),
                    percent(v, keep, hex),
                ));
            }
        }
        forms.push(("JSON-escaped".into(), json_escaped(v, false)));
        forms.push(("JSON-escaped with \\/".into(), json_escaped(v, true)));
        // An HMAC key shorter than the hash's block is XORed with the pads as it is: either
        // padded key gives the key away.
        forms.push((
            "HMAC inner pad (key XOR 0x36)".into(),
            v.iter().map(|b| b ^ 0x36).collect(),
        ));
        forms.push((
            "HMAC outer pad (key XOR 0x5c)".into(),
            v.iter().map(|b| b ^ 0x5c).collect(),
        ));
        let mut seen = std::collections::HashSet::new();
        forms.retain(|(_, bytes)| seen.insert(bytes.clone()));
        forms
    }
}

/// The Base64 characters of `value` that do not depend on its neighbours, when `value` starts
/// `prefix` bytes (0, 1 or 2) after a 3-byte boundary of the encoded text: the characters the
/// prefix bytes touch and the last one, which the unknown next byte shares, are dropped (with
/// any padding).
fn base64_core(engine: &base64::engine::GeneralPurpose, value: &[u8], prefix: usize) -> Vec<u8> {
    let mut input = vec![0u8; prefix];
    input.extend_from_slice(value);
    let text = engine.encode(&input).into_bytes();
    let start = (prefix * 8).div_ceil(6);
    let end = (input.len() * 8) / 6;
    text[start..end].to_vec()
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn percent(value: &[u8], keep: fn(u8) -> bool, hex: &[u8; 16]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() * 3);
    for &b in value {
        if keep(b) {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', hex[usize::from(b >> 4)], hex[usize::from(b & 15)]]);
        }
    }
    out
}

/// The inside of a JSON string holding `value` (ASCII control characters as `\u00XX`, the
/// short escapes for quote and backslash, `/` as `\/` when `solidus`).
fn json_escaped(value: &[u8], solidus: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + 8);
    for &b in value {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' if solidus => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..0x20 => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => out.push(b),
        }
    }
    out
}

/// Every form of a set of canaries, searched for in one pass.
pub struct Needles {
    /// `(canary name, encoding)` of each pattern, by pattern index.
    labels: Vec<(String, String)>,
    matcher: AhoCorasick,
}

impl Needles {
    /// The needles of every encoding of every canary.
    pub fn new(canaries: &[Canary]) -> Needles {
        let mut labels = Vec::new();
        let mut patterns = Vec::new();
        for canary in canaries {
            for (encoding, bytes) in canary.encodings() {
                labels.push((canary.name.clone(), encoding));
                patterns.push(bytes);
            }
        }
        let matcher = AhoCorasick::new(&patterns).expect("the canaries' patterns build a matcher");
        Needles { labels, matcher }
    }

    /// Every needle found in `haystack`: one [`Finding`] per needle (its first offset and
    /// the number of occurrences, overlapping ones included), in the needles' order; memory
    /// `#0`.
    pub fn find(&self, haystack: &[u8]) -> Vec<Finding> {
        let mut first: Vec<Option<(usize, usize)>> = vec![None; self.labels.len()];
        for m in self.matcher.find_overlapping_iter(haystack) {
            let slot = &mut first[m.pattern().as_usize()];
            match slot {
                Some((_, count)) => *count += 1,
                None => *slot = Some((m.start(), 1)),
            }
        }
        first
            .into_iter()
            .enumerate()
            .filter_map(|(i, hit)| {
                let (offset, count) = hit?;
                let (canary, encoding) = self.labels[i].clone();
                Some(Finding {
                    canary,
                    encoding,
                    memory: 0,
                    offset,
                    count,
                })
            })
            .collect()
    }
}

/// A canary found in a guest memory. Its `Display` names the canary, never its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The canary's name.
    pub canary: String,
    /// The form it was found in (see [`Canary::encodings`]).
    pub encoding: String,
    /// The memory's number, in creation order.
    pub memory: u64,
    /// The first occurrence's byte offset in the memory.
    pub offset: usize,
    /// How many occurrences.
    pub count: usize,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` {} in memory #{} at offset {:#x}",
            self.canary, self.encoding, self.memory, self.offset
        )?;
        if self.count > 1 {
            write!(f, " ({} occurrences)", self.count)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Has `/`, `+`, `=`, `"`, `?` and a space, so that every encoding differs from the raw
    /// bytes, and `~?>`, so that its Base64 has `+` and `/` at every alignment (the URL-safe
    /// forms differ from the standard ones).
    const SECRET: &[u8] = b"canary/secret+Zq8 \"x\"=Vw3k~?>P9rT";

    fn needles() -> Needles {
        Needles::new(&[Canary::new("test secret", SECRET)])
    }

    fn found(haystack: &[u8]) -> Vec<String> {
        needles()
            .find(haystack)
            .into_iter()
            .map(|f| f.encoding)
            .collect()
    }

    /// The canary inside a longer string, Base64-encoded (both alphabets, with and without
    /// padding) and surrounded by other memory, is found at every offset it can start at.
    #[test]
    fn finds_a_canary_at_every_offset_of_a_base64_text() {
        for (name, engine) in [
            ("standard", &base64::engine::general_purpose::STANDARD),
            ("URL-safe", &base64::engine::general_purpose::URL_SAFE),
        ] {
            for before in 0..7 {
                for after in 0..4 {
                    let mut text = b"user-1:"[..before].to_vec();
                    text.extend_from_slice(SECRET);
                    text.extend(std::iter::repeat_n(b'!', after));
                    let mut memory = vec![0u8; 100];
                    memory.extend_from_slice(engine.encode(&text).as_bytes());
                    memory.extend_from_slice(&[0; 100]);
                    let hits = found(&memory);
                    let expect = match name {
                        "standard" => "Base64 after",
                        _ => "URL-safe Base64 after",
                    };
                    assert!(
                        hits.iter().any(|e| e.starts_with(expect)),
                        "{name} Base64 of the canary after {before} and before {after} byte(s) \
                         was not found (found: {hits:?})"
                    );
                }
            }
        }
    }

    /// Every form of this canary differs from the others: none was dropped as a duplicate.
    #[test]
    fn a_canary_has_fifteen_distinct_forms() {
        let forms = Canary::new("test secret", SECRET).encodings();
        assert_eq!(
            forms.len(),
            15,
            "{:?}",
            forms.iter().map(|(e, _)| e).collect::<Vec<_>>()
        );
        // A plain token is its own JSON string and percent-encoding.
        let plain = Canary::new("plain", "canary-token-Zq8Vw3kP9rT").encodings();
        assert!(plain.iter().all(|(e, _)| e != "JSON-escaped"), "{plain:?}");
    }

    #[test]
    fn finds_the_raw_percent_json_and_hmac_forms() {
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("raw", SECRET.to_vec()),
            (
                "percent-encoded (RFC 3986 unreserved kept, upper-case hex)",
                b"canary%2Fsecret%2BZq8%20%22x%22%3DVw3k~%3F%3EP9rT".to_vec(),
            ),
            (
                "percent-encoded (RFC 3986 unreserved kept, lower-case hex)",
                b"canary%2fsecret%2bZq8%20%22x%22%3dVw3k~%3f%3eP9rT".to_vec(),
            ),
            (
                "JSON-escaped",
                br#"canary/secret+Zq8 \"x\"=Vw3k~?>P9rT"#.to_vec(),
            ),
            (
                "JSON-escaped with \\/",
                br#"canary\/secret+Zq8 \"x\"=Vw3k~?>P9rT"#.to_vec(),
            ),
            (
                "HMAC inner pad (key XOR 0x36)",
                SECRET.iter().map(|b| b ^ 0x36).collect(),
            ),
        ];
        for (encoding, form) in cases {
            let mut memory = b"{\"token\":\"".to_vec();
            memory.extend_from_slice(&form);
            memory.extend_from_slice(b"\"}");
            let findings = needles().find(&memory);
            let f = findings
                .iter()
                .find(|f| f.encoding == encoding)
                .unwrap_or_else(|| panic!("{encoding} not found: {findings:?}"));
            assert_eq!((f.offset, f.count), (10, 1), "{encoding}");
        }
    }

    #[test]
    fn memory_without_the_canary_has_no_findings() {
        let mut other = SECRET.to_vec();
        other[5] ^= 1;
        assert_eq!(found(&other), Vec::<String>::new());
        assert_eq!(found(&[0; 4096]), Vec::<String>::new());
    }

    /// The message of a finding says which canary, how and where, and never the bytes.
    #[test]
    fn a_finding_never_shows_the_canary() {
        let mut memory = vec![0u8; 0x40];
        memory.extend_from_slice(SECRET);
        memory.extend_from_slice(SECRET);
        let findings = needles().find(&memory);
        assert_eq!(findings.len(), 1, "{findings:?}");
        let text = findings[0].to_string();
        assert_eq!(
            text,
            "`test secret` raw in memory #0 at offset 0x40 (2 occurrences)"
        );
        let shown = format!("{findings:?} {:?}", Canary::new("test secret", SECRET));
        assert!(!shown.contains("Zq8"), "{shown}");
    }

    /// A memory grows, moves, and is scanned whole; a dropped one leaves the list.
    #[test]
    fn recorded_memories_are_scanned_until_dropped() {
        let memories = RecordingMemories::new();
        let ty = MemoryType::new(1, None);
        let mut memory = memories
            .new_memory(ty.clone(), 65536, None, Some(0), 0)
            .expect("a memory");
        assert_eq!((memory.byte_size(), memory.byte_capacity()), (65536, 65536));
        assert_eq!(memory.as_ptr() as usize % CHUNK, 0, "page-aligned");
        memory.grow_to(3 * 65536).expect("grows");
        assert_eq!(memory.byte_size(), 3 * 65536);
        // Plant the canary across the old end, as a guest would.
        let at = 65536 - 7;
        // SAFETY: the memory is 3 pages long and nothing else uses it.
        unsafe {
            std::ptr::copy_nonoverlapping(SECRET.as_ptr(), memory.as_ptr().add(at), SECRET.len());
        }
        assert_eq!(memories.live(), 1);
        // SAFETY: no guest runs; this test is the memory's only user.
        let findings = unsafe { memories.scan(&needles()) };
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!((findings[0].memory, findings[0].offset), (0, at));
        drop(memory);
        assert_eq!(memories.live(), 0);
        // SAFETY: as above.
        assert!(unsafe { memories.scan(&needles()) }.is_empty());
        assert!(
            memories.new_memory(ty, 0, None, Some(1 << 32), 0).is_err(),
            "a reservation the buffer would not honour is refused"
        );
    }
}
