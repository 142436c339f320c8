//! Errors of the host runtime. Every message names the driver, what went wrong and what to do.

use std::fmt;
use std::time::Duration;

use crate::model::types::ProviderError;

/// A failure of the host while loading or calling a driver (as opposed to an error the driver
/// itself reported, which is a [`ProviderError`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// The bytes are not a WebAssembly component.
    #[error("{origin} is not a WebAssembly component: {detail}")]
    NotAComponent {
        /// Where the bytes came from (a path or an `oci://` reference).
        origin: String,
        /// What the component parser said.
        detail: String,
    },
    /// The component is bigger than the host accepts.
    #[error(
        "{origin} is {size} bytes, more than the {limit} bytes a driver may have; build it in release mode with opt-level \"s\" and strip"
    )]
    TooLarge {
        /// Where the bytes came from (a path or an `oci://` reference).
        origin: String,
        /// The component's size in bytes.
        size: usize,
        /// The most a driver may have, in bytes.
        limit: usize,
    },
    /// The component implements a WIT version this host does not support.
    #[error(
        "{origin} implements wasm-ccm:provider@{found}, which this host does not support; this host supports {supported} — {advice}"
    )]
    UnsupportedWitVersion {
        /// Where the bytes came from (a path or an `oci://` reference).
        origin: String,
        /// The `wasm-ccm:provider` version the component implements.
        found: String,
        /// The versions this host supports, listed for the message.
        supported: String,
        /// What the operator or author can do about it.
        advice: String,
    },
    /// The component does not export the mandatory `provider` interface.
    #[error(
        "{origin} does not export wasm-ccm:provider/provider: it is not a wasm-ccm driver (exports: {exports})"
    )]
    NotADriver {
        /// Where the bytes came from (a path or an `oci://` reference).
        origin: String,
        /// What the component exports instead, listed for the message.
        exports: String,
    },
    /// The component imports something the host does not provide.
    #[error("{origin} imports {import}, which this host does not provide; {hint}")]
    UnsupportedImport {
        /// Where the bytes came from (a path or an `oci://` reference).
        origin: String,
        /// The import the host does not provide.
        import: String,
        /// What to do about it.
        hint: String,
    },
    /// Compilation or instantiation failed inside wasmtime.
    #[error("{origin}: {stage} failed: {detail}")]
    Wasmtime {
        /// Where the bytes came from (a path or an `oci://` reference).
        origin: String,
        /// What the host was doing, e.g. `compiling` or `instantiating`.
        stage: &'static str,
        /// wasmtime's error.
        detail: String,
    },
    /// An egress pattern could not be parsed.
    #[error("{0}")]
    InvalidEgress(String),
    /// The driver's `init` refused its configuration.
    #[error(
        "driver {driver} refused its configuration in provider.init: {}",
        Described(error)
    )]
    InitFailed {
        /// The driver's name.
        driver: String,
        /// What `init` returned.
        error: ProviderError,
    },
    /// A call ran past its deadline and was stopped.
    #[error(
        "driver {driver} exceeded its {deadline:?} deadline in {function} and was stopped; the instance was replaced (raise {} if the cloud is slow, or fix a loop in the driver)",
        deadline_flag(function)
    )]
    Deadline {
        /// The driver's name.
        driver: String,
        /// The call, as `interface.function` (e.g. `provider.init`).
        function: String,
        /// The deadline that passed.
        deadline: Duration,
    },
    /// The guest tried to grow its memory past the limit.
    #[error(
        "driver {driver} tried to use more than {limit_mib} MiB of memory in {function}; the instance was replaced (raise --memory-limit if the driver really needs more)"
    )]
    OutOfMemory {
        /// The driver's name.
        driver: String,
        /// The call, as `interface.function` (e.g. `provider.init`).
        function: String,
        /// The memory limit of an instance, in MiB.
        limit_mib: usize,
    },
    /// The guest trapped (panicked, hit `unreachable`, …).
    #[error(
        "driver {driver} crashed (trapped) in {function}: {detail}{}; the instance was replaced — this is a bug in the driver, report it to its author with this message (`wasm-ccm-dev call` prints the whole backtrace)",
        StackSuffix(backtrace)
    )]
    Trap {
        /// The driver's name.
        driver: String,
        /// The call, as `interface.function` (e.g. `provider.init`).
        function: String,
        /// The trap, with the guest's panic message when it printed one.
        detail: String,
        /// The guest's stack where it trapped. The message carries only its short form
        /// ([`GuestBacktrace::short`]); `wasm-ccm-dev` prints it whole.
        backtrace: GuestBacktrace,
    },
    /// The credentials a driver declares could not be taken out of its configuration (see
    /// [`crate::secrets`]); it is not loaded, and nothing was sent.
    #[error(
        "driver {driver}: the host cannot hold its credentials: {detail}; the driver was not loaded"
    )]
    Secrets {
        /// The driver's name.
        driver: String,
        /// What is wrong (names the secret and the setting, never a value).
        detail: String,
    },
    /// The driver's `info()` breaks a rule (see `crate::info_rules`); it is not loaded.
    #[error(
        "{origin}: the driver's info() is invalid: {detail}; the driver was not loaded — fix its provider-info (wit/README.md lists the rules)"
    )]
    InvalidInfo {
        /// Where the bytes came from (a path or an `oci://` reference).
        origin: String,
        /// The rule that `info()` breaks.
        detail: String,
    },
    /// A result was over one of the caps of `crate::result_caps`; it was discarded whole.
    #[error(
        "driver {driver} returned a result over the host's caps from {function}: {detail}; nothing of it was used — this is a bug in the driver, report it to its author (wit/README.md lists the caps)"
    )]
    ResultOverCap {
        /// The driver's name.
        driver: String,
        /// The call, as `interface.function` (e.g. `provider.init`).
        function: String,
        /// Which cap, and by how much.
        detail: String,
    },
    /// The caller asked for an interface the driver does not export.
    #[error("driver {driver} does not export {interface}, so it cannot serve {function}")]
    NotExported {
        /// The driver's name.
        driver: String,
        /// The interface the call needs.
        interface: String,
        /// The call, as `interface.function` (e.g. `provider.init`).
        function: String,
    },
    /// The caller asked for a function that does not exist.
    #[error("{0}")]
    UnknownFunction(String),
    /// Arguments or results could not be converted (dynamic calls).
    #[error("{0}")]
    BadArguments(String),
    /// Reading or writing a file failed.
    #[error("{path}: {detail}")]
    Io {
        /// The file.
        path: String,
        /// What failed, with the I/O error.
        detail: String,
    },
}

