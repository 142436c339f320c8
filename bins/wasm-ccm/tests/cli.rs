//! The product binary as an operator meets it: exactly the in-cluster commands, and the
//! developer tools pointed to where they live. (The end-to-end tests of `run`, `push`, `pull`
//! and `inspect` against simulators and real drivers are in `bins/wasm-ccm-dev/tests`: this
//! package depends on no simulator and no guest build.)

use std::process::{Command, Output};

fn wasm_ccm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasm-ccm"))
        .args(args)
        .env_remove("WASM_CCM_LOG")
        .output()
        .expect("run wasm-ccm")
}

/// The subcommands `--help` lists, in order.
fn commands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A wrapped description continues deeper than the two spaces a command starts at.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn the_product_has_only_the_in_cluster_commands() {
    let out = wasm_ccm(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        commands(&help),
        [
            "run", "push", "pull", "sign", "verify", "inspect", "shadow", "help"
        ],
        "{help}"
    );
}

#[test]
fn a_developer_command_is_refused_with_a_usage_error() {
    for command in ["playground", "conformance", "call", "sim", "soak"] {
        let out = wasm_ccm(&[command]);
        assert_eq!(out.status.code(), Some(2), "{command}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("unrecognized subcommand '{command}'")),
            "{command}: {err}"
        );
    }
}

