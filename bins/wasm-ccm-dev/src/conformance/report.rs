//! Check results, measurements, and the three report formats (text, JSON, JUnit XML).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;
use wasm_ccm_runtime::GuestBacktrace;
use wasm_ccm_runtime::HostError;

/// The outcome of one check on one subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Status {
    Pass,
    Fail,
    Skip,
}

/// One check on one subject (a node, a service, a function), e.g.
/// `provider/0.2/load-balancer/ensure-idempotent` on `default/web`.
#[derive(Debug, Clone, Serialize)]
pub(super) struct CheckResult {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    pub status: Status,
    pub message: String,
}

/// Cost of one exported function over the behavioural checks.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Measurement {
    pub function: String,
    pub calls: usize,
    pub median_ms: f64,
    pub max_ms: f64,
    pub peak_memory_bytes: usize,
    pub median_requests: usize,
    pub max_requests: usize,
}

/// A call that crashed during the run. The failed check's message carries the short form of its
/// backtrace; the report lists the whole one once per distinct crash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(super) struct Crash {
    /// The call, as `interface.function`.
    pub function: String,
    /// The trap, with the panic line when the driver printed one.
    pub detail: String,
    /// How many calls crashed this way.
    pub calls: usize,
    /// Innermost frame first, bounded and redacted by the host.
    pub backtrace: GuestBacktrace,
}

/// Distinct crashes a report lists; a driver that crashes everywhere would otherwise bury the
/// results under copies of one bug.
const MAX_CRASHES: usize = 10;

impl Crash {
    /// The crash `e` is, if it is one.
    pub(super) fn of(function: &str, e: &HostError) -> Option<Crash> {
        match e {
            HostError::Trap {
                detail, backtrace, ..
            } => Some(Crash {
                function: function.to_string(),
                detail: detail.clone(),
                calls: 1,
                backtrace: backtrace.clone(),
            }),
            _ => None,
        }
    }

    /// Adds `crash` to `crashes`, counting it when the same crash is already there.
    pub(super) fn add(crashes: &mut Vec<Crash>, crash: Crash) {
        let room = crashes.len() < MAX_CRASHES;
        let same = crashes.iter_mut().find(|c| {
            c.function == crash.function
                && c.detail == crash.detail
                && c.backtrace == crash.backtrace
        });
        match same {
            Some(c) => c.calls += 1,
            None if room => crashes.push(crash),
            None => {}
        }
    }

    /// The text form: the call and its detail, then the backtrace.
    fn text(&self) -> String {
        let calls = if self.calls == 1 {
            String::new()
        } else {
            format!(" ({} calls)", self.calls)
        };
        let mut out = format!("{}{calls}: {}\n", self.function, self.detail);
        for line in self.backtrace.full().lines() {
            let _ = writeln!(out, "  {line}");
        }
        out
    }
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Report {
    pub driver: String,
    pub sha256: String,
    pub size_bytes: usize,
    pub wit_version: String,
    pub level: String,
    pub cloud: String,
    pub results: Vec<CheckResult>,
    pub measurements: Vec<Measurement>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub crashes: Vec<Crash>,
    pub summary: Summary,
}

/// Counts by status.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(super) struct Summary {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
}

/// Collects results under a versioned id prefix.
pub(super) struct Checks {
    prefix: String,
    pub results: Vec<CheckResult>,
}

impl Checks {
    /// Results whose ids start with `provider/<wit major.minor>/`.
    pub(super) fn new(wit_version: &str) -> Checks {
        let mut parts = wit_version.split('.');
        let major = parts.next().unwrap_or("0");
        let minor = parts.next().unwrap_or("1");
        Checks {
            prefix: format!("provider/{major}.{minor}/"),
            results: Vec::new(),
        }
    }

    /// Records a result.
    pub(super) fn record(
        &mut self,
        id: &str,
        subject: Option<&str>,
        status: Status,
        message: String,
    ) {
        self.results.push(CheckResult {
            id: format!("{}{id}", self.prefix),
            subject: subject.map(str::to_string),
            status,
            message,
        });
    }

    /// Pass with the `Ok` message or fail with the `Err` one.
    pub(super) fn check(
        &mut self,
        id: &str,
        subject: Option<&str>,
        outcome: Result<String, String>,
    ) {
        match outcome {
            Ok(m) => self.record(id, subject, Status::Pass, m),
            Err(m) => self.record(id, subject, Status::Fail, egress_hint_for_scenarios(&m)),
        }
    }

