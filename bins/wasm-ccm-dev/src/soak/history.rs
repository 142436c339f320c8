//! The event history: every step with its number, what the schedule picked and what came of
//! it. The schedule is a function of the seed but the timing is not, so this log (not a replay)
//! is what explains a violation; it is kept in memory and appended to a file as it grows.

use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// One line of the history.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    /// The step (0: set-up and quiescence).
    pub step: u64,
    /// Seconds since the soak started.
    pub at: f64,
    /// What happened.
    pub text: String,
}

impl Entry {
    /// `#step  +seconds  text`.
    pub(super) fn line(&self) -> String {
        format!("#{:<5} +{:>8.3}s  {}", self.step, self.at, self.text)
    }
}

/// The history of one soak.
pub(super) struct History {
    entries: Vec<Entry>,
    file: Option<BufWriter<File>>,
    path: PathBuf,
    started: Instant,
    echo: bool,
}

impl History {
    /// A history that also writes every entry to `path` (best effort: a soak is not stopped by a
    /// full disk) and, with `echo`, to stderr.
    pub(super) fn new(path: &Path, echo: bool) -> Self {
        History {
            entries: Vec::new(),
            file: File::create(path).ok().map(BufWriter::new),
            path: path.to_path_buf(),
            started: Instant::now(),
            echo,
        }
    }

    /// Records what happened at `step`.
    pub(super) fn push(&mut self, step: u64, text: impl Into<String>) {
        let entry = Entry {
            step,
            at: self.started.elapsed().as_secs_f64(),
            text: text.into(),
        };
        if let Some(f) = &mut self.file {
            let _ = writeln!(f, "{}", entry.line());
        }
        if self.echo {
            eprintln!("{}", entry.line());
        }
        self.entries.push(entry);
    }

    /// The last `n` entries.
    pub(super) fn tail(&self, n: usize) -> &[Entry] {
        &self.entries[self.entries.len().saturating_sub(n)..]
    }

    /// Where the full history is written.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes what is buffered to the file.
    pub(super) fn flush(&mut self) {
        if let Some(f) = &mut self.file {
            let _ = f.flush();
        }
    }
}
