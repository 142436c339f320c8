//! The binaries as a user runs them against the real drivers: the product's `inspect`, the
//! kit's `call` and `playground`.

use std::process::Command;

use wasm_ccm_drivers::{
    CLOUDSCALE_DRIVER, CLOUDSTACK_DRIVER, FUTURE_MAJOR_DRIVER, HOSTILE_DRIVER, PHOENIXNAP_DRIVER,
    STATIC_DRIVER,
};

/// The product binary `wasm-ccm` (`inspect`).
fn wasm_ccm(cache: &std::path::Path) -> Command {
    let mut c = Command::new(wasm_ccm_test_tools::product::product_binary());
    c.env("WASM_CCM_CACHE_DIR", cache)
        .env_remove("WASM_CCM_LOG");
    c
}

/// The kit binary `wasm-ccm-dev` (`call`, `playground`).
fn wasm_ccm_dev(cache: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_wasm-ccm-dev"));
    c.env("WASM_CCM_CACHE_DIR", cache)
        .env_remove("WASM_CCM_LOG");
    c
}

/// Runs `wasm-ccm-dev call <static driver> <function> --config <example> --input <input> <extra…>`.
fn call_static(
    cache: &std::path::Path,
    function: &str,
    input: &str,
    extra: &[&str],
) -> std::process::Output {
    wasm_ccm_dev(cache)
        .args([
            "call",
            STATIC_DRIVER,
            function,
            "--config",
            &example_config(),
            "--input",
            input,
        ])
        .args(extra)
        .output()
        .expect("runs")
}

fn example_config() -> String {
    format!(
        "{}/../../drivers/static/examples/cloud-config.yaml",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// `wasm-ccm-dev --version` names the release and the driver contract as the product's does
/// (both from the workspace and wit/provider.wit, read here on their own).
#[test]
fn version_names_the_release_and_the_driver_contract() {
    let cache = tempfile::tempdir().expect("tempdir");
    let contract = wasm_ccm_test_tools::contract::version().unwrap_or_else(|e| panic!("{e}"));
    let out = wasm_ccm_dev(cache.path())
        .arg("--version")
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(
        line.starts_with(concat!("wasm-ccm-dev ", env!("CARGO_PKG_VERSION"), " (")),
        "{line}"
    );
    assert!(
        line.contains(&format!("driver contract wasm-ccm:provider@{contract};")),
        "{line}"
    );
}

#[test]
fn inspect_prints_the_driver_as_json() {
    let cache = tempfile::tempdir().expect("tempdir");
    let out = wasm_ccm(cache.path())
        .args(["inspect", STATIC_DRIVER, "--json"])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["wit-version"], "0.2.2");
    assert_eq!(v["info"]["name"], "static");
    assert_eq!(
        v["exports"],
        serde_json::json!(["provider", "instances", "load-balancer", "routes"])
    );
    assert_eq!(v["sha256"].as_str().map(str::len), Some(64));
    let size = v["size"]
        .as_u64()
        .unwrap_or_else(|| panic!("inspect printed no size: {v:#}"));
    assert!(
        size > 0 && size < 1 << 20,
        "the static driver must fit a ConfigMap: {size} bytes"
    );
    assert_eq!(v["cache"], "miss");
    // Its inventory token stays in the guest: nothing declared, and inspect says so.
    assert_eq!(v["info"]["secrets"], serde_json::json!([]));
    assert_eq!(v["credentials-in-guest"], true);
    let again = wasm_ccm(cache.path())
        .args(["inspect", STATIC_DRIVER, "--json"])
        .output()
        .expect("runs");
    let v: serde_json::Value = serde_json::from_slice(&again.stdout).expect("json");
    assert_eq!(v["cache"], "hit");
}

#[test]
fn inspect_lists_the_declared_secrets_and_warns_when_there_are_none() {
    let cache = tempfile::tempdir().expect("tempdir");
    let text = |driver: &str| {
        let out = wasm_ccm(cache.path())
            .args(["inspect", driver])
            .output()
            .expect("runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let warning = "warning:             credentials: in guest (the driver declares no secrets; it receives its credentials in clear)";
    let cloudscale = text(CLOUDSCALE_DRIVER);
    for line in [
        "secrets:             access-token",
        "at:     env(CLOUDSCALE_ACCESS_TOKEN)",
        "origin: env(CLOUDSCALE_API_URL), else https://api.cloudscale.ch",
        "uses:   bearer",
    ] {
        assert!(cloudscale.contains(line), "{line:?} in\n{cloudscale}");
    }
    assert!(!cloudscale.contains(warning), "{cloudscale}");
    let cloudstack = text(CLOUDSTACK_DRIVER);
    assert!(
        cloudstack.contains("uses:   param(apiKey)")
            && cloudstack.contains("uses:   cloudstack-signature")
            && cloudstack.contains("origin: ini(Global, api-url), (required)"),
        "{cloudstack}"
    );
    let phoenixnap = text(PHOENIXNAP_DRIVER);
    assert!(
        phoenixnap.contains("at:     env(PNAP_CLIENT_SECRET), json(/clientSecret)")
            && phoenixnap.contains("oauth2-client(/auth/realms/BMC/protocol/openid-connect/token"),
        "{phoenixnap}"
    );
    assert!(
        phoenixnap.contains("info:                valid"),
        "{phoenixnap}"
    );
    let static_driver = text(STATIC_DRIVER);
    assert!(
        static_driver.contains("secrets:             (none)"),
        "{static_driver}"
    );
    assert!(static_driver.contains(warning), "{static_driver}");

    let out = wasm_ccm(cache.path())
        .args(["inspect", PHOENIXNAP_DRIVER, "--json"])
        .output()
        .expect("runs");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["credentials-in-guest"], false);
    assert_eq!(v["info"]["secrets"][1]["name"], "client-secret", "{v:#}");
    assert_eq!(
        v["info"]["secrets"][1]["at"],
        serde_json::json!([{"env": "PNAP_CLIENT_SECRET"}, {"json": "/clientSecret"}])
    );
}

#[test]
fn call_prints_the_result_and_exits_zero() {
    let cache = tempfile::tempdir().expect("tempdir");
    let out = call_static(
        cache.path(),
        "instances.instance-metadata",
        r#"{"name":"node-a"}"#,
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(
        v["provider-id"]
            .as_str()
            .is_some_and(|p| p.starts_with("static://")),
        "{v}"
    );
}

#[test]
fn a_driver_error_is_printed_typed_and_exits_one() {
    let cache = tempfile::tempdir().expect("tempdir");
    let out = call_static(
        cache.path(),
        "instances.instance-metadata",
        r#"{"name":"no-such-node"}"#,
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(v["error"]["not-found"].is_string(), "{v}");
}

#[test]
fn host_errors_exit_two_with_the_reason() {
    let cache = tempfile::tempdir().expect("tempdir");
    let out = wasm_ccm(cache.path())
        .args(["inspect", FUTURE_MAJOR_DRIVER])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("9.0.0") && err.contains("0.2.x"), "{err}");

    let out = wasm_ccm_dev(cache.path())
        .args([
            "call",
            HOSTILE_DRIVER,
            "instances.instance-metadata",
            "--input",
            r#"{"name":"loop"}"#,
            "--timeout",
            "200ms",
        ])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("deadline") && err.contains("--call-timeout"),
        "{err}"
    );

    let out = wasm_ccm_dev(cache.path())
        .args([
            "call",
            STATIC_DRIVER,
            "instances.instance-metadata",
            "--timeout",
            "soon",
        ])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2), "a bad flag is a usage error");
}

