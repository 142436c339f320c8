//! `wasm-ccm-dev conformance` as a driver author runs it: every shipped driver passes its scenario,
//! the static driver written in Python and in JavaScript passes it exactly as the Rust one does,
//! each bug of the broken test driver fails exactly the checks it breaks, reports come in three
//! formats, and a cassette recorded once replays without the cloud.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::conformance::{conformance, wasm_ccm, with_status};

use serde_json::Value;
use wasm_ccm_drivers::{
    BROKEN_DRIVER, CLOUDSCALE_DRIVER, CLOUDSTACK_DRIVER, FUTURE_MAJOR_DRIVER, PHOENIXNAP_DRIVER,
    STATIC_DRIVER, TEMPLATE_DRIVER,
};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// Asserts `name` conforms: the run succeeded, no check failed, some passed, and exactly
/// `skipped` were skipped (a skip is not a pass: a baseline error that skips a whole family
/// of checks must not look conformant).
/// What the static driver's scenario skips: its load balancer calls send no HTTP request (the
/// inventory has no load balancer API), so the cloud-fault robustness checks of ensure and
/// delete have nothing to act on. The Python and JavaScript ports skip the same.
const STATIC_SKIPPED: &[&str] = &[
    // It declares no secrets (its inventory token, when set, reaches it in clear).
    "provider/credentials",
    // Nor its plain variables (contract 0.2.1): it gets every STATIC_ variable.
    "provider/environment",
    "robustness/connect-timeout [load-balancer.delete]",
    "robustness/connect-timeout [load-balancer.ensure]",
    "robustness/http-401 [load-balancer.delete]",
    "robustness/http-401 [load-balancer.ensure]",
    "robustness/http-429 [load-balancer.delete]",
    "robustness/http-429 [load-balancer.ensure]",
    "robustness/http-500 [load-balancer.delete]",
    "robustness/http-500 [load-balancer.ensure]",
    "robustness/malformed-json [load-balancer.delete]",
    "robustness/malformed-json [load-balancer.ensure]",
    "robustness/slow-body [load-balancer.delete]",
    "robustness/slow-body [load-balancer.ensure]",
    "robustness/truncated-body [load-balancer.delete]",
    "robustness/truncated-body [load-balancer.ensure]",
];

/// What the SDK template skips: it declares no secrets (it has none).
const TEMPLATE_SKIPPED: &[&str] = &["provider/credentials"];

fn assert_conformant(name: &str, out: &Output, report: &Value, skipped: &[&str]) {
    assert!(
        out.status.success() && report["summary"]["failed"] == 0,
        "{name} is not conformant: {:?}\n{}",
        with_status(report, "fail"),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !with_status(report, "pass").is_empty(),
        "{name}: no check passed: {report}"
    );
    assert_eq!(
        with_status(report, "skip"),
        set(skipped),
        "{name}: the skipped checks changed"
    );
}

#[test]
fn the_static_driver_conforms_at_full_level() {
    let (out, report) = conformance(STATIC_DRIVER, &repo("drivers/static/conformance.yaml"), &[]);
    assert_conformant("static", &out, &report, STATIC_SKIPPED);
    assert_eq!(report["level"], "full");
    let passed = with_status(&report, "pass");
    for id in [
        "provider/0.2/static/exports",
        "provider/0.2/instances/unknown-node [ghost-2]",
        "provider/0.2/instances/shutdown [node-c]",
        "provider/0.2/load-balancer/ensure-idempotent [default/web]",
        "provider/0.2/determinism/fresh-equals-warm [load-balancer.get]",
        "provider/0.2/robustness/http-429 [instances.instance-metadata]",
        "provider/0.2/egress/declared",
        "provider/0.2/routes/create-idempotent [10.244.1.0/24 → node-a]",
        "provider/0.2/routes/delete [10.244.1.0/24 → node-a]",
        "provider/0.2/robustness/http-500 [routes.list]",
    ] {
        assert!(passed.contains(id), "{id} did not pass: {passed:?}");
    }
    // Calls are measured, with the requests each made.
    let metadata = report["measurements"]
        .as_array()
        .and_then(|m| {
            m.iter()
                .find(|m| m["function"] == "instances.instance-metadata")
        })
        .expect("metadata measured");
    assert_eq!(metadata["max_requests"], 1);
    assert!(metadata["peak_memory_bytes"].as_u64().unwrap_or(0) > 0);
}

