//! The memory of the `run` processes over a soak: every `--rss-interval`, and right before a
//! process is killed, the resident set (`VmRSS`) and its peak so far (`VmHWM`) of each live
//! process are read from `/proc/<pid>/status`. Leader kills restart a slot as a new process, so
//! samples are kept per slot and incarnation (`a#3`); each is also appended to `rss.log` in the
//! work directory for a later look at the whole series.
//!
//! The summary gives per slot the peak over all its incarnations, the largest sample in each
//! quarter of the run (growth across incarnations shows there), and for its longest-lived
//! incarnation whether the resident set stayed flat over the last [`FLAT_WINDOW`] of its life
//! (growth inside one process shows there). A process must live that long to be judged: one
//! that did not is reported as too short rather than as flat.

use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How much of the end of a process's life the flatness judgement looks at.
pub(super) const FLAT_WINDOW: Duration = Duration::from_secs(20 * 60);
/// How far (percent of the window's first sample) the resident set may move in that window and
/// still be flat.
pub(super) const FLAT_TOLERANCE_PERCENT: u64 = 10;
/// How long after its start a process is not sampled: until its `exec` is through, its status
/// shows a few KiB (seen: 4 KiB at spawn), which is not the program's resident set and would
/// make a spawn-time sample the baseline of a window or the only sample of a quarter.
const STARTUP_GRACE: Duration = Duration::from_secs(1);

/// One reading of a process's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sample {
    /// Milliseconds since the soak started.
    pub at_ms: u64,
    /// `VmRSS`, KiB.
    pub rss_kib: u64,
    /// `VmHWM` (the peak resident set so far), KiB.
    pub hwm_kib: u64,
}

/// One process of a slot.
#[derive(Debug, Clone)]
struct Incarnation {
    slot: char,
    number: u32,
    pid: u32,
    /// Milliseconds since the soak started.
    started_ms: u64,
    /// When it was killed or seen exited; None while it runs.
    ended_ms: Option<u64>,
    samples: Vec<Sample>,
}

/// `VmRSS` and `VmHWM` (KiB) from the text of `/proc/<pid>/status`; None when either is missing
/// (a zombie has neither) or unreadable.
pub(super) fn parse_status(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.trim().strip_suffix("kB"))
            .and_then(|n| n.trim().parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// The flatness judgement of one process's resident set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Flatness {
    /// It lived less than the window: nothing to judge.
    TooShort,
    /// It lived long enough but no sample fell in the window (a sampling gap).
    NoSamples,
    /// The samples of the last window of its life: the first, the last, the smallest and the
    /// largest (KiB), and whether every one stayed within the tolerance of the first.
    Window {
        first: u64,
        last: u64,
        min: u64,
        max: u64,
        flat: bool,
    },
}

/// Judges the resident set of a process that lived from `started_ms` to `ended_ms` by its
/// `samples` (in time order): over the last `window_ms` of its life, every sample must stay
/// within `tolerance_percent` of the window's first sample, up or down. The first sample is the
/// baseline rather than the minimum so that a start-up peak settling down is not mistaken for
/// growth, and a steady climb from the start of the window is.
pub(super) fn flatness(
    samples: &[Sample],
    started_ms: u64,
    ended_ms: u64,
    window_ms: u64,
    tolerance_percent: u64,
) -> Flatness {
    if ended_ms.saturating_sub(started_ms) < window_ms {
        return Flatness::TooShort;
    }
    let from = ended_ms - window_ms;
    let inside: Vec<u64> = samples
        .iter()
        .filter(|s| s.at_ms >= from && s.at_ms <= ended_ms)
        .map(|s| s.rss_kib)
        .collect();
    let (Some(&first), Some(&last)) = (inside.first(), inside.last()) else {
        return Flatness::NoSamples;
    };
    let min = inside.iter().copied().min().unwrap_or(first);
    let max = inside.iter().copied().max().unwrap_or(first);
    // Integer percentages: max ≤ first·(1 + t) and min ≥ first·(1 − t).
    let flat = max * 100 <= first * (100 + tolerance_percent)
        && min * 100 >= first * 100u64.saturating_sub(tolerance_percent);
    Flatness::Window {
        first,
        last,
        min,
        max,
        flat,
    }
}

