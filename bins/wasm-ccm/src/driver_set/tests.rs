use super::*;

const DEFAULTS: LimitDefaults = LimitDefaults {
    call_timeout: Duration::from_secs(30),
    init_timeout: Duration::from_secs(60),
    memory_limit: 64 << 20,
    cloud_requests: None,
};

const HYBRID: &str = r#"
apiVersion: wasm-ccm.io/v1alpha1
kind: DriverSet
drivers:
  - name: cloud
    source: /drivers/cloudscale.wasm
    providerIDScheme: cloudscale
    cloudConfig: /etc/cloud/cloudscale.json
    allowEgress: ["https://api.cloudscale.ch"]
    limits: {memory: 32Mi, callTimeout: 10s}
    nodes: {default: true}
    loadBalancer: {default: true}
    routes: false
  - name: metal
    source: oci://registry.example/drivers/phoenixnap@sha256:0000000000000000000000000000000000000000000000000000000000000000
    providerIDScheme: phoenixnap
    nodes:
      selector: {matchLabels: {example.com/site: metal}}
    loadBalancer: {classes: ["phoenixnap.com/public-ip"]}
"#;

#[test]
fn the_worked_example_reads() {
    let set = parse(HYBRID, DEFAULTS).expect("valid");
    let names: Vec<&str> = set.drivers.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["cloud", "metal"]);
    let cloud = &set.drivers[0];
    assert_eq!(cloud.memory_limit, 32 << 20);
    assert_eq!(cloud.call_timeout, Duration::from_secs(10));
    assert_eq!(
        cloud.init_timeout, DEFAULTS.init_timeout,
        "absent: the flag's default"
    );
    assert!(matches!(cloud.source, DriverSource::File(_)));
    assert!(matches!(set.drivers[1].source, DriverSource::Oci(_)));
    let roles = set.routing.drivers();
    assert!(roles[0].nodes.default && roles[0].load_balancer.default);
    assert_eq!(roles[1].load_balancer.classes, ["phoenixnap.com/public-ip"]);
    assert!(roles[1].nodes.selector.is_some());
}

#[test]
fn bad_documents_are_refused_naming_what_to_change() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "apiVersion: wasm-ccm.io/v1alpha1",
            "apiVersion: v1",
            "this release reads apiVersion",
        ),
        (
            "kind: DriverSet",
            "kind: Other",
            "this release reads apiVersion",
        ),
        ("routes: false", "route: false", "unknown field `route`"),
        (
            "limits: {memory: 32Mi, callTimeout: 10s}",
            "limits: {memory: lots}",
            "limits.memory",
        ),
        (
            "limits: {memory: 32Mi, callTimeout: 10s}",
            "limits: {callTimeout: soon}",
            "limits.callTimeout",
        ),
        (
            "source: /drivers/cloudscale.wasm",
            "source: \"oci://\"",
            "driver \"cloud\": source",
        ),
        (
            "allowEgress: [\"https://api.cloudscale.ch\"]",
            "allowEgress: [\"ftp://x\"]",
            "allowEgress",
        ),
        (
            "providerIDScheme: phoenixnap",
            "providerIDScheme: cloudscale",
            "both have providerIDScheme",
        ),
        (
            "loadBalancer: {classes: [\"phoenixnap.com/public-ip\"]}",
            "loadBalancer: {default: true}",
            "loadBalancer.default is set on 2 drivers",
        ),
        (
            "selector: {matchLabels: {example.com/site: metal}}",
            "selector: {}",
            "an empty selector",
        ),
        ("name: metal", "name: cloud", "two drivers are named"),
    ];
    for (from, to, expected) in cases {
        assert!(HYBRID.contains(from), "{from}");
        let text = HYBRID.replacen(from, to, 1);
        let err = format!("{:#}", parse(&text, DEFAULTS).expect_err(expected));
        assert!(err.contains(expected), "{expected:?} not in {err:?}");
    }
    let err = format!("{:#}", parse("drivers: [", DEFAULTS).expect_err("not YAML"));
    assert!(err.contains("is not a DriverSet document"), "{err}");
}

#[test]
fn a_missing_file_is_named() {
    let err = format!(
        "{:#}",
        read(Path::new("/nonexistent/drivers.yaml"), DEFAULTS).expect_err("missing")
    );
    assert!(err.contains("/nonexistent/drivers.yaml"), "{err}");
}

#[test]
fn a_driver_reads_its_cloud_request_budget() {
    let text = |limits: &str| {
        format!(
            "apiVersion: wasm-ccm.io/v1alpha1\nkind: DriverSet\ndrivers:\n  - name: cloud\n    source: /d.wasm\n    providerIDScheme: cloudscale\n    nodes: {{default: true}}\n    loadBalancer: {{default: true}}\n    limits: {limits}\n"
        )
    };
    let set = parse(
        &text("{cloudRequestRate: 5, cloudRequestBurst: 10}"),
        DEFAULTS,
    )
    .expect("valid");
    assert_eq!(
        set.drivers[0].cloud_requests,
        Some(CloudRequestLimit {
            rate: 5.0,
            burst: Some(10)
        })
    );
    let set = parse(&text("{cloudRequestRate: 0.5}"), DEFAULTS).expect("valid");
    assert_eq!(
        set.drivers[0].cloud_requests,
        Some(CloudRequestLimit {
            rate: 0.5,
            burst: None
        })
    );
    let set = parse(&text("{}"), DEFAULTS).expect("valid");
    assert_eq!(
        set.drivers[0].cloud_requests, None,
        "absent: the flag's, or none"
    );
    for (limits, says) in [
        (
            "{cloudRequestBurst: 3}",
            "cloudRequestBurst needs cloudRequestRate",
        ),
        ("{cloudRequestRate: -1}", "limits.cloudRequestRate"),
        (
            "{cloudRequestRate: 5, cloudRequestBurst: 0}",
            "a burst of 0",
        ),
        ("{cloudRequestRate: fast}", "is not a DriverSet document"),
    ] {
        let e = format!("{:#}", parse(&text(limits), DEFAULTS).expect_err(limits));
        assert!(e.contains(says), "{limits}: {e}");
    }
}