#[test]
fn the_cloudscale_driver_conforms_against_its_simulator() {
    let (out, report) = conformance(
        CLOUDSCALE_DRIVER,
        &repo("drivers/cloudscale/conformance.yaml"),
        &[],
    );
    assert_conformant("cloudscale", &out, &report, &[]);
    assert!(
        with_status(&report, "pass").contains("provider/0.2/provider/credentials"),
        "the host held cloudscale's token: {report}"
    );
    assert!(
        with_status(&report, "pass").contains("provider/0.2/provider/environment"),
        "cloudscale names its plain variables: {report}"
    );
    assert_eq!(report["cloud"], "sim:cloudscale");
    let passed = with_status(&report, "pass");
    for id in [
        "provider/0.2/load-balancer/update [default/web]",
        "provider/0.2/load-balancer/delete [default/web]",
        "provider/0.2/robustness/http-401 [load-balancer.ensure]",
        "provider/0.2/instances/metadata-expected [worker-1]",
    ] {
        assert!(passed.contains(id), "{id} did not pass: {passed:?}");
    }
}

#[test]
fn the_phoenixnap_driver_conforms_against_its_simulator() {
    let (out, report) = conformance(
        PHOENIXNAP_DRIVER,
        &repo("drivers/phoenixnap/conformance.yaml"),
        &[],
    );
    // worker-2's scenario provider ID is bare (no `phoenixnap://`), so the listing cannot name
    // it and the host would ask it alone: a skip, not a failure.
    assert_conformant(
        "phoenixnap",
        &out,
        &report,
        &["instances/listing-agrees [worker-2]"],
    );
    let passed = with_status(&report, "pass");
    for id in [
        "provider/0.2/instances/metadata-expected [worker-2]",
        "provider/0.2/load-balancer/ensure-idempotent [default/web]",
        "provider/0.2/robustness/http-401 [load-balancer.ensure]",
    ] {
        assert!(passed.contains(id), "{id} did not pass: {passed:?}");
    }
}

#[test]
fn the_cloudstack_driver_conforms_against_its_simulator() {
    let (out, report) = conformance(
        CLOUDSTACK_DRIVER,
        &repo("drivers/cloudstack/conformance.yaml"),
        &[],
    );
    assert_conformant("cloudstack", &out, &report, &[]);
    assert_eq!(report["cloud"], "sim:cloudstack");
    let passed = with_status(&report, "pass");
    for id in [
        "provider/0.2/instances/metadata-expected [worker-1]",
        "provider/0.2/instances/metadata-expected [worker-2.cluster.example]",
        "provider/0.2/instances/unknown-node [ghost]",
        "provider/0.2/load-balancer/ensure-idempotent [default/web]",
        "provider/0.2/load-balancer/update [default/web]",
        "provider/0.2/robustness/http-401 [load-balancer.ensure]",
    ] {
        assert!(passed.contains(id), "{id} did not pass: {passed:?}");
    }
}

#[test]
fn the_sdk_template_conforms_at_core_level() {
    let (out, report) = conformance(
        TEMPLATE_DRIVER,
        &repo("sdk/rust/template/conformance.yaml"),
        &[],
    );
    assert_conformant("template", &out, &report, TEMPLATE_SKIPPED);
    assert_eq!(report["level"], "core");
    // Asked for the full level, the instances-only template lacks load-balancer.
    let (out, report) = conformance(
        TEMPLATE_DRIVER,
        &repo("sdk/rust/template/conformance.yaml"),
        &["--level", "full"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        with_status(&report, "fail"),
        BTreeSet::from(["provider/0.2/static/exports".to_string()])
    );
}

/// The broken driver's scenario with `bug` chosen.
fn broken_scenario(dir: &Path, bug: &str) -> PathBuf {
    let text = std::fs::read_to_string(repo("tests/drivers/broken/conformance.yaml"))
        .expect("scenario")
        .replace("BUG", bug);
    let path = dir.join(format!("{bug}.yaml"));
    std::fs::write(&path, text).expect("write");
    path
}

fn failures_of(bug: &str) -> BTreeSet<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out, report) = conformance(BROKEN_DRIVER, &broken_scenario(dir.path(), bug), &[]);
    let failed = with_status(&report, "fail");
    assert_eq!(
        out.status.code(),
        Some(if failed.is_empty() { 0 } else { 1 }),
        "exit status of bug {bug}"
    );
    failed
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| format!("provider/0.2/{s}")).collect()
}

