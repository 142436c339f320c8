//! The `log` capability: driver log lines into the host's log, tagged, rate-limited and redacted.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
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
    pub level: Level,
    pub source: Source,
    pub driver: &'a str,
    pub function: &'a str,
    pub object: &'a str,
    pub message: &'a str,
    pub fields: &'a [(String, String)],
}

/// An owned copy of a [`LogRecord`], as [`MemorySink`] keeps it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LogLine {
    pub level: Level,
    pub source: Source,
    pub driver: String,
    pub function: String,
    pub object: String,
    pub message: String,
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

/// Where log records go. The host uses [`TracingSink`]; tests and the conformance runner use
/// [`MemorySink`] to look at what a driver logged.
pub trait LogSink: Send + Sync {
    /// Receives one record.
    fn emit(&self, record: &LogRecord<'_>);
}

/// Forwards records to `tracing` under target `wasm_ccm::driver`.
#[derive(Debug, Default, Clone, Copy)]
pub struct TracingSink;

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

/// How many lines a driver may log.
#[derive(Debug, Clone, Copy)]
pub struct LogLimits {
    /// Sustained lines per second.
    pub lines_per_second: u32,
    /// Lines allowed in a burst.
    pub burst: u32,
    /// Longest line kept, in bytes; longer ones are cut.
    pub max_line_bytes: usize,
}

impl Default for LogLimits {
    fn default() -> Self {
        LogLimits {
            lines_per_second: 100,
            burst: 1000,
            max_line_bytes: 8 * 1024,
        }
    }
}

/// The smallest value the host treats as a secret: shorter strings would redact ordinary words.
const MIN_SECRET_LEN: usize = 4;
const REDACTED: &str = "[redacted]";

/// A driver's logger, shared by all its instances.
pub struct DriverLogger {
    driver: String,
    sink: Arc<dyn LogSink>,
    limits: LogLimits,
    bucket: Mutex<Bucket>,
    dropped_total: AtomicU64,
    dropped_unreported: AtomicU64,
    secrets: RwLock<Vec<String>>,
}

struct Bucket {
    tokens: f64,
    last: Instant,
}

impl DriverLogger {
    /// A logger for `driver` writing to `sink`.
    pub fn new(driver: &str, sink: Arc<dyn LogSink>, limits: LogLimits) -> Self {
        DriverLogger {
            driver: driver.to_string(),
            sink,
            limits,
            bucket: Mutex::new(Bucket {
                tokens: f64::from(limits.burst),
                last: Instant::now(),
            }),
            dropped_total: AtomicU64::new(0),
            dropped_unreported: AtomicU64::new(0),
            secrets: RwLock::new(Vec::new()),
        }
    }

    /// Lines dropped by the rate limit since the driver was loaded.
    pub fn dropped(&self) -> u64 {
        self.dropped_total.load(Ordering::Relaxed)
    }

    /// Marks `secret` so it never appears in a line again.
    pub fn add_secret(&self, secret: &str) {
        if secret.len() < MIN_SECRET_LEN {
            return;
        }
        if let Ok(mut s) = self.secrets.write()
            && !s.iter().any(|x| x == secret)
        {
            s.push(secret.to_string());
            // Longest first, so a secret that contains another is replaced whole.
            s.sort_by_key(|x| std::cmp::Reverse(x.len()));
        }
    }

    /// Replaces every known secret in `text`.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.secrets.read() {
            Ok(secrets) => redact_with(&secrets, text),
            Err(_) => Cow::Borrowed(text),
        }
    }

    /// Logs one line from the driver, if the rate limit allows.
    pub fn log(
        &self,
        level: Level,
        source: Source,
        function: &str,
        object: &str,
        message: &str,
        fields: &[(String, String)],
    ) {
        if !self.take_token() {
            self.dropped_total.fetch_add(1, Ordering::Relaxed);
            self.dropped_unreported.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let unreported = self.dropped_unreported.swap(0, Ordering::Relaxed);
        if unreported > 0 {
            let message = format!(
                "dropped {unreported} log lines of driver {} (limit {} lines/s, burst {})",
                self.driver, self.limits.lines_per_second, self.limits.burst
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
        let max = self.limits.max_line_bytes;
        // One read of the secret list for the whole line.
        let guard = self.secrets.read();
        let secrets: &[String] = guard.as_deref().map(Vec::as_slice).unwrap_or(&[]);
        let message = truncate(redact_with(secrets, message), max);
        // Copy the fields only from the first one that redaction or cutting changes.
        let mut cleaned: Option<Vec<(String, String)>> = None;
        for (i, (k, v)) in fields.iter().enumerate() {
            let (k2, v2) = (
                truncate(redact_with(secrets, k), 256),
                truncate(redact_with(secrets, v), max),
            );
            let changed = matches!(k2, Cow::Owned(_)) || matches!(v2, Cow::Owned(_));
            if changed && cleaned.is_none() {
                cleaned = Some(fields[..i].to_vec());
            }
            if let Some(c) = cleaned.as_mut() {
                c.push((k2.into_owned(), v2.into_owned()));
            }
        }
        let fields = cleaned.as_deref().unwrap_or(fields);
        self.sink.emit(&LogRecord {
            level,
            source,
            driver: &self.driver,
            function,
            object,
            message: &message,
            fields,
        });
    }

    fn take_token(&self) -> bool {
        let Ok(mut b) = self.bucket.lock() else {
            return false;
        };
        let now = Instant::now();
        let refill =
            now.duration_since(b.last).as_secs_f64() * f64::from(self.limits.lines_per_second);
        b.tokens = (b.tokens + refill).min(f64::from(self.limits.burst));
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }
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

fn truncate(s: Cow<'_, str>, max: usize) -> Cow<'_, str> {
    if s.len() <= max {
        return s;
    }
    let kept = cut(&s, max);
    Cow::Owned(format!(
        "{kept}… [truncated {} bytes]",
        s.len() - kept.len()
    ))
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub(crate) fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Environment variable names whose values the host treats as secrets without being told.
pub fn is_secret_env_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    // Addresses are not credentials, even when their name says AUTH (`PNAP_AUTH_URL`).
    if ["_URL", "_URI", "_ENDPOINT", "_HOST"]
        .iter()
        .any(|suffix| upper.ends_with(suffix))
    {
        return false;
    }
    [
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "KEY",
        "CREDENTIAL",
        "AUTH",
    ]
    .iter()
    .any(|w| upper.contains(w))
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
    fn long_lines_are_cut_on_a_char_boundary() {
        let s = "é".repeat(10);
        let t = truncate(Cow::Borrowed(&s), 5);
        assert!(t.starts_with("éé"), "{t}");
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
