//! The front end of the `wasm-ccm` product binary, as a library so that the developer binary
//! (`wasm-ccm-dev`, in `bins/wasm-ccm-dev`) runs drivers exactly as the product does: the shared
//! options, `run`, `push`/`pull`, `inspect`, the duration and size parsers and the `--version`
//! line.
//!
//! Nothing here depends on a simulator or on the workspace's guest builds: this crate and its
//! dependencies are what ships in the image.

pub mod driver_set;
mod driver_source;
pub mod global;
pub mod inspect;
mod preflight;
pub mod run;
pub mod shadow;
pub mod signing;
pub mod source;
pub mod telemetry;
pub mod units;
pub mod version;

use std::io::Write as _;
use std::process::ExitCode;

pub use global::{GlobalArgs, init_logging, log_subscriber};

/// Standard output was closed by its reader (`wasm-ccm verify … | head -1`): the command stops
/// quietly, as a filter's writer does, instead of panicking like `println!`.
#[derive(Debug)]
pub struct StdoutClosed;

impl std::fmt::Display for StdoutClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("standard output was closed")
    }
}

impl std::error::Error for StdoutClosed {}

/// Writes one line to standard output (locked, flushed). A closed pipe is [`StdoutClosed`],
/// which [`block_on_command`] turns into a quiet exit; any other failure is an error naming
/// stdout. Use it through [`outln!`].
pub fn write_stdout_line(line: std::fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{line}").and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(StdoutClosed.into()),
        Err(e) => Err(anyhow::anyhow!("cannot write to standard output: {e}")),
    }
}

/// `println!` for the commands' results: `outln!(…)?` returns [`StdoutClosed`] on a closed pipe
/// instead of panicking.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::write_stdout_line(::std::format_args!($($arg)*))
    };
}

/// Runs `command` on a multi-threaded tokio runtime and turns its result into the exit code:
/// the command's own code, or 2 with `program: error` on stderr. A reader that closed standard
/// output early ([`StdoutClosed`]) ends the command quietly with success: what was asked for
/// was done, only its report was not wanted in full.
pub fn block_on_command<F>(program: &str, command: F) -> ExitCode
where
    F: std::future::Future<Output = anyhow::Result<ExitCode>>,
{
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{program}: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(command) {
        Ok(code) => code,
        Err(e) if e.is::<StdoutClosed>() => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{program}: {}", preflight::one_line(&e));
            ExitCode::from(2)
        }
    }
}
