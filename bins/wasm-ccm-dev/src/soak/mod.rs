//! `wasm-ccm-dev soak`: a chaos soak with invariants. The simulators run in this process; two
//! `wasm-ccm run` processes (this executable) elect a leader on a short lease and run the real
//! controllers with the real driver against them. A seeded generator picks every step: a
//! workload operation (nodes joining and leaving, instances deleted, shut down and started,
//! Services created, changed and deleted) or a fault from any layer (cloud 5xx, 429, latency,
//! busy refusals, slow provisioning; apiserver 409, 5xx, 429, connection resets, dropped and
//! expired watches, latency, seconds per request, restarts with the state kept; a network
//! partition between the processes and the cloud ([`partition`]); SIGKILL of the leader, also
//! right after a cloud write; driver reloads). Invariants are checked at every step and at
//! quiescence (see [`invariants`]). Each process incarnation talks to the apiserver with its own
//! bearer token, so the request log shows which one wrote. The processes' memory is sampled
//! throughout ([`rss`]), so a long soak also shows whether a replica's resident set grows.
//!
//! The schedule is a function of the seed; the timing is not. A violation prints the seed, the
//! step and the history that led to it (every step with its number), which is what makes it
//! explainable; the full history and the processes' logs stay in the work directory.
//!
//! A developer tool: it needs the simulators and the bundled drivers, and is self-contained so
//! it can move to a dev binary.

mod faults;
mod history;
pub(crate) mod invariants;
mod lease;
mod partition;
mod procs;
mod rng;
mod rss;
mod workload;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use serde_json::{Value, json};
use wasm_ccm_sim::kit;
use wasm_ccm_sim::kit::soak::{SoakCloud, Tally};
use wasm_ccm_sim::kube::{KubeSim, KubeSimOptions};

use faults::FaultKind;
use history::History;
use invariants::{Continuous, Violation};
use lease::{LEASE_NAME, LEASE_NAMESPACE};
use procs::Processes;
pub(crate) use procs::product_binary;
use rng::{Deck, SplitMix64};
use wasm_ccm::GlobalArgs;
use wasm_ccm::units::parse_duration;
use workload::{Model, Op};

/// How long a leader kill or a cloud partition waits for a live leader (the last one may have
/// been killed, its lease not yet expired): a fault with no leader to hit would not fire.
/// After a slowed apiserver no replica leads (no renewal could end before the lease might
/// pass): the last lease must expire before a candidate takes it.
const LEADER_WAIT: Duration = Duration::from_secs(8);
/// Steps a cloud partition that has not yet touched a connection (no leader talked to the
/// cloud) is extended by at most, one at a time.
const PARTITION_EXTENSION: u64 = 30;
/// Steps a heavy `kube_latency` is extended by at most, one at a time, until a holder renewed
/// the lease twice in a row through it (the evidence that a leader rides it out).
const LATENCY_EXTENSION: u64 = 30;
/// How long a kill point may wait for the leader's next load balancer write: under a
/// timed kube fault still on (latency, seconds per request) the new Service reaches the
/// leader's queue late.
const KILL_POINT_WAIT: Duration = Duration::from_secs(8);
/// History lines printed with a violation (the file has all of them).
const HISTORY_TAIL: usize = 80;

/// `--driver`: a cloud of the kit's list whose entry has a fault model for the soak
/// ([`kit::Cloud::soak`]), with the simulator it is soaked against.
fn soak_driver() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(kit::CLOUDS.iter().filter(|c| c.soak.is_some()).map(
        |c| {
            clap::builder::PossibleValue::new(c.name)
                .help(format!("The {} driver against {}", c.name, c.about))
        },
    ))
}

/// How the summary is printed.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SoakOutput {
    /// Lines for a person.
    Text,
    /// One JSON object on stdout.
    Json,
}

#[derive(Args, Debug)]
pub(crate) struct SoakArgs {
    /// Which driver to soak.
    #[arg(long, default_value = "cloudscale", value_parser = soak_driver())]
    driver: String,
    /// How long the workload and faults run (before quiescence).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    duration: Duration,
    /// The seed of the schedule; the same seed gives the same sequence of steps.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop after this many steps, even if --duration has not passed (a bounded run).
    #[arg(long)]
    steps: Option<u64>,
    /// Pause between steps.
    #[arg(long, default_value = "150ms", value_parser = parse_duration)]
    step_interval: Duration,
    /// Percentage of steps that inject a fault (the others are workload operations).
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u64).range(0..=100))]
    fault_percent: u64,
    /// Nodes the cluster starts with.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// How long two cloud load balancers for one Service are tolerated during the soak.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    duplicate_window: Duration,
    /// How long the cluster may take to converge once the faults and the workload stop (and
    /// to start).
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    converge_timeout: Duration,
    /// The quiet window after convergence: no mutating request to either simulator.
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    quiet: Duration,
    /// Summary format.
    #[arg(long, value_enum, default_value_t = SoakOutput::Text)]
    output: SoakOutput,
    /// Echo every history line to stderr as it happens.
    #[arg(long)]
    verbose: bool,
    /// Keep the work directory (history, process logs) even without a violation.
    #[arg(long)]
    keep: bool,
    /// Report the known dead ends as violations: a Node whose instance was deleted before it
    /// was initialised and is never deleted (else deleted by hand, as an operator would: drivers
    /// that look instances up by provider ID only, as upstream), a process that started without
    /// a cluster ID and whose driver fails for it (else restarted, as an operator would; finding
    /// 8 in BENCHMARKS.md), and a cloud object tagged for
    /// no Service where that is the driver's documented crash window (CloudStack: an IP
    /// associated right before a kill). Both are counted in the summary either way.
    #[arg(long)]
    strict: bool,
    /// The log filter of the `run` processes (their logs are in the work directory).
    #[arg(long, default_value = "warn,wasm_ccm=info,wasm_ccm_controllers=info")]
    ccm_log: String,
    /// The product binary to run as the two `wasm-ccm run` processes (default: `wasm-ccm`
    /// beside this executable, else on PATH).
    #[arg(long, env = "WASM_CCM_BIN", value_name = "PATH")]
    ccm_binary: Option<PathBuf>,
    /// Run the second process with its wall clock this far off (`1h` ahead, `-1h` behind) for
    /// the whole soak, through libfaketime (its monotonic clock stays true): the lease's
    /// timestamps are then another process's clock, as with two nodes whose clocks drift.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = parse_skew)]
    clock_skew: Option<i64>,
    /// libfaketime's library for --clock-skew (Debian's package `libfaketime`).
    #[arg(
        long,
        env = "WASM_CCM_LIBFAKETIME",
        value_name = "PATH",
        default_value = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
    )]
    libfaketime: PathBuf,
    /// How often the memory (VmRSS, VmHWM) of each `run` process is sampled; also right before
    /// a kill. Samples go to `rss.log` in the work directory, a summary per process slot to the
    /// summary.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    rss_interval: Duration,
}