#[test]
fn the_broken_driver_without_a_bug_conforms() {
    assert_eq!(failures_of("none"), BTreeSet::new());
}

#[test]
fn a_non_idempotent_ensure_fails_only_idempotency() {
    assert_eq!(
        failures_of("non-idempotent-ensure"),
        set(&["load-balancer/ensure-idempotent [default/web]"])
    );
}

#[test]
fn an_error_for_an_unknown_node_fails_only_that_check() {
    assert_eq!(
        failures_of("unknown-node-error"),
        set(&["instances/unknown-node [ghost]"])
    );
}

#[test]
fn a_trap_on_500_fails_the_500_checks() {
    assert_eq!(
        failures_of("trap-on-500"),
        set(&[
            "robustness/http-500 [instances.instance-metadata]",
            "robustness/http-500 [instances.instance-exists]",
            "robustness/http-500 [load-balancer.ensure]",
            "robustness/http-500 [load-balancer.delete]",
        ])
    );
}

#[test]
fn the_report_lists_each_crash_with_its_whole_backtrace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out, report) = conformance(
        BROKEN_DRIVER,
        &broken_scenario(dir.path(), "trap-on-500"),
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    let crashes = report["crashes"].as_array().expect("a crashes list");
    let functions: BTreeSet<&str> = crashes
        .iter()
        .filter_map(|c| c["function"].as_str())
        .collect();
    assert_eq!(
        functions,
        BTreeSet::from([
            "instances.instance-metadata",
            "instances.instance-exists",
            "load-balancer.ensure",
            "load-balancer.delete",
        ])
    );
    for c in crashes {
        let detail = c["detail"].as_str().unwrap_or_default();
        assert!(
            detail.starts_with(
                "panicked: the cloud answered 500 (at tests/drivers/broken/src/lib.rs:"
            ),
            "{c}"
        );
        let frames = c["backtrace"]["frames"].as_array().expect("frames");
        assert!(!frames.is_empty() && frames.len() <= 32, "{c}");
    }
    // The text report prints them too.
    let text = wasm_ccm()
        .args(["conformance", BROKEN_DRIVER, "--scenario"])
        .arg(broken_scenario(dir.path(), "trap-on-500"))
        .args(["--max-compile-time", "10m"])
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("crashes (whole backtraces, innermost frame first")
            && text.contains("\n      #0  "),
        "{text}"
    );
}

#[test]
fn a_429_reported_as_transient_fails_the_429_checks() {
    assert_eq!(
        failures_of("rate-limit-as-transient"),
        set(&[
            "robustness/http-429 [instances.instance-metadata]",
            "robustness/http-429 [instances.instance-exists]",
            "robustness/http-429 [load-balancer.ensure]",
            "robustness/http-429 [load-balancer.delete]",
        ])
    );
}

#[test]
fn egress_outside_the_grant_fails_the_egress_check() {
    assert_eq!(failures_of("egress-outside"), set(&["egress/declared"]));
}

#[test]
fn state_kept_between_calls_is_caught_by_fresh_instances() {
    assert_eq!(
        failures_of("hidden-state"),
        set(&["determinism/fresh-equals-warm [load-balancer.get]"])
    );
}

