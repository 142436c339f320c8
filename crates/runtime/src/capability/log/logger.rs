//! The logger behind the `log` capability: driver log lines into the host's log, tagged,
//! rate-limited and redacted. Every driver text the host quotes goes through its redactor.

use std::borrow::Cow;

pub use crate::config_secrets::is_secret_env_name;
pub use crate::text::{cut, shown};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::token_bucket::TokenBucket;

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Finest detail.
    Trace,
    /// Detail for debugging a driver.
    Debug,
    /// Normal operation.
    Info,
    /// Something unexpected the driver worked around.
    Warn,
    /// A failure.
    Error,
}

/// Where a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The driver's `log` import.
    Driver,
    /// The driver's stdout.
    Stdout,
    /// The driver's stderr.
    Stderr,
    /// The host, about the driver (e.g. dropped lines).
    Host,
}

/// One log line, already redacted. Borrowed, so a sink that drops or formats it costs no copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LogRecord<'a> {
    /// Severity.
    pub level: Level,
    /// The import or stream it came through.
    pub source: Source,
    /// The driver's name.
    pub driver: &'a str,
    /// The call it was written in, as `interface.function`.
    pub function: &'a str,
    /// The object the call was for (a node's name, a Service's `namespace/name`), or empty.
    pub object: &'a str,
    /// The line.
    pub message: &'a str,
    /// Structured key-value pairs the driver attached.
    pub fields: &'a [(String, String)],
}

/// An owned copy of a [`LogRecord`], as [`MemorySink`] keeps it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LogLine {
    /// Severity.
    pub level: Level,
    /// The import or stream it came through.
    pub source: Source,
    /// The driver's name.
    pub driver: String,
    /// The call it was written in, as `interface.function`.
    pub function: String,
    /// The object the call was for (a node's name, a Service's `namespace/name`), or empty.
    pub object: String,
    /// The line.
    pub message: String,
    /// Structured key-value pairs the driver attached.
    pub fields: Vec<(String, String)>,
}

impl From<&LogRecord<'_>> for LogLine {
    fn from(r: &LogRecord<'_>) -> Self {
        LogLine {
            level: r.level,
            source: r.source,
            driver: r.driver.to_string(),
            function: r.function.to_string(),
            object: r.object.to_string(),
            message: r.message.to_string(),
            fields: r.fields.to_vec(),
        }
    }
}

