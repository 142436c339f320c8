//! Child processes the kit starts and waits on (the Kubernetes API simulator of `scale`, the
//! `wasm-ccm run` processes it measures): killed when dropped, their stderr in a file, and when
//! one exits before it should, an error at once with its exit status and the end of its stderr,
//! not a timeout that leaves the reason in a file.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

/// How much of a child's stderr an error quotes: its last lines, up to this many bytes.
const TAIL_BYTES: usize = 4096;
/// How many of its last lines.
const TAIL_LINES: usize = 20;

/// A running child, killed (and reaped) when dropped, so an error or Ctrl-C leaves nothing
/// running. Its stderr goes to a file, which its errors name.
pub(crate) struct Watched {
    child: Child,
    what: String,
    log: PathBuf,
}

impl Watched {
    /// Starts `command` with stdout discarded and stderr written to `log`; `what` names it in
    /// errors (e.g. "the Kubernetes API simulator").
    pub(crate) fn spawn(mut command: Command, what: &str, log: &Path) -> anyhow::Result<Self> {
        let stderr = std::fs::File::create(log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let child = command
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("cannot start {what} ({:?})", command.get_program()))?;
        Ok(Watched {
            child,
            what: what.to_string(),
            log: log.to_path_buf(),
        })
    }

    /// Its process ID.
    pub(crate) fn id(&self) -> u32 {
        self.child.id()
    }

    /// An error when it has exited: its status and the end of its stderr, with `when` saying
    /// what it should have done first (e.g. "before it was ready").
    pub(crate) fn check_running(&mut self, when: &str) -> anyhow::Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(self.exited(status, when)),
            Err(e) => bail!("cannot tell whether {} is running: {e}", self.what),
        }
    }

    fn exited(&self, status: ExitStatus, when: &str) -> anyhow::Error {
        anyhow::anyhow!(
            "{} exited ({status}) {when}; the end of its stderr:\n{}\n(all of it is in {})",
            self.what,
            indent(&tail(&self.log)),
            self.log.display()
        )
    }

    /// Polls `ready` every `every` until it answers, checking before each poll that the child is
    /// still running: when it exits first, the error comes at once and says why. After `bound`
    /// (a hang detector, far above a normal start) the error quotes its stderr so far.
    pub(crate) async fn wait_ready<T, F, Fut>(
        &mut self,
        bound: Duration,
        every: Duration,
        mut ready: F,
    ) -> anyhow::Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        let until = Instant::now() + bound;
        loop {
            self.check_running("before it was ready")?;
            if let Some(answer) = ready().await {
                return Ok(answer);
            }
            if Instant::now() > until {
                bail!(
                    "{} was not ready after {bound:?} and is still running; the end of its stderr:\n{}\n(all of it is in {})",
                    self.what,
                    indent(&tail(&self.log)),
                    self.log.display()
                );
            }
            tokio::time::sleep(every).await;
        }
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last [`TAIL_LINES`] lines of the file (at most [`TAIL_BYTES`]), or a note that it is
/// empty or unreadable.
pub(crate) fn tail(path: &Path) -> String {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => return format!("(cannot read {}: {e})", path.display()),
    };
    let start = bytes.len().saturating_sub(TAIL_BYTES);
    let text = String::from_utf8_lossy(&bytes[start..]);
    let lines: Vec<&str> = text.trim_end().lines().collect();
    // A cut at a byte boundary leaves a partial first line: drop it unless it is all there is.
    let skip = usize::from(start > 0 && lines.len() > 1);
    let lines = &lines[skip..];
    let shown = &lines[lines.len().saturating_sub(TAIL_LINES)..];
    if shown.is_empty() {
        "(nothing)".into()
    } else {
        shown.join("\n")
    }
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_the_last_whole_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("err");
        std::fs::write(&path, "").expect("write");
        assert_eq!(tail(&path), "(nothing)");
        let many: String = (0..100).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, &many).expect("write");
        let shown = tail(&path);
        assert_eq!(shown.lines().count(), TAIL_LINES);
        assert!(shown.ends_with("line 99"), "{shown}");
        // Longer than the byte cap: the partial first line is left out.
        let long: String = (0..10)
            .map(|i| format!("{i}{}\n", "x".repeat(1000)))
            .collect();
        std::fs::write(&path, &long).expect("write");
        let shown = tail(&path);
        assert!(shown.lines().all(|l| l.len() == 1001), "{shown}");
        assert!(tail(&dir.path().join("absent")).starts_with("(cannot read"));
    }

    /// A child that exits at once is reported at once, with its status and its last words;
    /// the positive control: one that keeps running is waited for until it is ready.
    #[tokio::test]
    async fn a_child_that_exits_before_ready_is_reported_with_its_stderr() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut command = Command::new("sh");
        command.args([
            "-c",
            "echo starting >&2; echo 'seed: the NodePort range is full' >&2; exit 3",
        ]);
        let mut child = Watched::spawn(command, "the test simulator", &dir.path().join("a.err"))
            .expect("spawn");
        // Never ready: only the exit can end the wait before the (hang-detector) bound.
        let error = child
            .wait_ready(
                Duration::from_secs(600),
                Duration::from_millis(10),
                || async { None::<()> },
            )
            .await
            .expect_err("it exited");
        let message = format!("{error:#}");
        assert!(message.contains("the test simulator exited"), "{message}");
        assert!(message.contains("exit status: 3"), "{message}");
        assert!(message.contains("the NodePort range is full"), "{message}");
        assert!(message.contains("a.err"), "{message}");

        let mut command = Command::new("sleep");
        command.arg("600");
        let mut child =
            Watched::spawn(command, "a sleeper", &dir.path().join("b.err")).expect("spawn");
        let mut polls = 0;
        let answer = child
            .wait_ready(Duration::from_secs(600), Duration::from_millis(1), || {
                polls += 1;
                let done = polls >= 3;
                async move { done.then_some(polls) }
            })
            .await
            .expect("ready");
        assert_eq!(answer, 3);
    }
}