impl HostError {
    /// A short, stable name of the case (`deadline`, `trap`, …): the `error.type` of a traced
    /// call, where the message (which may quote the driver) does not belong.
    pub fn kind(&self) -> &'static str {
        match self {
            HostError::NotAComponent { .. } => "not-a-component",
            HostError::TooLarge { .. } => "too-large",
            HostError::UnsupportedWitVersion { .. } => "unsupported-wit-version",
            HostError::NotADriver { .. } => "not-a-driver",
            HostError::UnsupportedImport { .. } => "unsupported-import",
            HostError::Wasmtime { .. } => "wasmtime",
            HostError::InvalidEgress(_) => "invalid-egress",
            HostError::InitFailed { .. } => "init-failed",
            HostError::Deadline { .. } => "deadline",
            HostError::OutOfMemory { .. } => "out-of-memory",
            HostError::Trap { .. } => "trap",
            HostError::InvalidInfo { .. } => "invalid-info",
            HostError::Secrets { .. } => "secrets",
            HostError::ResultOverCap { .. } => "result-over-cap",
            HostError::NotExported { .. } => "not-exported",
            HostError::UnknownFunction(_) => "unknown-function",
            HostError::BadArguments(_) => "bad-arguments",
            HostError::Io { .. } => "io",
        }
    }
}

/// The flag that sets the deadline `function` ran under.
fn deadline_flag(function: &str) -> &'static str {
    match function {
        "provider.init" | "instantiate" => "--init-timeout",
        _ => "--call-timeout",
    }
}

/// Why a driver call did not return a value: the driver said so, or the host stopped it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The driver returned a `provider-error`.
    #[error("{}", Described(.0))]
    Provider(ProviderError),
    /// The host failed or stopped the call.
    #[error("{0}")]
    Host(HostError),
}

impl From<HostError> for CallError {
    fn from(e: HostError) -> Self {
        CallError::Host(e)
    }
}

/// A human sentence for a provider error (its own `Display` is the WIT case and the message).
pub struct Described<'a>(pub &'a ProviderError);

impl fmt::Display for Described<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            ProviderError::NotFound(m) => write!(f, "not found: {m}"),
            ProviderError::NotImplemented => write!(f, "not implemented by the driver"),
            ProviderError::ImplementedElsewhere => write!(f, "implemented elsewhere"),
            ProviderError::InvalidConfig(m) => write!(f, "invalid configuration: {m}"),
            ProviderError::Unauthorized(m) => write!(f, "unauthorized: {m}"),
            ProviderError::RateLimited(Some(s)) => write!(f, "rate limited: retry after {s}s"),
            ProviderError::RateLimited(None) => write!(f, "rate limited"),
            ProviderError::RetryAfter(r) => write!(f, "retry after {}s: {}", r.seconds, r.reason),
            ProviderError::Transient(m) => write!(f, "transient: {m}"),
            ProviderError::Permanent(m) => write!(f, "permanent: {m}"),
        }
    }
}

