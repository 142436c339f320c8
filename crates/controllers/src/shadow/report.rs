//! The shadow report: what a shadow run would have written, judged against what is there. One
//! format for `GET /shadow` and `wasm-ccm shadow report`, which renders it for people.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a would-be write compares with what the cluster and the cloud show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Not yet judged: the CCM in charge has until the grace period ends to do the same.
    Pending,
    /// The object already is, or became, what the shadow would write (for a cloud write: a
    /// later read-only call about the object found nothing left to write).
    Agreed,
    /// The grace period passed and the object still differs: switching would change it.
    Diverged,
}

impl Verdict {
    /// The label in metrics and reports.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pending => "pending",
            Verdict::Agreed => "agreed",
            Verdict::Diverged => "diverged",
        }
    }
}

/// One field a would-be Kubernetes write changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldChange {
    /// `metadata.labels["topology.kubernetes.io/zone"]`.
    pub path: String,
    /// The value there now; absent when the field is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Value>,
    /// The value the shadow would write (`null`: it would remove the field).
    pub to: Value,
}

/// One object's would-be write of one kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Difference {
    /// `Node`, `Service`, or `Driver` for calls about no object (housekeeping, routes).
    pub kind: String,
    /// A Node's name, a Service's `namespace/name`.
    pub object: String,
    /// The controller that would write (or the driver function that would call the cloud).
    pub controller: String,
    /// `kube` or `cloud`.
    pub target: String,
    /// `patch`, `patch-status` or `delete` for Kubernetes; the driver function for the cloud.
    pub action: String,
    /// The verdict now.
    pub verdict: Verdict,
    /// Kubernetes patches: the fields that differ from the object now (empty once agreed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<FieldChange>,
    /// Cloud: the requests the host refused (the first write of each call; the call stopped
    /// there with the driver's error).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cloud_writes: Vec<String>,
    /// Cloud, once agreed: what showed the cloud has that state (`a later load-balancer.ensure
    /// needed no cloud write`; the shadow re-runs the object's reconcile, read-only, until one
    /// does or the grace passes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled: Option<String>,
    /// With `--shadow-validate=server`: the apiserver's verdict on the write sent with
    /// `dryRun=All`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apiserver: Option<String>,
    /// When the shadow first wanted this write (RFC 3339).
    pub first_seen: String,
    /// When what it wants last changed (the grace period counts from here).
    pub last_changed: String,
    /// How many times it wanted it (each reconcile that would have written).
    pub attempts: u64,
}

/// Counts by verdict.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Still within the grace period.
    pub pending: usize,
    /// The object is what the shadow would write.
    pub agreed: usize,
    /// Switching would change these.
    pub diverged: usize,
}

/// What `GET /shadow` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShadowReport {
    /// The driver in service.
    pub driver: String,
    /// `--shadow-grace`, in seconds.
    pub grace_seconds: u64,
    /// When the shadow started (RFC 3339).
    pub started: String,
    /// When this report was made (RFC 3339).
    pub generated: String,
    /// Counts by verdict.
    pub summary: Summary,
    /// Would-be writes the log had no room for (it keeps a bounded number of objects).
    #[serde(default)]
    pub dropped: u64,
    /// Every would-be write, diverged first, then pending, then agreed.
    pub differences: Vec<Difference>,
}

impl ShadowReport {
    /// One report of several drivers' (a shadow run of a DriverSet keeps one log per driver):
    /// every difference, diverged first as in each, the counts summed, the drivers named in
    /// order. One report is returned as it is; none gives `None`.
    pub fn merge(reports: Vec<ShadowReport>) -> Option<ShadowReport> {
        let mut reports = reports.into_iter();
        let mut merged = reports.next()?;
        for r in reports {
            merged.driver = format!("{}, {}", merged.driver, r.driver);
            merged.started = merged.started.min(r.started);
            merged.summary.pending += r.summary.pending;
            merged.summary.agreed += r.summary.agreed;
            merged.summary.diverged += r.summary.diverged;
            merged.dropped += r.dropped;
            merged.differences.extend(r.differences);
            merged.differences.sort_by(|a, b| {
                b.verdict
                    .cmp(&a.verdict)
                    .then_with(|| (&a.kind, &a.object).cmp(&(&b.kind, &b.object)))
            });
        }
        Some(merged)
    }

    /// Whether switching would change nothing that is known now.
    pub fn agrees(&self) -> bool {
        self.summary.diverged == 0 && self.dropped == 0
    }

    /// The report for people, Terraform-style: one block per would-be write, `~` for a field
    /// that would change, `-` for a deletion, `+` for a request to the cloud.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "shadow of driver {} since {}, grace {} s: {} diverged, {} pending, {} agreed",
            self.driver,
            self.started,
            self.grace_seconds,
            self.summary.diverged,
            self.summary.pending,
            self.summary.agreed
        );
        if self.dropped > 0 {
            let _ = writeln!(
                out,
                "(the log was full: {} more would-be writes are not shown)",
                self.dropped
            );
        }
        for d in &self.differences {
            let _ = writeln!(
                out,
                "\n{} {}  {}  ({}, {} since {}, {} attempts)",
                d.kind,
                d.object,
                d.verdict.name(),
                d.controller,
                d.action,
                d.first_seen,
                d.attempts
            );
            if d.action == "delete" && d.target == "kube" {
                let _ = writeln!(out, "  - would delete the {}", d.kind);
            }
            for c in &d.changes {
                let from = c
                    .from
                    .as_ref()
                    .map_or("(absent)".to_string(), Value::to_string);
                let to = if c.to.is_null() {
                    "(removed)".to_string()
                } else {
                    c.to.to_string()
                };
                let _ = writeln!(out, "  ~ {}  {from} → {to}", c.path);
            }
            for w in &d.cloud_writes {
                let _ = writeln!(out, "  + {w}  (not sent; the call stopped there)");
            }
            if let Some(s) = &d.settled {
                let _ = writeln!(out, "  = the cloud has it: {s}");
            }
            if let Some(a) = &d.apiserver {
                let _ = writeln!(out, "  apiserver (dryRun=All): {a}");
            }
        }
        if self.differences.is_empty() {
            let _ = writeln!(
                out,
                "no would-be writes: the shadow agrees with the cluster"
            );
        }
        out
    }
}