#[test]
fn call_feeds_cluster_services_to_the_driver() {
    let cache = tempfile::tempdir().expect("tempdir");
    let web = r#"[{"namespace": "default", "name": "web", "uid": "u-web", "annotations": {"static.wasm-ccm.io/load-balancer-ip": "192.0.2.10"}}]"#;
    let input = r#"{"service": {"namespace": "default", "name": "api", "uid": "u-api", "ports": [{"port": 80, "node-port": 30080}]}, "nodes": []}"#;
    let out = call_static(
        cache.path(),
        "load-balancer.ensure",
        input,
        &["--cluster-services", web],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let ip = v["ingress"][0]["ip"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        !ip.is_empty() && ip != "192.0.2.10",
        "the address another Service holds is skipped: {v}"
    );

    let out = call_static(
        cache.path(),
        "load-balancer.ensure",
        input,
        &["--cluster-services", r#"[{"nmae": "x"}]"#],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown field `nmae`"));
}

/// The README's first command, with each driver: the playground converges, stays quiet in a
/// steady state and exits 0.
#[test]
fn the_playground_converges_with_every_driver() {
    // Every cloud in the kit's list: a new cloud is in the playground with no change here.
    for driver in wasm_ccm_sim::kit::CLOUDS.iter().map(|c| c.name) {
        let cache = tempfile::tempdir().expect("tempdir");
        let out = wasm_ccm_dev(cache.path())
            .args([
                "playground",
                "--driver",
                driver,
                "--nodes",
                "4",
                "--services",
                "2",
                "--steady",
                "1s",
                "--json",
            ])
            .output()
            .expect("runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{driver}: exit {:?}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let summary: serde_json::Value = serde_json::from_str(&stdout).expect("JSON summary");
        // The summary names the driver by its provider name (upstream's, for CloudStack).
        let provider = match driver {
            "cloudstack" => "external-cloudstack",
            other => other,
        };
        assert_eq!(summary["driver"], provider);
        assert_eq!(summary["converged"], true, "{summary}");
        assert_eq!(summary["steady_writes"], serde_json::json!([]), "{summary}");
        assert_eq!(summary["steady_driver_calls"], 0.0, "{summary}");
        if driver != "static" {
            // Two load balancers were built in the simulator and one was deleted with its Service.
            assert_eq!(summary["cloud_load_balancers"], 1, "{summary}");
        }
        // The second story, whatever --driver: the hybrid overlay's two drivers in one process,
        // each with its nodes and its Service (the playground fails when one is another's).
        let hybrid = &summary["hybrid"];
        assert_eq!(hybrid["converged"], true, "{summary}");
        let providers: Vec<&str> = hybrid["drivers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d["provider"].as_str())
            .collect();
        assert_eq!(providers, ["cloudscale", "phoenixnap"], "{summary}");
    }
}