#[test]
fn junit_and_text_reports_are_written_where_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = broken_scenario(dir.path(), "unknown-node-error");
    let junit = dir.path().join("report.xml");
    let out = wasm_ccm()
        .args(["conformance", BROKEN_DRIVER, "--scenario"])
        .arg(&scenario)
        .args(["--report", "junit", "--out"])
        .arg(&junit)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "the report went to --out");
    let xml = std::fs::read_to_string(&junit).expect("report written");
    assert!(xml.starts_with("<?xml"), "{xml}");
    assert!(xml.contains("failures=\"1\""), "{xml}");
    assert!(
        xml.contains("name=\"provider/0.2/instances/unknown-node [ghost]\">"),
        "{xml}"
    );
    let out = wasm_ccm()
        .args(["conformance", BROKEN_DRIVER, "--scenario"])
        .arg(&scenario)
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("FAIL provider/0.2/instances/unknown-node [ghost]"),
        "{text}"
    );
    assert!(text.contains("NOT CONFORMANT"), "{text}");
}

#[test]
fn a_recorded_run_replays_without_the_cloud() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cassette = dir.path().join("cloudscale.json");
    let scenario = repo("drivers/cloudscale/conformance.yaml");
    let (out, report) = conformance(
        CLOUDSCALE_DRIVER,
        &scenario,
        &["--record-http", cassette.to_str().expect("utf-8")],
    );
    assert_conformant("cloudscale (recording)", &out, &report, &[]);
    let text = std::fs::read_to_string(&cassette).expect("cassette written");
    assert!(
        !text.contains("conformance-token"),
        "the token leaked into the cassette"
    );
    let recorded: Value = serde_json::from_str(&text).expect("JSON");
    assert!(
        recorded["interactions"]
            .as_array()
            .is_some_and(|a| a.len() > 20)
    );
    // The simulator is gone with the first process; the replay has only the file.
    let (out, report) = conformance(
        CLOUDSCALE_DRIVER,
        &scenario,
        &["--cloud", &format!("cassette:{}", cassette.display())],
    );
    assert_conformant("cloudscale (replay)", &out, &report, &[]);
    assert!(
        with_status(&report, "pass").contains("provider/0.2/replay/cassette-complete"),
        "{report}"
    );
}

#[test]
fn a_call_records_a_cassette_that_conformance_replays() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let inventory = rt.block_on(async {
        wasm_ccm_sim::static_cloud::StaticCloud::start(
            ([127, 0, 0, 1], 0).into(),
            vec![
                serde_json::json!({"name": "node-a", "id": "i-0a", "type": "m1.small",
                    "zone": "zone-1", "region": "region-1",
                    "addresses": [{"type": "InternalIP", "address": "10.0.0.11"},
                                  {"type": "Hostname", "address": "node-a"}]}),
                serde_json::json!({"name": "node-b", "id": "i-0b", "type": "m1.small",
                    "zone": "zone-1", "region": "region-1", "shutdown": true}),
            ],
            Some("call-token".into()),
        )
        .await
        .expect("inventory")
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let cassette = dir.path().join("call.json");
    let out = wasm_ccm()
        .args([
            "call",
            TEMPLATE_DRIVER,
            "instances.instance-metadata",
            "--input",
            r#"{"name": "node-a", "provider-id": "example://i-0a"}"#,
            "--env",
            &format!("EXAMPLE_API_URL={}", inventory.url()),
            "--env",
            "EXAMPLE_API_TOKEN=call-token",
            "--allow-egress",
            &inventory.url(),
            "--record-http",
        ])
        .arg(&cassette)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&cassette).expect("cassette written");
    assert!(!text.contains("call-token"), "{text}");
    let recorded: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(recorded["cloud-url"], inventory.url());
    assert_eq!(recorded["interactions"][0]["request"]["method"], "GET");
    assert_eq!(recorded["interactions"][0]["response"]["status"], 200);
    // The template only ever lists instances, so one recording answers its whole run.
    let (out, report) = conformance(
        TEMPLATE_DRIVER,
        &repo("sdk/rust/template/conformance.yaml"),
        &["--cloud", &format!("cassette:{}", cassette.display())],
    );
    assert_conformant(
        "template (replay of a call)",
        &out,
        &report,
        TEMPLATE_SKIPPED,
    );
}