#[test]
fn run_without_a_driver_says_which_flag_is_missing() {
    let out = wasm_ccm(&["run"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--driver <PATH|oci://…>"), "{err}");
}

/// A new user's first mistakes with `run`: each flag naming a file or URL is checked before any
/// work, and the error is said once, naming the flag and what to do.
#[test]
fn run_checks_every_path_flag_first_and_says_each_error_once() {
    let dir = std::env::temp_dir().join(format!("wasm-ccm-cli-{}", std::process::id()));
    let cert_dir = dir.join("certs");
    let manifest = env!("CARGO_MANIFEST_DIR").to_string() + "/Cargo.toml";
    let cert_dir_flag = cert_dir.display().to_string();
    let base = [
        "run",
        "--cloud-provider=static",
        "--cert-dir",
        cert_dir_flag.as_str(),
    ];
    let cases: [(&[&str], &str); 6] = [
        (
            &["--driver", &manifest, "--kubeconfig", "/nonexistent"],
            "--kubeconfig /nonexistent: cannot read a kubeconfig: No such file or directory; give the path of a kubeconfig file",
        ),
        (
            &["--driver", "/nonexistent.wasm"],
            "--driver /nonexistent.wasm: cannot read the driver's .wasm: No such file or directory",
        ),
        (
            &["--driver", &manifest, "--cloud-config", "/"],
            "--cloud-config / is a directory, not the driver's configuration",
        ),
        (
            &["--driver", &manifest, "--tls-cert-file", &manifest],
            "--tls-cert-file is given without --tls-private-key-file",
        ),
        (
            &["--driver", &manifest, "--master", "10.0.0.1:6443"],
            "--master \"10.0.0.1:6443\" is not an http:// or https:// URL",
        ),
        (
            &[
                "--driver",
                &manifest,
                "--authorization-kubeconfig",
                "/nonexistent",
            ],
            "--authorization-kubeconfig /nonexistent: cannot read a kubeconfig",
        ),
    ];
    for (flags, expected) in cases {
        let args: Vec<&str> = base.iter().chain(flags).copied().collect();
        let out = wasm_ccm(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "one line for {args:?}: {err}");
        assert!(
            lines[0].starts_with(&format!("wasm-ccm: {expected}")),
            "{args:?}: {err}"
        );
        for reason in ["No such file or directory", "os error"] {
            assert!(err.matches(reason).count() <= 1, "said twice: {err}");
        }
    }
    assert!(
        !cert_dir.exists(),
        "no serving certificate may be generated before the flags are checked"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `pull` checks where it will write before it contacts the registry.
#[test]
fn pull_checks_its_output_before_the_registry() {
    let out = wasm_ccm(&[
        "pull",
        "oci://127.0.0.1:1/x@sha256:0000000000000000000000000000000000000000000000000000000000000000",
        "-o",
        "/nonexistent/dir/x.wasm",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim_end(),
        "wasm-ccm: --output /nonexistent/dir/x.wasm: cannot use the directory /nonexistent/dir: No such file or directory; create it first or give a path in an existing directory"
    );
}

/// The grants are parsed with the flags and the global cache directory checked with the others,
/// before any work.
#[test]
fn run_checks_egress_grants_and_the_cache_dir_first() {
    let manifest = env!("CARGO_MANIFEST_DIR").to_string() + "/Cargo.toml";
    let out = wasm_ccm(&[
        "run",
        "--cloud-provider=static",
        "--driver",
        &manifest,
        "--allow-egress",
        "api.example.com",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    // Parsed by clap where the flag is read, into the typed grant the runtime uses.
    assert!(
        err.contains(
            "'--allow-egress <PATTERN>': invalid egress pattern `api.example.com`: no scheme"
        ),
        "{err}"
    );
    let out = wasm_ccm(&[
        "--cache-dir",
        &manifest,
        "run",
        "--cloud-provider=static",
        "--driver",
        &manifest,
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with(&format!(
            "wasm-ccm: --cache-dir {manifest} is a file, not a directory; give the directory to keep compiled drivers in"
        )),
        "{err}"
    );
}

/// A shadow report as `GET /shadow` answers it, with `diverged` differences.
fn report(diverged: usize) -> String {
    let differences: Vec<serde_json::Value> = (0..diverged)
        .map(|i| {
            serde_json::json!({
                "kind": "Node", "object": format!("worker-{i}"), "controller": "node-lifecycle",
                "target": "kube", "action": "delete", "verdict": "diverged",
                "first_seen": "2026-11-26T00:00:00Z", "last_changed": "2026-11-26T00:00:00Z",
                "attempts": 3,
            })
        })
        .collect();
    serde_json::json!({
        "driver": "cloudscale", "grace_seconds": 600, "started": "2026-11-26T00:00:00Z",
        "generated": "2026-11-26T01:00:00Z",
        "summary": {"pending": 0, "agreed": 0, "diverged": diverged},
        "differences": differences,
    })
    .to_string()
}

#[test]
fn shadow_report_exits_with_the_verdict() {
    let dir = tempfile::tempdir().expect("tempdir");
    let agreed = dir.path().join("agreed.json");
    std::fs::write(&agreed, report(0)).expect("write");
    let out = wasm_ccm(&["shadow", "report", "--from", agreed.to_str().expect("path")]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("0 diverged") && text.contains("agrees"),
        "{text}"
    );

    let diverged = dir.path().join("diverged.json");
    std::fs::write(&diverged, report(2)).expect("write");
    let out = wasm_ccm(&[
        "shadow",
        "report",
        "--from",
        diverged.to_str().expect("path"),
    ]);
    assert_eq!(out.status.code(), Some(1), "something diverged: exit 1");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("- would delete the Node").count(), 2, "{text}");
    let out = wasm_ccm(&[
        "shadow",
        "report",
        "--format",
        "json",
        "--from",
        diverged.to_str().expect("path"),
    ]);
    let back: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON out");
    assert_eq!(back["summary"]["diverged"], 2);
}

#[test]
fn shadow_report_says_what_is_wrong_with_its_input() {
    let manifest = env!("CARGO_MANIFEST_DIR").to_string() + "/Cargo.toml";
    let out = wasm_ccm(&["shadow", "report", "--from", &manifest]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a shadow report"), "{err}");
    let out = wasm_ccm(&["shadow", "report", "--from", "/nonexistent/report.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot open the report file"));
    let out = wasm_ccm(&[
        "shadow",
        "report",
        "--from",
        &manifest,
        "--token-file",
        &manifest,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("apply to a URL"));
}

#[test]
fn a_shadow_never_takes_the_lease_of_the_ccm_in_charge() {
    let manifest = env!("CARGO_MANIFEST_DIR").to_string() + "/Cargo.toml";
    let out = wasm_ccm(&[
        "run",
        "--cloud-provider=static",
        "--driver",
        &manifest,
        "--shadow",
        "--leader-elect-resource-name=cloud-controller-manager",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("must never hold the lease of the CCM in charge"),
        "{err}"
    );
    let out = wasm_ccm(&[
        "run",
        "--cloud-provider=static",
        "--driver",
        &manifest,
        "--shadow-validate=server",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("only applies with --shadow"), "{err}");
    let out = wasm_ccm(&[
        "run",
        "--cloud-provider=static",
        "--driver",
        &manifest,
        "--shadow-events",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--shadow-events only applies with --shadow"),
        "{err}"
    );
}

/// `wasm-ccm --version` names the release (the workspace version), the driver contract it was
/// built with (wit/provider.wit's package version, read here on its own) and the contract
/// versions it loads, so an operator can match a driver to a host without reading the source.
#[test]
fn version_names_the_release_and_the_driver_contract() {
    let contract = wasm_ccm_test_tools::contract::version().unwrap_or_else(|e| panic!("{e}"));
    let minor: Vec<&str> = contract.split('.').take(2).collect();
    for flag in ["--version", "-V"] {
        let out = wasm_ccm(&[flag]);
        assert!(out.status.success(), "{flag}: {out:?}");
        let line = String::from_utf8_lossy(&out.stdout);
        let line = line.trim_end();
        assert!(
            line.starts_with(concat!("wasm-ccm ", env!("CARGO_PKG_VERSION"), " (")),
            "{flag}: {line}"
        );
        assert!(
            line.contains(&format!("driver contract wasm-ccm:provider@{contract};")),
            "{flag}: {line}"
        );
        // The host loads the contract it was built with (at any patch level).
        assert!(
            line.contains(&format!("{}.x", minor.join("."))) && line.ends_with(" drivers)"),
            "{flag}: {line}"
        );
    }
    // A subcommand says the same (the version propagates).
    let out = wasm_ccm(&["run", "--version"]);
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(
        line.contains(&format!("wasm-ccm:provider@{contract}")),
        "{line}"
    );
}

/// Upstream's flags whose other values wasm-ccm cannot honour are refused before any work,
/// with what to do: a lock other than a Lease, and a feature gate upstream does not know
/// (upstream's own message first).
#[test]
fn run_refuses_a_lock_and_a_gate_it_cannot_honour() {
    let dir = tempfile::tempdir().expect("tempdir");
    let driver = dir.path().join("d.wasm");
    std::fs::write(&driver, b"\0asm").expect("write");
    let driver = driver.to_string_lossy().to_string();
    let out = wasm_ccm(&[
        "run",
        "--driver",
        &driver,
        "--leader-elect-resource-lock=endpoints",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "--leader-elect-resource-lock=\"endpoints\" is not supported: only `leases` is"
        ),
        "{err}"
    );
    let out = wasm_ccm(&["run", "--driver", &driver, "--feature-gates=NotAGate=true"]);
    assert_eq!(out.status.code(), Some(2), "a usage error");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unrecognized feature gate: NotAGate"), "{err}");
    // The positive control: the gate upstream knows passes the flag parser (the run then fails
    // later, on the driver file, not on the flag).
    let gate = "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true";
    let out = wasm_ccm(&["run", "--driver", &driver, gate]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("feature gate"), "{err}");
    assert!(
        err.contains("--cloud-provider is required"),
        "it went past the flags: {err}"
    );
}
