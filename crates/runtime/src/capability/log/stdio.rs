//! The driver's stdout and stderr, as log lines of the `log` capability's logger.
//!
//! Rust's panic message goes to stderr before the trap, so the writer also keeps the guest's
//! last panic line: the trap message quotes it ([`crate::state::InstanceState::last_panic`]).

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};

use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

use super::CallTags;
use super::{DriverLogger, Level, Source};

/// Turns a driver's stdout or stderr into log lines.
pub(crate) struct LogOutput {
    logger: Arc<DriverLogger>,
    tags: Arc<Mutex<CallTags>>,
    panic: Arc<Mutex<Option<String>>>,
    source: Source,
}

impl LogOutput {
    /// Output for `source` (stdout or stderr) of one instance, tagged with its call's `tags`;
    /// stderr remembers a panic line in `panic`.
    pub(crate) fn new(
        logger: Arc<DriverLogger>,
        tags: Arc<Mutex<CallTags>>,
        panic: Arc<Mutex<Option<String>>>,
        source: Source,
    ) -> Self {
        LogOutput {
            logger,
            tags,
            panic,
            source,
        }
    }
}

impl IsTerminal for LogOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogOutput {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(LineWriter {
            logger: self.logger.clone(),
            tags: self.tags.clone(),
            panic: self.panic.clone(),
            source: self.source,
            pending: Vec::new(),
            after_panic_header: false,
        })
    }
}

struct LineWriter {
    logger: Arc<DriverLogger>,
    tags: Arc<Mutex<CallTags>>,
    panic: Arc<Mutex<Option<String>>>,
    source: Source,
    pending: Vec<u8>,
    /// The previous line was Rust's `thread '…' panicked at FILE:LINE:COL:` header, so this one
    /// is the panic message.
    after_panic_header: bool,
}

/// Longest panic line kept for a trap message.
const MAX_PANIC_LINE: usize = 400;

impl LineWriter {
    fn emit(&mut self, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches(['\r', '\n']);
        // Rust's panic output starts with an empty line; an empty record says nothing.
        if text.trim().is_empty() {
            return;
        }
        if self.source == Source::Stderr {
            self.remember_panic(text);
        }
        let tags = self.tags.lock().map(|t| t.clone()).unwrap_or_default();
        let level = if self.source == Source::Stderr {
            Level::Warn
        } else {
            Level::Info
        };
        self.logger
            .log(level, self.source, &tags.function, &tags.object, text, &[]);
    }
}

impl LineWriter {
    fn remember_panic(&mut self, text: &str) {
        let Ok(mut slot) = self.panic.lock() else {
            return;
        };
        if let Some(at) = text.find(" panicked at ") {
            let location = text[at + " panicked at ".len()..].trim_end_matches(':');
            // Redacted before the cut: a secret across the cut would survive as a prefix.
            *slot = Some(
                self.logger
                    .redact_bounded(&format!("at {location}"), MAX_PANIC_LINE),
            );
            self.after_panic_header = true;
        } else if self.after_panic_header {
            let location = slot.take().unwrap_or_default();
            *slot = Some(
                self.logger
                    .redact_bounded(&format!("{text} ({location})"), MAX_PANIC_LINE),
            );
            self.after_panic_header = false;
        }
    }
}

impl tokio::io::AsyncWrite for LineWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.pending.extend_from_slice(buf);
        while let Some(pos) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=pos).collect();
            self.emit(&line);
        }
        // A driver printing without newlines must not grow the host: flush long partial lines.
        if self.pending.len() >= 8 * 1024 {
            let line = std::mem::take(&mut self.pending);
            self.emit(&line);
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut TaskContext<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        _cx: &mut TaskContext<'_>,
    ) -> Poll<std::io::Result<()>> {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.emit(&line);
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;
    use crate::capability::log::{LogLimits, MemorySink};

    #[tokio::test]
    async fn stderr_lines_are_tagged_log_lines_and_a_panic_is_remembered_redacted() {
        let sink = Arc::new(MemorySink::default());
        let logger = Arc::new(DriverLogger::new(
            "acme",
            sink.clone(),
            LogLimits::default(),
        ));
        logger.add_secret("s3cr3t-token-value");
        let tags = Arc::new(Mutex::new(CallTags {
            function: "instances.instance-metadata".into(),
            object: "node-1".into(),
        }));
        let panic = Arc::new(Mutex::new(None));
        let output = LogOutput::new(logger, tags, panic.clone(), Source::Stderr);
        let mut stream = Box::into_pin(output.async_stream());
        let text =
            "\nthread '<unnamed>' panicked at src/lib.rs:3:5:\nno token s3cr3t-token-value\n";
        stream.write_all(text.as_bytes()).await.expect("written");
        let remembered = panic.lock().map(|p| p.clone()).ok().flatten();
        assert_eq!(
            remembered.as_deref(),
            Some("no token [redacted] (at src/lib.rs:3:5)")
        );
        let lines = sink.records();
        assert_eq!(lines.len(), 2, "the empty line is no record");
        assert!(lines.iter().all(|l| l.level == Level::Warn
            && l.function == "instances.instance-metadata"
            && l.object == "node-1"));
    }
}
