//! Prometheus metrics in the text exposition format: upstream's controller metric names plus
//! wasm-ccm's per-driver figures.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Counter,
    Gauge,
    Histogram(&'static [f64]),
}

const CALL_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
const DELAY_BUCKETS: &[f64] = &[
    0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];
/// client-go's work queue histograms: `ExponentialBuckets(10e-9, 10, 10)`
/// (`k8s.io/component-base` v0.36.2 `metrics/prometheus/workqueue/metrics.go`).
const QUEUE_BUCKETS: &[f64] = &[1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0];
/// The delegated authentication and authorization request durations (`k8s.io/apiserver`
/// v0.36.2 `pkg/authentication/authenticatorfactory/metrics.go`, `authorizerfactory`).
const REVIEW_BUCKETS: &[f64] = &[0.25, 0.5, 0.7, 1.0, 1.5, 3.0, 5.0, 10.0];
/// client-go's REST client latency (`k8s.io/component-base` v0.36.2
/// `metrics/prometheus/restclient/metrics.go`).
const REST_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

/// Every metric: name, kind, help.
const FAMILIES: &[(&str, Kind, &str)] = &[
    (
        "apiserver_delegated_authn_request_total",
        Kind::Counter,
        "TokenReviews made for requests to the serving port, by HTTP status code.",
    ),
    (
        "apiserver_delegated_authn_request_duration_seconds",
        Kind::Histogram(REVIEW_BUCKETS),
        "Seconds a TokenReview for the serving port took, by HTTP status code.",
    ),
    (
        "apiserver_delegated_authz_request_duration_seconds",
        Kind::Histogram(REVIEW_BUCKETS),
        "Seconds a SubjectAccessReview for the serving port took, by HTTP status code.",
    ),
    (
        "apiserver_delegated_authz_request_total",
        Kind::Counter,
        "SubjectAccessReviews made for requests to the serving port, by HTTP status code.",
    ),
    (
        "wasm_ccm_serving_requests_total",
        Kind::Counter,
        "Requests answered on the serving port (/healthz, /livez, /readyz, /metrics, other), by status code.",
    ),
    (
        "node_controller_cloud_provider_taint_removal_delay_seconds",
        Kind::Histogram(DELAY_BUCKETS),
        "Seconds from node creation to the removal of the uninitialized taint.",
    ),
    (
        "node_controller_initial_node_sync_delay_seconds",
        Kind::Histogram(DELAY_BUCKETS),
        "Seconds from node creation to its first successful sync.",
    ),
    (
        "wasm_ccm_nodes_pending_initialization",
        Kind::Gauge,
        "Nodes still carrying the uninitialized taint (their events say why).",
    ),
    (
        "service_controller_loadbalancer_sync_total",
        Kind::Counter,
        "Load-balancer syncs (ensure or delete) started.",
    ),
    (
        "service_controller_nodesync_error_total",
        Kind::Counter,
        "Load-balancer backend updates that failed.",
    ),
    (
        "service_controller_nodesync_latency_seconds",
        Kind::Histogram(CALL_BUCKETS),
        "Seconds one node-sync pass over all load balancers took.",
    ),
    (
        "service_controller_update_loadbalancer_host_latency_seconds",
        Kind::Histogram(CALL_BUCKETS),
        "Seconds one load balancer's backend update took.",
    ),
    (
        "route_controller_route_sync_total",
        Kind::Counter,
        "Route reconciliations, by trigger (node_change, periodic) and outcome (changed, noop, error).",
    ),
    (
        "route_controller_route_corrections_total",
        Kind::Counter,
        "Periodic route reconciliations that created or deleted routes (watch-based gate only).",
    ),
    (
        "leader_election_master_status",
        Kind::Gauge,
        "1 while this instance holds the lease.",
    ),
    (
        "running_managed_controllers",
        Kind::Gauge,
        "1 while a controller runs, by upstream's controller name and manager.",
    ),
    (
        "wasm_ccm_service_account_token_failures_total",
        Kind::Counter,
        "Failed token requests for a controller's ServiceAccount (--use-service-account-credentials), by account.",
    ),
    (
        "leader_election_slowpath_total",
        Kind::Counter,
        "Renewals the lease holder made through a read of the lease (its optimistic write was refused or its record was stale), by lease name.",
    ),
    (
        "workqueue_adds_total",
        Kind::Counter,
        "Keys added to a work queue.",
    ),
    (
        "workqueue_retries_total",
        Kind::Counter,
        "Keys re-added after a failure.",
    ),
    (
        "wasm_ccm_shadow_writes_total",
        Kind::Counter,
        "Shadow mode: distinct would-be writes (new or changed, not repeats) by controller (or driver function) and target (kube, cloud).",
    ),
    (
        "wasm_ccm_load_balancer_handovers_total",
        Kind::Counter,
        "Several drivers: load balancers a driver deleted because the Service's class moved to another driver (from, to).",
    ),
    (
        "wasm_ccm_node_ownership_skipped_total",
        Kind::Counter,
        "Nodes left alone because no configured driver owns them (reason: foreign, ambiguous, unrouted), counted once per node and reason.",
    ),
    (
        "wasm_ccm_shadow_differences",
        Kind::Gauge,
        "Shadow mode: would-be writes by driver and verdict (pending, agreed, diverged); 0 diverged means switching changes nothing known.",
    ),
    (
        "wasm_ccm_reconcile_errors_total",
        Kind::Counter,
        "Failed reconciles by controller and kind (kubernetes, a driver error case, host-error, in-progress, answer-refused).",
    ),
    (
        "workqueue_depth",
        Kind::Gauge,
        "Keys waiting in a work queue.",
    ),
    (
        "workqueue_queue_duration_seconds",
        Kind::Histogram(QUEUE_BUCKETS),
        "Seconds a key waited in a work queue before a worker took it.",
    ),
    (
        "workqueue_work_duration_seconds",
        Kind::Histogram(QUEUE_BUCKETS),
        "Seconds a worker took to process a key.",
    ),
    (
        "workqueue_unfinished_work_seconds",
        Kind::Gauge,
        "Seconds of work in progress, summed over the keys being processed.",
    ),
    (
        "workqueue_longest_running_processor_seconds",
        Kind::Gauge,
        "Seconds the longest-running key being processed has run.",
    ),
    (
        "wasm_ccm_driver_calls_total",
        Kind::Counter,
        "Driver calls by function and result (ok, or the error case).",
    ),
    (
        "wasm_ccm_instance_listings_total",
        Kind::Counter,
        "Instance listings taken (instance-listing, contract 0.2.2), by outcome: ok, not-implemented, failed, refused (a bound broken).",
    ),
    (
        "wasm_ccm_instance_listing_lookups_total",
        Kind::Counter,
        "Nodes looked up in the instance listing, by answer: listed (answered without a per-node call) or per-node.",
    ),
    (
        "wasm_ccm_driver_calls_in_flight",
        Kind::Gauge,
        "Driver calls running now (a call that stays for long is a hung driver's).",
    ),
    (
        "wasm_ccm_driver_call_duration_seconds",
        Kind::Histogram(CALL_BUCKETS),
        "Driver call latency, instantiation included.",
    ),
    (
        "wasm_ccm_driver_http_requests_total",
        Kind::Counter,
        "Cloud HTTP requests made by the driver, by destination host and status (or error kind).",
    ),
    (
        "wasm_ccm_cloud_requests_total",
        Kind::Counter,
        "Cloud requests of a driver with a request budget (--cloud-request-rate), by outcome: sent (at once), waited (sent after waiting for the budget or the cloud's pause), refused_by_budget and refused_while_paused (not sent: no room before the call's deadline), rate_limited_by_cloud (sent and answered 429, or 503 with Retry-After, which paused the driver).",
    ),
    (
        "wasm_ccm_cloud_request_wait_seconds_total",
        Kind::Counter,
        "Seconds a driver's cloud requests waited for its request budget or the cloud's pause, summed over requests.",
    ),
    (
        "wasm_ccm_secret_misuse_total",
        Kind::Counter,
        "Driver requests the host refused because a credential's placeholder was where its grant does not allow it, by secret and reason (origin, position, plain-http).",
    ),
    (
        "wasm_ccm_driver_dropped_log_lines_total",
        Kind::Counter,
        "Driver log lines dropped by the rate limit.",
    ),
    (
        "wasm_ccm_driver_lowered_bytes_total",
        Kind::Counter,
        "Bytes copied into driver instances: call arguments and the answers of cluster imports.",
    ),
    (
        "wasm_ccm_driver_instances_total",
        Kind::Counter,
        "Driver instances created.",
    ),
    (
        "wasm_ccm_driver_instances_recycled_total",
        Kind::Counter,
        "Healthy driver instances retired by age, calls or memory.",
    ),
    (
        "wasm_ccm_driver_info",
        Kind::Gauge,
        "1 for the running driver's name, version and sha256.",
    ),
    (
        "wasm_ccm_driver_loads_total",
        Kind::Counter,
        "Driver versions put in service, by trigger (startup, reload).",
    ),
    (
        "wasm_ccm_driver_reload_refusals_total",
        Kind::Counter,
        "New driver versions refused while the running one kept serving, by reason.",
    ),
    (
        "wasm_ccm_driver_load_duration_seconds",
        Kind::Gauge,
        "Seconds the last accepted driver load took (read, compile, info, init).",
    ),
    (
        "wasm_ccm_driver_answers_refused_total",
        Kind::Counter,
        "Parts of driver answers refused before anything was written to Kubernetes, by rule.",
    ),
    (
        "wasm_ccm_kubernetes_version_supported",
        Kind::Gauge,
        "1 when the API server's Kubernetes version (server_version, its gitVersion at start-up) is one this wasm-ccm supports (the last three minors); 0 when it is not or could not be read.",
    ),
    (
        "rest_client_requests_total",
        Kind::Counter,
        "Kubernetes API requests of the process, by HTTP status code (<error> without an answer), method and host.",
    ),
    (
        "rest_client_request_duration_seconds",
        Kind::Histogram(REST_BUCKETS),
        "Seconds until a Kubernetes API request's response headers, by verb and host.",
    ),
    (
        "wasm_ccm_kube_requests_total",
        Kind::Counter,
        "Requests to the Kubernetes API by verb and result code.",
    ),
];

