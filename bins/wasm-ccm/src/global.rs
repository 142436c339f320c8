//! The options every `wasm-ccm` and `wasm-ccm-dev` command shares: the compile cache, memory
//! allocation and logging.

use std::path::PathBuf;

use clap::ValueEnum;
use tracing::Subscriber;
use tracing_subscriber::fmt::MakeWriter;
use wasm_ccm_runtime::{Allocation, Compiler, EngineOptions, Runtime, RuntimeOptions};

/// Options every command shares.
#[derive(clap::Args, Debug, Clone)]
pub struct GlobalArgs {
    /// Where compiled drivers (and, under `oci/`, pulled artifacts) are cached (default:
    /// $XDG_CACHE_HOME/wasm-ccm or ~/.cache/wasm-ccm).
    #[arg(long, global = true, env = "WASM_CCM_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Compile every time instead of using the cache.
    #[arg(long, global = true)]
    pub no_cache: bool,
    /// How instance memory is allocated.
    #[arg(long, global = true, value_enum, default_value_t = AllocationArg::Auto)]
    pub allocation: AllocationArg,
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Log filter (tracing syntax), e.g. `info` or `warn,wasm_ccm::driver=debug`.
    #[arg(
        long,
        global = true,
        env = "WASM_CCM_LOG",
        default_value = "warn,wasm_ccm=info"
    )]
    pub log: String,
}

/// How instance memory is allocated (`--allocation`).
#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum AllocationArg {
    /// The pooling allocator if the address space allows it, else on-demand.
    Auto,
    /// The pooling allocator or fail.
    Pooling,
    /// On-demand allocation.
    OnDemand,
}

/// The log format on stderr (`--log-format`).
#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum LogFormat {
    /// Lines for a person (coloured on a terminal).
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

impl GlobalArgs {
    /// The cache directory (compiled drivers, and pulled artifacts under `oci/`), unless
    /// `--no-cache`.
    pub fn cache_root(&self) -> Option<PathBuf> {
        if self.no_cache {
            None
        } else {
            self.cache_dir.clone().or_else(default_cache_dir)
        }
    }

    /// The runtime these options describe.
    pub fn runtime(&self) -> anyhow::Result<Runtime> {
        self.runtime_with_backtrace_details(false)
    }

    /// The runtime these options describe, with wasmtime's backtrace details (DWARF `file:line`)
    /// on or off: the kit turns them on for an author debugging a driver, the product leaves
    /// them off (see `EngineOptions::backtrace_details`).
    pub fn runtime_with_backtrace_details(&self, details: bool) -> anyhow::Result<Runtime> {
        self.runtime_with(details, Compiler::default())
    }

    /// A runtime for a command that compiles a driver and exits (`inspect`): Cranelift only,
    /// so the compile cache is filled before the process ends (the tiered default would serve
    /// from Winch and leave the Cranelift build to a background thread the exit cuts short).
    pub fn one_shot_runtime(&self) -> anyhow::Result<Runtime> {
        self.runtime_with(false, Compiler::Cranelift)
    }

    fn runtime_with(&self, details: bool, compiler: Compiler) -> anyhow::Result<Runtime> {
        let cache_dir = self.cache_root();
        let allocation = match self.allocation {
            AllocationArg::Auto => Allocation::Auto,
            AllocationArg::Pooling => Allocation::Pooling,
            AllocationArg::OnDemand => Allocation::OnDemand,
        };
        Ok(Runtime::new(RuntimeOptions {
            engine: EngineOptions {
                allocation,
                backtrace_details: details,
                compiler,
                ..Default::default()
            },
            cache_dir,
        })?)
    }
}

fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("wasm-ccm"))
}

/// The `--log` filter (the default when it does not parse, with a word on stderr).
pub(crate) fn log_filter(args: &GlobalArgs) -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::try_new(&args.log).unwrap_or_else(|e| {
        eprintln!(
            "wasm-ccm: ignoring --log {:?} ({e}); using the default",
            args.log
        );
        tracing_subscriber::EnvFilter::new("warn,wasm_ccm=info")
    })
}

/// Whether log lines get colour: only on a terminal (a log file or a container log gets plain
/// text).
pub(crate) fn log_ansi() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stderr())
}

/// Sets up logging on stderr as `args` ask (filter, format, colour only for a terminal).
pub fn init_logging(args: &GlobalArgs) {
    tracing_subscriber::util::SubscriberInitExt::init(log_subscriber(args, std::io::stderr));
}

/// The subscriber [`init_logging`] installs, writing to `writer`: what runs without
/// `--otlp-endpoint` (public for the trace benchmark and the log-line tests).
pub fn log_subscriber<W>(args: &GlobalArgs, writer: W) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt()
        .with_env_filter(log_filter(args))
        .with_ansi(log_ansi())
        .with_writer(writer);
    match args.log_format {
        LogFormat::Json => Box::new(builder.json().finish()),
        LogFormat::Text => Box::new(builder.finish()),
    }
}