/// Most frames a [`GuestBacktrace`] keeps (inlined frames count): enough to reach the driver's
/// own code under a panic's dozen runtime frames, small enough that a deep recursion cannot make
/// `wasm-ccm-dev`'s report long.
pub const MAX_BACKTRACE_FRAMES: usize = 32;
/// Longest function name or source location kept, in bytes. Rust's generic names run to a few
/// hundred bytes; a longer one is cut (marked with `…`).
pub const MAX_FRAME_TEXT_BYTES: usize = 256;
/// Longest module name kept, in bytes.
const MAX_MODULE_NAME_BYTES: usize = 64;
/// Frames in the short form that error messages, events and log lines carry.
pub(crate) const SHORT_BACKTRACE_FRAMES: usize = 3;
/// Longest function name in the short form, in bytes.
const MAX_SHORT_FRAME_BYTES: usize = 96;
/// A bound on [`GuestBacktrace::short`], in bytes: three names with their separators.
pub const MAX_SHORT_BACKTRACE_BYTES: usize =
    SHORT_BACKTRACE_FRAMES * (MAX_SHORT_FRAME_BYTES + SEPARATOR.len());
/// Between two frames of the short form: "called from".
const SEPARATOR: &str = " ← ";
/// Names longer than this are shown as they are, not demangled: demangling is for names a
/// compiler wrote, and a bound keeps the work on a hostile name small.
const MAX_DEMANGLE_BYTES: usize = 4 * 1024;

/// The guest's stack where a call trapped, innermost frame first, as text the host made safe to
/// show. Everything in it comes from the driver (its name section and DWARF) and is treated as
/// hostile: at most [`MAX_BACKTRACE_FRAMES`] frames, each text at most [`MAX_FRAME_TEXT_BYTES`],
/// control and bidirectional-override characters replaced by `�`, and every secret the host
/// knows (the ones driver log lines are redacted of) replaced before any cut.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct GuestBacktrace {
    /// The frames, innermost first.
    pub frames: Vec<GuestFrame>,
    /// Whether frames past [`MAX_BACKTRACE_FRAMES`] were dropped.
    pub cut: bool,
}

/// One frame of a [`GuestBacktrace`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GuestFrame {
    /// The core module's name from its name section, or empty (a stripped module has none).
    pub module: String,
    /// The function's index in its module. Stripping does not renumber functions, so an author
    /// can usually find it in a build of the same code that kept its names.
    pub func_index: u32,
    /// The function's name, demangled (Rust's legacy scheme and non-generic v0 paths; other
    /// names as they are); `None` when the module has no name section (`strip = true`).
    pub function: Option<String>,
    /// `file:line[:column]` from the driver's DWARF, when it has some and the engine reads it
    /// (`wasm-ccm-dev` does, the controller does not; see `crate::engine`).
    pub location: Option<String>,
    /// Whether the compiler inlined this function into the next frame, its caller (known from
    /// DWARF).
    pub inlined: bool,
    /// Whether the function is the language runtime's (Rust's `std`, `core` or `alloc`, libc's
    /// `abort`) rather than the driver's: the short form starts below those frames.
    pub runtime: bool,
}

/// One frame as wasmtime reports it, before the host makes it safe (see [`GuestBacktrace::new`]).
pub(crate) struct RawFrame<'a> {
    pub module: Option<&'a str>,
    pub func_index: u32,
    pub name: Option<&'a str>,
    /// DWARF's view of the frame, innermost inlined function first; empty without DWARF.
    pub symbols: Vec<RawSymbol<'a>>,
}

/// One function of a [`RawFrame`] according to DWARF.
pub(crate) struct RawSymbol<'a> {
    pub name: Option<&'a str>,
    pub file: Option<&'a str>,
    pub line: Option<u32>,
    pub column: Option<u32>,
}