    /// A check that could not run, and why.
    pub(super) fn skip(&mut self, id: &str, subject: Option<&str>, why: impl Into<String>) {
        self.record(id, subject, Status::Skip, why.into());
    }

    /// Whether any result failed.
    pub(super) fn failed(&self) -> bool {
        self.results.iter().any(|r| r.status == Status::Fail)
    }
}

/// Per-call figures, grouped by function.
#[derive(Default)]
pub(super) struct Meter {
    calls: BTreeMap<String, Vec<(Duration, usize, usize)>>,
}

impl Meter {
    /// Records one call: wall time, the instance's peak memory, requests made.
    pub(super) fn add(
        &mut self,
        function: &str,
        elapsed: Duration,
        peak_memory: usize,
        requests: usize,
    ) {
        self.calls
            .entry(function.to_string())
            .or_default()
            .push((elapsed, peak_memory, requests));
    }

    /// Medians and maxima per function.
    pub(super) fn measurements(&self) -> Vec<Measurement> {
        self.calls
            .iter()
            .map(|(function, calls)| {
                let mut times: Vec<Duration> = calls.iter().map(|c| c.0).collect();
                times.sort_unstable();
                let mut requests: Vec<usize> = calls.iter().map(|c| c.2).collect();
                requests.sort_unstable();
                let ms = |d: Duration| (d.as_secs_f64() * 1e5).round() / 100.0;
                Measurement {
                    function: function.clone(),
                    calls: calls.len(),
                    median_ms: ms(times[times.len() / 2]),
                    max_ms: ms(times[times.len() - 1]),
                    peak_memory_bytes: calls.iter().map(|c| c.1).max().unwrap_or(0),
                    median_requests: requests[requests.len() / 2],
                    max_requests: requests[requests.len() - 1],
                }
            })
            .collect()
    }
}

impl Report {
    /// Fills in the summary.
    pub(super) fn summarise(mut self) -> Report {
        let mut s = Summary::default();
        for r in &self.results {
            match r.status {
                Status::Pass => s.passed += 1,
                Status::Fail => s.failed += 1,
                Status::Skip => s.skipped += 1,
            }
        }
        self.summary = s;
        self
    }

