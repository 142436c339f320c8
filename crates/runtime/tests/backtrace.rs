//! A driver that crashes shows where: the trap carries the guest's backtrace, its error message
//! a short form of it (function names below the panic machinery), and both treat the driver's
//! names as hostile text: bounded whatever the names and the depth, control characters
//! replaced, secrets redacted.
//!
//! The broken test driver's `panic-deep` bug recurses through `crash::descend` and panics. The
//! guest profile strips names, so the tests first find `descend` in the stripped build (the
//! function index repeated once per level) and then give it a name of their choosing in a name
//! section, as an unstripped build would carry.

mod common;
#[path = "common/name_section.rs"]
mod name_section;

use serde_json::json;
use wasm_ccm_drivers::BROKEN_DRIVER;
use wasm_ccm_runtime::InitInput;
use wasm_ccm_runtime::{CallError, CallScope, DriverOptions, HostError};
use wasm_ccm_runtime::{
    GuestBacktrace, MAX_BACKTRACE_FRAMES, MAX_FRAME_TEXT_BYTES, MAX_SHORT_BACKTRACE_BYTES,
};

use common::{node, runtime};
use name_section::with_function_names;

/// What `descend` is called in the name sections the tests add: a Rust legacy-mangled symbol,
/// as rustc writes it, so the host's demangling is part of what is tested.
const MANGLED_DESCEND: &str = "_ZN13broken_driver5crash7descend17h0123456789abcdefE";
const DESCEND: &str = "broken_driver::crash::descend";
/// The value the driver registers with `log.redact` in `init`.
const MARK: &str = "mark-7f3a9c2e-d41d8cd9";
/// The Kubernetes event note limit: the whole trap message must fit.
const EVENT_NOTE_LIMIT: usize = 1024;

/// A trap of `instances.instance-metadata`: its message, detail and backtrace.
struct Crash {
    message: String,
    detail: String,
    backtrace: GuestBacktrace,
}

/// Loads `wasm` (the broken driver, maybe renamed) with the `panic-deep` bug and calls it.
async fn crash(wasm: Vec<u8>, depth: u32, panic: &str) -> Crash {
    let compiled = runtime()
        .compile("broken.wasm", wasm)
        .await
        .expect("compiles");
    let config = json!({
        "url": "http://127.0.0.1:9",
        "bug": "panic-deep",
        "depth": depth,
        "panic": panic,
        "mark": MARK,
    });
    let opts = DriverOptions {
        init: InitInput {
            config: config.to_string().into_bytes(),
            ..Default::default()
        },
        ..Default::default()
    };
    let driver = runtime().load(&compiled, opts).await.expect("loads");
    let outcome = driver
        .instance_metadata(&node("n1"), &CallScope::object("n1"))
        .await;
    match outcome.result {
        Err(CallError::Host(e @ HostError::Trap { .. })) => {
            let message = e.to_string();
            let HostError::Trap {
                detail, backtrace, ..
            } = e
            else {
                unreachable!("matched above")
            };
            Crash {
                message,
                detail,
                backtrace,
            }
        }
        other => panic!("expected a trap, got {other:?}"),
    }
}

fn broken() -> Vec<u8> {
    std::fs::read(BROKEN_DRIVER).expect("the broken driver is built")
}

