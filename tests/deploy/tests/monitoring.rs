//! `deploy/monitoring/`: the PodMonitor scrapes the port and scheme the Deployment serves
//! `/metrics` on, with credentials that may read it; the PrometheusRule's alerts cover what an
//! operator acts on, each with a runbook section in deploy/RUNBOOK.md; the Grafana dashboard is
//! well formed; and every metric an alert or a panel reads is one `/metrics` exports, as
//! registered in crates/controllers/src/metrics.rs (`FAMILIES`, read from the source).
//!
//! The two Prometheus Operator kinds are custom resources that no Kubernetes schema holds
//! (tests/schemas.rs skips them); their fields are checked here against the names the
//! operator's CRDs (monitoring.coreos.com/v1) define.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use serde_json::Value;
use wasm_ccm_deploy_tests::promql::{self, Kind};
use wasm_ccm_deploy_tests::release::{self, REGENERATE};
use wasm_ccm_deploy_tests::{Object, deploy_dir, kubectls, kustomize, monitoring_dir, objects};

/// The job label every series gets (the PodMonitor's jobLabel names the pods' label with it).
const JOB: &str = "wasm-ccm";

/// The alerts the issue asks for, by what they are about; more may exist.
const REQUIRED_ALERTS: &[(&str, &str)] = &[
    ("WasmCcmDriverReloadRefused", "a driver reload was refused"),
    ("WasmCcmDriverCallsFailing", "driver calls fail"),
    (
        "WasmCcmNodesPendingInitialization",
        "nodes wait for initialisation",
    ),
    (
        "WasmCcmLoadBalancersNotConverging",
        "load balancers do not converge",
    ),
    ("WasmCcmNoLeader", "the leader is lost"),
];

const SEVERITIES: &[&str] = &["warning", "critical"];

/// Fields of the Prometheus Operator's CRDs (monitoring.coreos.com/v1) that may be set.
const PODMONITOR_SPEC: &[&str] = &[
    "attachMetadata",
    "bodySizeLimit",
    "convertClassicHistogramsToNHCB",
    "fallbackScrapeProtocol",
    "jobLabel",
    "keepDroppedTargets",
    "labelLimit",
    "labelNameLengthLimit",
    "labelValueLengthLimit",
    "namespaceSelector",
    "nativeHistogramBucketLimit",
    "nativeHistogramMinBucketFactor",
    "podMetricsEndpoints",
    "podTargetLabels",
    "sampleLimit",
    "scrapeClass",
    "scrapeClassicHistograms",
    "scrapeNativeHistograms",
    "scrapeProtocols",
    "selector",
    "selectorMechanism",
    "targetLimit",
];
const POD_METRICS_ENDPOINT: &[&str] = &[
    "authorization",
    "basicAuth",
    "bearerTokenSecret",
    "enableHttp2",
    "filterRunning",
    "followRedirects",
    "honorLabels",
    "honorTimestamps",
    "interval",
    "metricRelabelings",
    "noProxy",
    "oauth2",
    "params",
    "path",
    "port",
    "portNumber",
    "proxyConnectHeader",
    "proxyFromEnvironment",
    "proxyUrl",
    "relabelings",
    "scheme",
    "scrapeTimeout",
    "targetPort",
    "tlsConfig",
    "trackTimestampsStaleness",
];
const SAFE_TLS_CONFIG: &[&str] = &[
    "ca",
    "cert",
    "insecureSkipVerify",
    "keySecret",
    "maxVersion",
    "minVersion",
    "serverName",
];
const SAFE_AUTHORIZATION: &[&str] = &["type", "credentials"];
const SECRET_KEY_SELECTOR: &[&str] = &["key", "name", "optional"];
const NAMESPACE_SELECTOR: &[&str] = &["any", "matchNames"];
const RULE_GROUP: &[&str] = &[
    "interval",
    "labels",
    "limit",
    "name",
    "partial_response_strategy",
    "query_offset",
    "rules",
];
const RULE: &[&str] = &[
    "alert",
    "annotations",
    "expr",
    "for",
    "keep_firing_for",
    "labels",
    "record",
];
const OBJECT_TOP: &[&str] = &["apiVersion", "kind", "metadata", "spec"];