/// `1h`, `-30m`, `+90s` as signed seconds.
fn parse_skew(text: &str) -> Result<i64, String> {
    let (sign, rest) = match text.trim() {
        t if t.starts_with('-') => (-1, &t[1..]),
        t => (1, t.trim_start_matches('+')),
    };
    let d = parse_duration(rest)?;
    i64::try_from(d.as_secs())
        .map(|s| sign * s)
        .map_err(|_| format!("`{text}` is too large a skew"))
}

/// The environment that runs a process with its wall clock `seconds` off: libfaketime
/// preloaded, the monotonic clock (timers, lease expiry) left alone.
fn skew_env(args: &SoakArgs, seconds: i64) -> anyhow::Result<Vec<(String, String)>> {
    anyhow::ensure!(
        args.libfaketime.is_file(),
        "--clock-skew needs libfaketime: {} does not exist; install Debian's libfaketime or pass --libfaketime",
        args.libfaketime.display()
    );
    Ok(vec![
        ("LD_PRELOAD".into(), args.libfaketime.display().to_string()),
        // Signed seconds: libfaketime's relative offset.
        ("FAKETIME".into(), format!("{seconds:+}")),
        ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
    ])
}

/// Appends a custom section to a component: other bytes, the same driver, so the processes
/// reload it as a new version.
fn with_custom_section(wasm: &[u8], name: &str, payload: &[u8]) -> Vec<u8> {
    fn leb128(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let mut body = Vec::new();
    leb128(name.len(), &mut body);
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(payload);
    let mut out = wasm.to_vec();
    out.push(0);
    leb128(body.len(), &mut out);
    out.extend_from_slice(&body);
    out
}

/// Replaces `path` atomically, as a ConfigMap volume update does.
fn replace_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension("wasm.new");
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))
}

fn lease_holder(kube: &KubeSim) -> Option<String> {
    let lease = kube.get("leases", Some(LEASE_NAMESPACE), LEASE_NAME)?;
    lease["spec"]["holderIdentity"]
        .as_str()
        .filter(|h| !h.is_empty())
        .map(str::to_string)
}

/// Mutating apiserver requests after `seq` that are not the lease's renewals:
/// (last seq, `METHOD path status` lines).
fn kube_writes_after(kube: &KubeSim, seq: u64) -> (u64, Vec<String>) {
    let records = kube.requests();
    let last = records.last().map_or(seq, |r| r.seq);
    let lines = records
        .iter()
        .filter(|r| r.seq > seq)
        .filter(|r| !matches!(r.method.as_str(), "GET" | "HEAD"))
        .filter(|r| {
            r.resource
                .as_deref()
                .is_none_or(|res| !res.starts_with("leases"))
        })
        .map(|r| format!("{} {} {}", r.method, r.path, r.status))
        .collect();
    (last, lines)
}

/// Counts by name, every known name present (zero included) so a summary shows what did not
/// happen too.
fn counts<'a>(names: impl Iterator<Item = &'a str>, seen: &BTreeMap<&str, u64>) -> Value {
    let mut map = serde_json::Map::new();
    for name in names {
        map.insert(name.into(), json!(seen.get(name).copied().unwrap_or(0)));
    }
    Value::Object(map)
}

/// What happened in a soak.
struct Tallies {
    ops: BTreeMap<&'static str, u64>,
    faults: BTreeMap<&'static str, u64>,
    leader_kills: u64,
    kill_points_reached: u64,
    kill_points_missed: u64,
    reloads: u64,
    orphans_removed: u64,
    unsupported: std::collections::BTreeSet<&'static str>,
    cloud: Tally,
    /// The last fault carried out: its step, kind and when.
    last_fault: Option<(u64, FaultKind, Instant)>,
}

impl Tallies {
    /// Counts a fault carried out at `step`.
    fn fault(&mut self, step: u64, kind: FaultKind) {
        *self.faults.entry(kind.name()).or_default() += 1;
        self.last_fault = Some((step, kind, Instant::now()));
    }

    fn add_cloud(&mut self, t: Tally) {
        self.cloud.reads += t.reads;
        self.cloud.writes += t.writes;
    }
}

/// The soak's running state.
struct Soak<'a> {
    args: &'a SoakArgs,
    kube: KubeSim,
    cloud: Box<dyn SoakCloud>,
    procs: Processes,
    history: History,
    rng: SplitMix64,
    model: Model,
    tallies: Tallies,
    driver: PathBuf,
    original: Vec<u8>,
    checker: Continuous,
    /// The link between the processes and the cloud.
    partition: partition::Partition,
    /// The timed apiserver latencies on now.
    latencies: faults::Latencies,
    /// During a cloud partition: connections it touched before it began, steps it was extended.
    partition_base: Option<(u64, u64)>,
    /// During a heavy `kube_latency`: the lease's renewal streaks of two before it began, steps
    /// it was extended.
    latency_base: Option<(u64, u64)>,
}

