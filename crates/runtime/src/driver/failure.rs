//! What went wrong when a guest stopped: a trap (with its cause and a bounded, redacted
//! backtrace), a deadline, or memory exhaustion, told from the instance's store. A leaf of the
//! driver module: the pool and the loader use it, it uses neither.

use std::time::Duration;

use wasmtime::{Store, Trap};

use crate::error::HostError;
use crate::state::InstanceState;

/// Why instantiating failed. The guest's start code runs during instantiation, so a trap there
/// is described like a trap in a call (cause, bounded and redacted backtrace), never by
/// wasmtime's raw text, which quotes the driver's function names unbounded.
pub(super) fn instantiate_error(
    store: &Store<InstanceState>,
    origin: &str,
    e: &wasmtime::Error,
) -> HostError {
    let logger = &store.data().host.logger;
    if e.downcast_ref::<Trap>().is_some() {
        return HostError::Trap {
            driver: origin.into(),
            function: "instantiate".into(),
            detail: trap_cause(e, &store.data().last_panic()),
            backtrace: guest_backtrace(e, &|text, max| logger.redact_bounded(text, max)),
        };
    }
    HostError::Wasmtime {
        origin: origin.into(),
        stage: "instantiating",
        detail: logger.redact_bounded(&format!("{e:#}"), MAX_INSTANTIATE_DETAIL),
    }
}

/// The longest description of an instantiation failure that is not a trap (a missing export, a
/// type mismatch): host text, bounded anyway because it may quote the component.
const MAX_INSTANTIATE_DETAIL: usize = 2048;

/// Turns a wasmtime error from a guest call into the host error that says what happened.
pub(super) fn classify(
    e: &wasmtime::Error,
    driver: &str,
    function: &str,
    store: &Store<InstanceState>,
    timeout: Duration,
    memory_limit: usize,
) -> HostError {
    if store.data().limiter.refused {
        return HostError::OutOfMemory {
            driver: driver.into(),
            function: function.into(),
            limit_mib: memory_limit >> 20,
        };
    }
    if e.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
        return HostError::Deadline {
            driver: driver.into(),
            function: function.into(),
            deadline: timeout,
        };
    }
    let logger = &store.data().host.logger;
    HostError::Trap {
        driver: driver.into(),
        function: function.into(),
        detail: trap_cause(e, &store.data().last_panic()),
        backtrace: guest_backtrace(e, &|text, max| logger.redact_bounded(text, max)),
    }
}

/// The guest's stack at the trap from the `WasmBacktrace` wasmtime attaches to the error (up to
/// `engine::build`'s frame limit), as hostile text made safe ([`crate::error::GuestBacktrace::new`]): function
/// names come from the driver's name section and locations from its DWARF, so they go through
/// the same redaction as every driver text. Empty when wasmtime captured none.
fn guest_backtrace(
    e: &wasmtime::Error,
    redact: &dyn Fn(&str, usize) -> String,
) -> crate::error::GuestBacktrace {
    use crate::error::{GuestBacktrace, RawFrame, RawSymbol};
    let Some(trace) = e.downcast_ref::<wasmtime::WasmBacktrace>() else {
        return GuestBacktrace::default();
    };
    let frames = trace.frames().iter().map(|f| RawFrame {
        module: f.module().name(),
        func_index: f.func_index(),
        name: f.func_name(),
        symbols: f
            .symbols()
            .iter()
            .map(|s| RawSymbol {
                name: s.name(),
                file: s.file(),
                line: s.line(),
                column: s.column(),
            })
            .collect(),
    });
    GuestBacktrace::new(frames, redact)
}

/// What made the guest stop, in words: the trap code, `exit(N)`, or the root cause wasmtime
/// reported (hostcall fuel, a WASI limit), never the "error while executing at wasm backtrace"
/// context that heads every wasmtime error. A panic gets the guest's own panic line when it
/// printed one.
pub(crate) fn trap_cause(e: &wasmtime::Error, last_panic: &Option<String>) -> String {
    let cause = if let Some(exit) = e.downcast_ref::<wasmtime_wasi::I32Exit>() {
        format!("the driver called exit({})", exit.0)
    } else if let Some(trap) = e.downcast_ref::<Trap>() {
        match trap {
            Trap::StackOverflow => "stack overflow (unbounded recursion?)".to_string(),
            Trap::UnreachableCodeReached => match last_panic {
                Some(panic) => format!("panicked: {panic}"),
                None => "reached `unreachable` (a panic or abort in the driver)".to_string(),
            },
            // Rust and C keep big frames on a shadow stack in linear memory: its overflow is an
            // access below address 0, not a wasm stack overflow.
            Trap::MemoryOutOfBounds => {
                "out-of-bounds memory access (a stack overflow of a Rust or C driver's shadow stack, or a bad pointer)".to_string()
            }
            Trap::IntegerDivisionByZero => "integer division by zero".to_string(),
            Trap::IntegerOverflow => "integer overflow".to_string(),
            Trap::OutOfFuel => "out of fuel".to_string(),
            other => format!("wasm trap: {other}"),
        }
    } else {
        let root = e.root_cause().to_string();
        if root.contains("fuel allocated for hostcalls") {
            format!(
                "it tried to pass more than the host accepts in one call ({root}); results and arguments are bounded by --memory-limit"
            )
        } else {
            root
        }
    };
    cut_line(&cause, MAX_TRAP_DETAIL_BYTES)
}

/// Longest trap detail, in bytes: with the short backtrace and the fixed words the message stays
/// under the 1024 bytes of a Kubernetes event note.
const MAX_TRAP_DETAIL_BYTES: usize = 500;

/// The first line of `s`, its control characters replaced (the guest's panic text reaches
/// terminals and events), cut to `max` bytes on a character boundary.
fn cut_line(s: &str, max: usize) -> String {
    let line = crate::error::sanitize(s.lines().next().unwrap_or(s));
    let mut end = line.len().min(max);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line[..end].to_string()
}