/// Fails on a key of `value` (an object) that `known` lacks, and on a missing `required` one.
fn fields(what: &str, value: &Value, known: &[&str], required: &[&str]) -> Vec<String> {
    let Some(map) = value.as_object() else {
        return vec![format!("{what} is not an object: {value}")];
    };
    let mut out: Vec<String> = map
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .map(|k| format!("{what}.{k} is not a field of the CRD"))
        .collect();
    out.extend(
        required
            .iter()
            .filter(|r| !map.contains_key(**r))
            .map(|r| format!("{what}.{r} is required")),
    );
    out
}

/// A Prometheus duration as the CRDs' pattern allows: `0`, or number-unit pairs in the order
/// y, w, d, h, m, s, ms, each unit at most once.
fn is_duration(text: &str) -> bool {
    if text.is_empty() {
        return false;
    }
    if text == "0" {
        return true;
    }
    const UNITS: [&str; 7] = ["y", "w", "d", "h", "m", "s", "ms"];
    let mut rest = text;
    let mut last: Option<usize> = None;
    while !rest.is_empty() {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return false;
        }
        rest = &rest[digits..];
        let Some(unit) = UNITS
            .iter()
            .enumerate()
            .filter(|(_, u)| rest.starts_with(**u))
            .max_by_key(|(_, u)| u.len())
            .map(|(i, _)| i)
        else {
            return false;
        };
        if last.is_some_and(|l| unit <= l) {
            return false;
        }
        last = Some(unit);
        rest = &rest[UNITS[unit].len()..];
    }
    true
}

/// deploy/monitoring rendered by both kubectls (they must agree), once per process.
fn monitoring() -> &'static [Object] {
    static RENDER: OnceLock<Vec<Object>> = OnceLock::new();
    RENDER.get_or_init(|| {
        let kubectls = kubectls().unwrap_or_else(|e| panic!("{e}"));
        let renders: Vec<(String, Vec<Object>)> = kubectls
            .iter()
            .map(|k| {
                let yaml = kustomize(&k.path, &monitoring_dir())
                    .unwrap_or_else(|e| panic!("{} renders deploy/monitoring: {e}", k.name()));
                (
                    k.name(),
                    objects(&yaml).unwrap_or_else(|e| panic!("{}: {e}", k.name())),
                )
            })
            .collect();
        let sorted = |objs: &[Object]| -> BTreeMap<String, Value> {
            objs.iter().map(|o| (o.id(), o.json.clone())).collect()
        };
        for pair in renders.windows(2) {
            assert_eq!(
                sorted(&pair[0].1),
                sorted(&pair[1].1),
                "deploy/monitoring: {} and {} render different objects",
                pair[0].0,
                pair[1].0
            );
        }
        renders.into_iter().next().expect("two kubectls").1
    })
}

fn the_one<'a>(objs: &'a [Object], kind: &str) -> &'a Object {
    let found: Vec<&Object> = objs.iter().filter(|o| o.kind == kind).collect();
    assert_eq!(found.len(), 1, "deploy/monitoring: one {kind} expected");
    found[0]
}