/// Ends a cloud partition: the apiserver's arrival number that closes it is read BEFORE the
/// link opens. The other order raced: held requests flow the moment the link opens, and when
/// the soak's thread was descheduled between the two calls (a loaded machine), a Node DELETE
/// that followed a cloud answer received after the partition got an arrival number inside it
/// and was reported as a deletion during the partition (cloudscale, seed 7, step 1817 of a
/// 30-minute run). A request arriving between the read and the opening is counted as after
/// the partition: it could only have been decided without the cloud, within microseconds.
fn heal_partition(partition: &partition::Partition, checker: &mut Continuous, kube: &KubeSim) {
    checker.partition_ended(kube.arrivals());
    partition.set(partition::Mode::Open);
}

/// Writes the apiserver's kept request log to `path`, one request a line in arrival order:
/// arrival, writer incarnation, method, path, status, injected delay (best effort: it only
/// helps the analysis).
fn write_kube_log(kube: &KubeSim, path: &Path) {
    let mut records = kube.requests();
    records.sort_by_key(|r| r.arrival);
    let mut text = String::from("arrival\tseq\twriter\tmethod\tpath\tstatus\tdelay_ms\tfaulted\n");
    for r in &records {
        text.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
            r.arrival,
            r.seq,
            invariants::writer(r.authorization.as_deref()).unwrap_or_else(|| "-".into()),
            r.method,
            r.path,
            r.status,
            r.delay_ms,
            r.faulted
        ));
    }
    let _ = std::fs::write(path, text);
}

/// Connections a partition refused, cut or held.
fn touched(stats: partition::PartitionStats) -> u64 {
    stats.refused_connections + stats.cut_connections + stats.held_connections
}