/// The index of `crash::descend` in the stripped build: the function repeated once per level
/// of the recursion (`depth` + 1 frames in a row).
async fn descend_index() -> u32 {
    let depth = 5;
    let c = crash(broken(), depth, "find me").await;
    assert!(
        c.backtrace.frames.iter().all(|f| f.function.is_none()),
        "the guest profile strips names; if it stops, name the test driver's functions from the build instead: {:?}",
        c.backtrace
    );
    assert!(
        !c.message.contains("; stack:"),
        "no names, no short form: {}",
        c.message
    );
    let frames = &c.backtrace.frames;
    let run_at = |i: usize| {
        frames[i..]
            .iter()
            .take_while(|f| f.func_index == frames[i].func_index)
            .count()
    };
    let start = (0..frames.len())
        .find(|&i| run_at(i) == depth as usize + 1)
        .unwrap_or_else(|| panic!("no run of {} equal frames in {frames:?}", depth + 1));
    frames[start].func_index
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_a_named_function_shows_its_demangled_name() {
    let index = descend_index().await;
    let named = with_function_names(&broken(), &[(index, MANGLED_DESCEND)]);
    let c = crash(named, 5, "the cloud answered nonsense").await;

    // The panic line (with its location), then the innermost frames below the panic machinery.
    assert!(
        c.detail.starts_with(
            "panicked: the cloud answered nonsense (at tests/drivers/broken/src/lib.rs:"
        ),
        "{}",
        c.detail
    );
    let stack = format!("; stack: {DESCEND} ← {DESCEND} ← {DESCEND};");
    assert!(c.message.contains(&stack), "{}", c.message);
    assert!(
        c.message
            .contains("`wasm-ccm-dev call` prints the whole backtrace"),
        "the message says where to see more: {}",
        c.message
    );
    // The full form lists every level of the recursion, by name and index.
    let full = c.backtrace.full();
    assert_eq!(full.matches(DESCEND).count(), 6, "{full}");
    assert!(full.contains("<wasm function"), "{full}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_names_and_deep_recursion_cannot_grow_the_message() {
    let index = descend_index().await;
    // A name of 256 KiB with line breaks, a terminal escape and a bidirectional override.
    let hostile = format!(
        "{}\n  #1 forged\u{1b}[2J\u{202E}{}",
        "a".repeat(128 << 10),
        "b".repeat(128 << 10)
    );
    let named = with_function_names(&broken(), &[(index, &hostile)]);
    // Deep enough to overflow the stack: a trap without a panic line.
    let deep = crash(named.clone(), 1_000_000, "never reached").await;
    // A panic message far over every bound, from the same named function.
    let long = crash(named, 5, &"p".repeat(64 << 10)).await;
    for c in [&deep, &long] {
        let short = c.backtrace.short();
        assert!(!short.is_empty(), "{}", c.message);
        assert!(short.len() <= MAX_SHORT_BACKTRACE_BYTES, "{}", short.len());
        assert!(
            c.message.len() <= EVENT_NOTE_LIMIT,
            "{} bytes: {}",
            c.message.len(),
            c.message
        );
        assert!(c.backtrace.frames.len() <= MAX_BACKTRACE_FRAMES);
        for f in &c.backtrace.frames {
            let name = f.function.as_deref().unwrap_or_default();
            assert!(name.len() <= MAX_FRAME_TEXT_BYTES, "{}", name.len());
        }
        let full = c.backtrace.full();
        assert!(
            !full.contains('\u{1b}') && !full.contains('\u{202E}'),
            "{full}"
        );
        assert!(!full.contains("#1 forged"), "no forged line: {full}");
        assert!(
            !c.message.contains(['\n', '\u{1b}', '\u{202E}']),
            "{}",
            c.message
        );
    }
    assert_eq!(
        deep.backtrace.frames.len(),
        MAX_BACKTRACE_FRAMES,
        "{}",
        deep.message
    );
    assert!(deep.backtrace.cut, "the outer frames were dropped");
    assert!(
        deep.detail.contains("stack overflow") || deep.detail.contains("out-of-bounds"),
        "{}",
        deep.detail
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redacted_value_in_a_function_name_or_panic_message_is_redacted() {
    // A name is fixed when the driver is built, so a value the driver registers at run time
    // appears in one only if the build baked it in; the host redacts names all the same, and
    // the panic text (which often quotes run-time values) is the common path.
    let index = descend_index().await;
    let leaky = format!("broken_driver::leak_{MARK}_here");
    let named = with_function_names(&broken(), &[(index, &leaky)]);
    let c = crash(named, 3, &format!("token {MARK} refused")).await;
    let full = c.backtrace.full();
    for (what, text) in [("message", &c.message), ("backtrace", &full)] {
        assert!(!text.contains(MARK), "{what} leaks the value: {text}");
    }
    assert!(
        c.detail.starts_with("panicked: token [redacted] refused"),
        "{}",
        c.detail
    );
    assert!(
        c.message.contains(
            "; stack: broken_driver::leak_[redacted]_here ← broken_driver::leak_[redacted]_here"
        ),
        "{}",
        c.message
    );
    assert!(
        full.contains("broken_driver::leak_[redacted]_here"),
        "{full}"
    );
}