impl GuestBacktrace {
    /// Makes `frames` safe to show: bounded, demangled, redacted with `redact(text, max)` (the
    /// host passes `DriverLogger::redact_bounded`, which redacts before it cuts, so a secret
    /// across the cut cannot survive as a prefix), then stripped of control characters.
    pub(crate) fn new<'a>(
        frames: impl IntoIterator<Item = RawFrame<'a>>,
        redact: &dyn Fn(&str, usize) -> String,
    ) -> GuestBacktrace {
        let mut out = GuestBacktrace::default();
        let text = |raw: &str, max: usize| bounded_text(raw, max, redact);
        // A function name, shown demangled, and whether it is the language runtime's.
        let function = |raw: &str| (text(&demangle(raw), MAX_FRAME_TEXT_BYTES), is_runtime(raw));
        for frame in frames {
            let module = frame
                .module
                .map(|m| text(m, MAX_MODULE_NAME_BYTES))
                .unwrap_or_default();
            let own = frame.name.map(function);
            // Without DWARF a frame is the function wasmtime names; with it, one frame per
            // function the compiler inlined there, the innermost first. The outermost of those
            // is the function itself: its name-section name is a full path, where DWARF often
            // has only the bare name.
            let last = frame.symbols.len().saturating_sub(1);
            let expanded: Vec<GuestFrame> = if frame.symbols.is_empty() {
                vec![GuestFrame {
                    module: module.clone(),
                    func_index: frame.func_index,
                    runtime: own.as_ref().is_some_and(|(_, r)| *r),
                    function: own.map(|(name, _)| name),
                    location: None,
                    inlined: false,
                }]
            } else {
                frame
                    .symbols
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        let named = if i == last {
                            own.clone().or_else(|| s.name.map(function))
                        } else {
                            s.name.map(function)
                        };
                        GuestFrame {
                            module: module.clone(),
                            func_index: frame.func_index,
                            runtime: named.as_ref().is_some_and(|(_, r)| *r),
                            function: named.map(|(name, _)| name),
                            location: s.file.map(|file| {
                                let at = match (s.line, s.column) {
                                    (Some(l), Some(c)) => format!("{file}:{l}:{c}"),
                                    (Some(l), None) => format!("{file}:{l}"),
                                    _ => file.to_string(),
                                };
                                text(&at, MAX_FRAME_TEXT_BYTES)
                            }),
                            inlined: i < last,
                        }
                    })
                    .collect()
            };
            for f in expanded {
                if out.frames.len() == MAX_BACKTRACE_FRAMES {
                    out.cut = true;
                    return out;
                }
                out.frames.push(f);
            }
        }
        out
    }

    /// Whether wasmtime captured no frame.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// The short form for messages, events and log lines: the names of the innermost
    /// `SHORT_BACKTRACE_FRAMES` frames below the language runtime's panic and abort machinery
    /// (which says nothing about the bug), joined by `←` ("called from"), at most
    /// [`MAX_SHORT_BACKTRACE_BYTES`]. Empty when those frames have no names: a stripped driver's
    /// function indices mean nothing to an operator.
    pub fn short(&self) -> String {
        let own = self
            .frames
            .iter()
            .skip_while(|f| f.function.is_none() || f.runtime);
        let names: Vec<String> = own
            .take(SHORT_BACKTRACE_FRAMES)
            .map(|f| match &f.function {
                Some(name) => cut_marked(name, MAX_SHORT_FRAME_BYTES),
                None => format!("<wasm function {}>", f.func_index),
            })
            .collect();
        names.join(SEPARATOR)
    }

    /// Every frame for `wasm-ccm-dev`, innermost first: `#N module!function`, with `at
    /// file:line` on the line below when DWARF gave one; a hint when the driver has no names.
    pub fn full(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        for (i, f) in self.frames.iter().enumerate() {
            let _ = write!(out, "  #{i:<2} ");
            if !f.module.is_empty() {
                let _ = write!(out, "{}!", f.module);
            }
            match &f.function {
                Some(name) => out.push_str(name),
                None => {
                    let _ = write!(out, "<wasm function {}>", f.func_index);
                }
            }
            if f.inlined {
                out.push_str(" (inlined)");
            }
            if let Some(at) = &f.location {
                let _ = write!(out, "\n        at {at}");
            }
            out.push('\n');
        }
        if self.cut {
            let _ = writeln!(
                out,
                "  … outer frames not shown (the innermost {MAX_BACKTRACE_FRAMES} are kept)"
            );
        }
        if !self.frames.is_empty() && self.frames.iter().all(|f| f.function.is_none()) {
            out.push_str(
                "  (no function names: the driver was built without a name section, e.g. with `strip = true`; docs/debugging-a-driver.md says how to keep them)\n",
            );
        }
        out
    }
}

/// `"; stack: a ← b ← c"` after a trap's detail, or nothing when the short form is empty.
struct StackSuffix<'a>(&'a GuestBacktrace);

impl fmt::Display for StackSuffix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let short = self.0.short();
        if short.is_empty() {
            Ok(())
        } else {
            write!(f, "; stack: {short}")
        }
    }
}

