//! The front end of the `wasm-ccm` product binary, as a library so that the developer binary
//! (`wasm-ccm-dev`, in `bins/wasm-ccm-dev`) runs drivers exactly as the product does: the shared
//! options, `run`, `push`/`pull`, `inspect` and the duration and size parsers.
//!
//! Nothing here depends on a simulator or on the workspace's guest builds: this crate and its
//! dependencies are what ships in the image.

pub mod global;
pub mod inspect;
pub mod preflight;
pub mod run;
pub mod source;
pub mod units;

use std::process::ExitCode;

pub use global::{GlobalArgs, init_logging};

/// Runs `command` on a multi-threaded tokio runtime and turns its result into the exit code:
/// the command's own code, or 2 with `program: error` on stderr.
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
        Err(e) => {
            eprintln!("{program}: {}", preflight::one_line(&e));
            ExitCode::from(2)
        }
    }
}