#[cfg(test)]
fn kind_of(name: &str) -> Option<Kind> {
    FAMILIES.iter().find(|f| f.0 == name).map(|f| f.1)
}

#[derive(Debug, Clone, Default)]
struct Series {
    value: f64,
    buckets: Vec<u64>,
    count: u64,
}

/// The metric registry. An unknown name is ignored (a typo must never crash a controller); the
/// test `every_metric_name_in_the_sources_is_registered` reads this crate's sources and fails
/// on any name that is not in `FAMILIES`, in debug and `--release` builds alike (the
/// `debug_assert!` in `with` only catches the names a debug run happens to reach).
#[derive(Debug, Default)]
pub struct Metrics {
    series: Mutex<BTreeMap<(&'static str, String), Series>>,
}

fn label_string(labels: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let v = v
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n");
        let _ = write!(out, "{k}=\"{v}\"");
    }
    out
}

impl Metrics {
    fn with(&self, name: &str, labels: &[(&str, &str)], f: impl FnOnce(&mut Series, Kind)) {
        let Some((static_name, kind, _)) = FAMILIES.iter().find(|f| f.0 == name) else {
            debug_assert!(false, "unknown metric {name}");
            return;
        };
        let mut map = self.series.lock().unwrap_or_else(|p| p.into_inner());
        let series = map.entry((static_name, label_string(labels))).or_default();
        f(series, *kind);
    }