#[test]
fn bad_input_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |args: &[&str]| {
        let out = wasm_ccm()
            .arg("conformance")
            .args(args)
            .output()
            .expect("runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let scenario = repo("drivers/static/conformance.yaml");
    let scenario = scenario.to_str().expect("utf-8");
    let (code, err) = run(&[STATIC_DRIVER, "--scenario", scenario, "--cloud", "sim:aws"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("no `aws` simulator") && err.contains("static, cloudscale, phoenixnap"),
        "{err}"
    );
    let typo = dir.path().join("typo.yaml");
    std::fs::write(
        &typo,
        "nodes:\n  - node: {name: a}\n    expect: {zoen: z}\n",
    )
    .expect("write");
    let (code, err) = run(&[STATIC_DRIVER, "--scenario", typo.to_str().expect("utf-8")]);
    assert_eq!(code, Some(2));
    assert!(err.contains("zoen"), "{err}");
    // Not a component: the static checks say so and nothing runs.
    let text = dir.path().join("driver.wasm");
    std::fs::write(&text, "<html>not found</html>").expect("write");
    let (out, report) = conformance(text.to_str().expect("utf-8"), Path::new(scenario), &[]);
    assert_eq!(out.status.code(), Some(1));
    let failed = with_status(&report, "fail");
    assert_eq!(failed, set(&["static/component"]), "{report}");
    // A driver built for a WIT major this host does not speak fails exactly that check.
    let (out, report) = conformance(FUTURE_MAJOR_DRIVER, Path::new(scenario), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        with_status(&report, "fail"),
        set(&["static/wit-version"]),
        "{report}"
    );
}

/// A driver project's own scenario is used without `--scenario`: the nearest `conformance.yaml`
/// from the current directory upward (here two levels up, as from `target/<triple>/`), and the
/// run says which file it took. Where there is none, the error names the flag to pass, not
/// clap's bare "required argument".
#[test]
fn the_projects_conformance_yaml_is_used_when_no_scenario_is_given() {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = dir.path().join("mydriver");
    let cwd = project.join("target/wasm32-wasip2");
    std::fs::create_dir_all(&cwd).expect("dirs");
    let scenario = project.join("conformance.yaml");
    std::fs::copy(repo("drivers/static/conformance.yaml"), &scenario).expect("copy");
    let out = wasm_ccm()
        .current_dir(&cwd)
        .args(["conformance", STATIC_DRIVER, "--report", "json"])
        .args(["--max-compile-time", "10m"])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}); stderr: {stderr}"));
    assert_conformant("static", &out, &report, STATIC_SKIPPED);
    assert!(
        stderr.contains(&format!("using the scenario {}", scenario.display())),
        "the run names the scenario it took: {stderr}"
    );
    // The scenario's own content ran: its full level and one of its nodes.
    assert_eq!(report["level"], "full");
    assert!(
        with_status(&report, "pass").contains("provider/0.2/instances/shutdown [node-c]"),
        "{report}"
    );

    // None anywhere up from the temp dir (the machine must not hold a stray one above it).
    let bare = dir.path().join("elsewhere");
    std::fs::create_dir_all(&bare).expect("dir");
    if let Some(stray) = bare
        .ancestors()
        .map(|d| d.join("conformance.yaml"))
        .find(|f| f.is_file())
    {
        panic!("{} exists; remove it to run this test", stray.display());
    }
    let out = wasm_ccm()
        .current_dir(&bare)
        .args(["conformance", STATIC_DRIVER])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("pass --scenario FILE") && stderr.contains("conformance.yaml"),
        "{stderr}"
    );
}

// Drivers in other languages: the static reference driver written in Python (componentize-py)
// and in JavaScript (jco / componentize-js), built by the test command with pinned tools from
// PyPI and npm, pass the same scenario exactly as the Rust static driver does.