/// Where log records go. The host uses `TracingSink`; tests and the conformance runner use
/// [`MemorySink`] to look at what a driver logged.
pub trait LogSink: Send + Sync {
    /// Receives one record.
    fn emit(&self, record: &LogRecord<'_>);
}

/// Forwards records to `tracing` under target `wasm_ccm::driver`.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct TracingSink;

impl LogSink for TracingSink {
    fn emit(&self, r: &LogRecord<'_>) {
        let fields = r
            .fields
            .iter()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect::<Vec<_>>()
            .join(" ");
        macro_rules! emit {
            ($lvl:expr) => {
                tracing::event!(target: "wasm_ccm::driver", $lvl, driver = %r.driver, function = %r.function,
                    object = %r.object, source = ?r.source, fields = %fields, "{}", r.message)
            };
        }
        match r.level {
            Level::Trace => emit!(tracing::Level::TRACE),
            Level::Debug => emit!(tracing::Level::DEBUG),
            Level::Info => emit!(tracing::Level::INFO),
            Level::Warn => emit!(tracing::Level::WARN),
            Level::Error => emit!(tracing::Level::ERROR),
        }
    }
}

/// Keeps every record in memory.
#[derive(Debug, Default)]
pub struct MemorySink {
    records: Mutex<Vec<LogLine>>,
}

impl MemorySink {
    /// A copy of every record so far.
    pub fn records(&self) -> Vec<LogLine> {
        self.records.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl LogSink for MemorySink {
    fn emit(&self, record: &LogRecord<'_>) {
        if let Ok(mut r) = self.records.lock() {
            r.push(LogLine::from(record));
        }
    }
}

/// Drops every record (benchmarks).
#[derive(Debug, Default, Clone, Copy)]
pub struct NullSink;

impl LogSink for NullSink {
    fn emit(&self, _: &LogRecord<'_>) {}
}

/// How much a driver may log.
#[derive(Debug, Clone, Copy)]
pub struct LogLimits {
    /// Sustained lines per second.
    pub lines_per_second: u32,
    /// Lines allowed in a burst.
    pub burst: u32,
    /// Longest record kept, in bytes, message and every field key and value together; longer
    /// ones are cut.
    pub max_line_bytes: usize,
    /// Most fields kept in one record; the rest are dropped with a note.
    pub max_fields: usize,
    /// Sustained bytes per second (after cutting), so that long lines cannot flood the host's
    /// log at the line rate.
    pub bytes_per_second: u32,
    /// Bytes allowed in a burst.
    pub burst_bytes: u32,
}

impl Default for LogLimits {
    fn default() -> Self {
        LogLimits {
            lines_per_second: 100,
            burst: 1000,
            max_line_bytes: 8 * 1024,
            max_fields: 32,
            bytes_per_second: 64 * 1024,
            burst_bytes: 1024 * 1024,
        }
    }
}

/// The smallest value the host treats as a secret when the host found it (an environment
/// variable named like a credential).
const MIN_SECRET_LEN: usize = 4;
/// The smallest value a driver may register with `log.redact`: shorter ones would let it blank
/// out ordinary words (`node`, `info`) from its own lines and events.
pub(crate) const MIN_DRIVER_SECRET_LEN: usize = 8;
/// The longest secret a driver may register; longer values are refused with a warning (no
/// credential is this long, and each one is searched for in every line).
pub(crate) const MAX_DRIVER_SECRET_BYTES: usize = 4 * 1024;
/// Secrets a driver may have registered at once; registering more forgets the oldest (a driver
/// that refreshes a token every hour keeps its newest ones redacted, and memory stays bounded).
pub const MAX_DRIVER_SECRETS: usize = 64;
const REDACTED: &str = "[redacted]";
/// Longest field key kept.
const MAX_FIELD_KEY_BYTES: usize = 256;

/// A driver's logger, shared by all its instances.
pub(crate) struct DriverLogger {
    driver: String,
    sink: Arc<dyn LogSink>,
    limits: LogLimits,
    /// Lines a second (`lines_per_second`, `burst`).
    lines: TokenBucket,
    /// Bytes a second after cutting (`bytes_per_second`, `burst_bytes`).
    bytes: TokenBucket,
    dropped_total: AtomicU64,
    dropped_unreported: AtomicU64,
    secrets: RwLock<Secrets>,
}

/// Values never to show: the host's own finds (kept for the driver's life) and the driver's
/// (`log.redact`, bounded, oldest forgotten first). `sorted` is both, longest first.
#[derive(Default)]
struct Secrets {
    pinned: Vec<String>,
    driver: std::collections::VecDeque<String>,
    sorted: Vec<String>,
}

impl Secrets {
    fn contains(&self, s: &str) -> bool {
        self.pinned.iter().chain(self.driver.iter()).any(|x| x == s)
    }

    fn resort(&mut self) {
        self.sorted = self
            .pinned
            .iter()
            .chain(self.driver.iter())
            .cloned()
            .collect();
        // Longest first, so a secret that contains another is replaced whole.
        self.sorted.sort_by_key(|x| std::cmp::Reverse(x.len()));
    }
}

impl DriverLogger {
    /// A logger for `driver` writing to `sink`.
    pub(crate) fn new(driver: &str, sink: Arc<dyn LogSink>, limits: LogLimits) -> Self {
        DriverLogger {
            driver: driver.to_string(),
            sink,
            limits,
            lines: log_bucket(limits.lines_per_second, limits.burst),
            bytes: log_bucket(limits.bytes_per_second, limits.burst_bytes),
            dropped_total: AtomicU64::new(0),
            dropped_unreported: AtomicU64::new(0),
            secrets: RwLock::new(Secrets::default()),
        }
    }

    /// Lines dropped by the rate limit since the driver was loaded.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped_total.load(Ordering::Relaxed)
    }

    /// Marks `secret`, found by the host (a credential-named environment variable), so it never
    /// appears in a line again, for the driver's whole life.
    pub(crate) fn add_secret(&self, secret: &str) {
        if secret.len() < MIN_SECRET_LEN {
            return;
        }
        if let Ok(mut s) = self.secrets.write()
            && !s.contains(secret)
        {
            s.pinned.push(secret.to_string());
            s.resort();
        }
    }

    /// `log.redact` from the driver: like [`DriverLogger::add_secret`], but bounded in length
    /// and count so that a driver cannot grow the host (see [`MAX_DRIVER_SECRETS`]).
    pub(crate) fn add_driver_secret(&self, secret: &str, function: &str, object: &str) {
        if secret.len() < MIN_DRIVER_SECRET_LEN {
            return;
        }
        if secret.len() > MAX_DRIVER_SECRET_BYTES {
            let message = format!(
                "driver {} asked to redact a value of {} bytes; values over {MAX_DRIVER_SECRET_BYTES} bytes are not redacted (and not kept): redact the credential, not a whole document",
                self.driver,
                secret.len()
            );
            self.host_warning(function, object, &message);
            return;
        }
        if let Ok(mut s) = self.secrets.write()
            && !s.contains(secret)
        {
            if s.driver.len() >= MAX_DRIVER_SECRETS {
                s.driver.pop_front();
            }
            s.driver.push_back(secret.to_string());
            s.resort();
        }
    }

    /// Secrets held now (host-found and driver-registered).
    pub(crate) fn secret_count(&self) -> usize {
        self.secrets.read().map(|s| s.sorted.len()).unwrap_or(0)
    }

    /// Replaces every known secret in `text`.
    pub(crate) fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.secrets.read() {
            Ok(secrets) => redact_with(&secrets.sorted, text),
            Err(_) => Cow::Borrowed(text),
        }
    }

    /// `text` with every known secret of at least [`MIN_DRIVER_SECRET_LEN`] bytes replaced: for
    /// a driver's answers, which the host writes to Kubernetes, where a short "secret" (a host
    /// one may be 4 bytes) would too easily match an honest value and corrupt it.
    pub(crate) fn redact_answer<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Ok(secrets) = self.secrets.read() else {
            return Cow::Borrowed(text);
        };
        // `sorted` is longest first: the long ones are a prefix.
        let long = secrets
            .sorted
            .iter()
            .take_while(|s| s.len() >= MIN_DRIVER_SECRET_LEN)
            .count();
        redact_with(&secrets.sorted[..long], text)
    }