impl Soak<'_> {
    /// Restarts processes that exited, and (unless `--strict`) removes orphaned Nodes. Also
    /// samples the processes' memory when due: every loop of the soak (steps, waits,
    /// quiescence) comes through here.
    fn reap(&mut self, step: u64) -> anyhow::Result<()> {
        for line in self.procs.reap()? {
            self.history.push(step, line);
        }
        self.procs.sample_rss(self.args.rss_interval);
        if !self.args.strict {
            for line in self.procs.restart_without_cluster_id()? {
                self.history.push(step, line);
            }
            for line in self.model.remove_orphaned_nodes(&self.kube) {
                self.tallies.orphans_removed += 1;
                self.history.push(step, line);
            }
        }
        Ok(())
    }

    /// Waits (bounded) until a live process holds the lease; whether one does.
    async fn wait_for_live_leader(&mut self, step: u64) -> anyhow::Result<bool> {
        let started = Instant::now();
        loop {
            if let Some(holder) = lease_holder(&self.kube)
                && self.procs.is_live(&holder)
            {
                return Ok(true);
            }
            if started.elapsed() >= LEADER_WAIT {
                return Ok(false);
            }
            self.reap(step)?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits (bounded) until a live process holds the lease and has its Node and Service
    /// watches open; whether one does.
    async fn wait_for_watching_leader(&mut self, step: u64) -> anyhow::Result<bool> {
        if !self.wait_for_live_leader(step).await? {
            return Ok(false);
        }
        let started = Instant::now();
        while self.kube.open_watches() < 2 {
            if started.elapsed() >= LEADER_WAIT {
                return Ok(false);
            }
            self.reap(step)?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(true)
    }

    /// SIGKILLs the current leader; whether there was a live one to kill.
    fn kill_leader(&mut self, step: u64) -> anyhow::Result<bool> {
        let Some(holder) = lease_holder(&self.kube) else {
            self.history.push(step, "no lease holder to kill");
            return Ok(false);
        };
        match self.procs.kill_holder(&holder)? {
            Some(line) => {
                self.history.push(step, line);
                self.tallies.leader_kills += 1;
                Ok(true)
            }
            None => {
                self.history.push(
                    step,
                    format!("lease holder {holder} is not a live process (lease not yet expired)"),
                );
                Ok(false)
            }
        }
    }

    async fn fault(
        &mut self,
        step: u64,
        kind: FaultKind,
        timed: &mut Vec<(u64, FaultKind)>,
    ) -> anyhow::Result<()> {
        if kind == FaultKind::KubeRestart && !self.wait_for_watching_leader(step).await? {
            // Only the leader watches: a restart while none leads (or while a new leader is
            // still listing) breaks no watch, and no watch resumes from before it.
            self.history.push(
                step,
                format!("no live leader watching within {LEADER_WAIT:?}; restart anyway"),
            );
        }
        // Every other `kube_latency` is heavy, the first included: see `faults::inject_kube`.
        let heavy = self
            .tallies
            .faults
            .get(FaultKind::KubeLatency.name())
            .copied()
            .unwrap_or(0)
            % 2
            == 0;
        let text = if let Some(fault) = kind.cloud() {
            self.cloud.inject(fault, &mut self.rng)
        } else {
            faults::inject_kube(kind, &mut self.rng, &self.kube, &mut self.latencies, heavy)
        };
        if kind == FaultKind::KubeLatency && text.is_some() {
            self.latency_base = heavy.then(|| (self.checker.lease.streaks_of_two(), 0));
        }
        // Counted only when carried out: a cloud without busy refusals skips that kind, and a
        // leader kill counts only when a live leader was killed (after the cloud write, for a
        // kill point), so a summary never claims a fault that did not happen.
        if text.is_some() || kind == FaultKind::DriverReload {
            self.tallies.fault(step, kind);
        }
        if let Some(text) = text {
            self.history
                .push(step, format!("fault {}: {text}", kind.name()));
            if kind.is_timed() {
                let end = step + self.rng.between(5, 20);
                timed.push((end, kind));
            }
            return Ok(());
        }
        match kind {
            FaultKind::LeaderKill => {
                self.history.push(step, "fault leader_kill");
                self.wait_for_live_leader(step).await?;
                if self.kill_leader(step)? {
                    self.tallies.fault(step, kind);
                }
            }
            FaultKind::LeaderKillAfterCloudWrite => {
                // Only a leader writes to the cloud: armed while none leads (the last one
                // killed, or stepped down under a slowed apiserver), the point would wait out
                // a lease expiry and a new leader's start-up instead of one write.
                if !self.wait_for_live_leader(step).await? {
                    self.history.push(
                        step,
                        format!("no live leader within {LEADER_WAIT:?}; arming anyway"),
                    );
                }
                // A Service to provision makes a load balancer write likely soon.
                self.cloud.arm_kill_point();
                let (op, text) =
                    self.model
                        .apply(Op::ServiceCreate, &mut self.rng, &self.kube, &*self.cloud);
                *self.tallies.ops.entry(op.name()).or_default() += 1;
                self.history.push(
                    step,
                    format!(
                        "fault leader_kill_after_cloud_write: kill point armed (cloud fails after the next load balancer POST); {text}"
                    ),
                );
                let started = Instant::now();
                while !self.cloud.kill_point_reached() && started.elapsed() < KILL_POINT_WAIT {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                if self.cloud.kill_point_reached() {
                    self.tallies.kill_points_reached += 1;
                    self.history
                        .push(step, "kill point reached: the cloud write was carried out");
                    if self.kill_leader(step)? {
                        self.tallies.fault(step, kind);
                    }
                } else {
                    self.tallies.kill_points_missed += 1;
                    self.history.push(
                        step,
                        format!("kill point not reached within {KILL_POINT_WAIT:?}"),
                    );
                }
                // Also ends the cloud faults still queued: the kill point must not outlive
                // its process.
                self.cloud.clear_faults();
            }
            FaultKind::CloudPartition if self.partition_base.is_some() => {
                // Dealt again (a new round) while the last one is still on: one partition at a
                // time, so it is not carried out (nor counted).
                self.history
                    .push(step, "fault cloud_partition: one is still on; skipped");
            }
            FaultKind::CloudPartition => {
                // Only a leader talks to the cloud: a partition while none leads cuts nothing.
                if !self.wait_for_live_leader(step).await? {
                    self.history.push(
                        step,
                        format!("no live leader within {LEADER_WAIT:?}; partition anyway"),
                    );
                }
                let mode = if self.rng.chance(50) {
                    partition::Mode::Refuse
                } else {
                    partition::Mode::Hang
                };
                self.partition_base = Some((touched(self.partition.stats()), 0));
                // The link closes before the arrival number that opens the partition is read,
                // so a request arriving in between counts as before it (never a false alarm).
                self.partition.set(mode);
                self.checker.partition_started(self.kube.arrivals());
                self.tallies.fault(step, kind);
                // A node the lifecycle controller must ask the cloud about while it cannot.
                let (op, text) = self.model.apply(
                    Op::InstanceShutdown,
                    &mut self.rng,
                    &self.kube,
                    &*self.cloud,
                );
                *self.tallies.ops.entry(op.name()).or_default() += 1;
                let end = step + self.rng.between(8, 20);
                timed.push((end, kind));
                self.history.push(
                    step,
                    format!(
                        "fault cloud_partition: the processes' link to the cloud {} until step {end}; {}: {text}",
                        match mode {
                            partition::Mode::Refuse => "refuses connections and cuts open ones",
                            _ => "holds every connection (requests hang)",
                        },
                        op.name()
                    ),
                );
            }
            FaultKind::DriverReload => {
                self.tallies.reloads += 1;
                let bytes = with_custom_section(
                    &self.original,
                    "wasm-ccm-soak-version",
                    self.tallies.reloads.to_string().as_bytes(),
                );
                replace_file(&self.driver, &bytes)?;
                self.history.push(
                    step,
                    format!(
                        "fault driver_reload: driver file replaced (version {})",
                        self.tallies.reloads
                    ),
                );
            }
            other => {
                self.tallies.unsupported.insert(other.name());
                self.history.push(
                    step,
                    format!("fault {}: not supported by this cloud", other.name()),
                );
            }
        }
        Ok(())
    }

    /// Ends a timed fault; false when it goes on (a partition that touched no connection yet
    /// is extended a step, up to [`PARTITION_EXTENSION`]).
    fn end_timed(&mut self, step: u64, kind: FaultKind) -> bool {
        if kind == FaultKind::CloudPartition
            && let Some((base, extended)) = self.partition_base
            && touched(self.partition.stats()) == base
            && extended < PARTITION_EXTENSION
        {
            if extended == 0 {
                self.history.push(
                    step,
                    "cloud_partition has touched no connection yet (no leader talked to the cloud): extended step by step",
                );
            }
            self.partition_base = Some((base, extended + 1));
            return false;
        }
        if kind == FaultKind::KubeLatency
            && let Some((base, extended)) = self.latency_base
            && self.checker.lease.streaks_of_two() == base
            && extended < LATENCY_EXTENSION
        {
            if extended == 0 {
                self.history.push(
                    step,
                    "kube_latency (heavy) has seen no holder renew twice in a row through it yet: extended step by step",
                );
            }
            self.latency_base = Some((base, extended + 1));
            return false;
        }
        if kind == FaultKind::KubeLatency {
            self.latency_base = None;
        }
        if kind == FaultKind::CloudPartition {
            self.partition_base = None;
            heal_partition(&self.partition, &mut self.checker, &self.kube);
        } else if let Some(fault) = kind.cloud() {
            self.cloud.end_timed(fault);
        } else {
            faults::end_kube(kind, &self.kube, &mut self.latencies);
        }
        self.history
            .push(step, format!("fault {} ended", kind.name()));
        true
    }
}

/// Runs a soak.
/// Which timed fault still on would keep `kind` from taking effect, if one does. An apiserver
/// slowed to seconds per request (over half the soak's 2 s lease per lease PUT) lets no
/// renewal end before the lease might pass to the other replica, so the leader steps down
/// (`leader.rs`, "The fence") and none leads: a kill point would wait for a cloud write no one makes, an apiserver restart would
/// break no leader's watch. A cloud partition lets no write through to arm a kill point on.
fn blocked_by(kind: FaultKind, timed: &[(u64, FaultKind)]) -> Option<&'static str> {
    let on = |k: FaultKind| timed.iter().any(|(_, t)| *t == k);
    match kind {
        FaultKind::LeaderKillAfterCloudWrite | FaultKind::KubeRestart
            if on(FaultKind::KubeSlow) =>
        {
            Some("the slowed apiserver")
        }
        FaultKind::LeaderKillAfterCloudWrite if on(FaultKind::CloudPartition) => {
            Some("the cloud partition")
        }
        _ => None,
    }
}

pub(crate) async fn run(global: &GlobalArgs, args: SoakArgs) -> anyhow::Result<ExitCode> {
    let dir = std::env::temp_dir().join(format!(
        "wasm-ccm-soak-{}-{}",
        std::process::id(),
        args.seed
    ));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let localhost = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let kube = KubeSim::start_with(localhost, KubeSimOptions::default())
        .await
        .context("starting the Kubernetes API simulator")?;
    let cloud = kit::soak::start(&args.driver, localhost).await?;
    // The processes reach the cloud through the partition proxy: its address replaces the
    // simulator's wherever the driver's set-up names it.
    let cloud_url = cloud.url();
    let cloud_authority = cloud_url
        .split_once("://")
        .map_or(cloud_url.as_str(), |(_, rest)| rest)
        .split('/')
        .next()
        .unwrap_or_default()
        .to_string();
    let upstream: std::net::SocketAddr = cloud_authority
        .parse()
        .with_context(|| format!("the cloud simulator's address {cloud_authority}"))?;
    let partition = partition::Partition::start(upstream).await?;
    let proxied = partition.addr().to_string();
    let via_proxy = |s: &str| s.replace(&cloud_authority, &proxied);
    let mut setup = cloud.driver_setup();
    setup.egress = setup.egress.iter().map(|e| via_proxy(e)).collect();
    setup.config = setup.config.as_deref().map(via_proxy);
    setup.env = setup
        .env
        .iter()
        .map(|(k, v)| (k.clone(), via_proxy(v)))
        .collect();
    setup.extra_args = setup.extra_args.iter().map(|a| via_proxy(a)).collect();
    let original = crate::clouds::driver_bytes(setup.driver)?.to_vec();
    // The processes load a copy, which driver reloads replace.
    let driver = dir.join("driver.wasm");
    replace_file(&driver, &original)?;

    let mut history = History::new(&dir.join("history.log"), args.verbose);
    history.push(
        0,
        format!(
            "soak: driver {}, seed {}, duration {:?}, steps {:?}; work directory {}",
            setup.provider,
            args.seed,
            args.duration,
            args.steps,
            dir.display()
        ),
    );
    let mut model = Model::default();
    for line in model
        .seed_nodes(args.nodes, &kube, &*cloud)
        .map_err(|e| anyhow::anyhow!("seeding the cluster: {e}"))?
    {
        history.push(0, line);
    }

    let mut ccm_args: Vec<String> = match global.cache_root() {
        Some(cache) => vec!["--cache-dir".into(), cache.display().to_string()],
        None => vec!["--no-cache".into()],
    };
    ccm_args.extend(
        [
            "run",
            "--cloud-provider",
            setup.provider,
            "--driver",
            &driver.display().to_string(),
            "--driver-watch-interval",
            "500ms",
            "--master",
            &kube.url(),
            "--secure-port",
            "0",
            "--leader-elect=true",
            "--leader-elect-lease-duration",
            "2s",
            "--leader-elect-renew-deadline",
            "1500ms",
            "--leader-elect-retry-period",
            "500ms",
            "--node-monitor-period",
            "500ms",
            "--configure-cloud-routes=false",
            "--concurrent-service-syncs",
            "2",
            "--kube-api-qps",
            "200",
            "--kube-api-burst",
            "400",
        ]
        .map(str::to_string),
    );
    for egress in &setup.egress {
        ccm_args.extend(["--allow-egress".to_string(), egress.clone()]);
    }
    if let Some(config) = &setup.config {
        let path = dir.join("cloud.conf");
        std::fs::write(&path, config).with_context(|| format!("writing {}", path.display()))?;
        ccm_args.extend(["--cloud-config".to_string(), path.display().to_string()]);
    }
    ccm_args.extend(setup.extra_args.iter().cloned());
    let mut env = setup.env.clone();
    env.push(("WASM_CCM_LOG".into(), args.ccm_log.clone()));
    let exe = procs::product_binary(args.ccm_binary.as_deref())?;
    let kubeconfig_kube = kube.clone();
    let skewed = match args.clock_skew {
        Some(seconds) => vec![Vec::new(), skew_env(&args, seconds)?],
        None => Vec::new(),
    };
    let procs = Processes::start(
        exe,
        ccm_args,
        env,
        skewed,
        &dir,
        2,
        Box::new(move |token| kubeconfig_kube.kubeconfig_for_token(token)),
    )?;
    history.push(
        0,
        "started two `wasm-ccm run` processes with --leader-elect",
    );
    if let Some(seconds) = args.clock_skew {
        history.push(
            0,
            format!("process b runs with its wall clock {seconds:+} s off (libfaketime)"),
        );
    }

    let mut soak = Soak {
        args: &args,
        kube,
        cloud,
        procs,
        history,
        rng: SplitMix64::new(args.seed),
        model,
        tallies: Tallies {
            ops: BTreeMap::new(),
            faults: BTreeMap::new(),
            leader_kills: 0,
            kill_points_reached: 0,
            kill_points_missed: 0,
            reloads: 0,
            orphans_removed: 0,
            unsupported: std::collections::BTreeSet::new(),
            cloud: Tally::default(),
            last_fault: None,
        },
        driver,
        original,
        checker: Continuous::new(args.duplicate_window),
        partition,
        latencies: faults::Latencies::new(),
        partition_base: None,
        latency_base: None,
    };
    let result = soak_loop(&mut soak).await;
    soak.procs.stop();
    soak.history.flush();
    let (summary, violations) = result?;
    let failed = !violations.is_empty();
    let driver_arg = &args.driver;
    match args.output {
        SoakOutput::Json => println!("{}", serde_json::to_string_pretty(&summary)?),
        SoakOutput::Text => print_summary(&summary),
    }
    if failed {
        eprintln!(
            "wasm-ccm-dev soak: {} invariant violation(s) with seed {} (rerun: wasm-ccm-dev soak --driver {} --seed {})",
            violations.len(),
            args.seed,
            driver_arg,
            args.seed
        );
        for v in &violations {
            eprintln!("  step {}: {}: {}", v.step, v.invariant, v.detail);
        }
        eprintln!(
            "history (last {HISTORY_TAIL} lines; the soak stops at the first violation during the steps):"
        );
        for e in soak.history.tail(HISTORY_TAIL) {
            eprintln!("  {}", e.line());
        }
        eprintln!(
            "full history: {}; process logs: {:?}",
            soak.history.path().display(),
            soak.procs.logs()
        );
    } else if !args.keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    soak.kube.shutdown().await;
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The soak proper: start-up, the steps, quiescence. Returns the summary and the violations.
async fn soak_loop(soak: &mut Soak<'_>) -> anyhow::Result<(Value, Vec<Violation>)> {
    let args = soak.args;
    // Start-up: a leader and every node initialised, before any fault.
    let started = Instant::now();
    loop {
        soak.reap(0)?;
        if lease_holder(&soak.kube).is_some()
            && invariants::unconverged(&soak.model, &soak.kube, &*soak.cloud, !args.strict)
                .is_empty()
        {
            break;
        }
        // A process that cannot start (bad flags, a driver that fails to load) exits at once,
        // again and again: stop early and show why.
        let crashing = soak.procs.exits >= 6;
        if crashing || started.elapsed() > args.converge_timeout {
            for e in soak.history.tail(6) {
                eprintln!("{}", e.line());
            }
            let logs: Vec<String> = soak
                .procs
                .logs()
                .iter()
                .map(|p| {
                    let text = std::fs::read_to_string(p).unwrap_or_default();
                    let tail: Vec<&str> = text.lines().rev().take(20).collect();
                    format!(
                        "--- {}\n{}",
                        p.display(),
                        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                    )
                })
                .collect();
            anyhow::bail!(
                "the controllers did not start within {:?} (no leader, or nodes not initialised):\n{}",
                args.converge_timeout,
                logs.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let startup = started.elapsed();
    soak.history.push(
        0,
        format!(
            "leader elected and nodes initialised after {:.2}s; workload starts",
            startup.as_secs_f64()
        ),
    );
    let t = soak.cloud.drain_requests();
    soak.tallies.add_cloud(t);

    let mut violations = Vec::new();
    let mut ops = Deck::new(&Op::ALL);
    let mut fault_deck = Deck::new(&FaultKind::ALL);
    let mut timed: Vec<(u64, FaultKind)> = Vec::new();
    // Faults dealt while they could not take effect ([`blocked_by`]) wait for the step they can.
    let mut deferred: Vec<FaultKind> = Vec::new();
    let soak_started = Instant::now();
    let mut step = 0u64;
    while soak_started.elapsed() < args.duration && args.steps.is_none_or(|max| step < max) {
        step += 1;
        violations.extend(
            soak.checker
                .check(step, &soak.model, &soak.kube, &*soak.cloud),
        );
        if !violations.is_empty() {
            break;
        }
        let (due, later): (Vec<_>, Vec<_>) = timed.iter().partition(|(end, _)| *end <= step);
        timed = later;
        for (_, kind) in due {
            if !soak.end_timed(step, kind) {
                timed.push((step + 1, kind));
            }
        }
        if let Some(i) = deferred
            .iter()
            .position(|k| blocked_by(*k, &timed).is_none())
        {
            let kind = deferred.remove(i);
            soak.fault(step, kind, &mut timed).await?;
        } else if soak.rng.chance(args.fault_percent) {
            if let Some(kind) = fault_deck.draw(&mut soak.rng) {
                match blocked_by(kind, &timed) {
                    Some(why) => {
                        deferred.push(kind);
                        soak.history.push(
                            step,
                            format!("fault {}: deferred until {why} ends", kind.name()),
                        );
                    }
                    None => soak.fault(step, kind, &mut timed).await?,
                }
            }
        } else if let Some(op) = ops.draw(&mut soak.rng) {
            let (op, text) = soak
                .model
                .apply(op, &mut soak.rng, &soak.kube, &*soak.cloud);
            *soak.tallies.ops.entry(op.name()).or_default() += 1;
            soak.history.push(step, format!("{}: {text}", op.name()));
        }
        soak.reap(step)?;
        let t = soak.cloud.drain_requests();
        soak.tallies.add_cloud(t);
        tokio::time::sleep(args.step_interval).await;
    }
    let soak_time = soak_started.elapsed();

    // Quiescence: faults off, workload stopped; bounded polling until converged.
    let mut converged = false;
    let mut converge_time = Duration::ZERO;
    let mut unowned_left = 0usize;
    let mut settle_writes = 0usize;
    let mut quiet_reached = false;
    let mut quiescence_at: Option<Instant> = None;
    if violations.is_empty() {
        soak.kube.faults().clear();
        soak.latencies.clear();
        soak.cloud.clear_faults();
        heal_partition(&soak.partition, &mut soak.checker, &soak.kube);
        soak.partition_base = None;
        if let Some(text) = soak.model.ensure_ours(&soak.kube) {
            soak.history.push(
                step,
                format!("quiescence: no LoadBalancer Service of the CCM's class left, so the members invariant has one: {text}"),
            );
        }
        soak.history
            .push(step, "quiescence: every fault ended, workload stopped");
        let started = Instant::now();
        quiescence_at = Some(started);
        let mut pending;
        loop {
            soak.reap(step)?;
            let t = soak.cloud.drain_requests();
            soak.tallies.add_cloud(t);
            pending = invariants::unconverged(&soak.model, &soak.kube, &*soak.cloud, !args.strict);
            if pending.is_empty() {
                converged = true;
                break;
            }
            if started.elapsed() > args.converge_timeout {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        converge_time = started.elapsed();
        for lb in soak.cloud.lb_objects() {
            if lb.owner.is_none() {
                soak.history.push(
                    step,
                    format!(
                        "known window: cloud object {} {:?} is named or tagged for no Service (the driver's documented crash window; --strict makes it a violation)",
                        lb.id, lb.addresses
                    ),
                );
                unowned_left += 1;
            }
        }
        violations.extend(
            soak.checker
                .check(step, &soak.model, &soak.kube, &*soak.cloud),
        );
        if converged {
            soak.history.push(
                step,
                format!("converged after {:.2}s", converge_time.as_secs_f64()),
            );
        } else {
            for p in pending {
                violations.push(Violation {
                    step,
                    invariant: "converges once the faults stop",
                    detail: format!("after {:?}: {p}", args.converge_timeout),
                });
            }
        }
    }
    if converged {
        // The steady state writes nothing: wait (bounded) for a quiet window with no mutating
        // request to either simulator. Writes just after convergence (a last status, an event)
        // restart the window and are counted.
        let limit = (args.quiet * 5).max(Duration::from_secs(20));
        let started = Instant::now();
        let mut seq = soak.kube.requests().last().map_or(0, |r| r.seq);
        let t = soak.cloud.drain_requests();
        soak.tallies.add_cloud(t);
        let mut window_start = Instant::now();
        let mut last_writes: Vec<String> = Vec::new();
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            soak.reap(step)?;
            let (next, kube_writes) = kube_writes_after(&soak.kube, seq);
            seq = next;
            let t = soak.cloud.drain_requests();
            let mut writes = kube_writes;
            writes.extend(t.write_lines.iter().map(|l| format!("cloud: {l}")));
            soak.tallies.add_cloud(t);
            if !writes.is_empty() {
                settle_writes += writes.len();
                last_writes = writes;
                window_start = Instant::now();
            }
            if window_start.elapsed() >= args.quiet {
                quiet_reached = true;
                break;
            }
            if started.elapsed() > limit {
                break;
            }
        }
        if quiet_reached {
            soak.history.push(
                step,
                format!(
                    "steady state: {:?} without a mutating request ({settle_writes} writes before it)",
                    args.quiet
                ),
            );
        } else {
            violations.push(Violation {
                step,
                invariant: "the steady state after faults stop has zero mutating requests",
                detail: format!(
                    "no {:?} without writes within {limit:?}; the last: {last_writes:?}",
                    args.quiet
                ),
            });
        }
    }
    if !violations.is_empty() {
        // The apiserver's request log (its last LOG_CAPACITY requests) beside the history:
        // which incarnation wrote what, in arrival order, lease renewals included, is what
        // explains a violation of the one-writer or partition invariants.
        write_kube_log(
            &soak.kube,
            &soak.history.path().with_file_name("kube-requests.log"),
        );
        // What the cloud held when the violation was seen, for the analysis.
        for lb in soak.cloud.lb_objects() {
            soak.history.push(
                step,
                format!(
                    "cloud object {} for {} at {:?}",
                    lb.id,
                    lb.owner.as_deref().unwrap_or("no Service"),
                    lb.addresses
                ),
            );
        }
    }
    for v in &violations {
        soak.history
            .push(v.step, format!("VIOLATION {}: {}", v.invariant, v.detail));
    }

    let t = &soak.tallies;
    let operations: u64 = t.ops.values().sum();
    let faults_total: u64 = t.faults.values().sum();
    let cloud_total = t.cloud.reads + t.cloud.writes;
    let kube_counts = soak.kube.request_counts();
    let restarts = soak.kube.restart_stats();
    let (writers, handovers) = soak.checker.writers();
    let last_fault = t.last_fault.map(|(at_step, kind, at)| {
        json!({
            "step": at_step,
            "kind": kind.name(),
            // From the fault's injection to the moment every fault ended (quiescence); its
            // effects (a timed fault) may have lasted until then.
            "seconds_before_quiescence": quiescence_at
                .map(|q| q.saturating_duration_since(at).as_secs_f64()),
        })
    });
    let rss = soak.procs.rss_summary(args.rss_interval);
    let member_sets = soak.cloud.member_sets().map(|sets| {
        let owned: std::collections::BTreeSet<String> = soak
            .model
            .services
            .iter()
            .filter(|(_, s)| !s.deleted && s.shape == workload::Shape::Ours)
            .filter_map(|(name, _)| soak.kube.get("services", Some(workload::NAMESPACE), name))
            .map(|svc| {
                let name = svc["metadata"]["name"].as_str().unwrap_or_default();
                let uid = svc["metadata"]["uid"].as_str().unwrap_or_default();
                soak.cloud.owner(workload::NAMESPACE, name, uid)
            })
            .collect();
        sets.iter()
            .filter(|s| s.owner.as_ref().is_some_and(|o| owned.contains(o)))
            .map(|s| s.members.len())
            .collect::<Vec<_>>()
    });
    let summary = json!({
        "driver": soak.cloud.driver_setup().provider,
        "seed": args.seed,
        "steps": step,
        "startup_seconds": startup.as_secs_f64(),
        "soak_seconds": soak_time.as_secs_f64(),
        "operations_total": operations,
        "operations": counts(Op::ALL.iter().map(|o| o.name()), &t.ops),
        "faults_total": faults_total,
        "faults": counts(
            FaultKind::ALL
                .iter()
                .map(|f| f.name())
                .filter(|name| !t.unsupported.contains(name)),
            &t.faults
        ),
        "faults_unsupported": t.unsupported,
        "leader_kills": t.leader_kills,
        "clock_skew_seconds_of_b": args.clock_skew,
        "kill_points": {"reached": t.kill_points_reached, "missed": t.kill_points_missed},
        "process_exits": soak.procs.exits,
        "processes_restarted_without_cluster_id": soak.procs.no_cluster_id,
        "driver_reloads": t.reloads,
        "orphaned_nodes_deleted_by_operator": t.orphans_removed,
        "unowned_cloud_objects_left": unowned_left,
        "cloud_requests": {"reads": t.cloud.reads, "writes": t.cloud.writes},
        "cloud_requests_per_operation": if operations == 0 { 0.0 } else { cloud_total as f64 / operations as f64 },
        "kube_requests": kube_counts,
        "apiserver_restart": {
            "restarts": restarts.restarts,
            "refused_connections": restarts.refused_connections,
            "broken_connections": restarts.broken_connections,
            "expired_watches": restarts.expired_watches,
        },
        "apiserver_slowed_requests": soak.checker.slowed_requests,
        "apiserver_slowest_ms": soak.checker.slowest_ms,
        // Renewals by the holder through lease requests delayed `latent_ms` or more, and the
        // longest run of them by one holder: a leader rode the latency out.
        "lease_renewals_under_latency": soak.checker.lease.renewals_summary(),
        // Per process slot, how far ahead of the soak's clock the renewTime it wrote was:
        // --clock-skew reached the process (libfaketime), not only its command line.
        "lease_renew_time_ahead": soak.checker.lease.ahead_summary(),
        "cloud_partition": {
            "stats": soak.partition.stats(),
            "node_deletes_during": soak.checker.partition_node_deletes,
        },
        "leader_writes": {"writers": writers, "handovers": handovers},
        "load_balancer_members_at_quiescence": member_sets,
        "converged": converged,
        // Measured from quiescence, when the last fault still on was ended.
        "converge_seconds": converge_time.as_secs_f64(),
        "last_fault": last_fault,
        "rss": rss,
        "settle_writes": settle_writes,
        "quiet_window_seconds": if quiet_reached { args.quiet.as_secs_f64() } else { 0.0 },
        "violations": violations,
        "history": soak.history.path().display().to_string(),
    });
    Ok((summary, violations))
}

fn print_summary(s: &Value) {
    println!(
        "soak: driver {} seed {}: {} steps in {:.1}s (start-up {:.1}s)",
        s["driver"].as_str().unwrap_or("?"),
        s["seed"],
        s["steps"],
        s["soak_seconds"].as_f64().unwrap_or(0.0),
        s["startup_seconds"].as_f64().unwrap_or(0.0)
    );
    println!(
        "  operations: {} {}",
        s["operations_total"], s["operations"]
    );
    println!("  faults: {} {}", s["faults_total"], s["faults"]);
    println!(
        "  leader kills: {} (kill points reached {}, missed {}); process exits {}; driver reloads {}",
        s["leader_kills"],
        s["kill_points"]["reached"],
        s["kill_points"]["missed"],
        s["process_exits"],
        s["driver_reloads"]
    );
    println!(
        "  apiserver: {} requests slowed to a second or more; lease renewals through latency {}; renewTime ahead of this clock by slot {}",
        s["apiserver_slowed_requests"],
        s["lease_renewals_under_latency"],
        s["lease_renew_time_ahead"]
    );
    println!(
        "  known issue: orphaned uninitialised Nodes deleted by hand: {}",
        s["orphaned_nodes_deleted_by_operator"]
    );
    println!(
        "  processes restarted because they started without a cluster ID (finding 8, fixed: stays 0): {}",
        s["processes_restarted_without_cluster_id"]
    );
    println!(
        "  cloud requests: {} reads, {} writes; {:.1} per operation",
        s["cloud_requests"]["reads"],
        s["cloud_requests"]["writes"],
        s["cloud_requests_per_operation"].as_f64().unwrap_or(0.0)
    );
    println!(
        "  quiescence: converged {} in {:.1}s; {} writes before a {}s quiet window",
        s["converged"],
        s["converge_seconds"].as_f64().unwrap_or(0.0),
        s["settle_writes"],
        s["quiet_window_seconds"]
    );
    if s["last_fault"].is_object() {
        println!(
            "  last fault: {} at step {}, {:.1}s before quiescence",
            s["last_fault"]["kind"].as_str().unwrap_or("?"),
            s["last_fault"]["step"],
            s["last_fault"]["seconds_before_quiescence"]
                .as_f64()
                .unwrap_or(0.0)
        );
    }
    if let Some(slots) = s["rss"]["slots"].as_object() {
        for (slot, r) in slots {
            let longest = &r["longest_lived"];
            let window = &longest["last_window"];
            println!(
                "  memory of process {slot}: {} incarnations, peak {} MiB ({}); by quarter {}; longest-lived {} ({:.0}s): {}{}",
                r["incarnations"],
                r["peak_mib"],
                r["peak_process"].as_str().unwrap_or("-"),
                r["rss_peak_by_quarter_mib"],
                longest["process"].as_str().unwrap_or("-"),
                longest["lived_seconds"].as_f64().unwrap_or(0.0),
                longest["verdict"].as_str().unwrap_or("-"),
                if window.is_object() {
                    format!(
                        " over its last {}s: first {} last {} max {} MiB",
                        longest["flat_window_seconds"],
                        window["first_mib"],
                        window["last_mib"],
                        window["max_mib"]
                    )
                } else {
                    String::new()
                }
            );
        }
    }
    let violations = s["violations"].as_array().map_or(0, Vec::len);
    println!("  violations: {violations}");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--driver`'s values are the kit's clouds with a fault model, so a cloud joins the soak
    /// from its kit entry alone.
    #[test]
    fn the_driver_values_are_the_kits_soak_clouds() {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            soak: SoakArgs,
        }
        let parse = |driver: &str| Cli::try_parse_from(["soak", "--driver", driver]);
        let names: Vec<&str> = kit::soak::names().collect();
        assert!(names.contains(&"cloudstack"), "{names:?}");
        for name in &names {
            let cli = parse(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(cli.soak.driver, *name);
        }
        // Listed in the kit, but without a fault model: refused by clap, the values named.
        let err = parse("static").err().expect("static has no fault model");
        assert_eq!(err.kind(), clap::error::ErrorKind::InvalidValue, "{err}");
        assert!(err.to_string().contains(&names.join(", ")), "{err}");
        let default = Cli::try_parse_from(["soak"]).expect("no flags");
        assert_eq!(default.soak.driver, "cloudscale");
    }

    #[test]
    fn a_custom_section_is_appended_with_leb128_sizes() {
        let out = with_custom_section(b"\0asm", "v", b"1");
        assert_eq!(out, b"\0asm\x00\x03\x01v1");
        let long = with_custom_section(b"", "n", &[7u8; 200]);
        // 1 (name length) + 1 (name) + 200 = 202 = 0xCA 0x01 in LEB128.
        assert_eq!(&long[..3], &[0x00, 0xCA, 0x01]);
        assert_eq!(long.len(), 3 + 202);
    }
}
