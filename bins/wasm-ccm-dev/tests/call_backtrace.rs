//! `wasm-ccm-dev call` on a driver that crashes: the whole backtrace on stderr, innermost frame
//! first, and the short form in the one-line error, as a driver author sees them.
//!
//! The broken test driver's `panic-deep` bug recurses through `crash::descend` and panics. The
//! guest profile strips names, so the test reads `descend`'s function index off the stripped
//! run's backtrace (the index repeated once per level) and names it in a name section, as an
//! unstripped build would.

#[path = "../../../crates/runtime/tests/common/name_section.rs"]
mod name_section;

use std::path::Path;
use std::process::{Command, Output};

use wasm_ccm_drivers::BROKEN_DRIVER;

const DEPTH: usize = 4;
const DESCEND: &str = "broken_driver::crash::descend";

fn call(cache: &Path, driver: &Path, config: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasm-ccm-dev"))
        .env("WASM_CCM_CACHE_DIR", cache)
        .env_remove("WASM_CCM_LOG")
        .arg("call")
        .arg(driver)
        .arg("instances.instance-metadata")
        .arg("--config")
        .arg(config)
        .args(["--input", r#"{"name": "n1"}"#])
        .args(extra)
        .output()
        .expect("runs")
}

/// The function index of each `#N <wasm function I>` line of a printed backtrace.
fn unnamed_frames(stderr: &str) -> Vec<u32> {
    stderr
        .lines()
        .filter_map(|l| l.trim().split_once("<wasm function "))
        .filter_map(|(_, rest)| rest.trim_end_matches('>').parse().ok())
        .collect()
}

#[test]
fn call_prints_the_whole_backtrace_of_a_crash_and_the_short_form_in_its_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.json");
    let text = format!(
        r#"{{"url": "http://127.0.0.1:9", "bug": "panic-deep", "depth": {DEPTH}, "panic": "the cloud answered nonsense"}}"#
    );
    std::fs::write(&config, text).expect("write");

    // Stripped, as built: every frame by index, a hint to keep names, no short form.
    let out = call(dir.path(), Path::new(BROKEN_DRIVER), &config, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("wasm-ccm: instances.instance-metadata crashed; backtrace, innermost frame first:\n  #0  <wasm function "),
        "{stderr}"
    );
    assert!(stderr.contains("no function names"), "{stderr}");
    assert!(
        stderr.contains(
            "crashed (trapped) in instances.instance-metadata: panicked: the cloud answered nonsense (at tests/drivers/broken/src/lib.rs:"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("; stack:"), "{stderr}");
    let frames = unnamed_frames(&stderr);
    let descend = frames
        .windows(DEPTH + 1)
        .find(|w| w.iter().all(|i| *i == w[0]))
        .map(|w| w[0])
        .unwrap_or_else(|| panic!("no {} equal frames in a row: {stderr}", DEPTH + 1));

    // Named (a Rust legacy-mangled symbol, as rustc writes it): demangled in both forms.
    let named = dir.path().join("named.wasm");
    let bytes = std::fs::read(BROKEN_DRIVER).expect("the broken driver is built");
    std::fs::write(
        &named,
        name_section::with_function_names(
            &bytes,
            &[(
                descend,
                "_ZN13broken_driver5crash7descend17h0123456789abcdefE",
            )],
        ),
    )
    .expect("write");
    let out = call(dir.path(), &named, &config, &["--debug"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let frame_lines = stderr
        .lines()
        .filter(|l| l.trim_start().starts_with('#') && l.ends_with(DESCEND))
        .count();
    assert_eq!(frame_lines, DEPTH + 1, "one line per level: {stderr}");
    assert!(
        stderr.contains(&format!("; stack: {DESCEND} ← {DESCEND} ← {DESCEND};")),
        "{stderr}"
    );
    // `--debug` prints the driver's lines itself: here the panic it wrote on stderr.
    assert!(
        stderr.contains(
            "driver warn  stderr instances.instance-metadata: the cloud answered nonsense"
        ),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no answer on stdout");
}
