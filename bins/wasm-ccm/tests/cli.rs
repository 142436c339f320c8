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
        ["run", "push", "pull", "inspect", "help"],
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
