//! `wasm-ccm`: the command line of the wasm-ccm cloud-controller-manager.

mod call;
mod cassette;
mod conformance;
mod inspect;
mod playground;
mod playground_cloud;
mod run;
mod soak;
mod source;
mod units;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use wasm_ccm_runtime::{Allocation, EngineOptions, Runtime, RuntimeOptions};

/// A Kubernetes cloud-controller-manager whose cloud drivers are sandboxed WebAssembly components.
#[derive(Parser, Debug)]
#[command(name = "wasm-ccm", version, about, propagate_version = true)]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

/// Options every command shares.
#[derive(clap::Args, Debug, Clone)]
pub struct GlobalArgs {
    /// Where compiled drivers (and, under `oci/`, pulled artifacts) are cached (default:
    /// $XDG_CACHE_HOME/wasm-ccm or ~/.cache/wasm-ccm).
    #[arg(long, global = true, env = "WASM_CCM_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile every time instead of using the cache.
    #[arg(long, global = true)]
    no_cache: bool,
    /// How instance memory is allocated.
    #[arg(long, global = true, value_enum, default_value_t = AllocationArg::Auto)]
    allocation: AllocationArg,
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Log filter (tracing syntax), e.g. `info` or `warn,wasm_ccm::driver=debug`.
    #[arg(
        long,
        global = true,
        env = "WASM_CCM_LOG",
        default_value = "warn,wasm_ccm=info"
    )]
    log: String,
}

#[derive(ValueEnum, Debug, Clone, Copy)]
enum AllocationArg {
    /// The pooling allocator if the address space allows it, else on-demand.
    Auto,
    /// The pooling allocator or fail.
    Pooling,
    /// On-demand allocation.
    OnDemand,
}

#[derive(ValueEnum, Debug, Clone, Copy)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show what a driver is: WIT version, exports, imports, info(), sha256, size, compile time.
    Inspect(inspect::InspectArgs),
    /// Call one driver function with JSON arguments (after init) and print the JSON result.
    Call(call::CallArgs),
    /// Check that a driver keeps the contract: static checks, behaviour against a cloud
    /// (simulator, URL or cassette) from a scenario file, robustness under injected faults.
    Conformance(conformance::ConformanceArgs),
    /// Run the cloud-controller-manager (upstream's flags; see --help).
    Run(Box<run::RunArgs>),
    /// Push a driver to a registry in the CNCF Wasm OCI layout; prints the digest-pinned
    /// reference to deploy.
    Push(source::PushArgs),
    /// Pull a driver from a registry (any common Wasm layout), verify it and write it to a file.
    Pull(source::PullArgs),
    /// Start a simulated cluster and cloud in process, run the real controllers with a real
    /// driver against them, and show what happens.
    Playground(playground::PlaygroundArgs),
    /// Developer tool: a chaos soak with invariants. Simulators, two `run` processes with leader
    /// election, a seeded schedule of workload operations and faults; exits 1 on a violation.
    Soak(soak::SoakArgs),
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
        let cache_dir = self.cache_root();
        let allocation = match self.allocation {
            AllocationArg::Auto => Allocation::Auto,
            AllocationArg::Pooling => Allocation::Pooling,
            AllocationArg::OnDemand => Allocation::OnDemand,
        };
        Ok(Runtime::new(RuntimeOptions {
            engine: EngineOptions {
                allocation,
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

fn init_logging(args: &GlobalArgs) {
    let filter = tracing_subscriber::EnvFilter::try_new(&args.log).unwrap_or_else(|e| {
        eprintln!(
            "wasm-ccm: ignoring --log {:?} ({e}); using the default",
            args.log
        );
        tracing_subscriber::EnvFilter::new("warn,wasm_ccm=info")
    });
    // Colour only for a terminal: a log file or a container log gets plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(&cli.global);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("wasm-ccm: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Inspect(args) => inspect::run(&cli.global, args).await,
            Command::Call(args) => call::run(&cli.global, args).await,
            Command::Conformance(args) => conformance::run(&cli.global, args).await,
            Command::Run(args) => run::run(&cli.global, *args).await,
            Command::Playground(args) => playground::run(&cli.global, args).await,
            Command::Soak(args) => soak::run(&cli.global, args).await,
            Command::Push(args) => source::push(&cli.global, args).await,
            Command::Pull(args) => source::pull(&cli.global, args).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("wasm-ccm: {e:#}");
            ExitCode::from(2)
        }
    }
}