fn dashboard() -> Value {
    let path = monitoring_dir().join("dashboard.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// Every PromQL expression of the alerts and the dashboard, with where it is.
fn expressions() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let rule = the_one(monitoring(), "PrometheusRule");
    for group in rule.json["spec"]["groups"].as_array().into_iter().flatten() {
        for r in group["rules"].as_array().into_iter().flatten() {
            let name = r["alert"]
                .as_str()
                .or(r["record"].as_str())
                .unwrap_or("<unnamed rule>");
            let expr = r["expr"].as_str().unwrap_or_default();
            out.push((
                format!("PrometheusRule {}, rule {name}", rule.name),
                expr.to_string(),
            ));
        }
    }
    let dash = dashboard();
    for panel in panels(&dash) {
        let title = panel["title"].as_str().unwrap_or("<untitled>");
        for t in panel["targets"].as_array().into_iter().flatten() {
            out.push((
                format!(
                    "dashboard.json, panel {title:?}, target {}",
                    t["refId"].as_str().unwrap_or("?")
                ),
                t["expr"].as_str().unwrap_or_default().to_string(),
            ));
        }
    }
    // Template variables that query Prometheus: `label_values(<selector>, <label>)` or PromQL.
    for var in dash["templating"]["list"].as_array().into_iter().flatten() {
        if var["type"] != "query" {
            continue;
        }
        let query = var["query"]
            .as_str()
            .or(var["query"]["query"].as_str())
            .unwrap_or_default();
        let expr = match query
            .trim()
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
        {
            Some(args) => args
                .rsplit_once(',')
                .map_or(args, |(sel, _)| sel)
                .to_string(),
            None => query.to_string(),
        };
        out.push((
            format!(
                "dashboard.json, variable {}",
                var["name"].as_str().unwrap_or("?")
            ),
            expr,
        ));
    }
    out
}

/// Every panel of a dashboard, those in collapsed rows included, rows themselves excluded.
fn panels(dash: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for p in dash["panels"].as_array().into_iter().flatten() {
        if p["type"] == "row" {
            out.extend(p["panels"].as_array().into_iter().flatten().cloned());
        } else {
            out.push(p.clone());
        }
    }
    out
}

#[test]
fn every_metric_in_the_alerts_and_the_dashboard_is_one_metrics_exports() {
    let families = promql::exported_families().unwrap_or_else(|e| panic!("{e}"));
    // The scan found the registry, not a fragment of it: the upstream names operators alert on.
    for name in [
        "leader_election_master_status",
        "workqueue_retries_total",
        "wasm_ccm_driver_calls_total",
    ] {
        assert!(
            families.contains_key(name),
            "{name} is not among the families read from {}: {families:?}",
            promql::metrics_source().display()
        );
    }
    assert_eq!(
        families.get("wasm_ccm_driver_call_duration_seconds"),
        Some(&Kind::Histogram)
    );
    let exprs = expressions();
    assert!(exprs.len() > 10, "too few expressions found: {exprs:?}");
    let mut problems = Vec::new();
    for (where_, expr) in &exprs {
        match promql::metric_names(expr) {
            Err(e) => problems.push(format!("{where_}: {e}")),
            Ok(names) if names.is_empty() => {
                problems.push(format!("{where_}: {expr:?} reads no metric"))
            }
            Ok(names) => {
                for name in names {
                    if !promql::is_exported(&families, &name) {
                        problems.push(format!("{where_}: {name} is not a metric /metrics exports"));
                    }
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{}\nUse a name registered in FAMILIES of {} (a histogram also as _bucket, _sum, _count), \
         or register the metric there first.",
        problems.join("\n"),
        promql::metrics_source().display()
    );
}

#[test]
fn every_selector_reads_the_job_the_pod_monitor_sets() {
    let pm = the_one(monitoring(), "PodMonitor");
    let job_label = pm.json["spec"]["jobLabel"]
        .as_str()
        .unwrap_or_else(|| panic!("{}: no jobLabel; the rules select job={JOB:?}", pm.id()));
    // The pods carry that label with the value the rules select, in every release.
    for source in release::sources().unwrap() {
        let text = std::fs::read_to_string(source.path())
            .unwrap_or_else(|e| panic!("{}: {e}; run `{REGENERATE}`", source.file));
        for o in objects(&text)
            .unwrap()
            .iter()
            .filter(|o| o.kind == "Deployment")
        {
            assert_eq!(
                o.json["spec"]["template"]["metadata"]["labels"][job_label].as_str(),
                Some(JOB),
                "{}: {} pods must carry {job_label}={JOB} (the PodMonitor's jobLabel)",
                source.file,
                o.id()
            );
        }
    }
    let wanted = format!("job=\"{JOB}\"");
    let mut problems = Vec::new();
    for (where_, expr) in expressions() {
        for s in promql::selectors(&expr).unwrap_or_default() {
            if !s.matchers.split(',').any(|m| m.trim() == wanted) {
                problems.push(format!(
                    "{where_}: {}{{{}}} does not select {wanted}",
                    s.name, s.matchers
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "every selector must read only wasm-ccm's series (other controllers export workqueue_* and leader_election_* too):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_monitoring_objects_render_and_the_built_in_kinds_match_their_schema() {
    let objs = monitoring();
    let kinds: BTreeSet<&str> = objs.iter().map(|o| o.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "PodMonitor",
            "PrometheusRule",
            "Secret",
            "ServiceAccount"
        ]
        .into_iter()
        .collect(),
        "deploy/monitoring"
    );
    for o in objs {
        if o.api_version == "monitoring.coreos.com/v1" {
            continue;
        }
        wasm_ccm_deploy_tests::round_trip(o).unwrap_or_else(|e| panic!("{e}"));
        if o.kind.starts_with("Cluster") {
            assert_eq!(o.namespace, None, "{}", o.id());
        } else {
            assert_eq!(o.namespace.as_deref(), Some("kube-system"), "{}", o.id());
        }
    }
}

#[test]
fn the_pod_monitor_scrapes_the_metrics_port_of_every_replica_with_a_token_that_may() {
    let objs = monitoring();
    let pm = the_one(objs, "PodMonitor");
    let spec = &pm.json["spec"];
    let mut problems = fields("PodMonitor", &pm.json, OBJECT_TOP, &["spec"]);
    problems.extend(fields("spec", spec, PODMONITOR_SPEC, &["selector"]));
    problems.extend(fields(
        "spec.namespaceSelector",
        &spec["namespaceSelector"],
        NAMESPACE_SELECTOR,
        &[],
    ));
    let endpoints = spec["podMetricsEndpoints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(endpoints.len(), 1, "{}: one endpoint", pm.id());
    let ep = &endpoints[0];
    problems.extend(fields(
        "podMetricsEndpoints[0]",
        ep,
        POD_METRICS_ENDPOINT,
        &[],
    ));
    problems.extend(fields("tlsConfig", &ep["tlsConfig"], SAFE_TLS_CONFIG, &[]));
    problems.extend(fields(
        "authorization",
        &ep["authorization"],
        SAFE_AUTHORIZATION,
        &["credentials"],
    ));
    problems.extend(fields(
        "authorization.credentials",
        &ep["authorization"]["credentials"],
        SECRET_KEY_SELECTOR,
        &["key", "name"],
    ));
    if let Some(interval) = ep["interval"].as_str() {
        assert!(is_duration(interval), "interval {interval:?}");
    }
    assert!(problems.is_empty(), "{}:\n{}", pm.id(), problems.join("\n"));

    // What it scrapes: the Deployment of every overlay, as released.
    let namespaces: Vec<&str> = spec["namespaceSelector"]["matchNames"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let selector = spec["selector"]["matchLabels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert!(
        !selector.is_empty(),
        "{}: the selector names no label",
        pm.id()
    );
    let port = ep["port"]
        .as_str()
        .unwrap_or_else(|| panic!("{}: the endpoint names no port", pm.id()));
    for source in release::sources().unwrap() {
        let text = std::fs::read_to_string(source.path())
            .unwrap_or_else(|e| panic!("{}: {e}; run `{REGENERATE}`", source.file));
        for d in objects(&text)
            .unwrap()
            .iter()
            .filter(|o| o.kind == "Deployment")
        {
            let ctx = format!("{} {}", source.file, d.id());
            assert!(
                namespaces.contains(&d.namespace.as_deref().unwrap_or("default")),
                "{ctx}: the PodMonitor's namespaceSelector {namespaces:?} misses it"
            );
            let pod = &d.json["spec"]["template"];
            for (k, v) in &selector {
                assert_eq!(
                    &pod["metadata"]["labels"][k], v,
                    "{ctx}: the PodMonitor selects {k}={v}"
                );
            }
            let container = &pod["spec"]["containers"][0];
            let declared = container["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| p["name"] == port)
                .unwrap_or_else(|| panic!("{ctx}: no container port named {port}"));
            assert_eq!(declared["containerPort"], 10258, "{ctx}: --secure-port");
            // The probes on that port use HTTPS, so the scrape must too.
            assert_eq!(
                container["readinessProbe"]["httpGet"]["scheme"], "HTTPS",
                "{ctx}"
            );
        }
    }
    assert_eq!(
        ep["scheme"],
        "https",
        "{}: /metrics is served over HTTPS only",
        pm.id()
    );
    assert_eq!(ep["path"], "/metrics", "{}", pm.id());
    assert_eq!(
        ep["tlsConfig"]["insecureSkipVerify"],
        true,
        "{}: the default certificate is self-signed at startup",
        pm.id()
    );

    // The token: a service-account token Secret of an account that may get /metrics, and nothing
    // else.
    let secret_name = ep["authorization"]["credentials"]["name"].as_str().unwrap();
    assert_eq!(
        ep["authorization"]["credentials"]["key"],
        "token",
        "{}",
        pm.id()
    );
    let secret = objs
        .iter()
        .find(|o| o.kind == "Secret" && o.name == secret_name && o.namespace == pm.namespace)
        .unwrap_or_else(|| panic!("{}: Secret {secret_name} is not in its namespace", pm.id()));
    assert_eq!(
        secret.json["type"],
        "kubernetes.io/service-account-token",
        "{}",
        secret.id()
    );
    let account = secret.json["metadata"]["annotations"]["kubernetes.io/service-account.name"]
        .as_str()
        .unwrap_or_else(|| panic!("{}: names no ServiceAccount", secret.id()));
    assert!(
        objs.iter().any(|o| o.kind == "ServiceAccount"
            && o.name == account
            && o.namespace == secret.namespace),
        "ServiceAccount {account} is not rendered"
    );
    let bindings: Vec<&Object> = objs
        .iter()
        .filter(|o| o.kind == "ClusterRoleBinding" || o.kind == "RoleBinding")
        .collect();
    assert_eq!(bindings.len(), 1, "one binding, for the metrics reader");
    let b = bindings[0];
    assert_eq!(
        b.json["subjects"],
        serde_json::json!([{"kind": "ServiceAccount", "name": account, "namespace": secret.namespace}]),
        "{}",
        b.id()
    );
    let role = objs
        .iter()
        .find(|o| {
            o.kind == "ClusterRole" && Some(o.name.as_str()) == b.json["roleRef"]["name"].as_str()
        })
        .unwrap_or_else(|| panic!("{} binds a ClusterRole that is not rendered", b.id()));
    assert_eq!(
        role.json["rules"],
        serde_json::json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]),
        "{}: get /metrics and nothing more",
        role.id()
    );
}

/// The workspace's repository URL (Cargo.toml, `[workspace.package] repository`).
fn repository() -> String {
    let path = deploy_dir().join("../Cargo.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("repository = \""))
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap_or_else(|| panic!("{}: no repository = \"…\"", path.display()))
        .to_string()
}

/// The `## ` headings of deploy/RUNBOOK.md as GitHub anchors, with the heading text.
fn runbook_sections() -> BTreeMap<String, String> {
    let path = deploy_dir().join("RUNBOOK.md");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|h| {
            let anchor: String = h
                .trim()
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
                .map(|c| if c == ' ' { '-' } else { c })
                .collect();
            (anchor, h.trim().to_string())
        })
        .collect()
}

#[test]
fn every_alert_is_well_formed_and_has_a_runbook_section() {
    let rule = the_one(monitoring(), "PrometheusRule");
    let mut problems = fields("PrometheusRule", &rule.json, OBJECT_TOP, &["spec"]);
    problems.extend(fields("spec", &rule.json["spec"], &["groups"], &[]));
    let base = format!("{}/blob/main/deploy/RUNBOOK.md#", repository());
    let sections = runbook_sections();
    let mut alerts = BTreeSet::new();
    let mut group_names = BTreeSet::new();
    for (g, group) in rule.json["spec"]["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        problems.extend(fields(
            &format!("groups[{g}]"),
            group,
            RULE_GROUP,
            &["name", "rules"],
        ));
        if !group_names.insert(group["name"].as_str().unwrap_or_default().to_string()) {
            problems.push(format!("groups[{g}]: the group name repeats"));
        }
        for (i, r) in group["rules"].as_array().into_iter().flatten().enumerate() {
            let at = format!("groups[{g}].rules[{i}]");
            problems.extend(fields(
                &at,
                r,
                RULE,
                &["alert", "expr", "labels", "annotations"],
            ));
            let Some(alert) = r["alert"].as_str() else {
                continue;
            };
            let at = format!("{at} ({alert})");
            if !alerts.insert(alert.to_string()) {
                problems.push(format!("{at}: the alert name repeats"));
            }
            if r["expr"].as_str().is_none_or(|e| e.trim().is_empty()) {
                problems.push(format!("{at}: expr is not a PromQL string"));
            }
            for key in ["for", "keep_firing_for"] {
                if let Some(d) = r.get(key)
                    && !d.as_str().is_some_and(is_duration)
                {
                    problems.push(format!("{at}: {key} {d} is not a duration"));
                }
            }
            let severity = r["labels"]["severity"].as_str().unwrap_or_default();
            if !SEVERITIES.contains(&severity) {
                problems.push(format!(
                    "{at}: severity {severity:?}, want one of {SEVERITIES:?}"
                ));
            }
            for key in ["summary", "description", "runbook_url"] {
                if r["annotations"][key].as_str().is_none_or(str::is_empty) {
                    problems.push(format!("{at}: no annotation {key}"));
                }
            }
            let anchor = alert.to_lowercase();
            let wanted_url = format!("{base}{anchor}");
            if r["annotations"]["runbook_url"] != wanted_url.as_str() {
                problems.push(format!(
                    "{at}: runbook_url {}, want {wanted_url}",
                    r["annotations"]["runbook_url"]
                ));
            }
            if sections.get(&anchor).map(String::as_str) != Some(alert) {
                problems.push(format!(
                    "{at}: deploy/RUNBOOK.md has no section `## {alert}`"
                ));
            }
        }
    }
    for (name, what) in REQUIRED_ALERTS {
        if !alerts.contains(*name) {
            problems.push(format!("no alert {name} ({what})"));
        }
    }
    for (anchor, heading) in &sections {
        if heading.starts_with("WasmCcm") && !alerts.iter().any(|a| a.to_lowercase() == *anchor) {
            problems.push(format!(
                "deploy/RUNBOOK.md: section `## {heading}` has no alert"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "deploy/monitoring/prometheusrule.yaml:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_dashboard_is_a_grafana_dashboard_over_a_prometheus_data_source() {
    let dash = dashboard();
    let mut problems = Vec::new();
    for key in ["title", "uid"] {
        if dash[key].as_str().is_none_or(|v| v.is_empty()) {
            problems.push(format!("no {key}"));
        }
    }
    if !dash["schemaVersion"].is_u64() {
        problems.push("no schemaVersion".into());
    }
    let variables = dash["templating"]["list"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let datasource = variables
        .iter()
        .find(|v| v["type"] == "datasource" && v["query"] == "prometheus");
    let Some(datasource) = datasource else {
        panic!("dashboard.json: no template variable of type datasource for prometheus");
    };
    let reference = format!("${{{}}}", datasource["name"].as_str().unwrap_or_default());
    let mut ids = BTreeSet::new();
    // Ids are unique across rows and the panels in them.
    let top: Vec<Value> = dash["panels"].as_array().cloned().unwrap_or_default();
    let nested = top
        .iter()
        .flat_map(|p| p["panels"].as_array().cloned().unwrap_or_default());
    for p in top.iter().cloned().chain(nested) {
        if !ids.insert(p["id"].as_u64()) {
            problems.push(format!("panel id {} repeats (or is missing)", p["id"]));
        }
    }
    for p in panels(&dash) {
        let title = p["title"].as_str().unwrap_or_default();
        if title.is_empty() {
            problems.push(format!("panel {} has no title", p["id"]));
        }
        let grid = &p["gridPos"];
        let (x, w, h) = (grid["x"].as_u64(), grid["w"].as_u64(), grid["h"].as_u64());
        if !matches!((x, w, h), (Some(x), Some(w), Some(h)) if w > 0 && h > 0 && x + w <= 24)
            || !grid["y"].is_u64()
        {
            problems.push(format!(
                "panel {title:?}: gridPos {grid} is not within 24 columns"
            ));
        }
        if p["datasource"]["uid"] != reference.as_str() {
            problems.push(format!("panel {title:?}: datasource is not {reference}"));
        }
        let targets = p["targets"].as_array().cloned().unwrap_or_default();
        if targets.is_empty() {
            problems.push(format!("panel {title:?}: no query"));
        }
        let mut refs = BTreeSet::new();
        for t in &targets {
            if !refs.insert(t["refId"].as_str().unwrap_or_default().to_string()) {
                problems.push(format!("panel {title:?}: refId {} repeats", t["refId"]));
            }
            if t["expr"].as_str().is_none_or(|e| e.trim().is_empty()) {
                problems.push(format!("panel {title:?}: a target without expr"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "deploy/monitoring/dashboard.json:\n{}",
        problems.join("\n")
    );
}

#[test]
fn durations_are_read_as_the_crds_pattern_says() {
    for ok in ["0", "30s", "1h30m", "15m", "1d2h", "500ms", "1m500ms"] {
        assert!(is_duration(ok), "{ok}");
    }
    for bad in ["", "m", "30", "15min", "1m1h", "1s1s", "1.5h", "-1m"] {
        assert!(!is_duration(bad), "{bad}");
    }
}