    /// Adds one to a counter.
    pub fn inc(&self, name: &str, labels: &[(&str, &str)]) {
        self.add(name, labels, 1.0);
    }

    /// Adds `v` to a counter or gauge.
    pub fn add(&self, name: &str, labels: &[(&str, &str)], v: f64) {
        self.with(name, labels, |s, _| s.value += v);
    }

    /// Sets a gauge (or a counter mirrored from elsewhere).
    pub fn set(&self, name: &str, labels: &[(&str, &str)], v: f64) {
        self.with(name, labels, |s, _| s.value = v);
    }

    /// Drops every series of `name` (before re-setting a gauge family from scratch).
    pub fn clear(&self, name: &str) {
        self.series
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(n, _), _| *n != name);
    }

    /// Drops the series of `name` that carry the label `k="v"` (one driver's, when several
    /// drivers re-set their own series of one family).
    pub fn clear_where(&self, name: &str, (k, v): (&str, &str)) {
        let label = label_string(&[(k, v)]);
        self.series
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(n, labels), _| *n != name || !labels.split(',').any(|l| l == label));
    }

    /// Records one observation in a histogram.
    pub fn observe(&self, name: &str, labels: &[(&str, &str)], v: f64) {
        self.with(name, labels, |s, kind| {
            if let Kind::Histogram(bounds) = kind {
                if s.buckets.len() != bounds.len() {
                    s.buckets = vec![0; bounds.len()];
                }
                for (b, bound) in s.buckets.iter_mut().zip(bounds.iter()) {
                    if v <= *bound {
                        *b += 1;
                    }
                }
                s.count += 1;
                s.value += v;
            }
        });
    }

    /// The current value of a counter or gauge series (tests).
    #[cfg(test)]
    pub(crate) fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.series
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(name, label_string(labels)))
            .map_or(0.0, |s| s.value)
    }

    /// The sum of every series of a counter, e.g. all driver calls.
    pub fn total(&self, name: &str) -> f64 {
        self.series
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|((n, _), _)| *n == name)
            .map(|(_, s)| if s.count > 0 { s.count as f64 } else { s.value })
            .sum()
    }

    /// [`Metrics::total`] over the series of `name` whose labels (`k="v",…` as rendered) satisfy
    /// `keep`.
    pub fn total_matching(&self, name: &str, keep: impl Fn(&str) -> bool) -> f64 {
        self.series
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|((n, labels), _)| *n == name && keep(labels))
            .map(|(_, s)| if s.count > 0 { s.count as f64 } else { s.value })
            .sum()
    }

    /// The registry in Prometheus text format.
    pub fn render(&self) -> String {
        let map = self.series.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = String::new();
        for (name, kind, help) in FAMILIES {
            let series: Vec<_> = map.iter().filter(|((n, _), _)| n == name).collect();
            if series.is_empty() {
                continue;
            }
            let type_name = match kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
                Kind::Histogram(_) => "histogram",
            };
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {type_name}");
            for ((_, labels), s) in series {
                let braces = |extra: &str| {
                    let all = [labels.as_str(), extra]
                        .iter()
                        .filter(|p| !p.is_empty())
                        .copied()
                        .collect::<Vec<_>>()
                        .join(",");
                    if all.is_empty() {
                        String::new()
                    } else {
                        format!("{{{all}}}")
                    }
                };
                match kind {
                    Kind::Histogram(bounds) => {
                        for (bound, n) in bounds.iter().zip(&s.buckets) {
                            let _ = writeln!(
                                out,
                                "{name}_bucket{} {n}",
                                braces(&format!("le=\"{bound}\""))
                            );
                        }
                        let _ = writeln!(out, "{name}_bucket{} {}", braces("le=\"+Inf\""), s.count);
                        let _ = writeln!(out, "{name}_sum{} {}", braces(""), s.value);
                        let _ = writeln!(out, "{name}_count{} {}", braces(""), s.count);
                    }
                    _ => {
                        let _ = writeln!(out, "{name}{} {}", braces(""), s.value);
                    }
                }
            }
        }
        out
    }
}

