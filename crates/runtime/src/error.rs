//! Errors of the host runtime. Every message names the driver, what went wrong and what to do.

use std::fmt;
use std::time::Duration;

use crate::bindings::types::ProviderError;

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
        "{origin} implements wasm-ccm:provider@{found}, which this host does not support; this host supports {supported} — use a driver built for one of those, or a wasm-ccm release that supports {found}"
    )]
    UnsupportedWitVersion {
        /// Where the bytes came from (a path or an `oci://` reference).
        origin: String,
        /// The `wasm-ccm:provider` version the component implements.
        found: String,
        /// The versions this host supports, listed for the message.
        supported: String,
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
        "driver {driver} crashed (trapped) in {function}: {detail}; the instance was replaced — this is a bug in the driver, report it to its author"
    )]
    Trap {
        /// The driver's name.
        driver: String,
        /// The call, as `interface.function` (e.g. `provider.init`).
        function: String,
        /// The trap, with the guest's panic message when it printed one.
        detail: String,
    },
    /// The driver's `info()` breaks a rule (see [`crate::info_rules`]); it is not loaded.
    #[error(
        "{origin}: the driver's info() is invalid: {detail}; the driver was not loaded — fix its provider-info (wit/README.md lists the rules)"
    )]
    InvalidInfo {
        /// Where the bytes came from (a path or an `oci://` reference).
        origin: String,
        /// The rule that `info()` breaks.
        detail: String,
    },
    /// A result was over one of the caps of [`crate::result_caps`]; it was discarded whole.
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

/// A human sentence for a provider error (the generated `Display` is the debug form).
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

impl ProviderError {
    /// The WIT name of the case, e.g. `not-found`; used in metrics labels and JSON.
    pub fn case(&self) -> &'static str {
        match self {
            ProviderError::NotFound(_) => "not-found",
            ProviderError::NotImplemented => "not-implemented",
            ProviderError::ImplementedElsewhere => "implemented-elsewhere",
            ProviderError::InvalidConfig(_) => "invalid-config",
            ProviderError::Unauthorized(_) => "unauthorized",
            ProviderError::RateLimited(_) => "rate-limited",
            ProviderError::RetryAfter(_) => "retry-after",
            ProviderError::Transient(_) => "transient",
            ProviderError::Permanent(_) => "permanent",
        }
    }
}