    /// At most `max` bytes of `text` with every known secret replaced. The text is cut to `max`
    /// plus the longest secret before redaction (so the work is bounded whatever its size; a
    /// secret cut there lies wholly past `max`), then to `max`.
    pub(crate) fn redact_bounded(&self, text: &str, max: usize) -> String {
        let Ok(secrets) = self.secrets.read() else {
            return cut(text, max).to_string();
        };
        let slack = secrets.sorted.first().map_or(0, String::len);
        let redacted = redact_with(&secrets.sorted, cut(text, max.saturating_add(slack)));
        cut(&redacted, max).to_string()
    }

    /// A warning from the host about the driver, subject to the same rate limit.
    fn host_warning(&self, function: &str, object: &str, message: &str) {
        if self.take_tokens(message.len()) {
            self.sink.emit(&LogRecord {
                level: Level::Warn,
                source: Source::Host,
                driver: &self.driver,
                function,
                object,
                message,
                fields: &[],
            });
        }
    }

    /// Logs one line from the driver, if the rate limit allows.
    pub(crate) fn log(
        &self,
        level: Level,
        source: Source,
        function: &str,
        object: &str,
        message: &str,
        fields: &[(String, String)],
    ) {
        let max = self.limits.max_line_bytes;
        // One read of the secret list for the whole line.
        let guard = self.secrets.read();
        let secrets: &[String] = guard.as_deref().map(|s| s.sorted.as_slice()).unwrap_or(&[]);
        // Each part is cut to the line's size plus the longest secret before any work, so the
        // cost of redaction is bounded; a secret cut by this lies wholly past `max` and the final
        // cut below removes what is left of it (redaction only moves text later).
        let slack = secrets.first().map_or(0, String::len);
        let (message, fields, dropped) =
            precut(message, fields, max + slack, self.limits.max_fields);
        let size =
            (message.len() + fields.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()).min(max);
        if !self.take_tokens(size) {
            self.dropped_total.fetch_add(1, Ordering::Relaxed);
            self.dropped_unreported.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let unreported = self.dropped_unreported.swap(0, Ordering::Relaxed);
        if unreported > 0 {
            let message = format!(
                "dropped {unreported} log lines of driver {} (limit {} lines/s, burst {}; {} bytes/s, burst {} bytes)",
                self.driver,
                self.limits.lines_per_second,
                self.limits.burst,
                self.limits.bytes_per_second,
                self.limits.burst_bytes
            );
            self.sink.emit(&LogRecord {
                level: Level::Warn,
                source: Source::Host,
                driver: &self.driver,
                function,
                object,
                message: &message,
                fields: &[],
            });
        }
        let message = redact_with(secrets, &message);
        // Copy the fields only from the first one that redaction changes.
        let mut cleaned: Option<Vec<(String, String)>> = None;
        for (i, (k, v)) in fields.iter().enumerate() {
            let (k2, v2) = (redact_with(secrets, k), redact_with(secrets, v));
            let changed = matches!(k2, Cow::Owned(_)) || matches!(v2, Cow::Owned(_));
            if changed && cleaned.is_none() {
                cleaned = Some(fields[..i].to_vec());
            }
            if let Some(c) = cleaned.as_mut() {
                c.push((k2.into_owned(), v2.into_owned()));
            }
        }
        let fields = cleaned.as_deref().unwrap_or(&fields);
        let (message, fields) = bound_record(&message, fields, max, dropped);
        self.sink.emit(&LogRecord {
            level,
            source,
            driver: &self.driver,
            function,
            object,
            message: &message,
            fields: &fields,
        });
    }

    /// Takes one line and `bytes` bytes from the buckets, or neither.
    fn take_tokens(&self, bytes: usize) -> bool {
        // One clock read for both buckets (it is on every line's path).
        let now = tokio::time::Instant::now();
        if !self.lines.try_take_at(1.0, now) {
            return false;
        }
        if self.bytes.try_take_at(bytes as f64, now) {
            return true;
        }
        // Not logged: the line's token was not spent.
        self.lines.give_back(1.0);
        false
    }
}

/// A bucket of `burst` refilled at `per_second`; a rate of 0 means the burst and then nothing
/// (a log limit, unlike [`TokenBucket::new`]'s 0, is never "unlimited").
fn log_bucket(per_second: u32, burst: u32) -> TokenBucket {
    match per_second {
        0 => TokenBucket::without_refill(burst),
        rate => TokenBucket::new(f64::from(rate), burst),
    }
}

/// A record's fields, borrowed unless something had to change.
type Fields<'a> = Cow<'a, [(String, String)]>;

/// Cuts each part of a record (message, every key and value) to `each` bytes and keeps
/// the first `max_fields` fields, returning how many fields were dropped. Borrows when nothing
/// is cut.
fn precut<'a>(
    message: &'a str,
    fields: &'a [(String, String)],
    each: usize,
    max_fields: usize,
) -> (Cow<'a, str>, Fields<'a>, usize) {
    let dropped = fields.len().saturating_sub(max_fields);
    let fields = &fields[..fields.len().min(max_fields)];
    let fits = |k: &str, v: &str| k.len() <= each && v.len() <= each;
    let fields = if fields.iter().all(|(k, v)| fits(k, v)) {
        Cow::Borrowed(fields)
    } else {
        Cow::Owned(
            fields
                .iter()
                .map(|(k, v)| (cut(k, each).to_string(), cut(v, each).to_string()))
                .collect(),
        )
    };
    let message = if message.len() <= each {
        Cow::Borrowed(message)
    } else {
        Cow::Borrowed(cut(message, each))
    };
    (message, fields, dropped)
}

/// Cuts a record to `max` bytes over message, keys and values together (the markers saying what
/// was cut come on top). The budget goes to the message first, then to fields in order; what
/// does not fit is dropped, and a last field says how many were (`dropped` of them already
/// before).
fn bound_record<'a>(
    message: &'a str,
    fields: &'a [(String, String)],
    max: usize,
    dropped: usize,
) -> (Cow<'a, str>, Fields<'a>) {
    let total: usize = message.len() + fields.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>();
    if total <= max && dropped == 0 {
        return (Cow::Borrowed(message), Cow::Borrowed(fields));
    }
    let message = truncate(Cow::Borrowed(message), max);
    let mut left = max.saturating_sub(message.len());
    let mut kept = Vec::new();
    let mut dropped_fields = dropped;
    for (k, v) in fields {
        if left == 0 {
            dropped_fields += 1;
            continue;
        }
        let k = truncate(Cow::Borrowed(k.as_str()), MAX_FIELD_KEY_BYTES.min(left));
        left = left.saturating_sub(k.len());
        let v = truncate(Cow::Borrowed(v.as_str()), left);
        left = left.saturating_sub(v.len());
        kept.push((k.into_owned(), v.into_owned()));
    }
    if dropped_fields > 0 {
        kept.push((
            "wasm_ccm_truncated".to_string(),
            format!("{dropped_fields} more fields dropped (a line keeps at most {max} bytes and a bounded number of fields)"),
        ));
    }
    (message, Cow::Owned(kept))
}