/// Whether `name` is a registered metric (for tests of callers).
#[cfg(test)]
pub(crate) fn is_known(name: &str) -> bool {
    kind_of(name).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_gauges_and_histograms() {
        let m = Metrics::default();
        m.inc("route_controller_route_sync_total", &[]);
        m.inc(
            "wasm_ccm_driver_calls_total",
            &[("driver", "static"), ("function", "a\"b"), ("result", "ok")],
        );
        m.set(
            "leader_election_master_status",
            &[("name", "cloud-controller-manager")],
            1.0,
        );
        m.observe(
            "wasm_ccm_driver_call_duration_seconds",
            &[("function", "f")],
            0.003,
        );
        let text = m.render();
        assert!(text.contains("# TYPE route_controller_route_sync_total counter\nroute_controller_route_sync_total 1\n"), "{text}");
        assert!(text.contains(r#"function="a\"b""#), "{text}");
        assert!(
            text.contains(
                r#"wasm_ccm_driver_call_duration_seconds_bucket{function="f",le="0.0025"} 0"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"wasm_ccm_driver_call_duration_seconds_bucket{function="f",le="0.005"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"wasm_ccm_driver_call_duration_seconds_count{function="f"} 1"#),
            "{text}"
        );
        assert_eq!(
            m.value(
                "leader_election_master_status",
                &[("name", "cloud-controller-manager")]
            ),
            1.0
        );
        assert_eq!(m.total("wasm_ccm_driver_calls_total"), 1.0);
        assert!(is_known("workqueue_depth") && !is_known("nope"));
    }

    /// The metric names written in the sources of `dir` (recursively, `metrics.rs` excepted),
    /// with their file.
    fn names_in_sources(dir: &std::path::Path, found: &mut Vec<(String, String)>) {
        let entries =
            std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                names_in_sources(&path, found);
            } else if path.extension().is_some_and(|x| x == "rs")
                && path.file_name().is_some_and(|n| n != "metrics.rs")
            {
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
                let file = path.display().to_string();
                found.extend(names_in_text(&text).into_iter().map(|n| (file.clone(), n)));
            }
        }
    }

    /// The metric names in one source text: every `"…"` literal that starts with one of the
    /// project's metric prefixes (written here, not taken from `FAMILIES`), and every literal
    /// passed first to a registry method on a receiver named `metrics` (`metrics.inc("…"`,
    /// across line breaks), whatever its prefix.
    fn names_in_text(text: &str) -> Vec<String> {
        const PREFIXES: [&str; 7] = [
            "wasm_ccm_",
            "workqueue_",
            "node_controller_",
            "service_controller_",
            "route_controller_",
            "leader_election_",
            "apiserver_",
        ];
        const METHODS: [&str; 6] = ["inc", "add", "set", "observe", "clear", "total"];
        let mut found = Vec::new();
        for (i, _) in text.match_indices('"') {
            let rest = &text[i + 1..];
            let end = rest
                .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(rest.len());
            let name = &rest[..end];
            if rest[end..].starts_with('"') && PREFIXES.iter().any(|p| name.starts_with(p)) {
                found.push(name.to_string());
            }
        }
        for (i, _) in text.match_indices("metrics") {
            let Some(rest) = text[i + "metrics".len()..].trim_start().strip_prefix('.') else {
                continue;
            };
            let rest = rest.trim_start();
            let Some(args) = METHODS.iter().find_map(|m| {
                rest.strip_prefix(*m)
                    .and_then(|r| r.trim_start().strip_prefix('('))
            }) else {
                continue;
            };
            if let Some(literal) = args.trim_start().strip_prefix('"') {
                found.push(literal.split('"').next().unwrap_or_default().to_string());
            }
        }
        found
    }

    /// A registered name, or a histogram's rendered series of one.
    fn registered(name: &str) -> bool {
        is_known(name)
            || ["_bucket", "_count", "_sum"].iter().any(|suffix| {
                name.strip_suffix(suffix)
                    .is_some_and(|base| matches!(kind_of(base), Some(Kind::Histogram(_))))
            })
    }

    #[test]
    fn every_metric_name_in_the_sources_is_registered() {
        // This crate's loops and the manager's process concerns (leader election, serving,
        // reload, the version gauge) write into the one registry.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut found = Vec::new();
        names_in_sources(&root.join("src"), &mut found);
        names_in_sources(&root.join("../manager/src"), &mut found);
        let unknown: Vec<&(String, String)> =
            found.iter().filter(|(_, name)| !registered(name)).collect();
        assert!(
            unknown.is_empty(),
            "metric names not in FAMILIES (a typo is silently dropped in release builds): {unknown:#?}"
        );
        // The scan found the call sites: every family is used somewhere, so it cannot pass by
        // finding nothing (and a family nobody writes is dead).
        let unused: Vec<&str> = FAMILIES
            .iter()
            .map(|f| f.0)
            .filter(|family| !found.iter().any(|(_, name)| name == family))
            .collect();
        assert!(
            unused.is_empty(),
            "families no source writes (or the scan is broken): {unused:?}"
        );
    }

    #[test]
    fn the_source_scan_sees_a_misspelled_name() {
        let text = "fn f(m: &M) {\n    self.ctx\n        .metrics\n        .inc(\n            \"wasm_ccm_driver_cals_total\",\n            &[],\n        );\n    m.metrics.set(\"leader_electon_status\", &[], 1.0);\n}\n";
        let names = names_in_text(text);
        assert!(
            names.contains(&"wasm_ccm_driver_cals_total".to_string()),
            "{names:?}"
        );
        assert!(
            names.contains(&"leader_electon_status".to_string()),
            "{names:?}"
        );
        assert!(names.iter().all(|n| !registered(n)), "{names:?}");
    }
}