/// The largest `rss_kib` sampled in each of `parts` equal spans of `[0, end_ms]` (None for a
/// span without a sample).
pub(super) fn peaks_by_part(samples: &[Sample], end_ms: u64, parts: u64) -> Vec<Option<u64>> {
    let mut out = vec![None; usize::try_from(parts).unwrap_or(0)];
    if parts == 0 {
        return out;
    }
    let span = end_ms.max(1).div_ceil(parts);
    for s in samples {
        let i = usize::try_from((s.at_ms / span).min(parts - 1)).unwrap_or(0);
        if let Some(slot) = out.get_mut(i) {
            *slot = Some(slot.map_or(s.rss_kib, |p: u64| p.max(s.rss_kib)));
        }
    }
    out
}

fn mib(kib: u64) -> f64 {
    (kib as f64 / 1024.0 * 10.0).round() / 10.0
}

/// The samples of every incarnation of the soak's processes.
pub(super) struct Recorder {
    started: Instant,
    last: Option<Instant>,
    incarnations: Vec<Incarnation>,
    file: Option<BufWriter<File>>,
    /// [`STARTUP_GRACE`] (zero in tests).
    grace_ms: u64,
}

impl Recorder {
    /// A recorder appending every sample to `path` (best effort, as the history: a full disk
    /// does not stop a soak).
    pub(super) fn new(path: &Path) -> Self {
        let mut file = File::create(path).ok().map(BufWriter::new);
        if let Some(f) = &mut file {
            let _ = writeln!(f, "seconds\tprocess\tpid\tvm_rss_kib\tvm_hwm_kib");
        }
        Recorder {
            started: Instant::now(),
            last: None,
            incarnations: Vec::new(),
            file,
            grace_ms: u64::try_from(STARTUP_GRACE.as_millis()).unwrap_or(0),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Process `slot#number` started as `pid`.
    pub(super) fn born(&mut self, slot: char, number: u32, pid: u32) {
        let started_ms = self.now_ms();
        self.incarnations.push(Incarnation {
            slot,
            number,
            pid,
            started_ms,
            ended_ms: None,
            samples: Vec::new(),
        });
    }

    fn find(&mut self, slot: char, number: u32) -> Option<&mut Incarnation> {
        self.incarnations
            .iter_mut()
            .rev()
            .find(|i| i.slot == slot && i.number == number)
    }

    /// Process `slot#number` was killed or seen exited.
    pub(super) fn died(&mut self, slot: char, number: u32) {
        let now = self.now_ms();
        if let Some(inc) = self.find(slot, number)
            && inc.ended_ms.is_none()
        {
            inc.ended_ms = Some(now);
        }
    }

    /// Reads the memory of `slot#number` now (nothing when it has already gone or is still
    /// starting).
    pub(super) fn sample(&mut self, slot: char, number: u32) {
        let at_ms = self.now_ms();
        let grace_ms = self.grace_ms;
        let Some(inc) = self.find(slot, number) else {
            return;
        };
        if at_ms.saturating_sub(inc.started_ms) < grace_ms {
            return;
        }
        let pid = inc.pid;
        let Some((rss_kib, hwm_kib)) = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .as_deref()
            .and_then(parse_status)
        else {
            return;
        };
        inc.samples.push(Sample {
            at_ms,
            rss_kib,
            hwm_kib,
        });
        if let Some(f) = &mut self.file {
            let _ = writeln!(
                f,
                "{:.1}\t{slot}#{number}\t{pid}\t{rss_kib}\t{hwm_kib}",
                at_ms as f64 / 1000.0
            );
        }
    }

    /// Whether the periodic sample is due, `interval` after the last (and, if so, counts it as
    /// taken).
    pub(super) fn due(&mut self, interval: Duration) -> bool {
        if self.last.is_some_and(|l| l.elapsed() < interval) {
            return false;
        }
        self.last = Some(Instant::now());
        true
    }

    /// Writes what is buffered to the file.
    pub(super) fn flush(&mut self) {
        if let Some(f) = &mut self.file {
            let _ = f.flush();
        }
    }

    /// The summary per slot; processes still running count as ending now. `interval` is the
    /// periodic sampling's, as reported.
    pub(super) fn summary(&self, interval: Duration) -> Value {
        let now = self.now_ms();
        let mut slots: Vec<char> = self.incarnations.iter().map(|i| i.slot).collect();
        slots.sort_unstable();
        slots.dedup();
        let mut out = serde_json::Map::new();
        for slot in slots {
            let incs: Vec<&Incarnation> = self
                .incarnations
                .iter()
                .filter(|i| i.slot == slot)
                .collect();
            let all: Vec<Sample> = incs.iter().flat_map(|i| i.samples.clone()).collect();
            let peak = incs
                .iter()
                .filter_map(|i| i.samples.iter().map(|s| s.hwm_kib).max().map(|p| (p, i)))
                .max_by_key(|(p, _)| *p);
            let lived = |i: &Incarnation| i.ended_ms.unwrap_or(now).saturating_sub(i.started_ms);
            let longest = incs.iter().max_by_key(|i| lived(i));
            let longest = longest.map(|i| {
                let end = i.ended_ms.unwrap_or(now);
                let window = u64::try_from(FLAT_WINDOW.as_millis()).unwrap_or(u64::MAX);
                let judged = flatness(
                    &i.samples,
                    i.started_ms,
                    end,
                    window,
                    FLAT_TOLERANCE_PERCENT,
                );
                let (verdict, window) = match judged {
                    Flatness::TooShort => ("too short", Value::Null),
                    Flatness::NoSamples => ("no samples", Value::Null),
                    Flatness::Window {
                        first,
                        last,
                        min,
                        max,
                        flat,
                    } => (
                        if flat { "flat" } else { "not flat" },
                        json!({
                            "first_mib": mib(first),
                            "last_mib": mib(last),
                            "min_mib": mib(min),
                            "max_mib": mib(max),
                        }),
                    ),
                };
                json!({
                    "process": format!("{}#{}", i.slot, i.number),
                    "lived_seconds": lived(i) as f64 / 1000.0,
                    "samples": i.samples.len(),
                    "peak_mib": i.samples.iter().map(|s| s.hwm_kib).max().map(mib),
                    "flat_window_seconds": FLAT_WINDOW.as_secs(),
                    "flat_tolerance_percent": FLAT_TOLERANCE_PERCENT,
                    "last_window": window,
                    "verdict": verdict,
                })
            });
            out.insert(
                slot.to_string(),
                json!({
                    "incarnations": incs.len(),
                    "samples": all.len(),
                    "peak_mib": peak.map(|(p, _)| mib(p)),
                    "peak_process": peak.map(|(_, i)| format!("{}#{}", i.slot, i.number)),
                    "rss_peak_by_quarter_mib": peaks_by_part(&all, now, 4)
                        .into_iter()
                        .map(|p| p.map(mib))
                        .collect::<Vec<_>>(),
                    "longest_lived": longest,
                }),
            );
        }
        json!({
            "interval_seconds": interval.as_secs_f64(),
            "slots": out,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(points: &[(u64, u64)]) -> Vec<Sample> {
        points
            .iter()
            .map(|&(at_ms, rss_kib)| Sample {
                at_ms,
                rss_kib,
                hwm_kib: rss_kib,
            })
            .collect()
    }

    #[test]
    fn status_fields_are_read_in_kib_and_a_zombie_has_none() {
        let text = "Name:\twasm-ccm\nVmPeak:\t  900000 kB\nVmHWM:\t   61234 kB\nVmRSS:\t   60000 kB\nThreads:\t9\n";
        assert_eq!(parse_status(text), Some((60000, 61234)));
        // A zombie's status has no memory lines.
        assert_eq!(parse_status("Name:\twasm-ccm\nState:\tZ (zombie)\n"), None);
        assert_eq!(parse_status("VmRSS:\tlots kB\nVmHWM:\t1 kB\n"), None);
    }

    #[test]
    fn a_process_younger_than_the_window_is_too_short() {
        let s = samples(&[(0, 100), (500, 500)]);
        assert_eq!(flatness(&s, 0, 999, 1000, 10), Flatness::TooShort);
    }

    #[test]
    fn only_the_last_window_of_a_life_is_judged_against_its_first_sample() {
        // A start-up climb before the window does not count; inside it 100 → 110 is within 10 %.
        let s = samples(&[(0, 40), (500, 100), (1000, 105), (1500, 110)]);
        assert_eq!(
            flatness(&s, 0, 1500, 1000, 10),
            Flatness::Window {
                first: 100,
                last: 110,
                min: 100,
                max: 110,
                flat: true
            }
        );
        // 111 is more than 10 % above the window's first sample: growth.
        let s = samples(&[(0, 40), (500, 100), (1000, 111), (1500, 100)]);
        assert!(matches!(
            flatness(&s, 0, 1500, 1000, 10),
            Flatness::Window {
                flat: false,
                max: 111,
                ..
            }
        ));
        // A drop of more than 10 % is not flat either.
        let s = samples(&[(500, 100), (1500, 89)]);
        assert!(matches!(
            flatness(&s, 0, 1500, 1000, 10),
            Flatness::Window {
                flat: false,
                min: 89,
                ..
            }
        ));
    }

    #[test]
    fn a_window_without_samples_is_said_so() {
        let s = samples(&[(0, 100)]);
        assert_eq!(flatness(&s, 0, 5000, 1000, 10), Flatness::NoSamples);
    }

    #[test]
    fn peaks_by_part_take_the_largest_sample_of_each_span() {
        let s = samples(&[(0, 5), (10, 7), (30, 9), (99, 3), (100, 4)]);
        // Spans of 25 ms: [0, 25), [25, 50), [50, 75), [75, 100]; a sample at the end counts
        // in the last span.
        assert_eq!(
            peaks_by_part(&s, 100, 4),
            vec![Some(7), Some(9), None, Some(4)]
        );
        assert!(peaks_by_part(&s, 100, 0).is_empty());
    }

    #[test]
    fn incarnations_are_kept_apart_and_summarised_per_slot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut r = Recorder::new(&dir.path().join("rss.log"));
        // This test process stands in for the soak's children: its own status is readable.
        let me = std::process::id();
        // Right after its start a process is not sampled (it may not have exec'ed yet).
        r.born('c', 1, me);
        r.sample('c', 1);
        r.grace_ms = 0;
        r.born('a', 1, me);
        r.sample('a', 1);
        r.died('a', 1);
        r.born('a', 2, me);
        r.sample('a', 2);
        r.born('b', 1, 0);
        // pid 0 has no status: no sample, and no panic.
        r.sample('b', 1);
        assert!(r.due(Duration::from_secs(10)));
        assert!(!r.due(Duration::from_secs(10)));
        let s = r.summary(Duration::from_secs(10));
        assert_eq!(s["slots"]["a"]["incarnations"], 2);
        assert_eq!(s["slots"]["a"]["samples"], 2);
        assert!(
            s["slots"]["a"]["peak_mib"]
                .as_f64()
                .is_some_and(|p| p > 0.0)
        );
        assert_eq!(s["slots"]["a"]["longest_lived"]["verdict"], "too short");
        assert_eq!(s["slots"]["b"]["samples"], 0);
        assert_eq!(s["slots"]["c"]["samples"], 0);
        assert_eq!(s["slots"]["b"]["peak_mib"], Value::Null);
    }
}