/// Replaces each of `secrets` (longest first) in `text`, borrowing when none occurs.
fn redact_with<'a>(secrets: &[String], text: &'a str) -> Cow<'a, str> {
    let mut out = Cow::Borrowed(text);
    for s in secrets {
        if out.contains(s.as_str()) {
            out = Cow::Owned(out.replace(s.as_str(), REDACTED));
        }
    }
    out
}

/// Room kept for the `… [truncated N bytes]` marker, so a cut part stays within `max`.
const TRUNCATION_MARK_BYTES: usize = 44;

fn truncate(s: Cow<'_, str>, max: usize) -> Cow<'_, str> {
    if s.len() <= max {
        return s;
    }
    let kept = cut(&s, max.saturating_sub(TRUNCATION_MARK_BYTES));
    Cow::Owned(format!(
        "{kept}… [truncated {} bytes]",
        s.len() - kept.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_replaced_longest_first() {
        let sink = Arc::new(MemorySink::default());
        let log = DriverLogger::new("d", sink.clone(), LogLimits::default());
        log.add_secret("abcd");
        log.add_secret("abcdefgh");
        log.add_secret("ab"); // too short to be a secret: ignored
        log.log(
            Level::Info,
            Source::Driver,
            "f",
            "o",
            "x abcdefgh y abcd z ab",
            &[("k".into(), "abcd".into())],
        );
        let r = &sink.records()[0];
        assert_eq!(r.message, "x [redacted] y [redacted] z ab");
        assert_eq!(r.fields[0].1, "[redacted]");
    }

    #[test]
    fn answers_are_redacted_of_long_secrets_only() {
        let log = DriverLogger::new("d", Arc::new(MemorySink::default()), LogLimits::default());
        log.add_secret("abcd");
        log.add_secret("a-long-secret");
        assert_eq!(
            log.redact_answer("x://abcd/a-long-secret"),
            "x://abcd/[redacted]"
        );
        // Messages lose every secret, short ones too.
        assert_eq!(
            log.redact("x://abcd/a-long-secret"),
            "x://[redacted]/[redacted]"
        );
    }

    #[test]
    fn the_rate_limit_counts_bytes_too() {
        let sink = Arc::new(MemorySink::default());
        let limits = LogLimits {
            lines_per_second: 1_000_000,
            burst: 1_000_000,
            bytes_per_second: 1,
            burst_bytes: 20 * 1024,
            ..LogLimits::default()
        };
        let log = DriverLogger::new("d", sink.clone(), limits);
        let line = "x".repeat(8 * 1024);
        for _ in 0..10 {
            log.log(Level::Info, Source::Driver, "f", "o", &line, &[]);
        }
        // 20 KiB of burst: two 8 KiB lines pass, the other eight are dropped and counted.
        assert_eq!(sink.records().len(), 2);
        assert_eq!(log.dropped(), 8);
    }

    #[test]
    fn redaction_of_a_huge_text_is_bounded_and_leaks_no_cut_secret() {
        let sink = Arc::new(MemorySink::default());
        let log = DriverLogger::new("d", sink, LogLimits::default());
        log.add_driver_secret("supersecretvalue", "f", "o");
        // The secret straddles the cut: neither it nor its head may show.
        let text = format!(
            "{}supersecretvalue{}",
            "a".repeat(1020),
            "b".repeat(1 << 20)
        );
        let out = log.redact_bounded(&text, 1024);
        assert!(out.len() <= 1024);
        assert!(!out.contains("supe"), "{}", &out[1000..]);
    }

    #[test]
    fn long_lines_are_cut_on_a_char_boundary() {
        let s = "é".repeat(100);
        let t = truncate(Cow::Borrowed(&s), 49);
        assert!(t.starts_with("éé"), "{t}");
        assert!(t.len() <= 49, "{}", t.len());
        assert!(t.contains("truncated"));
    }

    #[test]
    fn secret_env_names() {
        assert!(is_secret_env_name("CLOUDSCALE_ACCESS_TOKEN"));
        assert!(is_secret_env_name("PNAP_CLIENT_SECRET"));
        assert!(!is_secret_env_name("CLOUDSCALE_API_URL"));
        assert!(!is_secret_env_name("PNAP_AUTH_URL"));
        assert!(is_secret_env_name("PNAP_AUTH_TOKEN"));
    }
}
