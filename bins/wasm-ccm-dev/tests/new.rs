//! `wasm-ccm-dev new` as a driver author runs it: each language's project, generated into an
//! empty directory, builds with its one command and passes `wasm-ccm-dev conformance` as
//! generated. The commands run are those of the project's own CI workflow (its steps named
//! Build, Unit tests and Conformance), so the workflow is tested too. Bad names and occupied
//! directories are refused with a message that says what to do, and change nothing.
//!
//! The builds use the tools the repository pins, installed once into `target/tools/` by
//! `wasm-ccm-test-tools`: componentize-py for Python, jco for JavaScript; Rust builds with the
//! toolchain the generated `rust-toolchain.toml` names (the repository's), into a target
//! directory shared between runs under `target/new-driver/`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::Instant;

use wasm_ccm_test_tools::{polyglot, pypi};

/// The machine is small and shared: one build or conformance run at a time.
static HEAVY: Mutex<()> = Mutex::new(());

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn kit() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_wasm-ccm-dev"));
    c.env("WASM_CCM_LOG", "error");
    c
}

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `wasm-ccm-dev new NAME --lang LANG --dir DIR` and asserts it succeeded.
fn generate(name: &str, lang: &str, dir: &Path) {
    let out = kit()
        .args(["new", name, "--lang", lang, "--dir"])
        .arg(dir)
        .output()
        .expect("runs wasm-ccm-dev");
    assert!(out.status.success(), "new failed: {}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("wasm-ccm-dev conformance")
            && stdout.contains("--scenario conformance.yaml"),
        "new names the next commands: {stdout}"
    );
}

/// The `run` command of the step named `name` in the project's CI workflow.
fn ci_step(project: &Path, name: &str) -> String {
    let path = project.join(".github/workflows/ci.yml");
    let workflow: serde_norway::Value = serde_norway::from_str(
        &std::fs::read_to_string(&path).expect("the project has a CI workflow"),
    )
    .unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()));
    let jobs = workflow["jobs"].as_mapping().expect("jobs");
    jobs.values()
        .flat_map(|job| job["steps"].as_sequence().cloned().unwrap_or_default())
        .find(|step| step["name"].as_str() == Some(name))
        .and_then(|step| step["run"].as_str().map(str::to_string))
        .unwrap_or_else(|| {
            panic!(
                "{} has no step named {name} with a run command",
                path.display()
            )
        })
}

/// Runs a CI step's command with `sh` in the project, `wasm-ccm-dev` on PATH (this build, with
/// the generous compile limit every conformance test uses: compile speed is a benchmark, not a
/// test) and `env` set (`unset` removed); prints how long it took and returns its output.
fn run_step(project: &Path, name: &str, env: &[(&str, &Path)], unset: &[&str]) -> Output {
    let command = ci_step(project, name);
    let bin = project.join("../bin");
    std::fs::create_dir_all(&bin).expect("a bin directory");
    let wrapper = bin.join("wasm-ccm-dev");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec '{}' \"$@\" --max-compile-time 10m\n",
            env!("CARGO_BIN_EXE_wasm-ccm-dev")
        ),
    )
    .expect("the wrapper");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))
            .expect("executable");
    }
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("a PATH");
    let mut cmd = Command::new("sh");
    cmd.current_dir(project)
        .args(["-c", &command])
        .env("PATH", path)
        .env("WASM_CCM_LOG", "error");
    for (k, v) in env {
        cmd.env(k, v);
    }
    for k in unset {
        cmd.env_remove(k);
    }
    let started = Instant::now();
    let out = cmd.output().expect("runs sh");
    eprintln!(
        "{name} (`{command}`) in {}: {:.1} s",
        project.display(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        out.status.success(),
        "CI step {name} (`{command}`) failed: {}",
        text(&out)
    );
    out
}

/// Runs the Conformance step and asserts the driver conforms: exit 0 and a JUnit report with
/// checks and no failure.
fn assert_conforms(project: &Path) {
    run_step(project, "Conformance", &[], &[]);
    let report = std::fs::read_to_string(project.join("conformance.xml"))
        .expect("the Conformance step writes conformance.xml");
    let suite = report
        .lines()
        .find(|l| l.trim_start().starts_with("<testsuite "))
        .expect("a testsuite");
    assert!(suite.contains(" failures=\"0\""), "{suite}");
    let tests: usize = suite
        .split(" tests=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|n| n.parse().ok())
        .expect("a test count");
    // Core level: static checks, info, three nodes' calls, two unknown nodes, robustness
    // per function; fewer means a whole family of checks did not run.
    assert!(tests >= 30, "only {tests} checks ran: {suite}");
}

fn temp_project(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("a temp dir");
    let project = tmp.path().join(name);
    (tmp, project)
}

#[test]
fn a_new_rust_driver_builds_tests_and_conforms_as_generated() {
    let (_tmp, project) = temp_project("acme-rust");
    generate("acme-rust", "rust", &project);
    let toolchain = std::fs::read_to_string(project.join("rust-toolchain.toml")).expect("a pin");
    let repo_toolchain =
        std::fs::read_to_string(repo().join("rust-toolchain.toml")).expect("the repo's pin");
    let channel = |t: &str| {
        t.lines()
            .find(|l| l.starts_with("channel"))
            .map(str::to_string)
    };
    assert_eq!(channel(&toolchain), channel(&repo_toolchain));

    // Registry dependencies are built once for every run: the project's target/ is a link to a
    // directory of this repository's target/ (the project itself is new each time).
    let shared = repo().join("target/new-driver");
    std::fs::create_dir_all(&shared).expect("the shared target dir");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&shared, project.join("target")).expect("a target link");

    // The outer cargo's settings for this test must not reach the project's build, and the
    // project's rust-toolchain.toml (the repository's compiler) decides the toolchain.
    let unset = [
        "RUSTUP_TOOLCHAIN",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_MANIFEST_DIR",
        "CARGO_PRIMARY_PACKAGE",
    ];
    let _heavy = HEAVY.lock().unwrap_or_else(|e| e.into_inner());
    run_step(&project, "Build", &[], &unset);
    assert!(
        project
            .join("target/wasm32-wasip2/release/acme_rust.wasm")
            .is_file()
    );
    let out = run_step(&project, "Unit tests", &[], &unset);
    let all = text(&out);
    assert!(all.contains("test result: ok. 2 passed"), "{all}");
    assert_conforms(&project);
}