/// Conformance of `wasm` equals the Rust static driver's: the same checks pass, the same are
/// skipped, none fails, at the same level.
fn assert_same_level_as_rust(language: &str, wasm: &Path) {
    let scenario = repo("drivers/static/conformance.yaml");
    let (rust_out, rust) = conformance(STATIC_DRIVER, &scenario, &[]);
    assert_conformant("Rust static", &rust_out, &rust, STATIC_SKIPPED);
    // A 19 MB component compiles in about 5 s on 2 idle cores; the default 30 s limit is a
    // wall-clock check that a loaded machine can miss, and compile speed is a benchmark
    // (BENCHMARKS.md), not a test. The limit itself is tested below.
    let (out, other) = conformance(
        wasm.to_str().expect("utf-8 path"),
        &scenario,
        &["--max-compile-time", "10m"],
    );
    assert_conformant(language, &out, &other, STATIC_SKIPPED);
    assert_eq!(other["level"], rust["level"], "{language}: level");
    assert_eq!(
        with_status(&other, "pass"),
        with_status(&rust, "pass"),
        "{language}: passed checks differ from Rust's"
    );
    assert_eq!(
        with_status(&other, "skip"),
        with_status(&rust, "skip"),
        "{language}: skipped checks differ from Rust's"
    );
    assert!(
        with_status(&rust, "pass").len() > 50,
        "the scenario runs its checks"
    );
}

#[test]
fn the_python_static_driver_conforms_like_the_rust_one() {
    let wasm = wasm_ccm_test_tools::polyglot::python_static().unwrap_or_else(|e| panic!("{e}"));
    assert_same_level_as_rust("Python", &wasm);
}

#[test]
fn a_compile_slower_than_the_limit_fails_the_static_check() {
    let scenario = repo("drivers/static/conformance.yaml");
    let (out, report) = conformance(STATIC_DRIVER, &scenario, &["--max-compile-time", "1ms"]);
    assert!(!out.status.success(), "a failed check fails the run");
    let failed = with_status(&report, "fail");
    assert!(
        failed.len() == 1 && failed.iter().all(|id| id.ends_with("/static/compile-time")),
        "{failed:?}"
    );
    let message = report["results"]
        .as_array()
        .expect("results")
        .iter()
        .find(|r| {
            r["id"]
                .as_str()
                .is_some_and(|id| id.ends_with("/static/compile-time"))
        })
        .and_then(|r| r["message"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(
        message.contains("more than the 1 ms allowed (--max-compile-time)"),
        "{message}"
    );
}

#[test]
fn the_javascript_static_driver_conforms_like_the_rust_one() {
    let wasm = wasm_ccm_test_tools::polyglot::js_static().unwrap_or_else(|e| panic!("{e}"));
    assert_same_level_as_rust("JavaScript", &wasm);
}

/// Every file under `dir`, as (path relative to `dir`, contents).
fn tree(dir: &Path) -> BTreeSet<(PathBuf, Vec<u8>)> {
    let mut out = BTreeSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d)
            .expect("readable")
            .map(|e| e.expect("entry"))
        {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(dir).expect("inside").to_path_buf();
                out.insert((relative, std::fs::read(&path).expect("readable")));
            }
        }
    }
    out
}

#[test]
fn the_javascript_typings_match_the_wit_and_compile() {
    let repo = repo("");
    let jco = wasm_ccm_test_tools::polyglot::js_tool("jco").unwrap_or_else(|e| panic!("{e}"));
    let fresh = tempfile::tempdir().expect("tempdir");
    let out = Command::new(&jco)
        .current_dir(&repo)
        .args(["guest-types", "wit", "-n", "full-driver", "-q", "-o"])
        .arg(fresh.path())
        .output()
        .expect("jco runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        tree(fresh.path()) == tree(&repo.join("sdk/js/types")),
        "sdk/js/types is stale: run `jco guest-types wit -n full-driver -o sdk/js/types` (with the pinned jco of sdk/js/tools)"
    );
    let tsc = wasm_ccm_test_tools::polyglot::js_tool("tsc").unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(tsc)
        .current_dir(repo.join("sdk/js"))
        .args([
            "--noEmit", "--strict", "--target", "es2022", "--module", "es2022",
        ])
        .args(["--moduleResolution", "bundler", "index.d.ts"])
        .output()
        .expect("tsc runs");
    assert!(
        out.status.success(),
        "sdk/js/index.d.ts does not compile:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