/// Crates of the Rust runtime: a panic runs through a dozen of their frames before the trap.
const RUNTIME_CRATES: &[&str] = &[
    "std",
    "core",
    "alloc",
    "panic_abort",
    "panic_unwind",
    "__rustc",
];

/// Whether the function named `raw` (as the module names it) is the language runtime's: a path
/// in one of [`RUNTIME_CRATES`] (also `<std::…>` impls), a symbol of its panic entry points, or
/// libc's `abort`. A name of the driver's own crate never matches, whatever it calls.
fn is_runtime(raw: &str) -> bool {
    if raw == "abort"
        || [
            "__rust_",
            "rust_panic",
            "rust_begin_unwind",
            "__rdl_",
            "__rg_",
        ]
        .iter()
        .any(|p| raw.starts_with(p))
    {
        return true;
    }
    let krate = match raw.strip_prefix("_R") {
        Some(v0) => V0::new(v0).crate_root(),
        None => {
            let shown = demangle(raw);
            let bare = shown.strip_prefix('<').unwrap_or(&shown);
            bare.split_once("::").map(|(k, _)| k.to_string())
        }
    };
    krate.is_some_and(|k| RUNTIME_CRATES.contains(&k.as_str()))
}

/// Replaces control characters (including newlines: a frame is one line) and the invisible
/// characters that reorder or hide text on a terminal (bidirectional overrides, zero-width
/// marks) with `�`, so that a name cannot forge lines or disguise itself.
pub fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| {
            let invisible = matches!(c,
                '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}');
            if c.is_control() || invisible {
                '\u{FFFD}'
            } else {
                c
            }
        })
        .collect()
}

/// Driver text made safe to show: redacted (before any cut), control characters replaced, at
/// most `max` bytes, ending in `…` when something was cut.
fn bounded_text(raw: &str, max: usize, redact: &dyn Fn(&str, usize) -> String) -> String {
    // Cutting after redaction is safe: every secret is already replaced.
    let safe = sanitize(&redact(raw, max));
    if raw.len() > max || safe.len() > max {
        with_ellipsis(&safe, max)
    } else {
        safe
    }
}

/// At most `max` bytes of `text`, cut on a character boundary and ending in `…` when cut.
fn cut_marked(text: &str, max: usize) -> String {
    if text.len() <= max {
        text.to_string()
    } else {
        with_ellipsis(text, max)
    }
}

/// `text` cut on a character boundary to leave room for `…` within `max` bytes, then `…`.
fn with_ellipsis(text: &str, max: usize) -> String {
    let mut end = max.saturating_sub('…'.len_utf8()).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// `name` demangled when it is a Rust symbol this host can read (legacy `_ZN…E`, or a v0
/// `_R…` path without generics), else as it is.
fn demangle(name: &str) -> std::borrow::Cow<'_, str> {
    if name.len() <= MAX_DEMANGLE_BYTES {
        let demangled = match name.strip_prefix("_R") {
            Some(v0) => V0::new(v0).path(),
            None => demangle_legacy(name),
        };
        if let Some(d) = demangled {
            return std::borrow::Cow::Owned(d);
        }
    }
    std::borrow::Cow::Borrowed(name)
}

/// A reader of Rust's v0 symbol mangling (RFC 2603), which the standard library is built with:
/// enough of it to show the path of a non-generic function (crates, modules, closures, shims,
/// back references) and to find the crate any path starts in. Generic and impl paths need the
/// whole type grammar; those names stay as they are. Every step is bounded: back references
/// only point backwards and nesting stops at [`V0::MAX_DEPTH`].
struct V0<'a> {
    /// The symbol after `_R`, which back references index.
    s: &'a [u8],
    pos: usize,
    depth: usize,
}

impl<'a> V0<'a> {
    const MAX_DEPTH: usize = 64;

    fn new(after_r: &'a str) -> Self {
        V0 {
            s: after_r.as_bytes(),
            pos: 0,
            depth: 0,
        }
    }