#[test]
fn a_new_python_driver_builds_and_conforms_as_generated() {
    let (_tmp, project) = temp_project("acme-python");
    generate("acme-python", "python", &project);
    // The componentize-py the repository pins, installed once (the project's build.sh would
    // install the same pin into the project's .tools/ by itself).
    let venv = pypi::venv("componentize-py", "sdk/python/requirements-build.txt")
        .unwrap_or_else(|e| panic!("{e}"));
    let tool = venv.join("bin/componentize-py");
    let _heavy = HEAVY.lock().unwrap_or_else(|e| e.into_inner());
    run_step(&project, "Build", &[("COMPONENTIZE_PY", &tool)], &[]);
    assert!(project.join("build/acme_python.wasm").is_file());
    assert_conforms(&project);
}

#[test]
fn a_new_javascript_driver_builds_and_conforms_as_generated() {
    let (_tmp, project) = temp_project("acme-js");
    generate("acme-js", "js", &project);
    // The jco the repository pins, installed once; the project's package.json pins the same.
    let jco = polyglot::js_tool("jco").unwrap_or_else(|e| panic!("{e}"));
    let package = std::fs::read_to_string(project.join("package.json")).expect("package.json");
    let tools = std::fs::read_to_string(repo().join("sdk/js/tools/package.json")).expect("pins");
    let pin = |json: &str| {
        let v: serde_json::Value = serde_json::from_str(json).expect("JSON");
        (
            v["devDependencies"]["@bytecodealliance/jco"].clone(),
            v["overrides"]["@bytecodealliance/preview2-shim"].clone(),
        )
    };
    assert_eq!(pin(&package), pin(&tools));
    let _heavy = HEAVY.lock().unwrap_or_else(|e| e.into_inner());
    run_step(&project, "Build", &[("JCO", &jco)], &[]);
    assert!(project.join("build/acme_js.wasm").is_file());
    assert_conforms(&project);
}

/// The names and entries of `dir`, to show that nothing changed.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("a directory")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn bad_names_are_refused_with_the_rule_and_nothing_is_created() {
    let tmp = tempfile::tempdir().expect("a temp dir");
    for (name, why) in [
        ("MyCloud", "contains 'M'"),
        ("my_cloud", "contains '_'"),
        ("my.cloud", "contains '.'"),
        ("1cloud", "does not start with a letter"),
        ("cloud-", "ends with '-'"),
        ("x", "shorter than 2 characters"),
        ("", "shorter than 2 characters"),
        ("fn", "Rust keyword"),
        ("kubernetes", "refused by the host"),
    ] {
        let out = kit()
            .current_dir(tmp.path())
            .args(["new", name, "--lang", "python"])
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name:?}: {}", text(&out));
        assert!(
            stderr.contains(&format!("invalid driver name {name:?}")) && stderr.contains(why),
            "{name:?}: {stderr}"
        );
        // What to do: the rule with an example, or another name.
        assert!(
            stderr.contains("e.g. `my-cloud`") || stderr.contains("choose another name"),
            "{name:?}: {stderr}"
        );
        assert!(listing(tmp.path()).is_empty(), "{name:?} left files");
    }
    // A language the kit has no template for is refused by the argument parser, naming them.
    let out = kit()
        .current_dir(tmp.path())
        .args(["new", "acme", "--lang", "cobol"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("rust") && stderr.contains("python") && stderr.contains("js"),
        "{stderr}"
    );
    assert!(listing(tmp.path()).is_empty());
}

#[test]
fn an_occupied_target_is_refused_and_left_as_it_was() {
    let tmp = tempfile::tempdir().expect("a temp dir");
    let occupied = tmp.path().join("occupied");
    std::fs::create_dir(&occupied).expect("a dir");
    std::fs::write(occupied.join("notes.txt"), "mine").expect("a file");
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "mine").expect("a file");
    let before = listing(tmp.path());

    for (lang, dir, why) in [
        ("rust", &occupied, "is not empty; nothing was changed"),
        ("js", &file, "is not a directory; nothing was changed"),
    ] {
        let out = kit()
            .args(["new", "acme", "--lang", lang, "--dir"])
            .arg(dir)
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(
            stderr.contains(why) && stderr.contains("choose another --dir"),
            "{stderr}"
        );
    }
    assert_eq!(
        listing(tmp.path()),
        before,
        "no staging directory is left behind"
    );
    assert_eq!(listing(&occupied), vec!["notes.txt".to_string()]);
    assert_eq!(
        std::fs::read_to_string(occupied.join("notes.txt")).expect("kept"),
        "mine"
    );
    assert_eq!(std::fs::read_to_string(&file).expect("kept"), "mine");

    // An empty directory is fine: the project goes into it.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).expect("a dir");
    generate("acme", "js", &empty);
    assert!(empty.join("src/driver.js").is_file());
    assert!(empty.join(".github/workflows/ci.yml").is_file());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(empty.join("build.sh"))
            .expect("build.sh")
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111, "build.sh is executable");
    }
}