    /// The human-readable form.
    pub(super) fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "conformance of {} (wasm-ccm:provider@{}, {} bytes, sha256 {})\nlevel {}, cloud {}\n",
            self.driver,
            self.wit_version,
            self.size_bytes,
            short(&self.sha256),
            self.level,
            self.cloud
        );
        for r in &self.results {
            let mark = match r.status {
                Status::Pass => "PASS",
                Status::Fail => "FAIL",
                Status::Skip => "SKIP",
            };
            let subject = r
                .subject
                .as_deref()
                .map(|s| format!(" [{s}]"))
                .unwrap_or_default();
            let _ = writeln!(out, "{mark} {}{subject}", r.id);
            if r.status != Status::Pass || !r.message.is_empty() {
                let _ = writeln!(out, "     {}", r.message);
            }
        }
        if !self.crashes.is_empty() {
            let _ = writeln!(
                out,
                "\ncrashes (whole backtraces, innermost frame first; the first {MAX_CRASHES} distinct):"
            );
            for c in &self.crashes {
                for line in c.text().lines() {
                    let _ = writeln!(out, "  {line}");
                }
            }
        }
        if !self.measurements.is_empty() {
            let _ = writeln!(
                out,
                "\n{:<32} {:>5} {:>10} {:>10} {:>10} {:>9}",
                "function", "calls", "median ms", "max ms", "peak MiB", "requests"
            );
            for m in &self.measurements {
                let _ = writeln!(
                    out,
                    "{:<32} {:>5} {:>10.2} {:>10.2} {:>10.1} {:>4} ({})",
                    m.function,
                    m.calls,
                    m.median_ms,
                    m.max_ms,
                    m.peak_memory_bytes as f64 / (1 << 20) as f64,
                    m.median_requests,
                    m.max_requests
                );
            }
            let _ = writeln!(out, "(requests: median per call, max in parentheses)");
        }
        let s = self.summary;
        let _ = writeln!(
            out,
            "\n{} passed, {} failed, {} skipped: {}",
            s.passed,
            s.failed,
            s.skipped,
            if s.failed == 0 {
                "CONFORMANT"
            } else {
                "NOT CONFORMANT"
            }
        );
        out
    }

    /// The JSON form.
    pub(super) fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// JUnit XML: one test suite, one test case per result (`classname` = the area).
    pub(super) fn junit(&self) -> String {
        let s = self.summary;
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            out,
            "<testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">",
            xml(&format!("wasm-ccm-dev conformance {}", self.driver)),
            self.results.len(),
            s.failed,
            s.skipped
        );
        for r in &self.results {
            let area = r.id.rsplit_once('/').map(|(a, _)| a).unwrap_or(&r.id);
            let name = match &r.subject {
                Some(subject) => format!("{} [{subject}]", r.id),
                None => r.id.clone(),
            };
            let _ = write!(
                out,
                "  <testcase classname=\"{}\" name=\"{}\"",
                xml(area),
                xml(&name)
            );
            match r.status {
                Status::Pass => {
                    let _ = writeln!(out, "/>");
                }
                Status::Fail => {
                    let _ = writeln!(
                        out,
                        ">\n    <failure message=\"{}\"/>\n  </testcase>",
                        xml(&r.message)
                    );
                }
                Status::Skip => {
                    let _ = writeln!(
                        out,
                        ">\n    <skipped message=\"{}\"/>\n  </testcase>",
                        xml(&r.message)
                    );
                }
            }
        }
        if !self.crashes.is_empty() {
            let text: String = self.crashes.iter().map(Crash::text).collect();
            let _ = writeln!(out, "  <system-err>{}</system-err>", xml(&text));
        }
        out.push_str("</testsuite>\n");
        out
    }
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Report {
        let mut checks = Checks::new("0.2.0");
        checks.check("static/component", None, Ok("a component".into()));
        checks.check(
            "load-balancer/ensure-idempotent",
            Some("default/web"),
            Err("second ensure sent POST <x> & \"y\"".into()),
        );
        checks.skip(
            "robustness/http-500/instances.instance-metadata",
            None,
            "no requests",
        );
        Report {
            driver: "d.wasm".into(),
            sha256: "ab".repeat(32),
            size_bytes: 10,
            wit_version: "0.2.0".into(),
            level: "full".into(),
            cloud: "sim:static".into(),
            results: checks.results,
            measurements: vec![],
            crashes: vec![],
            summary: Summary::default(),
        }
        .summarise()
    }

    #[test]
    fn ids_are_versioned_and_summarised() {
        let r = sample();
        assert_eq!(r.results[0].id, "provider/0.2/static/component");
        assert_eq!(
            (r.summary.passed, r.summary.failed, r.summary.skipped),
            (1, 1, 1)
        );
        assert!(r.text().contains("NOT CONFORMANT"));
        let v: serde_json::Value = serde_json::from_str(&r.json()).unwrap();
        assert_eq!(v["results"][1]["status"], "fail");
    }

    #[test]
    fn junit_escapes_and_counts() {
        let x = sample().junit();
        assert!(
            x.contains("tests=\"3\" failures=\"1\" skipped=\"1\""),
            "{x}"
        );
        assert!(x.contains("&lt;x&gt; &amp; &quot;y&quot;"), "{x}");
        assert!(
            x.contains("classname=\"provider/0.2/load-balancer\""),
            "{x}"
        );
    }

    #[test]
    fn meter_reports_medians() {
        let mut m = Meter::default();
        for ms in [5, 1, 3] {
            m.add(
                "instances.instance-metadata",
                Duration::from_millis(ms),
                1 << 20,
                ms as usize,
            );
        }
        let got = &m.measurements()[0];
        assert_eq!((got.calls, got.median_ms, got.max_ms), (3, 3.0, 5.0));
        assert_eq!((got.median_requests, got.max_requests), (3, 5));
    }
}

/// The runtime's egress denials tell an operator which `--allow-egress` to add; in a conformance
/// run the grants come from the scenario, so the hint names `driver.egress` instead.
fn egress_hint_for_scenarios(message: &str) -> String {
    message.replace("--allow-egress ", "(in the scenario's driver.egress list) ")
}

#[cfg(test)]
mod egress_hint_tests {
    #[test]
    fn a_denial_in_conformance_points_at_the_scenario() {
        let m = super::egress_hint_for_scenarios(
            "egress to http://127.0.0.1:18090 denied (granted: https://api.acme.example); add it with --allow-egress http://127.0.0.1:18090",
        );
        assert!(!m.contains("--allow-egress"), "{m}");
        assert!(
            m.ends_with(
                "add it with (in the scenario's driver.egress list) http://127.0.0.1:18090"
            ),
            "{m}"
        );
    }
}