    fn next(&mut self) -> Option<u8> {
        let b = *self.s.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    fn eat(&mut self, b: u8) -> bool {
        let hit = self.s.get(self.pos) == Some(&b);
        if hit {
            self.pos += 1;
        }
        hit
    }

    /// `{0-9a-zA-Z} _`: `_` alone is 0, digits `d` are `d + 1`.
    fn base62(&mut self) -> Option<u64> {
        if self.eat(b'_') {
            return Some(0);
        }
        let mut x: u64 = 0;
        loop {
            let d = match self.next()? {
                b'_' => return x.checked_add(1),
                b @ b'0'..=b'9' => b - b'0',
                b @ b'a'..=b'z' => b - b'a' + 10,
                b @ b'A'..=b'Z' => b - b'A' + 36,
                _ => return None,
            };
            x = x.checked_mul(62)?.checked_add(u64::from(d))?;
        }
    }

    /// `[s <base-62>]`: 0 when absent.
    fn disambiguator(&mut self) -> Option<u64> {
        if self.eat(b's') {
            self.base62()?.checked_add(1)
        } else {
            Some(0)
        }
    }

    /// `<decimal> [_] <bytes>`; punycode (`u…`) is not read.
    fn ident(&mut self) -> Option<&'a str> {
        if self.s.get(self.pos) == Some(&b'u') {
            return None;
        }
        let digits = self.s[self.pos..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let text = std::str::from_utf8(self.s.get(self.pos..self.pos + digits)?).ok()?;
        if digits == 0 || (digits > 1 && text.starts_with('0')) {
            return None;
        }
        let len: usize = text.parse().ok()?;
        self.pos += digits;
        self.eat(b'_');
        let end = self.pos.checked_add(len)?;
        let bytes = self.s.get(self.pos..end)?;
        self.pos = end;
        std::str::from_utf8(bytes).ok()
    }

    /// Follows `B <base-62>` (its `B` already read at `start`) with `f`, then comes back.
    fn backref<T>(&mut self, start: usize, f: fn(&mut Self) -> Option<T>) -> Option<T> {
        let at = usize::try_from(self.base62()?).ok()?;
        if at >= start {
            return None;
        }
        let resume = self.pos;
        self.pos = at;
        let r = f(self);
        self.pos = resume;
        r
    }

    /// The path as rustc-demangle would show it, for the forms this reader knows.
    fn path(&mut self) -> Option<String> {
        self.depth += 1;
        if self.depth > Self::MAX_DEPTH {
            return None;
        }
        let start = self.pos;
        let shown = match self.next()? {
            b'C' => {
                self.disambiguator()?;
                Some(self.ident()?.to_string())
            }
            b'N' => {
                let ns = self.next()?;
                let parent = self.path()?;
                let n = self.disambiguator()?;
                let name = self.ident()?;
                match ns {
                    b'a'..=b'z' => Some(format!("{parent}::{name}")),
                    b'C' if name.is_empty() => Some(format!("{parent}::{{closure#{n}}}")),
                    b'C' => Some(format!("{parent}::{{closure:{name}#{n}}}")),
                    b'S' => Some(format!("{parent}::{{shim:{name}#{n}}}")),
                    b'A'..=b'Z' => Some(format!("{parent}::{{{}:{name}#{n}}}", ns as char)),
                    _ => None,
                }
            }
            b'B' => self.backref(start, Self::path),
            // Generic arguments (`I`) and impls (`M`, `X`, `Y`) carry types.
            _ => None,
        };
        self.depth -= 1;
        shown
    }

    /// The crate the path starts in (the leftmost crate root), generic or not.
    fn crate_root(&mut self) -> Option<String> {
        self.depth += 1;
        if self.depth > Self::MAX_DEPTH {
            return None;
        }
        let start = self.pos;
        let root = match self.next()? {
            b'C' => {
                self.disambiguator()?;
                Some(self.ident()?.to_string())
            }
            b'N' => {
                self.next()?;
                self.crate_root()
            }
            b'I' => self.crate_root(),
            // An impl's path is the module it is written in.
            b'M' | b'X' => {
                self.disambiguator()?;
                self.crate_root()
            }
            b'B' => self.backref(start, Self::crate_root),
            _ => None,
        };
        self.depth -= 1;
        root
    }
}

/// Rust's legacy symbol mangling (what stable rustc emits): `_ZN` + length-prefixed path
/// segments + `E`, the last segment a `h` + 16 hex digit hash that is dropped, `$…$` escapes and
/// `..` for `::` inside segments. `None` for anything else (v0 `_R` and C++ names stay as they
/// are). The runtime crate has no demangler of its own to call, and this scheme is small.
fn demangle_legacy(name: &str) -> Option<String> {
    let mut rest = ["_ZN", "ZN", "__ZN"]
        .iter()
        .find_map(|p| name.strip_prefix(p))?;
    let mut parts = Vec::new();
    loop {
        if let Some(after) = rest.strip_prefix('E') {
            // Only a `.llvm.…`-style suffix may follow.
            if !after.is_empty() && !after.starts_with('.') {
                return None;
            }
            break;
        }
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let len: usize = rest.get(..digits)?.parse().ok()?;
        let end = digits.checked_add(len)?;
        parts.push(rest.get(digits..end)?);
        rest = rest.get(end..)?;
    }
    if parts.last().is_some_and(|h| {
        h.len() == 17 && h.starts_with('h') && h[1..].bytes().all(|b| b.is_ascii_hexdigit())
    }) {
        parts.pop();
    }
    if parts.is_empty() {
        return None;
    }
    let mut out = String::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push_str("::");
        }
        let mut s = part.strip_prefix("_$").map_or(*part, |_| &part[1..]);
        while !s.is_empty() {
            if let Some(after) = s.strip_prefix("..") {
                out.push_str("::");
                s = after;
            } else if let Some(after) = s.strip_prefix('$') {
                let close = after.find('$')?;
                let c = match &after[..close] {
                    "SP" => '@',
                    "BP" => '*',
                    "RF" => '&',
                    "LT" => '<',
                    "GT" => '>',
                    "LP" => '(',
                    "RP" => ')',
                    "C" => ',',
                    escape => {
                        char::from_u32(u32::from_str_radix(escape.strip_prefix('u')?, 16).ok()?)?
                    }
                };
                out.push(c);
                s = &after[close + 1..];
            } else {
                // A hostile name need not be ASCII: step over the first character whole.
                let first = s.chars().next().map_or(1, char::len_utf8);
                let plain = s[first..].find(['$', '.']).map_or(s.len(), |n| n + first);
                out.push_str(&s[..plain]);
                s = &s[plain..];
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod backtrace_tests {
    use super::*;

    fn no_secrets(text: &str, max: usize) -> String {
        let mut end = text.len().min(max);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text[..end].to_string()
    }

    fn frame(name: Option<&str>) -> RawFrame<'_> {
        RawFrame {
            module: None,
            func_index: 7,
            name,
            symbols: Vec::new(),
        }
    }

    #[test]
    fn legacy_rust_names_are_demangled() {
        let cases = [
            (
                "_ZN13broken_driver5crash7descend17h0123456789abcdefE",
                "broken_driver::crash::descend",
            ),
            (
                "_ZN4core9panicking9panic_fmt17h3a1b2c3d4e5f6a7bE.llvm.123",
                "core::panicking::panic_fmt",
            ),
            (
                "_ZN65_$LT$broken_driver..Broken$u20$as$u20$wasm_ccm_sdk..Instances$GT$17instance_metadata17h0011223344556677E",
                "<broken_driver::Broken as wasm_ccm_sdk::Instances>::instance_metadata",
            ),
            (
                "_ZN3std9panicking19begin_panic_handler28_$u7b$$u7b$closure$u7d$$u7d$17h0011223344556677E",
                "std::panicking::begin_panic_handler::{{closure}}",
            ),
        ];
        for (mangled, want) in cases {
            assert_eq!(demangle_legacy(mangled).as_deref(), Some(want), "{mangled}");
        }
        for not_legacy in [
            "descend",
            // Generic (v0 `I`): needs the type grammar.
            "_RINvCs1234_5crate4funcpE",
            // A back reference that does not point backwards.
            "_RNvB0_3foo",
            "_ZN99999999999999999999999x",
            "_ZN5shortE_trailing",
            "_ZN3a$u",
            "_ZN4$u7bE",
        ] {
            assert_eq!(
                demangle(not_legacy),
                not_legacy,
                "{not_legacy} stays as it is"
            );
        }
    }

    #[test]
    fn v0_paths_of_the_standard_library_are_demangled_and_known_as_the_runtime() {
        let cases = [
            (
                "_RNvNtNtNtNtCshXfaRvt2tfW_3std3sys3pal4wasi7helpers14abort_internal",
                "std::sys::pal::wasi::helpers::abort_internal",
            ),
            (
                "_RNvCsfLfy6EI15iL_7___rustc12___rust_abort",
                "__rustc::__rust_abort",
            ),
            (
                "_RNCNvNtCshXfaRvt2tfW_3std9panicking13panic_handler0B5_",
                "std::panicking::panic_handler::{closure#0}",
            ),
            ("_RNvCs1234_5crate4func", "crate::func"),
        ];
        for (mangled, want) in cases {
            assert_eq!(demangle(mangled), want, "{mangled}");
        }
        let generic = "_RINvNtNtCshXfaRvt2tfW_3std3sys9backtrace26___rust_end_short_backtraceNCNvNtB6_9panicking13panic_handler0zEB6_";
        assert_eq!(demangle(generic), generic, "generic paths stay as they are");
        for runtime in [
            generic,
            cases[0].0,
            cases[1].0,
            "abort",
            "_ZN4core3str21_$LT$impl$u20$str$GT$5rfind17hcb32670e46576237E",
            "<alloc::vec::Vec<u8> as core::ops::drop::Drop>::drop",
        ] {
            assert!(is_runtime(runtime), "{runtime}");
        }
        for driver in [
            "_ZN13broken_driver5crash7descend17h85808446b8dac7dcE",
            "_RNvCs1234_5crate4func",
            "descend",
            "<broken_driver::Broken as wasm_ccm_sdk::Instances>::instance_metadata",
        ] {
            assert!(!is_runtime(driver), "{driver}");
        }
    }

    #[test]
    fn the_short_form_skips_the_panic_machinery_and_is_bounded() {
        let long = format!("driver::{}", "x".repeat(10_000));
        let names = [
            None,
            Some("panic_abort::__rust_start_panic::abort"),
            Some("std::panicking::rust_panic_with_hook"),
            Some(
                "<std::panicking::begin_panic_handler::StaticStrPayload as core::panic::PanicPayload>::take_box",
            ),
            Some("core::panicking::panic_fmt"),
            Some("driver::crash"),
            Some(long.as_str()),
            None,
            Some("driver::never_shown"),
        ];
        let bt = GuestBacktrace::new(names.iter().map(|n| frame(*n)), &no_secrets);
        let short = bt.short();
        assert!(short.starts_with("driver::crash ← driver::xxx"), "{short}");
        assert!(short.ends_with("← <wasm function 7>"), "{short}");
        assert!(short.len() <= MAX_SHORT_BACKTRACE_BYTES, "{}", short.len());
        assert!(
            bt.frames.iter().all(|f| f
                .function
                .as_ref()
                .is_none_or(|n| n.len() <= MAX_FRAME_TEXT_BYTES)),
            "every name is bounded"
        );
    }

    #[test]
    fn frames_are_bounded_in_number_and_unnamed_ones_stay_out_of_messages() {
        let bt = GuestBacktrace::new((0..1000).map(|_| frame(None)), &no_secrets);
        assert_eq!(bt.frames.len(), MAX_BACKTRACE_FRAMES);
        assert!(bt.cut);
        assert_eq!(
            bt.short(),
            "",
            "a stripped driver's indices say nothing to an operator"
        );
        let full = bt.full();
        assert!(full.contains("outer frames not shown"), "{full}");
        assert!(full.contains("no function names"), "{full}");
    }

    #[test]
    fn control_and_invisible_characters_cannot_forge_lines() {
        let bt = GuestBacktrace::new(
            [frame(Some("evil\n  #1 forged\u{1b}[2J\u{202E}name"))],
            &no_secrets,
        );
        let name = bt.frames[0].function.clone().unwrap_or_default();
        assert_eq!(name, "evil�  #1 forged�[2J�name");
        assert_eq!(bt.full().lines().count(), 1, "{}", bt.full());
    }

    #[test]
    fn dwarf_symbols_become_frames_with_locations() {
        let raw = RawFrame {
            module: Some("m"),
            func_index: 3,
            name: Some("_ZN1d5outer17h0000000000000000E"),
            symbols: vec![
                RawSymbol {
                    name: Some("_ZN1d5inner17h0000000000000000E"),
                    file: Some("src/lib.rs"),
                    line: Some(12),
                    column: Some(9),
                },
                RawSymbol {
                    name: None,
                    file: Some("src/lib.rs"),
                    line: Some(30),
                    column: None,
                },
            ],
        };
        let bt = GuestBacktrace::new([raw], &no_secrets);
        assert_eq!(bt.frames.len(), 2);
        assert_eq!(bt.frames[0].function.as_deref(), Some("d::inner"));
        assert!(bt.frames[0].inlined);
        assert_eq!(bt.frames[0].location.as_deref(), Some("src/lib.rs:12:9"));
        assert_eq!(bt.frames[1].function.as_deref(), Some("d::outer"));
        assert_eq!(bt.frames[1].location.as_deref(), Some("src/lib.rs:30"));
        assert!(
            bt.full()
                .contains("m!d::inner (inlined)\n        at src/lib.rs:12:9")
        );
    }

    #[test]
    fn redaction_runs_on_every_text() {
        let redact =
            |t: &str, max: usize| no_secrets(&t.replace("hunter22secret", "[redacted]"), max);
        let raw = RawFrame {
            module: Some("mod-hunter22secret"),
            func_index: 0,
            name: Some("leak_hunter22secret_here"),
            symbols: Vec::new(),
        };
        let bt = GuestBacktrace::new([raw], &redact);
        let full = bt.full();
        assert!(!full.contains("hunter22secret"), "{full}");
        assert!(
            full.contains("mod-[redacted]!leak_[redacted]_here"),
            "{full}"
        );
    }
}
